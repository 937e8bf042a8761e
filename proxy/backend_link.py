"""One connection from the proxy to the Spark Thrift Server, opened with a client's own credentials."""

from __future__ import annotations

import itertools
import socket
from typing import Any

from dipper.errors import BackendError
from proxy.wire import (SASL_COMPLETE, SASL_OK, SASL_START, Channel, MessageTimeout, ProtocolError, decode_reply,
                        encode_call)


_NO_LIMIT = 2**31 - 1  # the backend is trusted: its replies (result batches) may be large


class BackendAuthError(BackendError):
    """The backend refused the client's credentials."""


class BackendLink:
    """A backend connection; ``roundtrip`` relays a raw message, ``call`` makes a decoded call.

    Every round trip is bounded by ``request_timeout``: the proxy submits statements asynchronously and
    polls, so no single call should keep the backend busy for long, and a backend that is hung (not dead:
    its socket stays open) must not hold the client's thread for ever. The reply's first byte must come
    within the timeout, and the rest of it within as long again.
    """

    def __init__(self, host: str, port: int, auth: str, user: str, password: str, connect_timeout: float,
                 request_timeout: float) -> None:
        self.where = f"{host}:{port}"
        self.request_timeout = request_timeout
        try:
            sock = socket.create_connection((host, port), timeout=connect_timeout)
        except OSError as e:
            raise BackendError(f"the Spark Thrift Server at {self.where} is not reachable ({e.strerror or e}); "
                               "try again when it is back") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.channel = Channel(sock, framed=auth == "plain", max_frame=_NO_LIMIT, message_timeout=request_timeout)
        try:
            if auth == "plain":
                self._sasl_plain(user, password)
        except (OSError, ProtocolError) as e:
            sock.close()
            raise BackendError(f"the Spark Thrift Server at {self.where} failed during authentication: {e}") from None
        sock.settimeout(request_timeout)
        self._seq = itertools.count(1)
        self.alive = True

    def _sasl_plain(self, user: str, password: str) -> None:
        self.channel.write_sasl(SASL_START, b"PLAIN")
        self.channel.write_sasl(SASL_OK, b"\0" + user.encode() + b"\0" + password.encode())
        status, payload = self.channel.read_sasl()
        if status != SASL_COMPLETE:
            sock = self.channel.sock
            sock.close()
            raise BackendAuthError(f"the Spark Thrift Server refused the credentials of user {user!r}: "
                                   f"{payload.decode('utf-8', 'replace') or 'no reason given'}")

    def roundtrip(self, message: bytes) -> bytes:
        """Send one call message and return the reply message, both as raw bytes."""
        try:
            self.channel.write_message(message)
            reply = self.channel.read_message()
        except (TimeoutError, MessageTimeout):
            self.close()
            raise BackendError(f"the Spark Thrift Server at {self.where} did not answer within "
                               f"{self.request_timeout:g} s (backend.request_timeout_seconds); the connection to it "
                               "was dropped: reconnect to open a new session") from None
        except (OSError, ProtocolError) as e:
            self.close()
            raise BackendError(f"lost the connection to the Spark Thrift Server at {self.where}: {e}") from None
        if reply is None:
            self.close()
            raise BackendError(f"the Spark Thrift Server at {self.where} closed the connection")
        return reply

    def call(self, name: str, request: Any) -> Any:
        """A call the proxy makes on its own behalf (polling, cancelling, closing)."""
        reply = self.roundtrip(encode_call(name, request, next(self._seq)))
        try:
            return decode_reply(name, reply)
        except ProtocolError as e:
            raise BackendError(str(e)) from None

    def close(self) -> None:
        self.alive = False
        try:
            self.channel.sock.close()
        except OSError:
            pass
