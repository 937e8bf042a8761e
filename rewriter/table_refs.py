"""Find every table reference of a query and the predicates that restrict it on its own.

Resolution works on a qualified *copy* of the parsed query (sqlglot's ``qualify`` with the schemas the
statistics store knows); the original tree is kept untouched because its character offsets are what the
emitter splices into. Each original ``exp.Table`` carries ``meta['dipper_ref']`` so the two trees can be
matched.

Which conjuncts are *local* to a reference, and why no row can be lost, is decided by
``rewriter/join_tree.py`` (the one owner of join semantics): a conjunct over one reference alone, applied at
a site (an ON clause or WHERE) that drops that reference's failing rows for good.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from sqlglot import exp
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, traverse_scope
from sqlglot.schema import MappingSchema

from rewriter.errors import RewriteError
from rewriter.join_tree import USING, from_clause

REF = "dipper_ref"
_SIMPLE_TABLE_ARGS = {"this", "db", "catalog", "alias"}


@dataclasses.dataclass
class TableRef:
    ref_id: int
    table: str  # db.table, lower case
    alias: str  # the name the scope knows it by
    predicates: list[exp.Expression]  # local conjuncts, qualified, from the analysis copy
    refused: str | None = None  # why this reference must be read whole
    # Every conjunct over this reference alone in its SELECT, local or not: Spark may evaluate each on every
    # row it reads, so files where one may raise an error are read (rewriter/raising.py).
    evaluated: list[exp.Expression] = dataclasses.field(default_factory=list)


def annotate(tree: exp.Expression) -> list[exp.Table]:
    """Number the original tree's table nodes; returns them indexed by that number."""
    tables = list(tree.find_all(exp.Table))
    for i, t in enumerate(tables):
        t.meta[REF] = i
    for join in tree.find_all(exp.Join):  # qualification turns USING into ON; the join tree must still know
        if join.args.get("using") or join.args.get("method"):
            join.meta[USING] = True
    return tables


def table_name(t: exp.Table, database: str) -> str:
    """``db.table`` as the store names it; a table of another catalog keeps its catalog in the name, so no
    statistics ever match it."""
    name = f"{(t.db or database).lower()}.{t.name.lower()}"
    return name if not t.catalog or t.catalog.lower() == "spark_catalog" else f"{t.catalog.lower()}.{name}"


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

    clause = from_clause(select)
    if clause.refused:
        for r in refs.values():
            r.refused = f"the FROM clause has {clause.refused}"
        return list(refs.values())
    for alias, predicates in clause.local_predicates().items():
        if alias in refs:
            refs[alias].predicates.extend(predicates)
    for alias, evaluated in clause.single_alias_conjuncts().items():
        if alias in refs:
            refs[alias].evaluated.extend(evaluated)
    return list(refs.values())


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
