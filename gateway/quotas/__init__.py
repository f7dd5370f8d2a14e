"""Client quotas (Kafka's per-user and per-client-id quotas), enforced by the gateway."""
