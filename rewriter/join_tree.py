"""What the FROM clause of one SELECT does to each of its table references: the one owner of join semantics
(ARCHITECTURE.md §3.4 and §3.7). Local pruning (``rewriter/table_refs.py``) and diP channels
(``rewriter/join_graph.py``) both ask it; neither reads a join's side or kind itself.

The FROM clause is read as the tree it is: ``a LEFT JOIN (b JOIN c ON ...) ON ...`` has the inner join as
the right child of the outer one, comma and CROSS joins are inner joins without a condition, and the WHERE
clause is one more site above the whole tree. Every conjunct of an ON clause or of WHERE is applied at its
*site*.

**When a conjunct may prune a reference.** Pruning ``x`` removes rows of ``x`` before anything else sees
them. That cannot change the result if every removed row would have been dropped anyway, at the site
where the conjunct is applied, before anything could observe its absence. Only two things observe a row's
absence below that site: an outer join that would pad a missing row with NULLs (the row's absence turns a
match into a NULL-extended row, which a later ``IS NULL`` keeps), and the existence test of a semi or
anti join (whose right side is not visible above it, so no conjunct above can mention it). Hence a site
*restricts* ``x`` — a conjunct over ``x`` failing there drops ``x``'s row for good — when

- the site drops the rows that fail its conjuncts on ``x``'s side: WHERE and inner/cross joins drop
  failing rows of both sides; LEFT joins only of the right side (the left side is kept, NULL-extended);
  RIGHT joins only of the left side; FULL joins of neither; LEFT SEMI of both (a left row without a
  matching right row is dropped, a failing right row matches nothing); LEFT ANTI only of the right side
  (a left row without a match is *kept*), and
- ``x`` is not null-supplied inside its side's subtree: no outer join below the site pads ``x``.

A conjunct over ``x`` alone restricting ``x`` at its site is a *local predicate* of ``x``. So is the part of a
conjunct over several references that constrains ``x`` alone (``implied_part``): of ``(x.a = 1 AND y.b = 2)
OR (x.a = 3 AND y.b = 4)`` it is ``x.a = 1 OR x.a = 3``, TPC-DS q41's item filter inside a correlated
subquery. The part is TRUE on every row where the conjunct is TRUE, so a row of ``x`` on which it is not
TRUE makes the conjunct not TRUE whatever the other references hold, and fails the site as the conjunct's
own failure would: analysing the statement as if the part were one more conjunct at the same site changes
no result. It is never written into the SQL Spark runs (only statistics and block descriptions judge it),
so it raises nothing; whether the conjunct itself may raise on rows pruning removes is
``rewriter/raising.py``'s question, asked of the conjunct as written. The same argument makes a disjunction's
*common factors* (``common_factors``: a conjunct that every disjunct has, such as TPC-DS q85's
``cd1.cd_marital_status = cd2.cd_marital_status`` repeated in each of three disjuncts) conjuncts of its site
for the analysis (``FromClause.factors``); Spark's optimizer draws them out the same way (its
BooleanSimplification rewrites ``(a AND b) OR (a AND c)`` to ``a AND (b OR c)``). An equality
``a.x = b.y`` at a site that restricts ``b`` carries a diP from ``a`` into ``b``: a row of ``b`` whose value
no row of ``a`` that reaches the site holds fails the equality there (NULLs never satisfy it). Equalities
of inner joins and WHERE form column equivalence classes; an implied equality holds on every row that
leaves the lowest site above all the equalities it was derived from, so it is placed there.

Anything this model does not cover — an outer join with USING or NATURAL (its output column is a
COALESCE of both sides), a LATERAL join, a join form it does not know — makes the whole FROM clause
``refused``: its references are read whole and exchange no diPs through it.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator

from sqlglot import exp

# Marks an original Join written with USING or NATURAL (set by ``table_refs.annotate`` before qualification,
# which rewrites USING into ON and would otherwise hide it).
USING = "dipper_using"
# Join arguments this module understands; any other that is set refuses the FROM clause.
_KNOWN_JOIN_ARGS = {"this", "on", "side", "kind", "using", "method", "hint"}
_CACHE = "dipper_from_clause"


@dataclasses.dataclass(frozen=True, eq=False)
class Site:
    """Where conjuncts are applied: one join's ON clause, or the WHERE clause (``kind == "where"``)."""

    kind: str  # where | inner | cross | left | right | full | semi | anti
    restricts: frozenset[str]  # aliases whose rows failing a conjunct here are gone for good
    visible: frozenset[str]  # aliases a conjunct here may mention
    parent: Site | None
    depth: int

    @property
    def inner(self) -> bool:
        """Whether every row leaving this site satisfies its conjuncts (equalities here form classes)."""
        return self.kind in ("where", "inner", "cross")

    def ancestors(self) -> Iterator[Site]:
        site: Site | None = self
        while site is not None:
            yield site
            site = site.parent


