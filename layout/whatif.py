"""What a layout would make a workload read, before any data moves (issue 15, part 3).

For every scan of the table in the workload, the share of the table's rows it would read:

- **lower bound**: the rows that may satisfy its predicates and its joined filters (no layout reads fewer);
- **qd-tree**: the rows of the proposed blocks holding at least one such row;
- **current files**: the rows of the files Dipper keeps today, decided on their real statistics by the
  rewriter's evaluator, and each joined filter applied as the diP of its exact keys (``rewriter/dip.py``,
  compacted to the rewriter's default number of ranges), as exact keys from a small sender would be;
- **simple layouts**: the sample cut into as many equal blocks as the qd-tree has, in random order and sorted
  on each of the columns the workload tests most (what ``random:<seed>`` and a ``CLUSTER BY`` would give).

Block layouts are judged on the sample: a block is read when one of its sampled rows may match. A block's
real files would be skipped on their statistics, which can only keep more (a file's min and max span rows
the sample did not draw); the description of a qd-tree block is exact knowledge and closes most of that gap.
How close the prediction comes to Spark's scan after ``apply`` is to be measured when apply exists.
Bytes are estimated from rows (the table's bytes per row).
"""

from __future__ import annotations

import collections
import dataclasses
import math
from pathlib import Path

import numpy as np

from layout.joined import JoinedKeys
from layout.qdtree import QdTree, build
from layout.sample import LayoutError, Sample
from layout.workload import Scan, TableWorkload
from rewriter.dip import dip_of_values, satisfy
from rewriter.evaluate import might_match
from rewriter.predicate import columns_of
from rewriter.rewrite import RewriteContext
from stats.model import TableStats

SORTED_LAYOUTS = 2  # simple "sorted by <column>" layouts compared, on the columns the workload tests most


@dataclasses.dataclass(frozen=True)
class LayoutShare:
    name: str
    blocks: int
    read: np.ndarray  # per scan: share of the table's rows read


@dataclasses.dataclass(frozen=True)
class Plan:
    workload: TableWorkload
    sample: Sample
    tree: QdTree
    min_rows: int  # minimum block size, in sampled rows
    matches: np.ndarray  # scans x sampled rows
    cut_masks: np.ndarray  # cuts x sampled rows

    def block_rows(self) -> np.ndarray:
        """Per block: estimated rows of the whole table."""
        scale = self.sample.table_rows / max(1, self.sample.n)
        return np.array([b.size * scale for b in self.tree.blocks])


@dataclasses.dataclass(frozen=True)
class WhatIf:
    plan: Plan
    workload: TableWorkload  # replayed: the plan's own, or another (unseen instances)
    lower: np.ndarray  # per scan
    layouts: tuple[LayoutShare, ...]  # qd-tree first, then current files, then simple layouts
    current_bytes: np.ndarray  # per scan: share of the table's bytes read by the current files

    def total(self, share: np.ndarray) -> float:
        return float(share.mean()) if len(share) else 0.0


def min_block_rows(stats: TableStats, sample: Sample, rows: int | None, megabytes: float | None) -> int:
    """The minimum block size in sampled rows, from a size in rows or MB of the whole table; by default the
    mean size of the table's files today (the layout makes no more, smaller files than there are)."""
    if rows is not None and megabytes is not None:
        raise LayoutError("give the minimum block size in rows or in MB, not both")
    total = sample.table_rows
    if rows is None:
        per_row = max(1.0, sample.table_bytes / total)
        rows = int(megabytes * 1e6 / per_row) if megabytes is not None else math.ceil(total / max(1, stats.n_files))
    if rows <= 0:
        raise LayoutError(f"the minimum block size must be positive, not {rows} rows")
    if rows > total:
        raise LayoutError(f"a minimum block of {rows:,} rows is larger than {stats.table} ({total:,} rows): "
                          f"nothing to split; give a smaller --min-block-rows or --min-block-mb")
    return max(1, math.ceil(rows * sample.n / total))


def plan(workload: TableWorkload, sample: Sample, min_rows: int, keys: JoinedKeys) -> Plan:
    """The greedy qd-tree of ``workload`` on ``sample``; ``keys`` decides joined filters."""
    if not workload.scans:
        raise LayoutError(f"no statement of the workload reads {workload.table}")
    columns = sample.rows.columns
    matches = matches_of(workload, sample, keys)
    cut_masks = np.stack([might_match(c.pred, sample.rows) if c.pred is not None else
                          keys.mask(c.joined, columns[c.joined.column]) for c in workload.cuts]) if workload.cuts else \
        np.zeros((0, sample.n), dtype=bool)
    tree = build(matches, cut_masks, min_rows)
    return Plan(workload, sample, tree, min_rows, matches, cut_masks)


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


