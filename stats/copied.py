"""Statistics of a table whose files are another table's, as they are or copied (the layout benchmarks' copies).

A copy made file by file with ``shutil.copytree`` keeps each file's bytes, size and modification time, so the
statistics of the source's files describe the copy's: only the paths differ. Collecting them again reads every
byte once more (at SF 10, three to six minutes for store_sales, twelve for the twelve TPC-DS tables
``bench layout-effect`` lays out); carrying them over reads none.

When a row carries over, soundly. A row describes the content a file had under its identity (path, size, mtime:
``stats/freshness.py``). The source's rows (read before the copy starts) are carried only if the source's
listing equals them exactly both before and after the copy (every file described and fresh, none added, none
changed meanwhile), and the copy's listing holds the same files under the same relative paths, sizes and times;
then each copied file was read while its source had the described content, and it still has that content, as
far as the identity can tell (the assumption every freshness check makes). The rows also say how the table is
read (format, partition columns, every column's type): they carry over only to a catalog definition of the copy
that reads it the same way, as the catalog describes it once defined (a table defined without the source's own
schema could infer other types from the files). Any difference and nothing is carried: the caller collects the
table. Even a carried row is checked again by the loader against the copy's listing, as any row is, so a copy
changed after this is read, never skipped on old statistics.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs

from stats.collect import TableDescription
from stats.freshness import FileInfo, filesystem, list_files, location_prefix, stored_file
from stats.store import Snapshot, TableEntry

log = logging.getLogger("dipper.stats")


@dataclasses.dataclass(frozen=True)
class Copy:
    """A table's files copied; ``statistics`` are the source's rows as read before the copy, or None when they do
    not describe exactly the files copied (``reason`` says why)."""

    source_table: str
    source_location: str
    statistics: tuple[TableEntry, pa.Table] | None
    reason: str = ""


def copy_files(snapshot: Snapshot | None, source_table: str, source_location: str, destination: Path) -> Copy:
    """Copy the files of ``source_table`` (stored at ``source_location``, a local folder) into the new folder
    ``destination``, keeping the source's statistics from ``snapshot`` if they describe exactly what was copied."""
    fs, root, _ = filesystem(source_location)
    if not isinstance(fs, pafs.LocalFileSystem):
        raise ValueError(f"only a local table's files are copied, not {source_location}")
    entry = snapshot.entry(source_table) if snapshot is not None else None
    data = snapshot.read(source_table) if entry is not None else None  # before any later commit can remove it
    before = list_files(source_location)
    shutil.copytree(root, destination)
    if entry is None:
        return Copy(source_table, source_location, None, f"{source_table} has no statistics")
    described = {stored_file(r) for r in data.select(["path", "size", "mtime"]).to_pylist()}
    if not set(before) == set(list_files(source_location)) == described:
        return Copy(source_table, source_location, None,
                    f"the statistics of {source_table} do not describe exactly its files as they were before and "
                    f"after the copy")
    return Copy(source_table, source_location, (entry, data))


def carried(copy: Copy, table: TableDescription) -> tuple[TableEntry, pa.Table] | None:
    """The statistics of ``table``, the catalog's definition over ``copy``'s folder, carried over from the
    source's; None (the reason logged) when they cannot be."""
    if copy.statistics is None:
        return _refused(table, copy.reason)
    entry, data = copy.statistics
    if not _reads_alike(entry, table):
        return _refused(table, f"it is not read as {copy.source_table} is (format, partitions or column types)")
    source_prefix, prefix = location_prefix(copy.source_location), location_prefix(table.location)
    paths = [prefix + p[len(source_prefix):] for p in data.column("path").to_pylist()]  # each under the prefix
    if {FileInfo(p, r["size"], r["mtime"]) for p, r in zip(paths, data.select(["size", "mtime"]).to_pylist(),
                                                              strict=True)} != set(list_files(table.location)):
        return _refused(table, f"the copy's files differ from {copy.source_table}'s in name, size or time")
    data = data.set_column(data.schema.get_field_index("path"), "path",
                           pa.array(paths, type=data.schema.field("path").type))
    return dataclasses.replace(entry, name=table.name.lower(), location=table.location), data


def renamed(snapshot: Snapshot, source_table: str, table: TableDescription) -> tuple[TableEntry, pa.Table] | None:
    """The statistics of ``table``, a second catalog definition over ``source_table``'s own folder: the source's
    rows under the new name (the loader checks them against the listing, as it checks the source's); None when
    there are none or ``table`` is defined over another folder or read otherwise."""
    entry = snapshot.entry(source_table)
    if entry is None:
        return _refused(table, f"{source_table} has no statistics")
    if entry.location != table.location or not _reads_alike(entry, table):
        return _refused(table, f"its definition is not {source_table}'s (location, format, partitions or types)")
    return dataclasses.replace(entry, name=table.name.lower()), snapshot.read(source_table)


def _reads_alike(entry: TableEntry, table: TableDescription) -> bool:
    return (entry.format, tuple(entry.partition_columns), entry.schema) == \
        (table.format, tuple(table.partition_columns), table.schema)


def _refused(table: TableDescription, reason: str) -> None:
    log.info("%s: statistics collected, not carried over: %s", table.name, reason)
    return None
