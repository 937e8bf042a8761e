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

import datetime
import zoneinfo

import numpy as np
from sqlglot import exp

from rewriter.spark.model import result_kind
from rewriter.spark.registry import definition
from rewriter.spark.types import integer_literal_kind
from rewriter.spark.zones import MAX_OFFSET_MICROS, checked
from stats.model import EPOCH, Kind
from rewriter.errors import Untranslatable
from rewriter.literals import Interval, fold
from rewriter.predicate import Fn

# Spark stores a DATE as an int of days; date arithmetic outside it fails (ANSI) or is not a date.
MAX_DAYS = 2**31 - 1
MICROS_PER_DAY = 86_400_000_000
MAX_DECIMAL_PRECISION = 38

_INTEGER_CASTS = ("bigint", "long")
_DOUBLE_CASTS = ("double",)
# trunc(d, unit) knows week and coarser units only (anything else is NULL); date_trunc also knows days.
_TRUNC_UNITS = {"YEAR": "year", "YYYY": "year", "YY": "year", "QUARTER": "quarter", "MONTH": "month", "MM": "month",
                "MON": "month", "WEEK": "week"}
_DATE_TRUNC_UNITS = {**_TRUNC_UNITS, "DAY": "day", "DD": "day"}


def peel(node: exp.Expression, zone: str | None = None) -> tuple[Fn, exp.Expression] | None:
    """Peel one monotonically non-decreasing function off ``node``: (the function, its column-side
    argument); None when ``node`` is not one we know. Constants are folded (``rewriter/literals.py``).
    ``zone``: the session time zone, for functions whose result depends on it (None: any zone)."""
    # Only a node the registry defines (rewriter/spark/registry.py: its exact class and flags; CAST, TRY_CAST
    # and typed literals, never JSONCast; date_trunc without another dialect's zone argument) has a bounds
    # rule here, by that same exact class.
    if definition(node) is None:
        return None
    if type(node) in (exp.Cast, exp.TryCast):
        return Fn("cast", node.to.sql("spark").lower()), node.this
    if type(node) is exp.TsOrDsToDate and not node.args.get("format"):
        return Fn("to_date"), node.this
    if type(node) in (exp.Year, exp.Month, exp.Quarter):
        return Fn(type(node).__name__.lower()), node.this
    if type(node) is exp.DateTrunc:  # trunc(d, unit): a DATE
        unit = _TRUNC_UNITS.get(node.text("unit").upper())
        return (Fn("trunc", unit), node.this) if unit else None
    if type(node) is exp.TimestampTrunc:  # date_trunc(unit, x): a TIMESTAMP, in the session time zone
        unit = _DATE_TRUNC_UNITS.get(node.text("unit").upper())
        return (Fn("date_trunc", (unit, zone)), node.this) if unit else None
    if type(node) in (exp.DateAdd, exp.TsOrDsAdd, exp.DateSub):
        unit = (node.text("unit") or "DAY").upper()
        amount = fold(node.expression)
        if not isinstance(amount, int) or isinstance(amount, bool) or unit not in ("DAY", "DAYS"):
            return None
        return Fn("add_days", -amount if type(node) is exp.DateSub else amount), node.this
    if type(node) is exp.AddMonths:
        amount = fold(node.expression)
        return (Fn("add_months", amount), node.this) if isinstance(amount, int) else None
    if type(node) in (exp.Add, exp.Sub):
        for column_side, constant_side in ((node.this, node.expression), (node.expression, node.this)):
            if type(node) is exp.Sub and column_side is node.expression:
                continue  # c - x is decreasing
            try:
                value = fold(constant_side)
            except Untranslatable:
                continue
            sign = -1 if type(node) is exp.Sub else 1
            if isinstance(value, Interval):
                if value.micros or (value.months and value.days):
                    return None
                if value.months:
                    return Fn("add_months", sign * value.months), column_side
                return Fn("add_days", sign * value.days), column_side
            if isinstance(value, (int,)) and not isinstance(value, bool):
                return Fn("add", sign * value, constant_bits(constant_side)), column_side
        return None
    if type(node) is exp.Mul:
        for column_side, constant_side in ((node.this, node.expression), (node.expression, node.this)):
            try:
                value = fold(constant_side)
            except Untranslatable:
                continue
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return Fn("mul", value, constant_bits(constant_side)), column_side
        return None
    return None


