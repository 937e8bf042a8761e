"""The scan behind ``stats collect``: per-file statistics of a table in a few aggregations whose memory per file
is bounded, each a plain Spark SQL statement (ARCHITECTURE.md §4; issue 14, part 5).

The first version collected every file's distinct values per column (``collect_set``) and cut range-sets from
them with higher-order functions: exact, but a set per file and column grows with the file (a 1 GB file of
unique keys is one set of tens of millions of values), and its aggregation cannot run in Spark's hash
aggregate, so the whole scan ran 5-7x slower than a plain min/max scan. Now:

1. **One aggregation per table grouped by file, in fixed-size buffers.** Row count; per column min, max and
   non-null count (floats: whether a NaN occurred). Range-set columns (integers, dates, timestamps, decimals
   of up to 18 digits) also get an *occupancy bitmap*: the file's values are cut into 128 buckets of width
   ``2**shift`` (the bucket of ``v`` is ``v >> shift``, arithmetic, so buckets are aligned the same way in
   Spark and Python) and the bitmap records which buckets hold a value (``bit_or`` of one bit per row, bucket
   number modulo 128). The shift is chosen per file and column from the span its Parquet footer gives
   (``stats.footers``), passed to the scan as a small broadcast table keyed by file path. The bitmap is
   only used when the file's *exact* min and max, from the same aggregation, lie within 128 buckets, so a
   footer can only make the bitmap coarser or unusable, never wrong: within 128 consecutive buckets the
   bucket number modulo 128 names one bucket. String columns get a hash occupancy bitmap (bucket =
   ``xxhash64 mod 64·w``) whose population is a lower bound of the file's number of distinct values: a file
   that fills more buckets than a value list may hold cannot have one.
2. **Range-sets from the bitmaps**, on the driver: the occupied buckets, clipped to the exact min and max, cut
   at their ``k - 1`` largest gaps (``stats.range_set.range_set_of_intervals``). When a file's span is under
   128 values (shift 0) a bucket is one value and the range-set is exactly the optimal one (seed 000, §4);
   wider files get buckets' precision: sound, at most ``k`` intervals, a little wider than optimal.
3. **Value lists** for the (file, column) pairs whose hash bitmap allows one: a second, hash-aggregated
   ``SELECT DISTINCT`` over those columns and files only, with a window that stops at ``n + 1`` values so
   that a file whose bitmap under-counted costs nothing extra on the driver.
4. **String bounds never in the first scan.** Min and max of a string column force Spark's sort-based
   aggregation (its hash aggregation holds fixed-width buffers only), which makes a scan several times
   slower. A value list gives a file's bounds exactly; else the file's footer gives them, when it proves them
   and the file's identity in the scan is the listing's (the footer was read in between); else the second
   look computes them.
5. **A second look** at the files the first could not finish, for just the columns each missed: no footer
   (ORC, a file added after the listing, a footer without statistics), a bitmap whose span did not fit, a
   string column without bounds. Shifts now come from the exact min and max of the first scan. A file whose
   identity differs from the first scan's changed in between and is left out (read until a refresh); a
   bitmap that still does not fit leaves that column a single interval, min to max.
6. **Statistic kinds of ``stats/indexes.py``** (Bloom filters) asked for the table: one statement per kind
   over the files described, after the rest; a file whose identity changed in between is left out.

Floats and decimals of more than 18 digits get a range-set of one interval (their min and max). Every value
leaves Spark already in its domain (dates as ``unix_date``, timestamps as ``unix_micros``, decimals as text),
so neither the driver's time zone nor Python's datetime conversion can shift a bound.
"""

from __future__ import annotations

import dataclasses
import decimal
import logging
from collections.abc import Callable, Mapping
from typing import Any

from dipper.errors import StatsError
from stats import indexes
from stats.footers import footer_row
from stats.freshness import FileInfo, open_listed
from stats.model import EXACT, Kind
from stats.range_set import range_set_of_intervals
from stats.sql_text import quote_literal, quote_name
from stats.store import COLUMN_PREFIX

log = logging.getLogger("dipper.stats")

