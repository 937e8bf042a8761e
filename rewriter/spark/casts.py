"""CAST and TRY_CAST: Spark's definitions. sqlglot's Spark dialect reads ``CAST`` (and ``1L``, ``1BD``,
``x::int``) as a ``TryCast`` without ``safe``, ``TRY_CAST`` as one with ``safe``; a typed literal
(``DATE '2020-01-01'``) is a ``Cast``. ``JSONCast`` and any other subclass is opaque."""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from rewriter.errors import Untranslatable
from rewriter.spark.registry import Call, Function, register
from rewriter.spark.types import cast_cannot_fail, type_kind


def _target(call: Call) -> Any:
    return type_kind(call.node.args["to"])


def _cast_raises(call: Call) -> bool:
    """CAST raises under ANSI where it cannot represent the value (``CAST_INVALID_INPUT``, overflow); without
    ANSI it gives NULL or wraps."""
    return call.ansi and not cast_cannot_fail(call.kinds[0], call.node.args["to"])


def _cast_value(values: list[Any], node: exp.Expression) -> Any:
    """The cast of a Python value, where ``rewriter/literals.py`` reproduces it exactly (its NULL where the
    cast fails is not modelled: then nothing is decided)."""
    from rewriter.literals import cast_value

    if values[0] is None:
        return None
    value = cast_value(values[0], node.args["to"])
    if value is None:
        raise Untranslatable(f"cast to {node.args['to'].sql('spark')}")
    return value


def _is_cast(node: exp.Expression) -> bool:
    return not node.args.get("safe")


register(
    Function(exp.TryCast, "cast", ("this",), _target, raises=_cast_raises, evaluate=_cast_value,
             flags=frozenset({"to"}), when=_is_cast),
    Function(exp.TryCast, "try_cast", ("this",), _target, evaluate=_cast_value, flags=frozenset({"to", "safe"}),
             when=lambda node: bool(node.args.get("safe"))),
    Function(exp.Cast, "cast", ("this",), _target, raises=_cast_raises, evaluate=_cast_value,
             flags=frozenset({"to"}), when=_is_cast),
)
