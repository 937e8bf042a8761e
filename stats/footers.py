"""Zone maps from Parquet footers, with pyarrow and no Spark (ARCHITECTURE.md §4).

Seconds instead of a Spark job, at the price of weaker statistics: min, max and null count per column from
the row groups' statistics, no range-sets and no value lists. Bounds are only trusted where the footer
proves them: a row group without statistics, an inexact (truncated) string bound, or any float column
(footers leave NaN out of min/max, and a NaN would escape the bounds) makes that file's bounds unknown.
Timestamps written as INT96 (Spark's default) carry no statistics and so are unknown too.
"""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from stats import spark_reader
from stats.freshness import FileInfo
from stats.model import EPOCH_DATE, EPOCH_UTC, Kind, kind_of
from stats.store import COLUMN_PREFIX



# Dates and timestamps Spark reads through the legacy calendar (stats/spark_reader.py) have footer bounds
# only from the days both calendars read alike; before 1900 the bounds are not trusted at all (a footer
# bound is the writer's value, which every zone's history need not share).
_FIRST_TRUSTED_DAY = (datetime.date(1900, 1, 1) - EPOCH_DATE).days
_FIRST_TRUSTED_MICROS = _FIRST_TRUSTED_DAY * 86_400 * 1_000_000


def footer_row(info: FileInfo, source: Any, schema: dict[str, str], kinds: dict[str, Kind],
               partition_columns: tuple[str, ...] = ()) -> dict[str, Any] | None:
    """One store row for a file of a table (``schema``: column -> Spark type, ``kinds``: the covered columns),
    from its footer; None when the file must stay unknown: it cannot be read as Parquet, or Spark would read a
    column of it as something else than its footer describes (or fail to read it: a row of statistics would
    let the rewriter skip the file, and hide the error the original raises).

    A column whose bounds the footer cannot prove is described as unknown (the file is still described, its
    row count exact): partition columns (their values are in the path, not the file), a column the file lacks,
    floats (NaN), INT96 timestamps (no statistics), dates or timestamps before 1900 or beyond Python's range,
    and strings not in UTF-8. A writer that truncates long string bounds (parquet-mr's
    ``parquet.statistics.truncate.length``, off by default) still writes bounds (a prefix below, an incremented
    prefix above); pyarrow does not say whether a bound was truncated, so such a file's bounds are wider, never
    wrong."""
    try:
        parquet = pq.ParquetFile(source)
        meta = parquet.metadata
        file_schema = parquet.schema_arrow
    except Exception:  # noqa: BLE001 - unreadable: unknown
        return None
    names = [n.lower() for n in file_schema.names]
    if len(set(names)) != len(names):
        return None  # columns differing only in case: Spark refuses to read the file
    legacy_calendar = spark_reader.rebased(meta.metadata)
    row: dict[str, Any] = {"path": info.path, "size": info.size, "mtime": info.mtime, "rows": meta.num_rows,
                           "footer": True}
    for column, kind in kinds.items():
        entry = {"min": None, "max": None, "nulls": -1, "known": False, "rs_lo": None, "rs_hi": None, "values": None}
        row[COLUMN_PREFIX + column] = entry
        if column in partition_columns or column not in names:
            continue
        leaves = [i for i in range(meta.num_columns) if meta.schema.column(i).path.lower() == column]
        if len(leaves) > 1:
            return None  # a column named "a.b" beside a struct a with a field b: which is which is not certain
        index = leaves[0] if leaves else None
        if index is not None and meta.schema.column(index).physical_type == "INT96":
            if kind.name != "timestamp":
                return None
            continue  # Spark's legacy timestamps: no statistics in the footer
        if index is None or not spark_reader.reads_as(file_schema.field(names.index(column)).type,
                                                      schema.get(column, "")):
            return None
        stats = [meta.row_group(g).column(index).statistics for g in range(meta.num_row_groups)]
        if stats and all(s is not None and s.has_null_count for s in stats):
            entry["nulls"] = sum(s.null_count for s in stats)
        elif not stats:
            entry["nulls"] = 0
        if entry["nulls"] == meta.num_rows:
            entry["known"] = True  # no value at all: the bounds are vacuous
            continue
        with_values = [s for s in stats if s is not None and s.has_min_max]
        if not with_values or len(with_values) != len(stats) or kind.name == "float":
            continue
        try:
            lo = _domain(min(s.min for s in with_values), kind)
            hi = _domain(max(s.max for s in with_values), kind)
        except (ValueError, OverflowError, UnicodeDecodeError):  # a date Python cannot hold, bytes not UTF-8
            continue
        if kind.name in ("date", "timestamp", "timestamp_ntz"):
            first = _FIRST_TRUSTED_DAY if kind.name == "date" else _FIRST_TRUSTED_MICROS
            if legacy_calendar or lo < first:
                continue
        entry.update(min=lo, max=hi, known=True)
    return row


def declares_no_rows(source: pa.NativeFile, file_format: str) -> bool:
    """Whether a file's own footer says it holds no row: Parquet, no row in the file nor in any row group;
    ORC, no row and no stripe. False for any other format, or a file that cannot be read as one (unknown)."""
    try:
        if file_format == "parquet":
            meta = pq.ParquetFile(source).metadata
            return meta.num_rows == 0 and all(meta.row_group(g).num_rows == 0 for g in range(meta.num_row_groups))
        if file_format == "orc":
            from pyarrow import orc

            f = orc.ORCFile(source)
            return f.nrows == 0 and f.nstripes == 0
    except Exception:  # noqa: BLE001 - unreadable means unproven, never empty
        return False
    return False


def _domain(value: Any, kind: Kind) -> Any:
    if kind.name == "date":
        return (value - EPOCH_DATE).days
    if kind.name in ("timestamp", "timestamp_ntz"):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        delta = value - EPOCH_UTC
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if kind.name == "decimal":
        return decimal.Decimal(value)
    if kind.name == "string" and isinstance(value, bytes):
        return value.decode("utf-8")
    return value


def collect_footers(store, table: str, location: str) -> int:
    """Zone maps of every file of ``table`` at ``location`` from footers, committed to ``store``; returns files.
    The table's columns and types are those of its first file (no catalog is asked)."""
    from stats.collect import arrow_schema
    from stats.freshness import list_files, local_path
    from stats.store import TableEntry

    from dipper.errors import StatsError

    files = [f for f in list_files(location) if f.path.endswith(".parquet")]
    if not files:
        raise StatsError(f"no Parquet files under {location}")
    schema = pq.read_schema(local_path(files[0].path))
    types = {name.lower(): spark_reader.spark_type(t) for name, t in zip(schema.names, schema.types)}
    kinds = {c: k for c, t in types.items() if t is not None and (k := kind_of(t)) is not None}
    columns = {c: t for c, t in types.items() if t is not None}
    rows = [footer_row(f, local_path(f.path), columns, kinds) for f in files]
    unreadable = [f.path for f, r in zip(files, rows) if r is None]
    if unreadable:
        raise StatsError(f"{unreadable[0]} (and {len(unreadable) - 1} more) cannot be described from its footer: not "
                         "Parquet, or its columns differ from the first file's")
    entry = TableEntry(
        name=table.lower(), location=location, format="parquet", partition_columns=(), schema=columns, kinds=kinds,
        skipped_columns={c: "type without footer statistics" for c, t in types.items() if t is None},
        range_set_size=1, value_list_max=0,
        collected_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        files=len(rows), bytes=sum(r["size"] for r in rows))
    store.commit({entry.name: (entry, pa.Table.from_pylist(rows, schema=arrow_schema(kinds)))})
    return len(rows)
