"""Ranges within ranges (``--lead-ranges`` given twice, ``layout/lead.py``, ``layout/qdtree.py`` ``_lead``), on
Spark: a sales table laid out in four ranges of its date, each cut into four ranges of its time of day, as
TPC-DS store_sales for q88 and q96, which filter on the hour (through ``time_dim``) and on no date. Each block
holds one date range and one time range (checked on Spark's reading of the new files); a statement on an hour
alone, through the join, reads one time range in each date range, a date window its date ranges, both their
cells, and each answers as Spark does. On the files before, where dates and times are spread over every
file, the same statements skip nothing."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from layout.apply import apply
from layout.joined import JoinedKeys
from layout.lead import LeadRanges, sampled_columns
from layout.sample import sample_rows
from layout.whatif import plan
from layout.workload import Statement, table_workload
from rewriter.rewrite import RewriteContext, rewrite
from stats.freshness import Lister
from stats.loader import StatsLoader
from tests.conftest import Stack, catalog_tables, spark_rows

pytestmark = pytest.mark.spark

DB = "nested_lead"
LEADS = (LeadRanges("s_date", 4), LeadRanges("s_time", 4))
ROWS = 8000


def _write(root: Path) -> None:
    rng = random.Random(11)
    (root / "tdim").mkdir()
    (root / "sales").mkdir()
    sks = list(range(86400))  # seconds of the day, as TPC-DS time_dim
    pq.write_table(pa.table({"t_sk": pa.array(sks, pa.int64()), "t_hour": pa.array([s // 3600 for s in sks], pa.int64()),
                             "t_minute": pa.array([s % 3600 // 60 for s in sks], pa.int64())}),
                   root / "tdim" / "part-0.parquet")
    dates = [rng.randrange(1000) for _ in range(ROWS)]
    times = [None if i % 89 == 0 else rng.randrange(8 * 3600, 21 * 3600) for i in range(ROWS)]  # 8:00 to 20:59
    for f in range(4):
        part = slice(f * ROWS // 4, (f + 1) * ROWS // 4)
        pq.write_table(pa.table({"s_date": pa.array(dates[part], pa.int64()), "s_time": pa.array(times[part], pa.int64()),
                                 "s_val": pa.array([i % 7 for i in range(part.start, part.stop)], pa.int64())}),
                       root / "sales" / f"part-{f}.parquet")


def _query(where: str) -> str:
    return (f"SELECT t.t_hour, count(*), sum(s.s_val) FROM sales s JOIN tdim t ON s.s_time = t.t_sk "
            f"WHERE {where} GROUP BY t.t_hour")


@pytest.mark.differential
def test_ranges_of_a_second_column_inside_every_range_of_the_first(stack: Stack, tmp_path: Path) -> None:
    from layout.__main__ import render_plan

    _write(tmp_path)
    store = catalog_tables(stack, tmp_path, DB, ["tdim", "sales"])
    loader = StatsLoader(store, Lister(0))
    table = f"{DB}.sales"
    train = [Statement(_query(f"s.s_date BETWEEN {d} AND {d + 60}"), DB) for d in (0, 300, 700)]
    workload = table_workload(train, table, loader)
    stats = loader.table_stats(table, fresh_listing=True)
    sample = sample_rows(stats, sampled_columns(workload.columns, LEADS), max_rows=10**6)
    p = plan(workload, sample, ROWS // 20, JoinedKeys(loader), LEADS)  # 500-row cells: too small to split again
    assert p.ranges() == 16 and len(p.tree.blocks) == 16, [b.path for b in p.tree.blocks]
    assert "ranges first: 16 cells: ranges of s_date (4 asked), each cut into ranges of s_time (4 asked)" in render_plan(p)
    unseen = {"an hour alone": "t.t_hour = 15", "half an hour alone": "t.t_hour = 9 AND t.t_minute >= 30",
              "a date window alone": "s.s_date BETWEEN 410 AND 440", "both": "t.t_hour = 19 AND s.s_date < 200",
              "no filter on either": "s.s_val = 3"}
    ctx = RewriteContext(loader, database=DB, min_skip_fraction=0.0)
    stack.spark.sql(f"USE {DB}")
    try:
        before = {name: spark_rows(stack, _query(w)) for name, w in unseen.items()}
        for name, where in unseen.items():  # dates and times spread over every file: nothing to skip
            assert next(t for t in rewrite(_query(where), ctx).decision.tables if t.alias == "s").files_skipped == 0

        done = apply(lambda sql: [tuple(r) for r in stack.spark.sql(sql).collect()], store, loader, p)
        assert done.files == 16

        # Each block: one date range and one time range; the date ranges and, inside each, the time ranges in
        # block order do not overlap.
        spans = stack.spark.sql("SELECT substring(_metadata.file_name, 1, 11) AS b, min(s_date), max(s_date), "
                                "min(s_time), max(s_time) FROM sales GROUP BY 1 ORDER BY 1").collect()
        assert len(spans) == 16
        dates = [spans[i * 4:(i + 1) * 4] for i in range(4)]
        for cells in dates:
            assert all(x[4] < y[3] for x, y in zip(cells, cells[1:])), cells  # times in order, disjoint
        for x, y in zip(dates, dates[1:]):
            assert max(c[2] for c in x) < min(c[1] for c in y), (x, y)  # date ranges in order, disjoint

        ctx = RewriteContext(StatsLoader(store, Lister(0)), database=DB, min_skip_fraction=0.0)
        kept = {}
        for name, where in unseen.items():
            r = rewrite(_query(where), ctx)
            assert spark_rows(stack, r.sql) == before[name], name
            kept[name] = next(t for t in r.decision.tables if t.alias == "s").files_kept
        assert kept["no filter on either"] == 16, kept
        assert kept["an hour alone"] <= 8 and kept["half an hour alone"] <= 8, kept  # a time range per date range
        assert kept["a date window alone"] <= 8, kept  # its date range(s), every time range
        assert kept["both"] <= 2, kept  # the cell(s) of both
    finally:
        stack.spark.sql("USE default")
