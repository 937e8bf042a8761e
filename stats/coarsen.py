"""Coarser views of the statistics, to measure what each kind of statistic buys (seed 000 Fig. 16).

A :class:`StatsSpec` names what the rewriter may use:

- ``zonemap``: min, max and null count per file and column, nothing else (range-sets and string value
  lists are dropped);
- ``rangeset:K``: range-sets of at most K intervals (plus the string value lists the store holds).

:class:`CoarseStats` wraps a statistics source (``schemas()`` and ``table_stats()``, as the rewriter reads
them) and serves every table through the spec. A range-set of K' > K intervals is brought down to K by
bridging its K' - K narrowest gaps; since the collector's K'-range-set keeps the K' - 1 widest gaps of a
file's values, this gives exactly the optimal K-range-set the collector would have stored for K. A spec
asking for more intervals than the store was collected with is refused (:func:`check_store`), never
silently served with fewer.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Mapping

import numpy as np

from dipper.errors import StatsError
from stats.loader import StatsLoader
from stats.model import ColumnStats, RangeSets, TableStats
from stats.store import Snapshot


@dataclasses.dataclass(frozen=True)
class StatsSpec:
    kind: str  # "zonemap" | "rangeset"
    k: int = 1

    @property
    def label(self) -> str:
        """As given on the command line: ``zonemap`` or ``rangeset:K``."""
        return "zonemap" if self.kind == "zonemap" else f"rangeset:{self.k}"

    @property
    def slug(self) -> str:
        """For file names: ``zonemap`` or ``rangesetK``."""
        return self.label.replace(":", "")


def parse_stats_spec(text: str) -> StatsSpec:
    t = text.strip().lower()
    if t == "zonemap":
        return StatsSpec("zonemap")
    m = re.fullmatch(r"rangeset:(\d+)", t)
    if m and int(m.group(1)) >= 1:
        return StatsSpec("rangeset", int(m.group(1)))
    raise StatsError(f"unknown statistics {text!r}; use zonemap or rangeset:K with K >= 1 (e.g. rangeset:8)")


def check_store(snapshot: Snapshot, tables: list[str], spec: StatsSpec) -> None:
    """Refuse a spec the store cannot serve: range-sets of K from a store collected with fewer."""
    if spec.kind != "rangeset":
        return
    short = sorted(t for t in tables if (e := snapshot.entry(t)) is not None and e.range_set_size < spec.k)
    if short:
        have = snapshot.entry(short[0]).range_set_size
        raise StatsError(f"{spec.label} needs range-sets of at least {spec.k} intervals, but {short[0]} "
                         f"(and {len(short) - 1} more) was collected with {have}; re-collect with: "
                         f"python -m stats collect --range-set-size {spec.k} {' '.join(short)}")


class CoarseStats:
    """A statistics source serving ``source``'s tables through ``spec``; results are cached per input."""

    def __init__(self, source: StatsLoader, spec: StatsSpec) -> None:
        self.source = source
        self.spec = spec
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[TableStats, TableStats]] = {}

    def schemas(self) -> Mapping[str, Mapping[str, str]]:
        return self.source.schemas()

    def table_stats(self, table: str, fresh_listing: bool = False) -> TableStats | None:
        stats = self.source.table_stats(table, fresh_listing)
        if stats is None:
            return None
        with self._lock:
            cached = self._cache.get(table)
        if cached is not None and cached[0] is stats:
            return cached[1]
        out = coarsen(stats, self.spec)
        with self._lock:
            self._cache[table] = (stats, out)
        return out


def coarsen(stats: TableStats, spec: StatsSpec) -> TableStats:
    columns = {name: _column(c, spec) for name, c in stats.columns.items()}
    return dataclasses.replace(stats, columns=columns)


def _column(c: ColumnStats, spec: StatsSpec) -> ColumnStats:
    if spec.kind == "zonemap":
        return dataclasses.replace(c, ranges=None, values=None)
    if c.ranges is None:
        return c
    return dataclasses.replace(c, ranges=limit_intervals(c.ranges, spec.k))


def limit_intervals(r: RangeSets, k: int) -> RangeSets:
    """Every file's range-set with at most ``k`` intervals: per file, keep the k - 1 widest gaps."""
    n = len(r.lo)
    if n == 0:
        return r
    # Intervals are grouped by file and sorted inside each file; a gap is between neighbours of one file.
    same_file = r.file[1:] == r.file[:-1]
    per_file = np.bincount(r.file, minlength=len(r.present))
    if per_file.max() <= k:
        return r
    width = _gap_width(r.lo[1:], r.hi[:-1])
    width[~same_file] = -np.inf  # not a gap
    # Rank each file's gaps widest first; keep the k - 1 widest (ties: the earlier gap).
    order = np.lexsort((np.arange(n - 1), -width, r.file[1:]))
    group_start = np.searchsorted(r.file[1:][order], r.file[1:][order], side="left")
    rank = np.empty(n - 1, dtype=np.int64)
    rank[order] = np.arange(n - 1) - group_start
    keep_gap = same_file & (rank < k - 1)
    starts = np.concatenate(([True], ~same_file | keep_gap))
    ends = np.concatenate((~same_file | keep_gap, [True]))
    return RangeSets(r.lo[starts], r.hi[ends], r.file[starts], r.present)


def _gap_width(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    if lo.dtype == object:  # decimals of more than 18 digits are Python ints: widths as floats rank them
        return np.array([float(a - b) for a, b in zip(lo, hi)], dtype=float)
    return (lo - hi).astype(float)
