"""What Spark makes of an expression tree: its result type, and whether evaluating it on some row may raise
(ARCHITECTURE.md §3.6). Every function is asked of the registry (``rewriter/spark/registry.py``) by its
exact class; this module only walks the tree and knows the syntax that is not a function: columns,
literals, parentheses, CASE (which evaluates a branch only where its condition holds), subqueries.

:func:`can_raise` is conservative: True unless every part of the expression is known not to raise with
the argument types at hand, the implicit casts Spark puts on them included. A node without a definition
may raise under any setting (a UDF, ``raise_error``, a function nobody modelled).
"""

from __future__ import annotations

import decimal
from collections.abc import Callable

from sqlglot import exp

from rewriter.literals import fold, is_constant, value_kind
from rewriter.spark.coercion import comparison, same_type
from rewriter.spark.registry import Call, definition
from rewriter.spark.types import BOOLEAN, STRING, VOID, common_kind, number_literal_kind
from stats.model import Kind

KindOf = Callable[[exp.Column], "Kind | None"]

# Syntax that evaluates nothing of its own: it raises only through its children.
_TRANSPARENT = (exp.Paren, exp.Alias, exp.Distinct, exp.Tuple, exp.Window, exp.WindowSpec, exp.Order, exp.Ordered,
                exp.Interval, exp.PartitionedByProperty)
_INERT = (exp.Column, exp.Literal, exp.Null, exp.Boolean, exp.Var, exp.Star, exp.Identifier, exp.DataType,
          exp.DataTypeParam)


def can_raise(node: exp.Expression, kind_of: KindOf, ansi: bool) -> bool:
    """Whether evaluating ``node`` on some row may raise under the session's ANSI setting."""
    return _Model(kind_of, ansi).raises(node)


def why_it_may_raise(node: exp.Expression, kind_of: KindOf, ansi: bool) -> str | None:
    """Why evaluating ``node`` may raise (the first part found: a function without a definition, an
    implicit cast, the function's own error), or None where it cannot."""
    m = _Model(kind_of, ansi)
    if not m.raises(node):
        return None
    return m.reason or "it may"


def result_kind(node: exp.Expression, kind_of: KindOf) -> Kind | None:
    """Spark's type of ``node``'s value (``kind_of`` gives its columns'), None where unknown."""
    return _Model(kind_of, True).kind(node)


