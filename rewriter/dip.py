"""Data-induced predicates over range-sets (seed 000, Eq. 2-3 and §4, §6).

A diP from table i to table j on an equi-join ``i.c = j.e`` is the set of values column ``c`` can take in
the files of i still to be read: the union of their range-sets (a zone map is a range-set of one interval),
as sorted disjoint intervals. ``satisfy`` keeps the files of j whose own intervals for ``e`` overlap it.

- ``data_pred`` sorts all intervals once and merges in one pass: O(n log n) in the intervals merged.
- ``compact`` bounds a diP to ``max_ranges`` intervals by bridging the smallest gaps (§6): lossy but sound,
  since a wider diP only keeps more files.
- ``satisfy`` is vectorized: one ``searchsorted`` over every interval of every file.

A file is described by its value list where it has one (every distinct value, as one-point intervals:
exact, and the only finer-than-min/max statistic strings have), else its range-set, else its min/max.

A join may compare monotone functions of the columns rather than the columns (``a.k + 1 = b.k``, or a
derived table's ``year(d) AS y``; ``rewriter/monotone.py``). Both sides' intervals are then mapped into the
values compared: a non-decreasing function maps ``[lo, hi]`` into ``[f(lo), f(hi)]``, so the mapped
intervals still cover every value compared. Where a function's bounds are unknown (an overflow guard, a
conditionally monotone function's guard), an origin gives no diP and a receiving file is kept.

A receiving file with Bloom filters (``stats/indexes.py``) is also kept only if it may hold one of the diP's
values, when the diP admits few enough to list (``enumerated``): a file holding none of them has no row that
joins.

NULLs never satisfy an equi-join, so files holding only NULLs in the join column contribute nothing to a
diP and are never needed by one. A file whose bounds are unknown makes the diP unbounded (None) when it
is an origin, and is always kept when it is a receiver.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal

import numpy as np

from rewriter.errors import Untranslatable
from rewriter.monotone import apply_all, kind_after
from rewriter.predicate import Fn
from stats import indexes
from stats.model import EPOCH, EPOCH_DATE, EXACT, ColumnStats, Kind

# Kinds whose values can be compared across tables as stored: same kind, same decimal scale. Floats are
# left out (Spark's NaN = NaN is true, and joins on doubles are rare).
JOINABLE = ("int", "decimal", "date", "timestamp", "timestamp_ntz", "string")


@dataclasses.dataclass(frozen=True)
class DiP:
    lo: np.ndarray  # sorted, disjoint, closed intervals [lo[k], hi[k]]
    hi: np.ndarray
    exact: bool = True  # False once compaction bridged a gap: the diP then admits values no file holds
    # Every value the origin sent, when it sent the keys of its rows and at most indexes.MAX_PROBED_VALUES: a
    # finer description than the (possibly compacted) intervals, tested against receivers' Bloom filters.
    keys: np.ndarray | None = None

    @property
    def ranges(self) -> int:
        return len(self.lo)


def describe(d: DiP, kind: Kind, limit: int = 8) -> list[str]:
    """The first ``limit`` intervals as readable text (``[1995-03-01, 1995-03-31]``), for decision records;
    a last entry says how many more there are."""
    def text(v: object) -> str:
        if kind.name == "date":
            return (EPOCH_DATE + datetime.timedelta(days=int(v))).isoformat()
        if kind.name in ("timestamp", "timestamp_ntz"):
            return (EPOCH + datetime.timedelta(microseconds=int(v))).isoformat(sep=" ")
        if kind.name == "decimal":
            return str(EXACT.scaleb(decimal.Decimal(int(v)), -kind.scale))
        return repr(v) if isinstance(v, str) else str(v)

    out = [f"[{text(a)}, {text(b)}]" if a != b else f"{{{text(a)}}}" for a, b in zip(d.lo[:limit], d.hi[:limit])]
    if d.ranges > limit:
        out.append(f"... {d.ranges - limit} more")
    return out


def joinable(a: ColumnStats, b: ColumnStats, a_fns: tuple[Fn, ...] = (), b_fns: tuple[Fn, ...] = ()) -> bool:
    """Whether ``a_fns(a) = b_fns(b)`` compares values of one domain, each side monotone in its column."""
    try:
        ka, kb = kind_after(a_fns, a.kind), kind_after(b_fns, b.kind)
    except Untranslatable:
        return False
    return same_domain(ka, kb)


def same_domain(a: Kind, b: Kind) -> bool:
    """Whether values of kinds ``a`` and ``b`` compare as stored, with no lossy conversion: one joinable kind,
    one decimal scale (integers of any width widen exactly)."""
    return a.name in JOINABLE and a.name == b.name and a.scale == b.scale


def _intervals(col: ColumnStats, files: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lo, hi, file) of every interval describing the non-null values of the given files: the value list
    where the file has one, else the range-set, else its min/max."""
    described = np.zeros(len(col.lo), dtype=bool)
    parts_lo, parts_hi, parts_file = [], [], []
    if col.values is not None:
        described = col.values.present & files
        m = described[col.values.file]
        parts_lo.append(col.values.values[m])
        parts_hi.append(col.values.values[m])
        parts_file.append(col.values.file[m])
    if col.ranges is not None:
        use_ranges = col.ranges.present & files & ~described
        m = use_ranges[col.ranges.file]
        parts_lo.append(col.ranges.lo[m])
        parts_hi.append(col.ranges.hi[m])
        parts_file.append(col.ranges.file[m])
        described = described | use_ranges
    zone = files & ~described & col.known
    idx = np.flatnonzero(zone)
    parts_lo.append(col.lo[idx])
    parts_hi.append(col.hi[idx])
    parts_file.append(idx)
    return (np.concatenate(parts_lo) if parts_lo else col.lo[:0], np.concatenate(parts_hi) if parts_hi else col.hi[:0],
            np.concatenate(parts_file).astype(np.int64))


