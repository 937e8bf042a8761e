"""HiveServer2's HTTP transport (``transportMode=http;httpPath=cliservice``, the default of many BI tools and of
gateways such as Kyuubi): each Thrift call is the body of an HTTP POST to ``proxy.http_path`` on
``proxy.http_port``, and its reply the response's body. Everything above the framing is the binary
transport's: each client's calls go to a :class:`proxy.calls.Calls` of its own, with its own backend
connection, sessions, rewriting, virtual statements and decision log.

How a client is known from one request to the next, as HiveServer2 does it:

- An ``OpenSession`` call carries ``Authorization: Basic`` with the user and password (as SASL PLAIN carries
  them on the binary transport). It starts a client: the proxy opens the client's backend connection with
  them, so the backend decides whether they are good (a refusal fails the OpenSession, as it would on Spark).
- Every reply sets the cookie ``hive.server2.auth``, a random token naming the client; a request carrying it
  is that client's (the Hive JDBC driver then sends no credentials; pyhive sends both).
- A request without a known cookie (a client that does not keep cookies, a cookie from before a restart) is
  routed by the session or operation it names to the client that owns it, if its Basic credentials are that
  client's; a request naming no client's session gets a Thrift error and opens nothing on the backend. A
  request with neither cookie nor credentials gets a 401, on which the JDBC driver sends its credentials.
- A client's requests are served one at a time, in order (a HiveServer2 connection is used that way).
- A client left with no session after a request (its last session closed, or its OpenSession failed) is
  closed at once; one with no request for ``proxy.idle_timeout_seconds`` is closed by a reaper, its backend
  operations cancelled and its sessions closed. While a request waits for a statement, the proxy watches that
  request's socket: a client that disconnects then is closed the same way, so its backend operation is
  cancelled. An asynchronous client (JDBC) that vanishes between polls leaves no socket to watch: its
  operations end with the idle timeout, as its sessions would on HiveServer2.

Bounds as on the binary transport: ``proxy.max_connections`` TCP connections served at once (more are told so
with a Thrift error, ``proxy/refusal.py``) and as many clients; a request must arrive whole (request line, headers and body) within
``proxy.read_timeout_seconds`` of its first byte, and a kept-alive connection with no request for that long is
closed; a body larger than ``proxy.max_frame_bytes`` is refused (413), a chunked one too (411). A
binary-transport client that connects here is told at once, in its own protocol, which port to use.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import http.server
import logging
import secrets
import select
import socket
import socketserver
import ssl
import threading
import time
from typing import Any

from dipper.errors import BackendError, EnvironmentProblem
from proxy.backend_link import BackendAuthError
from proxy.calls import Calls, error_reply
from proxy.host import ProxyHost
from proxy.refusal import answer_http, limit_message
from proxy.session import ClientGone
from proxy.wire import SASL_BAD, SASL_START, ProtocolError, decode_call, encode_exception, message_header

log = logging.getLogger("dipper.proxy")

COOKIE = "hive.server2.auth"  # the name HiveServer2 gives its authentication cookie
TICK = 0.5  # how often the reaper looks for idle clients


class HttpClient:
    """One HTTP client (a JDBC or pyhive connection): its calls, served one request at a time (``lock``)."""

    def __init__(self, server: ProxyHost, peer: str, token: str, credentials: tuple[str, str]) -> None:
        self.token = token
        self.peer = peer
        self.lock = threading.Lock()
        self.calls = Calls(server, peer, self._client_gone)
        self.calls.credentials = credentials
        self.last_activity = time.monotonic()
        self.request_socket: socket.socket | None = None  # the socket of the request being served
        self.closed = False

    def _client_gone(self) -> bool:
        sock = self.request_socket
        return sock is not None and socket_at_eof(sock)

    def same_credentials(self, credentials: tuple[str, str] | None) -> bool:
        mine = self.calls.credentials
        return credentials is not None and mine is not None and \
            hmac.compare_digest("\0".join(credentials).encode(), "\0".join(mine).encode())

    def close_locked(self, why: str) -> None:
        """Cancel what the client left running and close its backend sessions (the caller holds ``lock``)."""
        if not self.closed:
            self.closed = True
            log.info("closing the HTTP client %s: %s", self.peer, why)
            self.calls.close()


def socket_at_eof(sock: socket.socket) -> bool:
    """Whether the peer has closed ``sock``: readable, with nothing to read. Never blocks, never consumes. Behind
    TLS a readable socket may hold a record, not an end: unknown, so False (the statement is not cancelled)."""
    poller = select.poll()
    try:
        poller.register(sock, select.POLLIN | select.POLLHUP | select.POLLERR)
        events = poller.poll(0)
    except (OSError, ValueError):
        return False
    if not events:
        return False
    if events[0][1] & (select.POLLHUP | select.POLLERR):
        return True
    if isinstance(sock, ssl.SSLSocket):
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # pyhive opens a connection for every call
    transport: HttpTransport

    def process_request(self, request: Any, client_address: Any) -> None:
        """At most ``proxy.max_connections`` connections served at once, as on the binary port."""
        if not self.transport.slots.acquire(blocking=False):
            limit = self.transport.config.proxy.max_connections
            log.warning("refusing an HTTP connection from %s: %d are being served (proxy.max_connections)",
                        client_address[0], limit)
            self.transport.server.metrics.connection("http", "refused")
            self.transport.server.refusals.refuse(request, client_address[0], limit_message(limit, limit),
                                                  answer_http)
            return
        try:
            super().process_request(request, client_address)
        except Exception:
            self.transport.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.transport.slots.release()

    def finish_request(self, request: Any, client_address: Any) -> None:
        """Runs on the connection's own thread: TLS is negotiated there, so a slow handshake holds up no one."""
        t = self.transport
        request.settimeout(t.config.proxy.read_timeout_seconds)
        if t.server.tls is None:
            super().finish_request(request, client_address)
            return
        try:
            wrapped = t.server.tls.wrap_socket(request, server_side=True)
        except (OSError, ValueError) as e:
            log.info("TLS handshake with %s failed: %s", client_address[0], e)
            t.server.metrics.handshake_failed("http", "tls")
            return
        try:
            super().finish_request(wrapped, client_address)
        finally:
            try:
                wrapped.close()
            except OSError:
                pass


