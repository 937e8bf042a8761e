"""Find every table reference of a query and the predicates that restrict it on its own.

Resolution works on a qualified *copy* of the parsed query (sqlglot's ``qualify`` with the schemas the
statistics store knows); the original tree is kept untouched because its character offsets are what the
emitter splices into. Each original ``exp.Table`` carries ``meta['dipper_ref']`` so the two trees can be
matched.

Which conjuncts are *local* to a reference (ARCHITECTURE.md §3.4) — why no row can be lost:

- WHERE conjuncts whose columns all belong to the reference filter its rows before anything else sees
  them, unless the reference is on the null-supplying side of an outer join: there a skipped row would
  turn into a NULL-extended row that, e.g., ``WHERE b.x IS NULL`` keeps. Those are not used.
- ON conjuncts of an inner join, and ON conjuncts on the null-supplying side of an outer join or on the
  right side of a semi/anti join, remove rows of that side that could never match. ON conjuncts on a
  preserved side never remove rows (the row survives with NULLs), so they are not used; a full outer
  join has no usable ON conjuncts.
- Conjuncts with subqueries, or with columns of other references, are not local.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from sqlglot import exp
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, traverse_scope
from sqlglot.schema import MappingSchema

from rewriter.errors import RewriteError

REF = "dipper_ref"
_SIMPLE_TABLE_ARGS = {"this", "db", "catalog", "alias"}


@dataclasses.dataclass
class TableRef:
    ref_id: int
    table: str  # db.table, lower case
    alias: str  # the name the scope knows it by
    predicates: list[exp.Expression]  # local conjuncts, qualified, from the analysis copy
    refused: str | None = None  # why this reference must be read whole


def annotate(tree: exp.Expression) -> list[exp.Table]:
    """Number the original tree's table nodes; returns them indexed by that number."""
    tables = list(tree.find_all(exp.Table))
    for i, t in enumerate(tables):
        t.meta[REF] = i
    return tables


def table_name(t: exp.Table, database: str) -> str:
    return f"{(t.db or database).lower()}.{t.name.lower()}"


def sqlglot_schema(schemas: Mapping[str, Mapping[str, str]]) -> MappingSchema:
    """sqlglot's schema for ``{db.table: {column: spark type}}`` (build once per statistics version: it
    parses every type)."""
    nested: dict[str, dict[str, dict[str, str]]] = {}
    for name, columns in schemas.items():
        db, _, table = name.partition(".")
        nested.setdefault(db, {})[table] = dict(columns)
    return MappingSchema(nested, dialect="spark")


def resolve(tree: exp.Expression, database: str, schema: MappingSchema) -> tuple[list[TableRef], list[Scope]]:
    """Table references of ``tree`` (already annotated) with their local predicates, columns qualified
    with the schemas of the tables the statistics store knows; and the scopes of the qualified copy."""
    qualified = None
    # Stars are expanded on the copy when the schemas allow (ORDER BY 1 over SELECT * needs it); without
    # schemas for every source, qualification is retried leaving them alone.
    for expand_stars in (True, False):
        try:
            qualified = qualify(tree.copy(), schema=schema, db=database, dialect="spark",
                                validate_qualify_columns=False, expand_stars=expand_stars,
                                quote_identifiers=False, identify=False)
            break
        except Exception as e:  # noqa: BLE001 - sqlglot raises many types; any means "cannot analyse"
            error = e
    if qualified is None:
        raise RewriteError(f"could not resolve the query's columns: {error}")
    refs: list[TableRef] = []
    scopes = list(traverse_scope(qualified))
    for scope in scopes:
        refs.extend(_scope_refs(scope, database))
    return refs, scopes


def _scope_refs(scope: Scope, database: str) -> list[TableRef]:
    select = scope.expression
    tables = {alias: src for alias, src in scope.sources.items() if isinstance(src, exp.Table) and REF in src.meta}
    if not tables:
        return []
    refs = {alias: TableRef(t.meta[REF], table_name(t, database), alias, []) for alias, t in tables.items()}
    if not isinstance(select, exp.Select):
        for r in refs.values():
            r.refused = f"table in a {type(select).__name__} scope"
        return list(refs.values())
    if select.args.get("laterals") or select.args.get("pivots") or any(t.args.get("pivots") for t in tables.values()):
        for r in refs.values():
            r.refused = "LATERAL VIEW or PIVOT in the same SELECT"
        return list(refs.values())

    null_supplying: set[str] = set()
    usable_on: list[tuple[exp.Expression, set[str]]] = []
    from_ = select.args.get("from_")
    seen: list[str] = [_alias(from_.this)] if from_ is not None else []
    for join in select.args.get("joins") or []:
        right = _alias(join.this)
        side, kind = (join.side or "").upper(), (join.kind or "").upper()
        on = join.args.get("on")
        conjuncts = list(on.flatten()) if isinstance(on, exp.And) else ([on] if on is not None else [])
        if kind in ("SEMI", "ANTI") or side == "LEFT":
            allowed = {right}
        elif side == "RIGHT":
            allowed = set(seen)
        elif side == "FULL":
            allowed = set()
        else:
            allowed = set(seen) | {right}
        if side == "LEFT" and kind not in ("SEMI", "ANTI"):
            null_supplying.add(right)
        elif side == "RIGHT":
            null_supplying.update(seen)
        elif side == "FULL":
            null_supplying.update(seen + [right])
        usable_on.extend((c, allowed) for c in conjuncts)
        if kind not in ("SEMI", "ANTI"):
            seen.append(right)

    where = select.args.get("where")
    where_conjuncts = list(where.this.flatten()) if where is not None and isinstance(where.this, exp.And) else \
        ([where.this] if where is not None else [])
    candidates = [(c, set(refs) - null_supplying) for c in where_conjuncts] + usable_on
    for conjunct, allowed in candidates:
        owner = _single_owner(conjunct)
        if owner in refs and owner in allowed:
            refs[owner].predicates.append(conjunct)
    return list(refs.values())


def _alias(node: exp.Expression) -> str:
    return node.alias_or_name


def _single_owner(conjunct: exp.Expression) -> str | None:
    """The one table alias all columns of ``conjunct`` belong to; None if several, none, or a subquery."""
    if conjunct.find(exp.Subquery, exp.Select, exp.Exists):
        return None
    owners = {c.table for c in conjunct.find_all(exp.Column)}
    if len(owners) != 1:
        return None
    owner = owners.pop()
    return owner or None


def emittable(original: exp.Table, tree: exp.Expression, alias: str) -> str | None:
    """Why the original reference cannot be replaced by a subquery, or None if it can."""
    if set(k for k, v in original.args.items() if v) - _SIMPLE_TABLE_ARGS:
        extra = sorted(set(k for k, v in original.args.items() if v) - _SIMPLE_TABLE_ARGS)
        return f"table reference with {', '.join(extra)}"
    if not isinstance(original.parent, (exp.From, exp.Join)):
        return "table reference outside FROM/JOIN"
    if original.alias == "" and original.db:
        for col in tree.find_all(exp.Column):
            if col.args.get("db") and col.table.lower() == original.name.lower():
                return "columns qualified with the database name"
    return None
