"""The TLS context the gateway uses towards the upstream brokers (upstream.ssl.*)."""

from __future__ import annotations

import ssl

from gateway.config import ConfigError, UpstreamConfig


def upstream_ssl_context(config: UpstreamConfig) -> ssl.SSLContext | None:
    if not config.uses_tls:
        return None
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=config.ssl_truststore_location)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # Kafka's ssl.endpoint.identification.algorithm: "https" checks the hostname, "" does not.
    context.check_hostname = config.ssl_endpoint_identification_algorithm.lower() == "https"
    if config.ssl_keystore_location:
        try:
            context.load_cert_chain(config.ssl_keystore_location, config.ssl_key_location,
                                    password=config.ssl_key_password)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"upstream.ssl.keystore.location: cannot load client certificate: {exc}") from None
    return context
