"""HiveServer2's HTTP transport (``transportMode=http;httpPath=cliservice``, the default of many BI tools and of
gateways such as Kyuubi): each Thrift call is the body of an HTTP POST to ``proxy.http_path`` on
``proxy.http_port``, and its reply the response's body. Everything above the framing is the binary
transport's: each client's calls go to a :class:`proxy.calls.Calls` of its own, with its own backend
connection, sessions, rewriting, virtual statements and decision log.

How a client is known from one request to the next, as HiveServer2 does it:

- The first request carries ``Authorization: Basic`` with the user and password (as SASL PLAIN carries them on
  the binary transport). The proxy opens the client's backend connection with them, so the backend decides
  whether they are good: a refusal is a 401, as HiveServer2 answers it.
- Every response sets the cookie ``hive.server2.auth``, a random token naming the client; requests carrying it
  are that client's (the Hive JDBC driver then sends no credentials; pyhive sends both, and its cookie is what
  the last response set). A request with an unknown or expired cookie and no credentials gets a 401, on which
  the JDBC driver sends its credentials again; with credentials, it starts a new client.
- A client's requests are served one at a time, in order (a HiveServer2 connection is used that way).
- A client whose last session was closed is closed at once; one with no request for
  ``proxy.idle_timeout_seconds`` is closed by a reaper, its backend operations cancelled and its sessions
  closed. While a request waits for a statement, the proxy watches that request's socket: a client that
  disconnects mid-query is closed the same way, so its backend operation is cancelled.

Bounds as on the binary transport: a request body larger than ``proxy.max_frame_bytes`` is refused (413),
``proxy.read_timeout_seconds`` for a request to arrive whole, ``proxy.max_connections`` clients at once. A
binary-transport client that connects here gets a SASL refusal naming the right port at once, not a timeout.
"""

from __future__ import annotations

import base64
import binascii
import http.server
import logging
import secrets
import select
import socket
import socketserver
import threading
import time
from http.cookies import CookieError, SimpleCookie
from typing import Any

from dipper.errors import BackendError, EnvironmentProblem
from proxy.backend_link import BackendAuthError
from proxy.calls import Calls
from proxy.host import ProxyHost
from proxy.session import ClientGone
from proxy.wire import SASL_BAD, SASL_START, STRICT_VERSION_BYTE, ProtocolError, message_header

log = logging.getLogger("dipper.proxy")

COOKIE = "hive.server2.auth"  # the name HiveServer2 gives its authentication cookie
TICK = 0.5  # how often the reaper looks for idle clients


class HttpClient:
    """One HTTP client (a JDBC or pyhive connection): its calls, served one request at a time (``lock``)."""

    def __init__(self, server: ProxyHost, peer: str, token: str) -> None:
        self.token = token
        self.peer = peer
        self.lock = threading.Lock()
        self.calls = Calls(server, peer, self._client_gone)
        self.last_activity = time.monotonic()
        self.request_socket: socket.socket | None = None  # the socket of the request being served
        self.closing: str | None = None  # why the client is to be closed (by whoever holds the lock next)
        self.closed = False

    def _client_gone(self) -> bool:
        sock = self.request_socket
        return sock is not None and socket_at_eof(sock)

    def close_locked(self) -> None:
        """Cancel what the client left running and close its backend sessions (the caller holds ``lock``)."""
        if not self.closed:
            self.closed = True
            log.info("closing the HTTP client %s: %s", self.peer, self.closing)
            self.calls.close()


def socket_at_eof(sock: socket.socket) -> bool:
    """Whether the peer has closed ``sock`` (readable, and nothing to read). Never blocks."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    transport: HttpTransport

    def finish_request(self, request: Any, client_address: Any) -> None:
        """Runs on the request's own thread: TLS is negotiated there, so a slow handshake holds up no one else."""
        t = self.transport
        request.settimeout(t.config.proxy.read_timeout_seconds)
        if t.server.tls is not None:
            try:
                request = t.server.tls.wrap_socket(request, server_side=True)
            except (OSError, ValueError) as e:
                log.info("TLS handshake with %s:%s failed: %s", client_address[0], client_address[1], e)
                return
        super().finish_request(request, client_address)


