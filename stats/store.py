"""The statistics store: a manifest plus one Parquet dataset per table, one row per file (ARCHITECTURE.md §4).

On disk::

    <root>/CURRENT                         the name of the current version (one line)
    <root>/versions/<version>/manifest.json
    <root>/versions/<version>/<db.table>.parquet

A write builds a complete new version (tables it does not change are hard-linked from the current one),
then swaps ``CURRENT`` with an atomic rename. A crash at any point leaves ``CURRENT`` naming a complete
version; readers never see a half-written store. The two newest versions are kept, so a reader that
just resolved ``CURRENT`` can still open its files.

Per-table Parquet schema: ``path`` (as Spark reports ``_metadata.file_path``), ``size`` (bytes), ``mtime``
(microseconds, as ``unix_micros(_metadata.file_modification_time)``), ``rows``, ``footer`` (true when the row
was read from the file's Parquet footer, not by the statistics job: zone maps only; absent in stores written
before it existed, meaning false), and one struct per covered
column named ``c:<column>`` with ``min``, ``max`` (exact domain, see ``stats/model.py``), ``nulls``,
``known`` (min/max are valid bounds), ``rs_lo`` / ``rs_hi`` (range-set, or null) and ``values`` (value
list, or null); and one column per statistic kind of ``stats/indexes.py`` and column it describes, named
``<kind>:<column>`` (e.g. ``bloom:ss_customer_sk``), null for a file it does not describe.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import fcntl
import json
import os
import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dipper.errors import StatsError
from stats.model import Kind, kind_of

FORMAT_VERSION = 1
COLUMN_PREFIX = "c:"
KEEP_VERSIONS = 2


@dataclasses.dataclass(frozen=True)
class TableEntry:
    name: str  # db.table, lower case
    location: str  # the table's root, as Spark reports it (file:/...)
    format: str
    partition_columns: tuple[str, ...]
    schema: dict[str, str]  # every column -> Spark type (simpleString)
    kinds: dict[str, Kind]  # columns with statistics
    skipped_columns: dict[str, str]  # column -> why it has no statistics
    range_set_size: int
    value_list_max: int
    collected_at: str
    files: int
    bytes: int
    # Statistic kinds of stats/indexes.py collected for the table: kind name -> columns (a refresh keeps them).
    indexes: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        body = dataclasses.asdict(self)
        body["partition_columns"] = list(self.partition_columns)
        body["indexes"] = {name: list(columns) for name, columns in self.indexes.items()}
        for kind in body["kinds"].values():
            del kind["bits"]  # derived from the Spark type on reading (from_json); the format stays as it was
        return body

    @staticmethod
    def from_json(body: dict[str, Any]) -> TableEntry:
        body = dict(body)
        body["partition_columns"] = tuple(body["partition_columns"])
        body["indexes"] = {name: tuple(columns) for name, columns in body.get("indexes", {}).items()}  # older: none
        # Rebuilt from the Spark type where it is known, so fields added to Kind since (an integer's width)
        # come from the type, never from a default.
        body["kinds"] = {c: kind_of(body["schema"].get(c, "")) or Kind(**k) for c, k in body["kinds"].items()}
        return TableEntry(**body)


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """One version of the store, as read once; cheap to hold, never changes."""

    root: Path
    version: str
    tables: dict[str, TableEntry]

    def entry(self, table: str) -> TableEntry | None:
        return self.tables.get(table.lower())

    def databases_holding(self, name: str) -> list[str]:
        return databases_holding(self.tables, name)

    def read(self, table: str, columns: list[str] | None = None) -> pa.Table:
        path = self.root / "versions" / self.version / data_file(table)
        return pq.read_table(path, columns=columns)

    def footer_rows(self, table: str) -> int:
        """How many files of ``table`` are described from their Parquet footers only (``stats/upkeep.py``)."""
        try:
            flags = self.read(table, columns=["footer"]).column("footer")
        except (KeyError, pa.ArrowInvalid):  # written before the footer column existed: none
            return 0
        return sum(1 for f in flags.to_pylist() if f)


def databases_holding(tables: Iterable[str], name: str) -> list[str]:
    """The databases among ``tables`` (``db.table`` names) that hold a table called ``name`` (unqualified)."""
    return sorted(k.rpartition(".")[0] for k in tables if k.rpartition(".")[2] == name.lower())


def data_file(table: str) -> str:
    return f"{table.lower()}.parquet"


class StatsStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def current_version(self) -> str | None:
        try:
            return (self.root / "CURRENT").read_text().strip() or None
        except FileNotFoundError:
            return None

    def snapshot(self) -> Snapshot:
        """The current version; an empty snapshot if nothing was ever collected."""
        version = self.current_version()
        if version is None:
            return Snapshot(self.root, "", {})
        manifest_path = self.root / "versions" / version / "manifest.json"
        try:
            body = json.loads(manifest_path.read_text())
        except (OSError, ValueError) as e:
            raise StatsError(f"statistics store {self.root} is unreadable ({e}); re-collect with "
                             f"`python -m stats collect --all`") from None
        found = body.get("format_version")
        if found != FORMAT_VERSION:
            raise StatsError(f"statistics store {self.root} has format version {found}; this Dipper reads version "
                             f"{FORMAT_VERSION}: move it away and re-collect with `python -m stats collect --all`")
        return Snapshot(self.root, version, {n: TableEntry.from_json(t) for n, t in body["tables"].items()})

    def commit(self, updates: dict[str, tuple[TableEntry, pa.Table]], removals: tuple[str, ...] = ()) -> Snapshot:
        """Write a new version with ``updates`` replacing (or adding) tables and ``removals`` dropped."""
        return self.update(lambda base: (updates, removals))

    def update(self, change: Callable[[Snapshot], tuple[dict[str, tuple[TableEntry, pa.Table]], tuple[str, ...]]]
               ) -> Snapshot:
        """Write a new version made by ``change`` from the current one. Writers take turns (a lock file, across
        processes: the statistics job, the proxy's footer coverage, DROP TABLE through the proxy), and each
        reads the version it changes under the lock, so no writer's tables are lost to another's."""
        with self._locked():
            base = self.snapshot()
            updates, removals = change(base)
            if not updates and not removals:
                return base
            return self._write(base, updates, removals)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / "LOCK", "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def _write(self, base: Snapshot, updates: dict[str, tuple[TableEntry, pa.Table]],
               removals: tuple[str, ...]) -> Snapshot:
        version = f"{datetime.datetime.now(datetime.timezone.utc):%Y%m%dT%H%M%S%f}-{uuid.uuid4().hex[:8]}"
        versions = self.root / "versions"
        target = versions / version
        tmp = versions / f".tmp-{version}"
        tmp.mkdir(parents=True)
        try:
            tables = {n: e for n, e in base.tables.items() if n not in removals}
            for name, (entry, data) in updates.items():
                pq.write_table(data, tmp / data_file(name), compression="zstd")
                tables[name] = entry
            for name in tables:
                if name not in updates:
                    _link_or_copy(versions / base.version / data_file(name), tmp / data_file(name))
            manifest = {"format_version": FORMAT_VERSION, "tables": {n: e.to_json() for n, e in sorted(tables.items())}}
            _write_synced(tmp / "manifest.json", json.dumps(manifest, indent=1, sort_keys=True))
            os.rename(tmp, target)
            _write_synced(self.root / "CURRENT.tmp", version + "\n")
            os.replace(self.root / "CURRENT.tmp", self.root / "CURRENT")
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self._collect_garbage(keep={version, base.version})
        return Snapshot(self.root, version, tables)

    def _collect_garbage(self, keep: set[str]) -> None:
        versions = self.root / "versions"
        existing = sorted(p.name for p in versions.iterdir() if not p.name.startswith(".tmp-"))
        for name in existing[:-KEEP_VERSIONS]:
            if name not in keep:
                shutil.rmtree(versions / name, ignore_errors=True)


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _write_synced(path: Path, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
