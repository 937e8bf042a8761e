"""Evaluate a predicate over the statistics of every file of a table at once.

The result is a boolean numpy array, one element per file: ``True`` is MIGHT_MATCH (the file may hold a row
where the predicate is TRUE, so it must be read), ``False`` is CANNOT_MATCH. Missing, unknown or NaN
statistics are MIGHT_MATCH. Each ``_clause`` method is the falsifiable expression of seed 002 Table 1 /
Table 3, refined by range-sets and value lists where the file has them (seed 000, §4): a value can only be
in a file if it lies in one of the file's intervals, and in its value list when it has one. Equality and IN
ask the statistic kinds of ``stats/indexes.py`` too (a Bloom filter rules out a file none of the values is in).
"""

from __future__ import annotations

import numpy as np

import datetime
import decimal

from rewriter import monotone
from rewriter.spark import evaluate as row_value
from rewriter.errors import Untranslatable
from stats import indexes
from stats.model import EPOCH_DATE, EXACT, Kind
from stats.model import ColumnStats, TableStats
from rewriter.predicate import And, Cmp, ColumnCmp, InSet, Never, NullCheck, Or, Pred, SameValue, Term, Unknown

MIGHT_MATCH = True
CANNOT_MATCH = False


def might_match(pred: Pred, stats: TableStats) -> np.ndarray:
    """Per file: may the file hold a row for which ``pred`` is TRUE?"""
    return _Evaluator(stats).eval(pred)


def fully_translated(pred: Pred) -> bool:
    """Whether ``pred`` holds nothing but falsifiable clauses (no Unknown, no same-value fallback): its
    literals folded and its terms are monotone functions with guards, so only the guards can fail."""
    if isinstance(pred, (And, Or)):
        return all(fully_translated(p) for p in pred.items)
    return not isinstance(pred, (Unknown, SameValue))


def guard_failures(pred: Pred, stats: TableStats) -> np.ndarray:
    """Per file: may a term of ``pred`` leave its functions' safe range (``rewriter/monotone.py``: integer
    overflow, date range) on a value of the file? Files whose bounds are unknown may."""
    ev = _Evaluator(stats)
    out = ev.all(False)
    stack = [pred]
    while stack:
        p = stack.pop()
        if isinstance(p, (And, Or)):
            stack.extend(p.items)
        elif isinstance(p, (Cmp, InSet)) and p.term.fns:
            col = ev._column(p.term.column)
            if col is None:
                return ev.all(True)
            _, _, known, _ = ev._bounds(p.term, col)
            out |= ~known & ev._has_values(col)
    return out


