"""Aggregate and window functions: Spark's definitions (result types, and when the aggregate itself
raises: a SUM overflows its type under ANSI)."""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from rewriter.spark.coercion import BOOLEANS, NUMBERS, expects
from rewriter.spark.registry import Call, Function, register
from rewriter.spark.types import BIGINT, DOUBLE, INT, MAX_DECIMAL_PRECISION, widens
from stats.model import Kind


def _argument(call: Call) -> Any:
    return call.kinds[0] if call.kinds else None


def _sum_result(call: Call) -> Kind | None:
    k = call.kinds[0]
    if k is None or k.name not in NUMBERS:
        return None
    if k.name == "decimal":  # Spark: DECIMAL(p + 10, s), bounded by 38
        return Kind("decimal", precision=min(MAX_DECIMAL_PRECISION, k.precision + 10), scale=k.scale)
    return BIGINT if k.name == "int" else DOUBLE


def _sum_raises(call: Call) -> bool:
    """A SUM of integers is a BIGINT and overflows under ANSI, except of INT values over fewer than 2^32
    rows (``rewriter/raising.proven_kind`` narrows a column the statistics prove so); of decimals past 28
    digits it overflows DECIMAL(38)."""
    k = call.kinds[0]
    if not call.ansi:
        return False
    return k is None or k.name == "decimal" and k.precision > 28 or \
        k.name not in ("decimal", "float") and not (k.name == "int" and k.bits <= 32)


def _avg_result(call: Call) -> Kind | None:
    k = call.kinds[0]
    if k is None or k.name not in NUMBERS:
        return None
    if k.name == "decimal":  # Spark: DECIMAL(p + 4, s + 4), bounded by 38
        return Kind("decimal", precision=min(MAX_DECIMAL_PRECISION, k.precision + 4),
                    scale=min(MAX_DECIMAL_PRECISION, k.scale + 4))
    return DOUBLE


def _avg_raises(call: Call) -> bool:
    """AVG sums integers as doubles and decimals with 10 more digits."""
    k = call.kinds[0]
    return call.ansi and (k is None or k.name == "decimal" and k.precision > 28 or k.name not in NUMBERS)


def _offset_default(call: Call) -> bool:
    """lag/lead's default is cast to the value's type (with an overflow check under ANSI): only a default
    that widens to it cannot raise."""
    if not call.ansi:
        return False
    node = call.node
    if node.args.get("default") is None:
        return False
    value, default = call.kinds[0], call.kinds[-1]
    if default is not None and default.name == "void":
        return False
    return value is None or default is None or not widens(default, value)


register(
    Function(exp.Count, "count", ("this", "expressions"), lambda call: BIGINT, flags=frozenset({"big_int"})),
    Function(exp.Min, "min", ("this",), _argument),
    Function(exp.Max, "max", ("this",), _argument),
    Function(exp.Sum, "sum", ("this",), _sum_result, expects(NUMBERS), raises=_sum_raises),
    Function(exp.Avg, "avg", ("this",), _avg_result, expects(NUMBERS), raises=_avg_raises),
    *(Function(cls, name, ("this",), lambda call: DOUBLE, expects(NUMBERS))
      for cls, name in ((exp.Stddev, "stddev"), (exp.StddevSamp, "stddev_samp"), (exp.StddevPop, "stddev_pop"),
                        (exp.Variance, "variance"), (exp.VariancePop, "var_pop"))),
    Function(exp.Corr, "corr", ("this", "expression"), lambda call: DOUBLE, expects(NUMBERS)),
    Function(exp.ApproxDistinct, "approx_count_distinct", ("this",), lambda call: BIGINT),
    Function(exp.CountIf, "count_if", ("this",), lambda call: BIGINT, expects(BOOLEANS)),
    Function(exp.First, "first", ("this",), _argument),
    Function(exp.Last, "last", ("this",), _argument),
    Function(exp.RowNumber, "row_number", (), lambda call: INT),
    Function(exp.Rank, "rank", (), lambda call: INT),
    Function(exp.DenseRank, "dense_rank", (), lambda call: INT),
    Function(exp.Lag, "lag", ("this", "offset", "default"), _argument, raises=_offset_default),
    Function(exp.Lead, "lead", ("this", "offset", "default"), _argument, raises=_offset_default),
    Function(exp.Grouping, "grouping", ("expressions",), lambda call: Kind("int", bits=8)),
)
