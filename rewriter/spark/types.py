"""Spark's types as the rewriter computes with them: the one owner of literal types, integer widths, decimal
precision and scale, implicit numeric widening and which casts cannot fail (ARCHITECTURE.md §3.6, §3.7).

A type is a :class:`stats.model.Kind` (integers keep their width, decimals their precision and scale, FLOAT
is a 32-bit float, DOUBLE a 64-bit one), plus ``boolean`` for predicates. ``None`` is "unknown": every
caller treats it as "could be anything", which can cost pruning and never correctness.

The rules follow Spark 4's analyzer (``DecimalPrecision``, ``TypeCoercion``'s numeric precedence, literal
typing in ``AstBuilder``); ``tests/test_spark_conformance.py`` checks every result type the registry
computes against Spark's ``typeof()``.
"""

from __future__ import annotations

import decimal
import re

from sqlglot import exp

from stats.model import Kind, kind_of

MAX_DECIMAL_PRECISION = 38
# The digits an integer type takes in decimal arithmetic (Spark's DecimalType.forType).
_INTEGER_DIGITS = {8: 3, 16: 5, 32: 10, 64: 20}
_TYPE_BITS = {exp.DataType.Type.TINYINT: 8, exp.DataType.Type.SMALLINT: 16, exp.DataType.Type.INT: 32,
              exp.DataType.Type.BIGINT: 64}
BOOLEAN = Kind("boolean")
VOID = Kind("void")  # the type of a NULL literal
STRING = Kind("string")
DATE = Kind("date")
DOUBLE = Kind("float", bits=64)
INT = Kind("int", bits=32)
BIGINT = Kind("int", bits=64)
NUMERIC = frozenset({"int", "decimal", "float"})
DATETIME = frozenset({"date", "timestamp", "timestamp_ntz"})


def integer_range(bits: int) -> tuple[int, int]:
    """The smallest and largest value of Spark's integer type of ``bits`` bits."""
    return -2**(bits - 1), 2**(bits - 1) - 1


def fits(value: int, kind: Kind | None) -> bool:
    """Whether an integer result is a value of Spark's type ``kind`` (an integer type it does not overflow):
    past it Spark raises (ANSI) or wraps, which nothing here reproduces."""
    if kind is None or kind.name != "int":
        return False
    low, high = integer_range(kind.bits)
    return low <= value <= high


def integer_literal_kind(value: int) -> Kind | None:
    """Spark's type of an integer literal: INT when it fits, else BIGINT, else DECIMAL(digits, 0) up to 38
    digits (``AstBuilder.visitIntegerLiteral``)."""
    if -2**31 <= value < 2**31:
        return INT
    if -2**63 <= value < 2**63:
        return BIGINT
    digits = len(str(abs(value)))
    return Kind("decimal", precision=digits, scale=0) if digits <= MAX_DECIMAL_PRECISION else None


def decimal_literal_kind(value: decimal.Decimal) -> Kind | None:
    """Spark's DECIMAL(p, s) of a decimal literal such as ``1.50``: its digits and its scale as written."""
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        return None
    scale = max(0, -exponent)
    precision = max(len(digits) + max(0, exponent), scale)
    return Kind("decimal", precision=precision, scale=scale) if precision <= MAX_DECIMAL_PRECISION else None


def number_literal_kind(text: str) -> Kind | None:
    """The type of a number literal as Spark reads its text: ``1`` INT, ``3000000000`` BIGINT, ``1.5``
    DECIMAL(2, 1), ``1e3`` DOUBLE. Suffixed literals (``1L``, ``1S``, ``1BD``) are not read here (None)."""
    if re.fullmatch(r"[+-]?[0-9]+", text):
        return integer_literal_kind(int(text))
    if re.fullmatch(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)", text):
        return decimal_literal_kind(decimal.Decimal(text))
    if re.fullmatch(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)[eE][+-]?[0-9]+", text):
        return DOUBLE
    return None


