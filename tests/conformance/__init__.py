"""Differential conformance: the same requests to Apache Kafka and to ksgate, answers compared field by field."""
