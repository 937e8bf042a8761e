"""Joined bounds (``rewriter/joined_bounds.py``, recorded by ``stats/blocks.py``), without Spark: which files of a
laid-out table a joined filter reaches no row of, by the bounds of the sender rows each file joins; every
condition under which nothing is concluded; and, on generated tables and conjuncts, that no file is ruled out
that holds a row the semi join keeps (a reference evaluation of the SQL in Python)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st

from rewriter.blocks import Restriction, ruled_out
from rewriter.joined_filter import Joined, translator_for, unqualified
from rewriter.predicate import And
from rewriter.session import SessionSettings
from stats.blocks import BlockLayout, JoinedBounds, read_layout, write_layout
from stats.model import ColumnStats, Kind, TableStats

UTC = SessionSettings(time_zone="UTC")
FACT, DIM = "db.sales", "db.dim"
DIM_FILES = frozenset({("file:/d/1.parquet", 10, 1)})
ATTRIBUTES = (("d_moy", "int"), ("d_name", "string"), ("d_date", "date"))
KINDS = {"d_key": Kind("int"), "d_moy": Kind("int", bits=32), "d_name": Kind("string"), "d_date": Kind("date")}


def _fact(n: int, location: str = "file:/t") -> TableStats:
    paths = np.array([f"{location}/block-{i:05d}-000.parquet" for i in range(n)], dtype=object)
    return TableStats(FACT, paths, np.full(n, 100, dtype=np.int64), np.arange(n, dtype=np.int64),
                      np.ones(n, dtype=np.int64), {}, location=location)


def _dim(files: frozenset = DIM_FILES, kinds: dict[str, Kind] = KINDS, unknown: int = 0) -> TableStats:
    listed = sorted(files)
    columns = {name: ColumnStats(kind, np.zeros(len(listed), dtype=object if kind.name == "string" else np.int64),
                                 np.zeros(len(listed), dtype=object if kind.name == "string" else np.int64),
                                 np.zeros(len(listed), dtype=bool), np.full(len(listed), -1, dtype=np.int64))
               for name, kind in kinds.items()}
    return TableStats(DIM, np.array([f[0] for f in listed], dtype=object), np.array([f[1] for f in listed]),
                      np.array([f[2] for f in listed]), np.ones(len(listed), dtype=np.int64), columns,
                      unknown_files=unknown, location="file:/d")


def _bounds_of(fact_files: list[list[Any]], dim_rows: list[dict[str, Any]], fact: TableStats) -> JoinedBounds:
    """The bounds by their definition, as ``apply``'s join counts them: per file, each (row, dimension row)
    pair whose keys are equal."""
    files = {}
    for path, keys in zip(fact.paths, fact_files):
        joined = [r for k in keys if k is not None for r in dim_rows if r["d_key"] == k]
        per = []
        for name, _ in ATTRIBUTES:
            values = [r[name] for r in joined if r[name] is not None]
            per.append((min(values), max(values), len(joined) - len(values)) if values else
                       (None, None, len(joined)))
        files[str(path)] = (len(joined), tuple(per))
    return JoinedBounds(DIM, "d_key", "s_key", ATTRIBUTES, files)


def _layout(fact: TableStats, bounds: JoinedBounds, pinned: frozenset = DIM_FILES) -> BlockLayout:
    return BlockLayout(FACT, fact.location, True, "UTC", (), {DIM: pinned},
                       {str(p): (int(s), int(m), ()) for p, s, m in zip(fact.paths, fact.sizes, fact.mtimes)},
                       (bounds,))


def _restriction(*conjuncts: str, dim: TableStats | None = None, column: str = "s_key") -> Restriction:
    dim = dim or _dim()
    nodes = [sqlglot.parse_one(c, read="spark") for c in conjuncts]
    t = translator_for(dim, "", UTC)
    j = Joined(column, DIM, "d_key", And(tuple(t.translate(n) for n in nodes)), tuple(unqualified(n) for n in nodes))
    return Restriction(frozenset(), And(()), (j,))


def _fresh(dim: TableStats):  # noqa: ANN202
    return lambda table: dim if table == DIM else None


# Three files: the first joins dimension rows of months 1-3 named a..c, the second months 7-9 and a NULL name,
# the third joins no dimension row (its keys are absent or NULL).
DIM_ROWS = [{"d_key": k, "d_moy": m, "d_name": n, "d_date": 10_000 + k}
            for k, m, n in [(1, 1, "a"), (2, 3, "c"), (3, 7, None), (4, 9, "z"), (5, 12, "q")]]
FACT_FILES = [[1, 2, 2, None], [3, 4], [None, 99]]


def _judge(*conjuncts: str, layout: BlockLayout | None = None, dim: TableStats | None = None,
           column: str = "s_key", fact: TableStats | None = None) -> tuple[list[bool], list[str]]:
    fact = fact or _fact(3)
    layout = layout or _layout(_fact(3), _bounds_of(FACT_FILES, DIM_ROWS, _fact(3)))
    dim = dim or _dim()
    out, used = ruled_out(layout, fact, _restriction(*conjuncts, dim=dim, column=column), UTC, _fresh(dim))
    return out.tolist(), used


@pytest.mark.parametrize("conjuncts, expected", [
    (["d_moy = 2"], [False, True, True]),  # inside the first file's months, outside the second's
    (["d_moy = 5"], [True, True, True]),  # between them
    (["d_moy BETWEEN 3 AND 7"], [False, False, True]),
    (["d_moy > 9"], [True, True, True]),
    (["d_moy IN (1, 12)"], [False, True, True]),
    (["d_moy <> 2"], [False, False, True]),  # a comparison that bounds nothing
    (["d_name = 'b'"], [False, True, True]),  # strings: 'b' lies within a..c, not within z..z
    (["d_name IS NULL"], [True, False, True]),  # only the second file joins a row whose name is NULL
    # The month-7 row's name is NULL, but bounds are per attribute: month 7 and name 'z' lie within them.
    (["d_name IS NOT NULL", "d_moy = 7"], [True, False, True]),
    (["d_date >= DATE '1997-05-22'"], [True, False, True]),  # day 10,003 and later: keys 3 and 4
    (["d_moy = 2 OR d_moy = 8"], [False, False, True]),  # a disjunction within both files' months
    (["d_key < 100"], [False, False, True]),  # a column the bounds do not hold: only the empty join rules out
])
def test_a_joined_filter_reaches_no_row_of_a_file_whose_joined_rows_it_excludes(conjuncts: list[str],
                                                                                 expected: list[bool]) -> None:
    out, used = _judge(*conjuncts)
    assert out == expected
    assert used == ([f"no row joins {_restriction(*conjuncts).joined[0].sql()} (joined bounds)"] if any(out) else [])


def test_nothing_is_concluded_when_the_bounds_may_not_be_the_datas() -> None:
    bounds = _bounds_of(FACT_FILES, DIM_ROWS, _fact(3))
    changed = DIM_FILES | {("file:/d/2.parquet", 5, 5)}
    assert _judge("d_moy = 5", dim=_dim(changed))[0] == [False] * 3  # the dimension gained a file
    assert _judge("d_moy = 5", dim=_dim(unknown=1))[0] == [False] * 3  # a file its statistics do not cover
    assert _judge("d_moy = 5", layout=_layout(_fact(3), bounds, frozenset()))[0] == [False] * 3  # nothing pinned
    assert _judge("d_moy = 5", column="s_other")[0] == [False] * 3  # another join column
    # A kind other than the recorded one: the attribute is ignored (only the file no row joins is ruled out).
    assert _judge("d_moy = 5", dim=_dim(kinds={**KINDS, "d_moy": Kind("string")}))[0] == [False, False, True]
    # A file whose identity differs from the record's is judged by its statistics alone.
    moved = _fact(3)
    moved = dataclasses.replace(moved, mtimes=np.array([0, 1, 7]))
    assert _judge("d_moy = 5", fact=moved)[0] == [True, True, False]
    # The table somewhere else than the record says.
    elsewhere = _fact(3, "file:/elsewhere")
    assert _judge("d_moy = 5", fact=elsewhere, layout=_layout(_fact(3), bounds))[0] == [False] * 3


def test_records_with_joined_bounds_round_trip(tmp_path: Path) -> None:
    layout = _layout(_fact(3), _bounds_of(FACT_FILES, DIM_ROWS, _fact(3)))
    write_layout(tmp_path, layout)
    assert read_layout(tmp_path, FACT) == layout


# -- generated: never a file ruled out that holds a row the semi join keeps ---------------------------------

_ops = st.sampled_from(["=", "<", "<=", ">", ">=", "<>"])
_month = st.one_of(st.none(), st.integers(0, 13))
_name = st.one_of(st.none(), st.sampled_from(["", "a", "b", "bb", "c", "é", "z"]))


@st.composite
def _conjunct(draw: st.DrawFn) -> str:
    column, value = draw(st.sampled_from([("d_moy", st.integers(-1, 14)), ("d_name", st.sampled_from(["a", "b", "c", "z", ""]))]))
    lit = (lambda v: str(v)) if column == "d_moy" else (lambda v: f"'{v}'")
    shape = draw(st.sampled_from(["cmp", "between", "in", "null", "not null", "not", "or"]))
    v, w = draw(value), draw(value)
    if shape == "cmp":
        return f"{column} {draw(_ops)} {lit(v)}"
    if shape == "between":
        return f"{column} BETWEEN {lit(v)} AND {lit(w)}"
    if shape == "in":
        return f"{column} IN ({lit(v)}, {lit(w)})"
    if shape == "null":
        return f"{column} IS NULL"
    if shape == "not null":
        return f"{column} IS NOT NULL"
    if shape == "not":
        return f"NOT ({column} {draw(_ops)} {lit(v)})"
    return f"({column} = {lit(v)} OR {column} {draw(_ops)} {lit(w)})"


def _truth(conjunct: str, row: dict[str, Any]) -> bool | None:
    """SQL's three-valued result of a generated conjunct on one dimension row."""
    node = sqlglot.parse_one(conjunct, read="spark")
    return _eval(node, row)