SqlRunner = Callable[[str], list[tuple]]
"""Runs one statement on the backend and returns its rows: a local Spark session
(``stats.collect.session_runner``), or the backend's Thrift Server (``backend.sql_client``), so statistics are
collected on the cluster and from the catalog the users' queries go to. Every value the scan asks for is a
number, a boolean or a string (decimals travel as text), so both answer alike."""

BUCKETS = 128  # occupancy bitmap per file and range-set column: two 64-bit words
_BITMAP_KINDS = ("int", "date", "timestamp", "decimal")
_SINGLE_INTERVAL_KINDS = ("float", "decimal")  # decimals of more than 18 digits


@dataclasses.dataclass(frozen=True)
class ScanRequest:
    table: str  # db.table, lower case
    location: str
    format: str  # parquet | orc
    schema: dict[str, str]
    partition_columns: tuple[str, ...]
    kinds: dict[str, Kind]  # the covered columns
    k: int  # range-set size
    n: int  # value-list size (0: none)
    files: list[FileInfo]  # the listing's files to describe
    whole_table: bool  # False: read only ``files`` (a refresh)
    use_footers: bool = True
    # Statistic kinds of stats/indexes.py to collect after the scan: kind name -> columns.
    indexes: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)


def scan(run: SqlRunner, req: ScanRequest) -> list[dict[str, Any]]:
    """Store rows (path, size, mtime, rows, one statistics struct per covered column) of the files the scans
    saw, each under the identity Spark reported for it. A listed file no scan saw has no row."""
    if not req.files:
        return []  # nothing listed: nothing to describe (a file added since is unknown until a refresh)
    run(f"REFRESH TABLE {quote_name(req.table)}")  # the scan must see the files on storage now, not a cached listing
    prefix = _free_prefix(req.schema)
    footers = _footer_facts(req) if req.use_footers and req.format == "parquet" else {}
    # Every listed file gets an entry (and so a small id to group by), with the shifts its footer gave.
    shifts = {f.path: footers[f.path].shifts if f.path in footers else {} for f in req.files}
    only = [f.path for f in req.files] if not req.whole_table else None
    listed = {f.path: f for f in req.files}
    rows, again = {}, {}
    # No string bounds in the first scan (they would make it sort-based): footers give them, value lists give
    # them exactly, and the second look computes the rest.
    for raw in _aggregate(run, req, prefix, shifts, set(), only):
        row, missing = _row(req, raw, set(), shifts.get(raw["path"], {}), footers.get(raw["path"]),
                            listed.get(raw["path"]))
        if row["path"] in rows:  # grouped twice: read under two partitions' values
            raise StatsError(f"cannot collect statistics for {req.table}: Spark reads {row['path']} as rows of two "
                             "partitions (a partition whose location is another partition's folder); give each "
                             "partition a folder of its own")
        rows[row["path"]] = row
        if missing:
            again[row["path"]] = missing
    if req.n > 0:
        _value_lists(run, req, prefix, rows)
    again = {path: {c for c in columns if rows[path][COLUMN_PREFIX + c]["min"] is None
                    or req.kinds[c].name != "string"}
             for path, columns in again.items() if path in rows}
    again = {path: columns for path, columns in again.items() if columns}
    if again:
        _second_look(run, req, prefix, rows, again)
    if req.indexes:
        _leave_out(req, rows, indexes.collect_all(run, rows, ScanSql(req, prefix)))
    for row in rows.values():
        for column in req.kinds:
            row[COLUMN_PREFIX + column].pop("gate", None)
    return list(rows.values())


def _second_look(run: SqlRunner, req: ScanRequest, prefix: str, rows: dict[str, dict[str, Any]],
                 again: dict[str, set[str]]) -> None:
    """Scan the files of ``again`` once more for the columns each missed, with shifts from their exact min and
    max, and merge what comes back into ``rows``; a file whose identity differs from the first scan's changed
    in between and is left out (read until a refresh), like one the second scan does not see."""
    needed = set().union(*again.values())
    log.info("%s: %d of %d files scanned again for %d columns (no usable footer, or a span wider than the footer "
             "said)", req.table, len(again), len(rows), len(needed))
    sub = dataclasses.replace(req, kinds={c: k for c, k in req.kinds.items() if c in needed}, n=0)
    shifts = {path: _shifts_of(sub, rows[path]) for path in again}
    strings = {c for c, k in sub.kinds.items() if k.name == "string"}
    seen = set()
    for raw in _aggregate(run, sub, prefix, shifts, strings, list(again)):
        path = raw["path"]
        row = rows.get(path)
        if path not in again or (int(raw["size"]), int(raw["mtime"])) != (row["size"], row["mtime"]):
            continue
        seen.add(path)
        found, _ = _row(sub, raw, strings, shifts[path], None, None)
        for column in again[path]:
            stats, new = row[COLUMN_PREFIX + column], found[COLUMN_PREFIX + column]
            stats.update(min=new["min"], max=new["max"], rs_lo=new["rs_lo"], rs_hi=new["rs_hi"],
                         known=stats["known"] and new["known"])
    _leave_out(req, rows, set(again) - seen)