class HttpTransport:
    """The HTTP listener on ``proxy.http_port`` and the clients it serves."""

    def __init__(self, server: ProxyHost) -> None:
        p = server.config.proxy
        self.server = server
        self.config = server.config
        self.path = "/" + p.http_path.strip("/")
        self.clients: dict[str, HttpClient] = {}
        self.slots = threading.BoundedSemaphore(p.max_connections)
        self._lock = threading.Lock()
        self._started = False
        server_class = type("_Server6", (_Server,), {"address_family": socket.AF_INET6}) if ":" in p.host else _Server
        try:
            self._httpd = server_class((p.host, p.http_port), _Handler, bind_and_activate=True)
        except OSError as e:
            raise EnvironmentProblem(f"the proxy cannot listen for HTTP on {p.host}:{p.http_port}: {e.strerror or e} "
                                     "(set proxy.http_port or DIPPER_PROXY_HTTP_PORT to another port, or 0 for no "
                                     "HTTP transport)") from None
        self._httpd.transport = self
        self.port = self._httpd.server_address[1]

    def start(self) -> HttpTransport:
        log.info("proxy listening for HTTP on %s:%d%s%s", self.config.proxy.host, self.port, self.path,
                 " (TLS)" if self.server.tls else "")
        self._started = True
        for target, name in ((self._httpd.serve_forever, "dipper-http-accept"), (self._reap, "dipper-http-reaper")):
            threading.Thread(target=target, name=name, daemon=True).start()
        return self

    @property
    def open_clients(self) -> int:
        with self._lock:
            return len(self.clients)

    def shutdown(self) -> None:
        """Stop accepting; let clients finish their open operations until the drain deadline (their polls and
        fetches come on connections already open, or are refused); then close every client."""
        if self._started:
            self._httpd.shutdown()
        self._httpd.server_close()
        while time.monotonic() < self.server.drain_deadline and any(map(_operations_open, self.clients_now())):
            time.sleep(0.1)
        closers = [threading.Thread(target=self._close_at_shutdown, args=(c,), daemon=True) for c in self.clients_now()]
        for closer in closers:
            closer.start()
        for closer in closers:
            closer.join(timeout=10)

    def _close_at_shutdown(self, client: HttpClient) -> None:
        self.forget(client)
        if client.lock.acquire(timeout=5):
            try:
                client.close_locked("the proxy is shutting down")
            finally:
                client.lock.release()
            return
        sock = client.request_socket  # a request that outlived the drain: cut it, as the binary transport does
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def clients_now(self) -> list[HttpClient]:
        with self._lock:
            return list(self.clients.values())

    def _reap(self) -> None:
        idle = self.config.proxy.idle_timeout_seconds
        while not self.server.stopping.wait(TICK):
            for client in self.clients_now():
                if time.monotonic() - client.last_activity <= idle or not client.lock.acquire(blocking=False):
                    continue
                try:
                    if time.monotonic() - client.last_activity > idle:  # no request came meanwhile
                        self.forget(client)
                        client.close_locked(f"no request for {idle}s")
                finally:
                    client.lock.release()

    # -- clients -----------------------------------------------------------------------------------------
    def by_token(self, token: str | None) -> HttpClient | None:
        with self._lock:
            return self.clients.get(token) if token else None

    def owner(self, request: Any) -> HttpClient | None:
        """The client whose session or operation ``request`` names."""
        for client in self.clients_now():
            # Without the client's lock, which a long statement holds: its sessions may change meanwhile, and a
            # session being opened or closed right now is not a session this request can name yet or still.
            for _ in range(3):
                try:
                    if not client.closed and client.calls.owns(request):
                        return client
                    break
                except RuntimeError:  # changed while being read
                    continue
        return None

    def new_client(self, peer: str, credentials: tuple[str, str]) -> HttpClient:
        """A client for these credentials, its backend connection open; a backend that cannot be reached (or
        refuses them) is answered at its OpenSession, with Spark's word for it."""
        client = HttpClient(self.server, peer, secrets.token_urlsafe(24), credentials)
        with self._lock:
            if self.server.stopping.is_set():
                raise Refused("the proxy is shutting down")
            limit = self.config.proxy.max_connections
            if len(self.clients) >= limit:
                raise Refused(f"the proxy is serving its limit of {limit} HTTP clients (proxy.max_connections = "
                              f"{limit}); try again when one has closed its session, or raise proxy.max_connections")
            self.clients[client.token] = client
        self.server.metrics.connection("http", "opened")
        try:
            client.calls.connect_backend(*credentials)
        except BackendError as e:  # refused credentials (BackendAuthError) too: OpenSession says so
            client.calls.backend_problem = str(e)
            if isinstance(e, BackendAuthError):
                self.server.metrics.handshake_failed("http", "auth")
        return client

    def forget(self, client: HttpClient) -> None:
        with self._lock:
            if self.clients.get(client.token) is client:
                del self.clients[client.token]


