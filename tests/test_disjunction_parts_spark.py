"""The single-reference parts of a disjunction over several references (``rewriter/join_tree.py``
``implied_part``), and the equalities every disjunct has (``common_factors``, a diP channel), searched for
wrong answers against Spark.

Two tables of four files each, every file a band of ten ``y`` values (so a part on ``y`` rules files out), with
NULLs in every column. Hand-written cases pin what must be skipped and what must not (a NULL-padded side, a
FULL JOIN, a correlated subquery as in TPC-DS q41); generated disjunctions of conjunctions over both tables,
under every join kind, in WHERE and in ON, and inside correlated subqueries, must return Spark's rows, and
skip files in a good share of cases, so that the search is not vacuous. The factored equalities are on ``y``,
so a diP through one skips files; their generated cases must skip more with the rule than without it.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rewriter import exact_keys, join_tree
from rewriter.rewrite import RewriteContext, rewrite
from stats.freshness import Lister
from stats.loader import StatsLoader
from tests.conftest import Stack, catalog_tables, spark_rows

pytestmark = [pytest.mark.spark, pytest.mark.differential]

DB = "disjunction_parts"
FILES, ROWS = 4, 12


@pytest.fixture(scope="module")
def ctx(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> RewriteContext:
    root = tmp_path_factory.mktemp("disjunction_parts")
    rng = random.Random(41)
    for name in ("a", "b"):
        (root / name).mkdir()
        for f in range(FILES):  # file f holds y in [10 f, 10 f + 9], a NULL y in file 0 only
            ys = [None if f == 0 and i == 0 else rng.randint(10 * f, 10 * f + 9) for i in range(ROWS)]
            pq.write_table(pa.table({
                "x": pa.array([None if rng.random() < 0.1 else rng.randint(0, 15) for _ in ys], pa.int64()),
                "y": pa.array(ys, pa.int64()),
                "z": pa.array([None if rng.random() < 0.2 else rng.randint(0, 3) for _ in ys], pa.int32()),
            }), root / name / f"part-{f}.parquet")
    store = catalog_tables(stack, root, DB, ["a", "b"])
    return RewriteContext(StatsLoader(store, Lister(0)), database=DB, key_cache=exact_keys.KeyCache())


def _check(stack: Stack, ctx: RewriteContext, sql: str) -> dict[str, int]:
    """Rewrite ``sql``, compare Spark's rows for both texts, and return the files skipped per alias."""
    result = rewrite(sql, ctx)
    stack.spark.sql(f"USE {DB}")
    try:
        assert spark_rows(stack, result.sql) == spark_rows(stack, sql), (sql, result.sql)
    finally:
        stack.spark.sql("USE default")
    skipped: dict[str, int] = {}
    for t in result.decision.tables:
        skipped[t.alias] = skipped.get(t.alias, 0) + t.files_skipped
    return skipped


CROSS = "(a.y < 10 AND b.y >= 30) OR (a.y >= 30 AND b.y < 10)"  # a and b each keep files 0 and 3


@pytest.mark.parametrize("sql, expected", [
    (f"SELECT a.y, b.y FROM a JOIN b ON a.x = b.x WHERE {CROSS}", {"a": 2, "b": 2}),
    (f"SELECT a.y, b.y FROM a, b WHERE a.z = b.z AND ({CROSS})", {"a": 2, "b": 2}),
    # WHERE does not restrict a NULL-padded b (b's rows failing the part become a NULL-extended row that
    # fails WHERE just the same, but b's *absence* would not): only a is pruned
    (f"SELECT a.y, b.y FROM a LEFT JOIN b ON a.x = b.x WHERE {CROSS}", {"a": 2, "b": 0}),
    (f"SELECT a.y, b.y FROM a FULL JOIN b ON a.x = b.x WHERE {CROSS}", {"a": 0, "b": 0}),
    # a LEFT JOIN's ON restricts its right side only
    (f"SELECT a.y, b.y FROM a LEFT JOIN b ON a.x = b.x AND ({CROSS})", {"a": 0, "b": 2}),
    (f"SELECT a.y FROM a LEFT ANTI JOIN b ON a.x = b.x AND ({CROSS})", {"a": 0, "b": 2}),
    (f"SELECT a.y FROM a LEFT SEMI JOIN b ON a.x = b.x AND ({CROSS})", {"a": 2, "b": 2}),
    # TPC-DS q41's shape: the correlation in every disjunct, the inner table's own filter beside it
    ("SELECT a.y FROM a WHERE a.y < 20 AND (SELECT count(*) FROM b WHERE (b.x = a.x AND b.y < 10) OR "
     "(b.x = a.x AND b.y >= 30)) > 0", {"a": 2, "b": 2}),
    ("SELECT a.y FROM a WHERE NOT EXISTS (SELECT 1 FROM b WHERE (b.x = a.x AND b.y < 10) OR "
     "(b.z = a.z AND b.y >= 30))", {"a": 0, "b": 2}),
    # one disjunct says nothing about b alone: b is read whole
    ("SELECT a.y, b.y FROM a JOIN b ON a.x = b.x WHERE (a.y < 10 AND b.y >= 30) OR a.y >= 30", {"a": 2, "b": 0}),
])
def test_parts_prune_where_the_site_restricts_the_reference(stack: Stack, ctx: RewriteContext, sql: str,
                                                            expected: dict[str, int]) -> None:
    assert _check(stack, ctx, sql) == expected


