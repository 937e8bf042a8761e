"""Benchmark datasets: row counts match the specifications, and layouts are what they claim, measured from
the Parquet footers of the files Spark wrote."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from backend.warehouse import read_dataset, table_location
from bench.generate_raw import generate_raw
from bench.suites import SUITES, TPCDS, TPCH, indexes, rows_match
from tests.conftest import PARTITIONED_TABLES, TEST_FILES, TEST_SF, Stack

pytestmark = pytest.mark.spark


def column_ranges(folder: Path, column: str) -> list[tuple[object, object]]:
    """(min, max) of ``column`` per Parquet file, from the footers' row-group statistics."""
    ranges = []
    for path in sorted(folder.rglob("*.parquet")):
        meta = pq.ParquetFile(path).metadata
        index = meta.schema.to_arrow_schema().get_field_index(column)
        stats = [meta.row_group(i).column(index).statistics for i in range(meta.num_row_groups)]
        ranges.append((min(s.min for s in stats), max(s.max for s in stats)))
    return ranges


def overlap_factor(ranges: list[tuple[object, object]]) -> float:
    """Sum of the files' range widths over the width of the whole column: 1.0 for disjoint files that tile the
    domain, about the file count when every file spans everything."""
    to_num = (lambda v: v.toordinal()) if hasattr(ranges[0][0], "toordinal") else float
    lo = min(to_num(r[0]) for r in ranges)
    hi = max(to_num(r[1]) for r in ranges)
    return sum(to_num(b) - to_num(a) for a, b in ranges) / (hi - lo)


def test_tpch_row_counts_match_the_spec(stack: Stack) -> None:
    ds = stack.dataset("tpch", "tuned")
    counts = {t.name: t.rows for t in ds.tables}
    for spec in TPCH.tables:
        assert rows_match(spec, "tpch", TEST_SF, counts[spec.name]), (spec.name, counts[spec.name])
    # The manifest's counts are what Spark sees.
    for table, n in counts.items():
        assert stack.spark.sql(f"SELECT count(*) FROM {ds.database}.{table}").first()[0] == n


def test_tpcds_raw_row_counts(stack: Stack) -> None:
    """dsdgen scales dimensions sub-linearly below SF 1, so at SF 0.01 only the fixed-size tables have a
    number to check; the facts must at least be non-empty."""
    raw = generate_raw(stack.config.paths.raw, "tpcds", TEST_SF)
    for spec in TPCDS.tables:
        rows = pq.ParquetFile(raw / f"{spec.name}.parquet").metadata.num_rows
        match = rows_match(spec, "tpcds", TEST_SF, rows)
        assert match is not False, (spec.name, rows)
        if match is None:
            assert rows > 0, spec.name


def test_tuned_lineitem_files_have_narrow_disjoint_shipdate_ranges(stack: Stack) -> None:
    ds = stack.dataset("tpch", "tuned")
    folder = table_location(stack.config.paths.warehouse, ds.database, "lineitem")
    ranges = column_ranges(folder, "l_shipdate")
    assert len(ranges) == TEST_FILES
    # Range clustering: the files tile the date range with at most shared boundary days.
    assert overlap_factor(ranges) < 1.1
    ordered = sorted(ranges)
    assert all(prev[1] <= nxt[0] for prev, nxt in zip(ordered, ordered[1:]))
    # Within each file rows are ordered by l_orderkey.
    for path in folder.glob("*.parquet"):
        keys = pq.read_table(path, columns=["l_orderkey"]).column(0).to_pylist()
        assert keys == sorted(keys)


def test_tuned_orders_and_dimensions(stack: Stack) -> None:
    ds = stack.dataset("tpch", "tuned")
    warehouse = stack.config.paths.warehouse
    assert overlap_factor(column_ranges(table_location(warehouse, ds.database, "orders"), "o_orderdate")) < 1.1
    # partsupp is sorted on ps_partkey: its files hold disjoint key ranges.
    assert overlap_factor(column_ranges(table_location(warehouse, ds.database, "partsupp"), "ps_partkey")) < 1.1


def test_random_layout_spreads_dates_over_every_file(stack: Stack) -> None:
    ds = stack.dataset("tpch", "random:3")
    assert "l_partkey" in ds.table("lineitem").ordering
    folder = table_location(stack.config.paths.warehouse, ds.database, "lineitem")
    ranges = column_ranges(folder, "l_shipdate")
    assert len(ranges) == TEST_FILES
    # Ordered by l_partkey, every file spans (nearly) the whole shipdate range.
    assert overlap_factor(ranges) > 0.9 * TEST_FILES
    # ... and holds a narrow slice of l_partkey instead.
    assert overlap_factor(column_ranges(folder, "l_partkey")) < 1.1


