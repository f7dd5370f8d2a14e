"""What one listener needs to authenticate its connections: principal builder, SASL mechanisms, TLS.

Built once per listener when the gateway is wired (gateway/stores/setup.py); read by the
authenticate stage (gateway/session/sasl_stage.py) for every connection of that listener.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from auth.principal import PrincipalBuilder
from auth.sasl.server import SaslServerConfig

if TYPE_CHECKING:
    from auth.tls import TlsContextProvider


@dataclass(slots=True)
class ListenerSecurity:
    """What one listener needs to authenticate its connections."""

    principal_builder: PrincipalBuilder
    sasl: SaslServerConfig | None = None
    tls: TlsContextProvider | None = field(default=None, repr=False)

    @property
    def ssl_context(self) -> ssl.SSLContext | None:
        # The provider's contexts hand every new handshake to the newest context (hot reload).
        return self.tls.context if self.tls is not None else None
