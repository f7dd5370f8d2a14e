"""gateway/upstream."""
