"""Errors are results too: can evaluating an expression on a row raise an error under the session's
settings? (issue 13; ARCHITECTURE.md §3.6)

A query that fails on Spark must fail through Dipper. Skipping a file whose rows would make Spark raise
(an ANSI integer overflow, a division by zero, an invalid cast) turns that error into a result, so the
rewriter keeps every file on which an expression Spark evaluates for its rows may raise:

- every conjunct over one reference alone, wherever it stands (Spark pushes it down to the scan and
  evaluates it on every row read, whatever else prunes the file): files where it may raise are kept
  (``rewrite._local``);
- a derived table or CTE receives no diP if any expression its SELECT evaluates per row may raise
  (Spark computes projections below the join on rows the diP would remove; ``join_graph``).

Expressions evaluated only on rows that passed every filter (projections of the SELECT that holds the
reference, join conditions beyond the equality, aggregates over joined rows) see no row of a skipped
file, so they need no check: Spark would not have evaluated them on those rows either.

:func:`can_raise` is conservative: True unless every part of the expression is known not to raise with
the argument types at hand. Under ANSI mode (Spark 4's default) integer arithmetic may overflow, division
and remainder may divide by zero, casts may meet invalid input, and array indexing may be out of bounds;
without ANSI those yield NULL or wrap. A function it does not know may raise under any setting (a UDF,
``raise_error``). Where an integer term has statistics, the per-file guards of ``rewriter/monotone.py``
say exactly which files may overflow (:func:`term_guard` in ``rewrite._local``).
"""

from __future__ import annotations

import datetime
import decimal
import re
from collections.abc import Callable

from sqlglot import exp

from sqlglot.optimizer.scope import Scope

from rewriter.literals import Interval, Timestamp, Value, fold, is_constant, parse_date, parse_timestamp
from rewriter.table_refs import table_name
from stats.model import ColumnStats, Kind, TableStats, kind_of

# ASCII only, as Spark's casts read them (Python's \d and \s also match "１" and U+3000).
_INTEGER = re.compile(r"[ \t\n\r]*[+-]?[0-9]{1,18}[ \t\n\r]*")
_NUMBER = re.compile(r"[ \t\n\r]*[+-]?([0-9]{1,30}(\.[0-9]{0,30})?|\.[0-9]{1,30})[ \t\n\r]*")
KindOf = Callable[[exp.Column], "Kind | None"]

# Never raise, whatever their (already checked) arguments are.
_SAFE = (exp.Column, exp.Literal, exp.Null, exp.Boolean, exp.Var, exp.Star, exp.Identifier, exp.DataType,
         exp.DataTypeParam, exp.Paren, exp.Alias, exp.And, exp.Or, exp.Not, exp.Is, exp.NullSafeEQ, exp.NullSafeNEQ,
         exp.Like, exp.ILike, exp.StartsWith, exp.Coalesce, exp.If, exp.Case, exp.Upper, exp.Lower, exp.Length,
         exp.Substring, exp.Concat, exp.ConcatWs, exp.Count, exp.Min, exp.Max, exp.CountIf, exp.Trim, exp.Initcap,
         exp.Reverse, exp.StrPosition, exp.MD5, exp.SHA, exp.Nullif, exp.Greatest, exp.Least, exp.RowNumber, exp.Rank,
         exp.DenseRank, exp.Lag, exp.Lead, exp.First, exp.Last, exp.Window, exp.WindowSpec, exp.Order, exp.Ordered,
         exp.Grouping, exp.Interval, exp.Distinct, exp.Tuple, exp.Exists, exp.ApproxDistinct,
         exp.StddevSamp, exp.Stddev, exp.StddevPop, exp.Variance, exp.VariancePop, exp.Corr, exp.Round,
         exp.Floor, exp.Ceil, exp.Sign, exp.EndsWith, exp.Contains, exp.Left, exp.Right, exp.Pad, exp.Replace,
         exp.SHA2)
_STRING_FUNCTIONS = (exp.Upper, exp.Lower, exp.Substring, exp.Concat, exp.ConcatWs, exp.Trim, exp.Initcap, exp.Reverse,
                     exp.Left, exp.Right, exp.Pad, exp.Replace, exp.MD5, exp.SHA, exp.SHA2, exp.DPipe)
