"""The proxy's Prometheus metrics (``proxy.metrics_port``; 0 serves none): what an operator running Dipper in
front of a shared Spark watches and sizes it by. Every metric is documented in docs/guide.md ("Metrics").

Each proxy has a registry of its own (a process may run several, as the tests do), with the process's own
memory, CPU and file descriptors (prometheus_client's ``ProcessCollector`` and ``PlatformCollector``). A
statement is counted once, when its end is known: from the record the decision log writes
(:meth:`Metrics.observe`: one place, whatever path the statement took), or, for an asynchronous client's statement
(whose record is written when it is submitted), when the client's poll shows its end (:meth:`Metrics.called`).
What has no record is counted where it happens (HiveServer2 calls and their latency, virtual statements,
connections, handshakes, backend errors, reconnects); what the proxy holds (sessions, connections, caches,
threads, the statistics store's tables and their age, the statistics workers' runs) is read when scraped.

Label values are bounded, so a client cannot grow the registry without limit: call names are HiveServer2's
(else ``other``), Spark error classes and users are counted by name up to :data:`ERROR_CLASSES_CAP` and
:data:`USERS_CAP` distinct values and as ``other`` beyond, tables listed without statistics up to
:data:`TABLES_CAP`.
"""

from __future__ import annotations

import datetime as dt
import logging
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import (CollectorRegistry, Counter, Gauge, Histogram, PlatformCollector, ProcessCollector,
                               start_http_server)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from TCLIService import TCLIService
from TCLIService import ttypes as t

from dipper.errors import BackendError, EnvironmentProblem
from proxy.spark_errors import OK_STATUS, error_class
from proxy.wire import MessageTimeout, ProtocolError, decode_reply

log = logging.getLogger("dipper.proxy")

# The outcome label of each decision-log outcome (by its first words); docs/guide.md lists them.
OUTCOMES = ("rewritten", "unchanged", "failed_open", "refused", "virtual", "answered_from_statistics",
            "fell_back", "cancelled", "failed", "failed_on_spark")
_BY_PREFIX = (
    ("rewritten", "rewritten"), ("the rewritten statement raised a data error", "rewritten"),
    ("forwarded unchanged", "unchanged"), ("passed through", "unchanged"), ("refused", "refused"),
    ("answered from statistics", "answered_from_statistics"), ("fell back", "fell_back"),
    ("cancelled", "cancelled"), ("failed", "failed"),
)
# HiveServer2's calls, the values of the ``call`` label; a call of another name (a client's bug) is ``other``.
CALLS = frozenset(name for name in dir(TCLIService.Iface) if not name.startswith("_"))
# Bounds on label values a client decides (see the module docstring). 50 users: a team's analysts and a few
# service accounts each get a series; a proxy behind a BI tool that passes on thousands of end users sees the
# first 50 by name and the rest as "other" (the decision log has every user). Spark has some hundreds of error
# classes; a workload meets a few dozen.
USERS_CAP = 50
ERROR_CLASSES_CAP = 100
TABLES_CAP = 200
PENDING_CAP = 10_000  # asynchronous statements whose end is not known yet (their clients' polls tell it)
OTHER = "other"

_CALL_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                 300.0)
_STATEMENT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
                      1800.0, 3600.0)


def outcome_label(record: dict[str, Any]) -> str | None:
    """The ``outcome`` label of a decision-log record; None for a dry run (counted as a virtual statement). A
    statement Spark ended with an error (``failed_on_spark`` in the record, ``proxy/spark_errors.py``) is
    ``failed_on_spark``, whatever the proxy did with its text."""
    outcome = str(record.get("outcome", ""))
    if outcome.startswith("explained"):
        return None
    if record.get("failed_on_spark") is not None:
        return "failed_on_spark"
    decision = record.get("decision") or {}
    if decision.get("error") and outcome in ("forwarded unchanged",):
        return "failed_open"
    for prefix, label in _BY_PREFIX:
        if outcome.startswith(prefix):
            return label
    return "unchanged"


