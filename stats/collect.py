"""The PySpark collector: one aggregation pass per table, grouped by file (ARCHITECTURE.md §4).

For every file of a catalog table it records the row count and, per covered column, min, max, null count,
the optimal range-set of at most ``k`` intervals (numeric, decimal, date, timestamp columns) and the value
list (string columns with at most ``n`` distinct values in the file). Range-sets are computed inside Spark
from each file's sorted distinct values with higher-order functions, cutting at the ``k - 1`` largest gaps
(``stats/range_set.py`` explains why that is optimal); only one small row per file reaches the driver.

Every value leaves Spark already in its domain (dates as ``unix_date``, timestamps as ``unix_micros``), so
neither the driver's time zone nor Python's datetime conversion can shift a bound.

Which files the store describes, and under which identity (issue 13). The scan sees the files in Spark's
listing of the table, which Spark caches and which need not be the listing ``list_files`` took: a file
added behind Spark's back, or one Spark ignores (``*._COPYING_``), is on storage and not in the scan. So:

- Spark's cached listing is refreshed (``spark.catalog.refreshTable``) right before the scan, so the scan
  sees the table's current files.
- A file the scan saw is recorded under the (path, size, mtime) Spark reported for it in that scan, never
  under the listing's identity, which may belong to another version of the file (or be absent, when the
  file was added between the listing and the scan). Either way the identity was observed *before* the
  content was read: if the file changed after that, its identity on storage no longer matches and the row
  is never used (§3.2), so a row never pairs an identity with content read from a later version.
- A listed file the scan did not see produced no group, which means either "empty" or "not seen". It is
  recorded as empty only when its own footer proves that it holds no row (``stats.footers``), under the
  listing's identity, again observed before the footer was read. Any other unseen file is left out of the
  store, not written with unknown statistics: the freshness check already treats a listed file the store
  does not describe as unknown (always read, and its table originates no diPs), and ``refresh`` re-scans
  every file it does not describe, whereas a stored row with unknown bounds would match its identity and
  be kept by every refresh, unknown forever (and a row count of "unknown" has no place in the model).
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dipper.errors import StatsError
from stats.footers import declares_no_rows
from stats.freshness import FileInfo, list_files, open_listed
from stats.model import Kind, kind_of
from stats.store import COLUMN_PREFIX, StatsStore, TableEntry

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("dipper.stats")

DEFAULT_RANGE_SET_SIZE = 8
DEFAULT_VALUE_LIST_MAX = 16
_RANGE_SET_KINDS = ("int", "decimal", "float", "date", "timestamp")


def describe_table(spark: SparkSession, table: str) -> tuple[str, str, list[str], dict[str, str]]:
    """(location, format, partition columns, {column: spark type}) of a catalog table."""
    if not spark.catalog.tableExists(table):
        raise StatsError(f"unknown table {table!r} (use db.table; `SHOW TABLES IN db` lists them)")
    rows = {r.col_name: r.data_type for r in spark.sql(f"DESCRIBE TABLE EXTENDED {_quote_table(table)}").collect()}
    location, provider = rows.get("Location", ""), (rows.get("Provider") or "").lower()
    if provider not in ("parquet", "orc") or not location:
        raise StatsError(f"{table} is a {provider or 'non-file'} table; statistics cover Parquet and ORC tables")
    columns = spark.catalog.listColumns(table)
    schema = {c.name.lower(): spark.table(table).schema[c.name].dataType.simpleString() for c in columns}
    partitions = [c.name.lower() for c in columns if c.isPartition]
    return location, provider, partitions, schema


def collect(spark: SparkSession, store: StatsStore, tables: Sequence[str], range_set_size: int | None = DEFAULT_RANGE_SET_SIZE,
            value_list_max: int | None = DEFAULT_VALUE_LIST_MAX, refresh: bool = False) -> None:
    """Collect (or, with ``refresh``, bring up to date) the statistics of ``tables`` and commit them at once.

    A size given as None means: what the table's statistics were collected with (the default for a table
    without statistics), so a refresh keeps each table's precision and re-reads only changed files."""
    if range_set_size is not None and range_set_size < 1:
        raise StatsError("--range-set-size must be at least 1")
    if value_list_max is not None and value_list_max < 0:
        raise StatsError("--value-list-max must not be negative")
    updates = {}
    for i, table in enumerate(tables, 1):
        started = time.monotonic()
        name = table.lower()
        entry, data, reused = _collect_table(spark, store, name, range_set_size, value_list_max, refresh)
        updates[name] = (entry, data)
        log.info("[%d/%d] %s: %d files, %d rows, %d columns with statistics%s in %.1fs", i, len(tables), name,
                 entry.files, sum(data.column("rows").to_pylist()), len(entry.kinds),
                 f" ({reused} files unchanged)" if refresh else "", time.monotonic() - started)
    store.commit(updates)