def type_kind(data_type: exp.DataType) -> Kind | None:
    """The kind of a type named in SQL (a CAST's target); None where statistics do not model it."""
    if data_type.this == exp.DataType.Type.BOOLEAN:
        return BOOLEAN
    return kind_of(data_type.sql("spark"))


def spark_name(kind: Kind) -> str:
    """Spark's name of the type, as ``typeof()`` prints it."""
    if kind.name == "int":
        return {8: "tinyint", 16: "smallint", 32: "int", 64: "bigint"}[kind.bits]
    if kind.name == "decimal":
        return f"decimal({kind.precision},{kind.scale})"
    if kind.name == "float":
        return "float" if kind.bits == 32 else "double"
    return kind.name


def as_decimal(kind: Kind, literal: int | None = None) -> tuple[int, int] | None:
    """(precision, scale) of a value of ``kind`` in decimal arithmetic: a decimal's own, an integer column's
    by its width, an integer *literal*'s by its digits (``DecimalType.fromLiteral``); None otherwise."""
    if kind.name == "decimal":
        return kind.precision, kind.scale
    if kind.name == "int":
        if literal is not None:
            return max(1, len(str(abs(literal)))), 0
        return _INTEGER_DIGITS.get(kind.bits, 20), 0
    return None


def bound_decimal(precision: int, scale: int) -> tuple[int, int]:
    """Spark's bound of a decimal result type at 38 digits with ``allowPrecisionLoss`` (its default, which
    ``rewriter/session.py`` requires): the integer digits are kept and the scale cut to no less than 6."""
    if precision <= MAX_DECIMAL_PRECISION:
        return precision, scale
    whole = precision - scale
    scale = max(MAX_DECIMAL_PRECISION - whole, min(scale, 6))
    return MAX_DECIMAL_PRECISION, scale