# Functions of dates and timestamps: they never raise on one, but a string argument is cast (ANSI: may raise).
_DATE_FUNCTIONS = (exp.Year, exp.Month, exp.Quarter, exp.Day, exp.DayOfMonth, exp.DayOfWeek, exp.DayOfYear, exp.Week,
                   exp.WeekOfYear, exp.Extract, exp.DateTrunc, exp.TimestampTrunc, exp.TsOrDsToDate, exp.LastDay,
                   exp.DateDiff, exp.MonthsBetween, exp.Hour, exp.Minute, exp.Second)
# Spark functions sqlglot does not model (parsed as Anonymous) that never raise.
_SAFE_NAMES = frozenset({"hash", "xxhash64", "crc32", "isnull", "isnotnull", "char_length", "character_length",
                         "octet_length", "bit_length", "ascii", "base64", "hex", "soundex", "levenshtein"})
_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.Between, exp.In)
# Raise only under ANSI mode (and then depending on types, below).
# (sqlglot's Spark dialect reads CAST as a TryCast without ``safe``; only TRY_CAST sets it.)
_ANSI_ONLY = (exp.Add, exp.Sub, exp.Mul, exp.Neg, exp.Div, exp.IntDiv, exp.Mod, exp.Cast, exp.Abs, exp.Sum,
              exp.Avg, exp.Bracket, exp.DateAdd, exp.DateSub, exp.TsOrDsAdd, exp.AddMonths)


def proven_kind(col: ColumnStats, stats: TableStats) -> Kind:
    """The column's kind, with an integer's width narrowed to 32 bits where the statistics prove every value
    of every file fits in an INT and the table has fewer than 2^32 rows: then no SUM of it overflows a
    BIGINT and no cast to INT fails. Only for a table whose every file is described (``covered``)."""
    kind = col.kind
    if kind.name != "int" or kind.bits <= 32 or not stats.covered or stats.n_files == 0:
        return kind
    valued = (col.null_count < 0) | (col.null_count < stats.rows)
    if not (col.known | ~valued).all() or int(stats.rows.sum()) >= 2**32:
        return kind
    lo, hi = col.lo[valued], col.hi[valued]
    if len(lo) and (int(lo.min()) < -2**31 or int(hi.max()) >= 2**31):
        return kind
    return Kind("int", bits=32)


def scope_kinds(scope: Scope, table_kind: Callable[[str, str], Kind | None], database: str) -> KindOf:
    """The kind of a column of ``scope``: a table's column from ``table_kind(db.table, column)``, a derived
    table's or CTE's column from the expression it projects (through set operations, its first branch);
    None where unknown."""
    def kind_of(column: exp.Column, scope: Scope = scope, depth: int = 0) -> Kind | None:
        while column.table not in scope.sources and scope.parent is not None:
            scope = scope.parent  # a correlated reference to an enclosing query
        if column.table not in scope.sources:  # a column of a subquery's own FROM clause
            table = _table_of(column)
            return table_kind(table_name(table, database), column.name.lower()) if table is not None else None
        source = scope.sources.get(column.table)
        if isinstance(source, exp.Table):
            return table_kind(table_name(source, database), column.name.lower())
        if not isinstance(source, Scope) or depth > 16:
            return None
        while isinstance(source.expression, exp.SetOperation) and source.set_operation_scopes:
            source = source.set_operation_scopes[0]
        select = source.expression
        if not isinstance(select, exp.Select):
            return None
        projection = next((p for p in select.expressions if p.alias_or_name.lower() == column.name.lower()), None)
        if projection is None:
            return None
        inner = source
        return _Raises(lambda c: kind_of(c, inner, depth + 1), True)._kind(projection.unalias())
    return kind_of


def _table_of(column: exp.Column) -> exp.Table | None:
    """The table the nearest enclosing SELECT's FROM clause names ``column.table`` by, if it is a table."""
    node = column.parent
    while node is not None:
        if isinstance(node, exp.Select):
            for table in node.find_all(exp.Table):
                if table.alias_or_name == column.table and table.parent_select is node:
                    return table
        node = node.parent
    return None


