"""Python values standing for Spark values, for the definitions that evaluate exactly.

``None`` is SQL NULL; ``int`` and ``decimal.Decimal`` exact numbers; ``str`` a string; ``datetime.date`` a
DATE; ``bool`` a BOOLEAN. Anything else, or a value outside what a definition reproduces, raises
:class:`Untranslatable`: the caller then decides nothing from it.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Callable
from typing import Any

from rewriter.errors import Untranslatable

_NUMBERS = (int, decimal.Decimal)
# Arithmetic on row values is followed only while no Spark integer type of 32 bits or more could overflow
# (the caller does not follow TINYINT or SMALLINT arithmetic: ``rewriter/evaluate.py``).
MAX_INT = 2**31


def strict(fn: Callable[..., Any]) -> Callable[[list[Any], Any], Any]:
    """A function that is NULL when any argument is NULL, else ``fn(*values)``."""
    def evaluate(values: list[Any], node: Any) -> Any:
        return None if any(v is None for v in values) else fn(*values)
    return evaluate


def comparable(a: Any, b: Any) -> tuple[Any, Any]:
    """Two values Python compares as Spark does: numbers with numbers, strings with strings (code point
    order is UTF-8 byte order, Spark's binary collation), dates with dates; anything else would be coerced
    by Spark first, which is not reproduced."""
    if isinstance(a, bool) or isinstance(b, bool):
        raise Untranslatable("boolean comparison")
    if isinstance(a, _NUMBERS) and isinstance(b, _NUMBERS):
        return a, b
    if isinstance(a, str) and isinstance(b, str):
        return a, b
    if isinstance(a, datetime.date) and isinstance(b, datetime.date) and not isinstance(a, datetime.datetime) \
            and not isinstance(b, datetime.datetime):
        return a, b
    raise Untranslatable("comparison across types (Spark would coerce)")


def integer(v: Any) -> int:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    raise Untranslatable("expected an integer")


def string(v: Any) -> str:
    if isinstance(v, str):
        return v
    raise Untranslatable("expected a string")


def boolean(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    raise Untranslatable("expected a boolean")


def small(result: int) -> int:
    if abs(result) >= MAX_INT:
        raise Untranslatable("integer arithmetic that may overflow an int column")
    return result
