"""Statistics carried over to a copy of a table's files (``stats/copied.py``), on real Parquet files and Spark.

The oracle is the collector itself: what is carried over must be exactly what collecting the copy writes
(every row, bound, range-set, value list and Bloom filter; the entry but its time of collection). And it must
not be carried when the source's statistics do not describe exactly the files copied (a file added behind
the statistics, a file rewritten since, a file changed while the copy runs or before the copy is defined, a
source without statistics) or when the copy is defined to be read otherwise or over another folder."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest

import stats.copied
from bench.layout_effect import collect_as_source, copy_tables
from stats.collect import TableDescription, collect, describe_table
from stats.copied import Copy, carried, copy_files, renamed
from stats.freshness import Lister
from stats.loader import StatsLoader
from stats.store import StatsStore
from tests.conftest import PARTITIONED_TABLES, Stack, catalog_tables

pytestmark = pytest.mark.spark

DB = "stats_copied"


def _comparable(store: StatsStore, table: str) -> tuple:
    snapshot = store.snapshot()
    entry = dataclasses.replace(snapshot.entry(table), collected_at="")
    rows = sorted(snapshot.read(table).to_pylist(), key=lambda r: r["path"])
    return entry, rows


def test_carried_statistics_are_what_collecting_the_copy_writes(stack: Stack, tmp_path: Path) -> None:
    """TPC-DS store_sales (range-sets, value lists, Bloom filters) and date_dim copied under a folder whose
    name Spark spells URL-encoded; the dimensions not copied are the source's folders under a second name."""
    source = stack.database("tpcds", "tuned")
    store = StatsStore(tmp_path / "carried")
    folder = tmp_path / "a copy 100%"
    names = ["store_sales", "date_dim", "item"]
    uncollected = copy_tables(stack.spark, source, DB, names, ["store_sales", "date_dim"], folder,
                              (stack.stats_store("tpcds", "tuned"), store))
    assert uncollected == []
    carried = {t: _comparable(store, f"{DB}.{t}") for t in names}
    assert carried["store_sales"][0].indexes == {"bloom": ("ss_ticket_number",)}
    assert all(r["path"].startswith("file:") and "/a%20copy%20100%25/store_sales/" in r["path"]
               for r in carried["store_sales"][1])
    assert carried["store_sales"][0].location == f"file:{folder}/store_sales"

    collected = StatsStore(tmp_path / "collected")
    collect(stack.spark, collected, [f"{DB}.{t}" for t in names], indexes={"bloom": ["ss_ticket_number"]})
    for t in names:
        assert carried[t] == _comparable(collected, f"{DB}.{t}"), t
    stats = StatsLoader(store, Lister(0)).table_stats(f"{DB}.store_sales", fresh_listing=True)
    assert stats is not None and stats.unknown_files == 0 and stats.n_files == len(carried["store_sales"][1])


def test_a_partitioned_table_copied_reads_every_row_and_its_statistics_cover_the_copy(stack: Stack,
                                                                                        tmp_path: Path) -> None:
    """The partitioned layout's store_sales (one folder per date) copied, and item defined over the source's
    folder: Spark registers no partition of a table created over existing folders, so without their recovery
    the copy reads no row. Its statistics are carried over, or collected, for exactly the copy's files."""
    source = stack.database("tpcds", "partitioned", PARTITIONED_TABLES)
    store = StatsStore(tmp_path / "carried")
    uncollected = copy_tables(stack.spark, source, f"{DB}_parts", ["store_sales", "item"], ["store_sales"],
                              tmp_path / "copy", (stack.stats_store("tpcds", "partitioned"), store))
    collect_as_source(stack.spark, stack.stats_store("tpcds", "partitioned"), store, source, f"{DB}_parts",
                      uncollected)

    def summary(db: str) -> tuple:
        return tuple(stack.spark.sql(f"SELECT count(*), count(DISTINCT ss_sold_date_sk), sum(ss_quantity) "
                                     f"FROM {db}.store_sales").first())

    rows, dates, _ = summary(source)
    assert rows > 0 and dates > 100
    assert summary(f"{DB}_parts") == summary(source)
    assert describe_table(stack.spark, f"{DB}_parts.store_sales").partition_columns == ("ss_sold_date_sk",)
    partitions = stack.spark.sql(f"SHOW PARTITIONS {DB}_parts.store_sales").count()
    assert partitions == stack.spark.sql(f"SHOW PARTITIONS {source}.store_sales").count()
    stats = StatsLoader(store, Lister(0)).table_stats(f"{DB}_parts.store_sales", fresh_listing=True)
    assert stats is not None and stats.unknown_files == 0 and stats.n_files == partitions
    assert stack.spark.sql(f"SELECT count(*) FROM {DB}_parts.item").first()[0] == \
        stack.spark.sql(f"SELECT count(*) FROM {source}.item").first()[0]


