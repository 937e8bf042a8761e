"""The rewriter's one entry point: ``rewrite(sql, context) -> Rewrite``.

The pipeline, in order, and why that order:

1. ``_parse``: one statement, a query. Anything else (DDL, DML, SET, USE, several statements, text sqlglot
   cannot parse) passes through byte for byte: there is nothing to prune, and guessing is not allowed.
2. ``resolve`` (``rewriter/table_refs.py``): every table reference and its local conjuncts, on a qualified
   copy, because which conjuncts may prune a reference depends on the joins around it; and ``channels``
   (``rewriter/join_graph.py``): which references may pass diPs to which, over which columns.
3. ``_local``: per reference, translate (``rewriter/falsify.py``) and evaluate (``rewriter/evaluate.py``)
   its conjuncts over its file statistics (Eq. 1). Needs 2's conjuncts and the statistics; a diP origin's
   statistics are checked against a fresh listing.
4. ``_exchange_dips``: data-induced predicates (``rewriter/dip.py``) exchanged in the order of Fig. 9
   (``rewriter/schedule.py``), starting from 3's file subsets (Eq. 2-3).
5. ``splice`` (``rewriter/emit.py``): the minimal edit, last, from the original text, so nothing that was
   not pruned is reformatted.

Any exception anywhere sends the original SQL unchanged (fail open, ARCHITECTURE.md §3.3) and is logged
and recorded in the decision.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from typing import Protocol

import networkx as nx
import numpy as np
import sqlglot
from sqlglot import exp
from sqlglot.optimizer.scope import Scope
from sqlglot.schema import MappingSchema

from rewriter.blocks import Restriction, ruled_out
from rewriter.budget import Budget, BudgetSpent, check, deadline
from rewriter.cache import Entry, Recording, RewriteCache, copy_decision, key_of as cache_key
from rewriter.decision import BLOCK_DESCRIPTIONS, Decision, DipEffect, PredicateEffect, TableDecision
from rewriter import dip_column, exact_keys
from rewriter.dip import INTEGRAL, JOINABLE, DiP, data_pred, describe, dip_of_intervals, dip_of_values, joinable, satisfy, union
from rewriter.domain import literal_interval
from rewriter.emit import prune_filter, splice
from rewriter.evaluate import fully_translated, guard_failures, might_match
from rewriter.join_graph import CONSTANT, Channel, channels
from rewriter.joined_filter import joined_filters, translator_for, unqualified
from rewriter.errors import Untranslatable
from rewriter.literals import fold, is_constant
from rewriter.modelled import unmodelled
from rewriter.monotone import apply_all, kind_after, split_term
from rewriter.name_ranges import name_ranges
from rewriter.predicate import And, Fn, Pred, Unknown
from rewriter.raising import can_raise, proven_kind, scope_kinds, why_it_may_raise
from rewriter.session import SessionSettings
from rewriter.schedule import INEXACT, REMOVED, naive as naive_schedule, run as run_schedule
from rewriter.join_tree import conjuncts, from_clause, single_owner
from rewriter.table_refs import REF, TableRef, annotate, emittable, resolve, sqlglot_schema, table_name
from stats.blocks import BlockLayout
from stats.model import ColumnStats, Kind, TableStats, kind_of

log = logging.getLogger("dipper.rewrite")

_QUERY_TYPES = (exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Subquery)


class StatsSource(Protocol):
    """What the rewriter reads from the statistics store."""

    def schemas(self) -> Mapping[str, Mapping[str, str]]:
        """``db.table`` -> ``{column: spark type}`` for every table with statistics (lower-case names)."""

    def table_stats(self, table: str, fresh_listing: bool = False) -> TableStats | None:
        """Current, freshness-checked statistics of ``db.table``, or None if the store has none.
        ``fresh_listing``: check against a listing of storage taken now, not a cached one (diP origins)."""


@dataclasses.dataclass(frozen=True)
class RewriteContext:
    stats: StatsSource
    database: str = "default"
    # The session's settings as far as the rewriter models them (rewriter/session.py): ANSI mode, time zone,
    # and any setting in force that it does not model (then nothing is pruned).
    session: SessionSettings = SessionSettings()
    # Unqualified names that may be temporary views of the session (the proxy tracks CREATE TEMP VIEW and
    # CACHE TABLE): such a reference may not read the catalog table, so it is never pruned.
    shadowed: frozenset[str] = frozenset()
    shadow_all_unqualified: bool = False  # a temporary view of unknown name exists
    dips: bool = True  # data-induced predicates across joins (rewriter II)
    dip_max_ranges: int = 64  # a diP is compacted to at most this many intervals (seed 000 §6)
    kappa: int = 3  # rounds of exchange inside a junction-tree node (Fig. 9, ProcessNode)
    naive_schedule: bool = False  # exchange along every edge until nothing changes (a baseline for benchmarks)
    # A diP's origin whose kept files hold at most this many bytes sends the keys of its rows that pass its
    # predicates, read from those files (rewriter/exact_keys.py), instead of its files' statistics. 0: never.
    exact_keys_max_bytes: int = exact_keys.DEFAULT_MAX_BYTES
    exact_keys_max_rows: int = exact_keys.DEFAULT_MAX_ROWS
    # An origin whose files kept by its own predicates hold at most this many bytes sends exact keys even where
    # no receiver is clustered on the join column (reading it is cheap; see ``_exchange_dips``). 0: never.
    exact_keys_small_bytes: int = exact_keys.DEFAULT_SMALL_BYTES
    # Read a reference whole unless its skipped files hold at least this fraction of its bytes: Spark evaluates
    # the prune filter on every row it reads (docs/results/prune-filter.md). The proxy's default is in conf/dipper.toml.
    min_skip_fraction: float = 0.0
    # Also write a diP that reached a reference as a predicate on its join column (rewriter/dip_column.py), so
    # Spark drops the rows it rules out inside the files it reads, where it keeps at most this share of the
    # values the reference's kept files hold. 0: never; 1: wherever the shape allows (the fuzzers).
    dip_column_max_share: float = 0.0
    key_cache: exact_keys.KeyCache = exact_keys.SHARED
    # Tables whose statistics must not be used, with why (the proxy found the catalog pointing the name at
    # another location): read whole, as if the store had nothing on them, and never a diP's origin.
    unusable: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # Spark types (``db.table`` -> column -> type) of tables the store has no statistics of, as the catalog
    # gives them (the proxy asks it when a filter's type decides whether it may raise: ``Decision.untyped``).
    catalog_types: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    budget: Budget = Budget()  # what one statement may cost (rewriter/budget.py)
    cache: RewriteCache | None = None  # rewrites of repeated statements, kept (rewriter/cache.py)


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
    key = recording = None
    try:
        over = context.budget.before_parsing(sql)
        if over is not None:
            decision.passthrough = f"over the rewrite budget: {over}"
        else:
            if context.cache is not None:
                key = cache_key(sql, context, lambda name: name in ("stats", "key_cache", "cache"))
                hit = context.cache.get(key, context.stats) if key is not None else None
                if hit is not None:
                    hit.decision.cached = True
                    hit.decision.elapsed_ms = (time.perf_counter() - started) * 1000
                    return Rewrite(sql=hit.sql, original=sql, decision=hit.decision)
                if key is not None:
                    recording = Recording(context.stats)
                    context = dataclasses.replace(context, stats=recording)
            with deadline(context.budget.max_rewrite_ms):
                out = _rewrite(sql, context, decision)
            if recording is not None:  # a cache, and a statement it keeps
                decision.changed = out != sql
                context.cache.put(key, Entry(out, copy_decision(decision), tuple(recording.calls)))
    except BudgetSpent as e:
        log.warning("rewrite stopped: %s", e)
        decision.passthrough = f"over the rewrite budget: {e}"
        decision.tables.clear()
        out = sql
    except Exception as e:  # noqa: BLE001 - fail open on anything, by design
        log.warning("rewrite failed open: %s: %s", type(e).__name__, e)
        log.debug("failed statement: %s", sql)
        decision.error = f"{type(e).__name__}: {e}"
        out = sql
    decision.changed = out != sql
    decision.elapsed_ms = (time.perf_counter() - started) * 1000
    return Rewrite(sql=out, original=sql, decision=decision)


def _rewrite(sql: str, context: RewriteContext, decision: Decision) -> str:
    if context.unusable:
        context = dataclasses.replace(context, stats=_Without(context.stats, context.unusable))
    if not context.session.prunable:
        decision.passthrough = "session settings the rewriter does not model: " + ", ".join(context.session.unmodelled)
        return sql
    tree = _parse(sql, decision)
    if tree is None:
        return sql
    over = context.budget.after_parsing(tree)
    if over is not None:
        decision.passthrough = f"over the rewrite budget: {over}"
        return sql
    check("after parsing")
    why = unmodelled(sql, tree)
    if why is not None:
        decision.passthrough = f"not modelled: {why}"
        return sql
    tables = annotate(tree)
    refs, scopes = resolve(tree, context.database, schema_of(context.stats.schemas()))
    check("after resolving names")
    links = channels(scopes, column_kinds(context), context.session.ansi) if context.dips else []
    check("after finding join channels")
    raising = _raising_filter(scopes, links, context)
    if raising is not None:
        decision.passthrough = f"not modelled: a filter that may raise an error, which Spark may evaluate on rows " \
                               f"that pruning removes ({raising})"
        known = context.stats.schemas()
        decision.untyped = sorted({ref.table for ref in refs if ref.table not in known
                                   and ref.table not in context.catalog_types})
        return sql
    # Every reference whose values make up a diP, a UNION's other branches included.
    senders = {ref.ref_id for ref in refs} & {m for c in links for m, _, _ in c.members()}
    loaded: dict[tuple[str, bool], TableStats | None] = {}
    states: dict[int, _RefState] = {}
    for ref in refs:
        check(f"before the local predicates of {ref.table}")
        fresh = ref.ref_id in senders  # a diP's origin must see every file on storage now (§3.2)
        if (ref.table, fresh) not in loaded:
            loaded[(ref.table, fresh)] = context.stats.table_stats(ref.table, fresh_listing=fresh)
        state = _local(ref, tables[ref.ref_id], tree, context, loaded[(ref.table, fresh)])
        states[ref.ref_id] = state
        decision.tables.append(state.td)
    layouts = getattr(context.stats, "block_layout", None)
    if layouts is not None:
        by_id = {r.ref_id: r for r in refs}
        for state in states.values():
            _block_descriptions(state, links, by_id, context, layouts)
    if links:
        _exchange_dips(links, states, context, decision)
    converted = dip_column.converted_names(scopes, column_kinds(context), context.database) \
        if context.dip_column_max_share > 0 and links else set()
    filters = {}
    for state in states.values():
        check(f"before the prune filter of {state.ref.table}")
        _finish(state)
        parts = []
        if state.keep is not None and state.stats is not None and not state.keep.all() and \
                _worth_a_filter(state.td, context.min_skip_fraction):
            ranges = name_ranges(state.stats, ~state.keep, layouts(state.ref.table)) if layouts is not None else None
            if ranges is not None:
                state.td.files_by_name_range, state.td.name_ranges = int(ranges.covered.sum()), len(ranges.runs)
            parts.append(prune_filter(state.stats, ~state.keep, ranges))
        if state.keep is not None and state.stats is not None:
            read = state.keep if parts else np.ones(state.stats.n_files, dtype=bool)
            parts += _column_predicates(state, context, read, converted)
        if parts:
            filters[state.ref.ref_id] = " AND ".join(parts)
    if not filters:
        return sql
    check("before writing the rewritten statement")
    return splice(sql, tables, filters)


class _Without:
    """A statistics source that has nothing on some tables: no statistics and no schema (a schema read where
    the statistics may not be used could resolve a column to the wrong table)."""

    def __init__(self, source: StatsSource, tables: Mapping[str, str]) -> None:
        self.source = source
        self.tables = {t.lower() for t in tables}
        self._schemas: tuple[object, dict[str, Mapping[str, str]]] | None = None

    def schemas(self) -> Mapping[str, Mapping[str, str]]:
        full = self.source.schemas()
        if self._schemas is None or self._schemas[0] is not full:
            self._schemas = (full, {t: s for t, s in full.items() if t not in self.tables})
        return self._schemas[1]

    def table_stats(self, table: str, fresh_listing: bool = False) -> TableStats | None:
        return None if table.lower() in self.tables else self.source.table_stats(table, fresh_listing)

    def block_layout(self, table: str) -> BlockLayout | None:
        layouts = getattr(self.source, "block_layout", None)
        return None if layouts is None or table.lower() in self.tables else layouts(table)


@dataclasses.dataclass
class _RefState:
    ref: TableRef
    td: TableDecision
    stats: TableStats | None
    keep: np.ndarray | None  # files still to read; None: this reference cannot be pruned
    can_send: bool  # fully covered by fresh statistics: may originate diPs
    # Files read whatever prunes them: a conjunct over this reference may raise an error on their rows.
    # Applied last (``_finish``): their rows fail the local predicates, so diPs need not carry their values.
    raising: np.ndarray | None = None
    pred: Pred = And(())  # the local predicates as translated, for deciding them row by row (exact keys)
    # diPs to write as column predicates (rewriter/dip_column.py): per join column, the last diP per channel.
    column_dips: dict[str, dict[Channel, DiP]] = dataclasses.field(default_factory=dict)


def _exchange_dips(links: list[Channel], states: dict[int, _RefState], context: RewriteContext,
                   decision: Decision) -> None:
    """Run the schedule of Fig. 9 over the references linked by channels (``rewriter/schedule.py``)."""
    by_pair: dict[tuple[int, int], list[Channel]] = {}
    graph = nx.Graph()
    for c in links:
        members = [ref for ref, _, _ in c.members()]  # a UNION's channel needs every branch
        d = states.get(c.dst)
        if d is None or d.keep is None or not all(states.get(m) is not None and states[m].can_send for m in members):
            continue
        for m in members:  # a change in any branch can narrow the union: each is an edge of the schedule
            by_pair.setdefault((m, c.dst), []).append(c)
            graph.add_edge(m, c.dst)

    version = dict.fromkeys(states, 0)  # bumped whenever a reference loses files
    # A reference inside a CTE read at several places: the files each read still needs. A read with no
    # entry yet needs every file, so nothing is removed until every read has sent a diP.
    needs: dict[int, dict[tuple[int, int, str], np.ndarray]] = {}
    # The senders' versions (files removed, diPs received) when a channel last carried a diP.
    sent: dict[Channel, tuple[tuple[int, int], ...]] = {}

    # Exact keys (rewriter/exact_keys.py): origins worth reading are
    # - those sending into a reference whose files are clustered on the join column (elsewhere keys narrower
    #   than files rarely rule out more files);
    # - small ones (their kept files within context.exact_keys_small_bytes), whatever they send into: reading
    #   one costs little, and "rarely" is not "never". Their keys may be empty (TPC-DS q84: no customer of
    #   the city in the income band, so no row of any table joins) or narrow enough to miss files that
    #   ``_clustered`` calls spread (store_sales in two hour ranges per date range, against q88's half hours);
    # - those sending into an origin worth reading, whose rows the keys narrow although its files do not:
    #   TPC-DS q06's scalar subquery on date_dim narrows the one-file date_dim whose keys reach store_sales.
    worth = {m for c in links if states.get(c.dst) is not None and _clustered(states[c.dst], c.dst_column, c.dst_fns)
             for m, _, _ in c.members()}
    worth |= {m for m in {m for c in links for m, _, _ in c.members()}
              if _small(states.get(m), context.exact_keys_small_bytes)}
    grown = True
    while grown:
        before = len(worth)
        worth |= {m for c in links if c.dst in worth and not c.null_aware for m, _, _ in c.members()}
        grown = len(worth) > before
    origins = exact_keys.Origins(links, worth, context.exact_keys_max_bytes, context.exact_keys_max_rows,
                                 context.key_cache)

    def dip_of(ref: int, column: str, fns: tuple[Fn, ...], dst_col: ColumnStats, dst_fns: tuple[Fn, ...]) -> DiP | None:
        s = states[ref]
        assert s.stats is not None
        src_col = s.stats.columns.get(column)
        if src_col is None or not joinable(src_col, dst_col, fns, dst_fns):
            return None
        read = _read(s)
        if origins.read(ref, s.stats, read, s.pred, s.td) is not None:
            values = origins.values(ref, column, read, version[ref])
            return dip_of_values(values, src_col.kind, context.dip_max_ranges, fns)
        return data_pred(src_col, s.stats.rows, read, context.dip_max_ranges, fns)

    def exchange(u: int, v: int) -> int:
        """Every channel from u to v: REMOVED if v lost files, INEXACT if the outcome may not be final."""
        check("exchanging diPs")
        d = states[v]
        outcome = 0
        pair = by_pair.get((u, v), [])
        for c in pair:
            members = c.members()
            versions = tuple((version[m], origins.arrivals(m)) for m, _, _ in members)
            if sent.get(c) == versions and not context.naive_schedule:
                continue  # the same diP again: the receiver has applied it already
            sent[c] = versions
            assert d.stats is not None and d.keep is not None
            dst_col = d.stats.columns.get(c.dst_column)
            if dst_col is None:
                continue
            if c.null_aware and not all(_no_nulls(states[m], col) for m, col, _ in members):
                continue  # a NULL (or unknown NULLs) on the NOT IN side: the subquery's emptiness matters
            dips = [dip_of(m, col, fns, dst_col, c.dst_fns) for m, col, fns in members]
            if any(x is None for x in dips):
                continue
            dip = dips[0] if len(dips) == 1 else union(dips, context.dip_max_ranges)
            # Exact (see rewriter/schedule.py): one channel, one input, nothing compacted, from statistics
            # (a diP of rows' keys need not overlap every file of the origin that the way back would keep).
            from_rows = [origins.has_rows(m) for m, _, _ in members]
            if len(pair) > 1 or len(members) > 1 or c.dst_use is not None or not dip.exact or any(from_rows):
                outcome |= INEXACT
            source = " ∪ ".join(f"{states[m].ref.alias} ({states[m].ref.table})" for m, _, _ in members)
            if apply(c, dip, dst_col, source, all(from_rows)):
                outcome |= REMOVED
        return outcome

    def apply(c: Channel, dip: DiP, dst_col: ColumnStats, source: str, from_rows: bool) -> bool:
        """Channel ``c`` brings ``dip`` into its receiver; whether the receiver lost files."""
        d = states[c.dst]
        assert d.stats is not None and d.keep is not None
        decision.dips_built += 1
        allowed = satisfy(dip, dst_col, d.stats.rows, c.dst_fns)
        origins.receive(c, dst_col.kind, dip)
        if context.dip_column_max_share > 0 and dip_column.eligible(c, dst_col.kind):
            d.column_dips.setdefault(c.dst_column, {})[c] = dip
        if c.null_aware:
            allowed |= dst_col.null_count != 0  # NULLs (or unknown NULLs) decide NOT IN
        if c.dst_use is not None:
            reads = needs.setdefault(c.dst, {})
            reads[c.dst_use] = reads.get(c.dst_use, np.ones(d.stats.n_files, dtype=bool)) & allowed
            allowed = np.logical_or.reduce(list(reads.values())) if len(reads) == c.dst_uses else \
                np.ones(d.stats.n_files, dtype=bool)
        keep = d.keep & allowed
        removed = int(d.keep.sum() - keep.sum())
        d.td.dips.append(DipEffect(source=source, columns=c.describe(), via=c.via, ranges=dip.ranges,
                                   files_removed=removed, target=f"{d.ref.alias}.{c.dst_column} ({d.ref.table})",
                                   values=describe(dip, kind_after(c.dst_fns, dst_col.kind)),
                                   compacted=not dip.exact, from_rows=from_rows))
        if removed:
            d.keep = keep
            version[c.dst] += 1
        return bool(removed)

    for c in links:  # constant filters on derived tables' outputs, first: they depend on nothing
        d = states.get(c.dst)
        if c.src == CONSTANT and d is not None and d.keep is not None and d.stats is not None:
            dst_col = d.stats.columns.get(c.dst_column)
            dip = _constant_dip(c, dst_col, context) if dst_col is not None else None
            if dip is not None:
                apply(c, dip, dst_col, "constant", False)

    if context.naive_schedule:
        naive_schedule(graph, exchange)
    else:
        run_schedule(graph, exchange, kappa=context.kappa)


def _constant_dip(c: Channel, col: ColumnStats, context: RewriteContext) -> DiP | None:
    """The values of a constant filter's channel in the domain its receiver compares (``c.dst_fns`` of the
    column), each literal read as Spark reads it against that type (``rewriter/domain.py``); None when one
    cannot be (then the filter prunes nothing)."""
    try:
        kind = kind_after(c.dst_fns, col.kind)
        if kind.name not in JOINABLE:
            return None
        if not context.session.ansi and kind.name != "string" and \
                any(isinstance(v, exp.Literal) and v.is_string for v in c.values):
            return None  # without ANSI, Spark compares such values as strings
        bounds = [literal_interval(fold(v), kind, context.session.time_zone) for v in c.values
                  if not isinstance(v, exp.Null)]  # NULL equals nothing
    except Untranslatable:
        return None
    dtype = object if kind.name == "string" or any(isinstance(x, int) and abs(x) >= 2**63 for b in bounds for x in b) \
        else np.int64
    return dip_of_intervals(np.array([lo for lo, _ in bounds], dtype=dtype),
                            np.array([hi for _, hi in bounds], dtype=dtype), context.dip_max_ranges)


def _clustered(state: _RefState, column: str, fns: tuple[Fn, ...] = ()) -> bool:
    """Whether the files of a reference are clustered on ``column``: the median file's min-max span is under
    half the column's whole span, so a narrow diP can miss whole files. Unknown: yes. A column with Bloom
    filters (``stats/indexes.py``) counts as clustered where the join compares the column itself (no ``fns``):
    a diP of few keys can miss whole files through them."""
    if state.stats is None or state.keep is None:
        return False
    col = state.stats.columns.get(column)
    if col is None or col.kind.name not in INTEGRAL or col.lo.dtype == object or not col.known.any() or \
            (col.indexes and not fns):
        return True
    lo, hi = col.lo[col.known].astype(np.float64), col.hi[col.known].astype(np.float64)
    whole = hi.max() - lo.min()
    return whole <= 0 or float(np.median(hi - lo)) < whole / 2


def _small(state: _RefState | None, limit: int) -> bool:
    """Whether the files a reference reads after its own predicates hold at most ``limit`` bytes."""
    return state is not None and state.stats is not None and limit > 0 and \
        int(state.stats.sizes[_read(state)].sum()) <= limit


def _no_nulls(state: _RefState, column: str) -> bool:
    """Whether the files of a reference that are read hold no NULL in ``column`` (unknown counts: they may)."""
    assert state.stats is not None
    col = state.stats.columns.get(column)
    return col is not None and bool((col.null_count[_read(state)] == 0).all())


def _read(state: _RefState) -> np.ndarray:
    """The files of a reference that are read: its kept files, or all of them when it is read whole."""
    assert state.stats is not None
    return state.keep if state.keep is not None else np.ones(state.stats.n_files, dtype=bool)


_last_schema: tuple[object, MappingSchema] | None = None


def schema_of(schemas: Mapping[str, Mapping[str, str]]) -> MappingSchema:
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


def _local(ref: TableRef, original: exp.Table, tree: exp.Expression, context: RewriteContext,
           stats: TableStats | None) -> _RefState:
    """The reference's own predicates over its files (Eq. 1), and whether it may send and receive diPs."""
    td = TableDecision(table=ref.table, alias=ref.alias)
    if not original.db and (context.shadow_all_unqualified or original.name.lower() in context.shadowed):
        td.refused = "the name may be a temporary view of this session"
        return _RefState(ref, td, None, None, False)
    if stats is not None:
        td.has_stats = True
        td.stats_location = stats.location
        td.files_total = stats.n_files + stats.unknown_files
        td.bytes_total = int(stats.sizes.sum()) + stats.unknown_bytes
        td.files_kept, td.bytes_kept, td.unknown_files = td.files_total, td.bytes_total, stats.unknown_files
    td.refused = ref.refused or (None if stats is not None else context.unusable.get(ref.table, "no statistics")) \
        or emittable(original, tree, ref.alias)
    if stats is not None and td.refused is None and "_metadata" in {c.lower() for c in stats.columns}:
        td.refused = "the table has a column named _metadata"
    if stats is None:
        return _RefState(ref, td, None, None, False)
    keep = np.ones(stats.n_files, dtype=bool)
    raising = np.zeros(stats.n_files, dtype=bool)
    if td.refused is None:
        translator = translator_for(stats, ref.alias, context.session)
        translated = {}
        for conjunct in ref.predicates:
            pred = translator.translate(conjunct)
            translated[id(conjunct)] = pred
            mask = might_match(pred, stats)
            keep &= mask
            td.predicates.append(PredicateEffect(sql=conjunct.sql("spark"), files_removed=int((~mask).sum()),
                                                 untranslated=pred.why if isinstance(pred, Unknown) else None))
        raising = _may_raise(ref, translated, stats, context.session.ansi, td)
        pred: Pred = And(tuple(translated.values()))
    else:
        pred = And(())  # read whole: every row of every file is read, and may send its key
    # A reference read whole (refused) still sends the values of all its files, if they are all known.
    return _RefState(ref, td, stats, keep if td.refused is None else None, stats.covered, raising, pred)


