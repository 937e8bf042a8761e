"""The rewriter's budget through a real client (issue 62, item 3), against the shared Thrift Server: a statement
over a limit goes to Spark at once, unchanged, with the limit named in its record; Spark's answer reaches the
client; the decision log does not store a multi-megabyte literal."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.sql_client import thrift_sql
from stats.collect import collect
from stats.store import StatsStore
from tests.conftest import Stack, hive_cursor
from tests.proxy_support import decisions, proxy_config, start_proxy

pytestmark = pytest.mark.spark

TABLE = "budget_test.t"


@pytest.fixture(scope="module")
def store(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> StatsStore:
    with stack.cursor() as cursor:
        for sql in ["DROP DATABASE IF EXISTS budget_test CASCADE", "CREATE DATABASE budget_test",
                    f"CREATE TABLE {TABLE} (id BIGINT) USING parquet"] + [
                f"INSERT INTO {TABLE} SELECT /*+ REPARTITION(1) */ id FROM range({b * 1000}, {b * 1000 + 1000})"
                for b in range(3)]:
            cursor.execute(sql)
    out = StatsStore(tmp_path_factory.mktemp("budget") / "stats")
    with thrift_sql(stack.config, "budget") as run:
        collect(run, out, [TABLE])
    return out


def test_a_long_in_list_goes_to_spark_unrewritten_at_once(stack: Stack, store: StatsStore, tmp_path: Path) -> None:
    config = proxy_config(stack.config, tmp_path)
    proxy = start_proxy(config, store)
    within = f"SELECT count(*) FROM {TABLE} WHERE id IN ({', '.join(map(str, range(10, 1000)))})"
    over = f"SELECT count(*) FROM {TABLE} WHERE id IN ({', '.join(map(str, range(10, 6_010)))})"
    try:
        with hive_cursor(proxy.port) as cursor:
            cursor.execute(within)
            assert cursor.fetchall() == [(990,)]
            record = decisions(config)[-1]
            assert record["outcome"] == "rewritten" and record["decision"]["tables"][0]["files_kept"] == 1, record
            assert not record["decision"]["cached"]
            cursor.execute(within)  # repeated: served from the rewrite cache, same statement sent
            assert cursor.fetchall() == [(990,)]
            again = decisions(config)[-1]
            assert again["decision"]["cached"] and again["sent"] == record["sent"], again
            cursor.execute(over)
            assert cursor.fetchall() == [(2990,)]
        record = decisions(config)[-1]
        decision = record["decision"]
        assert record["outcome"] == "forwarded unchanged" and "sent" not in record, record
        assert decision["passthrough"] == "over the rewrite budget: the statement holds 6,000 literals, over " \
                                          "rewriter.max_literals (5,000)", decision
        assert decision["elapsed_ms"] < 500, decision  # counted, not parsed: 20 s before (a bound, not a timing)
        with stack.cursor() as cursor:  # a file added: the listing changed, so the cached rewrite is not used
            cursor.execute(f"INSERT INTO {TABLE} VALUES (500)")
        with hive_cursor(proxy.port) as cursor:
            cursor.execute(within)
            assert cursor.fetchall() == [(991,)]
        fresh = decisions(config)[-1]["decision"]
        assert not fresh["cached"] and fresh["tables"][0]["unknown_files"] == 1, fresh
    finally:
        proxy.shutdown()


def test_a_long_literal_is_stored_truncated_with_its_length(stack: Stack, store: StatsStore, tmp_path: Path) -> None:
    config = proxy_config(stack.config, tmp_path)
    proxy = start_proxy(config, store)
    try:
        with hive_cursor(proxy.port) as cursor:
            cursor.execute(f"SELECT length('{'z' * 2_000_000}') AS n, count(*) FROM {TABLE} WHERE id < 5")
            assert cursor.fetchall() == [(2_000_000, 5)]
        line = config.proxy.decision_log.read_text().splitlines()[-1]
        assert len(line) < 20_000, len(line)
        assert "2,000,000 characters, truncated in the decision log" in decisions(config)[-1]["statement"]
    finally:
        proxy.shutdown()
