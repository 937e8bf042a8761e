"""Load the store into columnar numpy arrays per table and column, and serve them freshness-checked.

:class:`StatsLoader` is the statistics read API of the rewriter (its ``StatsSource``): ``schemas()`` and
``table_stats(table)``. A table's arrays are built once per store version and cached; when ``CURRENT``
changes they are rebuilt on next use. Memory grows with files x covered columns (plus range-set
intervals and value-list entries), nothing else.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Mapping

import numpy as np
import pyarrow as pa

from stats import indexes
from stats.blocks import BlockLayout, read_layout, record_path
from stats.freshness import Lister
from stats.model import EXACT, ColumnStats, Kind, RangeSets, TableStats, ValueLists
from stats.store import COLUMN_PREFIX, Snapshot, StatsStore

# Placeholders stored where a bound is unknown, so comparisons stay well-typed (``known`` masks them out).
_FILL = {"float": 0.0, "string": ""}


class StatsLoader:
    def __init__(self, store: StatsStore, lister: Lister, on_unknown: Callable[[str], None] | None = None) -> None:
        self.store = store
        self.lister = lister
        # Told the name of a table whose listing shows files the store does not describe (stats/upkeep.py).
        self.on_unknown = on_unknown
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._schemas: dict[str, dict[str, str]] = {}
        self._tables: dict[str, TableStats] = {}
        # table -> (listing, statistics it was checked against, result): the same statistics and an equal
        # listing give the same answer, and comparing listings is much cheaper than subsetting every column.
        self._checked: dict[str, tuple[list, TableStats, TableStats]] = {}
        self._layouts: dict[str, tuple[int, BlockLayout | None]] = {}

    def snapshot(self) -> Snapshot:
        """The current store version, re-read only when ``CURRENT`` names another one."""
        version = self.store.current_version() or ""
        with self._lock:
            if self._snapshot is None or self._snapshot.version != version:
                snap = self.store.snapshot()
                self._snapshot, self._tables = snap, {}
                self._schemas = {n: dict(e.schema) for n, e in snap.tables.items()}
            return self._snapshot

    def forget(self, tables: Iterable[str], collected_at: Mapping[str, str] | None = None) -> list[str]:
        """Drop the statistics of ``tables`` (``db.table``) from the store; returns those that had some. With
        ``collected_at`` (table -> location), only statistics still of that location go (a table collected
        again elsewhere meanwhile keeps its new statistics)."""
        names = list(dict.fromkeys(t.lower() for t in tables))
        gone: list[str] = []

        def drop(base: Snapshot) -> tuple[dict, tuple[str, ...]]:
            gone[:] = [t for t in names if (e := base.entry(t)) is not None
                       and (collected_at is None or collected_at.get(t) == e.location)]
            return {}, tuple(gone)

        self.store.update(drop)
        return gone

    def schemas(self) -> Mapping[str, Mapping[str, str]]:
        self.snapshot()
        return self._schemas

    def block_layout(self, table: str) -> BlockLayout | None:
        """The block layout ``layout apply`` recorded for ``table`` (``stats/blocks.py``), re-read when its
        file changes; None without one."""
        path = record_path(self.store.root, table)
        try:
            stamp = path.stat().st_mtime_ns
        except FileNotFoundError:
            return None
        with self._lock:
            cached = self._layouts.get(table.lower())
        if cached is not None and cached[0] == stamp:
            return cached[1]
        layout = read_layout(self.store.root, table)
        with self._lock:
            self._layouts[table.lower()] = (stamp, layout)
        return layout

    @property
    def cached_tables(self) -> int:
        """Tables whose arrays are held (for the proxy's metrics: memory grows with them)."""
        with self._lock:
            return len(self._tables)

    def stored(self, table: str) -> TableStats | None:
        """Every file the store describes, as collected (no freshness check)."""
        snap = self.snapshot()
        name = table.lower()
        entry = snap.entry(name)
        if entry is None:
            return None
        with self._lock:
            cached = self._tables.get(name)
        if cached is None:
            cached = dataclasses.replace(to_table_stats(name, snap.read(name), entry.kinds, entry.partition_columns),
                                         location=entry.location, format=entry.format.lower())
            with self._lock:
                self._tables[name] = cached
        return cached

    def table_stats(self, table: str, fresh_listing: bool = False) -> TableStats | None:
        """The fresh files only (same path, size and mtime as on storage now), with the count and bytes of
        the current files the store does not describe. ``fresh_listing`` lists storage now instead of
        using a listing up to the lister's TTL old (a diP origin must not miss a file added since)."""
        stored = self.stored(table)
        if stored is None:
            return None
        entry = self.snapshot().entry(table)
        current = self.lister.files(entry.location, max_age=0 if fresh_listing else None)
        with self._lock:
            checked = self._checked.get(table.lower())
        if checked is not None and checked[1] is stored and checked[0] == current:
            return checked[2]
        result = self._check(stored, current)
        with self._lock:
            self._checked[table.lower()] = (current, stored, result)
        if result.unknown_files and self.on_unknown is not None:
            self.on_unknown(table)
        return result

    @staticmethod
    def _check(stored: TableStats, current: list) -> TableStats:
        now = {f.path: (f.size, f.mtime) for f in current}
        fresh = np.fromiter((now.get(p) == (s, m) for p, s, m in zip(stored.paths, stored.sizes, stored.mtimes)),
                            dtype=bool, count=stored.n_files)
        known = set(stored.paths[fresh])
        unknown = [f for f in current if f.path not in known]
        return subset(stored, fresh, unknown_files=len(unknown), unknown_bytes=sum(f.size for f in unknown))


def to_table_stats(name: str, data: pa.Table, kinds: Mapping[str, Kind], partition_columns: tuple[str, ...]) -> TableStats:
    n = data.num_rows
    columns = {}
    extra = indexes.load_all(data, kinds)
    for column, kind in kinds.items():
        s = data.column(COLUMN_PREFIX + column).combine_chunks()
        lo, lo_valid = _domain_array(s.field("min"), kind)
        hi, _ = _domain_array(s.field("max"), kind)
        known = s.field("known").to_numpy(zero_copy_only=False).astype(bool) & lo_valid
        nulls = s.field("nulls").fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        ranges = _flat_lists(s.field("rs_lo"), s.field("rs_hi"), kind, n)
        values = _flat_values(s.field("values"), n)
        if column in partition_columns and kind.name == "timestamp":
            # Spark reads a TIMESTAMP partition value from the folder's text in the reading session's time zone
            # (CatalogTablePartition.toRow), so its instant depends on the session: the job's values are no
            # bound of what another session reads. Null counts do not depend on it.
            known, ranges = np.zeros(n, dtype=bool), None
        columns[column] = ColumnStats(kind, lo, hi, known, nulls, ranges, values, extra.get(column, {}))
    return TableStats(
        table=name,
        paths=np.array(data.column("path").to_pylist(), dtype=object),
        sizes=data.column("size").to_numpy().astype(np.int64),
        mtimes=data.column("mtime").to_numpy().astype(np.int64),
        rows=data.column("rows").to_numpy().astype(np.int64),
        columns=columns,
        partition_columns=partition_columns,
        from_footer=_footer_flags(data),
    )


def _footer_flags(data: pa.Table) -> np.ndarray | None:
    """Which rows were read from Parquet footers (the store's ``footer`` column; absent in older stores)."""
    if "footer" not in data.column_names:
        return None
    flags = data.column("footer").fill_null(False).to_numpy(zero_copy_only=False).astype(bool)
    return flags if flags.any() else None


def subset(stats: TableStats, keep: np.ndarray, unknown_files: int, unknown_bytes: int) -> TableStats:
    """The same statistics restricted to the files where ``keep`` is True."""
    index = np.flatnonzero(keep)
    remap = np.full(stats.n_files, -1, dtype=np.int64)
    remap[index] = np.arange(len(index))
    columns = {}
    for name, c in stats.columns.items():
        ranges = values = None
        if c.ranges is not None:
            m = keep[c.ranges.file]
            ranges = RangeSets(c.ranges.lo[m], c.ranges.hi[m], remap[c.ranges.file[m]], c.ranges.present[keep])
        if c.values is not None:
            m = keep[c.values.file]
            values = ValueLists(c.values.values[m], remap[c.values.file[m]], c.values.present[keep])
        columns[name] = ColumnStats(c.kind, c.lo[keep], c.hi[keep], c.known[keep], c.null_count[keep], ranges, values,
                                    {kind: loaded.subset(keep) for kind, loaded in c.indexes.items()})
    return TableStats(stats.table, stats.paths[keep], stats.sizes[keep], stats.mtimes[keep], stats.rows[keep], columns,
                      unknown_files=unknown_files, unknown_bytes=unknown_bytes, partition_columns=stats.partition_columns,
                      location=stats.location, format=stats.format,
                      from_footer=stats.from_footer[keep] if stats.from_footer is not None else None)


def _domain_array(arr: pa.Array, kind: Kind) -> tuple[np.ndarray, np.ndarray]:
    """(values in the evaluator's domain, valid mask); invalid entries hold a placeholder."""
    return domain_values(arr, kind), arr.is_valid().to_numpy(zero_copy_only=False)


def domain_values(arr: pa.Array, kind: Kind) -> np.ndarray:
    """An Arrow array's values in the statistics' domain of ``kind`` (``stats/model.py``), NULLs as a
    placeholder: decimals as unscaled integers (from a decimal array at the kind's scale), strings as ``str``,
    floats as float64, anything else as int64 (an integer array already in the domain)."""
    if kind.name == "decimal":
        t = arr.type
        if kind.precision <= 18 and pa.types.is_decimal128(t) and t.precision <= 18:
            # The low 64 bits of a 128-bit two's-complement integer that fits in 64 bits are that integer.
            words = np.frombuffer(arr.buffers()[1], dtype="<i8")[2 * arr.offset:2 * (arr.offset + len(arr))]
            return np.where(arr.is_valid().to_numpy(zero_copy_only=False), words[0::2], 0).astype(np.int64)
        unscaled = [int(EXACT.scaleb(v, kind.scale)) if v is not None else 0 for v in arr.to_pylist()]
        return np.array(unscaled, dtype=np.int64 if kind.precision <= 18 else object)
    if kind.name == "string":
        return np.array([v if v is not None else "" for v in arr.to_pylist()], dtype=object)
    if kind.name == "float":
        return arr.fill_null(0.0).to_numpy(zero_copy_only=False).astype(np.float64)
    return arr.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)


def _flat_lists(lo: pa.ListArray, hi: pa.ListArray, kind: Kind, n: int) -> RangeSets | None:
    present = lo.is_valid().to_numpy(zero_copy_only=False)
    if not present.any():
        return None
    lengths = lo.value_lengths().fill_null(0).to_numpy(zero_copy_only=False)
    file = np.repeat(np.arange(n), lengths)
    flat_lo, _ = _domain_array(lo.flatten(), kind)
    flat_hi, _ = _domain_array(hi.flatten(), kind)
    return RangeSets(flat_lo, flat_hi, file, present)


def _flat_values(values: pa.ListArray, n: int) -> ValueLists | None:
    present = values.is_valid().to_numpy(zero_copy_only=False)
    if not present.any():
        return None
    lengths = values.value_lengths().fill_null(0).to_numpy(zero_copy_only=False)
    return ValueLists(np.array(values.flatten().to_pylist(), dtype=object), np.repeat(np.arange(n), lengths), present)