def _block_descriptions(state: _RefState, links: list[Channel], by_id: Mapping[int, TableRef], context: RewriteContext,
                        layouts: Callable[[str], BlockLayout | None]) -> None:
    """Files of a table ``layout apply`` rewrote whose block fails a cut the reference is restricted by
    (``rewriter/blocks.py``): like a local predicate, they leave ``keep`` before any diP is exchanged."""
    if state.keep is None or state.stats is None:
        return
    layout = layouts(state.ref.table)
    if layout is None:
        return
    joined = joined_filters(state.ref, state.stats, links, by_id, context.stats.table_stats, context.session) \
        if links else ()
    restriction = Restriction(frozenset(unqualified(c) for c in state.ref.predicates), state.pred, joined)
    out, used = ruled_out(layout, state.stats, restriction, context.session,
                          lambda table: context.stats.table_stats(table, fresh_listing=True))
    newly = out & state.keep  # counted beyond what the local predicates removed
    if newly.any():
        state.keep &= ~out
        state.td.predicates.append(PredicateEffect(sql=BLOCK_DESCRIPTIONS + "; ".join(used),
                                                   files_removed=int(newly.sum())))


def _raising_filter(scopes: list[Scope], links: list[Channel], context: RewriteContext) -> str | None:
    """A filter of the statement that may raise an error (``rewriter/raising.py``) on rows that pruning
    could remove, or None.

    Spark moves filters over one table: it pushes them into derived tables and down to scans, infers new
    ones across equalities (``a.k = b.k AND 100 / a.k > 3`` also filters ``b`` by ``100 / b.k > 3``,
    evaluated before ``b``'s own conjuncts) and extracts single-table parts of disjunctions, so such a
    filter may be evaluated on any row of any table it can reach. The one kind the rewriter follows exactly
    is a conjunct over a single table in that table's own SELECT whose columns take part in no diP channel:
    its files where it may raise are read (``_local``). Any other filter over one alias (or a disjunction)
    that may raise makes the rewriter decline the statement, except a HAVING conjunct over an aggregate: Spark
    evaluates it on the groups, after the joins, and cannot move it below them. A conjunct over several aliases is evaluated
    on joined rows, which no pruned row reaches; only a join order that evaluates it before the join that
    prunes could differ, which Spark's planner does not do for the inner joins diPs cross (a limit of this
    model, said in docs/results/soundness.md)."""
    linked = {ref for c in links for ref, _, _ in c.members()} | {c.dst for c in links}
    kinds = column_kinds(context)
    equated = _equated_names(scopes)
    for scope in scopes:
        select = scope.expression
        if not isinstance(select, exp.Select):
            continue

        kind_of = scope_kinds(scope, kinds, context.database)
        clause = from_clause(select)
        where, having = select.args.get("where"), select.args.get("having")
        filters = [c.node for c in clause.conjuncts] if not clause.refused else \
            conjuncts(where.this if where is not None else None) + [j.args["on"] for j in select.args.get("joins") or []
                                                                    if j.args.get("on") is not None]
        grouped = conjuncts(having.this if having is not None else None)
        for node in filters + grouped:
            aliases = {c.table for c in node.find_all(exp.Column) if not _in_subquery(c, node)}
            if len(aliases) > 1 and not node.find(exp.Or):
                continue  # evaluated on joined rows only (see above)
            if any(node is g for g in grouped) and any(not _in_subquery(a, node) for a in node.find_all(exp.AggFunc)):
                continue  # over aggregates: evaluated on the groups of joined rows, which no pruned row reaches
            if not can_raise(node, kind_of, context.session.ansi) or _guarded(node, scope, context, equated):
                continue
            owner = single_owner(node)
            source = scope.sources.get(owner) if owner is not None else None
            if not clause.refused and isinstance(source, exp.Table) and REF in source.meta and \
                    source.meta[REF] not in linked and any(node is c.node for c in clause.conjuncts):
                continue  # read per file where it may raise (_local)
            return f"{node.sql('spark')[:200]}: {why_it_may_raise(node, kind_of, context.session.ansi)}"
    return None