def peel_all(node: exp.Expression, zone: str | None = None) -> tuple[exp.Expression, tuple[Fn, ...]]:
    """Every monotone function :func:`peel` can take off ``node``, innermost first, and what is left under
    them (a column, or the first expression that is not one we know). A constant that does not fold raises
    Untranslatable."""
    fns: list[Fn] = []
    while True:
        if isinstance(node, exp.Paren):
            node = node.this
            continue
        step = None if isinstance(node, exp.Column) else peel(node, zone)
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
    """Spark's result type of ``fn(x)`` for x of ``kind`` (as a kind: integers keep their width, decimals
    their precision and scale); Untranslatable when fn is not monotone there or its type is not modelled.
    ``tests/test_function_types_spark.py`` checks every answer against Spark's ``typeof()``."""
    name = fn.name
    if name == "to_date" and kind.name == "date":
        return kind
    if name == "cast":
        if kind.name == "int" and fn.arg in _INTEGER_CASTS:
            return Kind("int", bits=64)
        if kind.name in ("int", "float") and fn.arg in _DOUBLE_CASTS:
            return Kind("float")
        if kind.name == "date" and fn.arg == "date":
            return kind
        if kind.name == "string" and fn.arg in ("string", "varchar"):
            return kind
        raise Untranslatable(f"cast of a {kind.name} column to {fn.arg} is not known to be monotone")
    if kind.name == "date":
        if name in ("year", "month", "quarter"):
            return Kind("int", bits=32)
        if name in ("trunc", "add_days", "add_months", "add"):
            return kind
        if name == "date_trunc":
            return Kind("timestamp")
    if kind.name == "int" and name in ("add", "mul"):
        if not -2**63 <= fn.arg < 2**63:
            raise Untranslatable("an integer constant too large for BIGINT (Spark reads it as a DECIMAL)")
        return Kind("int", bits=max(kind.bits, fn.bits or literal_bits(fn.arg)))
    if kind.name == "decimal" and name in ("add", "mul"):
        # Spark types an integer literal in decimal arithmetic by its own digits (DecimalType.fromLiteral).
        digits = len(str(abs(fn.arg)))
        whole = max(kind.precision - kind.scale, digits) + 1 if name == "add" else kind.precision - kind.scale + digits + 1
        if whole + kind.scale > MAX_DECIMAL_PRECISION:
            raise Untranslatable("decimal arithmetic whose result Spark would round to fewer digits")
        return Kind("decimal", scale=kind.scale, precision=whole + kind.scale)
    if kind.name == "float" and name in ("add", "mul"):
        return kind
    raise Untranslatable(f"{name} on a {kind.name} column is not a monotone function we know")


def literal_bits(value: int) -> int:
    """The width of Spark's type for an integer literal (``rewriter/spark/types.py``): INT when it fits,
    else BIGINT."""
    kind = integer_literal_kind(value)
    return kind.bits if kind is not None and kind.name == "int" else 64


def constant_bits(node: exp.Expression) -> int:
    """The width of Spark's type for an integer constant as written (``rewriter/spark/model.py``: ``7`` an
    INT, ``-2147483648`` an INT, ``1S`` a SMALLINT, ``CAST(1 AS BIGINT) + 1`` a BIGINT); 8 where it is not
    an integer type: the result is then taken to be as narrow as the column, which only keeps more files."""
    kind = result_kind(node, lambda column: None)
    return kind.bits if kind is not None and kind.name == "int" else 8


