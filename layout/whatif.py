"""What a layout would make a workload read, before any data moves (issue 15, part 3).

For every scan of the table in the replayed workload, the share of the table it would read:

- **matching**: the rows that may satisfy its predicates and joined filters, as the rewriter's evaluator
  decides them (a superset where it cannot decide: NaN, an untranslated conjunct, a sender too large to
  read). A layout reads at least the rows that really match;
- **qd-tree**: the rows of the proposed blocks Dipper would read, deciding each block as it decides the
  block's file once the layout is applied (:func:`judged_as_rewriter`): by the block's description
  (``rewriter/blocks.py``, the same ``ruled_out``: a cut spelled as the statement's conjunct, or implied or
  excluded by its literals) and by the block's statistics (min/max over the held-out rows routed to it, with
  the scan's local predicates and, for its joined filters, the exact keys of their senders);
- **qd-tree, ideal**: the rows of the blocks holding at least one held-out row that may match. This is what
  the greedy optimises (seed 003's measure); a block whose rows all fail a statement is still read when
  neither its description nor its statistics can show it (a window of dates the training cuts split
  differently, a predicate on a column no cut tests and the block spans);
- **Dipper today**: the bytes of the table's current files that Dipper's rewrite keeps for the statement,
  with the configured rewriter (``rewriter/rewrite.py`` itself: its statistics, diPs, exact keys and
  thresholds; a reference it declines reads everything);
- **simple layouts**: the sample cut into as many equal blocks as the qd-tree has, in random order and sorted
  on each of the two columns the plan's workload tests most (what ``random:<seed>`` and a ``CLUSTER BY`` give).

Block layouts are judged on a *held-out* sample (drawn with another seed than the one the tree was learned
on, its rows routed down the tree by the cuts), so a tree is not credited for fitting the rows it saw.
Dipper today is judged on the real files, in bytes; block shares are rows (bytes per row are nearly even in
a Parquet table of one schema). What the qd-tree estimate leaves out: range-sets (a block's statistics are
min/max here; apply collects range-sets too, which can only skip more), conjuncts that may raise an error
(the rewriter reads the files where they may), and the rewriter's minimum share worth a filter. How close
the prediction comes to Spark's scans after ``apply`` is measured in docs/results/layout.md.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from layout.joined import JoinedKeys
from layout.lead import LeadRanges, check_levels, lead_cuts, sampled_columns
from layout.qdtree import DEFAULT_WEIGH, MEASURED_FILE_COST_ROWS, QdTree, build, check_file_cost, coarsen
from layout.sample import LayoutError, Sample
from layout.workload import Statement, TableWorkload
from rewriter.blocks import ruled_out
from rewriter.evaluate import might_match
from rewriter.predicate import columns_of
from rewriter.rewrite import RewriteContext, rewrite
from rewriter.session import SessionSettings
from stats.blocks import BlockLayout, JoinedBounds, identities
from stats.loader import StatsLoader
from stats.model import ColumnStats, TableStats

SORTED_LAYOUTS = 2  # simple "sorted by <column>" layouts compared, on the columns the workload tests most


@dataclasses.dataclass(frozen=True)
class LayoutShare:
    name: str
    blocks: int
    read: np.ndarray  # per scan: share of the table read
    files: np.ndarray  # per scan: blocks (files) opened; NaN where not known


@dataclasses.dataclass(frozen=True)
class Plan:
    workload: TableWorkload
    sample: Sample
    tree: QdTree
    min_rows: int  # minimum block size, in sampled rows
    matches: np.ndarray  # scans x sampled rows
    cut_masks: np.ndarray  # cuts x sampled rows (all False for a cut not decided exactly: never chosen)
    undecided: int  # candidate cuts left out: not decided exactly on every sampled row
    leads: tuple[LeadRanges, ...] = ()  # the ranges the tree cut first, outermost first (``layout/lead.py``)
    lead_cuts: tuple[tuple[int, ...], ...] = ()  # per lead, its cuts: indices into the workload's
    weigh: str = DEFAULT_WEIGH  # how the greedy weighed the scans (``TableWorkload.scan_weights``)
    file_cost_rows: float = 0.0  # a file's cost in rows of the table, blocks merged by (``qdtree.coarsen``; 0: none)
    greedy_blocks: int = 0  # the greedy's blocks before they were merged
    merge_statements: int = 0  # held-out statements the merge was judged on (0: the workload's own)

    def ranges(self) -> int:
        """How many ranges the lead cuts made (of every lead together: the leaves of the first levels): fewer
        than asked where values tie or a range would be under the minimum block (1 without ``leads``)."""
        lead = {i for cuts in self.lead_cuts for i in cuts}
        prefixes = set()
        for b in self.tree.blocks:
            k = 0
            while k < len(b.path) and b.path[k].cut in lead:
                k += 1
            prefixes.add(b.path[:k])
        return len(prefixes)

    def block_rows(self) -> np.ndarray:
        """Per block: estimated rows of the whole table."""
        scale = self.sample.table_rows / max(1, self.sample.n)
        return np.array([b.size * scale for b in self.tree.blocks])

    def on_paths(self) -> set[int]:
        """The cuts some block's path takes."""
        return {s.cut for b in self.tree.blocks for s in b.path}

    def sources(self) -> list[str]:
        """Every table a joined cut on the tree's paths reads: the tables whose files ``apply`` pins."""
        return sorted({t for i in self.on_paths() for t in self.workload.cuts[i].sources()})


