"""Tests of protocol/entities: what a message names, read from a body or walked off its bytes."""