def can_raise(node: exp.Expression, kind_of: KindOf, ansi: bool) -> bool:
    """Whether evaluating ``node`` on some row may raise under the session's ANSI setting."""
    return _Raises(kind_of, ansi).visit(node)


def expression_kind(node: exp.Expression, kind_of: KindOf) -> Kind | None:
    """The kind of an expression's value (``kind_of`` gives its columns'), None where unknown."""
    return _Raises(kind_of, True)._kind(node)


class _Raises:
    def __init__(self, kind_of: KindOf, ansi: bool) -> None:
        self.kind_of = kind_of
        self.ansi = ansi
        self.nonzero: list[exp.Expression] = []  # divisors a CASE branch's condition proves non-zero

    def visit(self, node: exp.Expression) -> bool:
        if isinstance(node, (exp.Exists, exp.Subquery, exp.Select)):
            # Evaluated on its own rows: an uncorrelated subquery once per statement, whatever files are read
            # around it; Spark refuses a correlated scalar subquery that is not aggregated at analysis.
            return False
        if isinstance(node, exp.In) and node.args.get("query") is not None:
            return self.visit(node.this)
        if not isinstance(node, exp.Expression):
            return False
        if isinstance(node, exp.Case):
            return self._case(node)
        if is_constant(node):
            return False  # folds to a value (rewriter/literals.py): the same on every row, and no error
        children = [c for c in node.iter_expressions()]
        if isinstance(node, exp.TryCast) and node.args.get("safe"):
            return any(self.visit(c) for c in children)  # TRY_CAST: NULL where CAST would fail
        if isinstance(node, _COMPARISONS):
            return self._implicit_cast(node) or any(self.visit(c) for c in children)
        if isinstance(node, _SAFE) or isinstance(node, exp.Anonymous) and node.name.lower() in _SAFE_NAMES:
            return any(self.visit(c) for c in children)
        if isinstance(node, _DATE_FUNCTIONS):
            kinds = [self._kind(c) for c in children if not isinstance(c, (exp.Var, exp.Literal))]
            cast = self.ansi and not all(k is not None and k.name in ("date", "timestamp", "timestamp_ntz") for k in kinds)
            return cast or any(self.visit(c) for c in children)
        if isinstance(node, _ANSI_ONLY):
            if not self.ansi:
                return any(self.visit(c) for c in children)
            return self._ansi(node) or any(self.visit(c) for c in children)
        return True  # unknown: a UDF, raise_error, assert_true, a function this list does not know

    def _case(self, node: exp.Case) -> bool:
        """CASE evaluates a branch only when its condition holds: ``CASE WHEN x > 0 THEN y / x`` and
        ``CASE x WHEN 0 THEN ... ELSE y / x END`` divide by a non-zero x."""
        subject = node.this
        if subject is not None and self.visit(subject):
            return True
        zero_tested = False
        for branch in node.args.get("ifs") or []:
            condition, value = branch.this, branch.args.get("true")
            if self.visit(condition):
                return True
            proven = [subject] if subject is not None and _is_zero(condition) else _nonzero_by(condition)
            zero_tested |= subject is not None and _is_zero(condition)
            self.nonzero.extend(proven)
            try:
                if value is not None and self.visit(value):
                    return True
            finally:
                del self.nonzero[len(self.nonzero) - len(proven):]
        default = node.args.get("default")
        proven = [subject] if zero_tested else []
        self.nonzero.extend(proven)
        try:
            return default is not None and self.visit(default)
        finally:
            del self.nonzero[len(self.nonzero) - len(proven):]

    def _ansi(self, node: exp.Expression) -> bool:
        """Whether an ANSI-only node raises for its argument types."""
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul)):
            a, b = self._kind(node.this), self._kind(node.expression)
            if a is None or b is None or "int" == a.name == b.name:
                return True  # integer arithmetic may overflow its type
            if "float" in (a.name, b.name):
                return False
            # decimals (an integer joins as DECIMAL(digits, 0)): no overflow while the result type holds its digits
            return not _fits(node, a, b)
        if isinstance(node, (exp.Div, exp.IntDiv, exp.Mod)):
            dividend, divisor = self._kind(node.this), self._kind(node.expression)
            if dividend is None or divisor is None or not self._nonzero(node.expression):
                return True
            if isinstance(node, (exp.IntDiv, exp.Mod)):  # MIN_VALUE DIV -1 overflows
                return dividend.name != "int" or not (is_constant(node.expression) and fold(node.expression) != -1
                                                     or any(node.expression == e for e in self.nonzero))
            if dividend.name in ("int", "float") and divisor.name in ("int", "float"):
                return False  # a double
            return not _fits(node, dividend, divisor)
        if isinstance(node, exp.Cast):  # also a TryCast without ``safe``: Spark's CAST
            source, target = self._kind(node.this), node.to
            return not _widening(source, target)
        if isinstance(node, exp.Sum):
            k = self._kind(node.this)
            return k is None or k.name == "decimal" and k.precision > 28 or \
                k.name not in ("decimal", "float") and not (k.name == "int" and k.bits <= 32)
        if isinstance(node, exp.Avg):  # integers are summed as doubles, decimals with 10 more digits
            k = self._kind(node.this)
            return k is None or k.name == "decimal" and k.precision > 28 or k.name not in ("decimal", "float", "int")
        if isinstance(node, exp.Abs):
            k = self._kind(node.this)
            return k is None or k.name not in ("decimal", "float")
        return True  # Bracket (index out of bounds), date arithmetic (out of range), Neg (MIN_VALUE)

    def _nonzero(self, divisor: exp.Expression) -> bool:
        while isinstance(divisor, exp.Paren):
            divisor = divisor.this
        if any(divisor == e for e in self.nonzero):
            return True
        if not is_constant(divisor):
            return False
        value = fold(divisor)
        return isinstance(value, (int, float, decimal.Decimal)) and not isinstance(value, bool) and value != 0

    def _implicit_cast(self, node: exp.Expression) -> bool:
        """A comparison of a string with a value of another type casts the string to that type, and text that
        does not parse raises under ANSI. A string literal that parses as the other side's type (as the
        translator reads it: ``rewriter/literals.py``) is safe; a string column or expression never is."""
        if not self.ansi:
            return False
        operands = [o for o in (node.this, *(node.expressions or []), node.args.get("expression"),
                                node.args.get("low"), node.args.get("high")) if isinstance(o, exp.Expression)]
        kinds = [self._kind(o) for o in operands]
        others = {k.name for k in kinds if k is not None and k.name != "string"}
        if not others:
            # Next to a value of unknown type (``current_date()``, a function this module does not type), a
            # string may be cast to anything.
            return any(k is not None and k.name == "string" for k in kinds) and \
                any(k is None and not isinstance(o, exp.Null) for o, k in zip(operands, kinds))
        for operand, kind in zip(operands, kinds):
            if isinstance(operand, exp.Literal) and operand.is_string:
                text = operand.this
                for other in others:
                    if other == "date" and parse_date(text) is None or other.startswith("timestamp") and \
                            parse_timestamp(text) is None or other == "int" and not _INTEGER.fullmatch(text) or \
                            other in ("decimal", "float") and not _NUMBER.fullmatch(text):
                        return True
            elif kind is not None and kind.name == "string" or kind is None and isinstance(operand, exp.Column):
                return True  # a string column or expression, or a column of unknown type, next to a non-string
        return False

    def _kind(self, node: exp.Expression | None) -> Kind | None:
        """The kind of ``node``'s value where it is a column or a number literal; None: unknown."""
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.Column):
            return self.kind_of(node)
        if isinstance(node, exp.Literal) and node.is_string:
            return Kind("string")
        if isinstance(node, (exp.Cast, exp.TryCast)):
            return kind_of(node.to.sql("spark"))
        if isinstance(node, _STRING_FUNCTIONS):
            return Kind("string")
        if isinstance(node, exp.TsOrDsToDate):
            return Kind("date")
        if isinstance(node, exp.Neg):
            return self._kind(node.this)
        if isinstance(node, (exp.Count, exp.RowNumber, exp.Rank, exp.DenseRank)):
            return Kind("int", bits=64) if isinstance(node, exp.Count) else Kind("int", bits=32)
        if isinstance(node, exp.Window):
            return self._kind(node.this)
        if isinstance(node, exp.Subquery):
            select = node.unnest()
            return self._kind(select.expressions[0].unalias()) if isinstance(select, exp.Select) and \
                len(select.expressions) == 1 else None
        if isinstance(node, (exp.StddevSamp, exp.Stddev, exp.StddevPop, exp.Variance, exp.VariancePop, exp.Corr)):
            return Kind("float")
        if isinstance(node, (exp.Case, exp.If, exp.Coalesce)):
            branches = [b.args.get("true") for b in node.args.get("ifs") or []] + [node.args.get("default")] \
                if isinstance(node, exp.Case) else [node.args.get("true"), node.args.get("false")] \
                if isinstance(node, exp.If) else [node.this, *node.expressions]
            kinds = [self._kind(b) for b in branches if b is not None and not isinstance(b, exp.Null)]
            if not kinds or any(k is None for k in kinds) or len({k.name for k in kinds}) != 1:
                return None
            return Kind(kinds[0].name, scale=max(k.scale for k in kinds), precision=max(k.precision for k in kinds),
                        bits=max(k.bits for k in kinds))
        if isinstance(node, exp.Paren):
            return self._kind(node.this)
        if isinstance(node, (exp.Min, exp.Max, exp.First, exp.Last, exp.Abs)):
            return self._kind(node.this)
        if isinstance(node, (exp.Sum, exp.Avg)):
            k = self._kind(node.this)
            if k is None or k.name not in ("int", "decimal", "float"):
                return None
            if k.name == "decimal":  # Spark: sum is DECIMAL(p + 10, s), avg DECIMAL(p + 4, s + 4), bounded by 38
                precision = min(38, k.precision + (10 if isinstance(node, exp.Sum) else 4))
                return Kind("decimal", scale=k.scale + (0 if isinstance(node, exp.Sum) else 4), precision=precision)
            return Kind("int", bits=64) if isinstance(node, exp.Sum) and k.name == "int" else Kind("float")
        if isinstance(node, exp.Literal) and not node.is_string:
            text = node.this
            if text.lstrip("+-").isdigit():
                return Kind("int", bits=32 if -2**31 <= int(text) < 2**31 else 64)
            if "e" in text.lower():
                return Kind("float")
            digits = text.lstrip("+-").replace(".", "")
            return Kind("decimal", scale=len(text.split(".")[1]) if "." in text else 0, precision=len(digits))
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul)):
            a, b = self._kind(node.this), self._kind(node.expression)
            if a is not None and b is not None and "float" in (a.name, b.name) and \
                    {a.name, b.name} <= {"float", "decimal", "int"}:
                return Kind("float")
            if a is not None and b is not None and {a.name, b.name} <= {"decimal", "int"}:
                if a.name == b.name == "int":
                    return Kind("int", bits=max(a.bits, b.bits))
                # Spark's decimal result type, its precision bounded by 38 (_ansi checks the unbounded one).
                scale = max(a.scale, b.scale) if not isinstance(node, exp.Mul) else _digits(a)[1] + _digits(b)[1]
                return Kind("decimal", scale=scale, precision=min(38, _result_digits(node, a, b)))
        if is_constant(node):  # folds to a value (DATE'2021-03-13' + INTERVAL 1 DAY): the value's type
            return _value_kind(fold(node))
        return None


