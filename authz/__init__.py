"""authz package of ksgate."""
