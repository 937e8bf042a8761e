"""A table without statistics is "might match" for itself only (issue 62, item 6): a filter on it whose type
the statistics cannot give does not stop the pruning of the tables it joins. The proxy asks the catalog for
the table's column types (a BIGINT ``BETWEEN`` cannot raise); a filter that may really raise (a STRING column
compared with numbers under ANSI) still declines the statement. Through a real client, against the shared
Thrift Server."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.sql_client import thrift_sql
from stats.collect import collect
from stats.store import StatsStore
from tests.conftest import Stack, hive_cursor
from tests.proxy_support import decisions, proxy_config, start_proxy

pytestmark = pytest.mark.spark

DB = "missing_stats_test"


@pytest.fixture(scope="module")
def store(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> StatsStore:
    """``o``: four files of key ranges 0-99, 100-199, ... with statistics; ``f`` (BIGINT ids) and ``s`` (STRING
    ids) without."""
    statements = [f"DROP DATABASE IF EXISTS {DB} CASCADE", f"CREATE DATABASE {DB}",
                  f"CREATE TABLE {DB}.o (k BIGINT, v INT) USING parquet",
                  f"CREATE TABLE {DB}.f (id BIGINT) USING parquet",
                  f"INSERT INTO {DB}.f SELECT id FROM range(0, 400, 7)",
                  f"CREATE TABLE {DB}.s (id STRING) USING parquet",
                  f"INSERT INTO {DB}.s SELECT CAST(id AS STRING) FROM range(0, 400, 7)"]
    statements += [f"INSERT INTO {DB}.o SELECT /*+ REPARTITION(1) */ id, 1 FROM range({b * 100}, {b * 100 + 100})"
                   for b in range(4)]
    with stack.cursor() as cursor:
        for sql in statements:
            cursor.execute(sql)
    out = StatsStore(tmp_path_factory.mktemp("missing") / "stats")
    with thrift_sql(stack.config, "missing") as run:
        collect(run, out, [f"{DB}.o"])
    return out


def test_a_table_without_statistics_does_not_stop_pruning_of_the_others(stack: Stack, store: StatsStore,
                                                                        tmp_path: Path) -> None:
    config = proxy_config(stack.config, tmp_path)
    proxy = start_proxy(config, store)
    sql = f"SELECT count(*), sum(o.v) FROM {DB}.f f JOIN {DB}.o o ON f.id = o.k WHERE f.id BETWEEN 1 AND 150 " \
          "AND o.k < 100"
    try:
        with stack.cursor() as cursor:
            cursor.execute(sql)
            truth = cursor.fetchall()
        with hive_cursor(proxy.port) as cursor:
            cursor.execute(sql)
            assert cursor.fetchall() == truth == [(14, 14)]
        decision = decisions(config)[-1]["decision"]
        assert decision["passthrough"] is None and decision["changed"], decision
        by_table = {t["table"]: t for t in decision["tables"]}
        assert by_table[f"{DB}.o"]["files_kept"] == 1 and by_table[f"{DB}.o"]["files_total"] == 4, decision
        assert by_table[f"{DB}.f"]["refused"] == "no statistics", decision
    finally:
        proxy.shutdown()


def test_a_filter_that_may_really_raise_still_declines(stack: Stack, store: StatsStore, tmp_path: Path) -> None:
    """``s.id`` is a STRING: under ANSI ``s.id BETWEEN 1 AND 150`` casts it to a number, which raises on a
    value that is not one; the statement is declined, and the reason names the filter, not a missing type."""
    config = proxy_config(stack.config, tmp_path)
    proxy = start_proxy(config, store)
    sql = f"SELECT count(*) FROM {DB}.s s JOIN {DB}.o o ON s.id = o.k WHERE s.id BETWEEN 1 AND 150 AND o.k < 100"
    try:
        with hive_cursor(proxy.port) as cursor:
            cursor.execute("SET spark.sql.ansi.enabled=true")
            cursor.execute(sql)
            assert cursor.fetchall() == [(14,)]
        decision = decisions(config)[-1]["decision"]
        assert decision["passthrough"].startswith("not modelled: a filter that may raise"), decision
        assert "cast" in decision["passthrough"].lower(), decision
        assert decision["untyped"] == [], decision  # asked once: the catalog's types are known now
    finally:
        proxy.shutdown()
