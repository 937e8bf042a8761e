"""Monotone functions over statistics bounds (seed 002, §5.3.6 and §5.3.7).

If G is monotonically non-decreasing then ``G(min(x)) = min(G(x))`` and ``G(max(x)) = max(G(x))``, so a
clause on ``G(x)`` is checked against ``[G(lo), G(hi)]``. The same holds interval by interval for a
range-set. Conditionally monotone functions return a guard: bounds where the guard fails are unknown
(MIGHT_MATCH). ``month(d)`` is monotone only within one year, so its guard is ``year(lo) == year(hi)``.

Every function here is evaluated on whole numpy arrays of bounds, never per file. Which functions an
expression applies to a column is read from its syntax by :func:`peel` and :func:`split_term`; the
falsifiable expressions (``rewriter/falsify.py``) and the join graph (``rewriter/join_graph.py``) both use them.
"""

from __future__ import annotations

import numpy as np
from sqlglot import exp

from stats.model import Kind
from rewriter.errors import Untranslatable
from rewriter.literals import Interval, fold
from rewriter.predicate import Fn

# Integer arithmetic is only followed while it cannot overflow int64 (Spark would fail or wrap).
SAFE_INT = 2**62

_INTEGER_CASTS = ("bigint", "long")
_DOUBLE_CASTS = ("double",)
_TRUNC_UNITS = {"YEAR": "year", "YYYY": "year", "YY": "year", "QUARTER": "quarter", "MONTH": "month", "MM": "month",
                "MON": "month", "WEEK": "week", "DAY": "day", "DD": "day"}


def peel(node: exp.Expression) -> tuple[Fn, exp.Expression] | None:
    """Peel one monotonically non-decreasing function off ``node``: (the function, its column-side
    argument); None when ``node`` is not one we know. Constants are folded (``rewriter/literals.py``)."""
    if isinstance(node, (exp.Cast, exp.TryCast)):
        return Fn("cast", node.to.sql("spark").lower()), node.this
    if isinstance(node, exp.TsOrDsToDate) and not node.args.get("format"):
        return Fn("to_date"), node.this
    if isinstance(node, (exp.Year, exp.Month, exp.Quarter)):
        return Fn(type(node).__name__.lower()), node.this
    if isinstance(node, (exp.TimestampTrunc, exp.DateTrunc)):
        unit = _TRUNC_UNITS.get(node.text("unit").upper())
        return (Fn("trunc", unit), node.this) if unit else None
    if isinstance(node, (exp.DateAdd, exp.TsOrDsAdd, exp.DateSub)):
        unit = (node.text("unit") or "DAY").upper()
        amount = fold(node.expression)
        if not isinstance(amount, int) or isinstance(amount, bool) or unit not in ("DAY", "DAYS"):
            return None
        return Fn("add_days", -amount if isinstance(node, exp.DateSub) else amount), node.this
    if isinstance(node, exp.AddMonths):
        amount = fold(node.expression)
        return (Fn("add_months", amount), node.this) if isinstance(amount, int) else None
    if isinstance(node, (exp.Add, exp.Sub)):
        for column_side, constant_side in ((node.this, node.expression), (node.expression, node.this)):
            if isinstance(node, exp.Sub) and column_side is node.expression:
                continue  # c - x is decreasing
            try:
                value = fold(constant_side)
            except Untranslatable:
                continue
            sign = -1 if isinstance(node, exp.Sub) else 1
            if isinstance(value, Interval):
                if value.micros or (value.months and value.days):
                    return None
                if value.months:
                    return Fn("add_months", sign * value.months), column_side
                return Fn("add_days", sign * value.days), column_side
            if isinstance(value, (int,)) and not isinstance(value, bool):
                return Fn("add", sign * value), column_side
        return None
    if isinstance(node, exp.Mul):
        for column_side, constant_side in ((node.this, node.expression), (node.expression, node.this)):
            try:
                value = fold(constant_side)
            except Untranslatable:
                continue
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return Fn("mul", value), column_side
        return None
    return None


def peel_all(node: exp.Expression) -> tuple[exp.Expression, tuple[Fn, ...]]:
    """Every monotone function :func:`peel` can take off ``node``, innermost first, and what is left under
    them (a column, or the first expression that is not one we know). A constant that does not fold raises
    Untranslatable."""
    fns: list[Fn] = []
    while True:
        if isinstance(node, exp.Paren):
            node = node.this
            continue
        step = None if isinstance(node, exp.Column) else peel(node)
        if step is None:
            return node, tuple(reversed(fns))
        fns.append(step[0])
        node = step[1]


def split_term(node: exp.Expression) -> tuple[exp.Column, tuple[Fn, ...]] | None:
    """``node`` as monotone functions of one column, innermost first (``k + 1``, ``CAST(k AS BIGINT)``,
    ``year(d)``), or None. Only the syntax is checked: whether a function is monotone on the column's kind
    is for :func:`output_kind` to say once statistics are at hand."""
    try:
        inner, fns = peel_all(node)
    except Untranslatable:
        return None
    return (inner, fns) if isinstance(inner, exp.Column) else None


