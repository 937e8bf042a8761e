"""Arithmetic and numeric functions: Spark's definitions (``DecimalPrecision``, ANSI overflow)."""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from rewriter.errors import Untranslatable
from rewriter.spark.coercion import NUMBERS, expects
from rewriter.spark.registry import Call, Function, register
from rewriter.spark.types import (BIGINT, DOUBLE, INT, arithmetic_kind, as_decimal, bound_decimal, decimal_arithmetic,
                                  decimal_fits)
from rewriter.spark.values import integer, small, strict
from stats.model import Kind

_SYMBOL = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%"}


def literal_integer(node: exp.Expression) -> int | None:
    """The value of an integer literal as written (``7``, ``-7``, ``(7)``), else None: it joins decimal
    arithmetic by its digits."""
    while type(node) is exp.Paren:
        node = node.this
    negated = type(node) is exp.Neg
    inner = node.this if negated else node
    if type(inner) is exp.Literal and not inner.is_string and inner.this.isdigit():
        return -int(inner.this) if negated else int(inner.this)
    return None


def _numbers(call: Call) -> tuple[Kind, Kind] | None:
    a, b = call.kinds
    if a is None or b is None or a.name not in NUMBERS or b.name not in NUMBERS:
        return None
    return a, b


def _arithmetic_result(call: Call) -> Kind | None:
    op = _SYMBOL[type(call.node)]
    if _numbers(call) is None:
        a, b = call.kinds
        if a is not None and b is not None and a.name == "date" and b.name == "int" and b.bits <= 32 and op in "+-":
            return a  # date + n days
        return None
    literals = (literal_integer(call.node.this), literal_integer(call.node.expression))
    return arithmetic_kind(op, *call.kinds, literals=literals)


def _arithmetic_raises(call: Call) -> bool:
    """ANSI: integers overflow their type; decimals overflow where Spark's bounded type drops integer
    digits; anything not numeric (date arithmetic: out of range) may raise. Without ANSI: integers wrap,
    decimals become NULL, dates wrap: nothing raises."""
    if not call.ansi:
        return False
    kinds = _numbers(call)
    if kinds is None:
        return True
    a, b = kinds
    if a.name == b.name == "int":
        return True
    if "float" in (a.name, b.name):
        return False
    op = _SYMBOL[type(call.node)]
    literals = (literal_integer(call.node.this), literal_integer(call.node.expression))
    return not decimal_fits(op, as_decimal(a, literals[0]), as_decimal(b, literals[1]))  # type: ignore[arg-type]


def _add(values: list[Any], node: exp.Expression) -> Any:
    return None if None in values else small(integer(values[0]) + integer(values[1]))


def _sub(values: list[Any], node: exp.Expression) -> Any:
    return None if None in values else small(integer(values[0]) - integer(values[1]))


def _mul(values: list[Any], node: exp.Expression) -> Any:
    return None if None in values else small(integer(values[0]) * integer(values[1]))


def _mod(values: list[Any], node: exp.Expression) -> Any:
    if None in values:
        return None
    a, b = integer(values[0]), integer(values[1])
    if b == 0:
        raise Untranslatable("% by zero")
    return small(abs(a) % abs(b) * (1 if a >= 0 else -1))  # Java: the sign of the dividend


def _divide_result(call: Call) -> Kind | None:
    kinds = _numbers(call)
    if kinds is None:
        return None
    a, b = kinds
    if "float" in (a.name, b.name) or a.name == b.name == "int":
        return DOUBLE
    literals = (literal_integer(call.node.this), literal_integer(call.node.expression))
    precision, scale = bound_decimal(*decimal_arithmetic("/", as_decimal(a, literals[0]),  # type: ignore[arg-type]
                                                         as_decimal(b, literals[1])))  # type: ignore[arg-type]
    return Kind("decimal", precision=precision, scale=scale)


def _divide_raises(call: Call) -> bool:
    """ANSI: division by zero raises (the divisor must be a non-zero constant or proven non-zero by the
    CASE around it); decimal division may overflow its bounded type. Without ANSI it is NULL."""
    if not call.ansi:
        return False
    kinds = _numbers(call)
    if kinds is None or not call.nonzero(call.node.expression):
        return True
    a, b = kinds
    if "float" in (a.name, b.name) or a.name == b.name == "int":
        return False
    literals = (literal_integer(call.node.this), literal_integer(call.node.expression))
    return not decimal_fits("/", as_decimal(a, literals[0]), as_decimal(b, literals[1]))  # type: ignore[arg-type]


def _integral_division_raises(call: Call) -> bool:
    """``div`` and ``%`` under ANSI: by zero raises, so the divisor must be non-zero. ``MIN_VALUE div -1``
    overflows, so an integer ``div`` needs a literal divisor other than -1 (Java's ``MIN_VALUE % -1`` is 0).
    A decimal dividend is not modelled (may raise)."""
    if not call.ansi:
        return False
    kinds = _numbers(call)
    if kinds is None or not call.nonzero(call.node.expression) or kinds[0].name != "int":
        return True
    if type(call.node) is exp.Mod:
        return False
    literal = literal_integer(call.node.expression)
    return literal is None or literal == -1


