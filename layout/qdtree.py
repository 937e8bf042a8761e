"""The greedy qd-tree (seed 003 §4, Algorithm 1), on a sample of the table.

The objective is the paper's C(T): the rows a workload skips, summed over blocks, where a scan skips a block
when none of the block's rows may satisfy the scan's predicates. Rows and predicates come as matrices:

- ``matches[q, s]``: may scan ``q`` want sampled row ``s`` (its conjuncts decided on the row);
- ``cuts[c, s]``: is cut ``c`` TRUE on row ``s``.

A node splits on the cut that adds the most skipped rows, if that is more than nothing and leaves both
children at least ``min_rows`` sampled rows (the paper's minimum block size b); nodes are split level by level,
as the paper fixes the order for its analysis (the greedy result does not depend on it), and the leaves are
then numbered depth-first, so that every subtree is one range of block ids. For one node of r
rows the gains of every cut come from one product ``matches[:, rows] @ cuts[:, rows].T`` (scans x cuts:
how many of a scan's rows each cut sends left), so a level costs O(|W| |V| |P|) as the paper says.

A row goes left when the cut is TRUE and right otherwise (FALSE or NULL), so each block's *description*, the
conjunction of the cuts on its path, holds for every row routed to it: left ``coalesce(cut, false)``, right
``NOT coalesce(cut, false)`` (a joined cut has its own forms, ``Cut.holds`` and ``Cut.fails``). That is the complete semantic description of §3.2 (every row satisfying it is
in the block), which ``apply`` will write and the rewriter may use as exact knowledge.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Sequence

import numpy as np

CHUNK = 65_536  # sampled rows per product: bounds memory at (scans + cuts) x CHUNK floats
# How a workload's scans are weighed in the objective (``layout/workload.py`` ``TableWorkload.scan_weights``
# gives the weights): each statement once, its scans sharing the weight, or each scan once.
WEIGHINGS = ("statements", "scans")
DEFAULT_WEIGH = WEIGHINGS[0]
# What opening one more file costs a scan, in rows read: Spark 3.5 at SF 1 spent about 1.2 ms of executor CPU per
# file opened and 0.15 s per million rows its scans produced (docs/results/layout.md, "Wall time on the laid-out tables":
# a least-squares fit over 396 measurements), so a file costs as much as 8,000 rows. ``coarsen`` takes it.
MEASURED_FILE_COST_ROWS = 8_000


def check_file_cost(rows: float) -> float:
    """``rows``, a file's cost in rows read, if it is one: 0 (merge nothing) or a finite positive number."""
    if not 0 <= rows < math.inf:
        raise ValueError(f"a file's cost in rows must be 0 (keep every block) or a positive number, not {rows:g}")
    return rows


def file_cost_argument(text: str) -> float:
    """:func:`check_file_cost` for argparse, whose usage error then names the option."""
    try:
        rows = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of rows") from None
    try:
        return check_file_cost(rows)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


@dataclasses.dataclass(frozen=True)
class Step:
    cut: int  # index into the cut list
    holds: bool  # the block's rows make the cut TRUE (left) or not (right: FALSE or NULL)


@dataclasses.dataclass(frozen=True)
class Block:
    id: int
    path: tuple[Step, ...]
    rows: np.ndarray  # indices of the sampled rows routed here

    @property
    def size(self) -> int:
        return len(self.rows)


@dataclasses.dataclass(frozen=True)
class QdTree:
    blocks: tuple[Block, ...]
    n: int  # sampled rows

    def block_of_rows(self) -> np.ndarray:
        """Per sampled row: the id of its block."""
        out = np.empty(self.n, dtype=np.int64)
        for b in self.blocks:
            out[b.rows] = b.id
        return out

    def route(self, cut_masks: np.ndarray) -> np.ndarray:
        """Per row of other rows (``cut_masks``: cuts x rows, TRUE where the cut holds): its block, found by
        following the cuts from the root as a new row would be routed (seed 003 §3.1)."""
        out = np.full(cut_masks.shape[1], -1, dtype=np.int64)
        for b in self.blocks:
            here = np.ones(cut_masks.shape[1], dtype=bool)
            for step in b.path:
                here &= cut_masks[step.cut] == step.holds
            out[here] = b.id
        assert (out >= 0).all(), "the blocks' paths cover every row"
        return out

    def describe(self, block: Block, holds: list[str], fails: list[str]) -> str:
        """The block's description as a Spark SQL predicate true exactly on the rows routed to it, given per
        cut the SQL true where it holds and where it fails (``layout/workload.py``, ``Cut``)."""
        if not block.path:
            return "TRUE"
        return " AND ".join(holds[s.cut] if s.holds else fails[s.cut] for s in block.path)


