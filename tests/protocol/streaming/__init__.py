"""Tests of protocol/streaming: a streamed response walked to its tag section, and that section padded."""
