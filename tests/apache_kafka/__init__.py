"""Apache Kafka itself as a test upstream: a single-node KRaft broker on loopback (``KafkaBroker``).

The jars come from scripts/kafka/fetch.sh (REFERENCE_KAFKA_LIB); tests reach a shared broker through the
session-scoped ``kafka`` fixture (tests/conftest.py) and are marked ``kafka``.
"""

from tests.apache_kafka.broker import KafkaBroker, KafkaStartError, kafka_lib

__all__ = ["KafkaBroker", "KafkaStartError", "kafka_lib"]
