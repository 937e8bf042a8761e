"""The proxy's listeners: accept HiveServer2 clients of the binary transport, one thread per connection (and of
the HTTP transport, ``proxy/http_transport.py``, when ``proxy.http_port`` is set), and stop gracefully.

The accept loop is the one thread every client depends on, so nothing that goes wrong with one connection
(an accept that fails, a socket option, a thread that cannot start) may end it: the failure is logged, that
connection closed, and the loop goes on. Running out of file descriptors or memory makes every accept fail
until something is released, so the loop then backs off instead of spinning. ``proxy.max_connections``
bounds the connections (and threads) served at once; one more is told so in its protocol and closed
(``proxy/refusal.py``).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from dipper.config import Config
from dipper.errors import ConfigError, EnvironmentProblem
from proxy.binary_transport import BinaryConnection
from proxy.decision_log import DecisionLog
from proxy.http_transport import HttpTransport
from proxy.metrics import Metrics
from proxy.refusal import Refusals, answer_binary, limit_message
from rewriter.cache import RewriteCache
from rewriter.exact_keys import KeyCache
from rewriter.spark.zones import ZoneRules
from stats.loader import StatsLoader

log = logging.getLogger("dipper.proxy")


class Stoppable(Protocol):
    def stop(self) -> None: ...


ACCEPT_BACKOFF = 0.5  # seconds to wait before accepting again after the machine ran out of a resource


class ProxyServer:
    def __init__(self, config: Config, stats: StatsLoader,
                 forget_statistics: Callable[[list[str], dict[str, str] | None], list[str]] | None = None,
                 background: Sequence[Stoppable] = (),
                 recollect: Callable[[list[str]], bool] | None = None) -> None:
        p = config.proxy
        self.config = config
        self.stats = stats
        # Drops the statistics of tables a statement is about to redefine (DROP/ALTER/CREATE TABLE ...), or that
        # the catalog reads elsewhere (only those of the given location); returns those that had some. None:
        # nothing to drop (a store the proxy does not own).
        self.forget_statistics = forget_statistics or (lambda tables, collected_at=None: [])
        self.background = tuple(background)  # threads keeping the statistics up, stopped with the proxy
        # Asks for the statistics of tables a statement changed (and whose statistics were dropped) to be
        # collected again; False when nothing will (no scheduled refresh).
        self.recollect = recollect or (lambda tables: False)
        # Tables a statement that may redefine them is running on (counts): no rewrite uses their statistics
        # until the proxy has seen what the statement did (proxy/execution.py _after_redefinition).
        self._redefining: dict[str, int] = {}
        # Rows read for exact keys (rewriter/exact_keys.py), shared by every session: one user's dashboard
        # filter read once serves the next; entries are keyed by file identity, so none outlives its file.
        self.key_cache = KeyCache(config.rewriter.exact_keys_cache_bytes)
        # Rewrites of repeated statements (rewriter/cache.py), shared by every session likewise.
        self.rewrite_cache = RewriteCache(config.rewriter.rewrite_cache_entries)
        # Whether Python's rules of each session time zone are the backend JVM's, asked of it once per zone.
        self.zone_rules = ZoneRules()
        self.metrics = Metrics()
        self.decision_log = DecisionLog(p.decision_log, p.decision_log_max_bytes, p.decision_log_backups,
                                        on_write=self.metrics.observe)
        self.tls = _tls_context(p.tls_cert, p.tls_key) if p.tls_cert else None
        self.refusals = Refusals(self.tls)  # tells a client over proxy.max_connections why it is not served
        self.stopping = threading.Event()
        self.drain_deadline = float("inf")
        self._connections: set[BinaryConnection] = set()
        self._lock = threading.Lock()
        self._listener = socket.socket(socket.AF_INET6 if ":" in p.host else socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._listener.bind((p.host, p.port))
        except OSError as e:
            self._listener.close()
            raise EnvironmentProblem(f"the proxy cannot listen on {p.host}:{p.port}: {e.strerror or e} "
                                     "(set proxy.port or DIPPER_PROXY_PORT to another port)") from None
        self._listener.listen(128)
        self.port = self._listener.getsockname()[1]
        self._thread: threading.Thread | None = None
        try:
            self.http = HttpTransport(self) if p.http_port else None  # HiveServer2's HTTP transport
            self.metrics.count_open(self._client_sessions, self._backend_connections, lambda: self.connections,
                                    lambda: self.http.open_clients if self.http is not None else 0)
            self.metrics.watch(self)  # its statistics, caches and statistics workers, read when scraped
            self.metrics_port = self.metrics.serve(p.host, p.metrics_port) if p.metrics_port else None
        except EnvironmentProblem:
            self._listener.close()
            if getattr(self, "http", None) is not None:
                self.http.shutdown()
            raise

    @contextlib.contextmanager
    def redefining(self, tables: Sequence[str]) -> Iterator[None]:
        """While a statement that may redefine ``tables`` runs: their statistics are used by no rewrite."""
        with self._lock:
            for table in tables:
                self._redefining[table] = self._redefining.get(table, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                for table in tables:
                    self._redefining[table] -= 1
                    if not self._redefining[table]:
                        del self._redefining[table]

    def being_redefined(self) -> dict[str, str]:
        """Tables a statement that may redefine them is running on -> why their statistics are not used."""
        with self._lock:
            return {table: "a statement that may redefine the table is running" for table in self._redefining}

    @property
    def connections(self) -> int:
        with self._lock:
            return len(self._connections)

    def start(self) -> ProxyServer:
        """Serve in a background thread (the embedded server and the tests use this)."""
        self._thread = threading.Thread(target=self.serve_forever, name="dipper-proxy-accept", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        p = self.config.proxy
        if self.http is not None:
            self.http.start()
        log.info("proxy listening on %s:%d%s, backend %s:%d", p.host, self.port, " (TLS)" if self.tls else "",
                 self.config.backend.host, self.config.backend.port)
        self._listener.settimeout(0.5)
        while not self.stopping.is_set():
            try:
                sock, address = self._listener.accept()
            except TimeoutError:
                continue
            except OSError as e:
                if self.stopping.is_set():
                    break
                if isinstance(e, ConnectionError) or e.errno == errno.EPROTO:  # that client gave up already
                    log.warning("a connection failed while being accepted: %s", e)
                else:  # EMFILE, ENFILE, ENOBUFS, ENOMEM, ...: every accept fails until something is released
                    log.error("cannot accept connections: %s; trying again in %.1f s", e.strerror or e, ACCEPT_BACKOFF)
                    self.stopping.wait(ACCEPT_BACKOFF)
                continue
            self._admit(sock, f"{address[0]}:{address[1]}")

    def _admit(self, sock: socket.socket, peer: str) -> None:
        """Serve an accepted connection on a thread of its own, or close it if ``proxy.max_connections`` are
        being served already. A failure here concerns this connection only: it is logged and the socket
        closed, and nothing of it is left in the bookkeeping."""
        conn: BinaryConnection | None = None
        try:
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            limit = self.config.proxy.max_connections
            with self._lock:
                served = len(self._connections)
                if served < limit:
                    conn = BinaryConnection(sock, peer, self)
                    self._connections.add(conn)
            if conn is None:
                log.warning("refusing the connection from %s: %d connections are being served "
                            "(proxy.max_connections = %d)", peer, served, limit)
                self.metrics.connection("binary", "refused")
                self.refusals.refuse(sock, peer, limit_message(served, limit), answer_binary)
                return
            self.metrics.connection("binary", "opened")
            threading.Thread(target=conn.run, name=f"dipper-client-{peer}", daemon=True).start()
        except Exception as e:  # noqa: BLE001 - OSError from the socket, RuntimeError "can't start new thread", ...
            log.error("cannot serve the connection from %s (%s: %s); closing it", peer, type(e).__name__, e)
            if conn is not None:
                self.forget(conn)
            _close(sock)

    def _all_calls(self) -> list[Any]:
        with self._lock:
            calls = [c.calls for c in self._connections]
        if self.http is not None:
            calls += [c.calls for c in self.http.clients_now()]
        return calls

    def _client_sessions(self) -> int:
        return sum(len(c.sessions) for c in self._all_calls())

    def _backend_connections(self) -> int:
        return sum(1 for c in self._all_calls() if c.backend is not None and c.backend.alive)

    def forget(self, conn: BinaryConnection) -> None:
        with self._lock:
            self._connections.discard(conn)

    def shutdown(self, drain_seconds: float | None = None) -> None:
        """Stop accepting; let each connection finish its current call and its open operations (up to
        ``drain_seconds``), then close every backend session and every connection."""
        drain = self.config.proxy.drain_seconds if drain_seconds is None else drain_seconds
        self.drain_deadline = time.monotonic() + drain
        self.stopping.set()
        for worker in self.background:  # before the backend goes: a refresh runs statements on it
            worker.stop()
        self._listener.close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.http is not None:
            self.http.shutdown()
        deadline = self.drain_deadline + 5  # connections notice the deadline within a tick
        while self.connections and time.monotonic() < deadline:
            time.sleep(0.1)
        with self._lock:
            left = list(self._connections)
        for conn in left:  # stuck in a call that outlived the drain: cut it
            log.warning("closing the connection from %s, still busy after the drain period", conn.peer)
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.decision_log.close()
        self.metrics.stop()
        log.info("proxy stopped")


def _close(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        pass


def _tls_context(cert: str, key: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as e:
        raise ConfigError(f"proxy.tls_cert / proxy.tls_key cannot be loaded: {e}") from None
    return context
