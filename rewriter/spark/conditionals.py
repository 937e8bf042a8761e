"""COALESCE, IF, NULLIF, GREATEST, LEAST: Spark's definitions (CASE is read by ``rewriter/spark/model.py``,
which follows which branch a row takes)."""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from rewriter.spark.coercion import BOOLEANS, expects, same_type
from rewriter.spark.registry import Call, Function, register
from rewriter.spark.types import common_kind


def _common(first: int = 0) -> Any:
    def result(call: Call) -> Any:
        kinds = [k for k in call.kinds[first:] if k is None or k.name != "void"]
        return common_kind(kinds)
    return result


def _if_coerce(call: Call) -> bool:
    return expects(BOOLEANS)(Call(call.node, call.kinds[:1], call.ansi)) or same_type(1)(call)


register(
    # coalesce, nvl and ifnull are one function. Not evaluated: its value is of the arguments' common type
    # (coalesce('-0', CAST(NULL AS INT)) is 0, coalesce(date, timestamp) a timestamp), which Python values
    # do not carry.
    Function(exp.Coalesce, "coalesce", ("this", "expressions"), _common(), same_type(),
             flags=frozenset({"is_nvl", "is_null"})),
    Function(exp.If, "if", ("this", "true", "false"), _common(1), _if_coerce),
    Function(exp.Nullif, "nullif", ("this", "expression"), lambda call: call.kinds[0], same_type()),
    Function(exp.Greatest, "greatest", ("this", "expressions"), _common(), same_type(),
             flags=frozenset({"ignore_nulls"})),
    Function(exp.Least, "least", ("this", "expressions"), _common(), same_type(), flags=frozenset({"ignore_nulls"})),
)

