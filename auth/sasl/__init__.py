"""auth/sasl."""