def _operations_open(client: HttpClient) -> bool:
    try:
        return client.calls.operations_open()
    except RuntimeError:  # its sessions changed under us: it is busy
        return True


class Refused(Exception):
    """No client can be started now (a Thrift error status saying why)."""


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the Hive JDBC driver's HTTP client expects
    # Without it, a reply's last partial segment waits for the client's delayed ACK of the one before (40 ms a
    # call on Linux), which halved the rows per second of a large fetch.
    disable_nagle_algorithm = True
    server: _Server
    server_version = "Dipper"
    _cut: threading.Timer | None = None

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        log.debug("http %s: " + format, self.address_string(), *args)

    def handle(self) -> None:
        """A binary-transport client sends SASL or a Thrift message first, never an HTTP method: tell it at once
        (it would wait for a reply to a request line that never ends)."""
        try:
            first = self.rfile.peek(1)[:1]
        except (OSError, ValueError):
            return
        if first and not first.isalpha():
            self._refuse_binary(first[0])
            return
        super().handle()

    def handle_one_request(self) -> None:
        """One request, which must arrive whole within ``proxy.read_timeout_seconds`` (a deadline, not a timeout
        per read: a trickle of bytes cannot hold the connection); the statement it carries may then take as
        long as it takes."""
        timeout = self.server.transport.config.proxy.read_timeout_seconds
        self._cut = threading.Timer(timeout, self._cut_connection)
        self._cut.daemon = True
        self._cut.start()
        try:
            super().handle_one_request()
        finally:
            self._arrived()

    def _arrived(self) -> None:
        if self._cut is not None:
            self._cut.cancel()
            self._cut = None

    def _cut_connection(self) -> None:
        log.info("closing the HTTP connection from %s: no whole request within proxy.read_timeout_seconds",
                 self.address_string())
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _refuse_binary(self, first: int) -> None:
        t = self.server.transport
        p = t.config.proxy
        message = (f"Dipper: {p.host}:{t.port} speaks HiveServer2's HTTP transport (transportMode=http;"
                   f"httpPath={p.http_path}); the binary transport is on port {p.port}")
        log.warning("a binary-transport client %s connected to the HTTP port; telling it: %s",
                    self.address_string(), message)
        t.server.metrics.handshake_failed("http", "protocol")
        try:
            if first == SASL_START:
                body = message.encode()
                self.wfile.write(bytes([SASL_BAD]) + len(body).to_bytes(4, "big") + body)
            else:  # NOSASL: a Thrift exception in reply to its first call, when that has arrived
                self.connection.settimeout(1.0)
                call = self.rfile.read1(65536)  # what peek() buffered, and what has arrived since
                name, _, seqid = message_header(call)
                self.wfile.write(encode_exception(name, message, seqid))
        except (OSError, ProtocolError):
            pass
        self.close_connection = True

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self._text(405, f"HiveServer2's HTTP transport takes POST requests to {self.server.transport.path}")

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        t = self.server.transport
        p = t.config.proxy
        if self.path.split("?")[0].rstrip("/") != t.path:
            self._text(404, f"Dipper: no HiveServer2 endpoint at {self.path}; use httpPath={p.http_path}")
            return
        length = self.headers.get("Content-Length", "")
        if self.headers.get("Transfer-Encoding") or not (length.isascii() and length.isdigit()) or \
                len(self.headers.get_all("Content-Length") or []) != 1:
            self._text(411, "Dipper: a Thrift call needs one Content-Length, and no Transfer-Encoding")
            return
        if int(length) > p.max_frame_bytes:
            self._text(413, f"Dipper: a request of {length} bytes is larger than proxy.max_frame_bytes = "
                            f"{p.max_frame_bytes}")
            return
        body = self.rfile.read(int(length))
        self._arrived()
        if len(body) < int(length):
            self.close_connection = True
            return
        try:
            name, _, seqid = message_header(body)
        except ProtocolError as e:
            self._text(400, f"Dipper: not a HiveServer2 Thrift call: {e}")
            return
        client = t.by_token(self._cookie())
        if client is None:  # the call is decoded here only to find its client (Calls decodes what it handles)
            credentials = self._basic_credentials()
            try:
                request = decode_call(body, errors="surrogateescape")  # text that is not UTF-8 is Calls' to judge
                client = self._client(name, request, credentials)
            except ProtocolError as e:
                self._text(400, f"Dipper: not a HiveServer2 Thrift call: {e}")
                return
            except Refused as e:
                log.warning("refusing an HTTP client from %s: %s", self.address_string(), e)
                t.server.metrics.connection("http", "refused")
                # A Thrift error, not a 503: Thrift's HTTP clients read the body as a reply whatever the status.
                self._reply(error_reply(name, seqid, str(e), request, sql_state="08004"), None)
                self.close_connection = True  # it holds one of the connections, and nothing of it is served
                return
            if client is None:
                if credentials is None:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="Dipper"')
                    self._end_text("Dipper: send the user and password with HTTP Basic authentication")
                    return
                self._reply(error_reply(name, seqid, "this connection has no such session or operation (it was "
                                                     "closed, or the proxy restarted); open a new session", request),
                            None)
                return
        try:
            reply = self._dispatch(client, name, seqid, body)
        except ClientGone:
            self.close_connection = True
            return
        except ProtocolError as e:
            self._text(400, f"Dipper: not a HiveServer2 Thrift call: {e}")
            return
        except Exception as e:  # noqa: BLE001 - one request's bug must not leave its client half served
            log.exception("unexpected error serving an HTTP request of %s; closing the client", client.peer)
            t.forget(client)
            with client.lock:
                client.close_locked(f"{type(e).__name__}: {e}")
            self._text(500, "Dipper: internal error; the client was closed, connect again")
            return
        self._reply(reply, client)

    def _reply(self, reply: bytes, client: HttpClient | None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/x-thrift")
        self.send_header("Content-Length", str(len(reply)))
        if client is not None and not client.closed:
            secure = "; Secure" if self.server.transport.server.tls is not None else ""
            self.send_header("Set-Cookie", f"{COOKIE}={client.token}; Path=/; HttpOnly{secure}")
        self.end_headers()
        self.wfile.write(reply)

    def _dispatch(self, client: HttpClient, name: str, seqid: int, body: bytes) -> bytes:
        """The reply to one call; a client that disconnects while it waits (:class:`ClientGone`: there is no one
        to reply to), or that is left with no session, is closed."""
        t = self.server.transport
        with client.lock:
            if client.closed:  # closed since it was found: as if it had not been
                return error_reply(name, seqid, "this connection was closed; open a new session",
                                   decode_call(body, errors="surrogateescape"))
            client.request_socket = self.connection
            try:
                reply = client.calls.dispatch(body)
            except ClientGone:
                t.forget(client)
                client.close_locked("it disconnected during a statement")
                raise
            finally:
                client.request_socket = None
                client.last_activity = time.monotonic()
            if not client.calls.sessions:
                t.forget(client)
                client.close_locked("it has no session open" if name != "CloseSession" else
                                    "its last session was closed")
        return reply

    def _client(self, name: str, request: Any, credentials: tuple[str, str] | None) -> HttpClient | None:
        """The client of a request without a known cookie: for an OpenSession with credentials, a new one; else the
        client owning the session or operation it names, if the credentials are that client's."""
        t = self.server.transport
        if credentials is None:
            return None
        if name == "OpenSession":
            return t.new_client(f"{self.client_address[0]}:{self.client_address[1]}", credentials)
        owner = t.owner(request)
        return owner if owner is not None and owner.same_credentials(credentials) else None

    def _cookie(self) -> str | None:
        for header in self.headers.get_all("Cookie") or []:
            for part in header.split(";"):
                key, _, value = part.strip().partition("=")
                if key == COOKIE:
                    return value.strip().strip('"')
        return None

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

    def _text(self, code: int, text: str) -> None:
        """An HTTP error, after which the connection closes (what is left of the request is not read)."""
        self.send_response(code)
        self.close_connection = True
        self.send_header("Connection", "close")
        self._end_text(text)

    def _end_text(self, text: str) -> None:
        body = (text + "\n").encode()
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
