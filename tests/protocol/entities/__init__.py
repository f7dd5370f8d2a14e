"""Tests of protocol/entities: what a message names, read from a decoded body or walked off its bytes."""