def _value_kind(value: Value) -> Kind | None:
    """The kind of a constant's folded value (``rewriter/literals.py``); None for an interval."""
    if isinstance(value, bool) or isinstance(value, Interval):
        return None
    if isinstance(value, Timestamp) or isinstance(value, datetime.datetime):
        return Kind("timestamp")
    if isinstance(value, datetime.date):
        return Kind("date")
    if isinstance(value, str):
        return Kind("string")
    if isinstance(value, int):
        return Kind("int", bits=32 if -2**31 <= value < 2**31 else 64)
    if isinstance(value, float):
        return Kind("float")
    digits = value.as_tuple()
    return Kind("decimal", scale=max(0, -digits.exponent), precision=max(len(digits.digits), -digits.exponent))


def _digits(k: Kind) -> tuple[int, int]:
    """(precision, scale) of a value of ``k`` in decimal arithmetic."""
    if k.name == "decimal":
        return k.precision, k.scale
    return {8: 3, 16: 5, 32: 10, 64: 20}.get(k.bits, 20), 0


def _result_digits(node: exp.Expression, a: Kind, b: Kind) -> int:
    """The precision of Spark's exact decimal result type before it bounds it by 38 (DecimalPrecision)."""
    (p1, s1), (p2, s2) = _digits(a), _digits(b)
    if isinstance(node, (exp.Add, exp.Sub)):
        return max(s1, s2) + max(p1 - s1, p2 - s2) + 1
    if isinstance(node, exp.Mul):
        return p1 + p2 + 1
    return p1 - s1 + s2 + max(6, s1 + p2 + 1)  # division


