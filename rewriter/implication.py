"""What a statement's conjuncts on a table prove about another clause over the same rows: that the clause is
TRUE on every row they keep, or on none (issue 15: a qd-tree block's cut, written with the literals of the
workload it was learned on, decided for a statement with other literals).

The conjuncts' translation (``rewriter/falsify.py``) is a *superset* of the rows on which they are TRUE. Its
plain comparisons and IN lists bound each column they test: every such row lies in a box, one interval per
column, non-NULL where a comparison tests the column. The box is built as the statistics of one "file"
(``region``), so the file evaluator (``rewriter/evaluate.py``) decides clauses over it with its own rules:

- **never TRUE** (``never_true``): the evaluator rules the box out for the clause's translation. Sound because
  that translation is itself a superset of the rows where the clause is TRUE.
- **always TRUE** (``always_true``): the clause is never FALSE in the box (the evaluator rules the box out for
  the translation of NOT clause, a superset of the rows where the clause is FALSE) and never NULL there. NULL
  is what a superset cannot see, so the clause must be of a shape that is NULL only on a NULL column
  (``_null_only_on``): comparisons, BETWEEN and IN lists of one plain column with non-NULL literals, combined
  with AND, OR and NOT; and that column must be one the box holds non-NULL. A literal Spark would read as NULL
  (a failing cast with ANSI off) is not one the translator understands: its clause comes out ``Unknown`` or
  ``Never``, and either refuses the conclusion (``_definite``).

Both are used only with statistics of the table as it is (the kinds the translation is typed by) under the
session the statement runs in; the caller decides whether the rows the clause was evaluated on are the rows
the statement reads (``rewriter/blocks.py``).
"""

from __future__ import annotations

import dataclasses
import decimal
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
from sqlglot import exp

from rewriter.evaluate import might_match
from rewriter.falsify import Translator
from rewriter.predicate import And, Cmp, InSet, Never, NullCheck, Or, Pred, SameValue, Unknown
from stats.model import ColumnStats, Kind, TableStats

# What a column can hold as stored, where a statement bounds one side only: Spark does not keep dates and
# timestamps within 0001-9999 (a zone's 9999-12-31 23:59 is past it in UTC), so the storage type's range.
_STORED = {"date": (-(1 << 31), (1 << 31) - 1), "timestamp": (-(1 << 63), (1 << 63) - 1),
           "timestamp_ntz": (-(1 << 63), (1 << 63) - 1), "decimal": (-(1 << 127), (1 << 127) - 1)}
_INTEGRAL = ("int", "decimal", "date", "timestamp", "timestamp_ntz")
_INT64 = (-(1 << 63), (1 << 63) - 1)


@dataclasses.dataclass(frozen=True)
class Region:
    """Bounds on every row on which a conjunction is TRUE: ``box`` is one file's statistics; ``non_null`` the
    columns no such row holds NULL in; ``empty`` when no row can satisfy it."""

    box: TableStats
    non_null: frozenset[str]
    empty: bool = False

    @property
    def bounded(self) -> frozenset[str]:
        """The columns the region says anything about."""
        return frozenset(self.box.columns) | self.non_null


