"""The proxy's Prometheus metrics (issue 18), scraped over HTTP after real statements through a real proxy in
front of the Spark Thrift Server: each number moves by exactly what the statements did."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator

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
