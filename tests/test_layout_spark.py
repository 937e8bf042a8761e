"""The layout planner against Spark: on the TPC-H SF 0.01 ``tuned`` lineitem and the 22 TPC-H queries,
every block's description selects in Spark exactly the rows the planner routed to the block (so the cuts
mean what Spark means), the blocks partition the table, each scan's lower bound counts the rows Spark finds
for its conjuncts, and the proposed layout reads less than the current files."""

from __future__ import annotations

import pytest
import sqlglot

from bench.query_suite import runnable_queries
from layout.joined import JoinedKeys
from layout.sample import sample_rows
from layout.whatif import min_block_rows, plan, what_if
from layout.workload import Joined, Statement, table_workload, unqualified
from rewriter.evaluate import fully_translated
from stats.freshness import Lister
from stats.loader import StatsLoader
from tests.conftest import Stack

pytestmark = pytest.mark.spark


def _exact(j: Joined) -> bool:
    return fully_translated(j.pred) and all(_exact(n) for n in j.nested)


def test_qd_tree_blocks_and_scans_agree_with_spark(stack: Stack) -> None:
    ds = stack.dataset("tpch", "tuned")
    loader = StatsLoader(stack.stats_store("tpch", "tuned"), Lister(0))
    table = f"{ds.database}.lineitem"
    statements = [Statement(sql, ds.database) for sql in runnable_queries("tpch").values()]
    workload = table_workload(statements, table, loader)
    assert len(workload.scans) >= 20 and len(workload.cuts) >= 10, workload
    stats = loader.table_stats(table, fresh_listing=True)
    assert stats is not None
    sample = sample_rows(stats, list(workload.columns), max_rows=10**8)  # every row: exact counts to compare
    assert sample.n == sample.table_rows == int(stats.rows.sum())
    keys = JoinedKeys(loader)
    p = plan(workload, sample, min_block_rows(stats, sample, rows=sample.table_rows // 16, megabytes=None), keys)
    assert len(p.tree.blocks) >= 4

    holds, fails = [c.holds() for c in workload.cuts], [c.fails() for c in workload.cuts]
    spark = stack.spark

    def count(where: str) -> int:
        return spark.sql(f"SELECT count(*) FROM {table} WHERE {where}").collect()[0][0]

    for block in p.tree.blocks:
        assert count(p.tree.describe(block, holds, fails)) == block.size, p.tree.describe(block, holds, fails)
    assert sum(b.size for b in p.tree.blocks) == sample.n

    for q, scan in enumerate(workload.scans):
        if not scan.conjuncts and not scan.joined:
            assert p.matches[q].all()
            continue
        # The scan's conjuncts over the table's own columns (a scan's alias is the query's).
        where = " AND ".join([f"({unqualified(sqlglot.parse_one(c, read='spark'))})" for c in scan.conjuncts] +
                             [j.sql() for j in scan.joined])
        found = count(where)
        may = int(p.matches[q].sum())
        if fully_translated(scan.pred) and all(_exact(j) for j in scan.joined):
            assert may == found, (scan.describe(), may, found)
        else:
            assert may >= found, (scan.describe(), may, found)

    w = what_if(p, stats, keys)
    assert w.workload is workload
    qd, current = w.layouts[0], w.layouts[1]
    assert qd.name == "qd-tree" and current.name == "current files"
    assert w.total(qd.read) <= w.total(current.read)
    assert (qd.read >= w.lower - 1e-12).all()
    assert w.layouts[2].name == "random" and w.total(qd.read) < w.total(w.layouts[2].read)
