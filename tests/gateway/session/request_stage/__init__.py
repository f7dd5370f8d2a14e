"""Tests of gateway/session/request_stage.py: how a request frame reaches decide(), and how decide() reads it."""