class _Model:
    def __init__(self, kind_of: KindOf, ansi: bool) -> None:
        self.kind_of = kind_of
        self.ansi = ansi
        self.proven_nonzero: list[exp.Expression] = []  # divisors a CASE branch's condition proves non-zero
        self.reason: str | None = None  # why the last "may raise" was said, for the decision record
        # Per node: its type, and whether it folds to a value. Without them every node's question is asked again
        # of each of its ancestors, which grows with the square of an OR chain's length. Keyed by identity, with
        # the node kept: a node a definition builds for the question (an argument it derives) may be collected
        # once asked, and its id given to another. Written out in each method rather than through one helper:
        # a helper's frames per level of recursion made a 300-term OR chain exceed Python's recursion limit.
        self._kinds: dict[int, tuple[exp.Expression | None, Kind | None]] = {}
        self._constants: dict[int, tuple[exp.Expression, bool]] = {}
        self._columnless: dict[int, tuple[exp.Expression, bool]] = {}

    def constant(self, node: exp.Expression) -> bool:
        """Whether ``node`` folds to a value (``rewriter/literals.py``); a node over a column never does."""
        hit = self._constants.get(id(node))
        if hit is None or hit[0] is not node:
            hit = (node, self._no_column(node) and is_constant(node))
            self._constants[id(node)] = hit
        return hit[1]

    def _no_column(self, node: exp.Expression) -> bool:
        hit = self._columnless.get(id(node))
        if hit is None or hit[0] is not node:
            hit = (node, type(node) is not exp.Column and all(self._no_column(c) for c in node.iter_expressions()))
            self._columnless[id(node)] = hit
        return hit[1]

    # -- may it raise ------------------------------------------------------------------------------------

    def raises(self, node: exp.Expression) -> bool:
        t = type(node)
        if t in (exp.Exists, exp.Subquery, exp.Select):
            # Evaluated on its own rows: an uncorrelated subquery once per statement, whatever files are read
            # around it; Spark refuses a correlated scalar subquery that is not aggregated at analysis.
            return False
        if t is exp.In and node.args.get("query") is not None:
            if self._in_subquery(node):
                self.reason = "IN (subquery): Spark's cast comparing a string with another type may fail"
                return True
            return self.raises(node.this)
        if t is exp.Case:
            return self._case(node)
        if t in _INERT:
            return False
        if self.constant(node):
            return False  # folds to a value (rewriter/literals.py): the same on every row, and no error
        if t in _TRANSPARENT:
            return any(self.raises(c) for c in node.iter_expressions())
        fn = definition(node)
        if fn is None:
            # unknown: a UDF, raise_error, assert_true, a function the registry does not define
            self.reason = f"no definition of {_name(node)} in rewriter/spark/"
            return True
        args = fn.arguments(node)
        if any(self.raises(a) for a in args):
            return True  # (the arguments first: the record names the innermost cause)
        call = Call(node, [self.kind(a) for a in args], self.ansi, args, self._nonzero)
        if fn.coerce(call):
            self.reason = f"{fn.spark}: Spark's implicit cast of an argument may fail"
            return True
        if fn.raises(call):
            self.reason = f"{fn.spark} may raise on its arguments' values"
            return True
        return False

    def _in_subquery(self, node: exp.In) -> bool:
        """``x IN (SELECT y ...)`` compares x with y: a string on one side and another type on the other is
        cast (ANSI: may raise)."""
        if not self.ansi:
            return False
        other = self._single_column(node.args["query"])
        left = self.kind(node.this)
        return left is None or other is None or left.name != other.name and "string" in (left.name, other.name)

    def _case(self, node: exp.Case) -> bool:
        """CASE evaluates a branch only when its condition holds: ``CASE WHEN x > 0 THEN y / x`` and
        ``CASE x WHEN 0 THEN ... ELSE y / x END`` divide by a non-zero x. Its values are brought to one
        type, and a subject is compared with each WHEN value: both may cast a string (ANSI)."""
        subject = node.this
        ifs = node.args.get("ifs") or []
        default = node.args.get("default")
        values = [b.args.get("true") for b in ifs] + ([default] if default is not None else [])
        if self.ansi and same_type()(Call(node, [self.kind(v) for v in values if v is not None], True)):
            self.reason = "CASE: Spark's cast of its values to one type may fail"
            return True
        if subject is not None:
            if self.raises(subject):
                return True
            for branch in ifs:
                operands = [subject, branch.this]
                if comparison(Call(node, [self.kind(o) for o in operands], self.ansi, operands)):
                    self.reason = "CASE: Spark's cast comparing its subject with a WHEN value may fail"
                    return True
        zero_tested = False
        for branch in ifs:
            condition, value = branch.this, branch.args.get("true")
            if self.raises(condition):
                return True
            proven = [subject] if subject is not None and _is_zero(condition) else _nonzero_by(condition)
            zero_tested |= subject is not None and _is_zero(condition)
            self.proven_nonzero.extend(proven)
            try:
                if value is not None and self.raises(value):
                    return True
            finally:
                del self.proven_nonzero[len(self.proven_nonzero) - len(proven):]
        proven = [subject] if zero_tested else []
        self.proven_nonzero.extend(proven)
        try:
            return default is not None and self.raises(default)
        finally:
            del self.proven_nonzero[len(self.proven_nonzero) - len(proven):]

    def _single_column(self, query: exp.Expression) -> Kind | None:
        """The type of a subquery's one column (of a set operation's first branch: the branches' types are
        the same or Spark brings them to one, which is not modelled, so all must agree)."""
        while type(query) is exp.Subquery:
            query = query.this
        if isinstance(query, exp.SetOperation):
            kinds = {self._single_column(query.this), self._single_column(query.expression)}
            return kinds.pop() if len(kinds) == 1 else None
        if type(query) is not exp.Select or len(query.expressions) != 1:
            return None
        return self.kind(query.expressions[0].unalias())

    def _nonzero(self, divisor: exp.Expression) -> bool:
        while type(divisor) is exp.Paren:
            divisor = divisor.this
        if any(divisor == e for e in self.proven_nonzero):
            return True
        if not self.constant(divisor):
            return False
        value = fold(divisor)
        return isinstance(value, (int, float, decimal.Decimal)) and not isinstance(value, bool) and value != 0

    # -- its type ------------------------------------------------------------------------------------------

    def kind(self, node: exp.Expression | None) -> Kind | None:
        hit = self._kinds.get(id(node))
        if hit is None or hit[0] is not node:
            hit = (node, self._kind(node))
            self._kinds[id(node)] = hit
        return hit[1]

    def _kind(self, node: exp.Expression | None) -> Kind | None:
        t = type(node)
        if t in (exp.Paren, exp.Alias, exp.Window):
            return self.kind(node.this)  # type: ignore[union-attr]
        if t is exp.Column:
            return self.kind_of(node)  # type: ignore[arg-type]
        if t is exp.Literal:
            return STRING if node.is_string else number_literal_kind(node.this)  # type: ignore[union-attr]
        if t is exp.Neg and type(node.this) is exp.Literal and not node.this.is_string:  # type: ignore[union-attr]
            # Spark reads -9223372036854775808 as one literal (a BIGINT), not as the negation of a DECIMAL
            return number_literal_kind("-" + node.this.this)  # type: ignore[union-attr]
        if t is exp.Null:
            return VOID
        if t is exp.Boolean or t is exp.Exists or t is exp.In and node.args.get("query") is not None:
            return BOOLEAN
        if t is exp.Distinct:
            expressions = node.expressions  # type: ignore[union-attr]
            return self.kind(expressions[0]) if len(expressions) == 1 else None
        if t is exp.Subquery:
            return self._single_column(node)
        if t is exp.Case:
            branches = [b.args.get("true") for b in node.args.get("ifs") or []] + \
                [node.args.get("default")]  # type: ignore[union-attr]
            kinds = [self.kind(b) for b in branches if b is not None and type(b) is not exp.Null]
            return common_kind(kinds)
        if node is None:
            return None
        fn = definition(node)
        if fn is not None:
            args = fn.arguments(node)
            kind = fn.result(Call(node, [self.kind(a) for a in args], True, args, self._nonzero))
            if kind is not None:
                return kind
        if self.constant(node):  # folds to a value (DATE'2021-03-13' + INTERVAL 1 DAY): the value's type
            return value_kind(fold(node))
        return None


