"""Answers from statistics through the proxy, against Spark (issue 17): every answer equals Spark's own, rows,
column names and types, through pyhive, beeline and SQLAlchemy, on a table of edge values (integer extremes per
width, 38-digit decimals, dates and timestamps far from today, Unicode, NULLs, an all-NULL column, NaN) in
several files, on an empty table, in two session time zones; what is not answered (floats, WHERE clauses that
split files, files added after collection) gets Spark's answer; nothing is answered without Spark's analysis
in the user's session, and a statement Spark refuses reveals no statistic (EXPLAIN SKIPPING, the byte budget)."""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from backend.beeline import beeline_rows, run_beeline
from proxy.server import ProxyServer
from stats.collect import collect
from stats.store import StatsStore
from tests.conftest import Stack, hive_cursor
from tests.proxy_support import decisions, files_read_since, last_execution_id, proxy_config, start_proxy

pytestmark = pytest.mark.spark

DB = "answers"
SCHEMA = ("ti tinyint, si smallint, i int, b bigint, dec decimal(7,2), dec38 decimal(38,2), d date, ts timestamp, "
          "s string, f double, allnull int")
BIG = decimal.Decimal("999999999999999999999999999999999999.99")
# PySpark turns a Python Decimal of 38 digits into one of 28 (and fails), so dec38 travels as a string.
_WRITTEN = SCHEMA.replace("dec38 decimal(38,2)", "dec38 string")
# Each list is one file; the columns follow SCHEMA.
FILES = [
    [(-128, -32768, -2147483648, -9223372036854775808, decimal.Decimal("-99999.99"), BIG.copy_negate(), dt.date(1, 1, 1),
      dt.datetime(1900, 1, 1, 0, 0, 0, 1), "", float("nan"), None),
     (0, 0, 0, 0, decimal.Decimal("0.00"), decimal.Decimal("0.10"), dt.date(1969, 12, 31),
      dt.datetime(1969, 12, 31, 23, 59, 59, 999999), "a", -0.0, None)],
    [(127, 32767, 2147483647, 9223372036854775807, decimal.Decimal("99999.99"), BIG, dt.date(9999, 12, 31),
      dt.datetime(2024, 3, 10, 10, 30, 0, 500000), "é", float("inf"), None),
     (None, None, None, None, None, None, None, None, None, None, None)],
    [(5, 5, 5, 5, decimal.Decimal("1.50"), decimal.Decimal("1.50"), dt.date(2024, 2, 29),
      dt.datetime(2024, 11, 3, 9, 15, 0), "😀 emoji", 1.5, None),
     (6, 6, 6, 6, decimal.Decimal("-0.05"), decimal.Decimal("-0.05"), dt.date(2024, 3, 1),
      dt.datetime(2024, 11, 3, 8, 45, 0), "Zebra", 2.5, None)],
]


PART_SCHEMA = "i int, d date, s string, region string, year int"
# One INSERT each: files in the partitions (EU, 2020), (EU, 2021), (US, 2020), (NULL, 2021), and (EU, 2020) again.
PART_ROWS = [
    "(1, DATE'2020-01-01', 'a', 'EU', 2020), (2, DATE'2020-03-01', NULL, 'EU', 2020), (3, NULL, 'b', 'EU', 2021)",
    "(10, DATE'2019-12-31', 'c', 'US', 2020), (11, DATE'2020-06-30', 'c', 'US', 2020)",
    "(20, DATE'2021-01-01', 'é', NULL, 2021), (NULL, NULL, NULL, NULL, 2021)",
    "(4, DATE'2020-02-02', 'z', 'EU', 2020)",
]


def write(spark: Any, rows: list[tuple], folder: Path) -> None:
    """One more Parquet file of ``rows`` in ``folder``."""
    rows = [tuple(str(v) if i == 5 and v is not None else v for i, v in enumerate(row)) for row in rows]
    frame = spark.createDataFrame(rows, _WRITTEN).selectExpr(
        *["CAST(dec38 AS decimal(38,2)) AS dec38" if c.startswith("dec38") else c.split()[0] for c in SCHEMA.split(", ")])
    frame.coalesce(1).write.mode("append").parquet(str(folder))


