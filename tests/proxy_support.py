"""What the proxy tests share: a proxy in front of the shared Thrift Server (or of no server at all), its
decision log, clients that speak the wire format by hand, and a reader of the files the backend actually read."""

from __future__ import annotations

import json
import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from TCLIService import TCLIService
from TCLIService import ttypes as t
from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.transport.TSocket import TSocket
from thrift.transport.TTransport import TBufferedTransport

from dipper.config import Config, load
from dipper.environment import free_port
from proxy.server import ProxyServer
from stats.freshness import Lister
from stats.loader import StatsLoader
from stats.store import StatsStore


def proxy_config(base: Config, log_dir: Path, **proxy: Any) -> Config:
    """A proxy on a free port, logging to ``log_dir``; no metrics unless ``metrics_port`` is given (the default
    port of conf/dipper.toml would collide between proxies)."""
    return base.replace("proxy", **{"port": free_port(), "decision_log": log_dir / "decisions.jsonl",
                                    "metrics_port": 0, **proxy})


def start_proxy(config: Config, store: Any) -> ProxyServer:
    return ProxyServer(config, StatsLoader(store, Lister(0))).start()


def standalone_proxy(base: Path, backend_port: int | None = None, backend: dict[str, Any] | None = None,
                     **proxy: Any) -> ProxyServer:
    """A proxy without Spark, for what happens before or around the backend: its backend is ``backend_port``
    (default: a port nothing listens on) and its statistics store is empty."""
    config = load(environ={}, base_dir=base).replace("backend", port=backend_port or free_port(), **(backend or {}))
    return start_proxy(proxy_config(config, base, **proxy), StatsStore(base / "stats"))


def nosasl_client(port: int, timeout: float = 30) -> tuple[TCLIService.Client, TBufferedTransport]:
    """A plain thrift client of the proxy over NOSASL (as pyhive's auth='NOSASL' builds it)."""
    sock = TSocket("127.0.0.1", port)
    sock.setTimeout(timeout * 1000)
    transport = TBufferedTransport(sock)
    transport.open()
    return TCLIService.Client(TBinaryProtocol(transport)), transport


def open_session(client: TCLIService.Client) -> t.TOpenSessionResp:
    return client.OpenSession(t.TOpenSessionReq(client_protocol=t.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V6,
                                                username="probe"))


def sasl_plain_handshake(s: socket.socket) -> None:
    """Authenticate a raw socket with SASL PLAIN, as Hive JDBC and pyhive's auth='NONE' do."""
    s.sendall(b"\x01" + struct.pack(">i", 5) + b"PLAIN" + b"\x02" + struct.pack(">i", 5) + b"\0u\0pw")
    assert s.recv(5)[0] == 5  # COMPLETE (the proxy answers even when its backend is down)


def read_until_closed(s: socket.socket, timeout: float = 10) -> bytes | None:
    """Everything the server sends before closing; None if it has not closed within ``timeout`` seconds."""
    out = b""
    deadline = time.monotonic() + timeout
    s.settimeout(timeout)
    while time.monotonic() < deadline:
        try:
            chunk = s.recv(4096)
        except TimeoutError:
            return None
        except ConnectionResetError:
            return out
        if not chunk:
            return out
        out += chunk
    return None


def wait_for(condition: Callable[[], Any], what: str, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def decisions(config: Config) -> list[dict[str, Any]]:
    path = config.proxy.decision_log
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def files_read_since(spark: Any, execution_id: int) -> int:
    """Files the backend's file scans read in SQL executions newer than ``execution_id`` (from Spark's
    SQL status store, where executions run for Thrift Server clients are recorded too)."""
    store = spark._jsparkSession.sharedState().statusStore()  # noqa: SLF001
    total = 0
    seen: set[int] = set()  # adaptive execution re-lists a plan's metrics each time it re-plans
    for execution in _executions(spark, store):
        if execution.executionId() <= execution_id:
            continue
        values = store.executionMetrics(execution.executionId())
        metrics = spark._jvm.scala.jdk.javaapi.CollectionConverters.asJava(execution.metrics())  # noqa: SLF001
        for i in range(metrics.size()):
            m = metrics.get(i)
            if m.name() == "number of files read" and values.contains(m.accumulatorId()) \
                    and m.accumulatorId() not in seen:
                seen.add(m.accumulatorId())
                total += int(str(values.apply(m.accumulatorId())).replace(",", ""))
    return total


def executions_since(spark: Any, execution_id: int) -> list[str]:
    """The descriptions (for Thrift Server clients: the statement text) of SQL executions newer than ``execution_id``."""
    store = spark._jsparkSession.sharedState().statusStore()  # noqa: SLF001
    return [str(e.description()) for e in _executions(spark, store) if e.executionId() > execution_id]


def last_execution_id(spark: Any) -> int:
    store = spark._jsparkSession.sharedState().statusStore()  # noqa: SLF001
    return max((e.executionId() for e in _executions(spark, store)), default=-1)


def _executions(spark: Any, store: Any) -> list[Any]:
    seq = spark._jvm.scala.jdk.javaapi.CollectionConverters.asJava(store.executionsList())  # noqa: SLF001
    return [seq.get(i) for i in range(seq.size())]


SLOW = ("SELECT count(*) FROM lineitem a CROSS JOIN lineitem b "
        "WHERE a.l_comment < b.l_comment AND a.l_extendedprice * b.l_quantity > 0")


def assert_abandoned_query_cancelled(stack: Any, server: Any, user: str, baseline: int, cursor: Any,
                                     vanish: Any) -> None:
    """Run ``SLOW`` on ``cursor`` (a client ``user`` of ``server``, opened when Spark had ``baseline`` sessions) and
    make the client vanish with ``vanish()`` once Spark runs it: its backend session closes, Spark's job ends, and
    the decision log says the statement was cancelled."""
    import threading

    from backend.thrift_server import open_sessions

    def run() -> None:
        try:
            cursor.execute(SLOW)
        except Exception:  # noqa: BLE001 - the connection is closed under it on purpose
            pass

    threading.Thread(target=run, daemon=True).start()
    tracker = stack.spark.sparkContext.statusTracker()
    wait_for(lambda: bool(tracker.getActiveJobsIds()), "the slow query to start on Spark", timeout=60)
    assert open_sessions(stack.thrift_server) == baseline + 1
    vanish()
    wait_for(lambda: open_sessions(stack.thrift_server) == baseline, "the backend session to close", timeout=30)
    wait_for(lambda: not tracker.getActiveJobsIds(), "the abandoned query to stop running on Spark", timeout=30)
    [record] = [r for r in decisions(server.config) if r["user"] == user and r["statement"] == SLOW]
    assert record["outcome"] == "cancelled: the client disconnected before the statement finished"