def _name(node: exp.Expression) -> str:
    if type(node) is exp.Anonymous:
        return f"the function {node.name}"
    return f"{type(node).__name__} ({node.sql('spark')[:40]})"


def _is_zero(node: exp.Expression) -> bool:
    return is_constant(node) and fold(node) == 0


def _nonzero_by(condition: exp.Expression) -> list[exp.Expression]:
    """Expressions a CASE condition proves non-zero: ``x > c`` (c >= 0), ``x < c`` (c <= 0), ``x <> 0``,
    and each conjunct of an AND."""
    while type(condition) is exp.Paren:
        condition = condition.this
    if type(condition) is exp.And:
        return _nonzero_by(condition.this) + _nonzero_by(condition.expression)
    flip = {exp.GT: exp.LT, exp.LT: exp.GT, exp.NEQ: exp.NEQ, exp.GTE: exp.LTE, exp.LTE: exp.GTE}
    kind = type(condition)
    if kind not in flip:
        return []
    left, right = condition.this, condition.expression
    if is_constant(left) and not is_constant(right):
        left, right, kind = right, left, flip[kind]
    if not is_constant(right):
        return []
    c = fold(right)
    if not isinstance(c, (int, float, decimal.Decimal)) or isinstance(c, bool):
        return []
    holds = kind is exp.NEQ and c == 0 or kind is exp.GT and c >= 0 or kind is exp.LT and c <= 0 or \
        kind is exp.GTE and c > 0 or kind is exp.LTE and c < 0
    return [left] if holds else []
