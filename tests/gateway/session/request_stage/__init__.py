"""Tests of gateway/session/request_stage.py: how decide() reads a request."""