def _equated_names(scopes: list[Scope]) -> set[str]:
    """Names of the columns the statement compares for equality with another column (joins, correlations,
    ``x IN (SELECT y ...)``): those Spark may infer filters for from filters on the others. By name, across
    every scope, so that no inference Spark draws through a derived table is missed."""
    names: set[str] = set()
    # The root scope comes last (sqlglot's traverse_scope) and its expression holds every other scope's.
    for node in scopes[-1].expression.find_all(exp.EQ, exp.In):
        if isinstance(node, exp.EQ):
            sides = [node.this, node.expression]
            if all(side.find(exp.Column) is not None for side in sides):
                names |= {c.name.lower() for side in sides for c in side.find_all(exp.Column)}
        elif node.args.get("query") is not None:
            query = node.args["query"]
            select = query.this if isinstance(query, exp.Subquery) else query
            names |= {c.name.lower() for c in node.this.find_all(exp.Column)}
            if isinstance(select, exp.Select):
                names |= {c.name.lower() for p in select.expressions for c in p.find_all(exp.Column)}
    return names


def _in_subquery(column: exp.Expression, root: exp.Expression) -> bool:
    node = column.parent
    while node is not None and node is not root:
        if isinstance(node, (exp.Subquery, exp.Select)):
            return True
        node = node.parent
    return False