def _eval(node: sqlglot.exp.Expression, row: dict[str, Any]) -> Any:
    e = sqlglot.exp
    if isinstance(node, e.Paren):
        return _eval(node.this, row)
    if isinstance(node, e.Column):
        return row[node.name]
    if isinstance(node, e.Literal):
        return node.this if node.is_string else int(node.this)
    if isinstance(node, e.Neg):
        return -_eval(node.this, row)
    if isinstance(node, e.Is):
        return _eval(node.this, row) is None
    if isinstance(node, e.Not):
        inner = node.this
        if isinstance(inner, e.Is):
            return _eval(inner.this, row) is not None
        v = _eval(inner, row)
        return None if v is None else not v
    if isinstance(node, e.Or):
        a, b = _eval(node.this, row), _eval(node.expression, row)
        return True if a is True or b is True else None if a is None or b is None else False
    if isinstance(node, e.Between):
        x, lo, hi = _eval(node.this, row), _eval(node.args["low"], row), _eval(node.args["high"], row)
        return None if x is None else lo <= x <= hi
    if isinstance(node, e.In):
        x = _eval(node.this, row)
        return None if x is None else x in [_eval(v, row) for v in node.expressions]
    ops = {e.EQ: lambda a, b: a == b, e.LT: lambda a, b: a < b, e.LTE: lambda a, b: a <= b,
           e.GT: lambda a, b: a > b, e.GTE: lambda a, b: a >= b, e.NEQ: lambda a, b: a != b}
    a, b = _eval(node.this, row), _eval(node.expression, row)
    return None if a is None or b is None else ops[type(node)](a, b)


