"""Fold constant SQL expressions into typed Python values, with Spark's semantics.

A literal is only useful to the rewriter if we know exactly what value Spark gives it. Everything here
returns ``None`` ("not a constant we understand") rather than guess: a ``None`` makes the enclosing clause
MIGHT_MATCH, which can cost skipping but never correctness.

Values: ``int`` and ``decimal.Decimal`` (exact numerics), ``float`` (Spark DOUBLE literals such as ``1e3``),
``str``, ``datetime.date``, :class:`Timestamp` (a local date-time, optionally with a UTC offset) and
:class:`Interval` (a day-time or year-month interval).
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import re
from typing import Union

from sqlglot import exp

from rewriter.errors import Untranslatable
from rewriter.spark.types import (MAX_DECIMAL_PRECISION, as_decimal, decimal_arithmetic, decimal_literal_kind, fits,
                                  integer_literal_kind, number_literal_kind)
from stats.model import EXACT, Kind  # literals are folded exactly (a DECIMAL(38) has 38 digits)


@dataclasses.dataclass(frozen=True)
class Timestamp:
    """A timestamp literal. ``offset`` is None when the text names no zone: Spark then reads it in the
    session time zone, which the rewriter may not know."""

    local: datetime.datetime
    offset: datetime.timedelta | None = None
    # Moved by an interval. Spark adds it through the session time zone (days in its calendar, across its
    # offset changes), which this wall-clock arithmetic models only where the zone's offset never changes
    # (``rewriter/domain.py`` checks).
    shifted: bool = False


@dataclasses.dataclass(frozen=True)
class Interval:
    months: int = 0
    days: int = 0
    micros: int = 0

    def __neg__(self) -> Interval:
        return Interval(-self.months, -self.days, -self.micros)


Value = Union[int, decimal.Decimal, float, str, datetime.date, Timestamp, Interval]

# Spark's parsers read ASCII digits and trim ASCII whitespace only (Python's \d and \s also match "２" and
# U+3000), and take a zone only after the seconds; zone names are case-sensitive. Anything these patterns do
# not read is not a constant the rewriter understands, which is always safe: they accept a subset of what
# Spark accepts, and read it as Spark does.
_DATE = re.compile(r"[ \t\n\r]*([+-]?[0-9]{4,6})(?:-([0-9]{1,2})(?:-([0-9]{1,2})(?:[ T].*)?)?)?[ \t\n\r]*", re.S)
_TIMESTAMP = re.compile(r"[ \t\n\r]*([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})"
                        r"(?:[ T]([0-9]{1,2}):([0-9]{1,2})(?::([0-9]{1,2})(?:\.([0-9]{1,9}))?"
                        r"(?: ?(Z|UTC|[+-][0-9]{2}:[0-9]{2}))?)?)?[ \t\n\r]*")
_UNITS_DAYS = {"DAY": 1, "DAYS": 1, "WEEK": 7, "WEEKS": 7}
_UNITS_MONTHS = {"MONTH": 1, "MONTHS": 1, "YEAR": 12, "YEARS": 12, "QUARTER": 3, "QUARTERS": 3}
_UNITS_MICROS = {"HOUR": 3_600_000_000, "HOURS": 3_600_000_000, "MINUTE": 60_000_000, "MINUTES": 60_000_000,
                 "SECOND": 1_000_000, "SECONDS": 1_000_000}
_DATE_TYPES = {exp.DataType.Type.DATE}
_INTEGER_BITS = {exp.DataType.Type.TINYINT: 8, exp.DataType.Type.SMALLINT: 16, exp.DataType.Type.INT: 32,
                 exp.DataType.Type.BIGINT: 64}
_TIMESTAMP_TYPES = {exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPTZ, exp.DataType.Type.TIMESTAMPLTZ,
                    exp.DataType.Type.TIMESTAMPNTZ, exp.DataType.Type.DATETIME}


def parse_date(text: str) -> datetime.date | None:
    """Spark's string-to-date cast: ``yyyy``, ``yyyy-[m]m``, ``yyyy-[m]m-[d]d`` with anything after a space or T."""
    m = _DATE.fullmatch(text)
    if not m:
        return None
    try:
        return datetime.date(int(m.group(1)), int(m.group(2) or 1), int(m.group(3) or 1))
    except ValueError:
        return None