@dataclasses.dataclass(frozen=True)
class Conjunct:
    node: exp.Expression
    site: Site


@dataclasses.dataclass(frozen=True)
class FromClause:
    aliases: frozenset[str]  # every source of the FROM clause, at any nesting depth
    null_supplied: frozenset[str]  # sources an outer join may pad with NULLs in the rows WHERE sees
    where: Site
    conjuncts: tuple[Conjunct, ...]  # every ON and WHERE conjunct, with its site
    refused: str | None = None  # a construct this model does not cover: nothing here may prune

    @functools.cached_property
    def factors(self) -> tuple[Conjunct, ...]:
        """The common factors of the conjuncts' disjunctions (``common_factors``), each at its disjunction's
        site: TRUE on every row where the disjunction is, so the analysis may read them as conjuncts there
        (module docstring). Nodes of the statement, not copies; never written into the SQL."""
        if self.refused:
            return ()
        return tuple(Conjunct(f, c.site) for c in self.conjuncts for f in common_factors(c.node))

    def local_predicates(self) -> dict[str, list[exp.Expression]]:
        """Per alias, the conjuncts over it alone that may prune it (module docstring)."""
        out: dict[str, list[exp.Expression]] = {}
        if self.refused:
            return out
        for c in self.conjuncts:
            owner = single_owner(c.node)
            if owner is not None:
                if owner in c.site.restricts:
                    out.setdefault(owner, []).append(c.node)
                continue
            for alias in sorted({col.table for col in c.node.find_all(exp.Column)} & c.site.restricts):
                part = implied_part(c.node, alias)
                if part is not None:
                    out.setdefault(alias, []).append(part)
        return out

    def single_alias_conjuncts(self) -> dict[str, list[exp.Expression]]:
        """Per alias, every conjunct over it alone wherever it stands, local or not: Spark may push any of
        them down to the scan and evaluate it on every row it reads (``rewriter/raising.py``)."""
        out: dict[str, list[exp.Expression]] = {}
        for c in self.conjuncts:
            owner = single_owner(c.node)
            if owner is not None:
                out.setdefault(owner, []).append(c.node)
        return out

    def may_receive(self, alias: str) -> bool:
        """Whether a filter on the rows WHERE sees (a semi join in WHERE, a filter from an enclosing query)
        may prune ``alias``: no outer join of this FROM clause pads it."""
        return self.refused is None and alias in self.where.restricts


def from_clause(select: exp.Select) -> FromClause:
    """The FROM clause of ``select`` (a SELECT of the qualified analysis copy), computed once per node."""
    cached = select.meta.get(_CACHE)
    if cached is None:
        cached = _build(select)
        select.meta[_CACHE] = cached
    return cached


def lowest_common_site(sites: list[Site]) -> Site:
    """The lowest site that is an ancestor of (or one of) every site given."""
    common = None
    for site in sites:
        chain = list(site.ancestors())
        common = chain if common is None else [s for s in chain if any(s is c for c in common)]
    assert common, "sites of one FROM clause share the WHERE site"
    return max(common, key=lambda s: s.depth)


def single_owner(conjunct: exp.Expression) -> str | None:
    """The one alias all columns of ``conjunct`` belong to; None if several, none, or a subquery."""
    if conjunct.find(exp.Subquery, exp.Select, exp.Exists):
        return None
    owners = {c.table for c in conjunct.find_all(exp.Column)}
    if len(owners) != 1:
        return None
    return owners.pop() or None