@dataclasses.dataclass(frozen=True)
class _FooterFacts:
    shifts: dict[str, int]  # range-set column -> shift that fits the footer's span in BUCKETS buckets
    bounds: dict[str, tuple[str, str]]  # string column -> (min, max) the footer proves


def _footer_facts(req: ScanRequest) -> dict[str, _FooterFacts]:
    out = {}
    for f in req.files:
        try:
            with open_listed(req.location, f.path) as source:
                row = footer_row(f, source, req.schema, req.kinds, req.partition_columns)
        except (OSError, StatsError):  # gone since the listing: the scan decides
            continue
        if row is None:
            continue
        shifts, bounds = {}, {}
        for column, kind in req.kinds.items():
            stats = row[COLUMN_PREFIX + column]
            if stats["min"] is None or not stats["known"]:
                continue
            if kind.name == "string":
                bounds[column] = (stats["min"], stats["max"])
            elif _bitmapped(kind):
                shifts[column] = fitting_shift(_unscaled(stats["min"], kind), _unscaled(stats["max"], kind))
        out[f.path] = _FooterFacts(shifts, bounds)
    return out


def fitting_shift(lo: int, hi: int) -> int:
    """The least shift at which ``lo..hi`` lies within ``BUCKETS`` consecutive buckets."""
    shift = max(0, (hi - lo).bit_length() - BUCKETS.bit_length() + 1)
    while (hi >> shift) - (lo >> shift) >= BUCKETS:
        shift += 1
    return shift


def _bitmapped(kind: Kind) -> bool:
    return kind.name in _BITMAP_KINDS and not (kind.name == "decimal" and kind.precision > 18)


def _unscaled(value: Any, kind: Kind) -> int:
    return int(EXACT.scaleb(decimal.Decimal(value), kind.scale)) if kind.name == "decimal" else int(value)


def _shifts_of(req: ScanRequest, row: dict[str, Any]) -> dict[str, int]:
    """Shifts from a file's exact min and max, as a first scan measured them."""
    out = {}
    for column, kind in req.kinds.items():
        stats = row[COLUMN_PREFIX + column]
        if _bitmapped(kind) and stats["min"] is not None and column not in req.partition_columns:
            out[column] = fitting_shift(_unscaled(stats["min"], kind), _unscaled(stats["max"], kind))
    return out


