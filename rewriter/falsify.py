"""Translate a SQL predicate on one table into the evaluator's predicate language.

This is the rule set of BigQuery's falsifiable expressions (seed 002, §5.3): conjunctions and disjunctions
(§5.3.2-5.3.3), comparisons with constants (§5.3.4, Table 1), BETWEEN and IN (§5.3.5, Table 3), monotonic
functions (§5.3.6) and conditionally monotonic ones (§5.3.7, the guard lives in ``rewriter/monotone.py``),
negation pushed down first (§5.3.9, Table 4), LIKE-prefix and starts-with as ranges (Table 6), and the
trivial rule (§5.3.1): whatever is not understood becomes :class:`Unknown` for that clause only.

Why it is sound: each rule maps a clause P to a predicate F over file statistics such that a file on which
F says CANNOT_MATCH holds no row where P is TRUE. Negation is pushed through with SQL's three-valued logic
(NOT (x < c) is x >= c for every non-NULL x, and both are NULL for NULL x), so no rule is ever applied to a
negated clause it was not proven for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sqlglot import exp

from rewriter.domain import literal_interval
from stats.model import Kind
from rewriter.errors import Untranslatable
from rewriter.literals import fold
from rewriter.spark import evaluate as row_value
from rewriter.monotone import kind_after, peel_all
from rewriter.predicate import (NEGATE, SWAP, And, Cmp, ColumnCmp, InSet, Never, NullCheck, Or, Pred, SameValue,
                                Term, Unknown)

# Longest IN / NOT IN list turned into per-value clauses (NOT IN becomes a conjunction of <>).
MAX_NOT_IN = 64

_COMPARISONS: dict[type, str] = {exp.EQ: "=", exp.NEQ: "!=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}

ColumnOf = Callable[[exp.Column], "str | None"]


class Translator:
    """Translates predicates for one table reference.

    ``column_of`` maps a column node to the column name of this table (None if it belongs elsewhere);
    ``kinds`` gives the statistics kind of each column that has statistics.
    """

    def __init__(self, column_of: ColumnOf, kinds: Mapping[str, Kind], session_time_zone: str | None,
                 alias: str | None = None, ansi: bool = True) -> None:
        self.column_of = column_of
        self.alias = alias
        self.kinds = kinds
        self.session_time_zone = session_time_zone
        self.ansi = ansi

    def translate(self, node: exp.Expression, negate: bool = False) -> Pred:
        try:
            return self._translate(node, negate)
        except Untranslatable as e:
            return self._same_value(node, negate) or Unknown(str(e))

    def _same_value(self, node: exp.Expression, negate: bool) -> SameValue | None:
        """The §5.3.11 fallback, for clauses over this table's columns only that we can evaluate exactly."""
        columns = [self.column_of(c) for c in node.find_all(exp.Column)]
        if self.alias is None or not columns or any(c is None or c not in self.kinds for c in columns):
            return None
        if not row_value.supported(node):
            return None
        return SameValue(tuple(sorted(set(columns))), exp.not_(node.copy()) if negate else node, self.alias)

    def _translate(self, node: exp.Expression, negate: bool) -> Pred:
        if isinstance(node, exp.Paren):
            return self._translate(node.this, negate)
        if isinstance(node, (exp.Like, exp.ILike, exp.In, exp.Between)) and node.args.get("negate"):
            positive = node.copy()  # sqlglot reads x NOT LIKE p as a LIKE with negate set
            positive.set("negate", None)
            return self._translate(positive, not negate)
        if isinstance(node, exp.Not):
            return self._translate(node.this, not negate)
        if isinstance(node, (exp.And, exp.Or)):
            items = tuple(self.translate(p, negate) for p in node.flatten())
            conjunction = isinstance(node, exp.And) != negate  # De Morgan
            return And(items) if conjunction else Or(items)
        if type(node) in _COMPARISONS:
            op = _COMPARISONS[type(node)]
            return self._compare(node.this, NEGATE[op] if negate else op, node.expression)
        if isinstance(node, exp.NullSafeEQ):
            return self._null_safe_eq(node, negate)
        if isinstance(node, exp.Between):
            low = self._compare(node.this, "<" if negate else ">=", node.args["low"])
            high = self._compare(node.this, ">" if negate else "<=", node.args["high"])
            return Or((low, high)) if negate else And((low, high))
        if isinstance(node, exp.In):
            return self._in(node, negate)
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            return NullCheck(self._plain_column(node.this), is_null=not negate)
        if isinstance(node, (exp.Like, exp.StartsWith)) and not negate:
            return self._prefix(node)
        raise Untranslatable(f"no rule for {type(node).__name__}")

    # -- clauses -------------------------------------------------------------------------------------------

    def _compare(self, left: exp.Expression, op: str, right: exp.Expression) -> Pred:
        left_term, right_term = self._term(left), self._term(right)
        if left_term and right_term:
            (lt, lk), (rt, rk) = left_term, right_term
            if lt.fns or rt.fns or lk.domain != rk.domain:
                raise Untranslatable("column comparison through functions or across kinds")
            return ColumnCmp(lt.column, op, rt.column)
        if right_term and not left_term:
            left, right, op = right, left, SWAP[op]
            left_term = right_term
        if not left_term:
            raise Untranslatable("no column of this table on either side")
        term, kind = left_term
        if isinstance(right, exp.Null):
            return Never("comparison with NULL is never true")
        lo, hi = literal_interval(fold(right), kind, self.session_time_zone)
        return Cmp(term, op, lo, hi)

    def _null_safe_eq(self, node: exp.NullSafeEQ, negate: bool) -> Pred:
        # x <=> c is TRUE iff x = c (NULL x gives FALSE); x <=> NULL is x IS NULL.
        left, right = node.this, node.expression
        if self._term(right) and not self._term(left):
            left, right = right, left
        if isinstance(right, exp.Null):
            return NullCheck(self._plain_column(left), is_null=not negate)
        if self._term(left) and self._term(right):
            raise Untranslatable("<=> between two columns (NULL <=> NULL is true)")
        eq = self._compare(left, "!=" if negate else "=", right)
        if not negate:
            return eq
        return Or((eq, NullCheck(self._plain_column(left), is_null=True)))

    def _in(self, node: exp.In, negate: bool) -> Pred:
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            raise Untranslatable("IN over a subquery")  # semi joins are diPs (rewriter II)
        found = self._term(node.this)
        if not found:
            raise Untranslatable("IN on an expression we cannot follow")
        term, kind = found
        values, has_null = [], False
        for item in node.expressions:
            if isinstance(item, exp.Null):
                has_null = True
                continue
            if not self.ansi and kind.name != "string" and isinstance(item, exp.Literal) and item.is_string:
                # without ANSI, Spark compares an IN list of strings with the value cast to a string
                raise Untranslatable("IN list of strings against a non-string column without ANSI")
            values.append(literal_interval(fold(item), kind, self.session_time_zone))
        if negate:
            if has_null:
                return Never("NOT IN with a NULL in the list is never true")
            if len(values) > MAX_NOT_IN:
                raise Untranslatable("NOT IN list too long to help")
            return And(tuple(Cmp(term, "!=", lo, hi) for lo, hi in values))
        if not values:
            return Never("IN with only NULLs is never true")
        if all(lo == hi for lo, hi in values):
            return InSet(term, tuple(sorted({lo for lo, _ in values})))
        return Or(tuple(Cmp(term, "=", lo, hi) for lo, hi in values))

    def _prefix(self, node: exp.Like | exp.StartsWith) -> Pred:
        if isinstance(node, exp.Like) and node.args.get("escape"):
            raise Untranslatable("LIKE with ESCAPE")
        term = self._term(node.this)
        if not term or term[1].name != "string" or term[0].fns:
            raise Untranslatable("LIKE on something other than a string column")
        pattern = fold(node.expression)
        if not isinstance(pattern, str):
            raise Untranslatable("LIKE pattern is not a string literal")
        if isinstance(node, exp.StartsWith):
            prefix, exact = pattern, False
        else:
            cut = min((i for i, ch in enumerate(pattern) if ch in "%_\\"), default=len(pattern))
            if cut < len(pattern) and pattern[cut] == "\\":
                raise Untranslatable("LIKE pattern with escapes")
            prefix, exact = pattern[:cut], cut == len(pattern)
        if exact:
            return Cmp(term[0], "=", prefix, prefix)
        if not prefix:
            raise Untranslatable("LIKE pattern without a prefix")
        clauses: list[Pred] = [Cmp(term[0], ">=", prefix, prefix)]
        upper = _successor(prefix)
        if upper is not None:
            clauses.append(Cmp(term[0], "<", upper, upper))
        return And(tuple(clauses))

    # -- terms ---------------------------------------------------------------------------------------------

    def _plain_column(self, node: exp.Expression) -> str:
        while isinstance(node, exp.Paren):
            node = node.this
        name = self.column_of(node) if isinstance(node, exp.Column) else None
        if name is None or name not in self.kinds:
            raise Untranslatable("IS [NOT] NULL on something other than a column with statistics")
        return name

    def _term(self, node: exp.Expression) -> tuple[Term, Kind] | None:
        """The column of this table that ``node`` is a monotone function of, with the result's kind."""
        inner, fns = peel_all(node, self.session_time_zone)
        if not isinstance(inner, exp.Column):
            if any(isinstance(c, exp.Column) and self.column_of(c) for c in inner.find_all(exp.Column)):
                raise Untranslatable(f"{type(inner).__name__} is not a monotone function we know")
            return None
        name = self.column_of(inner)
        if name is None:
            return None
        if name not in self.kinds:
            raise Untranslatable(f"no statistics for column {name}")
        return Term(name, fns), kind_after(fns, self.kinds[name])


def _successor(prefix: str) -> str | None:
    """The least string greater than every string that starts with ``prefix`` (None if there is none)."""
    chars = list(prefix)
    while chars:
        code = ord(chars[-1])
        if code < 0x10FFFF:
            nxt = code + 1
            if 0xD800 <= nxt <= 0xDFFF:  # surrogates are not characters
                nxt = 0xE000
            chars[-1] = chr(nxt)
            return "".join(chars)
        chars.pop()
    return None