@dataclasses.dataclass(frozen=True)
class WhatIf:
    plan: Plan
    workload: TableWorkload  # replayed: the plan's own, or another (unseen instances)
    judged_on: int  # held-out sampled rows
    matching: np.ndarray  # per scan
    layouts: tuple[LayoutShare, ...]  # qd-tree first, then Dipper today, then simple layouts

    def total(self, share: np.ndarray) -> float:
        """The workload's share read, per scan ``share``, weighed as the plan weighed the scans: the mean over
        statements of each one's mean over its scans, or the mean over scans."""
        if not len(share):
            return 0.0
        return float(np.average(share, weights=self.workload.scan_weights(self.plan.weigh)))


def min_block_rows(table: str, files: int, sample: Sample, rows: int | None, megabytes: float | None) -> int:
    """The minimum block size in sampled rows, from a size in rows or MB of the whole table; by default the
    mean size of the table's ``files`` today (the layout makes no more, smaller files than there are)."""
    if rows is not None and megabytes is not None:
        raise LayoutError("give the minimum block size in rows or in MB, not both")
    total = sample.table_rows
    per_row = max(1.0, sample.table_bytes / total)
    if megabytes is not None:
        if megabytes <= 0 or megabytes * 1e6 < per_row:
            raise LayoutError(f"--min-block-mb {megabytes:g} is less than one row ({per_row:,.0f} bytes) of {table}")
        rows = int(megabytes * 1e6 / per_row)
    elif rows is None:
        rows = math.ceil(total / max(1, files))
    if rows <= 0:
        raise LayoutError(f"--min-block-rows must be positive, not {rows}")
    if rows > total:
        raise LayoutError(f"a minimum block of {rows:,} rows is larger than {table} ({total:,} rows): "
                          f"nothing to split; give a smaller --min-block-rows or --min-block-mb")
    return max(1, math.ceil(rows * sample.n / total))


def check_merge_on(file_cost_rows: float, option: str) -> None:
    """Held-out statements (``option``) judge the merge, so they need a file cost to merge by: with
    ``--file-cost-rows 0`` nothing is merged and they would be read for nothing."""
    if file_cost_rows <= 0:
        raise LayoutError(f"{option} judges the merge, and --file-cost-rows 0 merges nothing: give a file cost "
                          f"(or leave {option} out)")


def sample_columns(*workloads: TableWorkload | None) -> list[str]:
    """Every column the scans of ``workloads`` (None: none) test, sorted: what a sample for them must hold
    (``matches_of`` refuses a sample without one)."""
    return sorted(set().union(*(w.columns for w in workloads if w is not None)))


def matches_of(workload: TableWorkload, sample: Sample, keys: JoinedKeys) -> np.ndarray:
    """Per scan and sampled row: may the scan want the row (its conjuncts and joined filters)?"""
    if not workload.scans:
        return np.zeros((0, sample.n), dtype=bool)
    columns = sample.rows.columns
    missing = sorted(set(workload.columns) - set(columns))
    if missing:
        raise LayoutError(f"the sample has no column {missing[0]!r}: sample every column the workloads test")
    matches = np.stack([might_match(s.pred, sample.rows) for s in workload.scans])
    for q, s in enumerate(workload.scans):
        for j in s.joined:
            matches[q] &= keys.mask(j, columns[j.column])
    return matches


