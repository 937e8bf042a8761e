"""Boolean logic, comparisons, BETWEEN, IN, IS NULL, LIKE and the string tests: Spark's definitions."""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from rewriter.errors import Untranslatable
from rewriter.spark.coercion import ANY, BOOLEANS, STRINGS, comparison, expects
from rewriter.spark.registry import Call, Function, register
from rewriter.spark.types import BOOLEAN
from rewriter.spark.values import boolean, comparable, strict


def _boolean(call: Call) -> Any:
    return BOOLEAN


def _and(values: list[Any], node: exp.Expression) -> Any:
    if any(v is False for v in values):
        return False
    if any(v is None for v in values):
        return None
    return all(boolean(v) for v in values)


def _or(values: list[Any], node: exp.Expression) -> Any:
    if any(v is True for v in values):
        return True
    if any(v is None for v in values):
        return None
    return any(boolean(v) for v in values)


def _compare(op: Any) -> Any:
    return strict(lambda a, b: op(*comparable(a, b)))


def _between(values: list[Any], node: exp.Expression) -> Any:
    """``lo <= v AND v <= hi``, three-valued: ``'a' BETWEEN 'b' AND NULL`` is FALSE, not NULL (under NOT
    that is the difference between a row that qualifies and one that does not)."""
    v, lo, hi = values
    low = None if v is None or lo is None else (lambda p: p[0] <= p[1])(comparable(lo, v))
    high = None if v is None or hi is None else (lambda p: p[0] <= p[1])(comparable(v, hi))
    return _and([low, high], node)


def _in(values: list[Any], node: exp.Expression) -> Any:
    v, items = values[0], values[1:]
    if v is None:
        return None
    if any(i is not None and (lambda p: p[0] == p[1])(comparable(v, i)) for i in items):
        return True
    return None if any(i is None for i in items) else False


def _is(values: list[Any], node: exp.Expression) -> Any:
    if type(node.expression) is not exp.Null:
        raise Untranslatable("IS TRUE / IS FALSE")
    return values[0] is None


def _like_pattern_valid(call: Call) -> bool:
    """Spark raises on a LIKE pattern whose escape character (backslash) is not followed by ``_``, ``%`` or
    itself (``StringUtils.escapeLikeRegex``), for every row it compares; a pattern that is not a literal
    may be such a pattern."""
    pattern = call.node.expression
    if type(pattern) is not exp.Literal or not pattern.is_string:
        return True
    text, i = pattern.this, 0
    while i < len(text):
        if text[i] == "\\":
            if i + 1 >= len(text) or text[i + 1] not in "_%\\":
                return True
            i += 2
        else:
            i += 1
    return False


def _not_in_subquery(node: exp.Expression) -> bool:
    return not node.args.get("query") and not node.args.get("unnest") and not node.args.get("field")


register(
    Function(exp.And, "and", ("this", "expression"), _boolean, expects(BOOLEANS), evaluate=_and),
    Function(exp.Or, "or", ("this", "expression"), _boolean, expects(BOOLEANS), evaluate=_or),
    Function(exp.Not, "not", ("this",), _boolean, expects(BOOLEANS),
             evaluate=strict(lambda v: not boolean(v))),
    Function(exp.EQ, "=", ("this", "expression"), _boolean, comparison, evaluate=_compare(lambda a, b: a == b)),
    Function(exp.NEQ, "<>", ("this", "expression"), _boolean, comparison, evaluate=_compare(lambda a, b: a != b)),
    Function(exp.LT, "<", ("this", "expression"), _boolean, comparison, evaluate=_compare(lambda a, b: a < b)),
    Function(exp.LTE, "<=", ("this", "expression"), _boolean, comparison, evaluate=_compare(lambda a, b: a <= b)),
    Function(exp.GT, ">", ("this", "expression"), _boolean, comparison, evaluate=_compare(lambda a, b: a > b)),
    Function(exp.GTE, ">=", ("this", "expression"), _boolean, comparison, evaluate=_compare(lambda a, b: a >= b)),
    Function(exp.NullSafeEQ, "<=>", ("this", "expression"), _boolean, comparison),
    Function(exp.NullSafeNEQ, "not <=>", ("this", "expression"), _boolean, comparison),
    Function(exp.Between, "between", ("this", "low", "high"), _boolean, comparison, evaluate=_between),
    Function(exp.In, "in", ("this", "expressions"), _boolean, comparison, evaluate=_in, when=_not_in_subquery),
    Function(exp.Is, "is", ("this", "expression"), _boolean, evaluate=_is),
    Function(exp.Like, "like", ("this", "expression"), _boolean, expects(STRINGS), raises=_like_pattern_valid,
             flags=frozenset({"negate"})),
    Function(exp.ILike, "ilike", ("this", "expression"), _boolean, expects(STRINGS), raises=_like_pattern_valid,
             flags=frozenset({"negate"})),
    Function(exp.StartsWith, "startswith", ("this", "expression"), _boolean, expects(STRINGS)),
    Function(exp.EndsWith, "endswith", ("this", "expression"), _boolean, expects(STRINGS)),
    Function(exp.Contains, "contains", ("this", "expression"), _boolean, expects(STRINGS)),
    Function(exp.Anonymous, "isnull", ("expressions",), _boolean, expects(ANY), anonymous="isnull"),
    Function(exp.Anonymous, "isnotnull", ("expressions",), _boolean, expects(ANY), anonymous="isnotnull"),
)