class _Capped:
    """The label value for a name: the name itself for the first ``cap`` distinct names, ``other`` after."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, name: str) -> str:
        with self._lock:
            if name in self._seen:
                return name
            if len(self._seen) < self.cap and name != OTHER:
                self._seen.add(name)
                return name
        return OTHER


class _Pending:
    """An asynchronous statement submitted, whose end its client's poll will show."""

    __slots__ = ("label", "user", "started", "tables")

    def __init__(self, label: str, user: str, started: float, tables: list[str]) -> None:
        self.label, self.user, self.started, self.tables = label, user, started, tables


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        ProcessCollector(registry=r)  # process_resident_memory_bytes, process_cpu_seconds_total, process_open_fds...
        PlatformCollector(registry=r)  # python_info
        self.statements = Counter("dipper_statements", "Statements by outcome", ["outcome"], registry=r)
        for outcome in OUTCOMES:
            self.statements.labels(outcome)  # every series present from the start, at 0
        self.failed_on_spark = Counter("dipper_statements_failed_on_spark", "Statements Spark ended with an error, "
                                       "by Spark's error class", ["error_class"], registry=r)
        self.user_statements = Counter("dipper_user_statements", f"Statements by user (the first {USERS_CAP} users "
                                       "by name, the rest as 'other')", ["user"], registry=r)
        self.statement_seconds = Histogram(
            "dipper_statement_seconds", "Wall time of a statement from its submission to its end as the proxy "
            "knows it (for an asynchronous client: the poll that showed its end)", ["outcome"], registry=r,
            buckets=_STATEMENT_BUCKETS)
        self.call_seconds = Histogram("dipper_call_seconds", "Time the proxy took to answer a HiveServer2 call, by "
                                      "call name (relay to Spark included)", ["call"], registry=r,
                                      buckets=_CALL_BUCKETS)
        self.rewrite_seconds = Histogram(
            "dipper_rewrite_seconds", "Time the rewriter took per statement", registry=r,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0))
        self.files = Counter("dipper_files", "Files of the tables statements read, before and after skipping",
                             ["stage"], registry=r)
        self.bytes = Counter("dipper_bytes", "Bytes of the tables statements read, before and after skipping",
                             ["stage"], registry=r)
        for stage in ("before", "after"):
            self.files.labels(stage)
            self.bytes.labels(stage)
        self.backend_errors = Counter("dipper_backend_errors", "Calls to the Spark Thrift Server that failed "
                                      "(unreachable, timed out, connection lost)", registry=r)
        self.backend_reconnects = Counter("dipper_backend_reconnects", "Backend connections opened again for a "
                                          "client whose earlier one was lost", registry=r)
        self.backend_up = Gauge("dipper_backend_up", "1 if the last call that needed the Spark Thrift Server found "
                                "it (any client's), 0 if it failed", registry=r)
        self.connections = Counter("dipper_connections", "Client connections by transport: opened (binary "
                                   "connections, HTTP clients) and refused (proxy.max_connections, shutting down)",
                                   ["transport", "event"], registry=r)
        self.handshake_failures = Counter("dipper_handshake_failures", "Client connections that failed before their "
                                          "first call, by transport and reason (auth: the backend refused the "
                                          "credentials; tls; protocol: not a HiveServer2 client of this transport; "
                                          "timeout; other)", ["transport", "reason"], registry=r)
        for transport in ("binary", "http"):
            for event in ("opened", "refused"):
                self.connections.labels(transport, event)
        self.uncovered = Gauge("dipper_files_without_statistics", "Files of a table the statistics do not "
                               "describe (always read), as the last statement on it found", ["table"], registry=r)
        self.client_sessions = Gauge("dipper_client_sessions", "Client sessions open", registry=r)
        self.backend_connections = Gauge("dipper_backend_connections", "Connections to the Spark Thrift Server "
                                         "open", registry=r)
        self.client_connections = Gauge("dipper_client_connections", "Client connections served (binary "
                                        "connections and HTTP clients)", ["transport"], registry=r)
        self.threads = Gauge("dipper_threads", "Python threads of the proxy process (one per binary connection "
                             "and HTTP request being served, plus a few of its own)", registry=r)
        self.threads.set_function(threading.active_count)
        self._users = _Capped(USERS_CAP)
        self._error_classes = _Capped(ERROR_CLASSES_CAP)
        self._lock = threading.Lock()
        self._pending: OrderedDict[str, _Pending] = OrderedDict()  # by the client's operation handle (short id)
        self._unstatted: OrderedDict[str, str] = OrderedDict()  # table read without statistics -> why
        self._server: Any = None

    # -- what the proxy holds, read when scraped -----------------------------------------------------------
    def count_open(self, sessions: Callable[[], int], backends: Callable[[], int],
                   binary: Callable[[], int], http: Callable[[], int]) -> None:
        """Gauges computed when scraped, from the server's own bookkeeping."""
        self.client_sessions.set_function(sessions)
        self.backend_connections.set_function(backends)
        self.client_connections.labels("binary").set_function(binary)
        self.client_connections.labels("http").set_function(http)

    def watch(self, server: Any) -> None:
        """Read, when scraped, what ``server`` (a :class:`proxy.server.ProxyServer`) holds: its statistics store's
        tables and their age, its statistics workers' runs, its caches."""
        self.registry.register(_Held(server, self))

    # -- statements ----------------------------------------------------------------------------------------
    def observe(self, record: dict[str, Any]) -> None:
        """Count a statement from its decision-log record. An asynchronous statement's (``asynchronous`` in the
        record) is counted when its client's poll shows its end; a later record of the same operation (the
        original run after its rewritten form failed) changes what it will be counted as."""
        label = read = outcome_label(record)
        decision = record.get("decision") or {}
        if "elapsed_ms" in decision:
            self.rewrite_seconds.observe(float(decision["elapsed_ms"]) / 1000)
        unstatted = [tb.get("table", "?") for tb in decision.get("tables", [])
                     if not tb.get("has_stats") and tb.get("refused") == "no statistics"]
        with self._lock:
            for table in record.get("statistics_dropped") or ():
                self._not_described(table, "dropped")
            operation = record.get("operation")
            if operation is not None and label is not None:
                pending = self._pending.get(operation)
                if record.get("asynchronous") and label in ("rewritten", "unchanged"):
                    self._pending[operation] = _Pending(label, str(record.get("user", "")), _started(record),
                                                        unstatted)
                    self._evict()
                    label = None
                elif pending is not None:  # the same statement, run again: counted when the poll shows its end
                    pending.label = label if label != "failed_on_spark" else pending.label
                    label = None
        if label is not None:
            self._count(label, str(record.get("user", "")), _started(record),
                        _spark_error_class(record) if label == "failed_on_spark" else None, unstatted)
        if read in ("refused", "cancelled", "failed", "failed_on_spark", None):
            return  # not read (or not to the end): no files or bytes read on its account
        for table in decision.get("tables", []):
            if not table.get("has_stats"):
                continue
            self.files.labels("before").inc(table.get("files_total", 0))
            self.files.labels("after").inc(table.get("files_kept", 0))
            self.bytes.labels("before").inc(table.get("bytes_total", 0))
            self.bytes.labels("after").inc(table.get("bytes_kept", 0))
            self.uncovered.labels(table.get("table", "?")).set(table.get("unknown_files", 0))

    def virtual(self, user: str) -> None:
        """A statement the proxy answered itself (``EXPLAIN SKIPPING``, ``SHOW SKIPPING LOG``, ``SET skipping.*``)."""
        self.statements.labels("virtual").inc()
        self.user_statements.labels(self._users(user)).inc()

    def _count(self, label: str, user: str, started: float | None, spark_class: str | None,
               unstatted: list[str]) -> None:
        self.statements.labels(label).inc()
        self.user_statements.labels(self._users(user)).inc()
        if started is not None:
            self.statement_seconds.labels(label).observe(max(time.time() - started, 0.0))
        if label == "failed_on_spark":
            self.failed_on_spark.labels(self._error_classes(spark_class or OTHER)).inc()
            return  # Spark may have refused because the table does not exist: not a table without statistics
        with self._lock:
            for table in unstatted:
                self._not_described(table, "not_collected")

    def _not_described(self, table: str, why: str) -> None:
        """Remember ``table`` as read without statistics (the caller holds the lock)."""
        if table in self._unstatted or len(self._unstatted) < TABLES_CAP:
            self._unstatted[table] = why

    def _evict(self) -> None:
        """Bound the statements waiting for their end (the caller holds the lock): the oldest is counted as it
        was submitted (its client never polled its end, nor closed it)."""
        while len(self._pending) > PENDING_CAP:
            _, p = self._pending.popitem(last=False)
            self._count(p.label, p.user, None, None, [])

    # -- HiveServer2 calls -----------------------------------------------------------------------------------
    def called(self, name: str, request: Any, reply: Any, started: float, backend_alive: bool) -> None:
        """A call was answered (``reply``: the response, decoded or as bytes; None if the call failed): its time,
        and the end of an asynchronous statement its reply shows."""
        self.call_seconds.labels(name if name in CALLS else OTHER).observe(time.perf_counter() - started)
        if reply is not None and backend_alive:
            self.backend_up.set(1)
        if not self._pending or name not in ("GetOperationStatus", "CloseOperation", "CancelOperation"):
            return
        handle = getattr(request, "operationHandle", None)
        guid = handle.operationId.guid if handle is not None and handle.operationId is not None else None
        if guid is None:
            return
        key = guid.hex()[:12]  # proxy.session.short_id, as the record names it
        with self._lock:
            pending = self._pending.get(key)
        if pending is None:
            return
        if name == "GetOperationStatus":
            state = _status(reply)
            if state is None or state.operationState not in _ENDED:
                return
            label, spark_class = pending.label, None
            if state.operationState in (t.TOperationState.ERROR_STATE, t.TOperationState.TIMEDOUT_STATE):
                label, spark_class = "failed_on_spark", error_class(state.errorMessage) or OTHER
            elif state.operationState == t.TOperationState.CANCELED_STATE:
                label = "cancelled"
        else:  # closed or cancelled before its end was polled
            label, spark_class = ("cancelled" if name == "CancelOperation" else pending.label), None
        with self._lock:
            if self._pending.pop(key, None) is None:
                return  # counted by another thread meanwhile
        self._count(label, pending.user, pending.started, spark_class, pending.tables)

    def abandoned(self, guids: Iterable[bytes]) -> None:
        """A client went away, its operations cancelled: those whose end it had not polled count as cancelled."""
        if not self._pending:
            return
        with self._lock:
            gone = [p for p in (self._pending.pop(g.hex()[:12], None) for g in guids) if p is not None]
        for p in gone:
            self._count("cancelled", p.user, p.started, None, [])

    def backend_error(self) -> None:
        self.backend_errors.inc()
        self.backend_up.set(0)

    # -- connections -----------------------------------------------------------------------------------------
    def connection(self, transport: str, event: str) -> None:
        """A connection ``opened`` or ``refused`` on ``transport`` (``binary`` or ``http``)."""
        self.connections.labels(transport, event).inc()

    def handshake_failed(self, transport: str, error: BaseException | str) -> None:
        """A connection that failed before its first call: ``error``, or the reason's name."""
        if isinstance(error, str):
            reason = error
        elif isinstance(error, ssl.SSLError):
            reason = "tls"
        elif isinstance(error, (MessageTimeout, TimeoutError)):
            reason = "timeout"
        elif isinstance(error, ProtocolError):
            reason = "protocol"
        elif isinstance(error, BackendError):
            reason = "auth"
        else:
            reason = OTHER
        self.handshake_failures.labels(transport, reason).inc()

    # -- serving ---------------------------------------------------------------------------------------------
    def serve(self, host: str, port: int) -> int:
        """Serve ``/metrics`` on ``host:port``; returns the port."""
        try:
            server, _ = start_http_server(port, addr=host, registry=self.registry)
        except OSError as e:
            raise EnvironmentProblem(f"the proxy cannot serve metrics on {host}:{port}: {e.strerror or e} (set "
                                     "proxy.metrics_port or DIPPER_PROXY_METRICS_PORT to another port, or 0 for "
                                     "none)") from None
        self._server = server
        log.info("metrics on http://%s:%d/metrics", host, server.server_address[1])
        return int(server.server_address[1])

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def tables_without_statistics(self) -> dict[str, str]:
        with self._lock:
            return dict(self._unstatted)


