"""The rewriter's one entry point: ``rewrite(sql, context) -> Rewrite``.

The pipeline, in order, and why that order:

1. ``_parse``: one statement, a query. Anything else (DDL, DML, SET, USE, several statements, text sqlglot
   cannot parse) passes through byte for byte: there is nothing to prune, and guessing is not allowed.
2. ``resolve`` (``rewriter/table_refs.py``): every table reference and its local conjuncts, on a qualified
   copy, because which conjuncts may prune a reference depends on the joins around it.
3. ``_prune``: per reference, translate (``rewriter/falsify.py``) and evaluate (``rewriter/evaluate.py``)
   its conjuncts over its file statistics. Needs 2's conjuncts and the statistics.
4. ``splice`` (``rewriter/emit.py``): the minimal edit, last, from the original text, so nothing that was
   not pruned is reformatted.

Any exception anywhere sends the original SQL unchanged (fail open, ARCHITECTURE.md §3.3) and is logged
and recorded in the decision.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping
from typing import Protocol

import numpy as np
import sqlglot
from sqlglot import exp
from sqlglot.schema import MappingSchema

from rewriter.decision import Decision, PredicateEffect, TableDecision
from stats.model import Kind
from rewriter.emit import prune_filter, splice
from rewriter.evaluate import might_match
from rewriter.falsify import Translator
from stats.model import TableStats
from rewriter.predicate import Unknown
from rewriter.table_refs import TableRef, annotate, emittable, resolve, sqlglot_schema

log = logging.getLogger("dipper.rewrite")

_QUERY_TYPES = (exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Subquery)


class StatsSource(Protocol):
    """What the rewriter reads from the statistics store."""

    def schemas(self) -> Mapping[str, Mapping[str, str]]:
        """``db.table`` -> ``{column: spark type}`` for every table with statistics (lower-case names)."""

    def table_stats(self, table: str) -> TableStats | None:
        """Current, freshness-checked statistics of ``db.table``, or None if the store has none."""


@dataclasses.dataclass(frozen=True)
class RewriteContext:
    stats: StatsSource
    database: str = "default"
    # The session's time zone when known (the proxy tracks SET spark.sql.session.timeZone); None makes
    # zone-less timestamp literals cover every zone, which is always sound.
    session_time_zone: str | None = None
    # Unqualified names that may be temporary views of the session (the proxy tracks CREATE TEMP VIEW and
    # CACHE TABLE): such a reference may not read the catalog table, so it is never pruned.
    shadowed: frozenset[str] = frozenset()
    shadow_all_unqualified: bool = False  # a temporary view of unknown name exists


@dataclasses.dataclass(frozen=True)
class Rewrite:
    sql: str  # what to send to Spark
    original: str
    decision: Decision

    @property
    def changed(self) -> bool:
        return self.sql != self.original


def rewrite(sql: str, context: RewriteContext) -> Rewrite:
    """Rewrite ``sql`` to read only files that can contribute rows; never raises."""
    started = time.perf_counter()
    decision = Decision(database=context.database)
    out = sql
    try:
        out = _rewrite(sql, context, decision)
    except Exception as e:  # noqa: BLE001 - fail open on anything, by design
        log.warning("rewrite failed open: %s: %s", type(e).__name__, e)
        log.debug("failed statement: %s", sql)
        decision.error = f"{type(e).__name__}: {e}"
        out = sql
    decision.changed = out != sql
    decision.elapsed_ms = (time.perf_counter() - started) * 1000
    return Rewrite(sql=out, original=sql, decision=decision)


def _rewrite(sql: str, context: RewriteContext, decision: Decision) -> str:
    tree = _parse(sql, decision)
    if tree is None:
        return sql
    tables = annotate(tree)
    filters = {}
    for ref in resolve(tree, context.database, _schema(context.stats.schemas())):
        table_decision, skip_filter = _prune(ref, tables[ref.ref_id], tree, context)
        decision.tables.append(table_decision)
        if skip_filter is not None:
            filters[ref.ref_id] = skip_filter
    if not filters:
        return sql
    return splice(sql, tables, filters)


_last_schema: tuple[object, MappingSchema] | None = None


def _schema(schemas: Mapping[str, Mapping[str, str]]) -> MappingSchema:
    """sqlglot's schema, rebuilt only when the statistics source hands out a new mapping object."""
    global _last_schema
    cached = _last_schema
    if cached is None or cached[0] is not schemas:
        cached = (schemas, sqlglot_schema(schemas))
        _last_schema = cached
    return cached[1]


def _parse(sql: str, decision: Decision) -> exp.Expression | None:
    try:
        statements = [s for s in sqlglot.parse(sql, read="spark") if s is not None]
    except sqlglot.errors.SqlglotError as e:
        decision.passthrough = f"not parsed: {str(e).splitlines()[0][:200]}"
        return None
    if len(statements) != 1:
        decision.passthrough = f"{len(statements)} statements"
        return None
    tree = statements[0]
    if not isinstance(tree, _QUERY_TYPES):
        decision.passthrough = f"not a query ({type(tree).__name__})"
        return None
    return tree


def _prune(ref: TableRef, original: exp.Table, tree: exp.Expression,
           context: RewriteContext) -> tuple[TableDecision, str | None]:
    td = TableDecision(table=ref.table, alias=ref.alias)
    if not original.db and (context.shadow_all_unqualified or original.name.lower() in context.shadowed):
        td.refused = "the name may be a temporary view of this session"
        return td, None
    stats = context.stats.table_stats(ref.table)
    if stats is not None:
        td.has_stats = True
        td.files_total = stats.n_files + stats.unknown_files
        td.bytes_total = int(stats.sizes.sum()) + stats.unknown_bytes
        td.files_kept, td.bytes_kept, td.unknown_files = td.files_total, td.bytes_total, stats.unknown_files
    td.refused = ref.refused or (None if stats is not None else "no statistics") or emittable(original, tree, ref.alias)
    if stats is not None and td.refused is None and "_metadata" in {c.lower() for c in stats.columns}:
        td.refused = "the table has a column named _metadata"
    if td.refused or stats is None:
        return td, None
    if not ref.predicates:
        td.refused = "no local predicates"
        return td, None
    kinds: dict[str, Kind] = {name: col.kind for name, col in stats.columns.items()}
    translator = Translator(lambda c: c.name.lower() if c.table == ref.alias else None, kinds, context.session_time_zone,
                            ref.alias)
    keep = np.ones(stats.n_files, dtype=bool)
    for conjunct in ref.predicates:
        pred = translator.translate(conjunct)
        mask = might_match(pred, stats)
        keep &= mask
        td.predicates.append(PredicateEffect(sql=conjunct.sql("spark"), files_removed=int((~mask).sum()),
                                             untranslated=pred.why if isinstance(pred, Unknown) else None))
    skip = ~keep
    td.files_kept = int(keep.sum()) + stats.unknown_files
    td.bytes_kept = int(stats.sizes[keep].sum()) + stats.unknown_bytes
    return td, (prune_filter(stats, skip) if skip.any() else None)
