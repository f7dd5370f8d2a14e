# The end-to-end client of scripts/compose-test.sh (docker-compose.yml's `client` service).
FROM python:3.11-slim
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1
# confluent-kafka's wheel bundles librdkafka with TLS and SASL/SCRAM.
RUN pip install "confluent-kafka>=2.4,<3"
COPY client.py /usr/local/bin/ksgate-compose-client
ENTRYPOINT ["python", "/usr/local/bin/ksgate-compose-client"]