def what_if(p: Plan, stats: TableStats, keys: JoinedKeys, replay: TableWorkload | None = None,
            seed: int = 0) -> WhatIf:
    """Replay the plan's workload, or ``replay`` (instances the plan never saw), over the plan's blocks, the
    current files and the simple layouts."""
    w = replay if replay is not None else p.workload
    if not w.scans:
        raise LayoutError(f"no statement of the replayed workload reads {w.table}")
    matches = p.matches if replay is None else matches_of(w, p.sample, keys)
    n_blocks = len(p.tree.blocks)
    layouts = [LayoutShare("qd-tree", n_blocks, read_share(p.tree.block_of_rows(), n_blocks, matches))]
    total_rows, total_bytes = max(1, int(stats.rows.sum())), max(1, int(stats.sizes.sum()))
    kept = [current_files(s, stats, keys) for s in w.scans]
    layouts.append(LayoutShare("current files", stats.n_files,
                               np.array([stats.rows[k].sum() / total_rows for k in kept])))
    current_bytes = np.array([stats.sizes[k].sum() / total_bytes for k in kept])
    rng = np.random.default_rng(seed)
    layouts.append(LayoutShare("random", n_blocks, read_share(_equal_blocks(rng.permutation(p.sample.n), n_blocks),
                                                              n_blocks, matches)))
    for column in tested_columns(p.workload)[:SORTED_LAYOUTS]:  # the orders one would choose from the plan's workload
        order = _sorted_order(p.sample, column)
        layouts.append(LayoutShare(f"sorted by {column}", n_blocks,
                                   read_share(_equal_blocks(order, n_blocks), n_blocks, matches)))
    return WhatIf(p, w, matches.mean(axis=1), tuple(layouts), current_bytes)


def current_files(scan: Scan, stats: TableStats, keys: JoinedKeys) -> np.ndarray:
    """Per file of the table: does the rewriter keep it for ``scan``, its joined filters sent as exact keys?"""
    keep = might_match(scan.pred, stats)
    for j in scan.joined:
        values = keys.keys(j)
        if values is None:
            continue
        col = stats.columns[j.column]
        d = dip_of_values(values, col.kind, RewriteContext.dip_max_ranges)
        if d is not None:
            keep &= satisfy(d, col, stats.rows)
    return keep


def read_share(block_of_row: np.ndarray, n_blocks: int, matches: np.ndarray) -> np.ndarray:
    """Per scan: the share of rows in the blocks where it may match a row."""
    sizes = np.bincount(block_of_row, minlength=n_blocks).astype(np.float64)
    n = max(1.0, sizes.sum())
    out = np.empty(len(matches))
    for q, m in enumerate(matches):
        hit = np.bincount(block_of_row[m], minlength=n_blocks) > 0
        out[q] = sizes[hit].sum() / n
    return out


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
    values = col.lo
    nulls = np.flatnonzero(~present)
    idx = np.flatnonzero(present)
    return np.concatenate([nulls, idx[np.argsort(values[idx], kind="stable")]])


def render(w: WhatIf, limit: int = 60) -> str:
    """The per-scan table and the totals, as text."""
    p = w.plan
    names = [layout.name for layout in w.layouts]
    lines = [f"{p.workload.table}: {p.sample.table_rows:,} rows in {w.layouts[1].blocks} files, "
             f"{p.sample.table_bytes / 1e6:,.1f} MB; sample of {p.sample.n:,} rows",
             f"workload: {p.workload.statements} statements, {len(p.workload.scans)} scans of the table, "
             f"{len(p.workload.cuts)} candidate cuts" +
             (f"; {len(p.workload.skipped)} statements not analysed" if p.workload.skipped else ""),
             *([f"replayed: another workload of {w.workload.statements} statements, {len(w.workload.scans)} scans"]
               if w.workload is not p.workload else []),
             f"qd-tree: {len(p.tree.blocks)} blocks of at least {p.min_rows:,} sampled rows "
             f"(~{p.min_rows * p.sample.table_rows / max(1, p.sample.n):,.0f} rows of the table)", "",
             "layouts: " + ", ".join(f"{n} ({layout.blocks} blocks)" for n, layout in zip(names, w.layouts)),
             "share of the table's rows each scan reads:",
             f"{'stmt':>5} {'lower':>7} " + " ".join(f"{n[:14]:>14}" for n in names) + "  predicate"]
    for i, scan in enumerate(w.workload.scans[:limit]):
        lines.append(f"{scan.statement:>5} {w.lower[i]:>7.1%} " +
                     " ".join(f"{layout.read[i]:>14.1%}" for layout in w.layouts) + "  " + scan.describe()[:90])
    if len(w.workload.scans) > limit:
        lines.append(f"  ... {len(w.workload.scans) - limit} more scans")
    lines.append(f"{'total':>5} {w.total(w.lower):>7.1%} " +
                 " ".join(f"{w.total(layout.read):>14.1%}" for layout in w.layouts))
    lines.append(f"bytes: current files read {w.total(w.current_bytes):.1%} of "
                 f"{p.sample.table_bytes / 1e6:,.1f} MB; the qd-tree ~{w.total(w.layouts[0].read):.1%} "
                 f"(estimated from rows)")
    return "\n".join(lines)


def plot(w: WhatIf, path: Path) -> None:
    """Per scan, sorted: the share read under each layout and the lower bound (a PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    x = np.arange(1, len(w.lower) + 1)
    ax.plot(x, np.sort(w.lower), "k--", label=f"lower bound ({w.total(w.lower):.0%})")
    for layout in w.layouts:
        ax.plot(x, np.sort(layout.read), label=f"{layout.name} ({w.total(layout.read):.0%})")
    ax.set_xlabel("scans of the replayed workload, sorted by share read")
    ax.set_ylabel("share of the table's rows read")
    ax.set_ylim(0, 1.02)
    ax.set_title(f"{w.plan.workload.table}: what-if of a qd-tree of {len(w.plan.tree.blocks)} blocks")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