def cut_masks_of(workload: TableWorkload, sample: Sample, keys: JoinedKeys) -> tuple[np.ndarray, int]:
    """Per cut and sampled row: is the cut TRUE on the row? A cut not decided exactly on every row (both it
    and its negation may hold: NaN, a literal between two values, a timestamp in an unknown time zone, a
    sender's untranslated conjunct) is all False, so it is never chosen; returns the masks and how many."""
    masks = np.zeros((len(workload.cuts), sample.n), dtype=bool)
    columns = sample.rows.columns
    undecided = 0
    for i, cut in enumerate(workload.cuts):
        if cut.joined is not None:
            if keys.exact(cut.joined):
                masks[i] = keys.mask(cut.joined, columns[cut.joined.column])
            else:
                undecided += 1
            continue
        assert cut.pred is not None and cut.negated is not None
        holds = might_match(cut.pred, sample.rows)
        if (holds & might_match(cut.negated, sample.rows)).any():
            undecided += 1
        else:
            masks[i] = holds
    return masks, undecided


def plan(workload: TableWorkload, sample: Sample, min_rows: int, keys: JoinedKeys,
         leads: Sequence[LeadRanges] = (), weigh: str = DEFAULT_WEIGH, file_cost_rows: float = 0.0,
         merge_on: TableWorkload | None = None) -> Plan:
    """The greedy qd-tree of ``workload`` on ``sample``; ``keys`` decides joined filters. With ``leads``, the
    tree first cuts the table into ranges of the first one's column, each of those into ranges of the next
    one's, and so on (``layout/lead.py``); their cuts join the workload's. ``weigh``: each statement counts the
    same, or each scan (``TableWorkload.scan_weights``). ``file_cost_rows`` > 0: then the subtrees the
    workload reads together are merged where a file costs more than the rows their split saves, a file
    costing that many rows of the table (``qdtree.coarsen``).

    ``merge_on``: held-out statements (instances of the same queries with other literals) that judge the
    merge instead of the workload. The greedy chose every split because it served the workload's literals,
    so judged on them each split looks worth its file; judged on literals it never saw, a split is kept
    where it serves those too: reduced-error pruning, the tree's guard against fitting its training
    literals (docs/results/layout.md, "Merged on held-out instances")."""
    check_file_cost(file_cost_rows)
    if not workload.scans:
        raise LayoutError(f"no statement of the workload reads {workload.table}")
    if merge_on is not None:
        check_merge_on(file_cost_rows, "merge_on")
        if not merge_on.scans:
            raise LayoutError(f"no held-out statement (the merge's) reads {workload.table}")
    leads = check_levels(leads)
    first: list[tuple[int, ...]] = []
    for lead in leads:
        ranges = lead_cuts(lead, sample, workload.usual_session(), keys)
        known = {c.sql for c in workload.cuts}
        workload = dataclasses.replace(workload, cuts=workload.cuts + tuple(c for c in ranges if c.sql not in known))
        index = {c.sql: i for i, c in enumerate(workload.cuts)}
        first.append(tuple(index[c.sql] for c in ranges))
    if leads:
        workload = dataclasses.replace(workload, columns=tuple(sampled_columns(workload.columns, leads)))
    weights = workload.scan_weights(weigh)
    matches = matches_of(workload, sample, keys)
    masks, undecided = cut_masks_of(workload, sample, keys)
    greedy = build(matches, masks, min_rows, weights=weights, lead=first)
    judge, judged = (matches, weights) if merge_on is None else \
        (matches_of(merge_on, sample, keys), merge_on.scan_weights(weigh))
    tree = coarsen(greedy, judge, file_cost_rows * sample.n / max(1, sample.table_rows), judged)
    return Plan(workload, sample, tree, min_rows, matches, masks, undecided, leads, tuple(first), weigh, file_cost_rows,
                len(greedy.blocks), len({s.statement for s in merge_on.scans}) if merge_on is not None else 0)


