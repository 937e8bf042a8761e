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

import decimal
import re
from collections.abc import Callable

from sqlglot import exp

from rewriter.literals import fold, is_constant, parse_date, parse_timestamp
from stats.model import ColumnStats, Kind, TableStats

_INTEGER = re.compile(r"\s*[+-]?\d{1,18}\s*")
_NUMBER = re.compile(r"\s*[+-]?(\d{1,30}(\.\d{0,30})?|\.\d{1,30})\s*")
KindOf = Callable[[exp.Column], "Kind | None"]

# Never raise, whatever their (already checked) arguments are.
_SAFE = (exp.Column, exp.Literal, exp.Null, exp.Boolean, exp.Var, exp.Star, exp.Identifier, exp.DataType,
         exp.DataTypeParam, exp.Paren, exp.Alias, exp.And, exp.Or, exp.Not, exp.Is, exp.NullSafeEQ, exp.NullSafeNEQ,
         exp.Like, exp.ILike, exp.StartsWith, exp.Coalesce, exp.If, exp.Case, exp.Upper, exp.Lower, exp.Length,
         exp.Substring, exp.Concat, exp.ConcatWs, exp.Year, exp.Month, exp.Quarter, exp.Day, exp.DayOfMonth,
         exp.DayOfWeek, exp.DayOfYear, exp.Week, exp.Count, exp.Min, exp.Max, exp.CountIf, exp.Trim, exp.Initcap,
         exp.Reverse, exp.StrPosition, exp.MD5, exp.SHA, exp.Nullif, exp.Greatest, exp.Least, exp.RowNumber, exp.Rank,
         exp.DenseRank, exp.Lag, exp.Lead, exp.First, exp.Last, exp.Window, exp.WindowSpec, exp.Order, exp.Ordered,
         exp.Grouping, exp.Interval, exp.Distinct, exp.Tuple, exp.Exists, exp.Subquery, exp.Select,
         exp.Extract, exp.DateTrunc, exp.TimestampTrunc, exp.TsOrDsToDate, exp.ApproxDistinct,
         exp.Avg, exp.StddevSamp, exp.Stddev, exp.StddevPop, exp.Variance, exp.VariancePop, exp.Corr, exp.Round,
         exp.Floor, exp.Ceil, exp.Sign, exp.EndsWith, exp.Contains, exp.DateDiff, exp.LastDay, exp.Hour, exp.Minute,
         exp.Second, exp.Left, exp.Right, exp.Pad, exp.Replace, exp.SHA2, exp.WeekOfYear, exp.MonthsBetween)
# Spark functions sqlglot does not model (parsed as Anonymous) that never raise.
_SAFE_NAMES = frozenset({"hash", "xxhash64", "crc32", "isnull", "isnotnull", "char_length", "character_length",
                         "octet_length", "bit_length", "ascii", "base64", "hex", "soundex", "levenshtein"})
_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.Between, exp.In)
# Raise only under ANSI mode (and then depending on types, below).
# (sqlglot's Spark dialect reads CAST as a TryCast without ``safe``; only TRY_CAST sets it.)
_ANSI_ONLY = (exp.Add, exp.Sub, exp.Mul, exp.Neg, exp.Div, exp.IntDiv, exp.Mod, exp.Cast, exp.Abs, exp.Sum,
              exp.Bracket, exp.DateAdd, exp.DateSub, exp.TsOrDsAdd, exp.AddMonths)


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


def can_raise(node: exp.Expression, kind_of: KindOf, ansi: bool) -> bool:
    """Whether evaluating ``node`` on some row may raise under the session's ANSI setting."""
    return _Raises(kind_of, ansi).visit(node)


