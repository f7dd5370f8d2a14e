"""pipeline package of ksgate."""