@pytest.fixture(scope="module")
def answering(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ProxyServer, Path]]:
    spark = stack.spark
    root = tmp_path_factory.mktemp("answers")
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DB}")
    spark.conf.set("spark.sql.session.timeZone", "UTC")  # the rows below are instants in UTC
    for name in ("edge", "empty", "gone", "grows"):
        spark.sql(f"DROP TABLE IF EXISTS {DB}.{name}")
        spark.sql(f"CREATE TABLE {DB}.{name} ({SCHEMA}) USING parquet LOCATION '{root / name}'")
    for name in ("edge", "gone", "grows"):
        for rows in FILES:
            write(spark, rows, root / name)
        spark.sql(f"REFRESH TABLE {DB}.{name}")
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DB}_other")  # another edge, of 2 rows, without statistics
    spark.sql(f"DROP TABLE IF EXISTS {DB}_other.edge")
    spark.sql(f"CREATE TABLE {DB}_other.edge ({SCHEMA}) USING parquet LOCATION '{root / 'other_edge'}'")
    write(spark, FILES[2], root / "other_edge")
    spark.sql(f"REFRESH TABLE {DB}_other.edge")
    spark.sql(f"DROP DATABASE IF EXISTS {DB}_dropped CASCADE")
    spark.sql(f"CREATE DATABASE {DB}_dropped")
    spark.sql(f"CREATE TABLE {DB}_dropped.t USING parquet LOCATION '{root / 'dropped'}' AS SELECT * FROM {DB}.edge")
    for name in ("parts", "orphans"):  # external, partitioned: a dropped partition keeps its files
        spark.sql(f"DROP TABLE IF EXISTS {DB}.{name}")
        spark.sql(f"CREATE TABLE {DB}.{name} ({PART_SCHEMA}) USING parquet PARTITIONED BY (region, year) "
                  f"LOCATION '{root / name}'")
        for rows in PART_ROWS:
            spark.sql(f"INSERT INTO {DB}.{name} VALUES {rows}")
    store = StatsStore(root / "store")
    collect(spark, store, [f"{DB}.{n}" for n in ("edge", "empty", "gone", "grows", "parts", "orphans")] +
            [f"{DB}_dropped.t"])
    # Not through the proxy, as another application would: the statistics stay, the catalog forgets.
    spark.sql(f"DROP TABLE {DB}.gone")
    spark.sql(f"DROP DATABASE {DB}_dropped CASCADE")
    spark.sql(f"ALTER TABLE {DB}.orphans DROP PARTITION (region = 'EU', year = 2020)")
    config = proxy_config(stack.config, root / "logs", footer_coverage=False)
    server = start_proxy(config, store)
    yield server, root
    server.shutdown(drain_seconds=2)


def run(port: int, sql: str, zone: str = "UTC", setup: tuple[str, ...] = ()) -> tuple[list[tuple], list[tuple]]:
    with hive_cursor(port, DB) as cursor:
        cursor.execute(f"SET spark.sql.session.timeZone = {zone}")
        for statement in setup:
            cursor.execute(statement)
        cursor.execute(sql)
        return cursor.fetchall(), cursor.description


def outcome(server: ProxyServer, sql: str) -> dict[str, Any]:
    return [r for r in decisions(server.config) if r["statement"] == sql][-1]


ANSWERED = [
    "SELECT count(*) FROM edge",
    "SELECT COUNT(1) AS n, count(s), count(allnull), min(allnull), max(allnull) FROM edge",
    "SELECT min(ti), max(ti), min(si), max(si), min(i), max(i), min(b), max(b) FROM edge",
    "SELECT min(dec), max(dec), MIN(dec38) AS lo, max(dec38) FROM edge",
    "SELECT min(d), max(d) FROM edge",
    "SELECT min(ts), max(ts) FROM edge",
    "SELECT min(s), max(s), count(ts) FROM answers.edge",
    "SELECT DISTINCT s FROM edge ORDER BY s",
    "SELECT s FROM edge GROUP BY s ORDER BY 1 DESC",
    "SELECT DISTINCT s FROM edge ORDER BY s DESC NULLS FIRST LIMIT 3",
    "SELECT count(*), max(d) FROM edge WHERE i >= 5 AND i <= 6",  # one file taken, two ruled out
    "SELECT count(*), min(s) FROM edge WHERE i BETWEEN 1000 AND 2000",  # every file ruled out
    "SELECT count(*) AS c FROM edge WHERE allnull IS NULL",
    "SELECT count(*), max(i), min(s) FROM empty",
    "SELECT DISTINCT s FROM empty",
    "SELECT count(*) FROM edge LIMIT 0",
]
# Of a partitioned table (as in ANSWERED, every answer must equal Spark's).
ANSWERED_PARTITIONED = [
    "SELECT count(*) FROM parts",
    "SELECT region, year, count(*), min(i), max(d), count(s) FROM parts GROUP BY region, year",
    "SELECT region, count(*) AS n FROM parts GROUP BY region ORDER BY n DESC, region",
    "SELECT DISTINCT year FROM parts ORDER BY year DESC",
    "SELECT year, count(*), max(s) FROM parts WHERE region = 'EU' GROUP BY year ORDER BY 1",
    "SELECT count(*), max(year), min(d) FROM parts WHERE region IS NULL",
    "SELECT DISTINCT region FROM parts ORDER BY 1 NULLS LAST",
    "SELECT count(*), min(i) FROM orphans WHERE region = 'US'",  # not the dropped partition's folder
]
NOT_ANSWERED = [
    "SELECT max(f), min(f) FROM edge",  # floats: NaN and -0.0
    "SELECT count(*) FROM edge WHERE i > 0",  # splits a file
    "SELECT s, count(*) FROM edge GROUP BY s",
    "SELECT count(DISTINCT s) FROM edge",
]