def _mod_result(call: Call) -> Kind | None:
    kinds = _numbers(call)
    if kinds is None:
        return None
    a, b = kinds
    if "float" in (a.name, b.name):
        return arithmetic_kind("+", a, b)
    if a.name == b.name == "int":
        return Kind("int", bits=max(a.bits, b.bits))
    literals = (literal_integer(call.node.this), literal_integer(call.node.expression))
    precision, scale = bound_decimal(*decimal_arithmetic("%", as_decimal(a, literals[0]),  # type: ignore[arg-type]
                                                         as_decimal(b, literals[1])))  # type: ignore[arg-type]
    return Kind("decimal", precision=precision, scale=scale)


def _same_as_argument(call: Call) -> Kind | None:
    kind = call.kinds[0]
    return kind if kind is not None and kind.name in NUMBERS else None


def _integer_overflow(call: Call) -> bool:
    """-x and abs(x) overflow on an integer's MIN_VALUE under ANSI."""
    kind = call.kinds[0]
    return call.ansi and (kind is None or kind.name not in ("decimal", "float"))


def _floor_result(call: Call) -> Kind | None:
    kind = call.kinds[0]
    if kind is None:
        return None
    if kind.name == "decimal":
        if kind.scale == 0:
            return kind
        return Kind("decimal", precision=min(38, kind.precision - kind.scale + 1), scale=0)
    return BIGINT if kind.name in ("int", "float") else None


def _floor_raises(call: Call) -> bool:
    """floor/ceil of a DOUBLE is a BIGINT: a value past its range may raise (not modelled: may)."""
    kind = call.kinds[0]
    return call.ansi and (kind is None or kind.name not in ("int", "decimal"))


def _places(call: Call) -> int | None:
    decimals = call.node.args.get("decimals")
    return 0 if decimals is None else literal_integer(decimals)


def _round_decimal(kind: Kind, places: int) -> tuple[int, int]:
    """Spark's type of round(DECIMAL(p, s), places) before its bound at 38 digits (``RoundBase``): one more
    integral digit (9.9 rounds to 10), the scale cut to ``places``."""
    whole = kind.precision - kind.scale + 1
    if places < 0:
        return max(whole, 1 - places), 0
    scale = min(kind.scale, places)
    return whole + scale, scale


def _round_result(call: Call) -> Kind | None:
    kind, places = call.kinds[0], _places(call)
    if kind is None or kind.name not in NUMBERS:
        return None
    if kind.name == "decimal":
        if places is None:
            return None
        precision, scale = _round_decimal(kind, places)
        return Kind("decimal", precision=min(precision, 38), scale=scale)
    return kind


def _round_raises(call: Call) -> bool:
    """round of an integer to tens and more may overflow its type (ANSI); of a decimal only where Spark's
    result type, one integral digit wider, had to be bounded at 38 digits."""
    kind, places = call.kinds[0], _places(call)
    if not call.ansi or kind is not None and kind.name == "float":
        return False
    if kind is None or places is None:
        return True
    if kind.name == "decimal":
        return _round_decimal(kind, places)[0] > 38  # Spark bounds the type at 38 "accepting the risk of overflow"
    return places < 0


def _sign_result(call: Call) -> Kind | None:
    kind = call.kinds[0]
    return DOUBLE if kind is not None and kind.name in NUMBERS else None


register(
    Function(exp.Add, "+", ("this", "expression"), _arithmetic_result, raises=_arithmetic_raises, evaluate=_add),
    Function(exp.Sub, "-", ("this", "expression"), _arithmetic_result, raises=_arithmetic_raises, evaluate=_sub),
    Function(exp.Mul, "*", ("this", "expression"), _arithmetic_result, raises=_arithmetic_raises, evaluate=_mul),
    Function(exp.Div, "/", ("this", "expression"), _divide_result, raises=_divide_raises,
             flags=frozenset({"safe"}), when=lambda n: not n.args.get("typed")),
    Function(exp.IntDiv, "div", ("this", "expression"), lambda call: BIGINT if _numbers(call) else None,
             raises=_integral_division_raises),
    Function(exp.Mod, "%", ("this", "expression"), _mod_result, raises=_integral_division_raises, evaluate=_mod,
             flags=frozenset({"safe"})),
    Function(exp.Neg, "negative", ("this",), _same_as_argument, raises=_integer_overflow,
             evaluate=strict(lambda v: small(-integer(v)))),
    Function(exp.Abs, "abs", ("this",), _same_as_argument, expects(NUMBERS), raises=_integer_overflow),
    Function(exp.Floor, "floor", ("this",), _floor_result, expects(NUMBERS), raises=_floor_raises),
    Function(exp.Ceil, "ceil", ("this",), _floor_result, expects(NUMBERS), raises=_floor_raises),
    Function(exp.Round, "round", ("this", "decimals"), _round_result, expects(NUMBERS, frozenset({"int"})),
             raises=_round_raises),
    Function(exp.Sign, "sign", ("this",), _sign_result, expects(NUMBERS)),
    Function(exp.Anonymous, "hash", ("expressions",), lambda call: INT, anonymous="hash"),
    Function(exp.Anonymous, "xxhash64", ("expressions",), lambda call: BIGINT, anonymous="xxhash64"),
    Function(exp.Anonymous, "crc32", ("expressions",), lambda call: BIGINT, anonymous="crc32"),
)
