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

:func:`can_raise` asks the one model of Spark's errors (``rewriter/spark/model.py``): each function's
errors, and those of the implicit casts Spark puts on its arguments, are its registered definition's; a
function without one may raise under any setting. Where an integer term has statistics, the per-file
guards of ``rewriter/monotone.py`` say exactly which files may overflow (:func:`term_guard` in
``rewrite._local``).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp
from sqlglot.optimizer.scope import Scope

from rewriter.spark import model
from rewriter.table_refs import table_name
from stats.model import ColumnStats, Kind, TableStats

KindOf = Callable[[exp.Column], "Kind | None"]


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
    None where unknown. A column of a subquery inside ``scope`` is resolved in the subquery's own scope
    (``(SELECT avg(c2.x) FROM cte c2 ...)`` reads a CTE's column)."""
    nested: dict[int, Scope] = {}  # id(SELECT) -> its scope, for the subqueries under ``scope``

    def own_scope(column: exp.Column) -> Scope | None:
        if not nested:
            nested.update((id(s.expression), s) for s in scope.traverse())
        select = column.parent_select
        return nested.get(id(select)) if select is not None else None

    def kind_of(column: exp.Column, scope: Scope = scope, depth: int = 0) -> Kind | None:
        if column.table not in scope.sources and depth == 0:
            scope = own_scope(column) or scope
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
        return model.result_kind(projection.unalias(), lambda c: kind_of(c, inner, depth + 1))
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
    """Whether evaluating ``node`` on some row may raise under the session's ANSI setting
    (``rewriter/spark/model.py``)."""
    return model.can_raise(node, kind_of, ansi)


def why_it_may_raise(node: exp.Expression, kind_of: KindOf, ansi: bool) -> str | None:
    """Why ``node`` may raise, for the decision record (``rewriter/spark/model.py``); None if it cannot."""
    return model.why_it_may_raise(node, kind_of, ansi)


def expression_kind(node: exp.Expression, kind_of: KindOf) -> Kind | None:
    """The kind of an expression's value (``kind_of`` gives its columns'), None where unknown."""
    return model.result_kind(node, kind_of)
