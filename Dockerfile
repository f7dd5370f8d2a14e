# ksgate container image.
#
#   docker build -t ksgate .
#   docker run --rm -v ksgate-state:/var/lib/ksgate ksgate init --dir /var/lib/ksgate
#       (prints the super user admin's random password once; also in users/admin.password)
#   docker run --rm -p 127.0.0.1:9092:9092 -p 127.0.0.1:9093:9093 -p 127.0.0.1:9404:9404 \
#       -v ksgate-state:/var/lib/ksgate -e KSGATE_UPSTREAM_BOOTSTRAP_SERVERS=broker.example:9092 ksgate
#
# The ports are published on the loopback only: publish them on other interfaces (drop
# "127.0.0.1:") only once the advertised host (KSGATE_ADVERTISED_LISTENERS) is the name
# clients use, and the users and ACLs are yours.
#
# Needs BuildKit (the default builder since Docker 23) for RUN --mount.  The build
# reaches PyPI only (the ksgate wheel's dependencies); nothing else is downloaded.
#
# Ports (see configs/docker/ksgate.yaml):
#   9092        bootstrap listener, SASL_SSL (listeners / advertised.listeners)
#   9093-9100   node ports: upstream broker N is served on
#               listener.name.sasl_ssl.node.port.base + N - node.id.min,
#               i.e. 9093 + N - 1 for node ids 1..8 with the bundled config.
#   9404        /metrics, /healthz, /readyz (ksgate.metrics.listener)
# A client follows the advertised host and port, so publish every port with the same
# number on the host side (-p 9093:9093, not -p 19093:9093).
#
# Configuration: mount a file over /etc/ksgate/ksgate.yaml, or override single keys with
# KSGATE_<KEY> environment variables (dots as underscores, e.g. KSGATE_ADVERTISED_LISTENERS).
# The bundled config is SASL_SSL with the authorizer: it reads the certificate, users and
# ACLs `ksgate init --dir /var/lib/ksgate` creates and writes the audit log to /var/log/ksgate.

# ---- build: a wheel for ksgate and wheels for its runtime dependencies ----------------
FROM python:3.11-slim AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
# Only what the wheel is built from (the packages listed in pyproject.toml).
COPY pyproject.toml ./
COPY protocol ./protocol
COPY auth ./auth
COPY authz ./authz
COPY gateway ./gateway
COPY pipeline ./pipeline
# Runtime dependencies only: no [test] or [quickstart] extras.
RUN pip wheel --wheel-dir /wheels .

# ---- runtime ---------------------------------------------------------------------------
FROM python:3.11-slim

LABEL org.opencontainers.image.title="ksgate" \
      org.opencontainers.image.description="Kafka security gateway" \
      org.opencontainers.image.licenses="Apache-2.0"

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN groupadd --system --gid 10001 ksgate \
    && useradd --system --uid 10001 --gid ksgate --no-create-home \
       --home-dir /nonexistent --shell /usr/sbin/nologin ksgate \
    && mkdir -p /var/lib/ksgate/certs /var/lib/ksgate/users /var/lib/ksgate/acls /var/log/ksgate \
       /var/lib/ksgate/upstream /var/lib/ksgate/kafka \
    && chown -R 10001:10001 /var/lib/ksgate /var/log/ksgate
# Volumes mounted on these directories start with this (ksgate-owned) content.

# Install from the build stage's wheels without keeping them in a layer.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links /wheels ksgate

COPY configs/docker/ksgate.yaml /etc/ksgate/ksgate.yaml

USER 10001:10001

EXPOSE 9092 9093-9100 9404

# Healthy means /readyz answers 200: the upstream has answered and the stores are loaded.
# The metrics listener comes from the config (and any KSGATE_* override).
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; from gateway.config import load_config; from gateway.config import parse_metrics_listener; h, p = parse_metrics_listener(load_config('/etc/ksgate/ksgate.yaml').settings['ksgate.metrics.listener']); h = {'': '127.0.0.1', '0.0.0.0': '127.0.0.1', '::': '[::1]'}.get(h, h); urllib.request.urlopen(f'http://{h}:{p}/readyz', timeout=3).close()"]

ENTRYPOINT ["ksgate"]
CMD ["run", "--config", "/etc/ksgate/ksgate.yaml"]
