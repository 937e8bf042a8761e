"""Issue 61's cases on real Spark: the rewritten query returns the original's rows, or its error, where the
rewriter once computed what Spark computes differently (concat_ws evaluated as concat; an implicit cast
that raises under ANSI taken for a function that never raises)."""

from __future__ import annotations

import pytest

from rewriter.rewrite import rewrite
from tests.conftest import Stack
from tests.test_rewriter_spark import context

pytestmark = [pytest.mark.spark, pytest.mark.differential]


def _session(stack: Stack, database: str):  # noqa: ANN202 - a pyspark session
    session = stack.spark.newSession()
    session.sql(f"USE {database}")
    return session


def test_concat_ws_keys_are_spark_s(stack: Stack) -> None:
    """Exact keys evaluate part's predicate row by row: ``concat_ws('/', brand, container)`` must be Spark's
    concat_ws (it was evaluated as concat, no part row passed, and every partsupp file was skipped)."""
    ctx = context(stack, "tpch", "tuned")
    spark = _session(stack, ctx.database)
    brand, container = spark.sql("SELECT p_brand, p_container FROM part ORDER BY p_partkey LIMIT 1").collect()[0]
    sql = ("SELECT count(*) FROM partsupp ps JOIN part p ON ps.ps_partkey = p.p_partkey "
           f"WHERE concat_ws('/', p.p_brand, p.p_container) = '{brand}/{container}'")
    result = rewrite(sql, ctx)
    assert result.decision.error is None
    want = spark.sql(sql).collect()[0][0]
    assert want > 0
    assert spark.sql(result.sql).collect()[0][0] == want
    kept = {t.alias: t for t in result.decision.tables}
    # not vacuous: part's predicate is evaluated (it prunes partsupp by the keys that pass)
    assert kept["ps"].files_kept < kept["ps"].files_total


def test_an_implicit_cast_that_raises_keeps_its_files(stack: Stack) -> None:
    """``coalesce(n_name, n_nationkey)`` casts n_name to BIGINT under ANSI and fails on every row; the
    rewritten query must fail the same way, not answer 0 from the files the other conjunct rules out."""
    ctx = context(stack, "tpch", "tuned")
    spark = _session(stack, ctx.database)
    sql = "SELECT count(*) FROM nation WHERE coalesce(n_name, n_nationkey) IS NOT NULL AND n_nationkey * 2 > 100"
    with pytest.raises(Exception) as original:
        spark.sql(sql).collect()
    assert "CAST_INVALID_INPUT" in str(original.value)
    result = rewrite(sql, ctx)
    with pytest.raises(Exception) as rewritten:
        spark.sql(result.sql).collect()
    assert "CAST_INVALID_INPUT" in str(rewritten.value)


def test_a_raising_having_raises_through_the_rewrite_too(stack: Stack) -> None:
    """A HAVING over aggregates is evaluated on the groups of joined rows, which pruning leaves as they were:
    the rewritten query fails as the original does, and answers as it does where nothing fails."""
    ctx = context(stack, "tpch", "tuned")
    spark = _session(stack, ctx.database)
    base = ("SELECT l_shipdate, SUM(l_quantity) AS q FROM orders JOIN lineitem ON o_orderkey = l_orderkey "
            "WHERE l_shipdate BETWEEN DATE '1995-01-01' AND DATE '1995-01-31' GROUP BY l_shipdate HAVING ")
    failing = rewrite(base + "SUM(l_quantity) / 0 > 1", ctx)
    assert failing.decision.passthrough is None and failing.sql != base + "SUM(l_quantity) / 0 > 1"
    for sql in (base + "SUM(l_quantity) / 0 > 1", failing.sql):
        with pytest.raises(Exception, match="DIVIDE_BY_ZERO"):
            spark.sql(sql).collect()
    answering = rewrite(base + "SUM(l_quantity) > 10", ctx)
    kept = {t.alias: t for t in answering.decision.tables}
    assert kept["lineitem"].files_kept < kept["lineitem"].files_total
    assert sorted(spark.sql(answering.sql).collect()) == sorted(spark.sql(base + "SUM(l_quantity) > 10").collect())