def region(pred: Pred, kinds: Mapping[str, Kind]) -> Region:
    """The box of the rows on which ``pred`` (a translated conjunction) is TRUE."""
    lo: dict[str, Any] = {}
    hi: dict[str, Any] = {}
    non_null, null = set(), set()
    for p in _conjuncts(pred):
        if isinstance(p, Never):
            return _EMPTY
        if isinstance(p, NullCheck):
            (null if p.is_null else non_null).add(p.column)
            continue
        if not isinstance(p, (Cmp, InSet)) or p.term.fns or p.term.column not in kinds:
            continue  # Or, Unknown, a column comparison, a function of a column: no bound (a larger box)
        column, kind = p.term.column, kinds[p.term.column]
        non_null.add(column)  # a comparison or IN is TRUE on a non-NULL value only
        if kind.name == "float":
            continue  # NaN sorts above every number in Spark and compares equal to itself: no bound
        if isinstance(p, InSet):
            if not p.values:
                return _EMPTY
            low, high = p.values[0], p.values[-1]
        else:
            low, high = _bounds(p, kind)
        if low is not None:
            lo[column] = low if column not in lo else max(lo[column], low)
        if high is not None:
            hi[column] = high if column not in hi else min(hi[column], high)
    if non_null & null:
        return _EMPTY
    columns = {}
    for column in (non_null | null) | set(lo) | set(hi):
        kind = kinds.get(column)
        if kind is None:
            continue
        low, high = lo.get(column, _least(kind)), hi.get(column, _greatest(kind))
        known = low is not None and high is not None and kind.name != "float"
        if known and low > high:
            return _EMPTY
        wide = known and kind.name in _INTEGRAL and not (_INT64[0] <= low and high <= _INT64[1])
        dtype = object if kind.name in ("string", "decimal") or wide else (np.float64 if kind.name == "float" else np.int64)
        fill = "" if kind.name == "string" else 0
        columns[column] = ColumnStats(kind, np.array([low if known else fill], dtype=dtype),
                                      np.array([high if known else fill], dtype=dtype), np.array([known]),
                                      np.array([1 if column in null else 0 if column in non_null else -1], dtype=np.int64))
    return Region(_one_file(columns), frozenset(non_null))


def never_true(r: Region, node: exp.Expression, translator: Translator) -> bool:
    """Whether ``node`` is TRUE on no row of the region."""
    return r.empty or not might_match(translator.translate(node), r.box)[0]


def always_true(r: Region, node: exp.Expression, translator: Translator) -> bool:
    """Whether ``node`` is TRUE on every row of the region (see the module's docstring for why)."""
    return r.empty or bool(must_match(node, translator, r.box)[0])


def must_match(node: exp.Expression, translator: Translator, stats: TableStats) -> np.ndarray:
    """Per file of ``stats``: is ``node`` TRUE on every row of the file? The "rows must match" evaluator beside
    the file evaluator's "rows might match" (pyiceberg's strict and inclusive metrics evaluators).

    Sound for the reasons of the module's docstring, with the file's statistics as the box: the evaluator
    rules the file out for the translation of NOT ``node`` (a superset of the rows where ``node`` is FALSE), so
    no row makes it FALSE; and ``node`` is NULL only where its one column is NULL, which the file's null count
    (known, and zero) excludes. A region's box holds a null count of 0 exactly for its non-NULL columns."""
    none = np.zeros(stats.n_files, dtype=bool)
    tested = _null_test(node, translator)
    if tested is not None:  # IS [NOT] NULL is never NULL itself: it holds on a file of only NULLs, or none
        column, is_null = tested
        counts = stats.columns[column].null_count if column in stats.columns else None
        return none if counts is None else (counts == stats.rows if is_null else counts == 0)
    column = _null_only_on(node, translator)
    col = stats.columns.get(column) if column is not None else None
    if col is None:
        return none
    positive, negative = translator.translate(node), translator.translate(node, negate=True)
    if not (_definite(positive) and _definite(negative)):
        return none
    return (col.null_count == 0) & ~might_match(negative, stats)


def _null_test(node: exp.Expression, translator: Translator) -> tuple[str, bool] | None:
    """(column, is_null) of ``col IS NULL`` / ``col IS NOT NULL`` / ``NOT col IS NULL`` on a plain column."""
    negated = False
    while isinstance(node, (exp.Paren, exp.Not)):
        negated ^= isinstance(node, exp.Not)
        node = node.this
    if not isinstance(node, exp.Is) or not isinstance(node.expression, exp.Null) or \
            not isinstance(node.this, exp.Column):
        return None
    column = translator.column_of(node.this)
    return (column, not negated) if column is not None else None


def _bounds(p: Cmp, kind: Kind) -> tuple[Any, Any]:
    """The values a column may hold where ``p`` is TRUE, as (low, high), None for no bound. The literal is
    any value in [p.lo, p.hi], so each side takes the loosest one."""
    integral = kind.name in _INTEGRAL and isinstance(p.lo, (int, np.integer)) and isinstance(p.hi, (int, np.integer))
    if p.op == "=":
        return p.lo, p.hi
    if p.op in ("<", "<="):
        return None, (p.hi - 1 if p.op == "<" and integral else p.hi)
    if p.op in (">", ">="):
        return (p.lo + 1 if p.op == ">" and integral else p.lo), None
    return None, None  # "!="