def _fits(node: exp.Expression, a: Kind, b: Kind) -> bool:
    """Whether Spark's decimal result type of ``a <op> b`` holds every result: the exact type when it has
    at most 38 digits; beyond, Spark keeps the integer digits and cuts the scale to no less than 6
    (``spark.sql.decimalOperations.allowPrecisionLoss``, at its default: rewriter/session.py), so the
    result fits while those integer digits leave room for that scale."""
    (_, s1), (p2, s2) = _digits(a), _digits(b)
    precision = _result_digits(node, a, b)
    if isinstance(node, (exp.Add, exp.Sub)):
        scale = max(s1, s2)
    elif isinstance(node, exp.Mul):
        scale = s1 + s2
    else:
        scale = max(6, s1 + p2 + 1)
    return precision <= 38 or precision - scale <= 38 - min(scale, 6)


def _is_zero(node: exp.Expression) -> bool:
    return is_constant(node) and fold(node) == 0


def _nonzero_by(condition: exp.Expression) -> list[exp.Expression]:
    """Expressions a CASE condition proves non-zero: ``x > c`` (c >= 0), ``x < c`` (c <= 0), ``x <> 0``,
    and each conjunct of an AND."""
    while isinstance(condition, exp.Paren):
        condition = condition.this
    if isinstance(condition, exp.And):
        return _nonzero_by(condition.this) + _nonzero_by(condition.expression)
    if not isinstance(condition, (exp.GT, exp.LT, exp.NEQ, exp.GTE, exp.LTE)):
        return []
    left, right = condition.this, condition.expression
    flip = {exp.GT: exp.LT, exp.LT: exp.GT, exp.NEQ: exp.NEQ, exp.GTE: exp.LTE, exp.LTE: exp.GTE}
    kind = type(condition)
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


def _widening(source: Kind | None, target: exp.DataType) -> bool:
    """Casts that cannot fail: to a string, an integer to a wider integer or to a double, a date to a date."""
    t = target.this
    if t in exp.DataType.TEXT_TYPES:
        return True
    if source is None:
        return False
    if source.name == "int":
        width = {exp.DataType.Type.TINYINT: 8, exp.DataType.Type.SMALLINT: 16, exp.DataType.Type.INT: 32,
                 exp.DataType.Type.BIGINT: 64}.get(t)
        return (width is not None and width >= source.bits) or t == exp.DataType.Type.DOUBLE
    if source.name == "float":
        return t == exp.DataType.Type.DOUBLE
    if source.name == "date":
        return t == exp.DataType.Type.DATE
    if source.name == "decimal" and t == exp.DataType.Type.DECIMAL:
        params = [int(p.this.this) for p in target.expressions] if target.expressions else [10, 0]
        precision, scale = params[0], params[1] if len(params) > 1 else 0
        return scale >= source.scale and precision - scale >= source.precision - source.scale
    if source.name == "decimal":
        return t == exp.DataType.Type.DOUBLE
    return False
