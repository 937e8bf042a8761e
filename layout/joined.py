"""Joined filters decided on sampled rows: the keys a sender's passing rows hold, and which rows hold one.

A joined filter (``rewriter/joined_filter.py``, ``Joined``) keeps the rows whose column holds a key of the
sender's rows that pass. The sender is read *whole* (its key column and the columns its predicates test):
a sample of it would miss keys, and a row whose key was missed would be judged unwanted when a query does
want it. A sender larger than ``max_rows``, or one that cannot be read, is not read; its filter is taken to keep every
row (the what-if then errs towards reading more, never less), and it is no cut. An empty sender admits no
key. The sender's predicates are decided by the rewriter's file evaluator on one-row files, as the table's
own are (``layout/sample.py``); a filter is *exact* (usable as a cut, whose key set must be Spark's) only
where that decision is certain on every row of the sender and of the senders it nests.
"""

from __future__ import annotations

import logging

import numpy as np

from layout.sample import LayoutError, Sample, sample_rows
from rewriter.joined_filter import Joined
from rewriter.evaluate import might_match
from rewriter.predicate import columns_of
from stats.loader import StatsLoader
from stats.model import ColumnStats, TableStats

log = logging.getLogger("dipper.layout")

DEFAULT_MAX_ROWS = 20_000_000


class JoinedKeys:
    """Key sets of joined filters, each computed once (senders are read once per set of columns)."""

    def __init__(self, loader: StatsLoader, max_rows: int = DEFAULT_MAX_ROWS) -> None:
        self.loader = loader
        self.max_rows = max_rows
        self._keys: dict[str, np.ndarray | None] = {}
        self._exact: dict[str, bool] = {}
        self._senders: dict[tuple[str, tuple[str, ...]], Sample | None] = {}

    def mask(self, j: Joined, column: ColumnStats) -> np.ndarray:
        """Per row of ``column`` (one-row files): may its value be among ``j``'s keys?"""
        keys = self.keys(j)
        if keys is None:
            return np.ones(len(column.lo), dtype=bool)
        present = column.null_count == 0
        return present & np.isin(column.lo, keys)

    def overlap(self, j: Joined, column: ColumnStats) -> np.ndarray:
        """Per file of ``column`` (min/max statistics): may its range hold one of ``j``'s keys? A file whose
        bounds are unknown may."""
        keys = self.keys(j)
        if keys is None:
            return np.ones(len(column.lo), dtype=bool)
        holds = np.searchsorted(keys, column.lo, "left") < np.searchsorted(keys, column.hi, "right")
        return holds | ~column.known

    def unique_key(self, j: Joined) -> bool:
        """Whether no two rows of ``j``'s sender (read whole) hold one non-NULL key, as ``apply`` checks with
        ``count(key) = count(DISTINCT key)``; False where the sender is not read."""
        rows = self.sender(j.source, _columns(j))
        if rows is None:
            return False
        key = rows.rows.columns[j.key]
        values = key.lo[key.null_count == 0]
        return len(np.unique(values)) == len(values)

    def keys(self, j: Joined) -> np.ndarray | None:
        """The distinct keys of the sender's rows that may pass (None: the sender is too large to read)."""
        text = j.sql()
        if text not in self._keys:
            self._keys[text] = self._compute(j)
        return self._keys[text]

    def exact(self, j: Joined) -> bool:
        """Whether ``j``'s key set is exactly the keys Spark finds: the sender read, and no row of it on which
        both its predicates and their negation may hold (NaN, a literal between two values, an untranslated
        conjunct, a time zone not known), in it and in every filter it nests."""
        text = j.sql()
        if text not in self._exact:
            self._exact[text] = self._decided(j)
        return self._exact[text]

    def _decided(self, j: Joined) -> bool:
        if self.keys(j) is None or not all(self.exact(n) for n in j.nested):
            return False
        rows = self.sender(j.source, _columns(j))
        if rows is None:
            return False
        both = might_match(j.pred, rows.rows) & might_match(j.negated, rows.rows)
        return not both.any()

    def _compute(self, j: Joined) -> np.ndarray | None:
        rows = self.sender(j.source, _columns(j))
        if rows is None:
            return None
        passing = might_match(j.pred, rows.rows)
        for n in j.nested:
            passing &= self.mask(n, rows.rows.columns[n.column])
        key = rows.rows.columns[j.key]
        return np.unique(key.lo[passing & (key.null_count == 0)])

    def sender(self, table: str, columns: tuple[str, ...]) -> Sample | None:
        """Every row of ``table`` with the values of ``columns`` (one-row files), read once; None where it is
        not read (too large, statistics not fresh)."""
        if (table, columns) not in self._senders:
            stats = self.loader.table_stats(table, fresh_listing=True)
            total = int(stats.rows.sum()) if stats is not None else 0
            why = "no fresh statistics" if stats is None or stats.unknown_files else \
                f"{total:,} rows > {self.max_rows:,}" if total > self.max_rows else \
                "columns without statistics" if not set(columns) <= set(stats.columns) else None
            sample = None
            if why is None:
                try:
                    sample = sample_rows(stats, list(columns), max_rows=max(1, total)) if total else _empty(stats, columns)
                except LayoutError as e:
                    why = str(e)
            if why is not None:
                log.info("joined filters from %s taken to keep every row (%s)", table, why)
            self._senders[(table, columns)] = sample
        return self._senders[(table, columns)]


def _columns(j: Joined) -> tuple[str, ...]:
    return tuple(sorted({j.key} | columns_of(j.pred) | columns_of(j.negated) | {n.column for n in j.nested}))


def _empty(stats: TableStats, columns: tuple[str, ...]) -> Sample:
    """The rows of an empty sender: none."""
    none = np.zeros(0, dtype=np.int64)
    cols = {c: ColumnStats(stats.columns[c].kind, np.zeros(0), np.zeros(0), np.zeros(0, dtype=bool), none)
            for c in columns}
    return Sample(TableStats(stats.table, np.empty(0, dtype=object), none, none, none, cols), 0, 0, stats.n_files)
