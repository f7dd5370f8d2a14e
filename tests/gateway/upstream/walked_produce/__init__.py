"""A Produce relayed by the walk, not decoded, against Apache Kafka 4.4: with no authorizer and with one."""
