"""Every TPC query on qd-tree layouts (issue 15: "correctness of every TPC query on the new layouts is checked in
the differential tests"). The fact tables of the SF 0.01 ``tuned`` datasets (TPC-H lineitem; TPC-DS store_sales,
catalog_sales, web_sales, inventory) are copied and laid out by ``layout apply`` as plans learned from query
instances of another seed than the queries' own literals (TPC-H substitution parameters, TPC-DS redrawn
literals). Each query that reads a laid-out table then runs on Spark as written and as Dipper rewrites it,
as the rewriter's differential test runs them on the simple layouts (``tests/test_rewriter_spark.py``: same
rows, scans that list exactly the files the decision kept, and a recorded floor of files skipped), and the
block descriptions must remove files beyond the statistics in many of them, so the test exercises blocks,
not only min/max statistics."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from bench.query_suite import runnable_queries
from bench.redraw import TPCDS_TIME, Domains
from bench import suites
from bench.workloads import instances
from layout.apply import apply
from layout.joined import JoinedKeys
from layout.sample import sample_rows
from layout.whatif import min_block_rows, plan
from layout.workload import Statement, table_workload
from rewriter.rewrite import Rewrite, RewriteContext, rewrite
from stats.collect import collect
from stats.freshness import Lister
from stats.loader import StatsLoader
from stats.store import StatsStore
from tests.conftest import Stack
from tests.test_rewriter_spark import check_rewrite, expected_skips

pytestmark = pytest.mark.spark

FACTS = {"tpch": ("lineitem",), "tpcds": ("store_sales", "catalog_sales", "web_sales", "inventory")}
BLOCKS = 16  # the minimum block is 1/16 of the table: up to 16 blocks of the SF 0.01 tables' 8 files
TRAIN_SEED = 11  # instances the plans learn from; the queries' own literals are not among them
_contexts: dict[str, RewriteContext] = {}
_lock = threading.Lock()


def laid_out(stack: Stack, suite: str, base: Path) -> RewriteContext:
    """A rewrite context on ``qdtree_<suite>``: the suite's ``tuned`` tables, the fact tables copied and laid out
    as qd-trees, statistics collected (range-sets of 8, as the other layouts' tests); built once per run."""
    with _lock:
        if suite in _contexts:
            return _contexts[suite]
        spark = stack.spark
        ds = stack.dataset(suite, "tuned")
        source = StatsLoader(stack.stats_store(suite, "tuned"), Lister(0))
        db = f"qdtree_{suite}"
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {db}")
        folder = base / db
        shutil.rmtree(folder, ignore_errors=True)
        for spec in suites.suite(suite).tables:
            location = next(r[1] for r in spark.sql(f"DESCRIBE TABLE EXTENDED {ds.database}.{spec.name}").collect()
                            if r[0] == "Location")
            if spec.name in FACTS[suite]:
                copy = folder / spec.name
                shutil.copytree(location.removeprefix("file:"), copy)
                location = f"file:{copy}"
            spark.sql(f"DROP TABLE IF EXISTS {db}.{spec.name}")
            spark.sql(f"CREATE TABLE {db}.{spec.name} USING parquet LOCATION '{location}'")
        store = StatsStore(stack.config.paths.stats / db)
        collect(spark, store, [f"{db}.{t.name}" for t in suites.suite(suite).tables], range_set_size=8)
        domains = Domains(source, ds.database, TPCDS_TIME) if suite == "tpcds" else None
        train = [Statement(sql, db) for _, sql in instances(suite, TRAIN_SEED, 2, None, domains)]

        def run(sql: str) -> list[tuple]:
            return [tuple(r) for r in spark.sql(sql).collect()]

        for fact in FACTS[suite]:
            loader = StatsLoader(store, Lister(0))
            table = f"{db}.{fact}"
            workload = table_workload(train, table, loader)
            stats = loader.table_stats(table, fresh_listing=True)
            sample = sample_rows(stats, list(workload.columns), max_rows=10**8)  # every row
            min_rows = min_block_rows(table, stats.n_files, sample, rows=sample.table_rows // BLOCKS, megabytes=None)
            p = plan(workload, sample, min_rows, JoinedKeys(loader))
            assert len(p.tree.blocks) >= 4, (table, len(p.tree.blocks))
            apply(run, store, loader, p)
        _contexts[suite] = RewriteContext(StatsLoader(store, Lister(60)), database=db)
        return _contexts[suite]


def _reads_laid_out(suite: str, name: str, ctx: RewriteContext) -> bool:
    d = rewrite(runnable_queries(suite)[name], ctx).decision
    return any(t.table.rpartition(".")[2] in FACTS[suite] for t in d.tables)


def _block_files(result: Rewrite) -> int:
    """Files the block descriptions removed beyond the statement's own predicates."""
    return sum(e.files_removed for t in result.decision.tables for e in t.predicates
               if e.sql.startswith("block descriptions: "))


CASES = [(suite, name) for suite in FACTS for name in runnable_queries(suite)]


@pytest.mark.parametrize("suite, name", CASES, ids=[f"{s}-qdtree-{n}" for s, n in CASES])
def test_query_results_unchanged_on_qd_tree_layouts(stack: Stack, tmp_path_factory: pytest.TempPathFactory,
                                                    suite: str, name: str) -> None:
    ctx = laid_out(stack, suite, tmp_path_factory.getbasetemp() / "qdtree")
    if not _reads_laid_out(suite, name, ctx):
        pytest.skip(f"{name} reads no laid-out table: the tuned layout's test covers it")
    sql = runnable_queries(suite)[name]
    result = rewrite(sql, ctx)
    assert result.decision.error is None, result.decision.error
    skipped = sum(t.files_skipped for t in result.decision.tables)
    floor = expected_skips(f"{suite}-qdtree-{name}", skipped)
    assert floor is not None, f"no expected skip count for {suite}-qdtree-{name}: record with DIPPER_RECORD_SKIPS=1"
    assert skipped >= floor, f"{suite}-qdtree-{name} skips {skipped} files, {floor} were recorded"
    stack.spark.sql(f"USE {ctx.database}")
    # As in the rewriter's differential test: every scan stays in the plan, so its metrics meet the decision.
    stack.spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        check_rewrite(stack, suite, name, sql, result)
    finally:
        stack.spark.conf.set("spark.sql.adaptive.enabled", "true")
        stack.spark.sql("USE default")


@pytest.mark.parametrize("suite, at_least", [("tpch", 4), ("tpcds", 15)])
def test_block_descriptions_remove_files_in_many_queries(stack: Stack, tmp_path_factory: pytest.TempPathFactory,
                                                        suite: str, at_least: int) -> None:
    """Not vacuous: the queries above skip blocks through the blocks' descriptions (cuts through joins
    included), beyond what the blocks' statistics rule out."""
    ctx = laid_out(stack, suite, tmp_path_factory.getbasetemp() / "qdtree")
    by_blocks = {name: _block_files(rewrite(sql, ctx)) for name, sql in runnable_queries(suite).items()}
    helped = sorted(name for name, files in by_blocks.items() if files)
    assert len(helped) >= at_least, by_blocks