def _atom(rng: random.Random, alias: str) -> str:
    v = rng.randint(-2, 42)
    return rng.choice([f"{alias}.y < {v}", f"{alias}.y >= {v}", f"{alias}.y BETWEEN {v} AND {v + rng.randint(0, 12)}",
                       f"{alias}.z = {rng.randint(0, 3)}", f"{alias}.y IS NULL", f"{alias}.z IS NULL",
                       f"{alias}.y IN ({v}, {v + 11})", f"NOT ({alias}.y < {v})"])


def _filter(rng: random.Random, depth: int = 0) -> str:
    """A random AND/OR tree over both tables, their join columns compared, and literals."""
    if depth >= 2 or rng.random() < 0.3:
        return rng.choice([_atom(rng, "a"), _atom(rng, "b"), _atom(rng, rng.choice("ab")),
                           "a.x = b.x", "a.z <> b.z"])
    op = rng.choice(["AND", "OR", "OR"])
    return f"({_filter(rng, depth + 1)} {op} {_filter(rng, depth + 1)})"


FORMS = ["where", "left-where", "right-where", "full-where", "on", "left-on", "right-on", "semi", "anti", "exists",
         "not exists", "scalar"]


def _statement(rng: random.Random, f: str | None = None, forms: list[str] = FORMS) -> str:
    f = _filter(rng) if f is None else f
    if "OR" not in f:
        f = f"({f} OR ({_atom(rng, 'a')} AND {_atom(rng, 'b')}))"
    form = rng.choice(forms)
    if form == "where":
        return f"SELECT a.x, a.y, b.y FROM a JOIN b ON a.x = b.x WHERE {f}"
    if form in ("left-where", "right-where", "full-where"):
        kind = form.split("-")[0].upper()
        return f"SELECT a.x, a.y, b.x, b.y FROM a {kind} JOIN b ON a.x = b.x WHERE {f}"
    if form in ("on", "left-on", "right-on"):
        kind = {"on": "", "left-on": "LEFT ", "right-on": "RIGHT "}[form]
        return f"SELECT a.x, a.y, b.x, b.y FROM a {kind}JOIN b ON a.z = b.z AND {f}"
    if form in ("semi", "anti"):
        return f"SELECT a.x, a.y FROM a LEFT {form.upper()} JOIN b ON {f}"
    if form == "scalar":
        return f"SELECT a.x, a.y, (SELECT count(*) FROM b WHERE {f}) AS n FROM a"
    return f"SELECT a.x, a.y FROM a WHERE {form.upper()} (SELECT 1 FROM b WHERE {f})"


def _skipped(sql: str, ctx: RewriteContext) -> int:
    return sum(t.files_skipped for t in rewrite(sql, ctx).decision.tables)


_rng = random.Random(20261128)
GENERATED = [_statement(_rng) for _ in range(36)]


@pytest.mark.parametrize("sql", GENERATED, ids=[f"{i:02d}" for i in range(len(GENERATED))])
def test_generated_disjunctions_return_sparks_rows(stack: Stack, ctx: RewriteContext, sql: str) -> None:
    _check(stack, ctx, sql)


def test_the_generated_disjunctions_skip_files(ctx: RewriteContext) -> None:
    pruned = sum(_skipped(sql, ctx) > 0 for sql in GENERATED)
    assert pruned >= 9, f"only {pruned} of {len(GENERATED)} statements skipped a file: the search proves little"


# The equality in every disjunct is a channel (``common_factors``): b is pruned by its part, a by the diP.
FACTORED = "(a.y = b.y AND b.y < 10) OR (b.y = a.y AND b.y >= 30)"


