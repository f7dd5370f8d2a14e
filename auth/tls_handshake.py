"""A refused TLS handshake tells the client why: its fatal alert is sent before the connection closes.

OpenSSL writes the alert (``certificate required``, ``unknown ca``, ``certificate expired``…) into
the outgoing memory BIO of a failed server handshake; asyncio's and uvloop's SSL protocols then
close the transport without writing what is in that BIO, so the client only sees the connection
end (``unexpected eof``). The server context built here makes SSL objects that, on a failed
handshake, send those bytes straight to the connection's socket before the error goes on. The
socket is named per connection with ``send_handshake_alerts_to``, in the task that hands it to the
event loop: the loop runs the handshake in a copy of that task's context.

Writing past the transport is safe only here: TLS is lockstep, so a failure answers a client
flight that needed every earlier server byte, and nothing of the server's can still be queued.
"""

from __future__ import annotations

import contextlib
import contextvars
import socket
import ssl

_ALERT_SOCKET: contextvars.ContextVar[socket.socket | None] = contextvars.ContextVar(
    "ksgate_tls_alert_socket", default=None)

# OpenSSL's X509_V_ERR_* codes for a client certificate the truststore cannot vouch for: no issuer
# certificate (locally), self-signed (in the chain), leaf signature unverifiable.
_UNKNOWN_CA_CODES = frozenset({2, 18, 19, 20, 21})
_EXPIRED, _NOT_YET_VALID = 10, 9


def send_handshake_alerts_to(sock: socket.socket) -> None:
    """In the current task (and the event-loop callbacks it starts): a failed handshake's alert goes to ``sock``."""
    _ALERT_SOCKET.set(sock)


class _AlertingSSLObject(ssl.SSLObject):
    _alert_route: tuple[socket.socket, ssl.MemoryBIO] | None = None

    def do_handshake(self) -> None:
        try:
            super().do_handshake()
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise
        except ssl.SSLError:
            self._send_alert()
            raise
        # Done: no handshake alert can follow, so the route is not kept for the connection's life.
        self._alert_route = None

    def _send_alert(self) -> None:
        if self._alert_route is None:
            return
        sock, outgoing = self._alert_route
        alert = outgoing.read()  # the transport will drop the BIO unread: take it
        if alert:
            # A few dozen bytes into an idle socket's buffer: never blocks. If the client is gone
            # already, it sees the close, as it would have anyway.
            with contextlib.suppress(OSError):
                sock.send(alert)


class AlertingSSLContext(ssl.SSLContext):
    """An SSLContext (server side) whose failed handshakes send their alert (see the module's docstring)."""

    sslobject_class = _AlertingSSLObject

    def wrap_bio(self, incoming: ssl.MemoryBIO, outgoing: ssl.MemoryBIO, server_side: bool = False,
                 server_hostname: str | bytes | None = None, session: ssl.SSLSession | None = None
                 ) -> ssl.SSLObject:
        sslobject = super().wrap_bio(incoming, outgoing, server_side, server_hostname, session)
        sock = _ALERT_SOCKET.get()
        if sock is not None and isinstance(sslobject, _AlertingSSLObject):
            sslobject._alert_route = (sock, outgoing)
        return sslobject


def certificate_failure(exc: BaseException) -> str | None:
    """The audit failure class of a handshake refused over the client's certificate, None for any other
    handshake failure (no TLS, no shared protocol or cipher, a timeout, a peer that left)."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        if exc.verify_code == _EXPIRED:
            return "certificate_expired"
        if exc.verify_code == _NOT_YET_VALID:
            return "certificate_not_yet_valid"
        if exc.verify_code in _UNKNOWN_CA_CODES:
            return "unknown_ca"
        return "bad_certificate"
    if isinstance(exc, ssl.SSLError) and getattr(exc, "reason", None) == "PEER_DID_NOT_RETURN_A_CERTIFICATE":
        return "no_certificate"
    return None
