"""One connection from the proxy to the Spark Thrift Server, opened with a client's own credentials, over the
transport the server speaks (``backend.transport``): binary (SASL PLAIN or NOSASL, :class:`BackendLink`) or HTTP
(:class:`HttpBackendLink`)."""

from __future__ import annotations

import base64
import http.client
import itertools
import socket
from typing import Any

from dipper.config import Backend
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


class HttpBackendLink(BackendLink):
    """A backend connection over HiveServer2's HTTP transport: each call a POST to ``backend.http_path`` on one
    kept-alive connection, with the client's credentials as Basic authentication and the cookie the server sets.
    The server checks the credentials at the first call (OpenSession), which then fails with
    :class:`BackendAuthError`, as the binary transport's handshake does."""

    def __init__(self, host: str, port: int, path: str, user: str, password: str, connect_timeout: float,
                 request_timeout: float) -> None:
        self.where = f"{host}:{port}"
        self.request_timeout = request_timeout
        self.user = user
        self.path = "/" + path.strip("/")
        self.authorization = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self.cookie: str | None = None
        self.http = http.client.HTTPConnection(host, port, timeout=connect_timeout)
        try:
            self.http.connect()
        except OSError as e:
            raise BackendError(f"the Spark Thrift Server at {self.where} is not reachable over HTTP "
                               f"({e.strerror or e}); try again when it is back") from None
        assert self.http.sock is not None
        self.http.sock.settimeout(request_timeout)
        self.http.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._seq = itertools.count(1)
        self.alive = True

    def roundtrip(self, message: bytes) -> bytes:
        headers = {"Content-Type": "application/x-thrift", "Authorization": self.authorization}
        if self.cookie:
            headers["Cookie"] = self.cookie
        try:
            self.http.request("POST", self.path, message, headers)
            response = self.http.getresponse()
            body = response.read()
        except TimeoutError:
            self.close()
            raise BackendError(f"the Spark Thrift Server at {self.where} did not answer within "
                               f"{self.request_timeout:g} s (backend.request_timeout_seconds); the connection to it "
                               "was dropped: reconnect to open a new session") from None
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise BackendError(f"lost the connection to the Spark Thrift Server at {self.where}: "
                               f"{e or type(e).__name__}") from None
        if response.status == 401:
            self.close()
            raise BackendAuthError(f"the Spark Thrift Server refused the credentials of user {self.user!r}: "
                                   f"{body.decode('utf-8', 'replace').strip()[:200] or 'HTTP 401'}")
        if response.status != 200:
            self.close()
            raise BackendError(f"the Spark Thrift Server at {self.where} answered HTTP {response.status} "
                               f"{response.reason} at {self.path} (check backend.http_path)")
        cookie = response.getheader("Set-Cookie")
        if cookie:
            self.cookie = cookie.split(";", 1)[0]
        return body

    def close(self) -> None:
        self.alive = False
        self.http.close()


def open_backend_link(b: Backend, user: str, password: str) -> BackendLink:
    """A connection to the backend ``b`` with a client's credentials, over its transport."""
    if b.transport == "http":
        return HttpBackendLink(b.host, b.port, b.http_path, user, password, b.connect_timeout_seconds,
                               b.request_timeout_seconds)
    return BackendLink(b.host, b.port, b.auth, user, password, b.connect_timeout_seconds, b.request_timeout_seconds)