class _Evaluator:
    def __init__(self, stats: TableStats) -> None:
        self.stats = stats
        self.n = stats.n_files

    def all(self, value: bool) -> np.ndarray:
        return np.full(self.n, value, dtype=bool)

    def eval(self, pred: Pred) -> np.ndarray:
        if isinstance(pred, And):
            out = self.all(MIGHT_MATCH)
            for p in pred.items:
                out &= self.eval(p)
            return out
        if isinstance(pred, Or):
            out = self.all(CANNOT_MATCH)
            for p in pred.items:
                out |= self.eval(p)
            return out
        if isinstance(pred, Unknown):
            return self.all(MIGHT_MATCH)
        if isinstance(pred, Never):
            return self.all(CANNOT_MATCH)
        if isinstance(pred, NullCheck):
            return self._null_check(pred)
        if isinstance(pred, ColumnCmp):
            return self._column_cmp(pred)
        if isinstance(pred, Cmp):
            return self._cmp(pred)
        if isinstance(pred, InSet):
            return self._in(pred)
        if isinstance(pred, SameValue):
            return self._same_value(pred)
        raise TypeError(f"not a predicate: {pred!r}")

    # -- helpers -------------------------------------------------------------------------------------------

    def _column(self, name: str) -> ColumnStats | None:
        return self.stats.columns.get(name)

    def _has_values(self, col: ColumnStats) -> np.ndarray:
        """Files that may hold a non-null value (unknown null counts count as 'may')."""
        return (col.null_count < 0) | (col.null_count < self.stats.rows)

    def _bounds(self, term: Term, col: ColumnStats) -> tuple[np.ndarray, np.ndarray, np.ndarray, Kind]:
        lo, hi, known, kind = col.lo, col.hi, col.known.copy(), col.kind
        for fn in term.fns:
            lo, hi, ok = monotone.apply(fn, kind, lo, hi)
            known &= ok
            kind = monotone.output_kind(fn, kind)
        return lo, hi, known, kind

    # -- clauses -------------------------------------------------------------------------------------------

    def _null_check(self, pred: NullCheck) -> np.ndarray:
        col = self._column(pred.column)
        if col is None:
            return self.all(MIGHT_MATCH)
        unknown = col.null_count < 0
        if pred.is_null:  # Table 1: x IS NULL is falsified by total_nulls = 0
            return unknown | (col.null_count > 0)
        return unknown | (col.null_count < self.stats.rows)  # x IS NOT NULL: total_rows = total_nulls

    def _cmp(self, pred: Cmp) -> np.ndarray:
        col = self._column(pred.term.column)
        if col is None:
            return self.all(MIGHT_MATCH)
        lo, hi, known, _ = self._bounds(pred.term, col)
        # Table 1, with the literal an interval [vlo, vhi] of values it may stand for.
        with np.errstate(invalid="ignore"):
            op, vlo, vhi = pred.op, _scalar(pred.lo), _scalar(pred.hi)
            if op == "<":
                overlap = lo < vhi
            elif op == "<=":
                overlap = lo <= vhi
            elif op == ">":
                overlap = hi > vlo
            elif op == ">=":
                overlap = hi >= vlo
            elif op == "=":
                overlap = (lo <= vhi) & (hi >= vlo)
            else:  # "!=": only a file holding the single value v, and nothing else, is falsified
                overlap = ~((lo == hi) & (lo == vlo) & (vlo == vhi))
        overlap = np.asarray(overlap, dtype=bool)
        result = (~known | overlap) & self._has_values(col)
        if op == "=" and not pred.term.fns:
            # An object array: a numpy string array drops a value's trailing NUL characters ('abc\0' -> 'abc').
            one = np.array([pred.lo], dtype=object) if pred.lo == pred.hi else None
            result &= self._ranges_overlap(col, vlo, vhi) & self._value_list_hits(col, one) & self._index_hits(col, one)
        return result

    def _in(self, pred: InSet) -> np.ndarray:
        col = self._column(pred.term.column)
        if col is None:
            return self.all(MIGHT_MATCH)
        lo, hi, known, _ = self._bounds(pred.term, col)
        values = np.array(pred.values, dtype=lo.dtype if lo.dtype != object else object)
        # Seed 002 §5.3.5 builds the OR of n equalities; with the values sorted, "some value lies in
        # [lo, hi]" is two binary searches per file: O((files + values) log values), not O(files x values).
        hits = _any_value_within(values, lo, hi)
        result = (~known | hits) & self._has_values(col)
        if not pred.term.fns:
            if col.ranges is not None:
                r = col.ranges
                interval_hits = _any_value_within(values, r.lo, r.hi)
                per_file = np.bincount(r.file[interval_hits], minlength=self.n) > 0
                result &= ~r.present | per_file
            result &= self._value_list_hits(col, values) & self._index_hits(col, values)
        return result

    def _ranges_overlap(self, col: ColumnStats, vlo, vhi) -> np.ndarray:
        r = col.ranges
        if r is None:
            return self.all(MIGHT_MATCH)
        hit = (r.lo <= vhi) & (r.hi >= vlo)
        per_file = np.bincount(r.file[hit], minlength=self.n) > 0
        return ~r.present | per_file

    def _value_list_hits(self, col: ColumnStats, values: np.ndarray | None) -> np.ndarray:
        v = col.values
        if v is None or values is None:
            return self.all(MIGHT_MATCH)
        hit = np.isin(v.values, values)
        per_file = np.bincount(v.file[hit], minlength=self.n) > 0
        return ~v.present | per_file

    def _index_hits(self, col: ColumnStats, values: np.ndarray | None) -> np.ndarray:
        """The statistic kinds of ``stats/indexes.py`` (Bloom filters): may the file hold one of ``values``?"""
        if not col.indexes or values is None:
            return self.all(MIGHT_MATCH)
        return indexes.might_contain(col.indexes, values, self.n)

    def _same_value(self, pred: SameValue) -> np.ndarray:
        """Seed 002 §5.3.11: on a file where every column of the clause holds one non-NULL value, the clause
        has one value; FALSE or NULL rules the file out. Evaluated once per distinct combination of values."""
        cols = [self._column(c) for c in pred.columns]
        if any(c is None or c.kind.name not in _PYTHON_VALUE for c in cols):
            return self.all(MIGHT_MATCH)
        constant = self.stats.rows > 0
        for c in cols:
            constant &= c.known & (c.null_count == 0) & np.asarray(c.lo == c.hi, dtype=bool)
        out = self.all(MIGHT_MATCH)
        column_of = lambda node: node.name.lower() if node.table == pred.alias else None  # noqa: E731
        # Typed by the columns' kinds: an integer result outside its Spark type (TINYINT arithmetic past
        # 127) is not evaluated (rewriter/spark/evaluate.py).
        evaluator = row_value.RowEvaluator(column_of, {name: c.kind for name, c in zip(pred.columns, cols)})
        decided: dict[tuple, bool] = {}
        for i in np.flatnonzero(constant):
            key = tuple(c.lo[i] for c in cols)
            if key not in decided:
                env = {name: _PYTHON_VALUE[c.kind.name](c.lo[i], c.kind.scale) for name, c in zip(pred.columns, cols)}
                try:
                    decided[key] = evaluator.value(pred.node, env) is True
                except Untranslatable:
                    decided[key] = MIGHT_MATCH
            out[i] = decided[key]
        return out

    def _column_cmp(self, pred: ColumnCmp) -> np.ndarray:
        # Seed 002 Table 2: x1 > x2 is falsified by max(x1) <= min(x2); equality needs overlapping ranges.
        a, b = self._column(pred.left), self._column(pred.right)
        if a is None or b is None or a.kind.domain != b.kind.domain:
            return self.all(MIGHT_MATCH)
        known = a.known & b.known
        with np.errstate(invalid="ignore"):
            ops = {
                "<": a.lo < b.hi, "<=": a.lo <= b.hi, ">": a.hi > b.lo, ">=": a.hi >= b.lo,
                "=": (a.lo <= b.hi) & (a.hi >= b.lo),
                "!=": ~((a.lo == a.hi) & (b.lo == b.hi) & (a.lo == b.lo)),
            }
        overlap = np.asarray(ops[pred.op], dtype=bool)
        return (~known | overlap) & self._has_values(a) & self._has_values(b)


def _scalar(value: object) -> object:
    """A literal to compare with a column's array: a string as a 0-d object array, compared as Python
    compares strings (numpy would make it a numpy string, which drops trailing NUL characters: 'abc\0' would
    compare as 'abc')."""
    return np.array(value, dtype=object) if isinstance(value, str) else value


def _any_value_within(sorted_values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per interval [lo[i], hi[i]]: does any of ``sorted_values`` lie inside it?"""
    if len(sorted_values) == 0:
        return np.zeros(len(lo), dtype=bool)
    first = np.searchsorted(sorted_values, lo, side="left")
    last = np.searchsorted(sorted_values, hi, side="right")
    return last > first


# Domain value -> the Python value rewriter/spark/evaluate.py computes with, per kind it supports.
_PYTHON_VALUE = {
    "int": lambda v, scale: int(v),
    "decimal": lambda v, scale: EXACT.scaleb(decimal.Decimal(int(v)), -scale),
    "date": lambda v, scale: EPOCH_DATE + datetime.timedelta(days=int(v)),
    "string": lambda v, scale: str(v),
}