_ENDED = {t.TOperationState.FINISHED_STATE, t.TOperationState.CANCELED_STATE, t.TOperationState.CLOSED_STATE,
          t.TOperationState.ERROR_STATE, t.TOperationState.TIMEDOUT_STATE}


def _status(reply: Any) -> t.TGetOperationStatusResp | None:
    """A GetOperationStatus reply, decoded if it was relayed as bytes (only for a statement whose end is awaited)."""
    if isinstance(reply, bytes):
        try:
            reply = decode_reply("GetOperationStatus", reply)
        except Exception:  # noqa: BLE001 - an exception reply, or one this Thrift cannot read: no end learnt
            return None
    if not isinstance(reply, t.TGetOperationStatusResp) or reply.status is None or \
            reply.status.statusCode not in OK_STATUS:
        return None
    return reply


def _started(record: dict[str, Any]) -> float | None:
    """When the record's statement was submitted (its ``time``), as a Unix time."""
    try:
        return dt.datetime.fromisoformat(str(record["time"])).timestamp()
    except (KeyError, ValueError):
        return None


def _spark_error_class(record: dict[str, Any]) -> str | None:
    failed = record.get("failed_on_spark")
    return failed.get("error_class") if isinstance(failed, dict) else None


class _Held(Collector):
    """Gauges and counters read, when scraped, from what the proxy holds (cheap: the statistics store's manifest
    is read once per version by the loader, the rest are counters in memory)."""

    def __init__(self, server: Any, metrics: Metrics) -> None:
        self.server = server
        self.metrics = metrics

    def collect(self) -> Iterator[Any]:
        server = self.server
        now = time.time()
        age = GaugeMetricFamily("dipper_table_statistics_age_seconds", "Seconds since the statistics job last "
                                "collected or refreshed the table's statistics (footer coverage does not reset it)",
                                labels=["table"])
        tables = GaugeMetricFamily("dipper_tables_with_statistics", "Tables the statistics store describes")
        missing = GaugeMetricFamily("dipper_table_without_statistics", "1 for each table statements read that the "
                                    "store does not describe now: dropped (the proxy dropped its statistics: DDL, "
                                    "or the catalog moved it) or not_collected (never collected, or dropped "
                                    f"elsewhere); at most {TABLES_CAP} tables, since the proxy started",
                                    labels=["table", "why"])
        try:
            snapshot = server.stats.snapshot()
        except Exception as e:  # noqa: BLE001 - an unreadable store must not make the metrics unreadable
            log.warning("metrics: the statistics store cannot be read: %s", e)
            snapshot = None
        if snapshot is not None:
            tables.add_metric([], len(snapshot.tables))
            for name, entry in sorted(snapshot.tables.items()):
                try:
                    collected = dt.datetime.fromisoformat(entry.collected_at).timestamp()
                except (TypeError, ValueError):
                    continue
                age.add_metric([name], max(now - collected, 0.0))
            for name, why in sorted(self.metrics.tables_without_statistics().items()):
                if name not in snapshot.tables:
                    missing.add_metric([name, why], 1)
        yield from (age, tables, missing)

        runs = CounterMetricFamily("dipper_statistics_upkeep_runs", "Passes of the statistics workers: "
                                   "scheduled_refresh (a refresh through the backend), footer_coverage (a table's "
                                   "new files described from their footers)", labels=["worker"])
        failures = CounterMetricFamily("dipper_statistics_upkeep_failures", "Passes of the statistics workers that "
                                       "failed, wholly or for a table (tried again later; meanwhile files are read)",
                                       labels=["worker"])
        for worker in getattr(server, "background", ()):
            name = getattr(worker, "name", None)
            if name is None:
                continue
            runs.add_metric([name], getattr(worker, "runs", 0))
            failures.add_metric([name], getattr(worker, "failures", 0))
        yield from (runs, failures)

        key_cache = server.key_cache
        yield GaugeMetricFamily("dipper_key_cache_bytes", "Bytes the exact-keys cache holds (budget: "
                                "rewriter.exact_keys_cache_bytes)", value=key_cache.nbytes)
        yield GaugeMetricFamily("dipper_key_cache_entries", "Entries (columns and results) of the exact-keys cache",
                                value=key_cache.entries)
        yield GaugeMetricFamily("dipper_statistics_cache_tables", "Tables whose statistics the proxy holds in "
                                "memory as arrays (rebuilt when the store changes)", value=server.stats.cached_tables)
        yield GaugeMetricFamily("dipper_session_cache_entries", "Spark's analyses and catalog answers the open "
                                "sessions keep (proxy.analysis_cache_seconds)", value=_session_cache_entries(server))


def _session_cache_entries(server: Any) -> int:
    total = 0
    for calls in server._all_calls():  # noqa: SLF001 - the server's own list of its clients' calls
        for session in list(calls.sessions.values()):
            total += len(session.analysed) + len(session.located) + len(session.partitions)
    return total