def _guarded(node: exp.Expression, scope: Scope, context: RewriteContext, equated: set[str]) -> bool:
    """Whether ``node`` is a comparison of monotone terms of tables' columns (``a.k + 1 = b.k``) and constants,
    whose guards (``rewriter/monotone.py``) hold on every file of those tables: then no row can overflow.

    Not when a term's column is compared for equality with another column anywhere in the statement
    (``equated``): Spark infers the filter for that column too (``s.k * 10^15 > 0`` with ``s.k = o.k`` also
    filters ``o`` by ``o.k * 10^15 > 0``), where the guard may fail on rows pruning would remove."""
    if not isinstance(node, (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)):
        return False
    for side in (node.this, node.expression):
        if is_constant(side):
            continue
        term = split_term(side)
        if term is not None and not term[1]:
            continue  # reading a column raises nothing
        if term is not None and term[0].name.lower() in equated:
            return False
        source = scope.sources.get(term[0].table) if term is not None else None
        if not isinstance(source, exp.Table):
            return False
        stats = context.stats.table_stats(table_name(source, context.database))
        col = stats.columns.get(term[0].name.lower()) if stats is not None else None
        if col is None or not stats.covered:
            return False
        try:
            _, _, ok = apply_all(term[1], col.kind, col.lo, col.hi)
        except Untranslatable:
            return False
        valued = (col.null_count < 0) | (col.null_count < stats.rows)
        if (valued & ~(ok & col.known)).any():
            return False
    return True


