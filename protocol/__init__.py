"""Sans-IO Kafka wire codec: framing, headers and declarative message schemas.

Nothing in this package touches sockets or asyncio; it turns bytes into values and back.
"""
