"""gateway/session."""