def _collect_table(spark: SparkSession, store: StatsStore, table: str, k: int | None, n: int | None,
                   refresh: bool) -> tuple[TableEntry, pa.Table, int]:
    location, provider, partitions, schema = describe_table(spark, table)
    kinds: dict[str, Kind] = {}
    skipped: dict[str, str] = {}
    for column, spark_type in schema.items():
        kind = kind_of(spark_type)
        if kind is None:
            skipped[column] = f"type {spark_type} has no statistics"
            log.info("%s.%s: no statistics for type %s", table, column, spark_type)
        elif column == "_metadata":
            skipped[column] = "a column named _metadata hides Spark's file metadata"
        else:
            kinds[column] = kind
    listing = list_files(location)
    previous = store.snapshot()
    old_entry = previous.entry(table)
    if k is None:
        k = old_entry.range_set_size if old_entry is not None else DEFAULT_RANGE_SET_SIZE
    if n is None:
        n = old_entry.value_list_max if old_entry is not None else DEFAULT_VALUE_LIST_MAX
    keep_rows: list[dict[str, Any]] = []
    if refresh and old_entry is not None and old_entry.kinds == kinds and old_entry.range_set_size == k \
            and old_entry.value_list_max == n:
        current = {(f.path, f.size, f.mtime) for f in listing}
        for row in previous.read(table).to_pylist():
            if (row["path"], row["size"], row["mtime"]) in current:
                keep_rows.append(row)
    kept = {r["path"] for r in keep_rows}
    to_scan = [f for f in listing if f.path not in kept]
    new_rows = _scan(spark, table, kinds, k, n, [f.path for f in to_scan] if keep_rows else None) if to_scan else []
    scanned = {r["path"] for r in new_rows}
    unseen = [f for f in to_scan if f.path not in scanned]
    empty = [f for f in unseen if _proved_empty(location, f, provider)]
    new_rows += [_empty_row(f, kinds) for f in empty]
    if len(empty) < len(unseen):
        log.info("%s: %d listed files were not in Spark's scan and hold rows (or cannot be read): left out, so "
                 "they stay unknown (always read) until a refresh sees them", table, len(unseen) - len(empty))
    rows = sorted(keep_rows + new_rows, key=lambda r: r["path"])
    entry = TableEntry(
        name=table, location=location, format=provider, partition_columns=tuple(partitions), schema=schema,
        kinds=kinds, skipped_columns=skipped, range_set_size=k, value_list_max=n,
        collected_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        files=len(rows), bytes=sum(r["size"] for r in rows))
    return entry, pa.Table.from_pylist(rows, schema=arrow_schema(kinds)), len(keep_rows)


def _scan(spark: SparkSession, table: str, kinds: dict[str, Kind], k: int, n: int,
          only_paths: list[str] | None) -> list[dict[str, Any]]:
    from pyspark.sql import functions as F

    spark.catalog.refreshTable(table)  # the scan must see the files on storage now, not a cached listing
    df = spark.table(table)
    if only_paths is not None:
        # A filter on file metadata prunes files at planning time: a refresh reads only the changed files.
        df = df.where(F.col("_metadata.file_path").isin(only_paths))
    aggs = [F.count(F.lit(1)).alias("rows")]
    post = ["path", "size", "mtime", "rows"]
    for i, (column, kind) in enumerate(kinds.items()):
        c = F.col(f"`{column}`")
        aggs += [F.min(c).alias(f"mn{i}"), F.max(c).alias(f"mx{i}"), F.count(c).alias(f"nn{i}")]
        nan = "false"
        if kind.name == "float":
            aggs.append(F.max(F.isnan(c)).alias(f"nan{i}"))
            nan = f"coalesce(nan{i}, false)"
        if kind.name in _RANGE_SET_KINDS:
            aggs.append(F.array_sort(F.collect_set(c)).alias(f"a{i}"))
        elif kind.name == "string" and n > 0:
            aggs.append(F.collect_set(c).alias(f"a{i}"))
        post += [f"{_domain(f'mn{i}', kind)} AS mn{i}", f"{_domain(f'mx{i}', kind)} AS mx{i}", f"rows - nn{i} AS nulls{i}",
                 f"NOT {nan} AS known{i}"]
        if kind.name in _RANGE_SET_KINDS:
            lo, hi = _range_set_sql(f"a{i}", kind, k)
            post += [f"CASE WHEN {nan} THEN NULL ELSE {lo} END AS rslo{i}", f"CASE WHEN {nan} THEN NULL ELSE {hi} END AS rshi{i}"]
        elif kind.name == "string" and n > 0:
            post.append(f"CASE WHEN size(a{i}) <= {n} THEN array_sort(a{i}) END AS vals{i}")
    grouped = df.groupBy(
        F.col("_metadata.file_path").alias("path"),
        F.col("_metadata.file_size").alias("size"),
        F.expr("unix_micros(_metadata.file_modification_time)").alias("mtime"),
    ).agg(*aggs)
    rows = grouped.selectExpr(*post).collect()
    out = []
    for r in rows:
        row: dict[str, Any] = {"path": r["path"], "size": r["size"], "mtime": r["mtime"], "rows": r["rows"]}
        for i, (column, kind) in enumerate(kinds.items()):
            row[COLUMN_PREFIX + column] = {
                "min": r[f"mn{i}"], "max": r[f"mx{i}"], "nulls": r[f"nulls{i}"], "known": bool(r[f"known{i}"]),
                "rs_lo": r[f"rslo{i}"] if kind.name in _RANGE_SET_KINDS else None,
                "rs_hi": r[f"rshi{i}"] if kind.name in _RANGE_SET_KINDS else None,
                "values": r[f"vals{i}"] if kind.name == "string" and n > 0 else None,
            }
        out.append(row)
    return out


