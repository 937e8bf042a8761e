"""The proxy's Prometheus metrics (issue 18), scraped over HTTP after real statements through a real proxy in
front of the Spark Thrift Server: each number moves by exactly what the statements did."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from proxy.metrics import OUTCOMES, outcome_label
from proxy.server import ProxyServer
from tests.conftest import Stack, hive_cursor
from tests.proxy_support import free_port, proxy_config, start_proxy
from tests.test_proxy import PRUNING


def scrape(server: ProxyServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def settled(server: ProxyServer) -> dict:
    """A scrape once the binary connections closed by their clients have been let go (the server notices a
    closed connection within a tick)."""
    deadline = time.monotonic() + 10
    while True:
        samples = scrape(server)
        if value(samples, "dipper_client_connections", transport="binary") == 0 or time.monotonic() > deadline:
            return samples
        time.sleep(0.1)


@pytest.mark.parametrize("record, label", [
    ({"outcome": "rewritten"}, "rewritten"),
    ({"outcome": "forwarded unchanged", "decision": {"error": "boom"}}, "failed_open"),
    ({"outcome": "forwarded unchanged", "decision": {}}, "unchanged"),
    ({"outcome": "passed through: skipping disabled in this session"}, "unchanged"),
    ({"outcome": "refused: the statement would read 10 MB"}, "refused"),
    ({"outcome": "answered from statistics"}, "answered_from_statistics"),
    ({"outcome": "fell back to the original: the rewritten statement failed on Spark"}, "fell_back"),
    ({"outcome": "cancelled: the client disconnected before the statement finished"}, "cancelled"),
    ({"outcome": "failed: lost the connection"}, "failed"),
    ({"outcome": "the rewritten statement raised a data error (SQLSTATE 22012), which ..."}, "rewritten"),
    ({"outcome": "explained (dry run, nothing executed)"}, None),
])
def test_every_outcome_has_its_label(record: dict, label: str | None) -> None:
    assert outcome_label(record) == label
    assert label is None or label in OUTCOMES


@pytest.fixture(scope="module")
def watched(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ProxyServer, str]]:
    database = stack.database("tpch", "tuned")
    config = proxy_config(stack.config, tmp_path_factory.mktemp("metrics"), metrics_port=free_port(),
                          http_port=free_port())
    server = start_proxy(config, stack.stats_store("tpch", "tuned"))
    yield server, database
    server.shutdown(drain_seconds=2)


@pytest.mark.spark
def test_metrics_move_with_the_statements(stack: Stack, watched: tuple[ProxyServer, str]) -> None:
    from pyhive import hive

    server, database = watched
    before = scrape(server)
    assert all(value(before, "dipper_statements_total", outcome=o) == 0 for o in OUTCOMES)
    with hive_cursor(server.port, database) as cursor:
        open_now = scrape(server)
        assert value(open_now, "dipper_client_sessions") == 1
        assert value(open_now, "dipper_backend_connections") == 1
        assert value(open_now, "dipper_client_connections", transport="binary") == 1
        cursor.execute(PRUNING)  # rewritten
        cursor.fetchall()
        cursor.execute("SHOW TABLES")  # unchanged
        cursor.fetchall()
        cursor.execute(f"EXPLAIN SKIPPING {PRUNING}")  # virtual
        cursor.fetchall()
        cursor.execute("SET skipping.max_scan_bytes = 1")  # virtual
        with pytest.raises(Exception, match="max_scan_bytes"):
            cursor.execute(PRUNING)  # refused
    conn = hive.connect(host="127.0.0.1", port=server.http.port, scheme="http", username="m",  # type: ignore[union-attr]
                        database=database)
    try:
        during = settled(server)
        assert value(during, "dipper_client_connections", transport="http") == 1
        assert value(during, "dipper_client_sessions") == 1  # the binary client's session is closed
        cursor = conn.cursor()
        cursor.execute(PRUNING)  # rewritten, over HTTP
        cursor.fetchall()
    finally:
        conn.close()
    after = settled(server)
    assert value(after, "dipper_statements_total", outcome="rewritten") == 2
    assert value(after, "dipper_statements_total", outcome="unchanged") == 3  # SHOW TABLES, pyhive's two USE
    assert value(after, "dipper_statements_total", outcome="virtual") == 2
    assert value(after, "dipper_statements_total", outcome="refused") == 1
    assert value(after, "dipper_statements_total", outcome="failed_open") == 0
    # Every statement rewritten, unchanged or refused was timed by the rewriter (the dry run too).
    assert value(after, "dipper_rewrite_seconds_count") == 5
    files_before, files_after = (value(after, "dipper_files_total", stage=s) for s in ("before", "after"))
    bytes_before, bytes_after = (value(after, "dipper_bytes_total", stage=s) for s in ("before", "after"))
    assert files_before > files_after > 0 and bytes_before > bytes_after > 0
    assert value(after, "dipper_files_without_statistics", table=f"{database}.lineitem") == 0
    assert value(after, "dipper_client_sessions") == 0 and value(after, "dipper_backend_connections") == 0
    assert value(after, "dipper_backend_errors_total") == 0


def delta(after: dict, before: dict, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def poll_to_end(cursor: object) -> int:
    from TCLIService.ttypes import TOperationState as S

    deadline = time.monotonic() + 120
    while (state := cursor.poll().operationState) in (S.INITIALIZED_STATE, S.PENDING_STATE, S.RUNNING_STATE):  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, "the statement did not end"
        time.sleep(0.05)
    return state


@pytest.mark.spark
def test_statements_spark_rejects_are_counted_by_error_class(stack: Stack, watched: tuple[ProxyServer, str]) -> None:
    """A statement Spark ends with an error is failed_on_spark under its error class, never rewritten or unchanged:
    a synchronous one when its reply says so, an asynchronous one when the client's poll shows it; an
    asynchronous statement that succeeds is counted when its poll shows its end."""
    from TCLIService.ttypes import TOperationState as S

    server, database = watched
    before = settled(server)
    with hive_cursor(server.port, database, user="rejected") as cursor:
        with pytest.raises(Exception, match="TABLE_OR_VIEW_NOT_FOUND"):
            cursor.execute("SELECT * FROM metrics_no_such_table")  # would be unchanged
        with pytest.raises(Exception, match="CAST_INVALID_INPUT"):  # a data error on the rewritten text
            cursor.execute("SELECT count(*) FROM lineitem WHERE l_shipdate BETWEEN DATE '1995-03-01' AND "
                           "DATE '1995-03-31' AND CAST(l_comment AS INT) > 0")
        cursor.execute("SELECT * FROM metrics_no_such_table_either", async_=True)
        assert poll_to_end(cursor) == S.ERROR_STATE
        cursor.execute(PRUNING, async_=True)
        assert poll_to_end(cursor) == S.FINISHED_STATE
        cursor.fetchall()
    after = settled(server)
    assert delta(after, before, "dipper_statements_total", outcome="failed_on_spark") == 3
    assert delta(after, before, "dipper_statements_failed_on_spark_total", error_class="TABLE_OR_VIEW_NOT_FOUND") == 2
    assert delta(after, before, "dipper_statements_failed_on_spark_total", error_class="CAST_INVALID_INPUT") == 1
    assert delta(after, before, "dipper_statements_total", outcome="rewritten") == 1  # the asynchronous PRUNING
    assert delta(after, before, "dipper_statements_total", outcome="unchanged") == 1  # pyhive's USE
    assert delta(after, before, "dipper_statements_total", outcome="fell_back") == 0
    assert delta(after, before, "dipper_user_statements_total", user="rejected") == 5
    assert delta(after, before, "dipper_statement_seconds_count", outcome="failed_on_spark") == 3
    assert delta(after, before, "dipper_statement_seconds_count", outcome="rewritten") == 1
    # A table Spark does not know is no table without statistics.
    assert not any(name == "dipper_table_without_statistics" and "no_such" in str(labels)
                   for name, labels in after)


@pytest.mark.spark
def test_latency_process_and_statistics_metrics(stack: Stack, watched: tuple[ProxyServer, str]) -> None:
    """Every HiveServer2 call made is timed under its name; the process's memory, descriptors and threads are
    there; the store's tables have an age, and a table read without statistics is named."""
    server, database = watched
    stack.spark.sql("CREATE DATABASE IF NOT EXISTS metrics_probe")
    stack.spark.sql("CREATE TABLE IF NOT EXISTS metrics_probe.no_stats USING parquet AS SELECT 1 AS x")
    try:
        before = settled(server)
        with hive_cursor(server.port, database, user="timed") as cursor:
            cursor.execute("SELECT count(*) FROM metrics_probe.no_stats")
            assert cursor.fetchall() == [(1,)]
            cursor.execute(PRUNING)
            cursor.fetchall()
        after = settled(server)
    finally:
        stack.spark.sql("DROP TABLE IF EXISTS metrics_probe.no_stats")
    for call, at_least in (("OpenSession", 1), ("ExecuteStatement", 3), ("FetchResults", 2),
                           ("GetResultSetMetadata", 1), ("CloseOperation", 1), ("CloseSession", 1)):
        assert delta(after, before, "dipper_call_seconds_count", call=call) >= at_least, call
        assert delta(after, before, "dipper_call_seconds_sum", call=call) > 0, call
    assert value(after, "dipper_call_seconds_bucket", call="ExecuteStatement", le="+Inf") == \
        value(after, "dipper_call_seconds_count", call="ExecuteStatement")
    assert value(after, "process_resident_memory_bytes") > 50e6  # a Python process with pyarrow and numpy loaded
    assert value(after, "process_open_fds") > 0 and value(after, "process_cpu_seconds_total") > 0
    assert value(after, "dipper_threads") >= 3  # the main thread, the accept loop, the metrics server
    assert value(after, "dipper_backend_up") == 1
    age = value(after, "dipper_table_statistics_age_seconds", table=f"{database}.lineitem")
    assert ("dipper_table_statistics_age_seconds", (("table", f"{database}.lineitem"),)) in after
    assert 0 <= age < 24 * 3600
    assert value(after, "dipper_tables_with_statistics") >= 8  # TPC-H's tables
    assert value(after, "dipper_table_without_statistics", table="metrics_probe.no_stats", why="not_collected") == 1
    assert value(after, "dipper_key_cache_entries") >= 0 and value(after, "dipper_statistics_cache_tables") >= 1


