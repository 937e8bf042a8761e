"""Make a failing query small: greedy one-step simplifications of its sqlglot tree, kept while it still fails.

``shrink(sql, fails)`` tries candidates, biggest cuts first, and restarts from every candidate that still
fails (``fails`` runs it: ``bench/fuzz/differential.py``) and is shorter, so it always ends; it stops at a
local minimum or after ``budget`` calls of ``fails``. The candidates, each one step:

- a set operation replaced by one of its branches; a CTE nobody reads dropped (after every step);
- the top level reduced to ``SELECT count(*)`` (no GROUP BY, HAVING, ORDER BY, LIMIT);
- a join removed, with every conjunct naming its aliases dropped and other references made NULL, or
  removed alone; a FROM item replaced by the first joined item; an outer, semi or anti join made inner;
- a conjunct or disjunct dropped (an AND or OR replaced by one side), a WHERE, HAVING, GROUP BY or
  DISTINCT dropped, ORDER BY dropped together with its LIMIT, a projection dropped (not under a LIMIT),
  an IN list made shorter;
- an expression replaced by its first operand (``k + 1`` by ``k``, ``CAST(k AS BIGINT)`` by ``k``).

A candidate never makes a LIMIT nondeterministic: ORDER BY terms are never dropped on their own, and a
SELECT with a LIMIT keeps its projections (the generator's ORDER BY 1, 2, 3 covers them all).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import sqlglot
from sqlglot import exp

log = logging.getLogger("dipper.bench")

_UNWRAP = (exp.Add, exp.Sub, exp.Mul, exp.Cast, exp.Year, exp.Month, exp.DateAdd, exp.Abs, exp.Coalesce,
           exp.Upper, exp.Lower, exp.Substring, exp.Paren, exp.TryCast, exp.Not)


def shrink(sql: str, fails: Callable[[str], bool], budget: int = 300) -> str:
    """The smallest query reached from ``sql`` by steps that keep ``fails`` true (``sql`` must fail)."""
    current = sql
    calls = 0
    tried: set[str] = {sql}
    normalised = _render(_parse(sql))
    if normalised is not None and normalised != sql:
        tried.add(normalised)
        calls += 1
        if fails(normalised):
            current = normalised
    progress = True
    while progress and calls < budget:
        progress = False
        tree = _parse(current)
        if tree is None:
            break
        for candidate in candidates(tree):
            if candidate in tried or len(candidate) >= len(current):
                continue
            tried.add(candidate)
            calls += 1
            if fails(candidate):
                log.info("shrunk to %d characters", len(candidate))
                current, progress = candidate, True
                break
            if calls >= budget:
                break
    return current


def candidates(tree: exp.Expression) -> Iterator[str]:
    """Every one-step simplification of ``tree``, as SQL, roughly biggest first."""
    steps: list[Callable[[exp.Expression], Iterator[exp.Expression]]] = [
        _set_operation_branches, _count_star, _remove_joins, _promote_joins, _drop_clauses, _drop_conjuncts,
        _inner_joins, _drop_projections, _shorten_in_lists, _unwrap_expressions,
    ]
    for step in steps:
        for variant in step(tree):
            _drop_unused_ctes(variant)
            text = _render(variant)
            if text is not None:
                yield text


# -- steps (each yields modified copies) ---------------------------------------------------------------
def _variants(tree: exp.Expression, kind: type | tuple[type, ...]) -> Iterator[tuple[exp.Expression, exp.Expression]]:
    """(a copy of ``tree``, the copy's i-th node of ``kind``) for every node of ``kind`` in ``tree``."""
    count = sum(1 for _ in tree.find_all(kind))
    for i in range(count):
        copy = tree.copy()
        node = list(copy.find_all(kind))[i]
        yield copy, node


def _set_operation_branches(tree: exp.Expression) -> Iterator[exp.Expression]:
    for side in ("this", "expression"):
        for copy, node in _variants(tree, exp.SetOperation):
            branch = node.args.get(side)
            if branch is not None:
                yield _replace(copy, node, branch)


def _count_star(tree: exp.Expression) -> Iterator[exp.Expression]:
    if not isinstance(tree, exp.Select) or [e.sql() for e in tree.expressions] == ["COUNT(*)"]:
        return
    copy = tree.copy()
    copy.set("expressions", [exp.Count(this=exp.Star())])
    for arg in ("group", "having", "order", "limit", "distinct"):
        copy.set(arg, None)
    yield copy


def _remove_joins(tree: exp.Expression) -> Iterator[exp.Expression]:
    for clean in (True, False):
        for copy, join in _variants(tree, exp.Join):
            aliases = _aliases(join.this)
            join.pop()
            if clean:
                _forget(copy, aliases)
            yield copy


def _promote_joins(tree: exp.Expression) -> Iterator[exp.Expression]:
    """``FROM a JOIN b ON ..`` becomes ``FROM b`` (references to ``a`` forgotten)."""
    for copy, select in _variants(tree, exp.Select):
        joins = select.args.get("joins") or []
        from_ = select.args.get("from_")
        if not joins or from_ is None:
            continue
        first = joins[0]
        aliases = _aliases(from_.this)
        from_.set("this", first.this.copy())
        first.pop()
        _forget(copy, aliases)
        yield copy


def _drop_clauses(tree: exp.Expression) -> Iterator[exp.Expression]:
    for arg in ("where", "having", "group", "distinct"):
        for copy, select in _variants(tree, exp.Select):
            if select.args.get(arg) is not None:
                select.set(arg, None)
                yield copy
    for copy, node in _variants(tree, (exp.Select, exp.SetOperation)):
        if node.args.get("order") is not None:
            node.set("order", None)
            node.set("limit", None)
            yield copy


def _drop_conjuncts(tree: exp.Expression) -> Iterator[exp.Expression]:
    for side in ("expression", "this"):
        for copy, node in _variants(tree, (exp.And, exp.Or)):
            yield _replace(copy, node, node.args[side])


def _inner_joins(tree: exp.Expression) -> Iterator[exp.Expression]:
    for copy, join in _variants(tree, exp.Join):
        if join.side or join.kind in ("SEMI", "ANTI", "INNER", "OUTER"):
            if join.args.get("on") is None and not join.args.get("using"):
                continue
            join.set("side", None)
            join.set("kind", None)
            yield copy


def _drop_projections(tree: exp.Expression) -> Iterator[exp.Expression]:
    for i, select in enumerate(tree.find_all(exp.Select)):
        if len(select.expressions) < 2 or select.args.get("limit") is not None:
            continue
        for j in range(len(select.expressions)):
            copy = tree.copy()
            list(copy.find_all(exp.Select))[i].expressions[j].pop()
            yield copy


def _shorten_in_lists(tree: exp.Expression) -> Iterator[exp.Expression]:
    for copy, node in _variants(tree, exp.In):
        values = node.expressions
        if len(values) > 1:
            values[-1].pop()
            yield copy


def _unwrap_expressions(tree: exp.Expression) -> Iterator[exp.Expression]:
    for copy, node in _variants(tree, _UNWRAP):
        inner = node.this
        if isinstance(inner, exp.Expression) and not isinstance(node.parent, (exp.Group, exp.Order)):
            yield _replace(copy, node, inner)


# -- helpers -------------------------------------------------------------------------------------------
def _replace(root: exp.Expression, node: exp.Expression, by: exp.Expression) -> exp.Expression:
    if node is root:
        return by.copy()
    node.replace(by.copy())
    return root


def _aliases(source: exp.Expression) -> set[str]:
    """The names a FROM item makes visible: its alias or name, and those of joins nested inside it."""
    out = set()
    for t in [source, *source.find_all(exp.Table, exp.Subquery)]:
        name = t.alias_or_name
        if name:
            out.add(name.lower())
    return out


def _forget(tree: exp.Expression, aliases: set[str]) -> None:
    """Drop every conjunct (of WHERE, ON, HAVING) that names ``aliases``; make other references NULL."""
    for column in list(tree.find_all(exp.Column)):
        if column.table.lower() not in aliases or column.root() is not tree:
            continue
        conjunct: exp.Expression = column
        while conjunct.parent is not None and not isinstance(
                conjunct.parent, (exp.And, exp.Where, exp.Having, exp.Join, exp.Select)):
            conjunct = conjunct.parent
        parent = conjunct.parent
        if isinstance(parent, exp.And):
            other = parent.expression if conjunct is parent.this else parent.this
            parent.replace(other)
        elif isinstance(parent, (exp.Where, exp.Having)):
            parent.pop()
        elif isinstance(parent, exp.Join) and conjunct is parent.args.get("on"):
            parent.set("on", exp.true())
        else:
            column.replace(exp.Null())


def _drop_unused_ctes(tree: exp.Expression) -> None:
    with_ = tree.args.get("with_")
    if with_ is None:
        return
    changed = True
    while changed:
        changed = False
        for cte in list(with_.expressions):
            name = cte.alias_or_name.lower()
            if not any(t.name.lower() == name and not t.db for t in tree.find_all(exp.Table)):
                cte.pop()
                changed = True
    if not with_.expressions:
        with_.pop()


def _parse(sql: str) -> exp.Expression | None:
    try:
        return sqlglot.parse_one(sql, read="spark")
    except sqlglot.errors.SqlglotError:
        return None


def _render(tree: exp.Expression | None) -> str | None:
    if tree is None:
        return None
    try:
        return tree.sql(dialect="spark")
    except Exception:  # noqa: BLE001 - a broken candidate is simply not tried
        return None
