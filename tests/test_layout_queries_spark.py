"""Every TPC query on qd-tree layouts (issue 15: "correctness of every TPC query on the new layouts is checked in
the differential tests"). The fact tables of the SF 0.01 ``tuned`` datasets (TPC-H lineitem; TPC-DS store_sales,
catalog_sales, web_sales, inventory) are copied and laid out by ``layout apply`` as plans learned from query
instances of another seed than the queries' own literals (TPC-H substitution parameters, TPC-DS redrawn
literals); lineitem and store_sales are laid out in four date ranges first, the workload's cuts inside them
(``--lead-ranges``, ``layout/lead.py``). Each query that reads a laid-out table then runs on Spark as written and as Dipper rewrites it,
as the rewriter's differential test runs them on the simple layouts (``tests/test_rewriter_spark.py``: same
rows, scans that list exactly the files the decision kept, and a recorded floor of files skipped), and the
block descriptions must remove files beyond the statistics in many of them, so the test exercises blocks,
not only min/max statistics."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from bench import suites
from bench.layout_effect import copy_tables
from bench.query_suite import runnable_queries
from bench.redraw import TPCDS_TIME, Domains
from bench.workloads import instances
from layout.apply import apply
from layout.joined import JoinedKeys
from layout.lead import LeadRanges, sampled_columns
from layout.sample import sample_rows
from layout.whatif import min_block_rows, plan
from layout.workload import Statement, table_workload
from rewriter.rewrite import Rewrite, RewriteContext, rewrite
from stats.collect import collect
from stats.freshness import Lister
from stats.loader import StatsLoader
from stats.store import StatsStore
from tests.conftest import Stack
from tests.test_rewriter_spark import EXPECTED_SKIPS, check_rewrite, expected_skips

pytestmark = pytest.mark.spark

FACTS = {"tpch": ("lineitem",), "tpcds": ("store_sales", "catalog_sales", "web_sales", "inventory")}
BLOCKS = 16  # the minimum block is 1/16 of the table: up to 16 blocks of the SF 0.01 tables' 8 files
# Ranges first (up to four blocks in each): TPC-H filters l_shipdate with literals, so the rewriter decides the
# range cuts through the blocks' descriptions; TPC-DS reaches ss_sold_date_sk only through date_dim's diPs,
# and store_sales has NULL dates (their own block).
LEAD = {"lineitem": LeadRanges("l_shipdate", 4), "store_sales": LeadRanges("ss_sold_date_sk", 4)}
# The instances the plans learn from: literals drawn with another seed than the queries' own, but for the
# queries whose literals are not redrawn (docs/layout.md, TPC-DS query instances), whose instances are the query.
TRAIN_SEED = 11
_contexts: dict[str, RewriteContext | Exception] = {}  # a build that failed fails every test at once, not again
_lock = threading.Lock()


def laid_out(stack: Stack, suite: str, base: Path) -> RewriteContext:
    """A rewrite context on ``qdtree_<suite>``: the suite's ``tuned`` tables, the fact tables copied and laid out
    as qd-trees, statistics collected (range-sets of 8, as the other layouts' tests); built once per run."""
    with _lock:
        if suite not in _contexts:
            try:
                _contexts[suite] = _build(stack, suite, base)
            except Exception as e:  # noqa: BLE001 - kept, and raised to every test of the suite
                _contexts[suite] = e
        built = _contexts[suite]
        if isinstance(built, Exception):
            raise RuntimeError(f"the qd-tree layouts of {suite} could not be built") from built
        return built


def _build(stack: Stack, suite: str, base: Path) -> RewriteContext:
    """The copies, their statistics, a plan per fact table learned on the training instances, and ``apply``."""
    spark = stack.spark
    ds = stack.dataset(suite, "tuned")
    source = StatsLoader(stack.stats_store(suite, "tuned"), Lister(0))
    db = f"qdtree_{suite}"
    copy_tables(spark, ds.database, db, [t.name for t in suites.suite(suite).tables], list(FACTS[suite]), base / db)
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
        leads = (LEAD[fact],) if fact in LEAD else ()
        sample = sample_rows(stats, sampled_columns(workload.columns, leads),
                             max_rows=10**8)  # every row
        min_rows = min_block_rows(table, stats.n_files, sample, rows=sample.table_rows // BLOCKS, megabytes=None)
        p = plan(workload, sample, min_rows, JoinedKeys(loader), leads)
        assert len(p.tree.blocks) >= (6 if leads else 4), (table, len(p.tree.blocks))  # with lead: cut inside ranges
        apply(run, store, loader, p)
    return RewriteContext(StatsLoader(store, Lister(60)), database=db)


def _reads_laid_out(suite: str, name: str) -> bool:
    """From the query's text, not from a decision, which lists no table when the rewriter fails open."""
    tree = sqlglot.parse_one(runnable_queries(suite)[name], read="spark")
    return any(t.name.lower() in FACTS[suite] for t in tree.find_all(exp.Table))


def _fact_files_skipped(result: Rewrite, suite: str) -> int:
    return sum(t.files_skipped for t in result.decision.tables if t.table.rpartition(".")[2] in FACTS[suite])


CASES = [(suite, name) for suite in FACTS for name in runnable_queries(suite)]


@pytest.mark.parametrize("suite, name", CASES, ids=[f"{s}-qdtree-{n}" for s, n in CASES])
def test_query_results_unchanged_on_qd_tree_layouts(stack: Stack, tmp_path_factory: pytest.TempPathFactory,
                                                    suite: str, name: str) -> None:
    if not _reads_laid_out(suite, name):
        pytest.skip(f"{name} reads no laid-out table: the tuned layout's test covers it")
    ctx = laid_out(stack, suite, tmp_path_factory.getbasetemp() / "qdtree")
    sql = runnable_queries(suite)[name]
    result = rewrite(sql, ctx)
    assert result.decision.error is None, result.decision.error
    skipped = _fact_files_skipped(result, suite)  # the laid-out tables' own: gains elsewhere hide no loss
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
    by_blocks = {name: sum(t.files_removed_by_blocks for t in rewrite(sql, ctx).decision.tables)
                 for name, sql in runnable_queries(suite).items()}
    helped = sorted(name for name, files in by_blocks.items() if files)
    assert len(helped) >= at_least, by_blocks


def test_the_recorded_floors_are_the_cases_and_not_vacuous() -> None:
    recorded = {k: v for k, v in json.loads(EXPECTED_SKIPS.read_text()).items() if "-qdtree-" in k}
    assert set(recorded) == {f"{s}-qdtree-{n}" for s, n in CASES if _reads_laid_out(s, n)}, "re-record: the cases changed"
    for suite, at_least in (("tpch", 8), ("tpcds", 50)):
        assert sum(v > 0 for k, v in recorded.items() if k.startswith(f"{suite}-")) >= at_least, suite
