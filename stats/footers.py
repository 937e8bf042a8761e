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

from stats.freshness import FileInfo
from stats.model import Kind
from stats.store import COLUMN_PREFIX

EPOCH = datetime.date(1970, 1, 1)
EPOCH_TS = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def spark_type(t: pa.DataType) -> str | None:
    """The Spark type name of an Arrow type, for the types statistics cover."""
    if pa.types.is_integer(t):
        return "bigint" if t.bit_width == 64 else "int"
    if pa.types.is_floating(t):
        return "double"
    if pa.types.is_date32(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz else "timestamp_ntz"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    return None


def footer_row(info: FileInfo, local_path: str, kinds: dict[str, Kind]) -> dict[str, Any]:
    """One store row for a file, from its footer."""
    meta = pq.ParquetFile(local_path).metadata
    names = [meta.schema.column(i).path for i in range(meta.num_columns)]
    row: dict[str, Any] = {"path": info.path, "size": info.size, "mtime": info.mtime, "rows": meta.num_rows}
    for column, kind in kinds.items():
        entry = {"min": None, "max": None, "nulls": -1, "known": False, "rs_lo": None, "rs_hi": None, "values": None}
        index = next((i for i, n in enumerate(names) if n.lower() == column), None)
        if index is not None and meta.num_row_groups > 0:
            stats = [meta.row_group(g).column(index).statistics for g in range(meta.num_row_groups)]
            if all(s is not None and s.has_null_count for s in stats):
                entry["nulls"] = sum(s.null_count for s in stats)
            with_values = [s for s in stats if s is not None and s.has_min_max]
            exact = all(getattr(s, "is_min_value_exact", True) and getattr(s, "is_max_value_exact", True) for s in with_values)
            complete = len(with_values) == len(stats) or (entry["nulls"] == meta.num_rows)
            if with_values and exact and complete and kind.name != "float":
                entry["min"] = _domain(min(s.min for s in with_values), kind)
                entry["max"] = _domain(max(s.max for s in with_values), kind)
                entry["known"] = True
            elif entry["nulls"] == meta.num_rows:
                entry["known"] = True  # no values at all: the bounds are vacuous
        row[COLUMN_PREFIX + column] = entry
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
        return (value - EPOCH).days
    if kind.name in ("timestamp", "timestamp_ntz"):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        delta = value - EPOCH_TS
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if kind.name == "decimal":
        return decimal.Decimal(value)
    if kind.name == "string" and isinstance(value, bytes):
        return value.decode("utf-8")
    return value


def collect_footers(store, table: str, location: str) -> int:
    """Zone maps of every file of ``table`` at ``location`` from footers, committed to ``store``; returns files."""
    from stats.collect import arrow_schema
    from stats.freshness import list_files, local_path
    from stats.model import kind_of
    from stats.store import TableEntry

    from dipper.errors import StatsError

    files = [f for f in list_files(location) if f.path.endswith(".parquet")]
    if not files:
        raise StatsError(f"no Parquet files under {location}")
    local = lambda f: local_path(f.path)  # noqa: E731
    schema = pq.read_schema(local(files[0]))
    types = {name.lower(): spark_type(t) for name, t in zip(schema.names, schema.types)}
    kinds = {c: kind_of(t) for c, t in types.items() if t is not None}
    kinds = {c: k for c, k in kinds.items() if k is not None}
    rows = [footer_row(f, local(f), kinds) for f in files]
    entry = TableEntry(
        name=table.lower(), location=location, format="parquet", partition_columns=(),
        schema={c: t for c, t in types.items() if t is not None}, kinds=kinds,
        skipped_columns={c: "type without footer statistics" for c, t in types.items() if t is None},
        range_set_size=1, value_list_max=0,
        collected_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        files=len(rows), bytes=sum(r["size"] for r in rows))
    store.commit({entry.name: (entry, pa.Table.from_pylist(rows, schema=arrow_schema(kinds)))})
    return len(rows)