def only_nulls(col: ColumnStats, rows: np.ndarray) -> np.ndarray:
    """Files whose column holds no non-null value (known null count equal to the row count)."""
    return (col.null_count >= 0) & (col.null_count == rows)


def _described(col: ColumnStats) -> np.ndarray:
    """Files whose non-null values some statistic bounds."""
    out = col.known.copy()
    for extra in (col.ranges, col.values):
        if extra is not None:
            out |= extra.present
    return out


def data_pred(col: ColumnStats, rows: np.ndarray, keep: np.ndarray, max_ranges: int,
              fns: tuple[Fn, ...] = ()) -> DiP | None:
    """The diP of the kept files' values of ``fns(col)``; None when some kept file's values are unknown."""
    valued = keep & ~only_nulls(col, rows)
    if (valued & ~_described(col)).any():
        return None
    lo, hi, _ = _intervals(col, valued)
    if fns:
        lo, hi, ok = apply_all(fns, col.kind, lo, hi)
        if not ok.all():
            return None
    return _merged(lo, hi, max_ranges)


def dip_of_values(values: np.ndarray, kind: Kind, max_ranges: int, fns: tuple[Fn, ...] = ()) -> DiP | None:
    """The diP of a set of values (the keys of a sender's rows, ``rewriter/exact_keys.py``) under ``fns``;
    None when a function's bounds are unknown on some value. Values one apart in an integral domain merge
    into one interval (nothing lies between them), so consecutive keys cost one range."""
    lo = distinct(values)
    hi = lo
    keys = lo if not fns and len(lo) <= indexes.MAX_PROBED_VALUES else None
    if fns:
        lo, hi, ok = apply_all(fns, kind, lo, hi)
        if not ok.all():
            return None
        kind = kind_after(fns, kind)
    return dataclasses.replace(_merged(lo, hi, max_ranges, adjacent=kind.name in INTEGRAL), keys=keys)


def dip_of_intervals(lo: np.ndarray, hi: np.ndarray, max_ranges: int) -> DiP:
    """The diP of a set of intervals (a constant filter's literals, ``rewriter/domain.py``)."""
    return _merged(lo, hi, max_ranges)


