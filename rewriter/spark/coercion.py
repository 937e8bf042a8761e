"""Spark's implicit casts on function arguments, and whether they may raise (ARCHITECTURE.md §3.6).

Spark's analyzer casts an argument whose type the function does not take (``ImplicitCastInputTypes``) and
brings the arguments of COALESCE, CASE, IF, GREATEST, comparisons and IN to one type (``TypeCoercion``).
Widening a number, a date to a timestamp, or anything to a string never fails; under ANSI (Spark 4's
default) a string cast to a number, a date, a timestamp or a boolean raises on text that does not parse:
``coalesce(n_name, n_nationkey)`` casts ``n_name`` to BIGINT, and ``n_name = 'ALGERIA'`` fails on no row
while ``n_name = 1`` fails on every one. Without ANSI those casts give NULL.

Each helper returns a ``coerce`` for :class:`rewriter.spark.registry.Function`: True where some row may
make an implicit cast raise. An unknown type counts as a string (it may be one).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from sqlglot import exp

from rewriter.spark.registry import Call
from rewriter.spark.types import DATETIME, NUMERIC, common_kind
from stats.model import Kind

# Any type casts to a string without failing; a NULL literal (void) casts to anything.
ANY = None
# A string argument: any value casts to a string without failing (a type that does not, such as a map, is
# refused at analysis, on every file alike).
STRINGS = ANY
NUMBERS = NUMERIC
DATES = frozenset(DATETIME)
BOOLEANS = frozenset({"boolean"})
# Integer arguments Spark takes as INT (substring's position, lpad's length): a wider one may not fit.
SMALL_INTEGERS = "small integers"

# ASCII only, as Spark's casts read them (Python's \d and \s also match "１" and U+3000).
_INTEGER = re.compile(r"[ \t\n\r]*[+-]?[0-9]{1,18}[ \t\n\r]*")
_NUMBER = re.compile(r"[ \t\n\r]*[+-]?([0-9]{1,30}(\.[0-9]{0,30})?|\.[0-9]{1,30})[ \t\n\r]*")


def _accepts(family: frozenset[str] | str | None, kind: Kind | None) -> bool:
    if family is ANY:
        return True
    if kind is None:
        return False
    if kind.name == "void":
        return True
    if family == SMALL_INTEGERS:
        return kind.name == "int" and kind.bits <= 32
    return kind.name in family  # type: ignore[operator]


def expects(*families: frozenset[str] | str | None) -> Callable[[Call], bool]:
    """Arguments cast to the given families of types, position by position (the last one repeats for
    variadic functions): a cast from outside the family may raise under ANSI."""
    def coerce(call: Call) -> bool:
        if not call.ansi:
            return False
        for i, kind in enumerate(call.kinds):
            family = families[min(i, len(families) - 1)] if families else ANY
            if not _accepts(family, kind):
                return True
        return False
    return coerce


def same_type(first: int = 0) -> Callable[[Call], bool]:
    """Arguments (from position ``first`` on) brought to one common type (COALESCE, GREATEST, IF's
    branches, ...): a string among other types is cast to theirs, which may raise under ANSI; so may an
    argument of unknown type."""
    def coerce(call: Call) -> bool:
        if not call.ansi:
            return False
        kinds = [k for k in call.kinds[first:] if k is None or k.name != "void"]
        if any(k is None for k in kinds):
            return True
        names = {k.name for k in kinds}  # type: ignore[union-attr]
        return len(names) > 1 and "string" in names or len(names) > 1 and "boolean" in names or \
            _decimal_overflow(kinds)  # type: ignore[arg-type]
    return coerce


def _decimal_overflow(kinds: list[Kind]) -> bool:
    """Numbers brought to a common decimal type that cannot hold every one's integer digits and scale
    (``widerDecimalType`` bounds it at 38 digits: a BIGINT next to a DECIMAL(38, 20)) overflow under ANSI."""
    numbers = [k for k in kinds if k.name in NUMERIC]
    return any(k.name == "decimal" for k in numbers) and not any(k.name == "float" for k in numbers) and \
        common_kind(numbers) is None


def comparison(call: Call) -> bool:
    """A comparison (``=``, ``<``, BETWEEN, IN) of a string with a value of another type casts the string to
    that type, which may raise under ANSI. A string literal that parses as the other side's type (as
    ``rewriter/literals.py`` reads it) raises on no row; a string column or expression may."""
    if not call.ansi:
        return False
    from rewriter.literals import parse_date, parse_timestamp

    operands = [(o, k) for o, k in zip(call.args, call.kinds) if type(o) is not exp.Null]
    if len(operands) > 1 and any(k is None for _, k in operands):
        return True  # a value of unknown type (a string, maybe) next to another: a cast may fail
    if _decimal_overflow([k for _, k in operands if k is not None]):
        return True
    others = {k.name for _, k in operands if k is not None and k.name not in ("string", "void")}
    if not others:
        return False
    if "boolean" in others and len(others) > 1:
        return True
    for operand, kind in operands:
        if type(operand) is exp.Literal and operand.is_string:
            text = operand.this
            for other in others:
                if other == "date" and parse_date(text) is None or other.startswith("timestamp") and \
                        parse_timestamp(text) is None or other == "int" and not _INTEGER.fullmatch(text) or \
                        other in ("decimal", "float") and not _NUMBER.fullmatch(text) or other == "boolean":
                    return True
        elif kind is None or kind.name == "string":
            return True  # a string expression, or one of unknown type, next to a non-string
    return False
