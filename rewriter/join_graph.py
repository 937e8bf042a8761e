"""The join graph of a query: which table references may pass data-induced predicates to which, over which
columns (seed 000 §3.2-3.3; ARCHITECTURE.md §3.4).

Nodes are table references (each alias of a self join is its own node). A :class:`Channel` says that rows
of ``dst`` whose ``dst_column`` value is not among the values ``src_column`` takes in the rows of ``src``
that are read can be skipped without changing the result. Channels come from:

- equi-join conditions in ON and top-level WHERE conjuncts of a SELECT, the equalities every disjunct of
  such a conjunct has (``FromClause.factors``: TPC-DS q85's ``cd1.cd_marital_status =
  cd2.cd_marital_status``, repeated in each disjunct), and the equalities they imply through column
  equivalence classes (``transitive_pairs``). Which way a diP may cross is decided by the
  join tree (``rewriter/join_tree.py``, the one owner of join semantics): into a reference only at a site
  that restricts it — inner joins and WHERE both ways, a LEFT/RIGHT outer join from its preserved side into
  its null-supplying side, FULL joins not at all, LEFT SEMI both ways, LEFT ANTI only into its right side,
  and never into a reference that an outer join below the site pads with NULLs.
- ``d.col = v`` / ``d.col IN (v, ...)`` with constants, as a top-level WHERE conjunct on a derived table's
  or CTE's output column: a channel from no reference (``CONSTANT``) carrying the constants into the
  references behind the column wherever a diP could arrive (the same conditions say the filter commutes
  down to them: TPC-DS q04's ``t_s_firstyear.dyear = 2001`` reaches ``date_dim.d_year`` in every branch).
- ``x = (SELECT y ...)`` as a top-level WHERE conjunct: into ``x`` only (the scalar subquery's value is a
  value of ``y``; pruning the subquery would change it).
- ``x IN (SELECT y ...)`` and ``EXISTS (... WHERE inner.y = outer.x ...)`` as top-level WHERE conjuncts
  (semi joins): both ways, into the outer reference only if no outer join pads it (EXISTS only if the subquery has no aggregate without GROUP BY, which would make
  it return a row on no input). ``NOT EXISTS``, and any other correlated subquery (scalar, under OR, in
  SELECT): only from the outer query into the subquery. ``NOT IN`` only into the subquery, keeping every
  receiving file that may hold a NULL, and only from senders whose files read hold no NULL (``Channel``).
- Derived tables and CTEs are looked through (rules 2, 3 and 6 of §3.3). A column of a derived table that
  is a plain column of a reference inside it *sends* that reference's values (any subset of its rows
  keeps the values inside); it *receives* only if a filter on that column commutes down to the reference:
  the inner SELECT has no LIMIT, window function or global aggregate, the column is a GROUP BY key when
  there is one, and the reference is not null-supplying inside. A CTE read at several places keeps a
  file of a reference inside it if any read needs it (the union of every read's needs, rule 6).

- UNION [ALL] / INTERSECT / EXCEPT (rule 4): a column of a set operation receives in every branch that
  traces it; every INTERSECT branch and EXCEPT's left branch send on their own, a UNION sends the union
  of its branches' diPs.
- Monotone expressions of one column (``a.k + 1 = b.k``, a derived table's ``k + 1 AS k1`` or
  ``year(d) AS y``, ``CAST(k AS BIGINT)``; ``rewriter/monotone.py``) are followed like renames: the endpoint
  records the functions, and both sides' statistics are mapped into the values the join compares
  (``rewriter/dip.py``). Such a column receives through GROUP BY when its column, or the expression
  itself, is a grouping key. Decreasing and other expressions pass nothing: those channels are simply not
  built, which costs skipping, never rows.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable

from sqlglot import exp
from sqlglot.optimizer.scope import Scope

from rewriter.dip import same_domain
from rewriter.join_tree import FromClause, Site, conjuncts, from_clause, lowest_common_site
from rewriter.literals import is_constant
from rewriter.monotone import split_term
from rewriter.predicate import Fn, Term
from rewriter.raising import can_raise, expression_kind, scope_kinds
from stats.model import Kind

ColumnKind = Callable[[str, str], "Kind | None"]  # (db.table, column) -> its kind, None if unknown
from rewriter.table_refs import REF


@dataclasses.dataclass(frozen=True)
class Endpoint:
    ref_id: int
    column: str  # lower case
    can_send: bool
    can_receive: bool
    # Monotone functions, innermost first, from the reference's column to the value the join compares.
    fns: tuple[Fn, ...] = ()
    # Sending from a UNION: the other branches' (reference, column, functions) whose values, with this
    # one's, make up the output's; the diP sent is the union of all of them.
    partners: tuple[tuple[int, str, tuple[Fn, ...]], ...] = ()
    # Receiving through a CTE read at several places: which read this is, and how many there are. The
    # reference inside keeps a file if any read needs it (the union of every read's needs).
    use: tuple[int, int, str] | None = None
    uses: int = 0


CONSTANT = -1  # the source of a constant filter's channel: no reference


@dataclasses.dataclass(frozen=True)
class Channel:
    src: int
    src_column: str
    dst: int
    dst_column: str
    via: str  # what made it: "inner join", "left join", "IN subquery", ...
    # NOT IN: the receiver keeps every file that may hold a NULL in its column (a NULL in the subquery
    # makes NOT IN false or unknown for every row), and the diP is built only if the sender's files that
    # are read hold no NULL (a NULL on the left is decided by whether the subquery is empty at all).
    null_aware: bool = False
    partners: tuple[tuple[int, str, tuple[Fn, ...]], ...] = ()  # the diP is the union over src and these
    dst_use: tuple[int, int, str] | None = None  # the read of a multi-use CTE it arrives through (Endpoint.use)
    dst_uses: int = 0
    src_fns: tuple[Fn, ...] = ()  # the join compares src_fns(src_column) with dst_fns(dst_column)
    dst_fns: tuple[Fn, ...] = ()
    # A constant filter (src CONSTANT): ``derived.col = v`` or ``derived.col IN (v, ...)`` on a derived
    # table's or CTE's output column; these are the literal values, and the "diP" is their set.
    values: tuple[exp.Expression, ...] = ()

    def members(self) -> tuple[tuple[int, str, tuple[Fn, ...]], ...]:
        """Every (reference, column, functions) whose values make up the diP: src, then a UNION's other branches."""
        return ((self.src, self.src_column, self.src_fns),) + self.partners

    def describe(self) -> str:
        """``columns -> column`` (a constant filter: ``values -> column``) for the decision record, functions
        written out."""
        sources = ", ".join(v.sql("spark") for v in self.values) if self.src == CONSTANT else \
            " ∪ ".join(Term(col, fns).sql() for _, col, fns in self.members())
        return f"{sources} -> {Term(self.dst_column, self.dst_fns).sql()}"


