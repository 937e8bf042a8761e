"""diPs as column predicates on Spark (rewriter/dip_column.py): Parquet skips the row groups of a kept file
that the predicate rules out, the rows are the original's, and where the predicate would keep most of a
reference's values it is not written."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from backend.scan_metrics import collect_with_metrics
from rewriter.rewrite import RewriteContext, rewrite
from stats.freshness import Lister
from stats.loader import StatsLoader
from tests.conftest import Stack, catalog_tables

pytestmark = [pytest.mark.spark, pytest.mark.differential]


def test_a_narrow_dip_skips_row_groups_inside_a_kept_file(stack: Stack, tmp_path: Path) -> None:
    # One fact file of four row groups sorted by k (0..3999); the dimension rows that pass hold keys 1500, 1501.
    (tmp_path / "fact").mkdir()
    (tmp_path / "dim").mkdir()
    pq.write_table(pa.table({"k": pa.array(range(4000), pa.int32()), "v": pa.array(range(4000), pa.int64())}),
                   tmp_path / "fact" / "part-0.parquet", row_group_size=1000)
    dim_schema = pa.schema([("k", pa.int64()), ("tag", pa.string())])
    pq.write_table(pa.table({"k": [1500, 1501], "tag": ["z", "z"]}, schema=dim_schema), tmp_path / "dim" / "part-0.parquet")
    spread = [*range(0, 4000, 7), 2**40]  # keys over all the fact's values, and one no INT column holds
    pq.write_table(pa.table({"k": spread, "tag": ["y"] * len(spread)}, schema=dim_schema), tmp_path / "dim" / "part-1.parquet")
    store = catalog_tables(stack, tmp_path, "dip_column", ["fact", "dim"])
    files_only = RewriteContext(StatsLoader(store, Lister(0)), database="dip_column")
    sql = "SELECT f.k, f.v FROM fact f JOIN dim d ON f.k = d.k WHERE d.tag = 'z'"
    spark = stack.spark
    spark.sql("USE dip_column")
    try:
        want = sorted(spark.sql(sql).collect())
        assert [tuple(r) for r in want] == [(1500, 1500), (1501, 1501)]
        plain = rewrite(sql, files_only)
        assert "`k` IN" not in plain.sql
        _, metrics = collect_with_metrics(spark.sql(plain.sql))
        assert [m.rows for m in metrics if m.table.endswith("fact")] == [4000]

        columns = rewrite(sql, dataclasses.replace(files_only, dip_column_max_share=0.5))
        fact = next(t for t in columns.decision.tables if t.alias == "f")
        assert fact.column_predicates == ["`k` IN (1500, 1501)"] and fact.files_skipped == 0
        rows, metrics = collect_with_metrics(spark.sql(columns.sql))
        assert sorted(rows) == want
        assert [m.rows for m in metrics if m.table.endswith("fact")] == [1000]  # one row group of four read
        # Keys spread over the fact's values: a predicate would drop few rows for its cost, unless every one the
        # shape allows is asked for; then the key beyond INT is not written as a literal, and the rows are the same.
        wide = "SELECT f.k, f.v FROM fact f JOIN dim d ON f.k = d.k WHERE d.tag = 'y'"
        loose = rewrite(wide, dataclasses.replace(files_only, dip_column_max_share=0.5))
        assert next(t for t in loose.decision.tables if t.alias == "f").column_predicates == []
        every = rewrite(wide, dataclasses.replace(files_only, dip_column_max_share=1.0))
        written = next(t for t in every.decision.tables if t.alias == "f").column_predicates
        assert written and all(str(2**40) not in p for p in written)
        assert sorted(spark.sql(every.sql).collect()) == sorted(spark.sql(wide).collect())
    finally:
        spark.sql("USE default")


@pytest.fixture(scope="module")
def named_like_literals(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> RewriteContext:
    """A fact whose join columns are named ``null`` and ``true``, in two files, and a dimension."""
    root = tmp_path_factory.mktemp("dip_column_names")
    (root / "fact").mkdir()
    (root / "dim").mkdir()
    for f in range(2):
        keys = range(f * 100, f * 100 + 100)
        pq.write_table(pa.table({"null": pa.array(keys, pa.int32()), "true": pa.array(keys, pa.int64())}),
                       root / "fact" / f"part-{f}.parquet")
    pq.write_table(pa.table({"k": pa.array([5, 6, 150], pa.int64()), "tag": ["z", "z", "y"]}), root / "dim" / "part-0.parquet")
    store = catalog_tables(stack, root, "dip_column_names", ["fact", "dim"])
    return RewriteContext(StatsLoader(store, Lister(0)), database="dip_column_names", dip_column_max_share=1.0)


@pytest.mark.parametrize("column", ["null", "true"])
def test_a_join_column_named_like_a_literal_is_quoted(stack: Stack, named_like_literals: RewriteContext,
                                                     column: str) -> None:
    """A column named ``null`` written bare would be the literal NULL: ``null IN (1, 2)`` drops every row."""
    spark = stack.spark
    spark.sql("USE dip_column_names")
    try:
        sql = f"SELECT f.`{column}` FROM fact f JOIN dim d ON f.`{column}` = d.k WHERE d.tag = 'z'"
        result = rewrite(sql, named_like_literals)
        fact = next(t for t in result.decision.tables if t.alias == "f")
        assert fact.column_predicates == [f"`{column}` IN (5, 6)"], fact.column_predicates
        assert sorted(spark.sql(result.sql).collect()) == sorted(spark.sql(sql).collect()) == [(5,), (6,)]
    finally:
        spark.sql("USE default")