@given(st.lists(st.fixed_dictionaries({"d_key": st.one_of(st.none(), st.integers(0, 12)), "d_moy": _month,
                                       "d_name": _name}), max_size=14),
       st.lists(st.lists(st.one_of(st.none(), st.integers(0, 14)), max_size=6), min_size=1, max_size=5),
       st.lists(_conjunct(), min_size=1, max_size=3))
@settings(max_examples=400, deadline=None)
def test_no_file_is_ruled_out_that_holds_a_row_the_semi_join_keeps(dim_rows: list[dict], fact_files: list[list],
                                                                    conjuncts: list[str]) -> None:
    for r in dim_rows:
        r["d_date"] = None
    fact = _fact(len(fact_files))
    layout = _layout(fact, _bounds_of(fact_files, dim_rows, fact))
    out, _ = ruled_out(layout, fact, _restriction(*conjuncts), UTC, _fresh(_dim()))
    passing = {r["d_key"] for r in dim_rows if r["d_key"] is not None and all(_truth(c, r) is True for c in conjuncts)}
    for k, keys in enumerate(fact_files):
        if any(key in passing for key in keys if key is not None):
            assert not out[k], (k, keys, conjuncts)


# -- the what-if's mirror of apply (layout/whatif.py, joined_bounds_of) -------------------------------------

