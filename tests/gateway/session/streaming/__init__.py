"""Tests of streamed responses whose tag section is held back and rewritten (gateway/session/stream_stage.py)."""
