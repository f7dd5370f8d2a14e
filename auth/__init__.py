"""auth package of ksgate."""
