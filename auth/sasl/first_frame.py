"""Recognises first frames that are not Kafka requests, to log the likely misconfiguration."""

from __future__ import annotations


def diagnose_non_kafka(first_bytes: bytes | memoryview) -> str:
    """A human hint for an operator when a connection's first frame is not a Kafka request.

    ``first_bytes`` starts at the 4-byte size prefix, as read from the socket.
    """
    head = bytes(first_bytes[:8])
    if head[:1] == b"\x16" and head[1:2] == b"\x03":
        return "a TLS ClientHello on a non-TLS listener: the client uses SSL/SASL_SSL, the listener does not"
    if head[:4] in (b"GET ", b"POST", b"HEAD", b"PUT ", b"OPTI", b"PRI "):
        return "an HTTP request: this is a Kafka port, not an HTTP endpoint (health checks probe the wrong port?)"
    if len(head) > 4 and head[4:5] == b"\x60":
        return "a raw GSSAPI token without SaslHandshake: the client predates KIP-43 and is not supported"
    if head[:2] == b"\x00\x00" and len(head) >= 4:
        return "a frame that does not parse as a Kafka request: wrong security.protocol or not a Kafka client?"
    return "bytes that are not a Kafka frame: wrong security.protocol (e.g. SSL client on a PLAINTEXT listener)?"