def distinct(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values (by sorting: numpy's hash-based ``unique`` takes 10-100x longer on some
    key distributions, 0.3 s on 100,000 TPC-DS customer keys)."""
    if len(values) < 2 or bool(np.all(values[1:] > values[:-1])):
        return values  # already sorted and distinct, as exact keys of dense integer keys come (one pass)
    ordered = np.sort(values, kind="stable")
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]


# Kinds whose domain values are integers: [a, a] and [a + 1, a + 1] leave no value between them.
INTEGRAL = ("int", "decimal", "date", "timestamp", "timestamp_ntz")


def union(dips: list[DiP], max_ranges: int) -> DiP:
    """The diP of the union of several inputs (the branches of a UNION): every value any of them allows.
    Exact only if every input is and merging them needed no compaction."""
    merged = _merged(np.concatenate([d.lo for d in dips]), np.concatenate([d.hi for d in dips]), max_ranges)
    keys = None
    if all(d.keys is not None for d in dips):
        keys = distinct(np.concatenate([d.keys for d in dips]))
        keys = keys if len(keys) <= indexes.MAX_PROBED_VALUES else None
    return dataclasses.replace(merged, exact=merged.exact and all(d.exact for d in dips), keys=keys)


def _merged(lo: np.ndarray, hi: np.ndarray, max_ranges: int, adjacent: bool = False) -> DiP:
    """Intervals sorted and merged where they overlap (``adjacent``: or where they are one apart, in an
    integral domain), then compacted."""
    if len(lo) == 0:
        return DiP(lo, hi)
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], hi[order]
    # Merge overlapping intervals in one pass: a new run starts where lo exceeds every hi before it.
    running_hi = np.maximum.accumulate(hi)  # object arrays (strings, integers past int64) compare as Python values
    starts = np.concatenate(([True], lo[1:] > (running_hi[:-1] + 1 if adjacent else running_hi[:-1])))
    ends = np.concatenate((starts[1:], [True]))
    return compact(DiP(lo[starts], running_hi[ends]), max_ranges)


def compact(d: DiP, max_ranges: int) -> DiP:
    """At most ``max_ranges`` intervals, bridging the smallest gaps (strings: the first gaps, as string
    gaps have no width)."""
    if d.ranges <= max_ranges or max_ranges < 1:
        return d
    gaps = d.lo[1:] - d.hi[:-1] if d.lo.dtype != object or not isinstance(d.lo[0], str) else None
    n_bridge = d.ranges - max_ranges
    if gaps is None:
        bridged = np.arange(n_bridge)
    else:
        bridged = np.argsort(np.asarray(gaps, dtype=float), kind="stable")[:n_bridge]
    keep_gap = np.ones(d.ranges - 1, dtype=bool)
    keep_gap[bridged] = False
    starts = np.concatenate(([True], keep_gap))
    ends = np.concatenate((keep_gap, [True]))
    return DiP(d.lo[starts], d.hi[ends], exact=False)


def admitted(d: DiP, values: np.ndarray, kind: Kind, fns: tuple[Fn, ...] = ()) -> np.ndarray:
    """Per value: may ``fns(value)`` lie inside ``d``? (Unknown bounds after the functions: yes.) A diP that
    carries its origin's keys admits exactly those: its intervals, compacted, may admit far more (TPC-DS
    q94: 1,596 address keys become 64 ranges spanning most addresses)."""
    if d.keys is not None and not fns:
        # Strings, or integers past 64 bits on either side: numpy's isin compares every pair of objects
        # (0.25 s for 9,000 x 1,750 strings; 11 s for 2,048 object keys against 200,000 int64 values).
        if values.dtype == object or d.keys.dtype == object:
            keys = set(d.keys.tolist())
            return np.fromiter((v in keys for v in values.tolist()), dtype=bool, count=len(values))
        return np.isin(values, d.keys)
    lo, hi, ok = values, values, np.ones(len(values), dtype=bool)
    if fns:
        lo, hi, ok = apply_all(fns, kind, lo, hi)
    return ~ok | _overlaps(d, lo, hi)


def _overlaps(d: DiP, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per interval [lo[i], hi[i]]: does it overlap an interval of ``d``?"""
    if d.ranges == 0:
        return np.zeros(len(lo), dtype=bool)
    # The first diP interval ending at or after lo; the interval overlaps it iff it starts by hi.
    k = np.searchsorted(d.hi, lo, side="left")
    inside = k < d.ranges
    out = np.zeros(len(lo), dtype=bool)
    out[inside] = d.lo[k[inside]] <= hi[inside]
    return out


def satisfy(d: DiP, col: ColumnStats, rows: np.ndarray, fns: tuple[Fn, ...] = ()) -> np.ndarray:
    """Per file of the receiving table: may it hold a value whose ``fns`` lies inside ``d``? Unknown bounds: yes."""
    n = len(col.lo)
    unknown = ~_described(col) & ~only_nulls(col, rows)
    lo, hi, file = _intervals(col, np.ones(n, dtype=bool))
    ok = np.ones(len(lo), dtype=bool)
    if fns:
        lo, hi, ok = apply_all(fns, col.kind, lo, hi)
    hit = ~ok | _overlaps(d, lo, hi)  # bounds unknown after the functions: the interval may hold anything
    out = np.zeros(n, dtype=bool)
    out[file[hit]] = True
    out |= unknown
    if col.indexes and not fns:
        keys = d.keys if d.keys is not None else enumerated(d, col.kind, indexes.MAX_PROBED_VALUES)
        if keys is not None:
            out &= indexes.might_contain(col.indexes, keys, n)  # no file without one of the keys can join
    return out


def enumerated(d: DiP, kind: Kind, limit: int) -> np.ndarray | None:
    """Every value ``d`` admits, when they are at most ``limit``: the values of an integral domain's intervals,
    or strings' one-value intervals; else None."""
    if d.ranges == 0:
        return d.lo
    if kind.name not in INTEGRAL:
        return d.lo if d.ranges <= limit and bool(np.all(d.lo == d.hi)) else None
    widths = [int(b) - int(a) + 1 for a, b in zip(d.lo, d.hi)] if d.ranges <= limit else None
    if widths is None or sum(widths) > limit or not -2**63 <= int(d.lo[0]) <= int(d.hi[-1]) < 2**63:
        return None  # too many, or past int64 (a wide decimal's unscaled values: no filter holds them)
    return np.concatenate([np.arange(int(a), int(b) + 1, dtype=np.int64) for a, b in zip(d.lo, d.hi)])
