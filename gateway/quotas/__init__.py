"""Kafka's client quotas: the model and its validation, the book enforcement reads, the file store."""
