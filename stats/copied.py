"""Statistics of a table whose files are another table's, as they are or copied (the layout benchmarks' copies).

A copy made file by file with ``shutil.copytree`` keeps each file's bytes, size and modification time, so the
statistics of the source's files describe the copy's: only the paths differ. Collecting them again reads every
byte once more (at SF 10, six minutes for store_sales, twelve for the twelve TPC-DS tables ``bench layout-effect``
lays out); carrying them over reads none.

When a row carries over, soundly. A row describes the content a file had under its identity (path, size, mtime:
``stats/freshness.py``). The source's rows are carried only if the source's listing equals them exactly both
before and after the copy (every file described and fresh, none added, none changed meanwhile), and the copy's
listing holds the same files under the same relative paths, sizes and times; then each copied file was read
while its source had the described content, and it still has that content, as far as the identity can tell
(the assumption every freshness check makes). Any difference and the copy is described by nothing carried over:
the caller collects it. Even a carried row is checked again by the loader against the copy's listing, as any
row is, so a copy changed after this is read, never skipped on old statistics.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from pathlib import Path

import pyarrow as pa

from stats.freshness import FileInfo, list_files, location_prefix
from stats.store import Snapshot, TableEntry

log = logging.getLogger("dipper.stats")


def renamed(snapshot: Snapshot, source_table: str, table: str) -> tuple[TableEntry, pa.Table] | None:
    """The statistics of ``table``, a second catalog name for ``source_table``'s own folder: the same rows under
    the new name (the loader checks them against the listing, as it checks the source's); None without any."""
    entry = snapshot.entry(source_table)
    if entry is None:
        return None
    return dataclasses.replace(entry, name=table.lower()), snapshot.read(source_table)


def copy_files(snapshot: Snapshot, source_table: str, source_location: str, destination: Path, table: str,
               location: str) -> tuple[TableEntry, pa.Table] | None:
    """Copy the files of ``source_table`` (stored at ``source_location``) into the new folder ``destination``,
    which ``table`` is defined over (``location``, as the catalog reports it), and return ``table``'s statistics
    carried over from the source's, or None when they cannot be (the reason logged): the caller collects them."""
    before = list_files(source_location)
    shutil.copytree(_local(source_location), destination)
    entry = snapshot.entry(source_table)
    if entry is None:
        log.info("%s: collected, not carried over: %s has no statistics", table, source_table)
        return None
    data = snapshot.read(source_table)
    described = {FileInfo(p, s, m) for p, s, m in zip(data.column("path").to_pylist(),
                                                      data.column("size").to_pylist(),
                                                      data.column("mtime").to_pylist(), strict=True)}
    after = list_files(source_location)
    if not set(before) == set(after) == described:
        log.info("%s: collected, not carried over: the statistics of %s do not describe exactly its files as "
                 "they were before and after the copy", table, source_table)
        return None
    source_prefix, prefix = location_prefix(source_location), location_prefix(location)
    if not all(f.path.startswith(source_prefix) for f in described):
        log.info("%s: collected, not carried over: a file of %s is not under its location", table, source_table)
        return None
    carried = {f.path: prefix + f.path[len(source_prefix):] for f in described}
    if {FileInfo(carried[f.path], f.size, f.mtime) for f in described} != set(list_files(location)):
        log.info("%s: collected, not carried over: the copy's files differ from %s's in name, size or time",
                 table, source_table)
        return None
    paths = pa.array([carried[p] for p in data.column("path").to_pylist()], type=data.schema.field("path").type)
    data = data.set_column(data.schema.get_field_index("path"), "path", paths)
    return dataclasses.replace(entry, name=table.lower(), location=location), data


def _local(location: str) -> str:
    if not location.startswith("file:") and "://" in location:
        raise ValueError(f"only a local table's files are copied, not {location}")
    path = location.removeprefix("file:")
    return "/" + path.lstrip("/") if path.startswith("//") else path