def channels(scopes: list[Scope], column_kind: ColumnKind | None = None, ansi: bool = True) -> list[Channel]:
    """The channels of a query, from the scopes of its qualified tree (``table_refs.resolve``).
    ``column_kind(db.table, column)`` types the expressions of derived tables, and ``ansi`` says whether
    they may raise (``rewriter/raising.py``); without types every arithmetic expression may."""
    uses: collections.Counter[int] = collections.Counter()
    by_expression: dict[int, Scope] = {}
    for scope in scopes:
        by_expression[id(scope.expression)] = scope
        # Reads of a derived table or CTE: its FROM / JOIN entries (``sources`` also lists a CTE's name).
        for _, source in scope.selected_sources.values():
            if isinstance(source, Scope):
                uses[id(source)] += 1
    builder = _Builder(uses, by_expression, column_kind or (lambda table, column: None), ansi)
    for scope in scopes:
        if isinstance(scope.expression, exp.Select):
            builder.select(scope)
    return builder.out


class _Builder:
    def __init__(self, uses: collections.Counter[int], by_expression: dict[int, Scope],
                 column_kind: ColumnKind, ansi: bool) -> None:
        self.uses = uses
        self.by_expression = by_expression
        self.column_kind = column_kind
        self.ansi = ansi
        self.out: list[Channel] = []
        self.keys: dict[int, tuple[exp.Expression, ...] | None] = {}  # commuting_keys per SELECT
        # Per SELECT: the expressions it evaluates per row that may raise.
        self.raises: dict[int, list[exp.Expression]] = {}

    def _may_raise(self, scope: Scope, projection: exp.Expression) -> bool:
        """Whether a derived table's SELECT evaluates, on the rows of its references, an expression that may
        raise: then it receives no diP, since Spark evaluates it on the rows a diP would remove. The
        projection the diP arrives through is exempt (and a GROUP BY expression equal to it): it is a
        monotone term whose guards ``dip.satisfy`` checks per file, keeping every file where it may overflow."""
        select = scope.expression
        if id(select) not in self.raises:
            kind_of = scope_kinds(scope, self.column_kind, "")
            group, having = select.args.get("group"), select.args.get("having")
            parts = [*select.expressions, *(c.node for c in from_clause(select).conjuncts),
                     *(group.expressions if group is not None else []), *([having.this] if having is not None else [])]
            self.raises[id(select)] = [p for p in parts if can_raise(p, kind_of, self.ansi)]
        term = projection.unalias()
        return any(p is not projection and p != term for p in self.raises[id(select)])

    # -- one SELECT ----------------------------------------------------------------------------------------
    def select(self, scope: Scope) -> None:
        """Channels over the conjuncts of one SELECT's ON and WHERE clauses, each allowed in the directions the
        join tree says (``rewriter/join_tree.py``): into a reference only where a site restricts it."""
        select = scope.expression
        clause = from_clause(select)
        if select.args.get("laterals") or select.args.get("pivots") or clause.refused:
            return
        equal: list[tuple[Side, Side, Site]] = []  # equalities that hold on every row leaving their site
        top_level_exists: set[int] = set()
        for conjunct in clause.conjuncts:
            node, site = conjunct.node, conjunct.site
            if self._equality(scope, node, site, equal) or site.kind != "where":
                continue  # (subqueries in ON clauses pass nothing)
            if (constant := _constant_filter(node, scope)) is not None:
                column, values = constant
                if column.table in site.restricts:
                    for e in self.endpoints(scope, column.table, column.name):
                        if e.can_receive:
                            self.out.append(Channel(CONSTANT, "", e.ref_id, e.column, "filter on a derived table's output",
                                                    dst_use=e.use, dst_uses=e.uses, dst_fns=e.fns, values=values))
            elif isinstance(node, exp.In) and isinstance(node.this, exp.Column):
                self._in_subquery(scope, node, clause)
            elif isinstance(node, exp.Not) and isinstance(node.this, exp.In) and isinstance(node.this.this, exp.Column):
                self._in_subquery(scope, node.this, clause, negated=True)
            elif isinstance(node, exp.EQ) and (scalar := _scalar_comparison(node)) is not None:
                self._scalar_subquery(scope, *scalar, clause)
            elif isinstance(node, exp.Exists):
                top_level_exists.add(id(node.this))
                self._correlated(scope, node.this, clause, both=_no_global_aggregate(node.this), via="EXISTS")
        for factor in clause.factors:  # equalities every disjunct of a disjunction has (q85's cd1 = cd2)
            self._equality(scope, factor.node, factor.site, equal)
        for a, b, site in transitive_pairs(equal):
            self._across(scope, a, b, site, "inner join (transitive)")
        for child in scope.subquery_scopes:
            if id(child.expression) not in top_level_exists:  # top-level EXISTS was handled above, both ways
                self._correlated(scope, child.expression, clause, both=False, via="correlated subquery")

    def _equality(self, scope: Scope, node: exp.Expression, site: Site, equal: list[tuple[Side, Side, Site]]) -> bool:
        """Channels over ``node`` if it is an equality ``a = b`` (each side a monotone function of one column)
        applied at ``site``, and the pair into ``equal`` if it joins an equivalence class there."""
        pair = _equalities(node) if isinstance(node, exp.EQ) else []
        if not pair:
            return False
        a, b = pair[0]
        if a.table != b.table and {a.table, b.table} <= set(scope.sources) & site.visible:
            self._across(scope, a, b, site, _via(site))
            if site.inner and self._same_domain(scope, a, b):
                equal.append((a, b, site))
        return True

    def _same_domain(self, scope: Scope, a: Side, b: Side) -> bool:
        """Whether ``a = b`` compares two columns of one domain, with no conversion (``dip.same_domain``): only
        such equalities join an equivalence class. Through a conversion equality is not transitive: ``a.s =
        d.k = b.s`` holds for strings '01' and '1' (both read as the integer 1), while ``a.s = b.s`` does not,
        so a diP of b's strings would drop a's '01'; likewise two bigints above 2^53 equal to one double. A
        column of a set operation is left out: its type is the branches' common type, which its first branch
        does not show."""
        kind_of = scope_kinds(scope, self.column_kind, "")

        def domain(side: Side) -> Kind | None:
            source = scope.sources.get(side.table)
            if isinstance(source, Scope) and isinstance(source.expression, exp.SetOperation):
                return None
            return kind_of(side.column)

        ka, kb = domain(a), domain(b)
        return ka is not None and kb is not None and same_domain(ka, kb)

    def _across(self, scope: Scope, a: Side, b: Side, site: Site, via: str) -> None:
        """An equality ``a = b`` applied at ``site``: a diP into each side the site restricts."""
        if b.table in site.restricts:
            self._add(self.side_endpoints(scope, a), self.side_endpoints(scope, b), via)
        if a.table in site.restricts:
            self._add(self.side_endpoints(scope, b), self.side_endpoints(scope, a), via)

    def _add(self, sources: list[Endpoint], receivers: list[Endpoint], via: str, null_aware: bool = False) -> None:
        for s in sources:
            for d in receivers:
                if s.can_send and d.can_receive and d.ref_id not in {s.ref_id, *(r for r, _, _ in s.partners)}:
                    self.out.append(Channel(s.ref_id, s.column, d.ref_id, d.column, via, null_aware, s.partners,
                                            d.use, d.uses, s.fns, d.fns))

    # -- subqueries ----------------------------------------------------------------------------------------
    def _in_subquery(self, scope: Scope, conjunct: exp.In, clause: FromClause, negated: bool = False) -> None:
        """``x [NOT] IN (SELECT y ...)``. IN is a semi join: both ways. NOT IN only into the subquery, NULL-aware
        (see :class:`Channel`), and only from a table column ``x`` that no outer join pads with NULLs."""
        query = conjunct.args.get("query")
        inner_select = query.this if isinstance(query, exp.Subquery) else query
        child = self.by_expression.get(id(inner_select))
        outer = conjunct.this
        first = _leaf_scopes(child)[0].expression if child is not None else None
        if not isinstance(first, exp.Select) or len(first.expressions) != 1 or outer.table not in scope.sources:
            return
        o = self.endpoints(scope, outer.table, outer.name)
        i = self.output_endpoints(child, first.expressions[0].alias_or_name)
        if negated:
            # Only from a table read directly: through a derived table, an outer join inside could pad
            # ``x`` with NULLs that no statistic of the table behind it shows.
            if clause.may_receive(outer.table) and isinstance(scope.sources.get(outer.table), exp.Table):
                self._add(o, i, "NOT IN subquery", null_aware=True)
            return
        self._add(o, i, "IN subquery")
        if clause.may_receive(outer.table):
            self._add(i, o, "IN subquery")

    def _scalar_subquery(self, scope: Scope, outer: exp.Column, query: exp.Subquery, clause: FromClause) -> None:
        """``x = (SELECT y ...)``: the subquery's one value (NULL when it returns no row; an error when it
        returns several, which pruning ``x``'s table cannot hide: the subquery itself is read as before) is
        a value of ``y`` on one of its rows, so ``x``'s rows outside the values ``y`` takes cannot pass.
        Only into ``x``: pruning the subquery by ``x`` would change its value."""
        child = self.by_expression.get(id(query.this))
        first = _leaf_scopes(child)[0].expression if child is not None else None
        if not isinstance(first, exp.Select) or len(first.expressions) != 1 or outer.table not in scope.sources:
            return
        if clause.may_receive(outer.table):
            self._add(self.output_endpoints(child, first.expressions[0].alias_or_name),
                      self.endpoints(scope, outer.table, outer.name), "scalar subquery")

    def _correlated(self, scope: Scope, inner_select: exp.Expression, clause: FromClause, both: bool,
                    via: str) -> None:
        """Channels over ``inner.y = outer.x`` conjuncts of a correlated subquery's WHERE, and over such
        equalities every disjunct of one of its conjuncts has (q41's ``i_manufact = i1.i_manufact``)."""
        child = self.by_expression.get(id(inner_select))
        if child is None or not isinstance(inner_select, exp.Select):
            return
        where = inner_select.args.get("where")
        inner_clause = from_clause(inner_select)
        factors = [f.node for f in inner_clause.factors if f.site is inner_clause.where]
        for a, b in _equalities(where.this if where is not None else None) + [p for f in factors for p in _equalities(f)]:
            for inner, outer in ((a, b), (b, a)):
                if inner.table in child.sources and outer.table not in child.sources and outer.table in scope.sources:
                    i = self.side_endpoints(child, inner)
                    o = self.side_endpoints(scope, outer)
                    if inner_clause.may_receive(inner.table):
                        self._add(o, i, via)
                    if both and clause.may_receive(outer.table):
                        self._add(i, o, via)

    # -- looking through derived tables ------------------------------------------------------------------------
    def side_endpoints(self, scope: Scope, side: Side) -> list[Endpoint]:
        """The reference columns behind one side of an equality, with the side's functions applied last."""
        return [_then(e, side.fns) for e in self.endpoints(scope, side.table, side.name)]

    def endpoints(self, scope: Scope, alias: str, column: str) -> list[Endpoint]:
        """The reference columns behind ``alias.column`` of ``scope``: one for a table or a derived SELECT,
        one per branch of a set operation, none when the column is not a plain column below. Through a
        CTE read at several places, each endpoint says which read it is (``Endpoint.use``)."""
        source = scope.sources.get(alias)
        if isinstance(source, exp.Table) and REF in source.meta:
            return [Endpoint(source.meta[REF], column.lower(), True, True)]
        if isinstance(source, Scope):
            found = self.output_endpoints(source, column)
            if self.uses[id(source)] > 1:  # a CTE read at several places receives the union of their needs
                site = (id(source), id(scope), alias)
                return [dataclasses.replace(e, use=site, uses=self.uses[id(source)]) if e.use is None
                        else dataclasses.replace(e, can_receive=False) for e in found]
            return found
        return []

    def output_endpoints(self, child: Scope, name: str) -> list[Endpoint]:
        """The reference columns behind output column ``name`` of a derived table, CTE or subquery."""
        expression = child.expression
        if isinstance(expression, exp.SetOperation):
            return self._set_operation_endpoints(child, name)
        if not isinstance(expression, exp.Select):
            return []
        projection = next((p for p in expression.expressions if p.alias_or_name.lower() == name.lower()), None)
        return self._projection_endpoints(child, projection)

    def _projection_endpoints(self, child: Scope, projection: exp.Expression | None) -> list[Endpoint]:
        select = child.expression
        expression = projection.unalias() if projection is not None else None
        side = _side(expression) if expression is not None else None
        if side is None:
            return []
        if id(select) not in self.keys:
            self.keys[id(select)] = commuting_keys(select)
        keys = self.keys[id(select)]
        # A filter on a function of a grouping key (or on a grouping expression) keeps or drops whole groups.
        receive = keys is not None and (keys == () or side.column in keys or expression in keys) and \
            from_clause(select).may_receive(side.table) and not self._may_raise(child, projection)
        return [dataclasses.replace(e, can_receive=e.can_receive and receive) for e in self.side_endpoints(child, side)]

    def _set_operation_endpoints(self, child: Scope, name: str) -> list[Endpoint]:
        """UNION [ALL], INTERSECT and EXCEPT, output columns matched by position (§3.3 rule 4)."""
        branches = _leaf_scopes(child)
        first = branches[0].expression if branches else None
        if not isinstance(first, exp.Select):
            return []
        names = [p.alias_or_name.lower() for p in first.expressions]
        if name.lower() not in names or not self._branches_agree(branches, names.index(name.lower())):
            return []
        return self._branch_endpoints(child, names.index(name.lower()))

    def _branches_agree(self, branches: list[Scope], position: int) -> bool:
        """Whether every branch's column at ``position`` is of one domain (one kind and scale, not floating
        point): then the set operation's type, the branches' common type, holds each branch's values unchanged.
        INT with FLOAT is FLOAT (16777217 becomes 16777216.0, equal to an INT branch's 16777216), DECIMAL(7,2)
        with DECIMAL(7,3) another scale: a diP in one branch's domain would compare other values than Spark."""
        kinds = []
        for leaf in branches:
            select = leaf.expression
            if not isinstance(select, exp.Select) or position >= len(select.expressions):
                return False
            kind = expression_kind(select.expressions[position].unalias(), scope_kinds(leaf, self.column_kind, ""))
            if kind is None:
                return False
            kinds.append(kind)
        return all(same_domain(kinds[0], k) for k in kinds)

    def _branch_endpoints(self, scope: Scope, position: int) -> list[Endpoint]:
        """A filter on an output column holds for every branch, so each branch's column may receive (not
        below a LIMIT). An output value is a value of every INTERSECT branch and of EXCEPT's left branch,
        so those send on their own; a UNION sends the union of one sender per branch (``partners``)."""
        expression = scope.expression
        if isinstance(expression, exp.Select):
            return self._projection_endpoints(scope, expression.expressions[position]) \
                if position < len(expression.expressions) else []
        if not isinstance(expression, exp.SetOperation) or len(scope.set_operation_scopes) != 2:
            return []
        receive = not (expression.args.get("limit") or expression.args.get("offset"))
        left, right = (self._branch_endpoints(b, position) for b in scope.set_operation_scopes)
        if isinstance(expression, exp.Union):
            # One sender per branch bounds that branch; together they bound the union.
            a = next((e for e in left if e.can_send), None)
            b = next((e for e in right if e.can_send), None)
            union = dataclasses.replace(a, partners=a.partners + ((b.ref_id, b.column, b.fns),) + b.partners) \
                if a is not None and b is not None else None
            left = [union if union is not None and e is a else dataclasses.replace(e, can_send=False) for e in left]
            right = [dataclasses.replace(e, can_send=False) for e in right]
        elif isinstance(expression, exp.Except):
            right = [dataclasses.replace(e, can_send=False) for e in right]
        return [dataclasses.replace(e, can_receive=e.can_receive and receive) for e in left + right]