def parse_timestamp(text: str) -> Timestamp | None:
    m = _TIMESTAMP.fullmatch(text)
    if not m:
        return None
    y, mo, d, hh, mi, ss, frac, zone = m.groups()
    try:
        local = datetime.datetime(int(y), int(mo), int(d), int(hh or 0), int(mi or 0), int(ss or 0),
                                  int((frac or "0")[:6].ljust(6, "0")))
    except ValueError:
        return None
    offset = None
    if zone:
        if zone in ("Z", "UTC"):
            offset = datetime.timedelta(0)
        else:
            hours, minutes = int(zone[1:3]), int(zone[4:6])
            if hours > 18 or minutes > 59:
                return None  # java.time.ZoneOffset refuses it
            offset = (-1 if zone[0] == "-" else 1) * datetime.timedelta(hours=hours, minutes=minutes)
    return Timestamp(local, offset)


def fold(node: exp.Expression) -> Value:
    """The constant value of ``node``; raises :class:`Untranslatable` if it is not a constant we understand."""
    with decimal.localcontext(EXACT):
        value = _fold(node)
    if value is None:
        raise NotConstant(node)
    return value


class NotConstant(Untranslatable):
    """``node`` folds to no value. Its SQL is written only when the message is read: writing it for every node
    a model asks about made typing an ``OR`` chain of 100 terms take seconds."""

    def __init__(self, node: exp.Expression) -> None:
        super().__init__()
        self.node = node

    def __str__(self) -> str:
        return f"not a constant: {self.node.sql('spark')[:80]}"


def is_constant(node: exp.Expression) -> bool:
    try:
        fold(node)
        return True
    except Untranslatable:
        return False


def _fold(node: exp.Expression) -> Value | None:
    # Dispatch on the exact class: sqlglot's classes inherit (``ConcatWs`` is a ``Concat``, ``JSONCast`` a
    # ``Cast``), and a subclass is another function (rewriter/spark/registry.py).
    t = type(node)
    if t is exp.Paren:
        return _fold(node.this)
    if t is exp.Literal:
        if node.is_string:
            return node.this
        text = node.this
        if re.fullmatch(r"[+-]?[0-9]+", text):
            return int(text)
        if re.fullmatch(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)", text):
            return decimal.Decimal(text)
        try:
            return float(text)  # 1e3, 1.5E-2: Spark DOUBLE literals
        except ValueError:
            return None
    if t is exp.Neg:
        inner = _fold(node.this)
        if isinstance(inner, int) and not isinstance(inner, bool):
            return _within_integer_type(-inner, node)  # -CAST(-32768 AS SMALLINT) overflows a SMALLINT
        if isinstance(inner, (decimal.Decimal, float, Interval)):
            return -inner
        return None
    if t in (exp.Cast, exp.TryCast):
        # CAST and TRY_CAST alike: a value this module casts is one both give (where CAST would fail
        # cast_value gives None, and TRY_CAST's NULL is not folded either).
        return cast_value(_fold(node.this), node.to)
    if t is exp.Interval:
        return _interval(node)
    if t in (exp.Add, exp.Sub):
        left, right = _fold(node.this), _fold(node.expression)
        if t is exp.Sub and isinstance(right, Interval):
            right = -right
        elif t is exp.Sub and isinstance(right, int) and isinstance(left, datetime.date):
            right = -right
        elif t is exp.Sub:
            return _arith(left, right, lambda a, b: a - b, node)
        if isinstance(left, Interval) and not isinstance(right, Interval):
            left, right = right, left
        return _add(left, right) if isinstance(right, (Interval, int)) and isinstance(left, (datetime.date, Timestamp)) \
            else _arith(left, right, lambda a, b: a + b, node)
    if t is exp.Mul:
        return _arith(_fold(node.this), _fold(node.expression), lambda a, b: a * b, node)
    if t in (exp.DateAdd, exp.TsOrDsAdd, exp.DateSub):
        base, amount = _fold(node.this), _fold(node.expression)
        unit = (node.text("unit") or "DAY").upper()
        if not isinstance(amount, int) or isinstance(amount, bool):
            return None
        if t is exp.DateSub:
            amount = -amount
        if unit in _UNITS_DAYS:
            step = Interval(days=amount * _UNITS_DAYS[unit])
        elif unit in _UNITS_MONTHS:
            step = Interval(months=amount * _UNITS_MONTHS[unit])
        else:
            return None
        if isinstance(base, str):
            base = parse_date(base)
        return _add(base, step) if isinstance(base, datetime.date) else None
    if t is exp.AddMonths and not node.args.get("preserve_end_of_month"):
        base, amount = _fold(node.this), _fold(node.expression)
        if isinstance(base, str):
            base = parse_date(base)
        if isinstance(base, datetime.date) and isinstance(amount, int):
            return _add(base, Interval(months=amount))
        return None
    if t in (exp.TsOrDsToDate, exp.StrToDate) and not node.args.get("format"):
        inner = _fold(node.this)
        return cast_value(inner, exp.DataType.build("DATE"))
    return _by_definition(node)


