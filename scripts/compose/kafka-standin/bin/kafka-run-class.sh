#!/usr/bin/env bash
# Runs a Kafka class the way the distribution's bin scripts do: every jar of /opt/kafka/libs on the class path, with
# KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS and KAFKA_OPTS (the JAAS file) honoured.  Usage: kafka-run-class.sh CLASS ARGS
set -euo pipefail
# The tools (a new JVM per health check) start faster with a small heap, the serial GC and the C1 compiler only.
exec java ${KAFKA_HEAP_OPTS:--Xmx256M} ${KAFKA_JVM_PERFORMANCE_OPTS:--XX:+UseSerialGC -XX:TieredStopAtLevel=1} \
  -Djava.awt.headless=true -Dlog4j2.configurationFile=/etc/kafka/docker/log4j2.properties \
  -Dkafka.standin.log.level="${KAFKA_STANDIN_LOG_LEVEL:-WARN}" ${KAFKA_OPTS:-} -cp '/opt/kafka/libs/*' "$@"
