"""The proxy's Prometheus metrics (``proxy.metrics_port``; 0, the default, serves none): what an operator running
Dipper in front of a shared Spark watches. Every metric is documented in the README ("Metrics").

Each proxy has a registry of its own (a process may run several, as the tests do). Statement outcomes, rewrite
times, files and bytes and statistics coverage are read from the records the decision log writes
(:meth:`Metrics.observe`: one place, whatever path the statement took); what has no record is counted where it
happens (virtual statements, backend errors, reconnects); open sessions and backend connections are counted
when scraped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from dipper.errors import EnvironmentProblem

log = logging.getLogger("dipper.proxy")

# The outcome label of each decision-log outcome (by its first words); the README lists them.
OUTCOMES = ("rewritten", "unchanged", "failed_open", "refused", "virtual", "answered_from_statistics",
            "fell_back", "cancelled", "failed")
_BY_PREFIX = (
    ("rewritten", "rewritten"), ("the rewritten statement raised a data error", "rewritten"),
    ("forwarded unchanged", "unchanged"), ("passed through", "unchanged"), ("refused", "refused"),
    ("answered from statistics", "answered_from_statistics"), ("fell back", "fell_back"),
    ("cancelled", "cancelled"), ("failed", "failed"),
)


def outcome_label(record: dict[str, Any]) -> str | None:
    """The ``outcome`` label of a decision-log record; None for a dry run (counted as a virtual statement)."""
    outcome = str(record.get("outcome", ""))
    if outcome.startswith("explained"):
        return None
    decision = record.get("decision") or {}
    if decision.get("error") and outcome in ("forwarded unchanged",):
        return "failed_open"
    for prefix, label in _BY_PREFIX:
        if outcome.startswith(prefix):
            return label
    return "unchanged"


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.statements = Counter("dipper_statements", "Statements by outcome", ["outcome"], registry=r)
        for outcome in OUTCOMES:
            self.statements.labels(outcome)  # every series present from the start, at 0
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
        self.uncovered = Gauge("dipper_files_without_statistics", "Files of a table the statistics do not "
                               "describe (always read), as the last statement on it found", ["table"], registry=r)
        self.client_sessions = Gauge("dipper_client_sessions", "Client sessions open", registry=r)
        self.backend_connections = Gauge("dipper_backend_connections", "Connections to the Spark Thrift Server "
                                         "open", registry=r)
        self.client_connections = Gauge("dipper_client_connections", "Client connections served (binary "
                                        "connections and HTTP clients)", ["transport"], registry=r)
        self._server: Any = None

    def count_open(self, sessions: Callable[[], int], backends: Callable[[], int],
                   binary: Callable[[], int], http: Callable[[], int]) -> None:
        """Gauges computed when scraped, from the server's own bookkeeping."""
        self.client_sessions.set_function(sessions)
        self.backend_connections.set_function(backends)
        self.client_connections.labels("binary").set_function(binary)
        self.client_connections.labels("http").set_function(http)

    def observe(self, record: dict[str, Any]) -> None:
        """Count a statement from its decision-log record."""
        label = outcome_label(record)
        if label is not None:
            self.statements.labels(label).inc()
        decision = record.get("decision")
        if not decision:
            return
        if "elapsed_ms" in decision:
            self.rewrite_seconds.observe(float(decision["elapsed_ms"]) / 1000)
        if label in ("refused", "cancelled", "failed", None):
            return  # not read (or not to the end): no files or bytes read on its account
        for table in decision.get("tables", []):
            if not table.get("has_stats"):
                continue
            self.files.labels("before").inc(table.get("files_total", 0))
            self.files.labels("after").inc(table.get("files_kept", 0))
            self.bytes.labels("before").inc(table.get("bytes_total", 0))
            self.bytes.labels("after").inc(table.get("bytes_kept", 0))
            self.uncovered.labels(table.get("table", "?")).set(table.get("unknown_files", 0))

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
