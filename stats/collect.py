"""The statistics collector: which tables and files to describe, and committing what ``stats/scan.py`` read
(ARCHITECTURE.md §4).

The statements are plain SQL text run through a ``SqlRunner``: the backend's Thrift Server, so the job runs
on the cluster and reads the catalog that users' queries go to, or a Spark session of its own over the same
catalog (``backend/sql_client.py`` chooses). Tables are found and described through the catalog
(``DESCRIBE TABLE EXTENDED``), so any Parquet or ORC table can be collected, whoever created it.

For every file of a catalog table it records the row count and, per covered column, min, max, null count,
a range-set of at most ``k`` intervals (numeric, decimal, date, timestamp columns) and the value list
(string columns with at most ``n`` distinct values in the file). How, in bounded memory per file and about
as fast as a plain min/max scan, is ``stats/scan.py``'s job; only small rows per file reach the driver.

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

import dataclasses
import datetime
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dipper.errors import StatsError
from stats.footers import declares_no_rows
from stats.indexes import KINDS as INDEX_KINDS
from stats.indexes import arrow_fields as index_fields
from stats.indexes import chosen as choose_indexes
from stats.freshness import FileInfo, list_files, location_prefix, open_listed, stored_file
from stats.model import Kind, kind_of
from stats.scan import ScanRequest, SqlRunner, scan
from stats.sql_text import quote_literal, quote_name
from stats.store import COLUMN_PREFIX, Snapshot, StatsStore, TableEntry

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("dipper.stats")

DEFAULT_RANGE_SET_SIZE = 8
DEFAULT_VALUE_LIST_MAX = 16
MAX_VALUE_LIST = 256  # the value-list gate of stats/scan.py holds 2 hash buckets per value: 8 words at most


@dataclasses.dataclass(frozen=True)
class SessionRunner:
    """Statements run on an in-process Spark session; ``spark`` stays reachable for what only a session gives
    (a benchmark's scan metrics)."""

    spark: SparkSession

    def __call__(self, sql: str) -> list[tuple]:
        return [tuple(r) for r in self.spark.sql(sql).collect()]


def session_runner(spark: SparkSession) -> SqlRunner:
    return SessionRunner(spark)


def as_runner(backend: SparkSession | SqlRunner) -> SqlRunner:
    return session_runner(backend) if hasattr(backend, "sparkContext") else backend  # type: ignore[arg-type, return-value]


@dataclasses.dataclass(frozen=True)
class TableDescription:
    name: str
    location: str
    format: str  # parquet | orc
    partition_columns: tuple[str, ...]
    schema: dict[str, str]  # column -> Spark type, as DESCRIBE prints it


def describe_table(backend: SparkSession | SqlRunner, table: str) -> TableDescription:
    """Where and how a catalog table is stored, from ``DESCRIBE TABLE EXTENDED``; a :class:`StatsError` naming
    the reason when it has no files statistics could describe (a view, a JDBC table, a text table ...)."""
    run = as_runner(backend)
    database, _, name = table.rpartition(".")
    if database.lower() == "global_temp":
        raise StatsError(f"cannot collect statistics for {table}: it is a view (a global temporary one)")
    # Asked, not caught: an unknown name is an answer here, not an error (PySpark's error path can itself fail
    # while it logs the error, depending on how logging was set up before it).
    if database and not run(f"SHOW DATABASES LIKE {quote_literal(database)}"):
        raise StatsError(f"unknown database {database} (`SHOW DATABASES` lists them)")
    listed = run(f"SHOW TABLES {'IN ' + quote_name(database) + ' ' if database else ''}LIKE {quote_literal(name)}")
    if not any(namespace and not temporary for namespace, _, temporary in listed):
        raise StatsError(f"unknown table {table} (`SHOW TABLES IN {database or 'default'}` lists the tables of a "
                         "database)")
    try:
        rows = run(f"DESCRIBE TABLE EXTENDED {quote_name(table)}")
    except Exception as e:  # noqa: BLE001 - the backend's own message says what is wrong
        raise StatsError(f"cannot describe {table}: {_first_line(e)}") from None
    columns, partitions, details = describe_sections(rows)
    kind = details.get("Type", "").upper()
    if kind == "VIEW":
        raise StatsError(f"cannot collect statistics for {table}: it is a view (statistics describe the files "
                         "of tables; collect those of the tables it reads)")
    provider = details.get("Provider", "").lower()
    if provider == "hive":
        # Spark reads a Hive-format table (STORED AS ...) through its Hive relation, which resolves no file
        # metadata column: neither this scan nor a rewritten query could name its files (_metadata.file_path).
        stored = details.get("InputFormat", "").rpartition(".")[2] or "unknown format"
        raise StatsError(f"cannot collect statistics for {table}: it is a Hive-format table ({stored}, created with "
                         "STORED AS), whose files Spark does not let a query name, so none could be skipped; a "
                         f"copy made with CREATE TABLE ... USING parquet AS SELECT * FROM {table} can be")
    location = details.get("Location", "")
    if provider not in ("parquet", "orc"):
        raise StatsError(f"cannot collect statistics for {table}: it is a {provider or 'non-file'} table; "
                         "statistics cover tables stored as Parquet or ORC files")
    if not location:
        raise StatsError(f"cannot collect statistics for {table}: the catalog gives it no location")
    return TableDescription(table, location, provider, tuple(partitions), columns)


def describe_sections(rows: list[tuple]) -> tuple[dict[str, str], list[str], dict[str, str]]:
    """The rows of ``DESCRIBE TABLE EXTENDED`` as (column -> type, partition columns, detail -> value)."""
    columns: dict[str, str] = {}
    partitions: list[str] = []
    details: dict[str, str] = {}
    section = "columns"
    for col_name, data_type, *_ in rows:
        key = (col_name or "").strip()
        if key == "# Partition Information":
            section = "partitions"
        elif key.startswith("# Detailed Table Information"):
            section = "details"
        elif key.startswith("#"):
            section = section if key == "# col_name" else "other"  # e.g. "# Metadata Columns"
        elif not key or section == "other":
            continue
        elif section == "columns":
            columns[key.lower()] = (data_type or "").strip()
        elif section == "partitions":
            partitions.append(key.lower())
        else:
            details[key] = (data_type or "").strip()
    return columns, partitions, details


def list_tables(backend: SparkSession | SqlRunner, database: str | None = None) -> list[str]:
    """``db.table`` of every table (not view) of ``database``, or of every database, as the catalog lists them."""
    run = as_runner(backend)
    if database and not run(f"SHOW DATABASES LIKE {quote_literal(database)}"):
        raise StatsError(f"unknown database {database} (`SHOW DATABASES` lists them)")
    databases = [database] if database else sorted(r[0] for r in run("SHOW DATABASES"))
    out = []
    for db in databases:
        try:
            tables = run(f"SHOW TABLES IN {quote_name(db)}")
            views = {r[1].lower() for r in run(f"SHOW VIEWS IN {quote_name(db)}")}
        except Exception as e:  # noqa: BLE001
            raise StatsError(f"cannot list the tables of database {db}: {_first_line(e)}") from None
        # Rows are (database, table, isTemporary); temporary views come with every database and no database.
        out += [f"{db}.{name}".lower() for namespace, name, temporary in tables
                if namespace and not temporary and name.lower() not in views]
    return out


def resolve_table(backend: SparkSession | SqlRunner, name: str) -> str:
    """``db.table`` for a name given with or without its database: an unqualified name must be in exactly one."""
    if "." in name:
        return name.lower()
    run = as_runner(backend)
    holders = [db for (db, *_) in run("SHOW DATABASES")
               if any(namespace and not temporary for namespace, _, temporary in
                      run(f"SHOW TABLES IN {quote_name(db)} LIKE {quote_literal(name)}"))]
    if not holders:
        raise StatsError(f"unknown table {name}: no database holds it (name it as db.table)")
    if len(holders) > 1:
        raise StatsError(f"{name} is a table in databases {', '.join(sorted(holders))}: name one, e.g. "
                         f"{sorted(holders)[0]}.{name}")
    return f"{holders[0]}.{name}".lower()


def collect(backend: SparkSession | SqlRunner, store: StatsStore, tables: Sequence[str], range_set_size: int | None = DEFAULT_RANGE_SET_SIZE,
            value_list_max: int | None = DEFAULT_VALUE_LIST_MAX, refresh: bool = False,
            passed_over: Callable[[str, StatsError], None] | None = None, use_footers: bool = True,
            indexes: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """Collect (or, with ``refresh``, bring up to date) the statistics of ``tables`` and commit them at once;
    returns the tables collected.

    A size given as None means: what the table's statistics were collected with (the default for a table
    without statistics), so a refresh keeps each table's precision and re-reads only changed files. A table
    statistics cannot describe (a view, a CSV table ...) is an error, or, with ``passed_over``, told to it
    and left out. Every table is described and listed first, so progress (bytes done, rate, time left) is
    logged against the whole job. ``use_footers=False`` computes every bound in Spark, trusting no Parquet
    footer (``stats/scan.py`` says what footers are used for).

    ``indexes`` asks for statistic kinds of ``stats/indexes.py`` (kind name -> columns, e.g. ``{"bloom":
    ["ss_customer_sk"]}``): each table gets them on the columns it has that the kind covers; a column no table
    has is an error, and a table that has none of a kind's columns keeps the ones it had, as it does for a kind
    not named (none for a table without statistics). A kind named with no columns goes from every table."""
    if range_set_size is not None and range_set_size < 1:
        raise StatsError("--range-set-size must be at least 1")
    if value_list_max is not None and not 0 <= value_list_max <= MAX_VALUE_LIST:
        raise StatsError(f"--value-list-max must be between 0 and {MAX_VALUE_LIST}")
    requested = {name: tuple(dict.fromkeys(c.lower() for c in columns)) for name, columns in (indexes or {}).items()}
    unknown = sorted(set(requested) - set(INDEX_KINDS))
    if unknown:
        raise StatsError(f"unknown statistic kind {unknown[0]} (known: {', '.join(sorted(INDEX_KINDS))})")
    run = as_runner(backend)
    plans = []
    for table in dict.fromkeys(t.lower() for t in tables):
        try:
            plans.append(_plan(run, store, describe_table(run, table), range_set_size, value_list_max, refresh,
                               use_footers, requested))
        except StatsError as e:
            if passed_over is None:
                raise
            passed_over(table, e)
    for name, columns in requested.items():
        for column in columns:
            if plans and not any(column in plan.described.schema for plan in plans):
                raise StatsError(f"--{name} {column}: no table collected has a column {column}")
    total = sum(f.size for plan in plans for f in plan.to_scan)
    done = 0
    started = time.monotonic()
    updates = {}
    for i, plan in enumerate(plans, 1):
        table_started = time.monotonic()
        entry, data = _execute(run, plan)
        updates[entry.name] = (entry, data)
        done += sum(f.size for f in plan.to_scan)
        elapsed = time.monotonic() - started
        rate = done / elapsed if elapsed > 0 else 0.0
        remaining = (total - done) / rate if rate > 0 else 0.0
        left = f", about {remaining:.0f}s left" if remaining >= 1 else ""
        log.info("[%d/%d] %s: %d files (%d read, %.1f MB), %d rows, %d columns with statistics in %.1fs; "
                 "%.0f of %.0f MB done at %.1f MB/s%s", i, len(plans), entry.name, entry.files, len(plan.to_scan),
                 sum(f.size for f in plan.to_scan) / 1e6, sum(data.column("rows").to_pylist()), len(entry.kinds),
                 time.monotonic() - table_started, done / 1e6, total / 1e6, rate / 1e6, left)
    had = {plan.described.name.lower(): plan.had_statistics for plan in plans}
    skipped: list[str] = []

    def merge(base: Snapshot) -> tuple[dict, tuple[str, ...]]:
        # Statistics dropped while the job ran (DROP TABLE through the proxy) stay dropped: they were taken
        # away because the name may now read other files.
        skipped[:] = [t for t in updates if had[t] and base.entry(t) is None]
        return {t: u for t, u in updates.items() if t not in skipped}, ()

    store.update(merge)
    for table in skipped:
        log.warning("%s: its statistics were dropped while this job ran (the table was redefined); not written, "
                    "collect it again", table)
    return [plan.described.name for plan in plans if plan.described.name.lower() not in skipped]


@dataclasses.dataclass(frozen=True)
class _Plan:
    described: TableDescription
    kinds: dict[str, Kind]
    skipped: dict[str, str]
    k: int
    n: int
    keep_rows: list[dict[str, Any]]  # rows of unchanged files, kept by a refresh
    to_scan: list[FileInfo]
    had_statistics: bool  # the store held statistics of the table when the job began
    use_footers: bool
    indexes: dict[str, tuple[str, ...]]  # statistic kinds of stats/indexes.py: kind name -> columns


def _plan(run: SqlRunner, store: StatsStore, described: TableDescription, k: int | None, n: int | None,
          refresh: bool, use_footers: bool, requested: dict[str, tuple[str, ...]]) -> _Plan:
    """What collecting a table takes: its covered columns, and which of its files to read."""
    table = described.name.lower()
    kinds: dict[str, Kind] = {}
    skipped: dict[str, str] = {}
    for column, spark_type in described.schema.items():
        kind = kind_of(spark_type)
        if kind is None:
            skipped[column] = f"type {spark_type} has no statistics"
            log.info("%s.%s: no statistics for type %s", table, column, spark_type)
        elif column == "_metadata":
            skipped[column] = "a column named _metadata hides Spark's file metadata"
        else:
            kinds[column] = kind
    _check_files_inside(run, table, described.location)
    listing = list_files(described.location)
    previous = store.snapshot()
    old_entry = previous.entry(table)
    if k is None:
        k = old_entry.range_set_size if old_entry is not None else DEFAULT_RANGE_SET_SIZE
    if n is None:
        n = old_entry.value_list_max if old_entry is not None else DEFAULT_VALUE_LIST_MAX
    wanted = dict(old_entry.indexes) if old_entry is not None else {}
    for name, columns in requested.items():
        # A kind asked for with columns of this table replaces its columns; with none of them (columns of
        # other tables) it keeps what the table had; asked for with no column at all ('none'), it goes.
        if not columns or any(c in described.schema for c in columns):
            wanted[name] = columns
    chosen, passed = choose_indexes(wanted, kinds, described.partition_columns)
    for column, why in passed.items():
        log.info("%s.%s: %s", table, column, why)
    keep_rows: list[dict[str, Any]] = []
    if refresh and old_entry is not None and old_entry.kinds == kinds and old_entry.range_set_size == k \
            and old_entry.value_list_max == n and old_entry.indexes == chosen:
        current = set(listing)
        for row in previous.read(table).to_pylist():
            # A row from a footer (stats/upkeep.py) is re-read: the job gives the file range-sets and value lists.
            if stored_file(row) in current and not row.get("footer"):
                keep_rows.append(row)
    kept = {r["path"] for r in keep_rows}
    return _Plan(described, kinds, skipped, k, n, keep_rows, [f for f in listing if f.path not in kept],
                 old_entry is not None, use_footers, chosen)


def _execute(run: SqlRunner, plan: _Plan) -> tuple[TableEntry, pa.Table]:
    d, kinds, to_scan = plan.described, plan.kinds, plan.to_scan
    table = d.name.lower()
    new_rows = scan(run, ScanRequest(table, d.location, d.format, d.schema, d.partition_columns, kinds, plan.k, plan.n,
                                     to_scan, whole_table=not plan.keep_rows, use_footers=plan.use_footers,
                                     indexes=plan.indexes)) if to_scan else []
    scanned = {r["path"] for r in new_rows}
    unseen = [f for f in to_scan if f.path not in scanned]
    empty = [f for f in unseen if _proved_empty(d.location, f, d.format)]
    new_rows += [_empty_row(f, kinds) for f in empty]
    if len(empty) < len(unseen):
        log.info("%s: %d listed files were not in Spark's scan and hold rows (or cannot be read): left out, so "
                 "they stay unknown (always read) until a refresh sees them", table, len(unseen) - len(empty))
    rows = sorted(plan.keep_rows + new_rows, key=lambda r: r["path"])
    entry = TableEntry(
        name=table, location=d.location, format=d.format, partition_columns=tuple(d.partition_columns),
        schema=d.schema, kinds=kinds, skipped_columns=plan.skipped, range_set_size=plan.k, value_list_max=plan.n,
        collected_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        files=len(rows), bytes=sum(r["size"] for r in rows), indexes=plan.indexes)
    return entry, pa.Table.from_pylist(rows, schema=arrow_schema(kinds, plan.indexes))


def _check_files_inside(run: SqlRunner, table: str, location: str) -> None:
    """Refuse a table Spark reads files of from outside its location (a partition added with a LOCATION of its
    own): freshness is decided by listing the location, so such files would be neither listed nor known to be
    missing, and the table would look fully described and originate diPs without their rows. The filter is on
    file metadata only, so Spark reads nothing but such files, if any."""
    outside = run(f"SELECT _metadata.file_path FROM {quote_name(table)} WHERE NOT "
                  f"startswith(_metadata.file_path, {quote_literal(location_prefix(location))}) LIMIT 1")
    if outside:
        raise StatsError(f"cannot collect statistics for {table}: Spark reads files of it outside its location "
                         f"{location} (e.g. {outside[0][0]}, a partition with a location of its own); Dipper finds a "
                         "table's files by listing its location, so it could not tell when those change")


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


def arrow_schema(kinds: dict[str, Kind], indexes: Mapping[str, tuple[str, ...]] | None = None) -> pa.Schema:
    fields = [pa.field("path", pa.string()), pa.field("size", pa.int64()), pa.field("mtime", pa.int64()),
              pa.field("rows", pa.int64()), pa.field("footer", pa.bool_())]
    for column, kind in kinds.items():
        t = arrow_type(kind)
        fields.append(pa.field(COLUMN_PREFIX + column, pa.struct([
            ("min", t), ("max", t), ("nulls", pa.int64()), ("known", pa.bool_()),
            ("rs_lo", pa.list_(t)), ("rs_hi", pa.list_(t)), ("values", pa.list_(pa.string())),
        ])))
    return pa.schema(fields + index_fields(indexes or {}))


def _first_line(error: Exception) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]