def _least(kind: Kind) -> Any:
    if kind.name == "int":
        return -(1 << (kind.bits - 1))
    if kind.name in _STORED:
        return _STORED[kind.name][0]
    if kind.name == "string":
        return ""
    return None


def _greatest(kind: Kind) -> Any:
    if kind.name == "int":
        return (1 << (kind.bits - 1)) - 1
    if kind.name in _STORED:
        return _STORED[kind.name][1]
    return None  # strings have no greatest value


def _conjuncts(pred: Pred) -> list[Pred]:
    if isinstance(pred, And):
        return [q for p in pred.items for q in _conjuncts(p)]
    return [pred]


def _definite(pred: Pred) -> bool:
    """Whether ``pred`` has no clause the translator did not understand or found never TRUE (which is also
    what a NULL literal gives)."""
    if isinstance(pred, (And, Or)):
        return all(_definite(p) for p in pred.items)
    return not isinstance(pred, (Unknown, Never, SameValue))


_SHAPES = (exp.Paren, exp.And, exp.Or, exp.Not, exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.Between,
           exp.In, exp.Column, exp.Identifier, exp.Literal, exp.Neg, exp.Cast, exp.DataType, exp.DataTypeParam)


def _null_only_on(node: exp.Expression, translator: Translator) -> str | None:
    """The one column ``node`` tests, if ``node`` is NULL only where that column is NULL: comparisons,
    BETWEEN and IN lists of the plain column with literals, under AND, OR and NOT. Else None."""
    columns, numbers = set(), []
    for n in node.walk():
        if type(n) not in _SHAPES or type(n) is exp.In and (n.args.get("query") or n.args.get("unnest")):
            return None
        if type(n) in (exp.Cast, exp.Neg) and not isinstance(n.this, exp.Literal):
            return None  # a cast of a column may be NULL (ANSI off) on a non-NULL value, a negation overflow
        if type(n) is exp.Cast and n.to.this == exp.DataType.Type.DECIMAL:
            return None  # compared in a decimal type wider than both, which may overflow to NULL
        if type(n) is exp.TryCast:
            return None  # NULL wherever Spark cannot read the text, whatever the translator read in it
        if isinstance(n, exp.Literal) and not n.is_string and type(n.parent) not in (exp.Cast, exp.DataTypeParam):
            numbers.append(n.this)
        if isinstance(n, exp.Column):
            name = translator.column_of(n)
            if name is None:
                return None
            columns.add(name)
    if len(columns) != 1:
        return None
    column = columns.pop()
    kind = translator.kinds.get(column)
    if kind is None or kind.name == "float" or not all(_compared_exactly(text, kind) for text in numbers):
        return None  # floats: NaN, and a FLOAT compared in 32 bits where the literal is not one
    return column


def _compared_exactly(number: str, kind: Kind) -> bool:
    """Whether Spark compares a column of ``kind`` with the numeric literal ``number`` without a cast that
    may overflow to NULL: against a decimal column, in a common decimal type of at most 38 digits (an integer
    literal is typed INT or BIGINT, 10 or 20 digits; a decimal literal by its own digits); against an
    integer column, only integers (Spark widens both sides to a decimal for a fractional literal)."""
    if re.fullmatch(r"[+-]?\d+", number):
        if kind.name != "decimal":
            return True
        digits = 10 if -2**31 <= int(number) < 2**31 else 20
        return max(kind.precision - kind.scale, digits) + kind.scale <= 38
    if kind.name != "decimal" or not re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)", number):
        return False  # exponents are DOUBLE literals; fractions against integers widen both sides
    value = decimal.Decimal(number)
    scale = max(0, -value.as_tuple().exponent)
    integral = max(0, len(value.as_tuple().digits) - scale)
    return scale <= kind.scale and max(kind.precision - kind.scale, integral) + kind.scale <= 38


def _one_file(columns: dict[str, ColumnStats]) -> TableStats:
    return TableStats("", np.array([""], dtype=object), np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64),
                      np.ones(1, dtype=np.int64), columns)


_EMPTY = Region(_one_file({}), frozenset(), empty=True)