def implied_part(e: exp.Expression, alias: str) -> exp.Expression | None:
    """A filter over ``alias`` alone that is TRUE wherever ``e`` is TRUE, read off ``e``'s AND/OR structure,
    or None if that structure implies nothing about ``alias`` alone (module docstring).

    A conjunction implies the conjunction of what its parts imply; a disjunction implies the disjunction of
    what each disjunct implies, and nothing if one disjunct implies nothing about ``alias``. Any other
    expression implies itself if it is over ``alias`` alone (``single_owner``: no subquery, no column of
    another reference, a column of an enclosing query counting as one), else nothing. Three-valued logic
    keeps each step: an AND is TRUE only where every part is, an OR only where some disjunct is. The result
    is a new expression built of copies; ``e`` is not changed."""
    while isinstance(e, exp.Paren):
        e = e.this
    if isinstance(e, exp.And):
        parts = [p for p in (implied_part(c, alias) for c in conjuncts(e)) if p is not None]
        return exp.and_(*parts, copy=False) if parts else None
    if isinstance(e, exp.Or):
        left, right = implied_part(e.this, alias), implied_part(e.expression, alias)
        return exp.or_(left, right, copy=False) if left is not None and right is not None else None
    return e.copy() if single_owner(e) == alias else None


def common_factors(e: exp.Expression) -> list[exp.Expression]:
    """The conjuncts every disjunct of the disjunction ``e`` has, [] if ``e`` is not a disjunction: TRUE
    wherever ``e`` is TRUE (an OR is TRUE only where a disjunct is, an AND only where each of its parts is).
    A disjunct has its own conjuncts and, recursively, the common factors of those that are disjunctions;
    ``a = b`` and ``b = a`` are one conjunct. Equal text is equal value: a statement calling a nondeterministic
    function is declined before any analysis (``rewriter/modelled.py``). The nodes returned are those of the
    first disjunct."""
    disjuncts = _operands(e, exp.Or)
    if len(disjuncts) < 2:
        return []
    first, *others = [_implied_conjuncts(d) for d in disjuncts]
    out: list[exp.Expression] = []
    for c in first:
        if all(any(_same(c, o) for o in other) for other in others) and not any(_same(c, o) for o in out):
            out.append(c)
    return out


def _implied_conjuncts(e: exp.Expression) -> list[exp.Expression]:
    return [f for c in conjuncts(e) for f in (c, *common_factors(c))]


def _same(a: exp.Expression, b: exp.Expression) -> bool:
    """Whether two conjuncts are one filter as written (an equality read either way round)."""
    if a == b:
        return True
    return isinstance(a, exp.EQ) and isinstance(b, exp.EQ) and a.this == b.expression and a.expression == b.this


def conjuncts(e: exp.Expression | None) -> list[exp.Expression]:
    """The top-level AND-ed parts of ``e``, parentheses looked through."""
    return _operands(e, exp.And)


def _operands(e: exp.Expression | None, kind: type[exp.Connector]) -> list[exp.Expression]:
    """The parts of ``e`` joined by ``kind`` (AND or OR) at its top level, parentheses looked through."""
    if e is None:
        return []
    while isinstance(e, exp.Paren):
        e = e.this
    if isinstance(e, kind):
        return [part for side in (e.this, e.expression) for part in _operands(side, kind)]
    return [e]


# -- building the tree ---------------------------------------------------------------------------------------

@dataclasses.dataclass
class _Node:
    """A subtree of the FROM clause: its aliases, those an outer join inside pads, those visible above it."""

    aliases: frozenset[str]
    null_supplied: frozenset[str]
    visible: frozenset[str]
    joins: list[tuple[exp.Join, _Node, _Node]]  # the joins of this subtree, each with its two children


class _Refused(Exception):
    pass


def _build(select: exp.Select) -> FromClause:
    from_ = select.args.get("from_")
    where = select.args.get("where")
    if from_ is None:
        site = Site("where", frozenset(), frozenset(), None, 0)
        return FromClause(frozenset(), frozenset(), site, tuple(Conjunct(c, site) for c in conjuncts(where and where.this)))
    try:
        root = _left_deep(from_.this, select.args.get("joins") or [])
        if len(root.joins) != _joins_in(from_.this) + sum(1 + _joins_in(j.this) for j in select.args.get("joins") or []):
            raise _Refused("a join this model did not place")  # a new sqlglot shape: never guess
    except _Refused as e:
        site = Site("where", frozenset(), frozenset(), None, 0)
        return FromClause(frozenset(), frozenset(), site, (), refused=str(e))
    where_site = Site("where", root.aliases - root.null_supplied, root.visible, None, 0)
    found = [Conjunct(c, where_site) for c in conjuncts(where.this if where is not None else None)]
    _sites(root, where_site, found)
    return FromClause(root.aliases, root.null_supplied, where_site, tuple(found))


