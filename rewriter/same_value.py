"""Same-value files (seed 002, §5.3.11): a clause with no falsifiable expression can still be decided on a
file whose columns each hold a single value.

If every row of a file has ``x = v`` (min = max = v, no NULLs), a deterministic clause ``P(x)`` has the
same value on every row, ``P(v)``; when that is FALSE or NULL no row of the file qualifies. This module
evaluates ``P(v)`` in Python for the small set of expressions whose Spark semantics it reproduces exactly
(comparisons, boolean logic, integer arithmetic within int range, and the string functions below); anything else raises
:class:`Untranslatable`, and the file MIGHT_MATCH. Files with NULLs in a clause's columns are never decided
here.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Mapping
from typing import Any

from sqlglot import exp

from rewriter.errors import Untranslatable
from rewriter.literals import fold

_COMPARE = {exp.EQ: lambda a, b: a == b, exp.NEQ: lambda a, b: a != b, exp.LT: lambda a, b: a < b,
            exp.LTE: lambda a, b: a <= b, exp.GT: lambda a, b: a > b, exp.GTE: lambda a, b: a >= b}
_NUMBERS = (int, decimal.Decimal)
# Arithmetic is only followed while no Spark integer type could overflow (INT wraps at 2^31 with ANSI off).
MAX_INT = 2**31


def supported(node: exp.Expression) -> bool:
    """Whether every part of ``node`` is something :func:`evaluate` reproduces exactly."""
    allowed = (exp.Column, exp.Identifier, exp.Literal, exp.Paren, exp.Neg, exp.Not, exp.And, exp.Or, exp.Between,
               exp.In, exp.Is, exp.Null, exp.Boolean, exp.Add, exp.Sub, exp.Mul, exp.Mod, exp.Substring, exp.Upper,
               exp.Lower, exp.Length, exp.Concat, exp.DataType, exp.Cast, exp.TryCast, *_COMPARE)
    return all(isinstance(n, allowed) for n in node.walk()) and not node.args.get("query")


def evaluate(node: exp.Expression, env: Mapping[str, Any], column_of) -> Any:
    """The value of ``node`` with columns bound by ``env`` (None is SQL NULL)."""
    if isinstance(node, exp.Column):
        name = column_of(node)
        if name is None or name not in env:
            raise Untranslatable("column outside the file's constant columns")
        return env[name]
    if isinstance(node, exp.Paren):
        return evaluate(node.this, env, column_of)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Boolean):
        return node.this
    if isinstance(node, exp.Literal) or (isinstance(node, (exp.Cast, exp.TryCast)) and not node.find(exp.Column)):
        return fold(node)
    if isinstance(node, exp.Not):
        v = evaluate(node.this, env, column_of)
        return None if v is None else not _bool(v)
    if isinstance(node, (exp.And, exp.Or)):
        values = [evaluate(p, env, column_of) for p in node.flatten()]
        if isinstance(node, exp.And):
            return False if any(v is False for v in values) else (None if any(v is None for v in values) else True)
        return True if any(v is True for v in values) else (None if any(v is None for v in values) else False)
    if type(node) in _COMPARE:
        a, b = evaluate(node.this, env, column_of), evaluate(node.expression, env, column_of)
        return None if a is None or b is None else _COMPARE[type(node)](*_comparable(a, b))
    if isinstance(node, exp.Between):
        v = evaluate(node.this, env, column_of)
        lo, hi = evaluate(node.args["low"], env, column_of), evaluate(node.args["high"], env, column_of)
        if v is None or lo is None or hi is None:
            return None
        return _comparable(lo, v)[0] <= _comparable(lo, v)[1] and _comparable(v, hi)[0] <= _comparable(v, hi)[1]
    if isinstance(node, exp.In):
        v = evaluate(node.this, env, column_of)
        items = [evaluate(i, env, column_of) for i in node.expressions]
        if v is None:
            return None
        if any(i is not None and _comparable(v, i)[0] == _comparable(v, i)[1] for i in items):
            return True
        return None if any(i is None for i in items) else False
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        return evaluate(node.this, env, column_of) is None
    if isinstance(node, exp.Neg):
        v = evaluate(node.this, env, column_of)
        if v is not None and abs(_integer(v)) >= MAX_INT:
            raise Untranslatable("negation that may overflow (MIN_VALUE)")
        return None if v is None else -_integer(v)
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Mod)):
        a, b = evaluate(node.this, env, column_of), evaluate(node.expression, env, column_of)
        if a is None or b is None:
            return None
        a, b = _integer(a), _integer(b)
        if isinstance(node, exp.Mod):
            if b == 0:
                raise Untranslatable("% by zero")
            result = abs(a) % abs(b) * (1 if a >= 0 else -1)  # Java: the sign of the dividend
        else:
            result = a + b if isinstance(node, exp.Add) else (a - b if isinstance(node, exp.Sub) else a * b)
        if abs(result) >= MAX_INT:
            raise Untranslatable("integer arithmetic that may overflow an int column")
        return result
    if isinstance(node, exp.Substring):
        s = evaluate(node.this, env, column_of)
        pos = evaluate(node.args["start"], env, column_of) if node.args.get("start") else 1
        length = evaluate(node.args["length"], env, column_of) if node.args.get("length") else None
        if s is None or pos is None or (node.args.get("length") and length is None):
            return None
        return _substring(_string(s), _integer(pos), None if length is None else _integer(length))
    if isinstance(node, (exp.Upper, exp.Lower)):
        s = evaluate(node.this, env, column_of)
        if s is None:
            return None
        if not _string(s).isascii():
            raise Untranslatable("case mapping of non-ASCII text depends on the JVM's locale")
        return s.upper() if isinstance(node, exp.Upper) else s.lower()
    if isinstance(node, exp.Length):
        s = evaluate(node.this, env, column_of)
        return None if s is None else len(_string(s))
    if isinstance(node, exp.Concat):
        parts = [evaluate(p, env, column_of) for p in node.expressions]
        return None if any(p is None for p in parts) else "".join(_string(p) for p in parts)
    raise Untranslatable(f"cannot evaluate {type(node).__name__}")


def _substring(s: str, pos: int, length: int | None) -> str:
    """Spark's substring(str, pos, len) (UTF8String.substringSQL), on code points."""
    n = len(s)
    start = pos - 1 if pos > 0 else (n + pos if pos < 0 else 0)
    end = n if length is None else start + length
    start = max(start, 0)
    return "" if start >= end else s[start:min(end, n)]


def _comparable(a: Any, b: Any) -> tuple[Any, Any]:
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


def _integer(v: Any) -> int:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    raise Untranslatable("expected an integer")


def _string(v: Any) -> str:
    if isinstance(v, str):
        return v
    raise Untranslatable("expected a string")


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    raise Untranslatable("expected a boolean")