def column_kinds(context: RewriteContext) -> Callable[[str, str], Kind | None]:
    """``(db.table, column) -> kind`` for typing expressions (``rewriter/raising.py``): from the statistics,
    narrowed where they prove it, else from the Spark type the store knows."""
    loaded: dict[str, TableStats | None] = {}

    def kind(table: str, column: str) -> Kind | None:
        if table not in loaded:
            loaded[table] = context.stats.table_stats(table)
        stats = loaded[table]
        col = stats.columns.get(column) if stats is not None else None
        if col is not None and stats is not None:
            return proven_kind(col, stats)
        spark_type = context.stats.schemas().get(table, {}).get(column) or \
            context.catalog_types.get(table, {}).get(column)
        return kind_of(spark_type) if spark_type else None
    return kind


def _may_raise(ref: TableRef, translated: dict[int, Pred], stats: TableStats, ansi: bool,
               td: TableDecision) -> np.ndarray:
    """Files on whose rows a conjunct over this reference alone may raise an error (``rewriter/raising.py``):
    they are read whatever else rules them out. A fully translated local predicate raises only where one of
    its terms' guards fails (``rewriter/evaluate.py``); any other conjunct that may raise, on every file."""
    def kind_of(column: exp.Column) -> Kind | None:
        col = stats.columns.get(column.name.lower()) if column.table == ref.alias else None
        return proven_kind(col, stats) if col is not None else None

    out = np.zeros(stats.n_files, dtype=bool)
    for conjunct in ref.evaluated:
        if not can_raise(conjunct, kind_of, ansi):
            continue
        pred = translated.get(id(conjunct))
        mask = guard_failures(pred, stats) if pred is not None and fully_translated(pred) else \
            np.ones(stats.n_files, dtype=bool)
        if mask.any():
            out |= mask
            td.raising.append(conjunct.sql("spark"))
    return out


