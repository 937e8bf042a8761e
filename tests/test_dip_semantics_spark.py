"""Semantics traps for data-induced predicates, proved on Spark: outer, full, anti, NOT IN and self joins
over join keys with NULLs, where pruning the wrong side (or a file holding a NULL) would change the answer.
Every query must return exactly the original's rows, and the rewrites must skip files where they may."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rewriter.rewrite import RewriteContext, rewrite
from rewriter.session import SessionSettings
from stats.freshness import Lister
from stats.loader import StatsLoader
from tests.conftest import Stack, catalog_tables

pytestmark = [pytest.mark.spark, pytest.mark.differential]

# File f of each table holds keys around 10f; NULL keys sit in chosen files.
FACT = [([1, 2, 3], [5, 6, 7]), ([10, 11, None], [1, 2, 3]), ([20, 21, 22], [9, 9, 9]), ([30, None, 31], [4, 4, 4])]
DIM = [([1, 3], ["x", "y"]), ([11, 12], ["x", "z"]), ([None, None], ["n", "n"]), ([21, 40], ["y", "y"])]

# (query, files skipped as measured when written) -- a floor that keeps the test from passing vacuously.
QUERIES = [
    ("SELECT f.k, f.v, d.tag FROM fact f JOIN dim d ON f.k = d.k WHERE f.v > 8", 6),
    ("SELECT f.k, d.tag FROM fact f LEFT JOIN dim d ON f.k = d.k WHERE f.v > 8", 6),
    ("SELECT f.k, d.tag FROM fact f LEFT JOIN dim d ON f.k = d.k AND d.tag = 'z'", 3),
    ("SELECT f.k, d.tag FROM fact f RIGHT JOIN dim d ON f.k = d.k WHERE f.v > 8", 1),
    ("SELECT f.k, d.k, d.tag FROM fact f FULL JOIN dim d ON f.k = d.k WHERE d.tag = 'x' OR f.v < 2", 0),
    ("SELECT f.k, f.v FROM fact f WHERE f.v > 8 AND NOT EXISTS (SELECT 1 FROM dim d WHERE d.k = f.k)", 6),
    ("SELECT f.k FROM fact f WHERE f.v < 8 AND f.k NOT IN (SELECT d.k FROM dim d)", 1),
    ("SELECT f.k FROM fact f WHERE f.v > 8 AND f.k NOT IN (SELECT d.k FROM dim d)", 5),
    ("SELECT f.k FROM fact f WHERE f.v > 8 AND f.k NOT IN (SELECT d.k FROM dim d WHERE d.tag = 'y')", 6),
    # f's file 1 holds a NULL key: no diP, else dim's matching files would go, the subquery would be empty
    # and NOT IN would turn true for the NULL row.
    ("SELECT f.k FROM fact f WHERE f.v < 4 AND f.k NOT IN (SELECT d.k FROM dim d WHERE d.tag = 'y')", 2),
    # NULLs made by an outer join inside a derived table: the same trap one level down.
    ("SELECT t.k FROM (SELECT d.k FROM fact f LEFT JOIN dim d ON f.k = d.k AND d.tag = 'x') t "
     "WHERE t.k NOT IN (SELECT k FROM fact f2 WHERE f2.v > 8)", 3),
    ("SELECT d.k FROM dim d WHERE d.tag <> 'n' AND d.k NOT IN (SELECT f.k FROM fact f WHERE f.v > 8)", 4),
    ("SELECT f.k FROM fact f WHERE f.k IN (SELECT d.k FROM dim d WHERE d.tag = 'z')", 6),
    ("SELECT f.k FROM fact f WHERE EXISTS (SELECT count(*) FROM dim d WHERE d.k = f.k AND d.tag = 'z')", 3),
    # A global aggregate in HAVING alone: true exactly for the rows of f that match nothing in dim, so
    # dim's keys must not prune f (only f's keys may prune dim).
    ("SELECT f.k FROM fact f WHERE EXISTS (SELECT 1 FROM dim d WHERE d.k = f.k AND d.tag = 'z' "
     "HAVING count(*) = 0)", 3),
    ("SELECT a.k, b.k FROM fact a JOIN fact b ON a.k = b.k + 10 WHERE a.v > 8", 3),
    ("SELECT a.k, b.k FROM fact a LEFT JOIN fact b ON a.k = b.k WHERE a.v < 2", 6),
    ("SELECT k, count(*) FROM (SELECT f.k FROM fact f LEFT ANTI JOIN dim d ON f.k = d.k) GROUP BY k", 1),
    ("SELECT f.k FROM fact f LEFT SEMI JOIN dim d ON f.k = d.k AND d.tag = 'z'", 6),
    # Set operations: every INTERSECT branch and EXCEPT's left branch bound the output; the right does not.
    ("SELECT d.k, d.tag FROM dim d JOIN (SELECT k FROM fact WHERE v > 8 INTERSECT SELECT k FROM fact f2) u "
     "ON u.k = d.k", 6),
    ("SELECT d.k FROM dim d JOIN (SELECT k FROM fact WHERE v > 8 EXCEPT SELECT k FROM fact f2 WHERE f2.v < 2) u "
     "ON u.k = d.k", 6),
    ("SELECT d.k FROM dim d JOIN (SELECT k FROM fact f2 EXCEPT SELECT k FROM fact WHERE v > 8) u ON u.k = d.k", 3),
    ("SELECT d.k FROM dim d JOIN (SELECT k FROM fact WHERE v > 8 UNION ALL SELECT k FROM fact f2 WHERE f2.v < 2) u "
     "ON u.k = d.k", 6),
    ("SELECT d.k FROM dim d JOIN (SELECT k FROM fact WHERE v > 8 UNION SELECT NULL) u ON u.k = d.k", 3),
    # Monotone expressions of a key (§3.3 rule 2): both sides are mapped into the values compared.
    ("SELECT d.k, t.k1 FROM dim d JOIN (SELECT k + 1 AS k1 FROM fact WHERE v > 8) t ON t.k1 = d.k + 1", 6),
    ("SELECT d.k, t.k2, t.c FROM dim d JOIN (SELECT k * 2 AS k2, count(*) AS c FROM fact GROUP BY k) t "
     "ON t.k2 = d.k * 2 WHERE d.tag = 'z'", 6),
    ("SELECT f.k, d.tag FROM fact f LEFT JOIN dim d ON d.k - 1 = f.k - 1 WHERE f.v > 8", 6),
    ("SELECT a.k, b.k FROM fact a JOIN fact b ON 40 - a.k = 40 - b.k WHERE a.v > 8", 3),  # decreasing: a's own predicate only,
    # Strings: value lists make a diP of points.
    ("SELECT a.k, b.k, b.tag FROM dim a JOIN dim b ON a.tag = b.tag WHERE a.k > 30", 5),  # b's file 1 ("x".."z") goes by its value list,
    ("SELECT a.k, b.k, b.tag FROM dim a LEFT JOIN dim b ON a.tag = b.tag AND b.k < 5", 3),
    # A scalar subquery's one value (NULL on no row) is a value of its column: only x's side is pruned.
    ("SELECT f.k, f.v FROM fact f WHERE f.k = (SELECT d.k FROM dim d WHERE d.tag = 'z' AND d.k > 11)", 4),
    ("SELECT f.k, f.v FROM fact f WHERE (SELECT d.k FROM dim d WHERE d.tag = 'none') = f.k", 4),
    ("SELECT f.k FROM fact f JOIN dim d ON f.k = d.k WHERE d.k = (SELECT max(f2.k) FROM fact f2 WHERE f2.v < 5)", 4),
    # Constant filters on a derived table's or CTE's output reach the table inside where a filter commutes.
    ("SELECT t.k, t.c FROM (SELECT k, count(*) AS c FROM fact GROUP BY k) t WHERE t.k = 11", 3),
    ("SELECT t.k1 FROM (SELECT k + 1 AS k1 FROM fact) t WHERE t.k1 IN (2, 22, NULL)", 2),
    ("WITH c AS (SELECT k, v FROM fact) SELECT x.k, y.k FROM c x JOIN c y ON x.v = y.v WHERE x.k = 1 AND y.k = 20", 2),
    ("WITH c AS (SELECT k FROM fact) SELECT x.k, y.k FROM c x, c y WHERE x.k = 1", 0),
    ("SELECT t.k FROM (SELECT k FROM fact ORDER BY k LIMIT 5) t WHERE t.k = 30", 0),
    ("SELECT t.k, t.r FROM (SELECT k, row_number() OVER (ORDER BY v) AS r FROM fact) t WHERE t.k = 1", 0),
    # (WHERE on the padded side: the join tree does not count it as restricting t, so only d's diP prunes)
    ("SELECT d.k, t.k FROM dim d LEFT JOIN (SELECT k FROM fact) t ON d.k = t.k WHERE t.k = 1", 1),
    ("SELECT d.k, t.k FROM dim d LEFT JOIN (SELECT k FROM fact) t ON d.k = t.k AND t.k = 1", 0),
    ("SELECT t.k FROM (SELECT k FROM fact UNION ALL SELECT k FROM dim) t WHERE t.k = 21", 5),
    # Literals typed as Spark types them against the derived column: a string read as BIGINT under ANSI
    # (not followed: no pruning), a decimal between two keys (both kept), strings, an aggregate (no column).
    ("SELECT t.k FROM (SELECT k FROM fact) t WHERE t.k = '11'", 0),
    ("SELECT t.k FROM (SELECT k FROM fact) t WHERE t.k = 10.5", 3),
    ("SELECT t.tag, t.n FROM (SELECT tag, count(*) AS n FROM dim GROUP BY tag) t WHERE t.tag IN ('z', 'q')", 3),
    ("SELECT t.k FROM (SELECT k, count(*) AS n FROM fact GROUP BY k) t WHERE t.n = 1", 0),
    # A CTE read twice keeps what either read needs.
    ("WITH c AS (SELECT k, v FROM fact) SELECT x.k, y.v FROM c x JOIN dim d ON x.k = d.k JOIN c y ON y.k = d.k "
     "WHERE d.tag = 'z'", 6),
    ("WITH c AS (SELECT k FROM fact) SELECT count(*) FROM c x JOIN dim d ON x.k = d.k AND d.tag = 'z' "
     "UNION ALL SELECT count(*) FROM c y", 3),
]


def _write(folder: Path, files: list[tuple[list, list]], second: str, kind: pa.DataType) -> None:
    folder.mkdir(parents=True)
    schema = pa.schema([("k", pa.int64()), (second, kind)])
    for i, (keys, other) in enumerate(files):
        pq.write_table(pa.table({"k": keys, second: other}, schema=schema), folder / f"part-{i}.parquet")


@pytest.fixture(scope="module")
def traps(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> dict[str, RewriteContext]:
    """The trap tables, and the two ways of rewriting over them: file skipping alone, and with every diP the
    shape allows also written as a predicate on the receiving column (rewriter/dip_column.py), which drops rows
    inside the kept files too."""
    root = tmp_path_factory.mktemp("dip_traps")
    _write(root / "fact", FACT, "v", pa.int64())
    _write(root / "dim", DIM, "tag", pa.string())
    store = catalog_tables(stack, root, "dip_traps", ["fact", "dim"])
    files_only = RewriteContext(StatsLoader(store, Lister(0)), database="dip_traps")
    return {"files-only": files_only, "with-columns": dataclasses.replace(files_only, dip_column_max_share=1.0)}


_ORIGINALS: dict[str, list] = {}  # Spark's rows of each trap, run once for both ways of rewriting it


@pytest.mark.parametrize("ways", ["files-only", "with-columns"])
@pytest.mark.parametrize("sql, at_least", QUERIES, ids=[f"{i:02d}" for i in range(len(QUERIES))])
def test_dips_never_change_results_around_nulls(stack: Stack, traps: dict[str, RewriteContext], sql: str,
                                                at_least: int, ways: str) -> None:
    """Every trap twice: with file skipping alone, and with diPs also written as column predicates."""
    spark = stack.spark
    spark.sql("USE dip_traps")
    try:
        if sql not in _ORIGINALS:
            _ORIGINALS[sql] = sorted(spark.sql(sql).collect(), key=repr)
        result = rewrite(sql, traps[ways])
        assert result.decision.error is None, (sql, result.decision.error)
        got = sorted(spark.sql(result.sql).collect(), key=repr)
        assert got == _ORIGINALS[sql], (sql, result.sql)
    finally:
        spark.sql("USE default")
    skipped = {t.alias: t.files_skipped for t in result.decision.tables}
    assert sum(skipped.values()) >= at_least, (sql, skipped)


def test_the_traps_write_column_predicates(traps: dict[str, RewriteContext]) -> None:
    """Not vacuous: the rewrites of the traps write diPs as column predicates (30 when written)."""
    written = [p for sql, _ in QUERIES for ctx in traps.values()
               for t in rewrite(sql, ctx).decision.tables for p in t.column_predicates]
    assert len(written) >= 25, written


def test_a_union_branch_must_see_storage_now_to_send(stack: Stack, tmp_path: Path) -> None:
    """The taint rule (§3.2) for every branch of a UNION that sends a diP, not only the first: a file added
    to the second branch's table after its listing was cached must stop the union's diP."""
    _write(tmp_path / "a", [([1, 2], [0, 0]), ([5, 6], [0, 0])], "v", pa.int64())
    _write(tmp_path / "b", [([10, 11], [0, 0])], "v", pa.int64())
    _write(tmp_path / "d", [([1, 2], ["x", "x"]), ([10, 11], ["y", "y"]), ([40, 41], ["z", "z"])], "tag", pa.string())
    spark = stack.spark
    store = catalog_tables(stack, tmp_path, "dip_union_taint", ["a", "b", "d"])
    ctx = RewriteContext(StatsLoader(store, Lister(3600)), database="dip_union_taint")  # listings cached an hour
    sql = "SELECT d.k, d.tag FROM d JOIN (SELECT k FROM a UNION ALL SELECT k FROM b) u ON u.k = d.k"
    before = rewrite(sql, ctx)
    assert {t.alias: t.files_skipped for t in before.decision.tables}["d"] == 1  # d's keys 40-41 join nothing
    pq.write_table(pa.table({"k": [40], "v": [0]}, schema=pa.schema([("k", pa.int64()), ("v", pa.int64())])),
                   tmp_path / "b" / "part-9.parquet")
    spark.sql("REFRESH TABLE dip_union_taint.b")
    spark.sql("USE dip_union_taint")
    try:
        after = rewrite(sql, ctx)
        assert {t.alias: t.files_skipped for t in after.decision.tables}["d"] == 0
        assert sorted(spark.sql(after.sql).collect()) == sorted(spark.sql(sql).collect())
        assert (40, "z") in [tuple(r) for r in spark.sql(after.sql).collect()]
    finally:
        spark.sql("USE default")


def test_a_scalar_subquery_of_several_rows_still_fails_when_its_values_prune(stack: Stack, tmp_path: Path) -> None:
    """``x = (SELECT y ...)`` where the subquery returns two rows is an error in Spark; the diP from the
    subquery's values prunes x's table, and the rewritten query must raise the same error, not return rows."""
    _write(tmp_path / "fact", FACT, "v", pa.int64())
    _write(tmp_path / "dim", DIM, "tag", pa.string())
    spark = stack.spark
    store = catalog_tables(stack, tmp_path, "dip_scalar", ["fact", "dim"])
    ctx = RewriteContext(StatsLoader(store, Lister(0)), database="dip_scalar")
    sql = "SELECT f.k FROM fact f WHERE f.k = (SELECT d.k FROM dim d WHERE d.tag = 'x')"  # keys 1 and 11
    result = rewrite(sql, ctx)
    fact = next(t for t in result.decision.tables if t.alias == "f")
    assert fact.files_skipped == 2, fact.dips  # files of keys 20-22 and 30-31 go
    spark.sql("USE dip_scalar")
    try:
        for text in (sql, result.sql):
            with pytest.raises(Exception, match="SCALAR_SUBQUERY_TOO_MANY_ROWS|more than one row"):
                spark.sql(text).collect()
    finally:
        spark.sql("USE default")


@pytest.fixture(scope="module")
def class_through_a_conversion(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> RewriteContext:
    root = tmp_path_factory.mktemp("dip_class_domain")
    for name, rows, schema in (("a", [{"s": ["01"]}, {"s": ["7"]}], pa.schema([("s", pa.string())])),
                               ("d", [{"k": [1]}], pa.schema([("k", pa.int64())])),
                               ("b", [{"s": ["1"], "x": [5]}, {"s": ["9"], "x": [6]}],
                                pa.schema([("s", pa.string()), ("x", pa.int64())]))):
        (root / name).mkdir()
        for i, r in enumerate(rows):
            pq.write_table(pa.table(r, schema=schema), root / name / f"part-{i}.parquet")
    store = catalog_tables(stack, root, "dip_class_domain", ["a", "d", "b"])
    return RewriteContext(StatsLoader(store, Lister(0)), database="dip_class_domain")


@pytest.mark.parametrize("ansi", ["true", "false"], ids=["ansi", "no-ansi"])
def test_a_conversion_in_the_middle_of_an_equivalence_class_passes_no_dip(
        stack: Stack, class_through_a_conversion: RewriteContext, ansi: str) -> None:
    """``a.s = d.k = b.s`` over strings and an integer: '01' and '1' meet through 1 on Spark, so a's file of '01'
    must be read although b sends only '1' (a class through the conversion dropped it: a wrong count)."""
    sql = "SELECT count(*) FROM a JOIN d ON a.s = d.k JOIN b ON d.k = b.s WHERE b.x = 5"
    spark = stack.spark
    spark.sql("USE dip_class_domain")
    try:
        spark.conf.set("spark.sql.ansi.enabled", ansi)
        result = rewrite(sql, dataclasses.replace(class_through_a_conversion, session=SessionSettings(ansi=ansi == "true")))
        assert spark.sql(sql).collect()[0][0] == 1
        assert spark.sql(result.sql).collect()[0][0] == 1, result.sql
        assert {t.alias: t.files_skipped for t in result.decision.tables} == {"a": 0, "d": 0, "b": 1}
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")
        spark.sql("USE default")
