"""Statistics that keep up with the catalog and the files (issue 14, part 4), against the shared Thrift Server
through a real proxy: a table moved behind Dipper's back (DDL sent to Spark directly, as another application
on a shared metastore would) must not originate diPs from the statistics of its old location."""

from __future__ import annotations

import decimal
from pathlib import Path

import pytest

from backend.sql_client import thrift_sql
from proxy.server import ProxyServer
from rewriter.rewrite import RewriteContext, rewrite
from stats.collect import collect
from stats.freshness import Lister
from stats.loader import StatsLoader
from stats.store import StatsStore
from tests.conftest import Stack, hive_cursor
from tests.proxy_support import decisions, proxy_config, wait_for

pytestmark = pytest.mark.spark

DB = "upkeep_test"
JOIN = (f"SELECT count(*), sum(f.v) FROM {DB}.fact f JOIN {DB}.dim d ON f.k = d.k WHERE d.tag = 'a'")


@pytest.fixture(scope="module")
def tables(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``fact`` in four files of separate key ranges; ``dim`` (keys 0-9) and, at a location of its own that no
    table uses yet, a second version of it with keys 300-309."""
    base = tmp_path_factory.mktemp("upkeep")
    second = base / "dim second version"
    statements = [
        f"DROP DATABASE IF EXISTS {DB} CASCADE", f"CREATE DATABASE {DB}",
        f"CREATE TABLE {DB}.fact (k INT, v INT) USING parquet",
        f"CREATE TABLE {DB}.dim (k INT, tag STRING) USING parquet LOCATION '{base / 'dim'}'",
        f"INSERT INTO {DB}.dim SELECT CAST(id AS INT), 'a' FROM range(0, 10)",
        f"CREATE TABLE {DB}.dim_next (k INT, tag STRING) USING parquet LOCATION '{second}'",
        f"INSERT INTO {DB}.dim_next SELECT CAST(id AS INT), 'a' FROM range(300, 310)",
        f"DROP TABLE {DB}.dim_next",  # external: its files stay, for dim to be pointed at
    ]
    statements += [f"INSERT INTO {DB}.fact SELECT /*+ REPARTITION(1) */ CAST(id AS INT), 1 "
                   f"FROM range({b * 100}, {b * 100 + 100})" for b in range(4)]
    with stack.cursor() as cursor:
        for sql in statements:
            cursor.execute(sql)
    return {"second": second}


def test_a_table_moved_behind_dippers_back_originates_no_dip(stack: Stack, tables: dict[str, Path],
                                                             tmp_path: Path) -> None:
    store = StatsStore(tmp_path / "stats")
    with thrift_sql(stack.config, "upkeep") as run:
        collect(run, store, [f"{DB}.fact", f"{DB}.dim"])
    loader = StatsLoader(store, Lister(0))
    config = proxy_config(stack.config, tmp_path)
    proxy = ProxyServer(config, loader, forget_statistics=loader.forget).start()
    try:
        with hive_cursor(proxy.port) as cursor:
            cursor.execute(JOIN)
            assert cursor.fetchall() == [(10, 10)]
        first = decisions(config)[-1]["decision"]
        fact = next(t for t in first["tables"] if t["table"] == f"{DB}.fact")
        assert (fact["files_total"], fact["files_kept"]) == (4, 1), fact  # the diP from dim kept keys 0-9 only

        with stack.cursor() as cursor:  # straight to Spark: the proxy sees nothing of it
            cursor.execute(f"ALTER TABLE {DB}.dim SET LOCATION '{tables['second']}'")
            cursor.execute(JOIN)
            truth = cursor.fetchall()
        assert truth == [(10, 10)]  # keys 300-309 now: a file the stale diP would skip holds them

        # Control: the statistics of the old location, used as they stand, would prune that file.
        stale = rewrite(JOIN, RewriteContext(loader, database="default"))
        stale_fact = next(t for t in stale.decision.tables if t.table == f"{DB}.fact")
        assert stale_fact.files_kept == 1

        with hive_cursor(proxy.port) as cursor:
            cursor.execute(JOIN)
            assert cursor.fetchall() == truth
        record = decisions(config)[-1]
        assert record["statistics_dropped"] == [f"{DB}.dim"], record
        dim = next(t for t in record["decision"]["tables"] if t["table"] == f"{DB}.dim")
        assert "now reads" in dim["refused"] and "not at" in dim["refused"], dim
        assert record["catalog_check_ms"] > 0
        assert store.snapshot().entry(f"{DB}.dim") is None and store.snapshot().entry(f"{DB}.fact") is not None
    finally:
        proxy.shutdown()


EVENTS = f"{DB}.events"


def test_new_files_are_covered_from_footers_within_seconds(stack: Stack, tables: dict[str, Path],
                                                           tmp_path: Path) -> None:
    """A batch inserted through the proxy is read at once (unknown files), described from its Parquet footers
    in the background within seconds, pruned from then on, and the table originates diPs again; the footer
    bounds contain what Spark reads from the same files, and the scheduled refresh replaces them with full
    rows (range-sets), reading only those files."""
    from stats.upkeep import FooterCoverage, ScheduledRefresh

    with stack.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {EVENTS} (id BIGINT, amount DECIMAL(10,2), at TIMESTAMP, name STRING, "
                       "ratio DOUBLE, day DATE) USING parquet PARTITIONED BY (day)")
        for b in range(3):
            cursor.execute(f"INSERT INTO {EVENTS} SELECT /*+ REPARTITION(1) */ id, id / 4, TIMESTAMP'2025-01-01 00:00:00' "
                           f"+ make_interval(0, 0, 0, 0, id), concat('n', id), id / 3.0, DATE'2025-01-01' + "
                           f"CAST(id % 2 AS INT) FROM range({b * 100}, {b * 100 + 100})")
    store = StatsStore(tmp_path / "stats")
    with thrift_sql(stack.config, "upkeep") as run:
        collect(run, store, [EVENTS, f"{DB}.fact"])
    coverage = FooterCoverage(store)
    loader = StatsLoader(store, Lister(0), on_unknown=coverage.notice)
    config = proxy_config(stack.config, tmp_path)
    proxy = ProxyServer(config, loader, forget_statistics=loader.forget).start()
    query = f"SELECT count(*), sum(amount) FROM {EVENTS} WHERE id BETWEEN 1010 AND 1020"
    join = f"SELECT count(*) FROM {DB}.fact f JOIN {EVENTS} e ON f.k = e.id WHERE e.id BETWEEN 1010 AND 1020"
    try:
        with hive_cursor(proxy.port) as cursor:
            cursor.execute(f"INSERT INTO {EVENTS} SELECT /*+ REPARTITION(1) */ id, id / 4, TIMESTAMP'2025-02-01 00:00:00', "
                           f"concat('n', id), id / 3.0, DATE'2025-01-01' + CAST(id % 2 AS INT) FROM range(1000, 1100)")
            cursor.execute(query)
            assert cursor.fetchall() == [(11, sum(decimal.Decimal(i) / 4 for i in range(1010, 1021)))]
            first = decisions(config)[-1]["decision"]["tables"][0]
            assert first["unknown_files"] == 2 and first["files_kept"] == 2, first  # the new batch, one file per day
            assert coverage.idle(30)
            cursor.execute(f"EXPLAIN SKIPPING {query}")
            row = cursor.fetchall()[0]
            assert (row[2], row[3]) == (8, 2) and "without fresh statistics" not in row[6], row
            cursor.execute(query)
            assert cursor.fetchall() == [(11, sum(decimal.Decimal(i) / 4 for i in range(1010, 1021)))]
            assert loader.table_stats(EVENTS, fresh_listing=True).covered
            cursor.execute(join)  # events originates a diP again: fact keeps no file (keys 0-399 only)
            assert cursor.fetchall() == [(0,)]
            fact = next(t for t in decisions(config)[-1]["decision"]["tables"] if t["table"] == f"{DB}.fact")
            assert fact["files_kept"] == 0, fact
    finally:
        proxy.shutdown()
        coverage.stop()

    footer = {r["path"]: r for r in store.snapshot().read(EVENTS).to_pylist() if r["footer"]}
    collected = {r["path"]: r for r in store.snapshot().read(EVENTS).to_pylist() if not r["footer"]}
    assert len(footer) == 2 and len(collected) == 6
    # The scheduled refresh (every second here) re-reads just those files through the Thrift Server.
    refresh = ScheduledRefresh(store, lambda: thrift_sql(stack.config, "upkeep-refresh"), interval=1)
    try:
        assert refresh.due() == [EVENTS]
        wait_for(lambda: refresh.runs >= 1, "the scheduled refresh", timeout=120)
    finally:
        refresh.stop()
    assert refresh.due() == []
    scanned = {r["path"]: r for r in store.snapshot().read(EVENTS).to_pylist()}
    assert not any(r["footer"] for r in scanned.values()) and set(footer) <= set(scanned)
    assert all(scanned[path] == row for path, row in collected.items())  # kept as they were, not re-read
    for path, f in footer.items():
        s = scanned[path]
        assert f["rows"] == s["rows"]
        for column in ("id", "amount", "at", "name", "ratio", "day"):
            fc, sc = f[f"c:{column}"], s[f"c:{column}"]
            if fc["known"]:
                assert fc["min"] <= sc["min"] and fc["max"] >= sc["max"], (column, fc, sc)
            if fc["nulls"] >= 0:
                assert fc["nulls"] == sc["nulls"], column
        assert s["c:id"]["rs_lo"] is not None  # the job's range-sets replaced the footer's zone maps
