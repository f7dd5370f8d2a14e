"""The network edge: what arrives before the Kafka protocol (PROXY headers, TLS server names)."""
