"""Ranges of a joined table's column (``--lead-ranges SENDER.COLUMN:N@FOREIGN=KEY``, ``layout/lead.py``), on
Spark: a customer table laid out by the state of its address. Each block holds the customers of one range of
states (checked on Spark's join of the new files), and a statement filtering on a state the training never
used, or on several, or on NULL, reads only the blocks whose range holds them and answers as Spark does. On the
customer table's files before, where addresses are spread over every file, the same statements skip nothing."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from layout.apply import apply
from layout.joined import JoinedKeys
from layout.lead import LeadRanges
from layout.sample import LayoutError, sample_rows
from layout.whatif import Plan, plan
from layout.workload import Statement, table_workload
from rewriter.rewrite import RewriteContext, rewrite
from stats.freshness import Lister
from stats.loader import StatsLoader
from stats.store import StatsStore
from tests.conftest import Stack, catalog_tables, spark_rows

pytestmark = pytest.mark.spark

DB = "joined_lead"
STATES = [f"S{i:02d}" for i in range(20)]
LEAD = LeadRanges("a_state", 8, "addr", "c_addr_sk", "a_sk")


def _write(root: Path) -> None:
    rng = random.Random(7)
    (root / "addr").mkdir()
    (root / "cust").mkdir()
    sks = list(range(2000))
    rng.shuffle(sks)  # address keys say nothing of the state
    states = [None if i % 97 == 0 else rng.choice(STATES) for i in range(2000)]
    for f in range(2):
        part = slice(f * 1000, f * 1000 + 1000)
        pq.write_table(pa.table({"a_sk": pa.array(sks[part], pa.int64()), "a_state": pa.array(states[part], pa.string())}),
                       root / "addr" / f"part-{f}.parquet")
    # NULL and dangling foreign keys join no state: they fail every range and the NOT NULL cut.
    addr = [None if i % 101 == 0 else 5000 + i if i % 103 == 0 else rng.randrange(2000) for i in range(8000)]
    for f in range(4):
        part = slice(f * 2000, f * 2000 + 2000)
        pq.write_table(pa.table({"c_sk": pa.array(range(f * 2000, f * 2000 + 2000), pa.int64()),
                                 "c_addr_sk": pa.array(addr[part], pa.int64()),
                                 "c_val": pa.array([i % 13 for i in range(f * 2000, f * 2000 + 2000)], pa.int64())}),
                       root / "cust" / f"part-{f}.parquet")


def _query(where: str) -> str:
    return (f"SELECT a.a_state, count(*), sum(c.c_val) FROM cust c JOIN addr a ON c.c_addr_sk = a.a_sk "
            f"WHERE {where} GROUP BY a.a_state")


# Statements the training never used: one state, several, a range, NULL, and no state filter at all.
UNSEEN = {"one state": "a.a_state = 'S13'", "two states": "a.a_state IN ('S02', 'S17')",
          "a range": "a.a_state BETWEEN 'S08' AND 'S09'", "NULL states": "a.a_state IS NULL",
          "no state filter": "c.c_val = 3"}


@dataclasses.dataclass
class LaidOut:
    plan: Plan
    files: int  # of the laid-out table
    before: dict[str, list]  # Spark's rows of each unseen statement before the layout
    skipped_before: dict[str, int]  # customer files each one skipped then
    store: StatsStore


@pytest.fixture(scope="module")
def laid_out(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> LaidOut:
    """The customer table laid out by the state of its address: 8 ranges asked, blocks of a 13th of the table
    (a range too small to split); the unseen statements' rows and skipped files before."""
    root = tmp_path_factory.mktemp("joined_lead")
    _write(root)
    store = catalog_tables(stack, root, DB, ["addr", "cust"])
    loader = StatsLoader(store, Lister(0))
    table = f"{DB}.cust"
    train = [Statement(_query(f"a.a_state = '{s}'"), DB) for s in STATES[:6]]
    workload = table_workload(train, table, loader)
    stats = loader.table_stats(table, fresh_listing=True)
    sample = sample_rows(stats, sorted(set(workload.columns) | {LEAD.sampled()}), max_rows=10**6)
    p = plan(workload, sample, sample.table_rows // 13, JoinedKeys(loader), [LEAD])  # a range too small to split
    ctx = RewriteContext(loader, database=DB, min_skip_fraction=0.0)
    stack.spark.sql(f"USE {DB}")
    try:
        before = {name: spark_rows(stack, _query(w)) for name, w in UNSEEN.items()}
        skipped = {name: next(t for t in rewrite(_query(w), ctx).decision.tables if t.alias == "c").files_skipped
                   for name, w in UNSEEN.items()}
        done = apply(lambda sql: [tuple(r) for r in stack.spark.sql(sql).collect()], store, loader, p)
    finally:
        stack.spark.sql("USE default")
    return LaidOut(p, done.files, before, skipped, store)


def test_each_block_joins_one_range_of_states(stack: Stack, laid_out: LaidOut) -> None:
    """Each block's customers join the states of one range, and the ranges do not overlap."""
    assert laid_out.plan.ranges() >= 6, [b.path for b in laid_out.plan.tree.blocks]
    spans = stack.spark.sql(f"SELECT substring(c._metadata.file_name, 1, 11), min(a.a_state), max(a.a_state) "
                            f"FROM {DB}.cust c JOIN {DB}.addr a ON c.c_addr_sk = a.a_sk WHERE a.a_state IS NOT NULL "
                            "GROUP BY 1 ORDER BY 2").collect()  # per block (block-NNNNN)
    assert len(spans) == laid_out.plan.ranges() and all(x[2] < y[1] for x, y in zip(spans, spans[1:])), spans


@pytest.mark.differential
@pytest.mark.parametrize("name", list(UNSEEN))
def test_a_table_laid_out_by_a_joined_column_skips_blocks_for_any_literal(stack: Stack, laid_out: LaidOut,
                                                                         name: str) -> None:
    assert laid_out.skipped_before[name] == 0  # addresses spread over every file: nothing to skip before
    where = UNSEEN[name]
    ctx = RewriteContext(StatsLoader(laid_out.store, Lister(0)), database=DB, min_skip_fraction=0.0)
    r = rewrite(_query(where), ctx)
    cust = next(t for t in r.decision.tables if t.alias == "c")
    stack.spark.sql(f"USE {DB}")
    try:
        assert spark_rows(stack, r.sql) == spark_rows(stack, _query(where)) == laid_out.before[name], name
    finally:
        stack.spark.sql("USE default")
    if name == "no state filter":
        assert cust.files_skipped == 0, name
    elif name == "NULL states":
        # a NULL state joins through the IS NOT NULL cut's failing side only
        assert cust.files_kept <= 2, (name, cust.files_kept, laid_out.files)
    else:
        assert cust.files_kept <= 3 and cust.files_skipped >= laid_out.files - 3, (name, cust.files_kept, laid_out.files)


def test_joined_ranges_need_a_unique_key(stack: Stack, tmp_path: Path) -> None:
    _write(tmp_path)
    rows = pq.read_table(tmp_path / "addr" / "part-0.parquet")
    pq.write_table(rows, tmp_path / "addr" / "part-2.parquet")  # every key of part-0 twice
    store = catalog_tables(stack, tmp_path, DB + "_dup", ["addr", "cust"])
    loader = StatsLoader(store, Lister(0))
    stats = loader.table_stats(f"{DB}_dup.cust", fresh_listing=True)
    sample = sample_rows(stats, ["c_addr_sk"], max_rows=10**6)
    workload = table_workload([Statement(_query("a.a_state = 'S01'"), DB + "_dup")], f"{DB}_dup.cust", loader)
    with pytest.raises(LayoutError, match="a_sk is not unique"):
        plan(workload, sample, 100, JoinedKeys(loader), [LEAD])
