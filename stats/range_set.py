"""The optimal range-set of a set of values (seed 000, §4 and §11).

Among all sets of at most ``k`` disjoint intervals covering every value, the one of least total width is
obtained by cutting the sorted distinct values at their ``k - 1`` largest gaps: every covering by ``k``
intervals leaves out at most ``k - 1`` gaps between consecutive values, and its width is the span minus the
gaps it leaves out, so leaving out the largest ones is optimal (seed 000, §11). Ties between equal gaps are
broken by position, which does not change the width.

This is the reference implementation (pure numpy); the collector computes the same thing inside Spark.
"""

from __future__ import annotations

import numpy as np


def optimal_range_set(values: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) arrays of the optimal range-set of at most ``k`` intervals over ``values`` (no NULLs/NaNs)."""
    if k < 1:
        raise ValueError("a range-set needs at least one interval")
    distinct = np.unique(values)
    if len(distinct) == 0:
        return distinct[:0], distinct[:0]
    if len(distinct) <= k:
        return distinct, distinct.copy()
    gaps = distinct[1:] - distinct[:-1]
    # Stable sort of -gap keeps the earliest of equal gaps first, as the Spark job does.
    cut = np.sort(np.argsort(-gaps, kind="stable")[: k - 1])
    starts = np.concatenate(([0], cut + 1))
    ends = np.concatenate((cut, [len(distinct) - 1]))
    return distinct[starts], distinct[ends]


def total_width(lo: np.ndarray, hi: np.ndarray) -> float:
    return float(np.sum(hi - lo)) if len(lo) else 0.0


def range_set_of_intervals(lo: list[int], hi: list[int], k: int) -> tuple[list[int], list[int]]:
    """The optimal range-set of at most ``k`` intervals covering the sorted, disjoint intervals ``lo[i]..hi[i]``:
    the same cut at the ``k - 1`` largest gaps, between intervals instead of values. Over intervals of one
    value each it is :func:`optimal_range_set`; the collector gives it a file's occupied buckets
    (``stats/scan.py``), which are single values when the file's span is small enough."""
    if k < 1:
        raise ValueError("a range-set needs at least one interval")
    if len(lo) <= k:
        return list(lo), list(hi)
    gaps = [lo[i + 1] - hi[i] for i in range(len(lo) - 1)]
    # Largest gaps first; among equal gaps the earliest, as optimal_range_set does.
    cut = sorted(sorted(range(len(gaps)), key=lambda i: -gaps[i])[: k - 1])
    starts = [0] + [c + 1 for c in cut]
    ends = cut + [len(lo) - 1]
    return [lo[s] for s in starts], [hi[e] for e in ends]
