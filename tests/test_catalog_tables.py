"""Statistics for any table of the backend's catalog (issue 14): tables users create themselves — managed and
external, partitioned, Parquet and ORC, at locations with spaces and Unicode — collected through the Thrift
Server exactly as through a Spark session, and a clear error for everything whose files cannot be described
or skipped: views, CSV tables, and Hive-format tables (`STORED AS PARQUET`: Spark resolves no `_metadata`
column on them, so no query could name their files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.sql_client import thrift_sql
from dipper.errors import StatsError
from stats.collect import collect, describe_table, list_tables, resolve_table
from stats.store import StatsStore
from tests.conftest import Stack

pytestmark = pytest.mark.spark

DB = "catalog_test"
OTHER_DB = "catalog_test_other"


@pytest.fixture(scope="module")
def tables(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Tables of every storage kind the collector must handle, each filled in several batches (so several
    files), created through the Thrift Server as a user would."""
    odd = tmp_path_factory.mktemp("catalog") / "dir with space" / "ünïcödé"
    statements = [
        f"DROP DATABASE IF EXISTS {DB} CASCADE", f"DROP DATABASE IF EXISTS {OTHER_DB} CASCADE",
        f"CREATE DATABASE {DB}", f"CREATE DATABASE {OTHER_DB}",
        f"CREATE TABLE {DB}.managed (id BIGINT, amount DECIMAL(12,2), name STRING, day DATE) USING parquet "
        "PARTITIONED BY (day)",
        f"CREATE TABLE {DB}.hive_parquet (id INT, ratio DOUBLE, note VARCHAR(20)) STORED AS PARQUET",
        f"CREATE TABLE {DB}.orc_table (id INT, at TIMESTAMP) USING orc",
        f"CREATE TABLE {DB}.odd_place (id INT, label STRING) USING parquet LOCATION '{odd}'",
        f"CREATE TABLE {DB}.text_table (id INT) STORED AS TEXTFILE",
        f"CREATE TABLE {DB}.csv_table (id INT) USING csv",
        f"CREATE VIEW {DB}.a_view AS SELECT id FROM {DB}.managed",
        f"CREATE TABLE {OTHER_DB}.managed (id BIGINT) USING parquet",  # the same name in two databases
        f"CREATE TABLE {OTHER_DB}.only_here (id BIGINT) USING parquet",
    ]
    for batch in range(3):
        base = batch * 100
        statements += [
            f"INSERT INTO {DB}.managed SELECT id, CAST(id * 1.25 AS DECIMAL(12,2)), concat('n', id % 5), "
            f"DATE'2024-01-01' + CAST(id % 3 AS INT) FROM range({base}, {base + 100})",
            f"INSERT INTO {DB}.hive_parquet SELECT CAST(id AS INT), id / 7.0, concat('it''s ', id % 4) "
            f"FROM range({base}, {base + 100})",
            f"INSERT INTO {DB}.orc_table SELECT CAST(id AS INT), TIMESTAMP'2024-03-10 01:00:00' + make_interval(0, 0, 0, 0, id) "
            f"FROM range({base}, {base + 100})",
            f"INSERT INTO {DB}.odd_place SELECT CAST(id AS INT), concat('é', id) FROM range({base}, {base + 100})",
            f"INSERT INTO {OTHER_DB}.only_here SELECT id FROM range({base}, {base + 10})",
        ]
    with stack.cursor() as cursor:
        for sql in statements:
            cursor.execute(sql)
    return {"odd": str(odd)}


def test_the_catalog_lists_tables_not_views(stack: Stack, tables: dict[str, str]) -> None:
    with thrift_sql(stack.config, "dipper-test") as run:
        listed = list_tables(run, DB)
        assert set(listed) == {f"{DB}.{t}" for t in ("managed", "hive_parquet", "orc_table", "odd_place",
                                                     "text_table", "csv_table")}
        assert f"{OTHER_DB}.only_here" in list_tables(run)
        with pytest.raises(StatsError, match="unknown database no_such_db"):
            list_tables(run, "no_such_db")
        assert resolve_table(run, "only_here") == f"{OTHER_DB}.only_here"
        with pytest.raises(StatsError, match=f"managed is a table in databases {DB}, {OTHER_DB}: name one"):
            resolve_table(run, "managed")
        with pytest.raises(StatsError, match="unknown table no_such_table"):
            resolve_table(run, "no_such_table")


@pytest.mark.parametrize("table, reason", [
    pytest.param(f"{DB}.a_view", "it is a view", id="view"),
    pytest.param(f"{DB}.csv_table", "it is a csv table", id="csv"),
    pytest.param(f"{DB}.text_table", r"it is a Hive-format table \(TextInputFormat", id="hive-text"),
    pytest.param(f"{DB}.hive_parquet", r"it is a Hive-format table \(MapredParquetInputFormat", id="hive-parquet"),
    pytest.param(f"{DB}.nothing", f"unknown table {DB}.nothing", id="unknown"),
])
def test_describe_says_why_a_table_has_no_statistics(stack: Stack, tables: dict[str, str], table: str,
                                                     reason: str) -> None:
    with thrift_sql(stack.config, "dipper-test") as run, pytest.raises(StatsError, match=reason):
        describe_table(run, table)


