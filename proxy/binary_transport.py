"""HiveServer2's binary transport: one TCP connection (TLS if configured) per client, SASL PLAIN or NOSASL,
one thread serving it; the calls it carries go to the client's :class:`proxy.calls.Calls`.

What a client can hold is bounded: ``proxy.read_timeout_seconds`` to authenticate and to send the rest of a
request once started (:class:`proxy.wire.Channel` enforces it as a deadline), ``proxy.idle_timeout_seconds``
between the end of one reply and the next request. A client that speaks HTTP to this port is told so at once
(``proxy/http_transport.py`` serves HTTP on a port of its own).
"""

from __future__ import annotations

import logging
import socket
import ssl
import time

from dipper.errors import BackendError
from proxy.backend_link import BackendAuthError
from proxy.calls import Calls
from proxy.host import ProxyHost
from proxy.session import ClientGone
from proxy.wire import (SASL_BAD, SASL_COMPLETE, SASL_OK, SASL_START, STRICT_VERSION_BYTE, Channel, ProtocolError,
                        sasl_plain_credentials)

log = logging.getLogger("dipper.proxy")

TICK = 0.5  # how often an idle connection checks for shutdown and idle timeout


class BinaryConnection:
    def __init__(self, sock: socket.socket, peer: str, server: ProxyHost) -> None:
        self.sock = sock
        self.peer = peer
        self.server = server
        self.config = server.config
        self.client: Channel | None = None
        self.calls = Calls(server, peer, self._client_gone)
        self.last_activity = time.monotonic()

    # -- lifecycle ---------------------------------------------------------------------------------------
    def run(self) -> None:
        try:
            self._handshake()
            self._serve()
        except ClientGone:
            log.debug("client %s disconnected", self.peer)
        except ProtocolError as e:
            log.warning("closing the connection from %s: %s", self.peer, e)
        except (OSError, ssl.SSLError) as e:
            log.info("connection from %s ended: %s", self.peer, e)
        except Exception:  # noqa: BLE001 - one connection's bug must not take the server down
            log.exception("unexpected error on the connection from %s; closing it", self.peer)
        finally:
            self.close()

    def _handshake(self) -> None:
        """TLS, then SASL PLAIN or NOSASL; a failure is counted by the metrics (a client that closes before
        sending anything is not a failed handshake: a port check does that)."""
        try:
            self._negotiate()
        except ClientGone:
            raise
        except Exception as e:
            self.server.metrics.handshake_failed("binary", e)
            raise

    def _negotiate(self) -> None:
        timeout = self.config.proxy.read_timeout_seconds
        # The socket's timeout bounds the TLS handshake as a whole (ssl applies it as a deadline) and, from
        # then on, each send of a reply: a client that stops reading its replies is gone. The HiveServer2
        # handshake after TLS has a deadline of its own.
        self.sock.settimeout(timeout)
        if self.server.tls is not None:
            self.sock = self.server.tls.wrap_socket(self.sock, server_side=True)
        self.client = Channel(self.sock, framed=True, max_frame=self.config.proxy.max_frame_bytes,
                              message_timeout=timeout)
        self.client.set_deadline(timeout, "the handshake")
        mode = self.config.proxy.client_auth
        first = self.client.peek_byte()
        if first is None:
            raise ClientGone
        if first == SASL_START and mode in ("any", "plain"):
            self._sasl_plain()
        elif first == STRICT_VERSION_BYTE and mode in ("any", "nosasl"):
            self.client.framed = False
        elif 0x41 <= first <= 0x5A:  # an HTTP method's first letter: a client of the HTTP transport
            self._refuse_http()
        else:
            expected = {"any": "SASL or NOSASL", "plain": "SASL PLAIN", "nosasl": "NOSASL"}[mode]
            raise ProtocolError(f"not a HiveServer2 client handshake (first byte 0x{first:02x}; "
                                f"proxy.client_auth = {mode} expects {expected})")
        self.client.set_deadline(None)

    def _refuse_http(self) -> None:
        """Tell an HTTP client at once that this port is the binary transport's, and which port is HTTP's."""
        p = self.config.proxy
        where = (f"connect to port {p.http_port} (httpPath={p.http_path})" if p.http_port else
                 "this proxy serves none (set proxy.http_port to serve it)")
        message = (f"Dipper: port {p.port} speaks HiveServer2's binary transport; for transportMode=http {where}, or "
                   "leave transportMode out of the URL")
        body = (message + "\n").encode()
        try:
            self.sock.settimeout(0.2)  # take what the request sent: closing with it unread may reset the connection
            self.sock.recv(65536)     # before the client has read the reply
        except OSError:
            pass
        try:
            self.sock.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
                              b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        raise ProtocolError(f"an HTTP client on the binary port, told: {message}")

    def _sasl_plain(self) -> None:
        assert self.client is not None
        status, mechanism = self.client.read_sasl()
        if status != SASL_START or mechanism.upper() != b"PLAIN":
            self.client.write_sasl(SASL_BAD, b"Dipper accepts SASL PLAIN (or NOSASL) only")
            raise ProtocolError(f"SASL mechanism {mechanism[:40]!r} is not supported")
        status, payload = self.client.read_sasl()
        if status not in (SASL_OK, SASL_COMPLETE):
            raise ProtocolError(f"unexpected SASL status {status}")
        self.calls.credentials = sasl_plain_credentials(payload)
        # The backend decides whether these credentials are good, so connect now: a refusal is then the
        # client's authentication failure, exactly as it would be without the proxy.
        try:
            self.calls.connect_backend(*self.calls.credentials)
        except BackendAuthError as e:
            self.server.metrics.handshake_failed("binary", "auth")
            self.client.write_sasl(SASL_BAD, str(e).encode())
            raise ClientGone from None
        except BackendError as e:
            self.calls.backend_problem = str(e)  # answered with a clear status at OpenSession
        self.client.write_sasl(SASL_COMPLETE, b"")

    def _serve(self) -> None:
        assert self.client is not None
        self.last_activity = time.monotonic()
        while self._wait_for_request():
            message = self.client.read_message()
            if message is None:
                return
            reply = self.calls.dispatch(message)
            self.client.write_message(reply)
            # Idleness is counted from the reply, not the request: a statement that ran longer than the idle
            # timeout has kept the client waiting, not idle.
            self.last_activity = time.monotonic()

    def _wait_for_request(self) -> bool:
        """Block until a request arrives; False when the connection should end (idle, shutdown)."""
        assert self.client is not None
        idle = self.config.proxy.idle_timeout_seconds
        while not self.client.readable(TICK):
            now = time.monotonic()
            if now - self.last_activity > idle:
                log.info("closing the idle connection from %s (no request for %ds)", self.peer, idle)
                return False
            if self.server.stopping.is_set() and (not self.calls.operations_open() or now > self.server.drain_deadline):
                return False
        return True

    def close(self) -> None:
        """Cancel what this client left running and close its backend sessions, then both sockets."""
        self.calls.close()
        try:
            self.sock.close()
        except OSError:
            pass
        self.server.forget(self)

    def _client_gone(self) -> bool:
        return self.client is not None and self.client.readable(0) and self.client.at_eof()