def _domain(expr: str, kind: Kind) -> str:
    """An SQL expression turning a value of ``kind`` into its stored domain value."""
    if kind.name == "date":
        return f"unix_date({expr})"
    if kind.name == "timestamp":
        return f"unix_micros({expr})"
    if kind.name == "timestamp_ntz":
        return f"timestampdiff(MICROSECOND, TIMESTAMP_NTZ'1970-01-01 00:00:00', {expr})"
    if kind.name == "int":
        return f"cast({expr} AS bigint)"
    if kind.name == "float":
        return f"cast({expr} AS double)"
    return expr


def _range_set_sql(array: str, kind: Kind, k: int) -> tuple[str, str]:
    """SQL for the (lo, hi) arrays of the optimal range-set of the sorted distinct values in ``array``."""
    a, n = array, f"size({array})"
    if kind.name == "int":
        gap = f"cast({a}[i + 1] AS decimal(20, 0)) - cast({a}[i] AS decimal(20, 0))"
    elif kind.name == "date":
        gap = f"datediff({a}[i + 1], {a}[i])"
    elif kind.name == "timestamp":
        gap = f"unix_micros({a}[i + 1]) - unix_micros({a}[i])"
    else:
        gap = f"{a}[i + 1] - {a}[i]"
    conv = lambda e: _domain(e, kind)  # noqa: E731
    if k == 1:
        return (f"CASE WHEN {n} = 0 THEN array() ELSE array({conv(f'{a}[0]')}) END",
                f"CASE WHEN {n} = 0 THEN array() ELSE array({conv(f'{a}[{n} - 1]')}) END")
    # Largest gaps first; among equal gaps the earliest (ni = -i sorts it first in descending order).
    cuts = (f"array_sort(transform(slice(sort_array(transform(sequence(0, {n} - 2), "
            f"i -> named_struct('g', {gap}, 'ni', -i)), false), 1, {k - 1}), x -> -x.ni))")
    small_lo = f"transform({a}, v -> {conv('v')})"
    lo = f"CASE WHEN {n} <= {k} THEN {small_lo} ELSE concat(array({conv(f'{a}[0]')}), transform({cuts}, c -> {conv(f'{a}[c + 1]')})) END"
    hi = f"CASE WHEN {n} <= {k} THEN {small_lo} ELSE concat(transform({cuts}, c -> {conv(f'{a}[c]')}), array({conv(f'{a}[{n} - 1]')})) END"
    return lo, hi


def _proved_empty(location: str, f: FileInfo, file_format: str) -> bool:
    """Whether the footer of a listed file says it holds no row (so no group of the scan is expected)."""
    try:
        with open_listed(location, f.path) as source:
            return declares_no_rows(source, file_format)
    except (OSError, StatsError):  # gone or unreachable since the listing: unproven
        return False


def _empty_row(f: FileInfo, kinds: dict[str, Kind]) -> dict[str, Any]:
    row: dict[str, Any] = {"path": f.path, "size": f.size, "mtime": f.mtime, "rows": 0}
    for column in kinds:
        row[COLUMN_PREFIX + column] = {"min": None, "max": None, "nulls": 0, "known": True, "rs_lo": [], "rs_hi": [],
                                       "values": []}
    return row


def arrow_type(kind: Kind) -> pa.DataType:
    if kind.name == "decimal":
        return pa.decimal128(max(kind.precision, 1), kind.scale)
    if kind.name == "float":
        return pa.float64()
    if kind.name == "string":
        return pa.string()
    return pa.int64()


def arrow_schema(kinds: dict[str, Kind]) -> pa.Schema:
    fields = [pa.field("path", pa.string()), pa.field("size", pa.int64()), pa.field("mtime", pa.int64()),
              pa.field("rows", pa.int64())]
    for column, kind in kinds.items():
        t = arrow_type(kind)
        fields.append(pa.field(COLUMN_PREFIX + column, pa.struct([
            ("min", t), ("max", t), ("nulls", pa.int64()), ("known", pa.bool_()),
            ("rs_lo", pa.list_(t)), ("rs_hi", pa.list_(t)), ("values", pa.list_(pa.string())),
        ])))
    return pa.schema(fields)


def _quote_table(table: str) -> str:
    return ".".join(f"`{part.replace('`', '``')}`" for part in table.split("."))