@pytest.fixture()
def own_table(stack: Stack, tmp_path: Path) -> tuple[StatsStore, str]:
    """A table of this test's own (a copy of TPC-H orders' files), with statistics collected."""
    root = tmp_path / "source"
    orders = describe_table(stack.spark, f"{stack.database('tpch', 'tuned')}.orders").location
    shutil.copytree(orders.removeprefix("file:"), root / "orders")
    store = catalog_tables(stack, root, f"{DB}_src", ["orders"])
    return store, f"file:{root / 'orders'}"


def _copy(store: StatsStore, location: str, tmp_path: Path) -> Copy:
    return copy_files(store.snapshot(), f"{DB}_src.orders", location, tmp_path / "copy")


def _define(stack: Stack, folder: Path, columns: str = "") -> TableDescription:
    stack.spark.sql(f"CREATE DATABASE IF NOT EXISTS {DB}")
    stack.spark.sql(f"DROP TABLE IF EXISTS {DB}.orders")
    stack.spark.sql(f"CREATE TABLE {DB}.orders {columns} USING parquet LOCATION '{folder}'")
    return describe_table(stack.spark, f"{DB}.orders")


def test_carried_when_the_statistics_describe_the_files_and_the_copy_is_read_alike(
        stack: Stack, own_table: tuple, tmp_path: Path) -> None:
    store, location = own_table
    copy = _copy(store, location, tmp_path)
    assert copy.statistics is not None
    entry, data = carried(copy, _define(stack, tmp_path / "copy"))
    assert entry.name == f"{DB}.orders" and data.num_rows == len(list((tmp_path / "copy").glob("*.parquet")))
    # Defined with fewer columns than its files hold: read otherwise than the source, so collected instead.
    assert carried(copy, _define(stack, tmp_path / "copy", "(o_orderkey BIGINT, o_custkey BIGINT)")) is None


def test_not_carried_past_a_file_added_behind_the_statistics(own_table: tuple, tmp_path: Path) -> None:
    store, location = own_table
    folder = tmp_path / "source" / "orders"
    shutil.copy(next(folder.glob("*.parquet")), folder / "part-added.parquet")
    assert _copy(store, location, tmp_path).statistics is None
    assert (tmp_path / "copy" / "part-added.parquet").is_file()  # copied all the same, only not described


def test_not_carried_past_a_file_rewritten_since(own_table: tuple, tmp_path: Path) -> None:
    store, location = own_table
    one = next((tmp_path / "source" / "orders").glob("*.parquet"))
    os.utime(one, ns=(one.stat().st_atime_ns, one.stat().st_mtime_ns + 5_000_000_000))
    assert _copy(store, location, tmp_path).statistics is None


def test_not_carried_when_a_writer_changes_the_source_during_the_copy(
        own_table: tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, location = own_table
    folder = tmp_path / "source" / "orders"
    copytree = shutil.copytree

    def with_a_writer(src: str, dst: Path) -> object:
        out = copytree(src, dst)
        shutil.copy(next(folder.glob("*.parquet")), folder / "part-late.parquet")  # after the copy read it
        return out

    monkeypatch.setattr(stats.copied.shutil, "copytree", with_a_writer)
    assert _copy(store, location, tmp_path).statistics is None


def test_not_carried_when_the_copy_changes_before_it_is_defined(
        stack: Stack, own_table: tuple, tmp_path: Path) -> None:
    store, location = own_table
    copy = _copy(store, location, tmp_path)
    one = next((tmp_path / "copy").glob("*.parquet"))
    os.utime(one, ns=(one.stat().st_atime_ns, one.stat().st_mtime_ns + 5_000_000_000))
    assert copy.statistics is not None and carried(copy, _define(stack, tmp_path / "copy")) is None


def test_not_carried_from_a_table_without_statistics_or_to_another_folder(
        stack: Stack, own_table: tuple, tmp_path: Path) -> None:
    store, location = own_table
    assert _copy(StatsStore(tmp_path / "empty"), location, tmp_path).statistics is None
    # A second name for the source's statistics only over the source's own folder.
    assert renamed(store.snapshot(), f"{DB}_src.orders", _define(stack, tmp_path / "copy")) is None
    assert renamed(store.snapshot(), f"{DB}_src.orders", _define(stack, tmp_path / "source" / "orders")) is not None