def test_refused_connections_and_failed_handshakes_are_counted(tmp_path: Path) -> None:
    """One connection more than proxy.max_connections is refused, and counted, on either transport; a client that
    is not one of the transport's fails its handshake, and is counted (no Spark needed)."""
    import socket

    from tests.proxy_support import read_until_closed, standalone_proxy, wait_for

    server = standalone_proxy(tmp_path, max_connections=1, metrics_port=free_port(), http_port=free_port())
    try:
        held = socket.create_connection(("127.0.0.1", server.port))
        wait_for(lambda: value(scrape(server), "dipper_connections_total", transport="binary", event="opened") == 1,
                 "the first connection to be served", timeout=10)
        with socket.create_connection(("127.0.0.1", server.port)) as extra:
            assert read_until_closed(extra) == b""  # closed at once
        held.close()
        wait_for(lambda: server.connections == 0, "the first connection to be let go", timeout=10)
        with socket.create_connection(("127.0.0.1", server.port)) as garbage:
            garbage.sendall(b"\xff\xff\xff\xff")
            read_until_closed(garbage)
        assert server.http is not None
        with socket.create_connection(("127.0.0.1", server.http.port)) as binary_on_http:
            binary_on_http.sendall(b"\x01\x00\x00\x00\x05PLAIN")  # a SASL start: a binary-transport client
            read_until_closed(binary_on_http)
        # One connection takes the HTTP port's one slot, once the connection before has let it go. A refused
        # connection is answered (proxy/refusal.py) and stays open up to 5 s for its request, so waiting for a
        # close cannot tell it from a served one: wait for the slot instead.
        http = server.http
        wait_for(lambda: http.slots._value == 1, "the HTTP port's slot to be let go", timeout=10)  # noqa: SLF001
        held_http = socket.create_connection(("127.0.0.1", server.http.port))
        with socket.create_connection(("127.0.0.1", server.http.port)) as extra:
            assert read_until_closed(extra, timeout=30) == b""  # refused: it sends no request, so closed after 5 s
        held_http.close()
        wait_for(lambda: value(scrape(server), "dipper_handshake_failures_total", transport="binary",
                               reason="protocol") == 1, "the bad handshake to be counted", timeout=10)
        samples = scrape(server)
        assert value(samples, "dipper_connections_total", transport="binary", event="refused") == 1
        assert value(samples, "dipper_connections_total", transport="binary", event="opened") == 2
        assert value(samples, "dipper_connections_total", transport="http", event="refused") >= 1
        assert value(samples, "dipper_handshake_failures_total", transport="http", reason="protocol") == 1
    finally:
        server.shutdown(drain_seconds=1)


def test_users_beyond_the_cap_are_other() -> None:
    from proxy.metrics import USERS_CAP, Metrics

    metrics = Metrics()
    for i in range(USERS_CAP + 5):
        metrics.observe({"outcome": "forwarded unchanged", "user": f"u{i}", "time": "2024-01-01T00:00:00+00:00"})
    metrics.observe({"outcome": "forwarded unchanged", "user": "u0"})
    assert metrics.user_statements.labels("u0")._value.get() == 2  # noqa: SLF001
    assert metrics.user_statements.labels("other")._value.get() == 5  # noqa: SLF001


def test_dropped_statistics_are_named_until_collected_again() -> None:
    from proxy.metrics import Metrics

    metrics = Metrics()
    metrics.observe({"outcome": "forwarded unchanged", "user": "u", "statistics_dropped": ["db.t"]})
    assert metrics.tables_without_statistics() == {"db.t": "dropped"}