def decimal_arithmetic(op: str, a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    """The exact (unbounded) decimal result type of ``a op b`` (``DecimalPrecision``), ``op`` one of
    ``+ - * / %``."""
    (p1, s1), (p2, s2) = a, b
    if op in "+-":
        scale = max(s1, s2)
        return max(p1 - s1, p2 - s2) + scale + 1, scale
    if op == "*":
        return p1 + p2 + 1, s1 + s2
    if op == "/":
        scale = max(6, s1 + p2 + 1)
        return p1 - s1 + s2 + scale, scale
    scale = max(s1, s2)  # %
    return min(p1 - s1, p2 - s2) + scale, scale


def decimal_fits(op: str, a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether every result of ``a op b`` fits Spark's (bounded) result type, so the operation cannot
    overflow: the exact type has at most 38 digits, or bounding it kept every integer digit."""
    precision, scale = decimal_arithmetic(op, a, b)
    if precision <= MAX_DECIMAL_PRECISION:
        return True
    bounded_precision, bounded_scale = bound_decimal(precision, scale)
    return precision - scale <= bounded_precision - bounded_scale


def arithmetic_kind(op: str, a: Kind | None, b: Kind | None, literals: tuple[int | None, int | None] = (None, None)
                    ) -> Kind | None:
    """Spark's result type of ``a op b`` for ``op`` in ``+ - *``; ``literals``: the value of an operand that
    is an integer literal (it joins decimal arithmetic by its digits). None where not modelled."""
    if a is None or b is None or not {a.name, b.name} <= NUMERIC:
        return None
    if "float" in (a.name, b.name):
        # FLOAT op (integer or FLOAT) stays FLOAT; anything with a DOUBLE or a DECIMAL is a DOUBLE.
        floats = [k for k in (a, b) if k.name == "float"]
        narrow = all(k.bits == 32 for k in floats) and all(k.name != "decimal" for k in (a, b))
        return Kind("float", bits=32) if narrow else DOUBLE
    if a.name == b.name == "int":
        return Kind("int", bits=max(a.bits, b.bits))
    da, db = as_decimal(a, literals[0]), as_decimal(b, literals[1])
    assert da is not None and db is not None
    precision, scale = bound_decimal(*decimal_arithmetic(op, da, db))
    return Kind("decimal", precision=precision, scale=scale)


def common_kind(kinds: list[Kind | None]) -> Kind | None:
    """The type Spark coerces the values of COALESCE, CASE, IF, GREATEST, ... to, where every one is of the
    same family and the widening cannot fail: integers to the widest, integers and decimals to a decimal
    that holds both, anything with a float to DOUBLE (FLOAT if every one is a FLOAT or an integer), dates and
    timestamps to TIMESTAMP. None where unknown or where Spark would cast a string (which may fail)."""
    if not kinds or any(k is None for k in kinds):
        return None
    names = {k.name for k in kinds}  # type: ignore[union-attr]
    if len(names) == 1 and "decimal" not in names and "int" not in names and "float" not in names:
        return kinds[0]
    if names <= {"date", "timestamp"}:
        return Kind("timestamp")
    if not names <= NUMERIC:
        return None
    if "float" in names:
        narrow = all(k.bits == 32 for k in kinds if k.name == "float") and "decimal" not in names  # type: ignore
        return Kind("float", bits=32) if narrow else DOUBLE
    if names == {"int"}:
        return Kind("int", bits=max(k.bits for k in kinds))  # type: ignore[union-attr]
    digits = [as_decimal(k) for k in kinds]  # type: ignore[arg-type]
    scale = max(s for _, s in digits)  # type: ignore[misc]
    whole = max(p - s for p, s in digits)  # type: ignore[misc]
    if whole + scale > MAX_DECIMAL_PRECISION:
        return None  # Spark would cut the scale (DecimalPrecision.widerDecimalType): not modelled
    return Kind("decimal", precision=whole + scale, scale=scale)


def widens(source: Kind, target: Kind) -> bool:
    """Whether every value of ``source`` casts to ``target`` without failing or changing: the same type, an
    integer to one at least as wide or to a decimal that holds its digits, a decimal to one that holds its
    integer digits and scale, FLOAT to DOUBLE, a date to a timestamp."""
    if source == target:
        return True
    if source.name == "int" and target.name == "int":
        return target.bits >= source.bits
    if source.name in ("int", "decimal") and target.name == "decimal":
        p, s = as_decimal(source)  # type: ignore[misc]
        return target.scale >= s and target.precision - target.scale >= p - s
    if source.name == "float" and target.name == "float":
        return target.bits >= source.bits
    return source.name == "date" and target.name == "timestamp"


def cast_cannot_fail(source: Kind | None, target: exp.DataType) -> bool:
    """Casts that never raise and never give NULL for a non-NULL value: anything to a string, an integer to
    an integer at least as wide or to a DOUBLE, a FLOAT or DOUBLE to a DOUBLE, a date to a date or a
    timestamp, a decimal to a decimal that holds its digits or to a DOUBLE."""
    t = target.this
    if t in exp.DataType.TEXT_TYPES and t not in (exp.DataType.Type.CHAR, exp.DataType.Type.VARCHAR):
        return True
    if source is None:
        return False
    if source.name == "int":
        width = _TYPE_BITS.get(t)
        return (width is not None and width >= source.bits) or t == exp.DataType.Type.DOUBLE
    if source.name == "float":
        return t == exp.DataType.Type.DOUBLE
    if source.name == "date":
        return t in (exp.DataType.Type.DATE, exp.DataType.Type.TIMESTAMP)
    if source.name == "decimal" and t == exp.DataType.Type.DECIMAL:
        target_kind = type_kind(target)
        return target_kind is not None and target_kind.scale >= source.scale and \
            target_kind.precision - target_kind.scale >= source.precision - source.scale
    if source.name == "decimal":
        return t == exp.DataType.Type.DOUBLE
    return False