class HttpTransport:
    """The HTTP listener on ``proxy.http_port`` and the clients it serves."""

    def __init__(self, server: ProxyHost) -> None:
        p = server.config.proxy
        self.server = server
        self.config = server.config
        self.path = "/" + p.http_path.strip("/")
        self.clients: dict[str, HttpClient] = {}
        self._lock = threading.Lock()
        try:
            self._httpd = _Server((p.host, p.http_port), _Handler, bind_and_activate=True)
        except OSError as e:
            raise EnvironmentProblem(f"the proxy cannot listen for HTTP on {p.host}:{p.http_port}: {e.strerror or e} "
                                     "(set proxy.http_port or DIPPER_PROXY_HTTP_PORT to another port, or 0 for no "
                                     "HTTP transport)") from None
        self._httpd.transport = self
        self.port = self._httpd.server_address[1]
        self._threads: list[threading.Thread] = []

    def start(self) -> HttpTransport:
        log.info("proxy listening for HTTP on %s:%d%s%s", self.config.proxy.host, self.port, self.path,
                 " (TLS)" if self.server.tls else "")
        for target, name in ((self._httpd.serve_forever, "dipper-http-accept"), (self._reap, "dipper-http-reaper")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    @property
    def open_clients(self) -> int:
        with self._lock:
            return len(self.clients)

    def shutdown(self) -> None:
        """Stop accepting; let each client finish its open operations until the drain deadline; close them all."""
        self._httpd.shutdown()
        self._httpd.server_close()
        while time.monotonic() < self.server.drain_deadline and any(
                c.calls.operations_open() for c in self._snapshot()):
            time.sleep(0.1)
        for client in self._snapshot():
            self.close_client(client, "the proxy is shutting down", wait=5.0)

    def _snapshot(self) -> list[HttpClient]:
        with self._lock:
            return list(self.clients.values())

    def _reap(self) -> None:
        idle = self.config.proxy.idle_timeout_seconds
        while not self.server.stopping.wait(TICK):
            now = time.monotonic()
            for client in self._snapshot():
                if now - client.last_activity > idle and not client.lock.locked():
                    self.close_client(client, f"no request for {idle}s")  # unless a request came meanwhile

    # -- clients -----------------------------------------------------------------------------------------
    def known(self, token: str | None) -> HttpClient | None:
        with self._lock:
            return self.clients.get(token) if token else None

    def new_client(self, peer: str, user: str, password: str) -> HttpClient:
        """A client for these credentials, its backend connection open (:class:`BackendAuthError` if the backend
        refuses them; a backend that cannot be reached is answered with a clear status at OpenSession)."""
        with self._lock:
            if len(self.clients) >= self.config.proxy.max_connections:
                raise TooManyClients(f"{len(self.clients)} HTTP clients are being served "
                                     f"(proxy.max_connections = {self.config.proxy.max_connections})")
        client = HttpClient(self.server, peer, secrets.token_urlsafe(24))
        client.calls.credentials = (user, password)
        try:
            client.calls.connect_backend(user, password)
        except BackendAuthError:
            raise
        except BackendError as e:
            client.calls.backend_problem = str(e)
        with self._lock:
            self.clients[client.token] = client
        return client

    def close_client(self, client: HttpClient, why: str, wait: float = 0.0) -> None:
        """Forget ``client`` and close it: now if no request of it is being served (within ``wait`` seconds),
        else when that request ends."""
        with self._lock:
            if self.clients.get(client.token) is client:
                del self.clients[client.token]
        client.closing = client.closing or why
        if client.lock.acquire(timeout=wait) if wait > 0 else client.lock.acquire(blocking=False):
            try:
                client.close_locked()
            finally:
                client.lock.release()
        elif client.request_socket is not None and self.server.stopping.is_set():
            try:  # a request that outlived the drain period: cut it, as the binary transport does
                client.request_socket.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class TooManyClients(Exception):
    pass


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the Hive JDBC driver's HTTP client expects
    server: _Server
    server_version = "Dipper"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        log.debug("http %s: " + format, self.address_string(), *args)

    def handle(self) -> None:
        """A binary-transport client sends SASL or a Thrift message first, never an HTTP method: tell it at once
        (it would wait for a reply to a request line that never ends)."""
        try:
            first = b"" if self.server.transport.server.tls is not None else self.connection.recv(1, socket.MSG_PEEK)
        except OSError:
            return
        if first and not first.isalpha():  # (behind TLS, not looked at: a binary client there fails the handshake)
            self._refuse_binary(first[0])
            return
        super().handle()

    def _refuse_binary(self, first: int) -> None:
        t = self.server.transport
        p = t.config.proxy
        message = (f"Dipper: {p.host}:{t.port} speaks HiveServer2's HTTP transport (transportMode=http;"
                   f"httpPath={p.http_path}); the binary transport is on port {p.port}")
        log.warning("a binary-transport client %s connected to the HTTP port; telling it: %s",
                    self.address_string(), message)
        if first == SASL_START:
            body = message.encode()
            try:
                self.connection.sendall(bytes([SASL_BAD]) + len(body).to_bytes(4, "big") + body)
            except OSError:
                pass
        elif first != STRICT_VERSION_BYTE:
            log.debug("first byte 0x%02x", first)
        self.close_connection = True

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self._text(405, f"HiveServer2's HTTP transport takes POST requests to {self.server.transport.path}")

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        t = self.server.transport
        p = t.config.proxy
        if self.path.rstrip("/").split("?")[0] != t.path:
            self._text(404, f"no HiveServer2 endpoint at {self.path}; use httpPath={p.http_path}")
            return
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self._text(411, "a Thrift call needs a Content-Length")
            return
        if int(length) > p.max_frame_bytes:
            self._text(413, f"a request of {length} bytes is larger than proxy.max_frame_bytes = {p.max_frame_bytes}")
            self.close_connection = True
            return
        self.connection.settimeout(p.read_timeout_seconds)
        body = self.rfile.read(int(length))
        if len(body) < int(length):
            self.close_connection = True
            return
        client = self._client()
        if client is None:
            return
        try:
            reply = self._dispatch(client, body)
        except ClientGone:
            self.close_connection = True
            return
        except ProtocolError as e:
            self._text(400, f"Dipper: not a HiveServer2 Thrift call: {e}")
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/x-thrift")
        self.send_header("Content-Length", str(len(reply)))
        self._set_cookie(client)
        self.end_headers()
        self.wfile.write(reply)
        client.last_activity = time.monotonic()

    def _dispatch(self, client: HttpClient, body: bytes) -> bytes:
        """The reply to one call; a client that disconnects while it waits, or whose last session the call
        closes, is closed (:class:`ClientGone` for the former: there is no one to reply to)."""
        t = self.server.transport
        name = message_header(body)[0]
        with client.lock:
            if client.closed:
                raise ProtocolError(f"the client was closed ({client.closing}); connect again")
            client.request_socket = self.connection
            client.last_activity = time.monotonic()
            try:
                reply = client.calls.dispatch(body)
            except ClientGone:
                t.close_client(client, "it disconnected during a statement")
                client.close_locked()
                raise
            finally:
                client.request_socket = None
                if client.closing is not None:  # asked to close while this request was served
                    client.close_locked()
        if name == "CloseSession" and not client.calls.sessions:
            t.close_client(client, "its last session was closed")
        return reply

    def _client(self) -> HttpClient | None:
        """The request's client: by its cookie, else a new one for its Basic credentials; None after replying
        with the reason (401, 503)."""
        t = self.server.transport
        client = t.known(self._cookie())
        if client is not None:
            return client
        credentials = self._basic_credentials()
        if credentials is None:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="Dipper"')
            self._end_text("Dipper: send the user and password with HTTP Basic authentication")
            return None
        try:
            return t.new_client(f"{self.client_address[0]}:{self.client_address[1]}", *credentials)
        except BackendAuthError as e:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="Dipper"')
            self._end_text(f"Dipper: {e}")
        except TooManyClients as e:
            log.warning("refusing an HTTP client from %s: %s", self.address_string(), e)
            self._text(503, f"Dipper: {e}")
        return None

    def _cookie(self) -> str | None:
        try:
            morsel = SimpleCookie(self.headers.get("Cookie", "")).get(COOKIE)
        except CookieError:
            return None
        return morsel.value if morsel is not None else None

    def _basic_credentials(self) -> tuple[str, str] | None:
        header = self.headers.get("Authorization", "")
        scheme, _, encoded = header.partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            user, _, password = base64.b64decode(encoded.strip(), validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        # Hive's PLAIN server refuses an empty password even when it checks none: as on the binary transport.
        return (user or "anonymous", password or "x")

    def _set_cookie(self, client: HttpClient) -> None:
        secure = "; Secure" if self.server.transport.server.tls is not None else ""
        self.send_header("Set-Cookie", f"{COOKIE}={client.token}; Path=/; HttpOnly{secure}")

    def _text(self, code: int, text: str) -> None:
        self.send_response(code)
        self._end_text(text)

    def _end_text(self, text: str) -> None:
        body = (text + "\n").encode()
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
