"""gateway/transport."""
