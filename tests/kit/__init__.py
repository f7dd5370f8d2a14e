"""Tests of the test kit itself: the Apache Kafka kit's server.properties and the /etc/hosts editing."""
