"""A uniform sample of a table's rows, read from the files its statistics describe, as "one-row files".

The qd-tree is built and the what-if replayed on a sample (seed 003 §4: cuts are evaluated on tuples). Each
sampled row becomes a file of one row in a ``TableStats``: its value as both bounds, a NULL as a null count
of 1. The rewriter's file evaluator (``rewriter/evaluate.py``) then decides any translated predicate on every
sampled row at once, with the same literal and type rules it uses on real files, so a cut or a query means
here what it means when Dipper prunes. Values are read as exact keys reads them (``rewriter/exact_keys.py``,
``read_domain``): the kinds whose Parquet values Spark decodes the same way; anything else is refused with
the column named.

Every file is read (only the columns asked for) and exactly ``max_rows`` rows are drawn without replacement
(all of them from a smaller table), so the sample is uniform over the table however its files are ordered;
the seed makes it repeatable. A file without one of the columns (written before the column was added) reads
as NULLs in it, as Spark reads it.
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
from stats.loader import domain_values
from stats.model import Kind, TableStats, one_row_files, row_values

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
    """``max_rows`` rows drawn uniformly from every file of ``stats`` (all rows of a smaller table), with the
    values of ``columns``."""
    if max_rows < 1:
        raise LayoutError(f"the sample needs at least one row, not {max_rows}")
    if stats.unknown_files:
        raise LayoutError(f"{stats.table} has {stats.unknown_files} files the statistics store does not describe; "
                          f"collect its statistics first (python -m stats collect {stats.table})")
    missing = [c for c in columns if c not in stats.columns]
    if missing:
        raise LayoutError(f"{stats.table} has no statistics for column {missing[0]!r}")
    total = int(stats.rows.sum())
    if total == 0:
        raise LayoutError(f"{stats.table} is empty: there is nothing to lay out")
    m = min(max_rows, total)
    chosen = np.sort(np.random.default_rng(seed).choice(total, size=m, replace=False)) if m < total else np.arange(total)
    starts = np.concatenate([[0], np.cumsum(stats.rows.astype(np.int64))])
    stored = [c for c in columns if c not in stats.partition_columns]
    parts: dict[str, list[np.ndarray]] = {c: [] for c in columns}
    valid: dict[str, list[np.ndarray]] = {c: [] for c in columns}
    started = time.monotonic()
    for i in range(stats.n_files):
        lo, hi = np.searchsorted(chosen, [starts[i], starts[i + 1]])
        if lo == hi:
            continue
        offsets = chosen[lo:hi] - starts[i]
        k = len(offsets)
        table = _read(stats, i, stored) if stored else None
        for c in columns:
            kind = stats.columns[c].kind
            if c in stats.partition_columns:
                values, ok = _partition_value(stats, i, c, k)
            elif table is None or c not in _names(table):
                values, ok = _nulls(kind, k)  # the file predates the column: Spark reads NULL
            else:
                arr = table.column(_names(table)[c]).combine_chunks().take(pa.array(offsets))
                try:
                    values = read_domain(arr, kind, stats.paths[i], c)
                except KeysRefused as e:
                    raise LayoutError(f"cannot sample {stats.table}.{c}: {e}") from None
                ok = arr.is_valid().to_numpy(zero_copy_only=False)
            parts[c].append(values)
            valid[c].append(ok)
        if time.monotonic() - started > 10 and i % 200 == 0:
            log.info("sampling %s: %d of %d files", stats.table, i + 1, stats.n_files)
    out = {}
    for c in columns:
        out[c] = row_values(stats.columns[c].kind, np.concatenate(parts[c]), np.concatenate(valid[c]))
    return Sample(one_row_files(stats.table, m, out), total, int(stats.sizes.sum()), stats.n_files)


def _read(stats: TableStats, i: int, columns: list[str]) -> pa.Table:
    path = stats.paths[i]
    try:
        with open_listed(stats.location, path) as f:
            pf = pq.ParquetFile(f, coerce_int96_timestamp_unit="us")
            names = {n.lower(): n for n in pf.schema_arrow.names}
            table = pf.read(columns=[names[c] for c in columns if c in names])
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
    if value is None:
        return _nulls(stats.columns[column].kind, n)
    return np.full(n, value, dtype=stats.columns[column].lo.dtype), np.ones(n, dtype=bool)


def _nulls(kind: Kind, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` NULLs of ``kind``: the placeholder value ``domain_values`` uses for the kind, and not valid."""
    return domain_values(pa.nulls(n, type=_placeholder_type(kind)), kind), np.zeros(n, dtype=bool)


def _placeholder_type(kind: Kind) -> pa.DataType:
    if kind.name == "string":
        return pa.string()
    if kind.name == "float":
        return pa.float64()
    if kind.name == "decimal":
        return pa.decimal128(max(kind.precision, 1), kind.scale)
    return pa.int64()