def test_partitioned_layout_partitions_facts_by_date_key(stack: Stack) -> None:
    ds = stack.dataset("tpcds", "partitioned", tables=PARTITIONED_TABLES)
    sales = ds.table("store_sales")
    assert sales.partition_columns == ("ss_sold_date_sk",)
    folder = table_location(stack.config.paths.warehouse, ds.database, "store_sales")
    partitions = [p for p in folder.iterdir() if p.is_dir()]
    assert all(p.name.startswith("ss_sold_date_sk=") for p in partitions)
    # One file per date: each partition folder holds exactly one Parquet file.
    assert all(len(list(p.glob("*.parquet"))) == 1 for p in partitions)
    assert sales.files == len(partitions)
    # Dimensions are not partitioned.
    assert ds.table("item").partition_columns == ()
    # Spark sees the partitions and prunes them statically.
    table = f"{ds.database}.store_sales"
    assert stack.spark.sql(f"SELECT count(*) FROM {table}").first()[0] == sales.rows
    one_date = sorted(p.name.split("=", 1)[1] for p in partitions if "HIVE_DEFAULT" not in p.name)[0]
    df = stack.spark.sql(f"SELECT count(*) FROM {table} WHERE ss_sold_date_sk = {one_date}")
    assert df.first()[0] > 0
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "PartitionFilters: [isnotnull(ss_sold_date_sk" in plan


@pytest.mark.parametrize("suite, layout", [("tpch", "tuned"), ("tpch", "random:3")])
def test_every_table_registers_and_manifest_round_trips(stack: Stack, suite: str, layout: str) -> None:
    ds = stack.dataset(suite, layout)
    assert read_dataset(stack.config.paths.warehouse / ds.database) == ds
    tables = {r.tableName for r in stack.spark.sql(f"SHOW TABLES IN {ds.database}").collect()}
    assert tables == {t.name for t in SUITES[suite].tables}


def test_a_failed_layout_leaves_nothing_behind(stack: Stack, tmp_path: Path) -> None:
    """A layout that dies half-way (here: the third table's generated file is garbage) leaves neither a
    database folder nor temporary output in the warehouse."""
    from layout.simple import parse_layout
    from bench.lay_out import lay_out

    raw = generate_raw(stack.config.paths.raw, "tpch", TEST_SF)
    broken = tmp_path / "raw"
    broken.mkdir()
    for f in raw.glob("*.parquet"):
        (broken / f.name).symlink_to(f)
    (broken / "partsupp.parquet").unlink()
    (broken / "partsupp.parquet").write_bytes(b"not parquet at all")
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    with pytest.raises(Exception):
        lay_out(stack.spark, broken, warehouse, TPCH, TEST_SF, parse_layout("tuned"), 2, 1 << 20)
    assert list(warehouse.iterdir()) == []


def test_a_layout_is_reproducible(stack: Stack, tmp_path: Path) -> None:
    """The same tables laid out twice in one session get the same files. Spark seeds its range-partitioning
    sample with the RDD's id, which grows with every query the session runs, so by default each layout
    draws other file boundaries, and a test's count of skipped files depends on what ran before it (CI
    failed on that). The layout job samples every row instead (``full_sample_hint``)."""
    from bench.lay_out import lay_out
    from layout.simple import parse_layout

    raw = generate_raw(stack.config.paths.raw, "tpcds", TEST_SF)
    tables = ("store_sales", "date_dim")
    folders = []
    for run in ("first", "second"):
        stack.spark.range(run == "first" and 3 or 5).collect()  # other RDD ids before each run
        ds = lay_out(stack.spark, raw, tmp_path / run, TPCDS, TEST_SF, parse_layout("tuned"), TEST_FILES,
                     64 << 20, tables=tables)
        folders.append(tmp_path / run / ds.database)
    for table, column in (("store_sales", "ss_sold_date_sk"), ("date_dim", "d_date_sk")):
        first, second = (column_ranges(f / table, column) for f in folders)
        assert len(first) == TEST_FILES, (table, first)
        assert first == second, table


def test_the_tpcds_datasets_get_bloom_filters_on_order_numbers_of_the_tables_collected(stack: Stack) -> None:
    """Every order and ticket number column of the sales and returns (bench/suites.py), and only those of the
    tables collected: the partitioned layout builds the store_sales star alone, and collect refuses a
    Bloom column no table collected has. Checked in the statistics the differential tests use."""
    assert indexes("tpcds", [t.name for t in TPCDS.tables]) == {"bloom": (
        "ss_ticket_number", "sr_ticket_number", "cs_order_number", "cr_order_number", "ws_order_number",
        "wr_order_number")}
    assert indexes("tpcds", PARTITIONED_TABLES) == {"bloom": ("ss_ticket_number",)}
    assert indexes("tpch", [t.name for t in TPCH.tables]) == {}
    from stats.freshness import Lister
    from stats.loader import StatsLoader

    store = stack.stats_store("tpcds", "tuned")
    stats = StatsLoader(store, Lister(0)).table_stats(f"{stack.database('tpcds', 'tuned')}.web_sales")
    assert stats is not None and stats.columns["ws_order_number"].indexes, "web_sales has no Bloom filter"