def _aggregate(run: SqlRunner, req: ScanRequest, p: str, files: dict[str, dict[str, int]], string_bounds: set[str],
               only: list[str] | None) -> list[dict[str, Any]]:
    """One aggregation grouped by file; raw results by name. ``files``: path -> column -> bitmap shift for every
    file expected (a file or column without a shift gets no bitmap); ``string_bounds``: the string columns
    whose min and max to compute.

    Groups are keyed by a small id per expected file, from a broadcast table of the expected files: hashing a
    path string per row cost as much as the rest of the aggregation. A file Spark reads that is not expected
    (added since the listing) is grouped by its path. Partition columns are grouping keys too: a file holds
    one value of each, so the groups stay one per file and their values cost no aggregation (a string's min
    and max would force the sort-based one)."""
    columns = list(req.kinds.items())
    paths = list(files)
    inner = [f"{p}f.{p}id AS {p}id", f"CASE WHEN {p}f.{p}id IS NULL THEN {p}t._metadata.file_path END AS {p}path",
             f"{p}t._metadata.file_size AS {p}size", f"unix_micros({p}t._metadata.file_modification_time) AS {p}mtime"]
    keys = [f"{p}id", f"{p}path", f"{p}size", f"{p}mtime"]
    outer = keys + ["count(1)"]
    names = ["id", "path", "size", "mtime", "rows"]
    shifted = [i for i, (c, kind) in enumerate(columns)
               if _bitmapped(kind) and c not in req.partition_columns and any(c in s for s in files.values())]
    gate_words = _gate_words(req.n)
    for i, (column, kind) in enumerate(columns):
        x = f"{p}c{i}"
        inner.append(f"{p}t.{quote_name(column)} AS {x}")
        if column in req.partition_columns:
            keys.append(x)
            outer += [_as_text(domain_sql(x, kind), kind), f"count({x})"]
            names += [f"pv{i}", f"nn{i}"]
            continue
        if kind.name != "string" or column in string_bounds:
            outer += [_as_text(f"min({domain_sql(x, kind)})", kind), _as_text(f"max({domain_sql(x, kind)})", kind)]
            names += [f"mn{i}", f"mx{i}"]
        outer.append(f"count({x})")
        names.append(f"nn{i}")
        if kind.name == "float":
            outer.append(f"coalesce(max(isnan({x})), false)")
            names.append(f"nan{i}")
        if kind.name == "string":
            # Bytes that are not UTF-8 reach the driver as U+FFFD, which sorts and compares otherwise: such a
            # file's string column is left unknown (stats/spark_reader.py).
            outer.append(f"coalesce(max(NOT is_valid_utf8({x})), false)")
            names.append(f"bad{i}")
        if i in shifted:
            inner.append(f"cast(shiftright({_unscaled_sql(f'{p}t.{quote_name(column)}', kind)}, {p}f.{p}s{i}) & {BUCKETS - 1} "
                         f"AS int) AS {p}b{i}")
            outer += _words(f"{p}b{i}", BUCKETS // 64)
            names += [f"bm{i}_{w}" for w in range(BUCKETS // 64)]
        if kind.name == "string" and req.n > 0:
            # xxhash64 of NULL is its seed, not NULL: NULLs must not fill a bucket.
            inner.append(f"CASE WHEN {x} IS NOT NULL THEN cast(xxhash64({x}) & {64 * gate_words - 1} AS int) END "
                         f"AS {p}h{i}")
            outer += _words(f"{p}h{i}", gate_words)
            names += [f"gate{i}_{w}" for w in range(gate_words)]
    expected = [[quote_literal(path), str(n)] + [str(files[path][columns[i][0]]) if columns[i][0] in files[path]
                                                 else "CAST(NULL AS int)" for i in shifted]
                for n, path in enumerate(paths)]
    header = ", ".join([f"{p}p", f"{p}id"] + [f"{p}s{i}" for i in shifted])
    source = (f"{quote_name(req.table)} {p}t LEFT JOIN (VALUES {', '.join('(' + ', '.join(e) + ')' for e in expected)}) "
              f"AS {p}f({header}) ON {p}t._metadata.file_path = {p}f.{p}p")
    where = ""
    if only is not None:
        # A filter on file metadata prunes files at planning time: only these files are read.
        where = f" WHERE {p}t._metadata.file_path IN (" + ", ".join(quote_literal(path) for path in only) + ")"
    sql = (f"SELECT {', '.join(outer)} FROM (SELECT /*+ BROADCAST({p}f) */ {', '.join(inner)} FROM {source}{where}) "
           f"GROUP BY {', '.join(keys)}")
    out = []
    for r in run(sql):
        raw = dict(zip(names, r))
        if raw["id"] is not None:
            raw["path"] = paths[int(raw["id"])]
        out.append(raw)
    return out


def _words(bucket: str, words: int) -> list[str]:
    """``bit_or`` aggregates of one bit per row at ``bucket`` (0 .. 64·words - 1), one 64-bit word each; a word
    no row set is NULL."""
    if words == 1:
        return [f"bit_or(shiftleft(1L, {bucket}))"]
    return [f"bit_or(CASE WHEN shiftright({bucket}, 6) = {w} THEN shiftleft(1L, {bucket} & 63) END)"
            for w in range(words)]


def _gate_words(n: int) -> int:
    """Hash buckets for the value-list gate: at least twice the list size, so few values share a bucket."""
    return max(1, -(-2 * n // 64))


def _bits(raw: dict[str, Any], name: str, words: int) -> int:
    """The words ``name``0.. of an aggregation as one unsigned integer (a NULL word holds no bit)."""
    bits = 0
    for w in range(words):
        bits |= (int(raw.get(f"{name}_{w}") or 0) & (2**64 - 1)) << (64 * w)
    return bits


def _row(req: ScanRequest, raw: dict[str, Any], string_bounds: set[str], shifts: dict[str, int],
         facts: _FooterFacts | None, listed: FileInfo | None) -> tuple[dict[str, Any], set[str]]:
    """A store row from one group of an aggregation, and the columns it could not describe fully (a string
    column without bounds, a range-set column without a fitting bitmap: the second look's job).
    ``shifts``: the bitmap shifts this file was scanned with."""
    row: dict[str, Any] = {"path": raw["path"], "size": int(raw["size"]), "mtime": int(raw["mtime"]),
                           "rows": int(raw["rows"])}
    # Footer facts describe the listed version of the file: they hold for this scan's version only if its
    # identity is the listing's (the footer was read between the listing and the scan).
    same = facts is not None and listed is not None and (row["size"], row["mtime"]) == (listed.size, listed.mtime)
    missing = set()
    for i, (column, kind) in enumerate(req.kinds.items()):
        nonnull = int(raw[f"nn{i}"])
        nan = bool(raw.get(f"nan{i}", False))
        stats: dict[str, Any] = {"min": None, "max": None, "nulls": row["rows"] - nonnull, "known": not nan,
                                 "rs_lo": None, "rs_hi": None, "values": None}
        row[COLUMN_PREFIX + column] = stats
        if column in req.partition_columns:
            value = domain_value(raw[f"pv{i}"], kind)
            stats["min"] = stats["max"] = value
            if kind.name == "string":
                stats["values"] = [] if value is None else [value]
            elif kind.name in _BITMAP_KINDS + _SINGLE_INTERVAL_KINDS and not (kind.name == "float" and nan):
                stats["rs_lo"], stats["rs_hi"] = ([], []) if value is None else ([value], [value])
            continue
        if kind.name == "string":
            if raw.get(f"bad{i}"):
                stats["known"] = False  # bytes that are not UTF-8: no bounds, no value list
                continue
            if column in string_bounds:
                stats["min"], stats["max"] = raw[f"mn{i}"], raw[f"mx{i}"]
            elif nonnull == 0:
                pass  # no value: vacuous bounds, whatever the footer said
            elif same and column in facts.bounds:
                stats["min"], stats["max"] = facts.bounds[column]
            else:
                missing.add(column)
            if req.n > 0:
                stats["gate"] = _bits(raw, f"gate{i}", _gate_words(req.n)).bit_count()
            continue
        stats["min"], stats["max"] = domain_value(raw[f"mn{i}"], kind), domain_value(raw[f"mx{i}"], kind)
        if nan or kind.name not in _BITMAP_KINDS + _SINGLE_INTERVAL_KINDS:
            continue
        if nonnull == 0:
            stats["rs_lo"], stats["rs_hi"] = [], []
        elif not _bitmapped(kind):
            stats["rs_lo"], stats["rs_hi"] = [stats["min"]], [stats["max"]]
        else:
            ranges = None
            if column in shifts:
                ranges = _bitmap_range_set(_bits(raw, f"bm{i}", BUCKETS // 64), shifts[column], kind, stats["min"],
                                           stats["max"], req.k)
            if ranges is None:
                missing.add(column)
                ranges = [stats["min"]], [stats["max"]]
            stats["rs_lo"], stats["rs_hi"] = ranges
    return row, missing


def _bitmap_range_set(bits: int, shift: int, kind: Kind, mn: Any, mx: Any, k: int) -> tuple[list, list] | None:
    """The range-set an occupancy bitmap gives a file of exact bounds ``mn``..``mx``, or None when the bitmap
    cannot describe it (its span does not fit in ``BUCKETS`` buckets at ``shift``)."""
    lo, hi = _unscaled(mn, kind), _unscaled(mx, kind)
    base = lo >> shift
    if (hi >> shift) - base >= BUCKETS:
        return None  # the footer's span was narrower than the file's: bucket numbers would wrap around
    buckets = sorted(base + (b - base) % BUCKETS for b in range(BUCKETS) if bits >> b & 1)
    if not buckets or buckets[0] != base or buckets[-1] != hi >> shift:
        return None  # min and max are not in occupied buckets: the bitmap is not of this version of the file
    # One interval per bucket, adjacent ones included: a gap of one value is still a gap to cut at.
    rs_lo, rs_hi = range_set_of_intervals([max(lo, b << shift) for b in buckets],
                                          [min(hi, ((b + 1) << shift) - 1) for b in buckets], k)
    if kind.name == "decimal":
        return [_scaled(v, kind) for v in rs_lo], [_scaled(v, kind) for v in rs_hi]
    return rs_lo, rs_hi


def _scaled(unscaled: int, kind: Kind) -> decimal.Decimal:
    return EXACT.scaleb(decimal.Decimal(unscaled), -kind.scale)


def _unscaled_sql(expr: str, kind: Kind) -> str:
    """The domain value as a bigint; for a decimal, its unscaled value u.

    Up to 15 digits through a double, which costs half as much as decimal arithmetic and is exact there:
    Spark's double of a compact decimal is the double nearest u / 10^s, so multiplying back by 10^s lands
    within |u|·2^-52 + one rounding of u, under 0.25 + 0.125 for |u| < 10^15 < 2^50, and floor(· + 0.5)
    is u. From 16 to 18 digits through a decimal product (at most 38 digits, whole, so the cast is exact)."""
    if kind.name == "decimal":
        if kind.scale == 0:
            return f"cast({expr} AS bigint)"
        if kind.precision <= 15:
            return f"floor(cast({expr} AS double) * {10 ** kind.scale}D + 0.5D)"
        return f"cast({expr} * CAST({10 ** kind.scale} AS DECIMAL(19, 0)) AS bigint)"
    return domain_sql(expr, kind)


@dataclasses.dataclass(frozen=True)
class ScanSql:
    """What the scan's statements share, for the statistic kinds of ``stats/indexes.py`` too: the table, a
    prefix for the statements' own names that no column of it starts with, and the building blocks below."""

    req: ScanRequest
    prefix: str

    def domain_bigint(self, expr: str, kind: Kind) -> str:
        """The domain value of ``expr`` (a value of ``kind``; not a float, nor a decimal over 18 digits) as a
        bigint: integers, dates as days, timestamps as microseconds, decimals unscaled."""
        return f"cast({_unscaled_sql(expr, kind)} AS bigint)"

    def column(self, name: str) -> str:
        """A column of the table, in ``file_values``' picks."""
        return f"{self.prefix}t.{quote_name(name)}"

    def file_values(self, paths: list[str], picks: list[tuple[int, str]], per_file: dict[str, str] | None = None) -> str:
        """A query of one row per (row of a file of ``paths``, pick): ``id`` (the file's index in ``paths``),
        ``size`` and ``mtime`` (the file's identity as this statement reads it, to compare with its store row),
        ``i`` and ``v`` (the pick's number and value), each name with the prefix. A pick is (number, expression
        over ``column(...)``, and, with ``per_file``, over ``{prefix}f.{prefix}m``: that file's value of it).

        Rows are keyed by a small id per file from a broadcast table, not by path (see ``_aggregate``), and a
        filter on file metadata lets Spark read only these files."""
        p = self.prefix
        extra = f", {p}m" if per_file is not None else ""
        values = ", ".join(f"({quote_literal(path)}, {n}" + (f", {per_file[path]}" if per_file is not None else "") + ")"
                           for n, path in enumerate(paths))
        only = ", ".join(quote_literal(path) for path in paths)
        stacked = ", ".join(f"{i}, {expr}" for i, expr in picks)
        return (f"SELECT /*+ BROADCAST({p}f) */ {p}f.{p}id AS {p}id, {p}t._metadata.file_size AS {p}size, "
                f"unix_micros({p}t._metadata.file_modification_time) AS {p}mtime, "
                f"stack({len(picks)}, {stacked}) AS ({p}i, {p}v) "
                f"FROM {quote_name(self.req.table)} {p}t JOIN (VALUES {values}) AS {p}f({p}p, {p}id{extra}) "
                f"ON {p}t._metadata.file_path = {p}f.{p}p WHERE {p}t._metadata.file_path IN ({only})")


def _value_lists(run: SqlRunner, req: ScanRequest, p: str, rows: dict[str, dict[str, Any]]) -> None:
    """Fill in the value lists of the (file, string column) pairs whose gate allows one, in one statement."""
    columns = list(req.kinds)
    wanted: dict[str, list[int]] = {}  # path -> indexes of the columns to list
    for path, row in rows.items():
        for i, column in enumerate(columns):
            stats = row[COLUMN_PREFIX + column]
            if "gate" not in stats:
                continue
            if stats["nulls"] == row["rows"]:
                stats["values"] = []
            elif stats["gate"] <= req.n:
                wanted.setdefault(path, []).append(i)
    if not wanted:
        return
    listed = sorted({i for positions in wanted.values() for i in positions})
    paths = list(wanted)
    picks = [(i, f"IF(array_contains({p}f.{p}m, {i}), {p}t.{quote_name(columns[i])}, NULL)") for i in listed]
    source = ScanSql(req, p).file_values(paths, picks, {path: f"array({', '.join(map(str, wanted[path]))})"
                                                         for path in paths})
    # The window keeps n + 1 values at most per file and column reaching the driver, and says how many there were.
    sql = (f"SELECT {p}i, {p}id, {p}size, {p}mtime, {p}v, {p}n FROM ("
           f"SELECT *, count(1) OVER (PARTITION BY {p}i, {p}id) AS {p}n, "
           f"row_number() OVER (PARTITION BY {p}i, {p}id ORDER BY {p}v) AS {p}r FROM ("
           f"SELECT DISTINCT {p}id, {p}size, {p}mtime, {p}i, {p}v FROM ({source}) WHERE {p}v IS NOT NULL)) "
           f"WHERE {p}n <= {req.n} OR {p}r = 1")
    found: dict[tuple[str, int], list[str] | None] = {}  # None: more than n values
    changed = set()
    for i, file_id, size, mtime, value, count in run(sql):
        path = paths[int(file_id)]
        if (int(size), int(mtime)) != (rows[path]["size"], rows[path]["mtime"]):
            changed.add(path)  # not the version the first scan read
        elif int(count) > req.n:
            found[(path, int(i))] = None
        else:
            found.setdefault((path, int(i)), []).append(value)
    for path, positions in wanted.items():
        for i in positions:
            if path in changed or (path, i) in found and found[(path, i)] is None:
                continue
            values = found.get((path, i))
            if not values:  # no value at all, where the first scan counted some: not the same version
                changed.add(path)
                continue
            stats = rows[path][COLUMN_PREFIX + columns[i]]
            stats["values"] = sorted(values)
            stats["min"], stats["max"] = stats["values"][0], stats["values"][-1]
    _leave_out(req, rows, changed)


def _leave_out(req: ScanRequest, rows: dict[str, dict[str, Any]], paths: set[str]) -> None:
    """Drop the rows of files that changed while their statistics were collected: unknown, so read, until a
    refresh describes them."""
    for path in paths:
        log.info("%s: %s changed while its statistics were collected: left out (read until a refresh)",
                 req.table, path)
        del rows[path]


def _free_prefix(schema: dict[str, str]) -> str:
    """A prefix for the scan's own column names that no column of the table starts with."""
    prefix = "__dipper_"
    while any(c.startswith(prefix) for c in schema):
        prefix = "_" + prefix
    return prefix


def domain_sql(expr: str, kind: Kind) -> str:
    """An SQL expression turning a value of ``kind`` into its stored domain value (decimals: unscaled when
    they are bitmapped; their bounds are kept as decimals and sent as text)."""
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


def _as_text(expr: str, kind: Kind) -> str:
    """Decimals travel as text: exact through any client (a Thrift result would give a float or a string)."""
    return f"cast({expr} AS string)" if kind.name == "decimal" else expr


def domain_value(v: Any, kind: Kind) -> Any:
    if v is None:
        return None
    if kind.name == "decimal":
        return decimal.Decimal(v)
    if kind.name == "float":
        return float(v)
    if kind.name == "string":
        return v
    return int(v)