@pytest.mark.differential
@pytest.mark.parametrize("sql, zone", [(sql, "UTC") for sql in ANSWERED + ANSWERED_PARTITIONED] +
                         [(sql, "America/Los_Angeles") for sql in ANSWERED if "ts" in sql])
def test_answer_equals_spark(stack: Stack, answering: tuple[ProxyServer, Path], sql: str, zone: str) -> None:
    server, _ = answering
    before = last_execution_id(stack.spark)
    through = run(server.port, sql, zone)
    assert files_read_since(stack.spark, before) == 0  # no file was read for it
    assert outcome(server, sql)["outcome"] == "answered from statistics", outcome(server, sql)
    direct = run(stack.port, sql, zone)
    ordered = "ORDER BY" in sql
    assert through[1] == direct[1]  # column names and types
    assert (through[0] if ordered else sorted(through[0], key=repr)) == \
        (direct[0] if ordered else sorted(direct[0], key=repr))


@pytest.mark.differential
@pytest.mark.parametrize("sql", NOT_ANSWERED)
def test_not_answered_goes_to_spark(stack: Stack, answering: tuple[ProxyServer, Path], sql: str) -> None:
    server, _ = answering
    through = run(server.port, sql)
    assert outcome(server, sql)["outcome"] != "answered from statistics"
    assert sorted(map(repr, through[0])) == sorted(map(repr, run(stack.port, sql)[0]))  # NaN != NaN


@pytest.mark.differential
@pytest.mark.parametrize("sql", ["SELECT count(*) FROM orphans", "SELECT region, count(*) FROM orphans GROUP BY region"],
                         ids=["count", "per-region"])
def test_files_of_partitions_spark_does_not_read_are_not_counted(stack: Stack, answering: tuple[ProxyServer, Path],
                                                                  sql: str) -> None:
    """A partition dropped from an external table by another application keeps its files and its statistics;
    Spark no longer reads them, so the answer would count rows Spark does not."""
    server, root = answering
    assert any((root / "orphans" / "region=EU" / "year=2020").glob("*.parquet"))
    through = run(server.port, sql)[0]
    assert sorted(through, key=repr) == sorted(run(stack.port, sql)[0], key=repr)
    assert "lists no partition region=EU/year=2020" in outcome(server, sql)["not_answered_from_statistics"]


def test_the_rows_of_a_dropped_partition_are_not_counted(answering: tuple[ProxyServer, Path]) -> None:
    server, _ = answering
    assert run(server.port, "SELECT count(*) FROM orphans")[0] == [(5,)]  # of 8 rows in the folders


def test_switched_off_per_session(stack: Stack, answering: tuple[ProxyServer, Path]) -> None:
    server, _ = answering
    sql = "SELECT count(*) AS switched_off FROM edge"
    assert run(server.port, sql, setup=("SET skipping.metadata_answers = false",))[0] == [(6,)]
    assert outcome(server, sql)["outcome"] != "answered from statistics"
    with hive_cursor(server.port, DB) as cursor:
        cursor.execute(sql)
        cursor.fetchall()
        cursor.execute("SHOW SKIPPING LOG LIMIT 1")
        [(_, _, statement, said, *_)] = cursor.fetchall()
    assert (statement, said) == (sql, "answered from statistics")


@pytest.mark.differential
def test_files_added_after_collection_are_counted(stack: Stack, answering: tuple[ProxyServer, Path]) -> None:
    server, root = answering
    sql = "SELECT count(*), max(i) FROM grows"
    assert run(server.port, sql)[0] == [(6, 2147483647)]
    write(stack.spark, FILES[2], root / "grows")
    stack.spark.sql(f"REFRESH TABLE {DB}.grows")
    assert run(server.port, sql)[0] == run(stack.port, sql)[0] == [(8, 2147483647)]
    assert "no fresh statistics" in outcome(server, sql)["not_answered_from_statistics"]