def transitive_pairs(equal: list[tuple[Side, Side, Site]]) -> list[tuple[Side, Side, Site]]:
    """Column equivalence classes (seed 000 §3.2): ``a.x = b.y`` and ``b.y = c.z`` give ``a.x = c.z``.

    Sound because every equality given holds on every row leaving its site (an inner join's ON clause or
    WHERE), and every site of a class lies below the lowest site above them all: a row leaving that site
    has passed every equality of the class, so every pair of columns in the class is equal on it, exactly
    like a written equi-join applied there (``rewriter/join_tree.py`` then says which sides it restricts).
    Only plain columns are classed: ``k + 1 = j`` and ``j = m`` do not make ``k + 1`` and ``m`` one column.
    Returns the pairs of a class that no equality states directly, each once, in a stable order, with
    the site they hold at."""
    parent: dict[tuple[str, str], tuple[str, str]] = {}
    sides: dict[tuple[str, str], Side] = {}

    def find(k: tuple[str, str]) -> tuple[str, str]:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    direct = set()
    placed: list[tuple[tuple[str, str], Site]] = []
    for a, b, site in equal:
        if a.fns or b.fns:
            continue
        ka, kb = (a.table.lower(), a.name.lower()), (b.table.lower(), b.name.lower())
        for k, side in ((ka, a), (kb, b)):
            parent.setdefault(k, k)
            sides.setdefault(k, side)
        parent[find(ka)] = find(kb)
        direct |= {(ka, kb), (kb, ka)}
        placed.append((ka, site))
    classes: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for k in parent:
        classes.setdefault(find(k), []).append(k)
    sites: dict[tuple[str, str], list[Site]] = {}
    for k, site in placed:
        sites.setdefault(find(k), []).append(site)
    out = []
    for root, members in classes.items():
        site = lowest_common_site(sites[root])
        for i, x in enumerate(members):
            for y in members[i + 1:]:
                if x[0] != y[0] and (x, y) not in direct:
                    out.append((sides[x], sides[y], site))
    return out