def what_if(p: Plan, holdout: Sample, keys: JoinedKeys, dipper_today: np.ndarray, loader: StatsLoader,
            replay: TableWorkload | None = None, seed: int = 0, routed: SessionSettings | None = None,
            today_files: np.ndarray | None = None) -> WhatIf:
    """Replay the plan's workload, or ``replay`` (instances the plan never saw), over the plan's blocks and the
    simple layouts (judged on ``holdout``, a sample the plan did not see) beside ``dipper_today`` (and the
    files it opens, ``today_files``, if known). ``routed``: the session apply would route the rows in (by
    default the one most of the plan's statements ran in)."""
    w = replay if replay is not None else p.workload
    if not w.scans:
        raise LayoutError(f"no statement of the replayed workload reads {w.table}")
    if len(dipper_today) != len(w.scans):
        raise ValueError("one share of Dipper today per scan of the replayed workload")
    matches = matches_of(w, holdout, keys)
    masks, _ = cut_masks_of(p.workload, holdout, keys)
    n_blocks = len(p.tree.blocks)
    block_of_row = p.tree.route(masks)
    if routed is None:
        routed = p.workload.usual_session()
    unknown = np.full(len(w.scans), np.nan)
    layouts = [LayoutShare("qd-tree", n_blocks, *judged_as_rewriter(p, w, holdout, block_of_row, keys, loader, routed)),
               LayoutShare("qd-tree, ideal", n_blocks, *read_blocks(block_of_row, n_blocks, matches)),
               LayoutShare("Dipper today", p.sample.files_read, dipper_today,
                           unknown if today_files is None else np.asarray(today_files, dtype=np.float64))]
    rng = np.random.default_rng(seed)
    layouts.append(LayoutShare("random", n_blocks, *read_blocks(_equal_blocks(rng.permutation(holdout.n), n_blocks),
                                                                n_blocks, matches)))
    for column in tested_columns(p.workload)[:SORTED_LAYOUTS]:  # the orders one would choose from the plan's workload
        order = _sorted_order(holdout, column)
        layouts.append(LayoutShare(f"sorted by {column}", n_blocks,
                                   *read_blocks(_equal_blocks(order, n_blocks), n_blocks, matches)))
    return WhatIf(p, w, holdout.n, matches.mean(axis=1), tuple(layouts))