def _one_row_files(table: str, columns: dict[str, tuple[Kind, list[Any]]]) -> TableStats:
    """Rows as one-row files, as ``layout/sample.py`` gives them."""
    n = len(next(iter(columns.values()))[1])
    cols = {}
    for name, (kind, values) in columns.items():
        string = kind.name == "string"
        filled = [("" if string else 0) if v is None else v for v in values]
        cols[name] = ColumnStats(kind, np.array(filled, dtype=object if string else np.int64),
                                 np.array(filled, dtype=object if string else np.int64),
                                 np.array([v is not None for v in values], dtype=bool),
                                 np.array([1 if v is None else 0 for v in values], dtype=np.int64))
    return TableStats(table, np.array([f"{table}/{i}" for i in range(n)], dtype=object), np.ones(n, dtype=np.int64),
                      np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int64), cols)


@given(st.lists(st.fixed_dictionaries({"d_key": st.one_of(st.none(), st.integers(0, 8)), "d_moy": _month,
                                       "d_name": _name}), max_size=12),
       st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 10)), st.integers(0, 3)), min_size=1, max_size=20))
@settings(max_examples=200, deadline=None)
def test_the_what_if_bounds_a_block_as_apply_bounds_a_file(dim_rows: list[dict], fact_rows: list[tuple]) -> None:
    """Per block of held-out rows: (row, sender row) pairs, and per attribute the min, max and NULLs among the
    pairs, the definition ``apply``'s statement computes with a join."""
    from layout.sample import Sample
    from layout.whatif import joined_bounds_of

    dim = _one_row_files(DIM, {"d_key": (Kind("int"), [r["d_key"] for r in dim_rows]),
                               "d_moy": (Kind("int"), [r["d_moy"] for r in dim_rows]),
                               "d_name": (Kind("string"), [r["d_name"] for r in dim_rows])})
    holdout = _one_row_files(FACT, {"s_key": (Kind("int"), [k for k, _ in fact_rows])})
    block_of_row = np.array([b for _, b in fact_rows], dtype=np.int64)
    blocks = _fact(4)

    class Senders:  # the one JoinedKeys method joined_bounds_of reads: the sender's rows, read whole
        @staticmethod
        def sender(table: str, columns: tuple[str, ...]) -> Sample:
            assert table == DIM and set(columns) == {"d_key", "d_moy", "d_name"}
            return Sample(dim, len(dim_rows), 0, 1)

    attributes = (("d_moy", "int"), ("d_name", "string"))
    (bounds,) = joined_bounds_of({(DIM, "d_key", "s_key"): attributes}, Sample(holdout, len(fact_rows), 0, 1),
                                 block_of_row, blocks, Senders())
    assert bounds.attributes == attributes
    assert JoinedBounds.from_json(json.loads(json.dumps(bounds.to_json()))) == bounds  # plain values, as apply's
    for b in range(4):
        pairs = [r for (k, block) in fact_rows if block == b and k is not None for r in dim_rows if r["d_key"] == k]
        want = []
        for name, _ in attributes:
            values = [r[name] for r in pairs if r[name] is not None]
            want.append((min(values), max(values), len(pairs) - len(values)) if values else (None, None, len(pairs)))
        assert bounds.files[str(blocks.paths[b])] == (len(pairs), tuple(want)), b
