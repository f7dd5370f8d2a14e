"""gateway/stores."""
