"""Statistics change only after Spark confirms a statement changed the table (issue 62, item 1): DDL naming a
table through the proxy, against the shared Thrift Server with real pyhive clients. A statement Spark refuses,
or one that leaves the table as Spark reads it, keeps its statistics; one that changes it drops them, and the
scheduled refresh collects them again."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.sql_client import thrift_sql
from proxy.server import ProxyServer
from stats.collect import collect
from stats.freshness import Lister
from stats.loader import StatsLoader
from stats.store import StatsStore
from stats.upkeep import ScheduledRefresh
from tests.conftest import Stack, hive_cursor
from tests.proxy_support import decisions, proxy_config, wait_for

pytestmark = pytest.mark.spark

DB = "ddl_test"
FLAT, PARTED, OTHER = f"{DB}.flat", f"{DB}.parted", f"{DB}.other"


@pytest.fixture(scope="module")
def tables(stack: Stack) -> None:
    with stack.cursor() as cursor:
        for sql in [f"DROP DATABASE IF EXISTS {DB} CASCADE", f"CREATE DATABASE {DB}",
                    f"CREATE TABLE {FLAT} (k INT, v STRING) USING parquet",
                    f"INSERT INTO {FLAT} SELECT CAST(id AS INT), 'v' FROM range(0, 10)",
                    f"CREATE TABLE {PARTED} (k INT, day INT) USING parquet PARTITIONED BY (day)",
                    f"INSERT INTO {PARTED} SELECT CAST(id AS INT), CAST(id % 2 AS INT) FROM range(0, 10)",
                    f"CREATE TABLE {OTHER} (k INT) USING parquet",
                    f"INSERT INTO {OTHER} SELECT CAST(id AS INT) FROM range(0, 10)"]:
            cursor.execute(sql)


@pytest.fixture(scope="module")
def collected(stack: Stack, tables: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The statistics of the three tables as first collected, copied for each test (which may change them)."""
    root = tmp_path_factory.mktemp("ddl") / "stats"
    with thrift_sql(stack.config, "ddl") as run:
        collect(run, StatsStore(root), [FLAT, PARTED, OTHER])
    return root


@pytest.fixture
def proxy(stack: Stack, collected: Path, tmp_path: Path) -> Iterator[tuple[ProxyServer, StatsStore, ScheduledRefresh]]:
    shutil.copytree(collected, tmp_path / "stats")
    store = StatsStore(tmp_path / "stats")
    refresh = ScheduledRefresh(store, lambda: thrift_sql(stack.config, "ddl-refresh"), 0.5)

    def recollect(names: list[str]) -> bool:
        refresh.recollect(names)
        return True

    loader = StatsLoader(store, Lister(0))
    server = ProxyServer(proxy_config(stack.config, tmp_path), loader, forget_statistics=loader.forget,
                         recollect=recollect).start()
    try:
        yield server, store, refresh
    finally:
        server.shutdown()
        refresh.stop()


def has_stats(store: StatsStore, table: str) -> bool:
    return store.snapshot().entry(table) is not None


@pytest.mark.parametrize("sql", [
    f"CREATE TABLE IF NOT EXISTS {FLAT} (x INT) USING parquet",  # a no-op: the table exists
    f"ALTER TABLE {FLAT} SET TBLPROPERTIES ('owner_team' = 'x')",  # nothing Spark reads changes
    f"ALTER TABLE {FLAT} ALTER COLUMN v COMMENT 'a comment'",
], ids=["create-if-not-exists", "set-tblproperties", "column-comment"])
def test_a_statement_that_leaves_the_table_as_read_keeps_its_statistics(proxy, sql: str) -> None:
    server, store, _ = proxy
    with hive_cursor(server.port) as cursor:
        cursor.execute(sql)
    record = decisions(server.config)[-1]
    assert record["statement"] == sql and "statistics_dropped" not in record, record
    assert record["statistics_kept"] == [FLAT], record
    assert has_stats(store, FLAT)