def _worth_a_filter(td: TableDecision, fraction: float) -> bool:
    """Whether the files a reference skips hold enough of its bytes to pay for the filter Spark evaluates
    on the rows of every file it reads. If not, the decision records the reference as read whole. Reading
    more files is always sound: the diPs this reference sent stay valid, they admit a superset of its rows."""
    skipped = td.bytes_total - td.bytes_kept
    if td.bytes_total and skipped >= fraction * td.bytes_total:
        return True
    td.not_worth = True
    td.refused = (f"skipping {td.files_skipped} files ({skipped / max(td.bytes_total, 1):.1%} of its bytes) would not pay "
                  f"for the filter Spark evaluates on every row it reads (rewriter.min_skip_fraction {fraction:g})")
    td.files_kept, td.bytes_kept, td.skipped_paths = td.files_total, td.bytes_total, []
    return False


def _column_predicates(state: _RefState, context: RewriteContext, read: np.ndarray, converted: set[str]) -> list[str]:
    """The column predicates of the diPs a reference received (``rewriter/dip_column.py``), one per join
    column: the narrowest of its diPs as written, where it keeps at most ``dip_column_max_share`` of the
    values the files it ``read``s hold. None where a local conjunct may raise on its rows, nor on a column
    compared somewhere with another domain (``converted``)."""
    if not state.column_dips or state.stats is None or (state.raising is not None and state.raising.any()):
        return []
    out = []
    for column, by_channel in sorted(state.column_dips.items()):
        if column in converted:
            continue
        col = state.stats.columns[column]
        chosen = dip_column.narrowest([dip_column.written(d, col.kind) for d in by_channel.values()])
        files = data_pred(col, state.stats.rows, read, max(context.dip_max_ranges, state.stats.n_files))
        if files is None or dip_column.share(chosen, files) > context.dip_column_max_share:
            continue
        text = dip_column.predicate(column, chosen)
        if text is not None:
            out.append(text)
    state.td.column_predicates = out
    return out


def _finish(state: _RefState) -> None:
    td, stats, keep = state.td, state.stats, state.keep
    if keep is None or stats is None:
        return
    if state.raising is not None and (state.raising & ~keep).any():
        td.kept_for_errors = int((state.raising & ~keep).sum())
        keep = state.keep = keep | state.raising
    td.files_kept = int(keep.sum()) + stats.unknown_files
    td.skipped_paths = stats.paths[~keep].tolist()
    td.bytes_kept = int(stats.sizes[keep].sum()) + stats.unknown_bytes
    if keep.all() and not state.ref.predicates:
        td.refused = "no local predicates" + ("; no diP ruled out a file" if td.dips else "")