def _constant_filter(node: exp.Expression, scope: Scope) -> tuple[exp.Column, tuple[exp.Expression, ...]] | None:
    """``alias.col = v`` or ``alias.col IN (v, ...)`` with constant values, where ``alias`` is a derived table
    or CTE of ``scope`` (a table's own filters are its local predicates); or None."""
    column, values = None, ()
    if isinstance(node, exp.EQ):
        for a, b in ((node.this, node.expression), (node.expression, node.this)):
            if isinstance(a, exp.Column) and is_constant(b):
                column, values = a, (b,)
                break
    elif isinstance(node, exp.In) and not node.args.get("query") and not node.args.get("unnest") and \
            not node.args.get("field") and isinstance(node.this, exp.Column):
        if node.expressions and all(is_constant(v) or isinstance(v, exp.Null) for v in node.expressions):
            column, values = node.this, tuple(node.expressions)
    if column is None or not isinstance(scope.sources.get(column.table), Scope):
        return None
    return column, values


def _scalar_comparison(node: exp.EQ) -> tuple[exp.Column, exp.Subquery] | None:
    """``column = (subquery)`` in either order, or None."""
    for a, b in ((node.this, node.expression), (node.expression, node.this)):
        if isinstance(a, exp.Column) and isinstance(b, exp.Subquery) and isinstance(b.this, (exp.Select, exp.SetOperation)):
            return a, b
    return None


