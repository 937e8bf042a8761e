"""Statistics that keep up with the catalog and the files (issue 14, part 4), against the shared Thrift Server
through a real proxy: a table moved behind Dipper's back (DDL sent to Spark directly, as another application
on a shared metastore would) must not originate diPs from the statistics of its old location."""

from __future__ import annotations

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
from tests.proxy_support import decisions, proxy_config

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
