"""Responses followed as they pass: where a streamed frame's top-level tag section starts, and its padding."""
