"""The predicate language the evaluator understands: single-table clauses over (possibly transformed)
columns, combined with AND and OR. Negation never appears: it is pushed down while translating
(``rewriter/falsify.py``), as BigQuery's Table 4 does (seed 002, §5.3.9).

Every literal is already converted into the statistics' domain of the term it is compared with
(``rewriter/domain.py``) and is an *interval* ``[lo, hi]`` of that domain: exact literals have ``lo == hi``;
a literal Spark may read in several ways (a timestamp without a zone, read in an unknown session zone)
covers all of them. Comparing against the whole interval keeps every clause sound.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Union

# Comparison operators, and the operator that holds after swapping the operands.
OPS = ("=", "!=", "<", "<=", ">", ">=")
SWAP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
NEGATE = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


@dataclasses.dataclass(frozen=True)
class Fn:
    """A monotonically non-decreasing function applied to statistics bounds (seed 002, §5.3.6).
    ``name`` selects the implementation in ``rewriter/monotone.py``; ``arg`` is its constant parameter."""

    name: str
    arg: Any = None
    # add/mul: the width Spark types the integer constant with (INT or BIGINT literal, 1S, CAST(... AS
    # SMALLINT)); 0 when not known from the text, then the literal's value decides (``literal_bits``).
    bits: int = 0


@dataclasses.dataclass(frozen=True)
class Term:
    """A column, with monotone functions applied innermost first, e.g. year(date_trunc('MONTH', d))."""

    column: str
    fns: tuple[Fn, ...] = ()

    def sql(self) -> str:
        text = self.column
        for fn in self.fns:
            text = f"{fn.name}({text}{', ' + repr(fn.arg) if fn.arg is not None else ''})"
        return text


@dataclasses.dataclass(frozen=True)
class Cmp:
    """``term op value`` with value in ``[lo, hi]``."""

    term: Term
    op: str
    lo: Any
    hi: Any


@dataclasses.dataclass(frozen=True)
class InSet:
    """``term IN (values)``: exact values, sorted and distinct."""

    term: Term
    values: tuple[Any, ...]


@dataclasses.dataclass(frozen=True)
class NullCheck:
    column: str
    is_null: bool


@dataclasses.dataclass(frozen=True)
class ColumnCmp:
    """``left op right``, two columns of the same table with the same domain."""

    left: str
    op: str
    right: str


@dataclasses.dataclass(frozen=True)
class SameValue:
    """A clause with no falsifiable expression, decided on files whose ``columns`` hold one value each
    (seed 002, §5.3.11; ``rewriter/spark/evaluate.py``). ``node`` is the SQL clause; its columns of this table
    are those qualified with ``alias``."""

    columns: tuple[str, ...]
    node: Any
    alias: str


@dataclasses.dataclass(frozen=True)
class And:
    items: tuple[Pred, ...]


@dataclasses.dataclass(frozen=True)
class Or:
    items: tuple[Pred, ...]


@dataclasses.dataclass(frozen=True)
class Unknown:
    """No falsifiable expression: every file MIGHT_MATCH (seed 002, §5.3.1). ``why`` goes to the decision record."""

    why: str


@dataclasses.dataclass(frozen=True)
class Never:
    """A clause no row can satisfy (e.g. ``x = NULL``, or an empty IN list after typing)."""

    why: str


Pred = Union[Cmp, InSet, NullCheck, ColumnCmp, SameValue, And, Or, Unknown, Never]


def columns_of(pred: Pred) -> set[str]:
    if isinstance(pred, (Cmp, InSet)):
        return {pred.term.column}
    if isinstance(pred, NullCheck):
        return {pred.column}
    if isinstance(pred, ColumnCmp):
        return {pred.left, pred.right}
    if isinstance(pred, SameValue):
        return set(pred.columns)
    if isinstance(pred, (And, Or)):
        return set().union(*(columns_of(p) for p in pred.items))
    return set()
