"""TPC-DS query instances with literals redrawn from the data (``bench/redraw.py``), on the test dataset: the
domains come from its statistics and sampled rows, every instance keeps its query's shape, and a set of
star-join instances answers on Spark as their rewrites do, which skip files (so the new literals exercise the
rewriter, not only the generator)."""

from __future__ import annotations

import random
import re

import pytest

from bench.query_suite import runnable_queries
from bench.redraw import TPCDS_TIME, Domains, redraw
from bench.workloads import instances
from rewriter.rewrite import rewrite
from tests.conftest import Stack
from tests.recorded import below, floors, recorded_outcomes
from tests.test_rewriter_spark import context, same_rows
from tests.test_workloads import _shape

pytestmark = pytest.mark.spark

# Star joins of a sales table with date_dim, item, store, customer_demographics, household_demographics and
# promotion: their predicates' literals are what the layouts are learned on and judged by.
STARS = ["q03", "q07", "q12", "q19", "q20", "q26", "q27", "q34", "q42", "q52", "q55", "q73", "q96", "q98"]


def test_instances_draw_from_the_datasets_values(stack: Stack) -> None:
    ctx = context(stack, "tpcds", "tuned")
    domains = Domains(ctx.stats, ctx.database, TPCDS_TIME)
    categories = set(domains.strings("i_category"))
    assert "Books" in categories and len(categories) >= 5
    lo, hi = domains.bounds("d_moy")
    assert (lo, hi) == (1, 12)
    texts = runnable_queries("tpcds")
    items = instances("tpcds", 5, 1, None, domains)
    changed = 0
    for name, sql in items:
        original = texts[name.partition("#")[0]]
        assert _shape(sql) == _shape(original), name
        changed += sql != original
        for year in re.findall(r"d_year\s*=\s*(\d{4})\b", sql):
            assert 1998 <= int(year) <= 2002, (name, year)
        for found in re.findall(r"i_category\s*=\s*'([^']*)'", sql):
            assert found in categories, (name, found)
    assert changed >= 85, changed  # few queries have no parameter, or drew their own literals back


@pytest.mark.differential
@pytest.mark.parametrize("name", STARS)
def test_redrawn_star_joins_answer_as_their_rewrites(stack: Stack, name: str) -> None:
    ctx = context(stack, "tpcds", "tuned")
    domains = Domains(ctx.stats, ctx.database, TPCDS_TIME)
    texts = runnable_queries("tpcds")
    stack.spark.sql(f"USE {ctx.database}")
    sql = redraw(texts[name], domains, random.Random(f"spark/{name}"))
    assert sql != texts[name], name
    result = rewrite(sql, ctx)
    assert result.decision.error is None, (name, result.decision.error)
    want = stack.spark.sql(sql).collect()
    got = stack.spark.sql(result.sql).collect()
    assert same_rows([tuple(r) for r in got], [tuple(r) for r in want]), name
    measured = {"skipped": sum(t.files_skipped for t in result.decision.tables), "rows": len(want)}
    floor = floors(f"redraw-{name}", measured)  # not vacuous, in any order (tests/recorded.py)
    assert floor is not None and below(measured, floor) == {}, (name, measured, floor)


def test_the_redrawn_star_joins_are_not_vacuous() -> None:
    """When recorded, the rewrites skipped files, and the instances were not all empty."""
    recorded = {k: v for k, v in recorded_outcomes().items() if k.startswith("redraw-")}
    assert set(recorded) == {f"redraw-{name}" for name in STARS}, "re-record: the cases changed"
    assert sum(v["skipped"] for v in recorded.values()) > 0 and sum(v["rows"] for v in recorded.values()) > 0