def _leaf_scopes(scope: Scope) -> list[Scope]:
    if not isinstance(scope.expression, exp.SetOperation):
        return [scope]
    return [leaf for branch in scope.set_operation_scopes for leaf in _leaf_scopes(branch)]


def commuting_keys(select: exp.Select) -> tuple[exp.Expression, ...] | None:
    """Which filters above this SELECT may be applied below it instead (§3.3 rules 1-3): None, none of
    them; (), any; otherwise filters on these GROUP BY keys."""
    if select.args.get("limit") or select.args.get("offset") or select.args.get("laterals"):
        return None
    if any(p.find(exp.Window) for p in select.expressions):
        return None
    group = select.args.get("group")
    if group is None:
        return None if global_aggregate(select) else ()
    if any(group.args.get(k) for k in ("rollup", "cube", "grouping_sets", "totals")) or not group.expressions:
        return None  # super-aggregate rows would change
    return tuple(group.expressions)


def _no_global_aggregate(select: exp.Expression) -> bool:
    return isinstance(select, exp.Select) and not global_aggregate(select)


def global_aggregate(select: exp.Select) -> bool:
    """Whether ``select`` aggregates all its input into one row: no GROUP BY, and an aggregate in its
    projections or a HAVING clause (Spark reads HAVING without GROUP BY as a global aggregate). Such a
    SELECT returns a row on empty input, so no filter commutes below it and, under EXISTS, its rows do
    not come from matches (``EXISTS (... HAVING count(*) = 0)`` is true exactly when nothing matches)."""
    if select.args.get("group") is not None:
        return False
    return select.args.get("having") is not None or any(p.find(exp.AggFunc) for p in select.expressions)


