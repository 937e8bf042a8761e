"""Every TPC query on qd-tree layouts (issue 15: "correctness of every TPC query on the new layouts is checked in
the differential tests"). The fact tables of the SF 0.01 ``tuned`` datasets are copied and laid out by ``layout
apply`` as plans learned from query instances of another seed than the queries' own literals, in date ranges
first where the queries filter dates (``bench/qdtree_dataset.py``). Each query that reads a laid-out table then
runs on Spark as written and as Dipper rewrites it, as the rewriter's differential test runs them on the simple
layouts (``tests/test_rewriter_spark.py``: same rows, scans that list exactly the files the decision kept, and a
recorded floor of files skipped), and the block descriptions must remove files beyond the statistics in many of
them, so the test exercises blocks, not only min/max statistics. The same layouts serve the random differential
queries (``tests/test_random_queries.py``)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import sqlglot
from sqlglot import exp

from bench import qdtree_dataset
from bench.qdtree_dataset import FACTS
from bench.query_suite import runnable_queries
from rewriter.rewrite import Rewrite, RewriteContext, rewrite
from stats.freshness import Lister
from stats.loader import StatsLoader
from stats.store import StatsStore
from tests.ahead import Ahead
from tests.conftest import TEST_SF, Stack
from tests.test_rewriter_spark import EXPECTED_SKIPS, TpcCase, check_case, expected_skips, tpc_cases_ahead

pytestmark = pytest.mark.spark

_contexts: dict[str, RewriteContext | Exception] = {}  # a build that failed fails every test at once, not again
_lock = threading.Lock()


def laid_out(stack: Stack, suite: str) -> RewriteContext:
    """A rewrite context on ``qdtree_<suite>``: the suite's ``tuned`` tables, the fact tables copied and laid out
    as qd-trees (``bench/qdtree_dataset.py``), statistics the ``tuned`` layout's (range-sets of 8, the suite's
    Bloom filters), the blocks' collected by ``apply`` with the same kinds; built once per run, for this module and
    the random differential queries."""
    with _lock:
        if suite not in _contexts:
            try:
                _contexts[suite] = _build(stack, suite)
            except Exception as e:  # noqa: BLE001 - kept, and raised to every test of the suite
                _contexts[suite] = e
        built = _contexts[suite]
        if isinstance(built, Exception):
            raise RuntimeError(f"the qd-tree layouts of {suite} could not be built") from built
        return built


def _build(stack: Stack, suite: str) -> RewriteContext:
    db = f"qdtree_{suite}"
    store = StatsStore(stack.config.paths.stats / db)
    built = qdtree_dataset.build(stack.spark, suite, TEST_SF, stack.database(suite, "tuned"),
                                 stack.stats_store(suite, "tuned"), store, stack.config.paths.warehouse / db,
                                 database=db)
    for fact, blocks in built.blocks.items():  # with lead ranges: cuts inside the ranges too
        assert blocks >= (6 if fact in qdtree_dataset.LEAD else 4), (fact, blocks)
    return RewriteContext(StatsLoader(store, Lister(60)), database=db)


def _reads_laid_out(suite: str, name: str) -> bool:
    """From the query's text, not from a decision, which lists no table when the rewriter fails open."""
    tree = sqlglot.parse_one(runnable_queries(suite)[name], read="spark")
    return any(t.name.lower() in FACTS[suite] for t in tree.find_all(exp.Table))


def _fact_files_skipped(result: Rewrite, suite: str) -> int:
    return sum(t.files_skipped for t in result.decision.tables if t.table.rpartition(".")[2] in FACTS[suite])


CASES = [(suite, name) for suite in FACTS for name in runnable_queries(suite)]


@pytest.fixture(scope="module")
def ahead(stack: Stack, request: pytest.FixtureRequest) -> Iterator[Ahead]:
    """The original answers are the rewriter's differential test's, run once per query for both."""
    def case_of(p: dict[str, Any]) -> TpcCase | None:
        if not _reads_laid_out(p["suite"], p["name"]):
            return None
        return (p["suite"], "qdtree", p["name"]), p["suite"], p["name"], lambda: laid_out(stack, p["suite"])

    yield from tpc_cases_ahead(stack, request, test_query_results_unchanged_on_qd_tree_layouts, case_of)


@pytest.mark.differential
@pytest.mark.parametrize("suite, name", CASES, ids=[f"{s}-qdtree-{n}" for s, n in CASES])
def test_query_results_unchanged_on_qd_tree_layouts(stack: Stack, ahead: Ahead, suite: str, name: str) -> None:
    if not _reads_laid_out(suite, name):
        pytest.skip(f"{name} reads no laid-out table: the tuned layout's test covers it")
    _, result = ahead.made((suite, "qdtree", name))
    assert result.decision.error is None, result.decision.error
    skipped = _fact_files_skipped(result, suite)  # the laid-out tables' own: gains elsewhere hide no loss
    floor = expected_skips(f"{suite}-qdtree-{name}", skipped)
    assert floor is not None, f"no expected skip count for {suite}-qdtree-{name}: record with DIPPER_RECORD_SKIPS=1"
    assert skipped >= floor, f"{suite}-qdtree-{name} skips {skipped} files, {floor} were recorded"
    # As in the rewriter's differential test: every scan stays in the plan, so its metrics meet the decision.
    check_case(stack, ahead, (suite, "qdtree", name), suite, name, runnable_queries(suite)[name], result)


@pytest.mark.parametrize("suite, at_least", [("tpch", 4), ("tpcds", 15)])
def test_block_descriptions_remove_files_in_many_queries(stack: Stack, suite: str, at_least: int) -> None:
    """Not vacuous: the queries above skip blocks through the blocks' descriptions (cuts through joins
    included), beyond what the blocks' statistics rule out."""
    ctx = laid_out(stack, suite)
    by_blocks = {name: sum(t.files_removed_by_blocks for t in rewrite(sql, ctx).decision.tables)
                 for name, sql in runnable_queries(suite).items()}
    helped = sorted(name for name, files in by_blocks.items() if files)
    assert len(helped) >= at_least, by_blocks


def test_the_recorded_floors_are_the_cases_and_not_vacuous() -> None:
    recorded = {k: v for k, v in json.loads(EXPECTED_SKIPS.read_text()).items() if "-qdtree-" in k}
    assert set(recorded) == {f"{s}-qdtree-{n}" for s, n in CASES if _reads_laid_out(s, n)}, "re-record: the cases changed"
    for suite, at_least in (("tpch", 8), ("tpcds", 50)):
        assert sum(v > 0 for k, v in recorded.items() if k.startswith(f"{suite}-")) >= at_least, suite
