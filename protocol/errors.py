"""The one exception the codec raises for bytes it cannot accept."""


class DecodeError(ValueError):
    """Malformed or truncated Kafka wire data.

    Every failure to parse input bytes surfaces as this type, so callers can refuse the
    frame (fail closed) with one except clause.
    """


class EncodeError(ValueError):
    """A value cannot be written in the requested message version."""
