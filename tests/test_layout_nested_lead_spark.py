"""Ranges within ranges (``--lead-ranges`` given twice, ``layout/lead.py``, ``layout/qdtree.py`` ``_lead``), on
Spark: a sales table laid out in four ranges of its date, each cut into four ranges of its time of day, as
TPC-DS store_sales for q88 and q96, which filter on the hour (through ``time_dim``) and on no date. Each block
holds one date range and one time range (checked on Spark's reading of the new files); a statement on an hour
alone, through the join, reads one time range in each date range, a date window its date ranges, both their
cells, and each answers as Spark does. On the files before, where dates and times are spread over every
file, the same statements skip nothing."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from layout.apply import apply
from layout.joined import JoinedKeys
from layout.lead import LeadRanges, sampled_columns
from layout.sample import sample_rows
from layout.whatif import Plan, plan
from layout.workload import Statement, table_workload
from rewriter.rewrite import RewriteContext, rewrite
from stats.freshness import Lister
from stats.loader import StatsLoader
from stats.store import StatsStore
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


# Statements the training never used, and the most files of the 16 each may keep once laid out.
UNSEEN = {"an hour alone": ("t.t_hour = 15", 8),  # a time range per date range
          "half an hour alone": ("t.t_hour = 9 AND t.t_minute >= 30", 8),
          "a date window alone": ("s.s_date BETWEEN 410 AND 440", 8),  # its date range(s), every time range
          "both": ("t.t_hour = 19 AND s.s_date < 200", 2),  # the cell(s) of both
          "no filter on either": ("s.s_val = 3", 16)}


@dataclasses.dataclass
class LaidOut:
    plan: Plan
    files: int  # of the laid-out table
    before: dict[str, list]  # Spark's rows of each unseen statement before the layout
    skipped_before: dict[str, int]  # files of sales each one skipped then
    store: StatsStore


@pytest.fixture(scope="module")
def laid_out(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> LaidOut:
    """Sales laid out by 4 ranges of s_date, each cut into 4 ranges of s_time (500-row cells: too small to split
    again); the unseen statements' rows and skipped files before."""
    root = tmp_path_factory.mktemp("nested_lead")
    _write(root)
    store = catalog_tables(stack, root, DB, ["tdim", "sales"])
    loader = StatsLoader(store, Lister(0))
    table = f"{DB}.sales"
    train = [Statement(_query(f"s.s_date BETWEEN {d} AND {d + 60}"), DB) for d in (0, 300, 700)]
    workload = table_workload(train, table, loader)
    stats = loader.table_stats(table, fresh_listing=True)
    sample = sample_rows(stats, sampled_columns(workload.columns, LEADS), max_rows=10**6)
    p = plan(workload, sample, ROWS // 20, JoinedKeys(loader), LEADS)
    ctx = RewriteContext(loader, database=DB, min_skip_fraction=0.0)
    stack.spark.sql(f"USE {DB}")
    try:
        before = {name: spark_rows(stack, _query(w)) for name, (w, _) in UNSEEN.items()}
        skipped = {name: next(t for t in rewrite(_query(w), ctx).decision.tables if t.alias == "s").files_skipped
                   for name, (w, _) in UNSEEN.items()}
        done = apply(lambda sql: [tuple(r) for r in stack.spark.sql(sql).collect()], store, loader, p)
    finally:
        stack.spark.sql("USE default")
    return LaidOut(p, done.files, before, skipped, store)


def test_ranges_of_a_second_column_inside_every_range_of_the_first(stack: Stack, laid_out: LaidOut) -> None:
    """Each block: one date range and one time range; the date ranges and, inside each, the time ranges in block
    order do not overlap."""
    from layout.__main__ import render_plan

    p = laid_out.plan
    assert p.ranges() == 16 and len(p.tree.blocks) == 16, [b.path for b in p.tree.blocks]
    assert "ranges first: 16 cells: ranges of s_date (4 asked), each cut into ranges of s_time (4 asked)" in render_plan(p)
    assert laid_out.files == 16
    spans = stack.spark.sql(f"SELECT substring(_metadata.file_name, 1, 11) AS b, min(s_date), max(s_date), "
                            f"min(s_time), max(s_time) FROM {DB}.sales GROUP BY 1 ORDER BY 1").collect()
    assert len(spans) == 16
    dates = [spans[i * 4:(i + 1) * 4] for i in range(4)]
    for cells in dates:
        assert all(x[4] < y[3] for x, y in zip(cells, cells[1:])), cells  # times in order, disjoint
    for x, y in zip(dates, dates[1:]):
        assert max(c[2] for c in x) < min(c[1] for c in y), (x, y)  # date ranges in order, disjoint


@pytest.mark.differential
@pytest.mark.parametrize("name", list(UNSEEN))
def test_an_unseen_statement_reads_its_cells_and_answers_as_before(stack: Stack, laid_out: LaidOut, name: str) -> None:
    where, most = UNSEEN[name]
    assert laid_out.skipped_before[name] == 0  # dates and times spread over every file: nothing to skip before
    r = rewrite(_query(where), RewriteContext(StatsLoader(laid_out.store, Lister(0)), database=DB, min_skip_fraction=0.0))
    stack.spark.sql(f"USE {DB}")
    try:
        assert spark_rows(stack, r.sql) == laid_out.before[name], name
    finally:
        stack.spark.sql("USE default")
    kept = next(t for t in r.decision.tables if t.alias == "s").files_kept
    assert kept == 16 if name == "no filter on either" else kept <= most, (name, kept)
