"""gateway package of ksgate."""