def _via(site: Site) -> str:
    return {"where": "inner join (WHERE)", "inner": "inner join", "cross": "cross join", "left": "left outer join",
            "right": "right outer join", "semi": "left semi join", "anti": "left anti join"}.get(site.kind, site.kind)


@dataclasses.dataclass(frozen=True)
class Side:
    """One side of an equality: a column with monotone functions applied, innermost first."""

    column: exp.Column
    fns: tuple[Fn, ...] = ()

    @property
    def table(self) -> str:
        return self.column.table

    @property
    def name(self) -> str:
        return self.column.name


def _side(node: exp.Expression) -> Side | None:
    term = split_term(node)
    return Side(*term) if term is not None and term[0].table else None


def _then(e: Endpoint, fns: tuple[Fn, ...]) -> Endpoint:
    """``e`` seen through ``fns`` applied after its own functions (a UNION's other branches too)."""
    if not fns:
        return e
    return dataclasses.replace(e, fns=e.fns + fns, partners=tuple((r, c, f + fns) for r, c, f in e.partners))


def _equalities(on: exp.Expression | None) -> list[tuple[Side, Side]]:
    """The ``a = b`` conjuncts of ``on`` where each side is a monotone function of one column."""
    out = []
    for c in conjuncts(on):
        if isinstance(c, exp.EQ):
            a, b = _side(c.this), _side(c.expression)
            if a is not None and b is not None:
                out.append((a, b))
    return out
