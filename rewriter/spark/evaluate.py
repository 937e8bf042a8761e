"""A clause's value on one row, from Python values of its columns (seed 002, §5.3.11; exact keys).

Same-value files: if every row of a file has ``x = v`` (min = max = v, no NULLs), a deterministic clause
``P(x)`` has the same value on every row, ``P(v)``; when that is FALSE or NULL no row of the file
qualifies. Files with NULLs in a clause's columns are never decided here (``rewriter/evaluate.py``).

Every function is evaluated by its registered definition (``rewriter/spark/registry.py``), found by the
node's exact class; a node without a definition, or whose definition does not evaluate, raises
:class:`Untranslatable`, and the caller decides nothing from the clause.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sqlglot import exp

from rewriter.errors import Untranslatable
from rewriter.literals import fold
from rewriter.spark import model
from rewriter.spark.registry import Function, definition
from rewriter.spark.types import fits
from stats.model import Kind

ColumnOf = Callable[[exp.Column], "str | None"]


def supported(node: exp.Expression) -> bool:
    """Whether every part of ``node`` is something :func:`evaluate` reproduces exactly."""
    t = type(node)
    if t in (exp.Column, exp.Null, exp.Boolean, exp.Literal):
        return True
    if t is exp.Paren:
        return supported(node.this)
    fn = definition(node)
    if fn is None or fn.evaluate is None:
        return False
    return all(supported(a) for a in fn.arguments(node))


class RowEvaluator:
    """Evaluates clauses on rows of one table: columns named by ``column_of``, typed by ``kinds``. The
    Spark type of each node depends on the kinds alone, so it is computed once per node, not once per row
    (same-value files and exact keys evaluate a clause on up to a million distinct rows)."""

    def __init__(self, column_of: ColumnOf, kinds: Mapping[str, Kind]) -> None:
        self.column_of = column_of
        self.kinds = kinds
        self._types: dict[int, Kind | None] = {}  # id(node) -> its Spark type
        self._functions: dict[int, Function | None] = {}  # id(node) -> its definition

    def value(self, node: exp.Expression, env: Mapping[str, Any]) -> Any:
        """The value of ``node`` with columns bound by ``env`` (None is SQL NULL). An integer result outside
        Spark's type of the node (a TINYINT sum past 127, which Spark wraps or raises on) is not
        reproduced: Untranslatable."""
        t = type(node)
        if t is exp.Column:
            name = self.column_of(node)  # type: ignore[arg-type]
            if name is None or name not in env:
                raise Untranslatable("column outside the file's constant columns")
            return env[name]
        if t is exp.Paren:
            return self.value(node.this, env)
        if t is exp.Null:
            return None
        if t is exp.Boolean:
            return node.this
        if t is exp.Literal:
            return fold(node)
        key = id(node)
        if key not in self._functions:
            self._functions[key] = definition(node)
        fn = self._functions[key]
        if fn is None or fn.evaluate is None:
            raise Untranslatable(f"cannot evaluate {t.__name__}")
        value = fn.evaluate([self.value(a, env) for a in fn.arguments(node)], node)
        if isinstance(value, int) and not isinstance(value, bool) and not fits(value, self._type(node)):
            raise Untranslatable("an integer result outside its Spark type")
        return value

    def _type(self, node: exp.Expression) -> Kind | None:
        key = id(node)
        if key not in self._types:
            self._types[key] = model.result_kind(node, lambda c: self.kinds.get(self.column_of(c) or ""))
        return self._types[key]


def evaluate(node: exp.Expression, env: Mapping[str, Any], column_of: ColumnOf, kinds: Mapping[str, Kind]) -> Any:
    """The value of ``node`` on one row (:class:`RowEvaluator`, for a single row)."""
    return RowEvaluator(column_of, kinds).value(node, env)