@pytest.mark.parametrize("sql, expected", [
    (f"SELECT a.y, b.y FROM a, b WHERE {FACTORED}", {"a": 2, "b": 2}),
    (f"SELECT a.y, b.y FROM a JOIN b ON a.z = b.z AND ({FACTORED})", {"a": 2, "b": 2}),
    # a LEFT JOIN's ON restricts its right side only: nothing passes back into a, whose rows with y in
    # 10..29 come out NULL-extended
    (f"SELECT a.y, b.y FROM a LEFT JOIN b ON {FACTORED}", {"a": 0, "b": 2}),
    (f"SELECT a.y, b.y FROM a FULL JOIN b ON {FACTORED}", {"a": 0, "b": 0}),
    ("SELECT a.y, b.y FROM a RIGHT JOIN b ON (a.y = b.y AND a.y < 10) OR (a.y = b.y AND a.y >= 30)", {"a": 2, "b": 0}),
    # WHERE above a LEFT JOIN: b is NULL-padded there, so its part prunes nothing, and b, read whole, sends
    # a diP that rules out no file of a
    (f"SELECT a.y, b.y FROM a LEFT JOIN b ON a.x = b.x WHERE {FACTORED}", {"a": 0, "b": 0}),
    # one disjunct without the equality: a keeps every file
    ("SELECT a.y, b.y FROM a, b WHERE (a.y = b.y AND b.y < 10) OR b.y >= 30", {"a": 0, "b": 2}),
    # the factor of a disjunct's own disjunction
    ("SELECT a.y, b.y FROM a, b WHERE (b.z = 1 AND ((a.y = b.y AND b.y < 10) OR (b.y = a.y AND b.y >= 30))) "
     "OR (a.y = b.y AND b.y >= 35)", {"a": 2, "b": 2}),
    # a correlated subquery (TPC-DS q41's shape): a's own filter passes into b through the factor
    ("SELECT a.y FROM a WHERE a.y < 10 AND EXISTS (SELECT 1 FROM b WHERE (b.y = a.y AND b.z = 1) OR "
     "(b.y = a.y AND b.z = 2))", {"a": 3, "b": 3}),
    ("SELECT a.y FROM a WHERE a.y < 10 AND NOT EXISTS (SELECT 1 FROM b WHERE (b.y = a.y AND b.z = 1) OR "
     "(b.y = a.y AND b.z = 2))", {"a": 3, "b": 3}),
])
def test_factored_equalities_carry_dips_where_the_site_allows(stack: Stack, ctx: RewriteContext, sql: str,
                                                              expected: dict[str, int]) -> None:
    assert _check(stack, ctx, sql) == expected


def _factored(rng: random.Random) -> str:
    """A disjunction whose disjuncts share an equality (either way round), sometimes with one disjunct
    without it. Each disjunct also bounds ``y`` of one side (mostly the same side in every disjunct, so that
    the part on it restricts what the diP carries), and often holds a random filter as well."""
    left, right = rng.choice([("a.y", "b.y")] * 4 + [("a.x", "b.x"), ("a.z", "b.z")])
    side = rng.choice("ab")
    disjuncts = []
    for _ in range(rng.randint(2, 3)):
        alias, v = side if rng.random() < 0.9 else rng.choice("ab"), rng.randint(-2, 42)
        parts = [rng.choice([f"{left} = {right}", f"{right} = {left}"]),
                 rng.choice([f"{alias}.y < {v}", f"{alias}.y >= {v}", f"{alias}.y BETWEEN {v} AND {v + rng.randint(0, 9)}",
                             f"{alias}.y IN ({v}, {v + 11})"])]
        if rng.random() < 0.5:
            parts.append(_filter(rng, 1))
        rng.shuffle(parts)
        disjuncts.append(f"({' AND '.join(parts)})")
    if rng.random() < 0.2:
        disjuncts.append(f"({_atom(rng, 'a')} AND {_atom(rng, 'b')})")
    return f"({' OR '.join(disjuncts)})"


def _skipped_without_factors(sql: str, ctx: RewriteContext) -> int:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(join_tree.FromClause, "factors", property(lambda self: ()))
        return _skipped(sql, ctx)


_rng = random.Random(20261129)
# the forms where a diP may enter a reference weigh more; every form is drawn
GENERATED_FACTORED = [_statement(_rng, _factored(_rng), FORMS + ["where", "on", "semi", "exists"] * 3)
                      for _ in range(40)]


@pytest.mark.parametrize("sql", GENERATED_FACTORED, ids=[f"{i:02d}" for i in range(len(GENERATED_FACTORED))])
def test_generated_factored_disjunctions_return_sparks_rows(stack: Stack, ctx: RewriteContext, sql: str) -> None:
    with_rule = sum(_check(stack, ctx, sql).values())
    assert with_rule >= _skipped_without_factors(sql, ctx), sql


def test_the_factors_skip_more_in_some_generated_disjunctions(ctx: RewriteContext) -> None:
    gained = sum(_skipped(sql, ctx) > _skipped_without_factors(sql, ctx) for sql in GENERATED_FACTORED)
    assert gained >= 6, f"the factors skipped more in only {gained} of {len(GENERATED_FACTORED)} statements"