def build(matches: np.ndarray, cuts: np.ndarray, min_rows: int, weights: np.ndarray | None = None,
          max_depth: int = 64, lead: Sequence[Sequence[int]] = ()) -> QdTree:
    """Algorithm 1 over ``matches`` (scans x rows) and ``cuts`` (cuts x rows), both boolean. ``lead``: levels
    of cuts that split first, whatever the workload gains (:func:`_lead`): the first level's, then the next
    level's inside each of their leaves; the greedy then splits each leaf, at most ``max_depth`` levels below."""
    q, n = matches.shape
    if cuts.shape[1] != n:
        raise ValueError("matches and cuts must cover the same rows")
    min_rows = max(1, int(min_rows))
    w = np.ones(q, dtype=np.float64) if weights is None else np.asarray(weights, dtype=np.float64)
    level = _lead(cuts, [list(group) for group in lead], ((), np.arange(n)), min_rows)
    leaves: list[tuple[tuple[Step, ...], np.ndarray]] = []
    depth = 0
    while level:
        following = []
        for path, rows in level:
            split = None
            if len(rows) >= 2 * min_rows and len(cuts) and depth < max_depth:
                split = _best_cut(matches, cuts, rows, min_rows, w)
            if split is None:
                leaves.append((path, rows))
                continue
            holds = cuts[split, rows]
            following.append((path + (Step(split, True),), rows[holds]))
            following.append((path + (Step(split, False),), rows[~holds]))
        level = following
        depth += 1
    # Leaves numbered in depth-first order, the left (holding) child first: paths are prefix-free, so ordering
    # them by their steps puts every subtree's leaves in one run of ids, and the blocks a statement rules out
    # through one cut are one contiguous range of block names (docs/results/layout.md, routing in the SQL).
    leaves.sort(key=lambda leaf: tuple(not s.holds for s in leaf[0]))
    return QdTree(tuple(Block(i, path, rows) for i, (path, rows) in enumerate(leaves)), n)


def coarsen(tree: QdTree, matches: np.ndarray, file_rows: float, weights: np.ndarray | None = None) -> QdTree:
    """The pruning of ``tree`` whose blocks cost the workload least to read, where a scan reading a block
    pays for its rows and for opening its file: ``file_rows`` sampled rows (a file's cost in rows read,
    :data:`MEASURED_FILE_COST_ROWS` of the whole table scaled to the sample).

    The greedy counts rows only, so it splits while a split skips a single row more, down to the minimum
    block, and every block is a file: at SF 1 the blocks that met the byte targets cost more in files opened
    than they saved in rows (docs/results/layout.md). Here a node becomes one block, its subtree merged, where that
    is cheaper than the best pruning of its two children: a scan reads the merged block when it reads any
    of them (a block is read when one of its sampled rows may match the scan: the greedy's measure, ``matches``
    scans x sampled rows, weighed by ``weights``), and pays ``file_rows`` once instead of once per block it
    read. Bottom up, that is the cheapest pruning of all (each subtree's cost depends on its own choices only).
    A tie keeps the split. The merged block's path is the node's: a prefix of its leaves' paths, so the
    description still holds for every row in it, and the leaves, renumbered depth-first, still make each
    subtree one range of ids. ``file_rows <= 0`` returns ``tree``."""
    if file_rows <= 0 or len(tree.blocks) < 2:
        return tree
    w = np.ones(matches.shape[0], dtype=np.float64) if weights is None else np.asarray(weights, dtype=np.float64)

    def best(blocks: list[Block], depth: int) -> tuple[float, np.ndarray, list[tuple[tuple[Step, ...], np.ndarray]]]:
        """Cost, which scans read the node, and the cheapest leaves of the subtree of ``blocks`` (the leaves
        below one node at ``depth``, in depth-first order)."""
        if len(blocks) == 1:
            b = blocks[0]
            reads = matches[:, b.rows].any(axis=1)
            return float(w @ reads) * (file_rows + b.size), reads, [(b.path, b.rows)]
        left = [b for b in blocks if b.path[depth].holds]
        right = [b for b in blocks if not b.path[depth].holds]
        assert left and right, "the blocks' paths form one tree"
        cost_l, reads_l, leaves_l = best(left, depth + 1)
        cost_r, reads_r, leaves_r = best(right, depth + 1)
        reads = reads_l | reads_r
        rows = sum(b.size for b in blocks)
        merged = float(w @ reads) * (file_rows + rows)
        if merged < cost_l + cost_r:
            return merged, reads, [(blocks[0].path[:depth], np.sort(np.concatenate([b.rows for b in blocks])))]
        return cost_l + cost_r, reads, leaves_l + leaves_r

    _, _, leaves = best(list(tree.blocks), 0)
    return QdTree(tuple(Block(i, path, rows) for i, (path, rows) in enumerate(leaves)), tree.n)