def _left_deep(first: exp.Expression, joins: list[exp.Join]) -> _Node:
    node = _item(first)
    for join in joins:
        node = _join(join, node, _item(join.this))
    return node


def _item(item: exp.Expression) -> _Node:
    """One FROM/JOIN item: a table or derived table (a leaf), or a parenthesised join (a subtree). sqlglot
    keeps ``(x JOIN y ON ...)`` as the item ``x`` (or a parenthesised item) carrying the joins that follow
    it inside the parentheses."""
    if isinstance(item, exp.Lateral):
        raise _Refused("a LATERAL join")
    nested = isinstance(item, (exp.Subquery, exp.Paren)) and not isinstance(item.this, (exp.Select, exp.SetOperation))
    if nested and isinstance(item, exp.Subquery) and item.alias:
        raise _Refused("an aliased parenthesised join")
    if nested:
        node = _item(item.this)
    else:
        alias = item.alias_or_name
        if not alias:
            raise _Refused(f"a FROM item without a name ({type(item).__name__})")
        node = _Node(frozenset({alias}), frozenset(), frozenset({alias}), [])
    for join in item.args.get("joins") or []:
        node = _join(join, node, _item(join.this))
    return node


def _joins_in(item: exp.Expression) -> int:
    """Join nodes inside one FROM item, not counting those of derived tables' own SELECTs."""
    if isinstance(item, (exp.Select, exp.SetOperation)):
        return 0
    found = 0
    for child in item.iter_expressions():
        found += (1 if isinstance(child, exp.Join) else 0) + _joins_in(child)
    return found


def _kind(join: exp.Join) -> str:
    extra = {k for k, v in join.args.items() if v} - _KNOWN_JOIN_ARGS
    if extra:
        raise _Refused(f"a join with {', '.join(sorted(extra))}")
    side, kind, method = (join.side or "").upper(), (join.kind or "").upper(), (join.method or "").upper()
    if method not in ("", "NATURAL"):
        raise _Refused(f"a {method} join")
    if kind in ("SEMI", "ANTI") and side in ("", "LEFT"):
        out = kind.lower()
    elif kind in ("", "OUTER", "INNER") and side in ("LEFT", "RIGHT", "FULL"):
        out = side.lower()
    elif side == "" and kind in ("", "INNER"):
        out = "inner"
    elif side == "" and kind == "CROSS":
        out = "cross"
    else:
        raise _Refused(f"a {side} {kind} join".replace("  ", " "))
    if out in ("left", "right", "full") and (join.meta.get(USING) or join.args.get("using") or method):
        raise _Refused(f"a {out} outer join with USING or NATURAL")
    return out


def _join(join: exp.Join, left: _Node, right: _Node) -> _Node:
    kind = _kind(join)
    if left.aliases & right.aliases:
        raise _Refused("a name used twice in one FROM clause")
    aliases = left.aliases | right.aliases
    if kind in ("inner", "cross"):
        nulls, visible = left.null_supplied | right.null_supplied, left.visible | right.visible
    elif kind == "left":
        nulls, visible = left.null_supplied | right.aliases, left.visible | right.visible
    elif kind == "right":
        nulls, visible = left.aliases | right.null_supplied, left.visible | right.visible
    elif kind == "full":
        nulls, visible = aliases, left.visible | right.visible
    else:  # semi, anti: the right side is not visible above the join
        nulls, visible = left.null_supplied, left.visible
    join.meta["dipper_kind"] = kind
    return _Node(aliases, nulls, visible, left.joins + right.joins + [(join, left, right)])


def _sites(root: _Node, where: Site, out: list[Conjunct]) -> None:
    """A site per join of ``root``, parents before children, and their ON conjuncts into ``out``."""
    # Walk from the top join down: the last join of a node is its top; its children's joins are below it.
    def visit(node: _Node, parent: Site) -> None:
        if not node.joins:
            return
        join, left, right = node.joins[-1]
        kind = join.meta["dipper_kind"]
        free_left, free_right = left.aliases - left.null_supplied, right.aliases - right.null_supplied
        restricts = {"inner": free_left | free_right, "cross": free_left | free_right, "semi": free_left | free_right,
                     "left": free_right, "anti": free_right, "right": free_left, "full": frozenset()}[kind]
        site = Site(kind, frozenset(restricts), left.visible | right.aliases, parent, parent.depth + 1)
        out.extend(Conjunct(c, site) for c in conjuncts(join.args.get("on")))
        visit(left, site)
        visit(right, site)
    visit(root, where)