def apply(fn: Fn, kind: Kind, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(fn(lo), fn(hi), ok)``: new bounds, and where they hold (False means: bound unknown there).

    ``ok`` is False wherever Spark could fail or leave the monotone function's range for a value between
    the bounds: integer arithmetic that overflows the result type (ANSI raises, otherwise it wraps), date
    arithmetic outside Spark's day range. A file there MIGHT_MATCH, so a file whose rows would raise is
    always read (an error is a result too). A function ``output_kind`` does not model on ``kind`` raises
    Untranslatable before any value is touched: on a string column ``mul`` would repeat each bound (a
    fuzzed ``sid * 1000000000`` over a string ``sid`` took the process's memory)."""
    output_kind(fn, kind)
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
        if name == "date_trunc":
            unit, zone = fn.arg
            return _midnight(_trunc(lo, unit), zone, low=True), _midnight(_trunc(hi, unit), zone, low=False), ok
        if name in ("add_days", "add"):
            lo, hi = lo + fn.arg, hi + fn.arg
            ok = (np.abs(lo) <= MAX_DAYS) & (np.abs(hi) <= MAX_DAYS)
            return np.where(ok, lo, 0), np.where(ok, hi, 0), ok
        if name == "add_months":
            ok = (np.abs(lo) <= MAX_DAYS // 2) & (np.abs(hi) <= MAX_DAYS // 2) & (abs(fn.arg) < 12 * 10_000)
            lo, hi = np.where(ok, lo, 0), np.where(ok, hi, 0)
            return _add_months(lo, fn.arg), _add_months(hi, fn.arg), ok
    if name in ("add", "mul"):
        c = fn.arg
        if kind.name == "decimal" and name == "add":
            c = c * 10**kind.scale
        if kind.name == "int":
            bits = output_kind(fn, kind).bits
            low, high = -2**(bits - 1), 2**(bits - 1) - 1
            # ok iff low <= f(lo) and f(hi) <= high, tested on the bounds before computing (no int64 overflow).
            if name == "add":
                least, most = low - c, high - c
            else:  # c > 0 (peel takes no other multiplier)
                least, most = -((-low) // c), high // c
            floor, ceiling = -2**63, 2**63 - 1
            ok = (lo >= max(least, floor)) & (hi <= min(most, ceiling)) if least <= ceiling and most >= floor \
                else np.zeros(len(lo), dtype=bool)
            lo, hi = np.where(ok, lo, 0), np.where(ok, hi, 0)
        if kind.name == "decimal" and lo.dtype != object and output_kind(fn, kind).precision > 18:
            lo, hi = lo.astype(object), hi.astype(object)  # exact beyond int64: DECIMAL(p > 18) values
        if name == "add":
            return lo + c, hi + c, ok
        return lo * c, hi * c, ok
    raise Untranslatable(f"{name} cannot be applied to {kind.name} bounds")


def _midnight(days: np.ndarray, zone: str | None, low: bool) -> np.ndarray:
    """UTC microseconds of local midnight of each day in ``zone``; with no zone, the earliest (``low``) or
    latest reading over every zone. Where midnight falls in a DST gap or fold, both readings bound it."""
    wall = days.astype(np.int64) * MICROS_PER_DAY
    if zone is None:
        return wall - MAX_OFFSET_MICROS if low else wall + MAX_OFFSET_MICROS
    tz = zoneinfo.ZoneInfo(zone)
    out = np.empty(len(days), dtype=np.int64)
    for value in np.unique(days):
        try:
            local = EPOCH + datetime.timedelta(days=int(value))
            if not checked(zone, local.year):
                raise ValueError("outside the years whose zone rules were compared with the backend's")
            readings = [int((local.replace(tzinfo=tz, fold=f).astimezone(datetime.timezone.utc).replace(tzinfo=None)
                             - EPOCH) / datetime.timedelta(microseconds=1)) for f in (0, 1)]
        except (OverflowError, ValueError):
            # Past Python's years 1-9999 (Spark's dates go further), or outside the years whose rules were
            # compared with the backend's (rewriter/spark/zones.py): within 18 hours of UTC's midnight.
            utc = int(value) * MICROS_PER_DAY
            readings = [utc - MAX_OFFSET_MICROS, utc + MAX_OFFSET_MICROS]
        out[days == value] = min(readings) if low else max(readings)
    return out


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