def _by_definition(node: exp.Expression) -> Value | None:
    """Any other function of constants, by its registered definition where it evaluates exactly
    (``concat_ws``, ``upper``, ``substring``, ...). A NULL or a truth value is not a constant folded here."""
    from rewriter.spark.registry import definition

    fn = definition(node)
    if fn is None or fn.evaluate is None:
        return None
    args = [_fold(a) for a in fn.arguments(node)]
    if any(a is None for a in args):
        return None
    try:
        value = fn.evaluate(args, node)
    except Untranslatable:
        return None
    return value if isinstance(value, (str, int, decimal.Decimal, datetime.date)) and not isinstance(value, bool) \
        else None


def _decimal_arith(a: int | decimal.Decimal, b: int | decimal.Decimal, op, node: exp.Binary) -> decimal.Decimal | None:
    """``a op b`` with a decimal operand, as Spark computes it, or None. Exact only when Spark's result type
    keeps every digit: its precision is at most 38 (past that Spark drops scale, rounding). The result type
    follows from the operands' types, which are known here only for number literals written as such (a
    CAST, a column or a nested product may have a wider type than its value's digits show): anything else
    is not folded."""
    types = [_literal_decimal_type(side) for side in (node.this, node.expression)]
    if None in types:
        return None
    precision, _ = decimal_arithmetic("*" if type(node) is exp.Mul else "+", *types)  # type: ignore[arg-type]
    if precision > MAX_DECIMAL_PRECISION:
        return None
    with decimal.localcontext(EXACT):
        return decimal.Decimal(op(decimal.Decimal(a), decimal.Decimal(b)))


def _literal_decimal_type(node: exp.Expression) -> tuple[int, int] | None:
    """Spark's DECIMAL(p, s) for a number literal (an integer as INT's DECIMAL(10, 0) or BIGINT's (20, 0)),
    possibly negated or parenthesised; None for anything else."""
    while type(node) in (exp.Paren, exp.Neg):
        node = node.this
    if type(node) is not exp.Literal or node.is_string:
        return None
    kind = number_literal_kind(node.this)
    if kind is None or kind.name not in ("int", "decimal"):
        return None
    return as_decimal(kind)


def cast_value(value: Value | None, to: exp.DataType) -> Value | None:
    """Spark's cast of a Python value to ``to`` where it is exact and cannot fail; None otherwise."""
    if value is None:
        return None
    if to.this in _DATE_TYPES:
        if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
            return value
        return parse_date(value) if isinstance(value, str) else None
    if to.this in _TIMESTAMP_TYPES:
        if isinstance(value, Timestamp):
            return value
        if isinstance(value, str):
            parsed = parse_timestamp(value)
            if parsed is not None and parsed.offset is not None and to.this == exp.DataType.Type.TIMESTAMPNTZ:
                return None  # Spark's cast to TIMESTAMP_NTZ drops the zone: another instant than it names
            return parsed
        if isinstance(value, datetime.date):
            return Timestamp(datetime.datetime(value.year, value.month, value.day))
        return None
    if to.this in exp.DataType.INTEGER_TYPES:
        if isinstance(value, str) and re.fullmatch(r"[ \t\n\r]*[+-]?[0-9]+[ \t\n\r]*", value):
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            return None
        bits = _INTEGER_BITS.get(to.this)
        # Out of the target's range Spark raises (ANSI) or wraps: not a constant we understand.
        return value if bits is not None and -2**(bits - 1) <= value < 2**(bits - 1) else None
    if to.this == exp.DataType.Type.DECIMAL:
        if isinstance(value, (int, decimal.Decimal)) and not isinstance(value, bool):
            params = [int(p.this.this) for p in to.expressions] if to.expressions else [10, 0]
            scale = params[1] if len(params) > 1 else 0
            quantized = decimal.Decimal(value).quantize(decimal.Decimal(1).scaleb(-scale), rounding=decimal.ROUND_HALF_UP)
            # Past the type's precision Spark gives NULL (TRY_CAST, or CAST with ANSI off) or raises.
            return quantized if abs(quantized) < decimal.Decimal(10) ** (params[0] - scale) else None
        return None
    if to.this in (exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT):
        if isinstance(value, (int, decimal.Decimal, float)) and not isinstance(value, bool):
            return float(value) if to.this == exp.DataType.Type.DOUBLE else None
        return None
    if to.this in exp.DataType.TEXT_TYPES:
        return value if isinstance(value, str) else None
    return None