class _Raises:
    def __init__(self, kind_of: KindOf, ansi: bool) -> None:
        self.kind_of = kind_of
        self.ansi = ansi

    def visit(self, node: exp.Expression) -> bool:
        if isinstance(node, (exp.Subquery, exp.Select, exp.Exists)):
            return False  # evaluated on its own rows, not on the rows of the files around it
        if isinstance(node, exp.In) and node.args.get("query") is not None:
            return self.visit(node.this)
        if not isinstance(node, exp.Expression):
            return False
        if is_constant(node):
            return False  # folds to a value (rewriter/literals.py): the same on every row, and no error
        children = [c for c in node.iter_expressions()]
        if isinstance(node, exp.TryCast) and node.args.get("safe"):
            return any(self.visit(c) for c in children)  # TRY_CAST: NULL where CAST would fail
        if isinstance(node, _COMPARISONS):
            return self._implicit_cast(node) or any(self.visit(c) for c in children)
        if isinstance(node, _SAFE) or isinstance(node, exp.Anonymous) and node.name.lower() in _SAFE_NAMES:
            return any(self.visit(c) for c in children)
        if isinstance(node, _ANSI_ONLY):
            if not self.ansi:
                return any(self.visit(c) for c in children)
            return self._ansi(node) or any(self.visit(c) for c in children)
        return True  # unknown: a UDF, raise_error, assert_true, a function this list does not know

    def _ansi(self, node: exp.Expression) -> bool:
        """Whether an ANSI-only node raises for its argument types."""
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul)):
            kinds = [self._kind(node.this), self._kind(node.expression)]
            return not all(k is not None and k.name in ("decimal", "float") for k in kinds) or \
                any(k.name == "decimal" and k.precision > 18 for k in kinds if k is not None)
        if isinstance(node, (exp.Div, exp.IntDiv, exp.Mod)):
            dividend, divisor = self._kind(node.this), node.expression
            wide = dividend is None or dividend.name == "decimal" and dividend.precision > 18
            return wide or not (is_constant(divisor) and _nonzero(divisor))
        if isinstance(node, exp.Cast):  # also a TryCast without ``safe``: Spark's CAST
            source, target = self._kind(node.this), node.to
            return not _widening(source, target)
        if isinstance(node, exp.Sum):  # (avg sums integers as doubles and decimals with 10 more digits)
            k = self._kind(node.this)
            return k is None or k.name not in ("decimal", "float") and not (k.name == "int" and k.bits <= 32)
        if isinstance(node, exp.Abs):
            k = self._kind(node.this)
            return k is None or k.name not in ("decimal", "float")
        return True  # Bracket (index out of bounds), date arithmetic (out of range), Neg (MIN_VALUE)

    def _implicit_cast(self, node: exp.Expression) -> bool:
        """A string literal compared with a column of another type is cast to the column's type, and text
        that does not parse raises under ANSI. Text that parses as the column's type (as the translator
        reads it: ``rewriter/literals.py``) is safe."""
        if not self.ansi:
            return False
        operands = [o for o in (node.this, *(node.expressions or []), node.args.get("expression"),
                                node.args.get("low"), node.args.get("high")) if isinstance(o, exp.Expression)]
        texts = [o.this for o in operands if isinstance(o, exp.Literal) and o.is_string]
        for kind in {k.name for k in (self._kind(o) for o in operands) if k is not None}:
            for text in texts:
                if kind == "date" and parse_date(text) is None or kind.startswith("timestamp") and \
                        parse_timestamp(text) is None or kind == "int" and not _INTEGER.fullmatch(text) or \
                        kind in ("decimal", "float") and not _NUMBER.fullmatch(text):
                    return True
        return False

    def _kind(self, node: exp.Expression | None) -> Kind | None:
        """The kind of ``node``'s value where it is a column or a number literal; None: unknown."""
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.Column):
            return self.kind_of(node)
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
            if a is not None and b is not None and a.name == b.name == "float":
                return a
            if a is not None and b is not None and {a.name, b.name} <= {"decimal", "int"}:
                if a.name == b.name == "int":
                    return Kind("int", bits=max(a.bits, b.bits))
                # Spark's decimal result type, with precision bounded by 38 (checked by _ansi's precision test).
                return Kind("decimal", scale=max(a.scale, b.scale), precision=min(38, max(_digits(a), _digits(b)) + 1))
        return None


def _digits(k: Kind) -> int:
    return k.precision if k.name == "decimal" else (3 if k.bits == 8 else 5 if k.bits == 16 else 10 if k.bits == 32 else 20)


def _nonzero(node: exp.Expression) -> bool:
    value = fold(node)
    return isinstance(value, (int, float, decimal.Decimal)) and not isinstance(value, bool) and value != 0


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
