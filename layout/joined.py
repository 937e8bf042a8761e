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

import dataclasses
import logging

import numpy as np

from layout.sample import LayoutError, Sample, sample_rows
from rewriter.joined_filter import Joined
from rewriter.evaluate import might_match
from rewriter.predicate import columns_of
from stats.loader import StatsLoader
from stats.model import ColumnStats, TableStats, one_row_files

log = logging.getLogger("dipper.layout")

DEFAULT_MAX_ROWS = 20_000_000


class JoinedKeys:
    """Key sets of joined filters, each computed once (each column of a sender read once)."""

    def __init__(self, loader: StatsLoader, max_rows: int = DEFAULT_MAX_ROWS) -> None:
        self.loader = loader
        self.max_rows = max_rows
        self._keys: dict[str, np.ndarray | None] = {}
        self._exact: dict[str, bool] = {}
        self._senders: dict[tuple[str, tuple[str, ...]], Sample | None] = {}
        self._whole: dict[str, tuple[TableStats, Sample] | None] = {}  # per sender: its columns read so far

    def mask(self, j: Joined, column: ColumnStats) -> np.ndarray:
        """Per row of ``column`` (one-row files): may its value be among ``j``'s keys?"""
        keys = self.keys(j)
        if keys is None:
            return np.ones(len(column.lo), dtype=bool)
        present = column.null_count == 0
        return present & _among(column.lo, keys)

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
        """Every row of ``table`` with the values of ``columns`` (one-row files); None where it is not read
        (too large, statistics not fresh, a column without statistics or not readable).

        Each column of a sender is read once, however many filters test it: a sender read whole is read in
        the files' order, so columns read at different times line up row for row, and the samples of one
        table share its columns and its per-row arrays. (Read once per set of columns, as before, a plan of
        TPC-DS item at SF 1 held store_sales and inventory a dozen times over: 6.6 GB.)"""
        if (table, columns) not in self._senders:
            self._senders[(table, columns)] = self._assemble(table, columns)
        return self._senders[(table, columns)]

    def _assemble(self, table: str, columns: tuple[str, ...]) -> Sample | None:
        if table not in self._whole:
            self._whole[table] = self._open(self.loader.table_stats(table, fresh_listing=True), table)
        whole = self._whole[table]
        if whole is None:
            return None
        stats, read = whole
        missing = [c for c in columns if c not in read.rows.columns]
        if missing:
            # Columns read now must come from the files the others came from, or rows would pair values of
            # two versions of a file. The table as listed now: the same files (path, size, mtime), or start
            # again from it (not read where a file is no longer the one its statistics describe).
            now = self.loader.table_stats(table, fresh_listing=True)
            if now is not stats and not _same_files(now, stats):
                log.info("%s changed since its first columns were read: read again", table)
                self._whole[table] = whole = self._open(now, table)
                if whole is None:
                    return None
                stats, read = whole
                missing = list(columns)
        why = "columns without statistics" if not set(missing) <= set(stats.columns) else None
        if why is None and missing:
            try:
                more = sample_rows(stats, missing, max_rows=read.n).rows.columns if read.n else _empty(stats, missing)
            except LayoutError as e:
                why = str(e)
            else:
                read.rows.columns.update(more)
        if why is not None:
            log.info("joined filters from %s on %s taken to keep every row (%s)", table, ", ".join(columns), why)
            return None
        chosen = {c: read.rows.columns[c] for c in columns}
        return dataclasses.replace(read, rows=dataclasses.replace(read.rows, columns=chosen))

    def _open(self, stats: TableStats | None, table: str) -> tuple[TableStats, Sample] | None:
        """``table``'s statistics (``stats``, freshly listed) and its rows with no column read yet, or None where
        it is not read."""
        total = int(stats.rows.sum()) if stats is not None else 0
        why = "no fresh statistics" if stats is None or stats.unknown_files else \
            f"{total:,} rows > {self.max_rows:,}" if total > self.max_rows else None
        if why is not None:
            log.info("joined filters from %s taken to keep every row (%s)", table, why)
            return None
        return stats, _rows(stats, total)


def _among(values: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Per value: is it one of ``keys`` (sorted and distinct, as ``np.unique`` gives them)? ``np.isin``'s answer,
    faster: a plan tests millions of sender rows against thousands of key sets (TPC-DS item at SF 1 spent 99 of
    its 212 s in ``np.isin``). Integer keys spanning a range not much larger than the values are looked up in a
    table over that range, one pass; others by binary search into the keys."""
    if not len(keys):
        return np.zeros(len(values), dtype=bool)
    if values.dtype == np.int64 and keys.dtype == np.int64:
        low, high = int(keys[0]), int(keys[-1])
        if high - low < max(4 * len(values), 1 << 20):
            table = np.zeros(high - low + 1, dtype=bool)
            table[keys - low] = True
            inside = (values >= low) & (values <= high)
            out = np.zeros(len(values), dtype=bool)
            out[inside] = table[values[inside] - low]
            return out
    at = np.searchsorted(keys, values)
    return keys[np.minimum(at, len(keys) - 1)] == values


def _same_files(a: TableStats | None, b: TableStats) -> bool:
    """Whether two listings of a table hold the same files, each described by its statistics."""
    return a is not None and not a.unknown_files and not b.unknown_files and np.array_equal(a.paths, b.paths) and \
        np.array_equal(a.sizes, b.sizes) and np.array_equal(a.mtimes, b.mtimes)


def _columns(j: Joined) -> tuple[str, ...]:
    return tuple(sorted({j.key} | columns_of(j.pred) | columns_of(j.negated) | {n.column for n in j.nested}))


def _rows(stats: TableStats, total: int) -> Sample:
    """The ``total`` rows of a sender read whole as one-row files, with no column read yet (as
    ``sample_rows`` lays them out)."""
    return Sample(one_row_files(stats.table, total, {}), total, int(stats.sizes.sum()), stats.n_files)


def _empty(stats: TableStats, columns: list[str]) -> dict[str, ColumnStats]:
    """``columns`` of an empty sender: no rows."""
    none = np.zeros(0, dtype=np.int64)
    return {c: ColumnStats(stats.columns[c].kind, np.zeros(0), np.zeros(0), np.zeros(0, dtype=bool), none)
            for c in columns}
