"""gateway/commands."""
