"""gateway/admin."""
