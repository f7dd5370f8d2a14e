"""Kafka's client quotas: the model and its validation, the book, the file store, and the enforcement."""
