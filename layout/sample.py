"""A uniform sample of a table's rows, read from the files its statistics describe, as "one-row files".

The qd-tree is built and the what-if replayed on a sample (seed 003 §4: cuts are evaluated on tuples). Each
sampled row becomes a file of one row in a ``TableStats``: its value as both bounds, a NULL as a null count
of 1. The rewriter's file evaluator (``rewriter/evaluate.py``) then decides any translated predicate on every
sampled row at once, with the same literal and type rules it uses on real files, so a cut or a query means
here what it means when Dipper prunes. Values are read as exact keys reads them (``rewriter/exact_keys.py``,
``read_domain``): the kinds whose Parquet values Spark decodes the same way; anything else is refused with
the column named.

Every file is read (only the columns asked for) and each row kept with the same probability, so the sample
is uniform over the table however its files are ordered; the seed makes it repeatable.
"""

from __future__ import annotations

import dataclasses
import logging
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dipper.errors import DipperError
from rewriter.exact_keys import KeysRefused, partition_value, read_domain
from stats.freshness import open_listed
from stats.model import ColumnStats, TableStats

log = logging.getLogger("dipper.layout")

DEFAULT_SAMPLE_ROWS = 200_000


class LayoutError(DipperError):
    """A layout request that cannot be carried out; the message says why and what to do."""


@dataclasses.dataclass(frozen=True)
class Sample:
    rows: TableStats  # one "file" per sampled row
    table_rows: int  # rows of the whole table
    table_bytes: int
    files_read: int

    @property
    def n(self) -> int:
        return self.rows.n_files


def sample_rows(stats: TableStats, columns: list[str], max_rows: int = DEFAULT_SAMPLE_ROWS, seed: int = 0) -> Sample:
    """About ``max_rows`` rows drawn uniformly from every file of ``stats`` (all rows if the table is smaller),
    with the values of ``columns``."""
    if stats.unknown_files:
        raise LayoutError(f"{stats.table} has {stats.unknown_files} files the statistics store does not describe; "
                          f"collect its statistics first (python -m stats collect {stats.table})")
    missing = [c for c in columns if c not in stats.columns]
    if missing:
        raise LayoutError(f"{stats.table} has no statistics for column {missing[0]!r}")
    total = int(stats.rows.sum())
    if total == 0:
        raise LayoutError(f"{stats.table} is empty: there is nothing to lay out")
    p = min(1.0, max_rows / total)
    rng = np.random.default_rng(seed)
    stored = [c for c in columns if c not in stats.partition_columns]
    parts: dict[str, list[np.ndarray]] = {c: [] for c in columns}
    valid: dict[str, list[np.ndarray]] = {c: [] for c in columns}
    started = time.monotonic()
    for i in range(stats.n_files):
        n = int(stats.rows[i])
        keep = rng.random(n) < p if p < 1.0 else np.ones(n, dtype=bool)
        if not keep.any():
            continue
        table = _read(stats, i, stored) if stored else None
        for c in columns:
            if c in stats.partition_columns:
                values, ok = _partition_value(stats, i, c, int(keep.sum()))
            else:
                assert table is not None
                arr = table.column(_names(table)[c]).combine_chunks().filter(pa.array(keep))
                try:
                    values = read_domain(arr, stats.columns[c].kind, stats.paths[i], c)
                except KeysRefused as e:
                    raise LayoutError(f"cannot sample {stats.table}.{c}: {e}") from None
                ok = arr.is_valid().to_numpy(zero_copy_only=False)
            parts[c].append(values)
            valid[c].append(ok)
        if time.monotonic() - started > 10 and i % 200 == 0:
            log.info("sampling %s: %d of %d files", stats.table, i + 1, stats.n_files)
    out = {}
    for c in columns:
        kind = stats.columns[c].kind
        values = np.concatenate(parts[c]) if parts[c] else np.zeros(0)
        ok = np.concatenate(valid[c]) if valid[c] else np.zeros(0, dtype=bool)
        known = ok & ~np.isnan(values) if values.dtype == np.float64 else ok
        out[c] = ColumnStats(kind, values, values, known, (~ok).astype(np.int64))
    m = len(next(iter(out.values())).lo) if out else int(round(total * p))
    rows = TableStats(stats.table, np.empty(m, dtype=object), np.zeros(m, dtype=np.int64), np.zeros(m, dtype=np.int64),
                      np.ones(m, dtype=np.int64), out)
    return Sample(rows, total, int(stats.sizes.sum()), stats.n_files)


def _read(stats: TableStats, i: int, columns: list[str]) -> pa.Table:
    path = stats.paths[i]
    try:
        with open_listed(stats.location, path) as f:
            pf = pq.ParquetFile(f, coerce_int96_timestamp_unit="us")
            names = {n.lower(): n for n in pf.schema_arrow.names}
            absent = [c for c in columns if c not in names]
            if absent:
                raise LayoutError(f"{path} has no column {absent[0]!r}; its statistics are stale: collect them again")
            table = pf.read(columns=[names[c] for c in columns])
    except (OSError, pa.ArrowException) as e:
        raise LayoutError(f"cannot read {path}: {e}") from None
    if table.num_rows != int(stats.rows[i]):
        raise LayoutError(f"{path} holds {table.num_rows} rows, its statistics {int(stats.rows[i])}: collect them again")
    return table


def _names(table: pa.Table) -> dict[str, str]:
    return {n.lower(): n for n in table.column_names}


def _partition_value(stats: TableStats, i: int, column: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A partition column on ``n`` rows of file ``i``: its one value (``exact_keys.partition_value``)."""
    try:
        value = partition_value(stats, i, column)
    except KeysRefused as e:
        raise LayoutError(f"cannot sample {stats.table}: {e}") from None
    dtype = stats.columns[column].lo.dtype
    if value is None:
        return np.zeros(n, dtype=dtype), np.zeros(n, dtype=bool)
    return np.full(n, value, dtype=dtype), np.ones(n, dtype=bool)
