"""What Spark does: the one owner of Spark's semantics in the rewriter (ARCHITECTURE.md §3.6, §3.7, §8).

- ``types``: literal types, integer widths, decimal precision and scale, numeric widening, which casts
  cannot fail, the epoch.
- ``registry``: one definition per Spark function, found by the node's exact sqlglot class: its implicit
  casts, result type, errors and (where exact) its value. The families register themselves:
  ``predicates``, ``strings``, ``numbers``, ``conditionals``, ``casts``, ``datetimes``, ``aggregates``.
- ``coercion``: Spark's implicit casts on arguments and when they may raise.
- ``model``: a tree's result type and whether it may raise, asking the registry node by node.
- ``evaluate``: a tree's value on a row's Python values, asking the registry node by node.

Anything not registered is opaque: nothing is folded, typed, bounded or evaluated through it, and it may
raise. ``tests/test_spark_conformance.py`` compares every definition with Spark.
"""

from rewriter.spark import aggregates, casts, conditionals, datetimes, numbers, predicates, strings  # noqa: F401
from rewriter.spark.registry import Function, definition, definitions  # noqa: F401