def _lead(cuts: np.ndarray, levels: list[list[int]], node: tuple[tuple[Step, ...], np.ndarray],
          min_rows: int) -> list[tuple[tuple[Step, ...], np.ndarray]]:
    """The leaves of splitting ``node`` on the ``levels`` of lead cuts alone: each node on the cut of the first
    level that divides its rows most evenly, while one leaves both sides at least ``min_rows`` rows; a node no
    cut of the level splits so goes on to the next level. With a level the cuts ``c < t_1`` ... ``c <
    t_{N-1}`` at the N-quantiles of a column, the leaves are its N ranges, about equal in rows, and (holding
    side first) numbered in the column's order: what a range clustering on the column writes; a second level
    cuts each range into ranges of another column; the greedy's cuts come inside (layout/lead.py). A cut that
    cannot split a node with ``min_rows`` on both sides cannot split any part of it so, so a node left for the
    next level never had an even split of an earlier level's cut to wait for."""
    path, rows = node
    if not levels:
        return [node]
    lead = levels[0]
    fits = np.zeros(len(lead), dtype=bool)
    if lead and len(rows) >= 2 * min_rows:
        left = cuts[np.ix_(lead, rows)].sum(axis=1)
        fits = (left >= min_rows) & (len(rows) - left >= min_rows)
    if not fits.any():
        return _lead(cuts, levels[1:], node, min_rows)
    best = lead[int(np.argmin(np.where(fits, np.abs(2 * left - len(rows)), np.iinfo(np.int64).max)))]
    holds = cuts[best, rows]
    return (_lead(cuts, levels, (path + (Step(best, True),), rows[holds]), min_rows) +
            _lead(cuts, levels, (path + (Step(best, False),), rows[~holds]), min_rows))


def _best_cut(matches: np.ndarray, cuts: np.ndarray, rows: np.ndarray, min_rows: int, w: np.ndarray) -> int | None:
    """The cut that most increases the weighted rows skipped when splitting ``rows``, or None."""
    n_scans, n_cuts = matches.shape[0], cuts.shape[0]
    left_hits = np.zeros((n_scans, n_cuts), dtype=np.float64)
    hits = np.zeros(n_scans, dtype=np.float64)
    left_rows = np.zeros(n_cuts, dtype=np.float64)
    for start in range(0, len(rows), CHUNK):
        part = rows[start:start + CHUNK]
        m = matches[:, part].astype(np.float32)
        c = cuts[:, part].astype(np.float32)
        left_hits += m @ c.T
        hits += m.sum(axis=1)
        left_rows += c.sum(axis=1)
    r = float(len(rows))
    right_rows = r - left_rows
    right_hits = hits[:, None] - left_hits
    skipped_now = r * float(w @ (hits == 0))
    gain = left_rows * (w @ (left_hits == 0)) + right_rows * (w @ (right_hits == 0)) - skipped_now
    gain[(left_rows < min_rows) | (right_rows < min_rows)] = -np.inf
    best = int(np.argmax(gain))
    return best if gain[best] > 0 else None
