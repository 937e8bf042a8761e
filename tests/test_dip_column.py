"""diPs written as column predicates (rewriter/dip_column.py): which channels may be written, the intervals
written, the share of a reference's values they keep, and the SQL. Spark's side is in
tests/test_dip_column_spark.py and, over every join trap, tests/test_dip_semantics_spark.py."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from sqlglot import exp, parse_one

from rewriter.dip import DiP
from rewriter.dip_column import MAX_RANGES, admitted_values, eligible, narrowest, predicate, share, written
from rewriter.emit import SWITCH_VALUES
from rewriter.join_graph import CONSTANT, Channel
from rewriter.predicate import Fn
from stats.model import Kind


def dip(*intervals: tuple[int, int]) -> DiP:
    return DiP(np.array([a for a, _ in intervals], dtype=object), np.array([b for _, b in intervals], dtype=object))


def pairs(d: DiP) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in zip(d.lo, d.hi)]


INT = Kind("int", bits=32)


PLAIN = Channel(src=0, src_column="k", dst=1, dst_column="k", via="inner join")
_FN = Fn("add", (1,))


def test_only_plain_integral_channels_outside_not_in_and_shared_ctes_are_written() -> None:
    assert eligible(PLAIN, INT) and eligible(PLAIN, Kind("int", bits=8))
    assert eligible(dataclasses.replace(PLAIN, partners=((2, "k", ()),)), INT)


@pytest.mark.parametrize("channel, kind", [
    pytest.param(dataclasses.replace(PLAIN, null_aware=True), INT, id="not-in"),  # NOT IN: NULLs elsewhere decide
    pytest.param(dataclasses.replace(PLAIN, dst_use=(0, 1, "c"), dst_uses=2), INT, id="a-cte-read-twice"),
    # k + 1 = s.k: the predicate would need the inverse
    pytest.param(dataclasses.replace(PLAIN, dst_fns=(_FN,)), INT, id="function-on-the-receiver"),
    pytest.param(dataclasses.replace(PLAIN, src_fns=(_FN,)), INT, id="function-on-the-sender"),
    pytest.param(dataclasses.replace(PLAIN, partners=((2, "k", (_FN,)),)), INT, id="a-union-branch-through-a-function"),
    pytest.param(dataclasses.replace(PLAIN, src=CONSTANT), INT, id="a-constant"),  # Spark pushes it down itself
    pytest.param(PLAIN, Kind("date"), id="date"), pytest.param(PLAIN, Kind("string"), id="string"),
    pytest.param(PLAIN, Kind("decimal", scale=2, precision=10), id="decimal"),
])
def test_other_channels_are_not_written(channel: Channel, kind: Kind) -> None:
    assert not eligible(channel, kind), (channel, kind)


def test_written_intervals_fit_the_column_type_and_merge_neighbours() -> None:
    # Beyond INT: matches no row of an int column; clipped, never widening the column's type in Spark.
    assert pairs(written(dip((-2**40, -2**31 + 1), (5, 5), (2**31 - 2, 2**40)), INT)) == \
        [(-2**31, -2**31 + 1), (5, 5), (2**31 - 2, 2**31 - 1)]
    assert pairs(written(dip((2**31, 2**40)), INT)) == []
    assert pairs(written(dip((1, 3), (4, 4), (6, 9)), INT)) == [(1, 4), (6, 9)]  # 3 and 4 leave nothing between
    assert pairs(written(dip((2**40, 2**40 + 1)), Kind("int", bits=64))) == [(2**40, 2**40 + 1)]


def test_a_short_list_stays_exact_and_a_long_one_is_compacted() -> None:
    points = dip(*[(v, v) for v in range(0, 2 * SWITCH_VALUES, 2)])  # SWITCH_VALUES values
    assert written(points, INT).ranges == SWITCH_VALUES
    text = predicate("k", written(points, INT))
    assert text == f"`k` IN ({', '.join(str(v) for v in range(0, 2 * SWITCH_VALUES, 2))})"
    more = dip(*[(v, v) for v in range(0, 2 * SWITCH_VALUES + 2, 2)])
    compacted = written(more, INT)
    assert compacted.ranges == MAX_RANGES and not compacted.exact
    assert all(any(a <= v <= b for a, b in pairs(compacted)) for v, _ in pairs(more))  # every value still admitted


def test_the_sql_always_quotes_the_column() -> None:
    """Always in backticks: a bare ``null`` or ``true`` is a literal to Spark (``null IN (1, 2)`` drops every
    row), ``case`` a keyword, ``kä`` a lexer error; sqlglot alone quotes none of these."""
    assert predicate("k", dip((1, 100))) == "`k` BETWEEN 1 AND 100"
    assert predicate("k", dip((-100, 1), (7, 7), (9, 200))) == \
        "(`k` BETWEEN -100 AND 1 OR `k` = 7 OR `k` BETWEEN 9 AND 200)"
    assert predicate("k", dip()) is None
    assert predicate("a`b", dip((1, 2))) == "`a``b` IN (1, 2)"


@pytest.mark.parametrize("name", ["null", "true", "case", "kä", "my key", "a`b"])
def test_a_column_of_any_name_reads_back_as_that_column(name: str) -> None:
    """Read back by sqlglot in Spark's dialect, as the rewriter's own text is; Spark's reading is
    tests/test_dip_column_spark.py's."""
    text = predicate(name, dip((1, 2)))
    tree = parse_one(f"SELECT * FROM t WHERE {text}", read="spark")
    assert [c.name for c in tree.find_all(exp.Column)] == [name], text


