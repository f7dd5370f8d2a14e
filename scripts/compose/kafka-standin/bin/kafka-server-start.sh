#!/usr/bin/env bash
# kafka-server-start.sh PROPERTIES: the broker, with the heap and GC of Kafka's own script unless told otherwise.
export KAFKA_HEAP_OPTS=${KAFKA_HEAP_OPTS:--Xmx1G -Xms1G}
export KAFKA_JVM_PERFORMANCE_OPTS=${KAFKA_JVM_PERFORMANCE_OPTS:--XX:+UseG1GC -XX:MaxGCPauseMillis=20}
export KAFKA_STANDIN_LOG_LEVEL=INFO
exec "$(dirname "$0")/kafka-run-class.sh" kafka.Kafka "$@"