def kind_after(fns: tuple[Fn, ...], kind: Kind) -> Kind:
    """The kind of ``fns`` applied to a value of ``kind``, innermost first; Untranslatable when one is not monotone."""
    for fn in fns:
        kind = output_kind(fn, kind)
    return kind


def apply_all(fns: tuple[Fn, ...], kind: Kind, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`apply` for a chain of functions, innermost first: bounds, and where all of them hold."""
    ok = np.ones(len(lo), dtype=bool)
    for fn in fns:
        lo, hi, fn_ok = apply(fn, kind, lo, hi)
        ok &= fn_ok
        kind = output_kind(fn, kind)
    return lo, hi, ok


def output_kind(fn: Fn, kind: Kind) -> Kind:
    """The kind of ``fn(x)`` for x of ``kind``; Untranslatable when fn is not monotone there."""
    name = fn.name
    if name == "to_date" and kind.name == "date":
        return kind
    if name == "cast":
        if kind.name == "int" and fn.arg in _INTEGER_CASTS:
            return kind
        if kind.name in ("int", "float") and fn.arg in _DOUBLE_CASTS:
            return Kind("float")
        if kind.name == "date" and fn.arg == "date":
            return kind
        if kind.name == "string" and fn.arg in ("string", "varchar"):
            return kind
        raise Untranslatable(f"cast of a {kind.name} column to {fn.arg} is not known to be monotone")
    if kind.name == "date":
        if name in ("year", "month", "quarter"):
            return Kind("int")
        if name in ("trunc", "add_days", "add_months"):
            return kind
        if name == "add":
            return kind
    if kind.name in ("int", "decimal", "float") and name in ("add", "mul"):
        return kind
    raise Untranslatable(f"{name} on a {kind.name} column is not a monotone function we know")


def apply(fn: Fn, kind: Kind, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(fn(lo), fn(hi), ok)``: new bounds, and where they hold (False means: bound unknown there)."""
    ok = np.ones(len(lo), dtype=bool)
    name = fn.name
    if name in ("to_date", "cast"):
        if kind.name == "int" and fn.arg in _DOUBLE_CASTS:
            return lo.astype(np.float64), hi.astype(np.float64), ok
        return lo, hi, ok
    if kind.name == "date":
        if name in ("year", "month", "quarter"):
            ylo, yhi = _years(lo), _years(hi)
            if name == "year":
                return ylo, yhi, ok
            months_lo, months_hi = _months(lo), _months(hi)
            same_year = ylo == yhi
            if name == "month":
                return months_lo, months_hi, same_year
            return (months_lo - 1) // 3 + 1, (months_hi - 1) // 3 + 1, same_year
        if name == "trunc":
            return _trunc(lo, fn.arg), _trunc(hi, fn.arg), ok
        if name in ("add_days", "add"):
            return lo + fn.arg, hi + fn.arg, ok
        if name == "add_months":
            return _add_months(lo, fn.arg), _add_months(hi, fn.arg), ok
    if name in ("add", "mul"):
        c = fn.arg
        if kind.name == "decimal" and name == "add":
            c = c * 10**kind.scale
        if kind.name in ("int", "decimal") and lo.dtype != object:
            limit = SAFE_INT // abs(c) if name == "mul" else SAFE_INT - abs(c)
            ok = (np.abs(lo) <= limit) & (np.abs(hi) <= limit)
            lo, hi = np.where(ok, lo, 0), np.where(ok, hi, 0)
        if name == "add":
            return lo + c, hi + c, ok
        return lo * c, hi * c, ok
    raise Untranslatable(f"{name} cannot be applied to {kind.name} bounds")


def _years(days: np.ndarray) -> np.ndarray:
    return days.astype("datetime64[D]").astype("datetime64[Y]").astype(np.int64) + 1970


def _months(days: np.ndarray) -> np.ndarray:
    return days.astype("datetime64[D]").astype("datetime64[M]").astype(np.int64) % 12 + 1


def _trunc(days: np.ndarray, unit: str) -> np.ndarray:
    d = days.astype("datetime64[D]")
    if unit == "year":
        return d.astype("datetime64[Y]").astype("datetime64[D]").astype(np.int64)
    if unit == "month":
        return d.astype("datetime64[M]").astype("datetime64[D]").astype(np.int64)
    if unit == "quarter":
        months = d.astype("datetime64[M]").astype(np.int64)
        return (months - months % 3).astype("datetime64[M]").astype("datetime64[D]").astype(np.int64)
    if unit == "week":  # Monday-based weeks; 1970-01-01 was a Thursday
        return days - (days + 3) % 7
    return days.astype(np.int64)


def _add_months(days: np.ndarray, n: int) -> np.ndarray:
    """Spark's add_months on day numbers: same day of month, clamped to the target month's last day."""
    d = days.astype("datetime64[D]")
    month = d.astype("datetime64[M]")
    day_of_month = (d - month.astype("datetime64[D]")).astype(np.int64)
    target = month + np.timedelta64(n, "M")
    last = ((target + np.timedelta64(1, "M")).astype("datetime64[D]") - target.astype("datetime64[D]")).astype(np.int64) - 1
    return (target.astype("datetime64[D]").astype(np.int64) + np.minimum(day_of_month, last))