def test_share_is_the_part_of_the_files_values_the_predicate_keeps() -> None:
    files = dip((0, 99), (200, 299))  # 200 values
    assert share(dip((0, 99), (200, 299)), files) == 1.0
    assert share(dip((50, 249)), files) == 0.5
    assert share(dip((100, 199)), files) == 0.0
    assert share(dip((-5, 4), (95, 204), (299, 400)), files) == (5 + 5 + 5 + 1) / 200
    assert share(dip((1, 1)), dip()) == 0.0


def test_the_narrowest_diP_is_the_one_admitting_fewest_values() -> None:
    wide, narrow = dip((0, 10)), dip((0, 2), (8, 9))
    assert admitted_values(narrow) == 5 and narrowest([wide, narrow]) is narrow


def test_no_predicate_on_a_column_compared_with_another_domain() -> None:
    """``t.k = u.code`` with a string code: Spark would infer ``CAST(u.code AS BIGINT) IN (...)`` from a predicate
    on t.k and evaluate it on u's rows before u's own filters, where the cast may raise."""
    from rewriter.rewrite import RewriteContext, rewrite
    from tests.test_rewriter import STR, Source, table

    t = table("db.t", [{"k": list(range(0, 100))}, {"k": list(range(100, 200))}], {"k": INT})
    s = table("db.s", [{"k": [5, 6], "x": [5, 5]}, {"k": [150, 151], "x": [9, 9]}], {"k": INT, "x": INT})
    u = table("db.u", [{"code": ["5", "x"], "ok": [1, 0]}], {"code": STR, "ok": INT})
    ctx = RewriteContext(Source(t, s, u), database="db", dip_column_max_share=1.0, exact_keys_max_bytes=0)

    def written(sql: str) -> list[str]:
        return next(x for x in rewrite(sql, ctx).decision.tables if x.alias == "t").column_predicates

    assert written("SELECT count(*) FROM t JOIN s ON t.k = s.k WHERE s.x = 5") == ["`k` IN (5, 6)"]
    assert written("SELECT count(*) FROM t JOIN s ON t.k = s.k JOIN u ON t.k = u.code WHERE s.x = 5 AND u.ok = 1") == []
    renamed = "SELECT count(*) FROM t JOIN s ON t.k = s.k JOIN (SELECT code AS kk FROM u WHERE ok = 1) v ON t.k = v.kk " \
              "WHERE s.x = 5"
    assert written(renamed) == []
