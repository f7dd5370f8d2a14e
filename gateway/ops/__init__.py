"""gateway/ops."""