@pytest.mark.differential
def test_clients_get_the_same_answer(stack: Stack, answering: tuple[ProxyServer, Path]) -> None:
    """beeline over JDBC and SQLAlchemy read the proxy's answers as they read Spark's."""
    import sqlalchemy

    server, _ = answering
    sql = "SELECT count(*), min(d), max(dec38), max(ts), min(ti) FROM edge"
    outputs = []
    for port in (server.port, stack.port):
        result = run_beeline(stack.java, "127.0.0.1", port, f"SET spark.sql.session.timeZone=UTC; {sql}", DB)
        assert result.returncode == 0, result.stderr
        outputs.append(beeline_rows(result.stdout)[-2:])
    assert outputs[0] == outputs[1] and outputs[0][1][0] == "6"
    fetched = []
    for port in (server.port, stack.port):
        engine = sqlalchemy.create_engine(f"hive://sqla@127.0.0.1:{port}/{DB}")
        try:
            with engine.connect() as conn:
                fetched.append(conn.execute(sqlalchemy.text(sql.replace("max(ts), ", ""))).fetchall())
        finally:
            engine.dispose()
    assert fetched[0] == fetched[1]
    assert outcome(server, sql.replace("max(ts), ", ""))["outcome"] == "answered from statistics"


@pytest.mark.differential
@pytest.mark.parametrize("sql", [
    "SELECT count(*) FROM gone",  # dropped since collection; its files are still there
    "SELECT count(*) FROM answers_dropped.t",  # its database dropped since collection
])
@pytest.mark.parametrize("explain", [False, True], ids=["statement", "explain-skipping"])
def test_statistics_of_tables_spark_refuses_are_not_shown(stack: Stack, answering: tuple[ProxyServer, Path],
                                                          sql: str, explain: bool) -> None:
    server, _ = answering
    with hive_cursor(stack.port, DB) as cursor, pytest.raises(Exception) as direct:
        cursor.execute(sql)
    with hive_cursor(server.port, DB) as cursor, pytest.raises(Exception) as through:
        cursor.execute(f"EXPLAIN SKIPPING {sql}" if explain else sql)
    assert ("TABLE_OR_VIEW_NOT_FOUND" in str(through.value)) == ("TABLE_OR_VIEW_NOT_FOUND" in str(direct.value))
    assert "SCHEMA_NOT_FOUND" in str(through.value) or "TABLE_OR_VIEW_NOT_FOUND" in str(through.value)
    assert "files" not in str(through.value) and "bytes" not in str(through.value)


def test_dry_run_and_budget_need_spark_analysis(stack: Stack, answering: tuple[ProxyServer, Path]) -> None:
    """A column that does not exist: the rewriter still finds the table's statistics, Spark refuses the statement,
    and neither the dry run nor the byte budget says anything about the files."""
    server, _ = answering
    sql = "SELECT * FROM edge WHERE nosuch > 1 AND i > 0"
    with hive_cursor(server.port, DB) as cursor:
        with pytest.raises(Exception, match="UNRESOLVED_COLUMN") as refused:
            cursor.execute(f"EXPLAIN SKIPPING {sql}")
        assert "files" not in str(refused.value)
        cursor.execute("SET skipping.max_scan_bytes = 1")
        with pytest.raises(Exception, match="UNRESOLVED_COLUMN") as budget:
            cursor.execute(sql)
        assert "max_scan_bytes" not in str(budget.value)
        with pytest.raises(Exception, match="max_scan_bytes"):  # an analysable statement is refused as before
            cursor.execute("SELECT * FROM edge WHERE i > 0")
        cursor.execute("SET skipping.max_scan_bytes = 0")
        cursor.execute("EXPLAIN SKIPPING SELECT * FROM edge WHERE i > 1000")
        assert cursor.fetchall()[0][0] == f"{DB}.edge"


def test_database_switches_spark_makes_without_saying(stack: Stack, answering: tuple[ProxyServer, Path]) -> None:
    """A USE inside EXECUTE IMMEDIATE moves Spark's database without the proxy reading it: the proxy asks Spark
    where the session is before it answers again (an adversarial review found it)."""
    server, _ = answering
    sql = "SELECT count(*) AS here FROM edge"
    with hive_cursor(server.port, DB) as cursor:
        cursor.execute(f"EXECUTE IMMEDIATE 'USE {DB}_other'")
        cursor.execute(sql)
        assert cursor.fetchall() == [(2,)]  # the other edge, which Spark reads now (not answers.edge's 6)
        cursor.execute(f"EXECUTE IMMEDIATE 'USE {DB}'")
        cursor.execute(sql)
        assert cursor.fetchall() == [(6,)]
    assert outcome(server, sql)["outcome"] == "answered from statistics"
