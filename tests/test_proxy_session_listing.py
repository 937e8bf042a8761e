"""One session, one answer (issue 62, item 2): Spark keeps a table's file listing per session, so a session
that read a table before another session added files still reads the old files. An answer from statistics
counts the new ones; without care, a dashboard's total (answered from statistics) and its breakdown (sent to
Spark) disagree in the same session. Two real sessions through the proxy, against the shared Thrift Server."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.sql_client import thrift_sql
from stats.collect import collect
from stats.store import StatsStore
from tests.conftest import Stack, hive_cursor
from tests.proxy_support import decisions, proxy_config, start_proxy

pytestmark = pytest.mark.spark

TABLE = "session_listing_test.t"


def test_an_answer_from_statistics_agrees_with_the_sessions_next_statement(stack: Stack, tmp_path: Path) -> None:
    with stack.cursor() as cursor:
        for sql in ["DROP DATABASE IF EXISTS session_listing_test CASCADE", "CREATE DATABASE session_listing_test",
                    f"CREATE TABLE {TABLE} (id BIGINT) USING parquet",
                    f"INSERT INTO {TABLE} SELECT id FROM range(0, 100)"]:
            cursor.execute(sql)
    store = StatsStore(tmp_path / "stats")
    with thrift_sql(stack.config, "listing") as run:
        collect(run, store, [TABLE])
    config = proxy_config(stack.config, tmp_path)
    proxy = start_proxy(config, store)
    try:
        with hive_cursor(proxy.port) as dashboard, hive_cursor(proxy.port) as writer:
            dashboard.execute(f"SELECT count(*), sum(id) FROM {TABLE}")  # sent to Spark: the session lists the files
            assert dashboard.fetchall() == [(100, 4950)]
            dashboard.execute(f"SELECT count(*) FROM {TABLE}")
            assert dashboard.fetchall() == [(100,)]
            first = decisions(config)[-1]
            assert first["outcome"] == "answered from statistics", first
            assert first["session_listing"].startswith("refreshed"), first  # the proxy never saw it list them

            dashboard.execute(f"SELECT count(*) FROM {TABLE}")  # the same files: nothing to refresh
            assert dashboard.fetchall() == [(100,)]
            again = decisions(config)[-1]
            assert again["outcome"] == "answered from statistics" and "session_listing" not in again, again

            writer.execute(f"INSERT INTO {TABLE} SELECT id FROM range(100, 110)")  # another session adds a file
            dashboard.execute(f"SELECT count(*), sum(id) FROM {TABLE}")
            assert dashboard.fetchall() == [(100, 4950)]  # Spark's session still reads its old listing
            with thrift_sql(stack.config, "listing") as run:  # statistics catch up
                collect(run, store, [TABLE], refresh=True)

            dashboard.execute(f"SELECT count(*) FROM {TABLE}")
            total = dashboard.fetchall()
            record = decisions(config)[-1]
            assert record["outcome"] == "answered from statistics", record
            assert record["session_listing"].startswith("refreshed"), record
            dashboard.execute(f"SELECT count(*), sum(id) FROM {TABLE}")
            breakdown = dashboard.fetchall()
            assert total == [(110,)] and breakdown == [(110, 5995)], (total, breakdown)
    finally:
        proxy.shutdown()