def _interval(node: exp.Interval) -> Interval | None:
    amount = _fold(node.this)
    unit = node.text("unit").upper()
    if isinstance(amount, str):
        text = amount.strip()
        parts = text.split()
        if len(parts) == 2 and not unit:  # INTERVAL '3 days'
            text, unit = parts[0], parts[1].upper()
        if not re.fullmatch(r"[+-]?[0-9]+", text):
            return None
        amount = int(text)
    if not isinstance(amount, int) or isinstance(amount, bool):
        return None
    if unit in _UNITS_DAYS:
        return Interval(days=amount * _UNITS_DAYS[unit])
    if unit in _UNITS_MONTHS:
        return Interval(months=amount * _UNITS_MONTHS[unit])
    if unit in _UNITS_MICROS:
        return Interval(micros=amount * _UNITS_MICROS[unit])
    return None


def add_months(d: datetime.date, months: int) -> datetime.date:
    """Spark's add_months: the same day of the month, clamped to the month's last day."""
    total = d.year * 12 + (d.month - 1) + months
    year, month = divmod(total, 12)
    month += 1
    last = (datetime.date(year + (month == 12), month % 12 + 1, 1) - datetime.timedelta(days=1)).day
    return datetime.date(year, month, min(d.day, last))


def _add(base: Value | None, step: Value | None) -> Value | None:
    if isinstance(step, int) and not isinstance(step, bool):
        step = Interval(days=step)
    if not isinstance(step, Interval):
        return None
    try:
        if isinstance(base, datetime.date) and not isinstance(base, datetime.datetime):
            if step.micros:
                return None  # date + hours becomes a timestamp in the session zone
            return add_months(base, step.months) + datetime.timedelta(days=step.days)
        if isinstance(base, Timestamp):
            if base.offset is not None and step.months:
                return None  # months go by the session zone's calendar, whose date may not be the literal's
            local = base.local
            if step.months:
                moved = add_months(local.date(), step.months)
                local = datetime.datetime.combine(moved, local.time())
            local += datetime.timedelta(days=step.days, microseconds=step.micros)
            return Timestamp(local, base.offset, shifted=base.shifted or step != Interval())
    except (OverflowError, ValueError):
        return None
    return None


def _arith(a: Value | None, b: Value | None, op, node: exp.Binary) -> Value | None:
    numeric = (int, decimal.Decimal)
    if isinstance(a, bool) or isinstance(b, bool):
        return None
    if isinstance(a, int) and isinstance(b, int):
        # In Spark's type of the operation (1Y + 1Y is a TINYINT): past it Spark raises (ANSI) or wraps.
        return _within_integer_type(op(a, b), node)
    if isinstance(a, numeric) and isinstance(b, numeric):
        return _decimal_arith(a, b, op, node)
    if isinstance(a, float) and isinstance(b, (float, *numeric)) or isinstance(b, float) and isinstance(a, numeric):
        return float(op(float(a), float(b)))
    return None


def _within_integer_type(result: int, node: exp.Expression) -> int | None:
    """``result`` where it fits Spark's integer type of ``node`` (``rewriter/spark/model.py``), else None:
    Spark would raise (ANSI) or wrap."""
    from rewriter.spark.model import result_kind

    return result if fits(result, result_kind(node, lambda column: None)) else None


def value_kind(value: Value) -> Kind | None:
    """Spark's type of a folded constant's value; None for an interval."""
    if isinstance(value, bool) or isinstance(value, Interval):
        return None
    if isinstance(value, Timestamp) or isinstance(value, datetime.datetime):
        return Kind("timestamp")
    if isinstance(value, datetime.date):
        return Kind("date")
    if isinstance(value, str):
        return Kind("string")
    if isinstance(value, int):
        return integer_literal_kind(value)
    if isinstance(value, float):
        return Kind("float")
    return decimal_literal_kind(value)