def dipper_today(w: TableWorkload, statements: Sequence[Statement], loader: StatsLoader,
                 options: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Per scan: the share of the table's bytes Dipper's rewrite keeps for that reference today, with the
    rewriter configured by ``options`` (``RewriteContext`` fields), and the files it keeps. Read whole where it
    declines (files: NaN where the table has no statistics)."""
    decisions: dict[int, list] = {}
    out = np.ones(len(w.scans))
    files = np.full(len(w.scans), np.nan)
    for q, scan in enumerate(w.scans):
        if scan.statement not in decisions:
            st = statements[scan.statement]
            ctx = RewriteContext(loader, database=st.database, session=st.session, **options)
            d = rewrite(st.sql, ctx).decision
            decisions[scan.statement] = [t for t in d.tables if t.table == w.table]
        refs = decisions[scan.statement]
        if scan.reference < len(refs) and refs[scan.reference].has_stats:
            files[q] = refs[scan.reference].files_kept
            if refs[scan.reference].bytes_total:
                out[q] = refs[scan.reference].bytes_kept / refs[scan.reference].bytes_total
    return out, files


def judged_as_rewriter(p: Plan, w: TableWorkload, holdout: Sample, block_of_row: np.ndarray, keys: JoinedKeys,
                       loader: StatsLoader, routed: SessionSettings) -> tuple[np.ndarray, np.ndarray]:
    """Per scan of ``w``: the share of rows in the blocks Dipper would read once the plan is applied, and how
    many blocks that is. Each block is one file as the rewriter would see it: statistics over its held-out
    rows, and its path of cuts recorded as ``apply`` records it (``routed``: the session the rows are routed
    in; joined cuts pinned to their senders' files as listed now, their keys unique where the sender read
    whole says so). Each scan is judged as the rewriter judges a reference: its local predicates over the
    statistics, its joined filters by the exact keys of their senders (a block none of whose key range holds
    one is skipped; a sender too large to read keeps every block), and the block descriptions by
    ``rewriter/blocks.py``'s ``ruled_out`` itself."""
    n_blocks = len(p.tree.blocks)
    stats = block_stats(holdout.rows, block_of_row, n_blocks, w.table)
    fresh = functools.cache(lambda table: loader.table_stats(table, fresh_listing=True))
    on_paths = p.on_paths()
    cuts = p.workload.cuts
    bounds = joined_bounds_of(p.workload.joined_attributes(loader), holdout, block_of_row, stats, keys)
    pinned = {t: identities(st) for t in sorted(set(p.sources()) | {b.source for b in bounds}) if (st := fresh(t)) is not None}
    recorded = tuple(c.recorded(c.joined is not None and keys.unique_key(c.joined)) if i in on_paths else c.recorded(False)
                     for i, c in enumerate(cuts))
    layout = BlockLayout(w.table, stats.location, routed.ansi, routed.time_zone, recorded, pinned,
                         {str(stats.paths[b.id]): (int(stats.sizes[b.id]), 0, tuple((s.cut, s.holds) for s in b.path))
                          for b in p.tree.blocks}, bounds)
    rows = stats.rows.astype(np.float64)
    total = max(1.0, rows.sum())
    out = np.empty(len(w.scans))
    files = np.empty(len(w.scans))
    for q, scan in enumerate(w.scans):
        kept = might_match(scan.pred, stats)
        for j in scan.joined:
            kept &= keys.overlap(j, stats.columns[j.column])
        if kept.any():
            described, _ = ruled_out(layout, stats, scan.restriction(), scan.session, fresh)
            kept &= ~described
        out[q] = rows[kept].sum() / total
        files[q] = kept.sum()
    return out, files


def joined_bounds_of(joins: Mapping[tuple[str, str, str], tuple[tuple[str, str], ...]], holdout: Sample,
                     block_of_row: np.ndarray, blocks: TableStats, keys: JoinedKeys) -> tuple[JoinedBounds, ...]:
    """The joined bounds ``apply`` would record for blocks of held-out rows (``stats/blocks.py``): per block
    (file ``b`` of ``blocks``) and per join of ``joins`` (``TableWorkload.joined_attributes``), the sender rows
    (read whole) whose key equals a held-out row's column, summarised as ``apply`` summarises a file's:
    (row, sender row) pairs, and per attribute the min, max and NULLs among them. A sample's rows join fewer
    sender rows than the block's will, so the bounds are narrower than apply's, as a block's statistics from
    the sample are. A sender not read gives no bounds; an attribute whose values are not all known is left out."""
    out = []
    for (source, key, column), attributes in joins.items():
        sender = keys.sender(source, tuple(sorted({key} | {a for a, _ in attributes})))
        mine = holdout.rows.columns.get(column)
        if sender is None or mine is None:
            continue
        k = sender.rows.columns[key]
        has_key = k.null_count == 0
        universe, inverse = np.unique(k.lo[has_key], return_inverse=True)
        per_key = np.bincount(inverse, minlength=len(universe))
        at = np.minimum(np.searchsorted(universe, mine.lo), max(0, len(universe) - 1))
        hit = (mine.null_count == 0) & (len(universe) > 0)
        hit &= universe[at] == mine.lo if len(universe) else False
        block, group = block_of_row[hit], at[hit]
        n = blocks.n_files
        pairs = np.bincount(block, weights=per_key[group], minlength=n).astype(np.int64)
        kept, summaries = [], []
        for name, kind in attributes:
            col = sender.rows.columns[name]
            present = col.null_count[has_key] == 0
            if not col.known[has_key][present].all():
                continue
            distinct, rank = np.unique(col.lo[has_key][present], return_inverse=True)
            low, high = np.full(len(universe), len(distinct)), np.full(len(universe), -1)
            np.minimum.at(low, inverse[present], rank)
            np.maximum.at(high, inverse[present], rank)
            nulls = np.bincount(inverse[~present], minlength=len(universe))
            b_low, b_high = np.full(n, len(distinct)), np.full(n, -1)
            np.minimum.at(b_low, block, low[group])
            np.maximum.at(b_high, block, high[group])
            b_nulls = np.bincount(block, weights=nulls[group], minlength=n).astype(np.int64)
            kept.append((name, kind))
            summaries.append((distinct, b_low, b_high, b_nulls))
        files = {str(blocks.paths[b]): (int(pairs[b]), tuple(
            (_plain(d[lo_[b]]), _plain(d[hi_[b]]), int(nu[b])) if hi_[b] >= 0 else (None, None, int(nu[b]))
            for d, lo_, hi_, nu in summaries)) for b in range(n)}
        out.append(JoinedBounds(source, key, column, tuple(kept), files))
    return tuple(out)


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value a record read from JSON holds."""
    return value.item() if isinstance(value, np.generic) else value


def block_stats(rows: TableStats, block_of_row: np.ndarray, n_blocks: int, table: str) -> TableStats:
    """Statistics of blocks as one file each, from sampled rows (one-row files) and the block of each: per
    column the min and max of the non-NULL values and the NULL count; bounds unknown where a row's are (NaN)
    or the block holds no value. Block ``b`` is file ``b``, named ``block-<b>``, its size its row count."""
    order = np.argsort(block_of_row, kind="stable")
    counts = np.bincount(block_of_row, minlength=n_blocks)
    groups = np.split(order, np.cumsum(counts)[:-1])
    columns = {}
    for name, col in rows.columns.items():
        lo, hi = np.empty(n_blocks, dtype=col.lo.dtype), np.empty(n_blocks, dtype=col.hi.dtype)
        known = np.zeros(n_blocks, dtype=bool)
        nulls = np.zeros(n_blocks, dtype=np.int64)
        present = col.null_count == 0
        for b, idx in enumerate(groups):
            nulls[b] = int(col.null_count[idx].sum())
            values = idx[present[idx]]
            lo[b] = col.lo[values].min() if len(values) else col.lo[0] if len(col.lo) else 0
            hi[b] = col.hi[values].max() if len(values) else lo[b]
            known[b] = len(values) > 0 and bool(col.known[values].all())
        columns[name] = ColumnStats(col.kind, lo, hi, known, nulls)
    location = f"what-if:{table}"
    return TableStats(table, np.array([f"{location}/block-{b}" for b in range(n_blocks)], dtype=object),
                      counts.astype(np.int64), np.zeros(n_blocks, dtype=np.int64), counts.astype(np.int64), columns,
                      location=location)


def read_blocks(block_of_row: np.ndarray, n_blocks: int, matches: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per scan: the share of rows in the blocks where it may match a row, and how many blocks those are."""
    sizes = np.bincount(block_of_row, minlength=n_blocks).astype(np.float64)
    n = max(1.0, sizes.sum())
    out = np.empty(len(matches))
    files = np.empty(len(matches))
    for q, m in enumerate(matches):
        hit = np.bincount(block_of_row[m], minlength=n_blocks) > 0
        out[q] = sizes[hit].sum() / n
        files[q] = hit.sum()
    return out, files


def tested_columns(w: TableWorkload) -> list[str]:
    """The table's columns by how many scans test them (on their own or through a joined filter), most first."""
    counts = collections.Counter(c for s in w.scans for c in columns_of(s.pred) | {j.column for j in s.joined})
    return [c for c, _ in counts.most_common() if c in w.columns]


def _equal_blocks(order: np.ndarray, n_blocks: int) -> np.ndarray:
    """Per row: its block, for blocks of equal size taken in ``order``."""
    out = np.empty(len(order), dtype=np.int64)
    for b, part in enumerate(np.array_split(order, n_blocks)):
        out[part] = b
    return out


def _sorted_order(sample: Sample, column: str) -> np.ndarray:
    col = sample.rows.columns[column]
    present = col.null_count == 0
    nulls = np.flatnonzero(~present)
    idx = np.flatnonzero(present)
    return np.concatenate([nulls, idx[np.argsort(col.lo[idx], kind="stable")]])


def weighed(weigh: str, total: bool = False) -> str:
    """How a plan weighed the scans (``TableWorkload.scan_weights``), as its reports say it; with ``total``,
    what the what-if's totals are then."""
    text = f"each {weigh.removesuffix('s')} weighing the same"
    if total:
        text += (" (the total: the mean over statements of their scans' mean)" if weigh == "statements" else
                 " (the total: the mean over scans)")
    return text


def render(w: WhatIf, limit: int = 60) -> str:
    """The per-scan table (at most ``limit`` lines) and the totals, as text."""
    p = w.plan
    names = [layout.name for layout in w.layouts]
    lines = [f"{p.workload.table}: {p.sample.table_rows:,} rows in {p.sample.files_read} files, "
             f"{p.sample.table_bytes / 1e6:,.1f} MB; learned on {p.sample.n:,} sampled rows, judged on "
             f"{w.judged_on:,} others",
             f"workload: {p.workload.statements} statements, {len(p.workload.scans)} scans of the table, "
             f"{len(p.workload.cuts)} candidate cuts ({p.undecided} not decided exactly on the sample, left out)" +
             (f"; {len(p.workload.skipped)} statements not analysed" if p.workload.skipped else ""),
             *([f"replayed: another workload of {w.workload.statements} statements, {len(w.workload.scans)} scans"]
               if w.workload is not p.workload else []),
             f"qd-tree: {len(p.tree.blocks)} blocks of at least {p.min_rows:,} sampled rows "
             f"(~{p.min_rows * p.sample.table_rows / max(1, p.sample.n):,.0f} rows of the table)" +
             (f", merged from the greedy's {p.greedy_blocks} where a file costs more than the "
              f"{p.file_cost_rows:,.0f} rows" if p.file_cost_rows > 0 else "") + ", " +
             weighed(p.weigh, total=True), "",
             "layouts: " + ", ".join(f"{n} ({layout.blocks} {'files' if n == 'Dipper today' else 'blocks'})"
                                     for n, layout in zip(names, w.layouts)),
             "share of the table each scan reads (statements numbered from 1 in workload order; scans of the "
             "same predicate and shares are one line: the first one's statement, and how many scans):",
             f"{'stmt':>5} {'scans':>5} {'matching':>8} " + " ".join(f"{n[:14]:>14}" for n in names) + "  predicate"]
    groups: dict[tuple, list[int]] = {}  # a dashboard's statement, repeated, is one line
    for i, scan in enumerate(w.workload.scans):
        shares = tuple(float(x) for x in (w.matching[i], *(layout.read[i] for layout in w.layouts)))
        groups.setdefault((scan.describe(), shares), []).append(i)
    for (described, _), scans in list(groups.items())[:limit]:
        i = scans[0]
        lines.append(f"{w.workload.scans[i].statement + 1:>5} {len(scans):>5} {w.matching[i]:>8.1%} " +
                     " ".join(f"{layout.read[i]:>14.1%}" for layout in w.layouts) + "  " + described[:90])
    if len(groups) > limit:
        lines.append(f"  ... {sum(len(g) for g in list(groups.values())[limit:])} more scans")
    lines.append(f"{'total':>5} {len(w.workload.scans):>5} {w.total(w.matching):>8.1%} " +
                 " ".join(f"{w.total(layout.read):>14.1%}" for layout in w.layouts))
    # What a scan's time follows: its rows and its files (docs/results/layout.md, "Wall time on the laid-out tables").
    per_file = p.file_cost_rows or MEASURED_FILE_COST_ROWS
    files = [w.total(layout.files) for layout in w.layouts]
    costs = [w.total(layout.read) * p.sample.table_rows + per_file * f for layout, f in zip(w.layouts, files)]
    lines.append(f"{'files':>5} {'':>5} {'':>8} " + " ".join(f"{f:>14,.1f}" if math.isfinite(f) else f"{'?':>14}"
                                                           for f in files) + "  files opened per scan (mean)")
    lines.append(f"{'cost':>5} {'':>5} {'':>8} " + " ".join(f"{c / 1e6:>13,.3f}M" if math.isfinite(c) else f"{'?':>14}"
                                                           for c in costs) +
                 f"  rows read + {per_file:,.0f} per file opened, per scan (mean)")
    return "\n".join(lines)


def plot(w: WhatIf, path: Path) -> None:
    """Per scan, sorted: the share read under each layout and the rows that match (a PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    x = np.arange(1, len(w.matching) + 1)
    ax.plot(x, np.sort(w.matching), "k--", label=f"matching rows ({w.total(w.matching):.0%})")
    for layout in w.layouts:
        ax.plot(x, np.sort(layout.read), label=f"{layout.name} ({w.total(layout.read):.0%})")
    ax.set_xlabel("scans of the replayed workload, sorted by share read (in the legend: the total, "
                  f"{weighed(w.plan.weigh)})")
    ax.set_ylabel("share of the table read")
    ax.set_ylim(0, 1.02)
    ax.set_title(f"{w.plan.workload.table}: what-if of a qd-tree of {len(w.plan.tree.blocks)} blocks")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