def test_describe_names_a_global_view_and_describes_tables(stack: Stack, tables: dict[str, str]) -> None:
    with thrift_sql(stack.config, "dipper-test") as run:
        run("CREATE OR REPLACE GLOBAL TEMPORARY VIEW gv AS SELECT 1 AS x")
        with pytest.raises(StatsError, match="it is a view"):
            describe_table(run, "global_temp.gv")
        d = describe_table(run, f"{DB}.orc_table")
        assert (d.format, d.schema, d.partition_columns) == ("orc", {"id": "int", "at": "timestamp"}, ())
        d = describe_table(run, f"{DB}.managed")
        assert d.partition_columns == ("day",) and d.format == "parquet"
        assert describe_table(run, f"{DB}.odd_place").location.endswith("dir%20with%20space/%C3%BCn%C3%AFc%C3%B6d%C3%A9") \
            or "dir with space/ünïcödé" in describe_table(run, f"{DB}.odd_place").location


def test_statistics_through_the_thrift_server_equal_a_sessions(stack: Stack, tables: dict[str, str],
                                                               tmp_path: Path) -> None:
    """The same tables collected through the Thrift Server (values as text and JSON) and through a Spark
    session (Python values) give the same store rows; and the rows are right: per-file counts and bounds
    agree with what Spark reads from each file."""
    names = [f"{DB}.{t}" for t in ("managed", "orc_table", "odd_place")]
    via_thrift, via_session = StatsStore(tmp_path / "thrift"), StatsStore(tmp_path / "session")
    with thrift_sql(stack.config, "dipper-test") as run:
        collect(run, via_thrift, names, range_set_size=3, value_list_max=8)
    collect(stack.spark, via_session, names, range_set_size=3, value_list_max=8)
    a, b = via_thrift.snapshot(), via_session.snapshot()
    for name in names:
        rows = a.read(name).to_pylist()
        assert rows == b.read(name).to_pylist(), name
        assert len(rows) >= 3, (name, len(rows))  # a file per batch at least
        per_file = {r["path"]: r["rows"] for r in stack.spark.sql(
            f"SELECT _metadata.file_path AS path, count(*) AS rows FROM {name} GROUP BY 1").collect()}
        assert {r["path"]: r["rows"] for r in rows} == per_file, name
    assert a.entry(f"{DB}.managed").partition_columns == ("day",)
    bounds = {r["path"]: (r["lo"], r["hi"]) for r in stack.spark.sql(
        f"SELECT _metadata.file_path AS path, min(amount) AS lo, max(amount) AS hi FROM {DB}.managed GROUP BY 1").collect()}
    assert {r["path"]: (r["c:amount"]["min"], r["c:amount"]["max"]) for r in a.read(f"{DB}.managed").to_pylist()} \
        == bounds  # decimals exact through the Thrift Server's text
    assert {v for r in a.read(f"{DB}.odd_place").to_pylist() for v in r["c:label"]["values"] or []} <= \
        {f"é{i}" for i in range(300)}


def test_listing_spells_paths_as_spark_does(stack: Stack, tables: dict[str, str], tmp_path: Path) -> None:
    """Spark names a file by its URI (``_metadata.file_path`` is URL-encoded: a space is %20, é stays é); the
    listing the freshness check compares with the statistics must spell every file the same way, or no file
    of a table at such a location would ever count as described (found by the user story test)."""
    from stats.freshness import list_files

    location = tmp_path / "sp ace" / "pct%41 hash#1 br[a]ck plus+amp& é nbsp\u00a0x"
    table = f"{DB}.odd_names"
    stack.spark.sql(f"DROP TABLE IF EXISTS {table}")
    stack.spark.sql(f"CREATE TABLE {table} (id INT, p STRING) USING parquet PARTITIONED BY (p) LOCATION '{location}'")
    stack.spark.sql(f"INSERT INTO {table} VALUES (1, 'a b'), (2, 'c%d'), (3, 'é#?')")
    spark_paths = {r[0] for r in stack.spark.sql(f"SELECT DISTINCT _metadata.file_path FROM {table}").collect()}
    assert len(spark_paths) == 3
    assert {f.path for f in list_files(describe_table(stack.spark, table).location)} == spark_paths


def test_a_partition_outside_the_table_location_is_refused(stack: Stack, tables: dict[str, str],
                                                          tmp_path: Path) -> None:
    """A partition added with a location of its own is read by Spark but not under the table's folder, which
    is what freshness lists: statistics would look complete without its rows, so the table is refused."""
    table = f"{DB}.split_places"
    stack.spark.sql(f"DROP TABLE IF EXISTS {table}")
    stack.spark.sql(f"CREATE TABLE {table} (id INT, p STRING) USING parquet PARTITIONED BY (p) "
                    f"LOCATION '{tmp_path / 'home'}'")
    stack.spark.sql(f"INSERT INTO {table} VALUES (1, 'a')")
    collect(stack.spark, StatsStore(tmp_path / "ok"), [table])  # all inside: fine
    stack.spark.sql(f"ALTER TABLE {table} ADD PARTITION (p = 'b') LOCATION '{tmp_path / 'elsewhere'}'")
    stack.spark.sql(f"INSERT INTO {table} PARTITION (p = 'b') VALUES (2)")
    with pytest.raises(StatsError, match="reads files of it outside its location"):
        collect(stack.spark, StatsStore(tmp_path / "refused"), [table])