@pytest.mark.parametrize("sql", [
    f"ALTER TABLE {FLAT} RENAME COLUMN nope TO nope2",
    f"TRUNCATE TABLE {FLAT} PARTITION (k = 1)",  # not partitioned
    f"TRUNCATE TABLE {PARTED} PARTITION (nope = 1)",
    f"CREATE TABLE {FLAT} (x INT) USING parquet",  # exists
    f"ALTER TABLE {PARTED} SET LOCATION '/nonexistent/at/all' ; nonsense",  # does not parse
], ids=["rename-missing-column", "truncate-unpartitioned", "truncate-missing-partition", "create-existing",
        "unparsable"])
def test_a_statement_spark_refuses_keeps_the_statistics(proxy, sql: str) -> None:
    server, store, _ = proxy
    with hive_cursor(server.port) as cursor, pytest.raises(Exception):  # noqa: B017,PT011 - Spark's own error
        cursor.execute(sql)
    record = decisions(server.config)[-1]
    assert record["statement"] == sql and "statistics_dropped" not in record, record
    assert has_stats(store, FLAT) and has_stats(store, PARTED)


@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
def test_a_statement_that_changes_the_table_drops_its_statistics_and_the_refresh_collects_them(
        proxy, run_async: bool) -> None:
    """ADD COLUMNS changes the schema: the statistics go only after Spark confirmed it (for an asynchronous
    client too: its ExecuteStatement returns once the statement ended), and come back with the new column."""
    server, store, refresh = proxy
    column = f"added_{int(run_async)}"
    sql = f"ALTER TABLE {OTHER} ADD COLUMNS ({column} INT)"
    with hive_cursor(server.port) as cursor:
        cursor.execute(sql, async_=run_async)
    record = decisions(server.config)[-1]
    assert record["statistics_dropped"] == [OTHER], record
    assert record["statistics_recollected"] == "by the scheduled refresh", record
    wait_for(lambda: has_stats(store, OTHER), "the refresh to collect the table again", timeout=120)
    assert column in store.snapshot().entry(OTHER).schema


def test_partitioned_tables_count_as_changed_by_any_statement_spark_runs(proxy) -> None:
    """A partition's location is not in the table's description, so a statement Spark runs on a partitioned
    table is taken as a change (its statistics collected again), never guessed to be a no-op."""
    server, store, _ = proxy
    with hive_cursor(server.port) as cursor:
        cursor.execute(f"ALTER TABLE {PARTED} ADD IF NOT EXISTS PARTITION (day = 0)")  # exists: Spark's no-op
    record = decisions(server.config)[-1]
    assert record["statistics_dropped"] == [PARTED], record
    wait_for(lambda: has_stats(store, PARTED), "the refresh to collect the table again", timeout=120)


def test_a_dropped_table_is_not_collected_again(proxy, stack: Stack) -> None:
    server, store, refresh = proxy
    with stack.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {DB}.doomed (k INT) USING parquet")
        cursor.execute(f"INSERT INTO {DB}.doomed VALUES (1)")
    with thrift_sql(stack.config, "ddl") as run:
        collect(run, store, [f"{DB}.doomed"])
    with hive_cursor(server.port) as cursor:
        cursor.execute(f"DROP TABLE {DB}.doomed")
    record = decisions(server.config)[-1]
    assert record["statistics_dropped"] == [f"{DB}.doomed"] and "statistics_recollected" not in record, record
    assert not has_stats(store, f"{DB}.doomed") and f"{DB}.doomed" not in refresh.due()


def test_statistics_are_not_used_while_a_statement_redefining_the_table_runs(proxy) -> None:
    server, _, _ = proxy
    with server.redefining([FLAT]):
        with server.redefining([FLAT]):
            assert server.being_redefined() == {FLAT: "a statement that may redefine the table is running"}
        assert FLAT in server.being_redefined()
    assert server.being_redefined() == {}
