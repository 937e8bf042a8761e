"""The statistics model: column kinds, their value domains, and a table's per-file statistics loaded as
columnar numpy arrays (ARCHITECTURE.md §4).

Every per-file array has one element per file (``n_files``); the flat range-set and value-list arrays carry
the index of the file each element belongs to. Values keep their exact domain:

| kind | Spark types | domain |
|---|---|---|
| int | tinyint, smallint, int, bigint | int64 |
| decimal | decimal(p, s) | exact unscaled integer (value x 10^s): int64 if p <= 18, else Python ints |
| float | float, double | float64; a file holding NaN has unknown bounds |
| date | date | int64 days since 1970-01-01 |
| timestamp | timestamp (_ltz) | int64 microseconds since the epoch, UTC |
| timestamp_ntz | timestamp_ntz | int64 microseconds of the wall-clock time |
| string | string, varchar | str (code point order = UTF-8 byte order = Spark's binary collation) |
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

# Decimals convert between values and unscaled integers exactly: Python's default context rounds to 28
# significant digits, a DECIMAL(38) has 38 (a rounded bound is no bound).
EXACT = decimal.Context(prec=200, rounding=decimal.ROUND_HALF_UP, Emax=999_999, Emin=-999_999)

# The epoch of the value domains: a DATE is days and a TIMESTAMP microseconds since it (in UTC; a
# TIMESTAMP_NTZ's wall clock as if in UTC). The one definition every module computes with.
EPOCH_DATE = datetime.date(1970, 1, 1)
EPOCH = datetime.datetime(1970, 1, 1)
EPOCH_UTC = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)

# "boolean" (predicates) and "void" (a NULL literal) are types of expressions (rewriter/spark/types.py):
# statistics never cover such a column (kind_of gives None for it).
KINDS = ("int", "decimal", "float", "date", "timestamp", "timestamp_ntz", "string", "boolean", "void")
_INT_BITS = {"tinyint": 8, "byte": 8, "smallint": 16, "short": 16, "int": 32, "integer": 32, "bigint": 64, "long": 64}


@dataclasses.dataclass(frozen=True)
class Kind:
    name: str
    scale: int = 0
    precision: int = 0
    # Integers: the width of the Spark type (8 tinyint, 16 smallint, 32 int, 64 bigint), which decides where
    # arithmetic overflows; floating point: 32 for FLOAT, which Spark compares with an integer literal cast
    # to FLOAT (without ANSI), 64 for DOUBLE. Kinds read from a store are rebuilt from the column's Spark type, so every real
    # column carries its own width; 64 is the default only for kinds built by hand.
    bits: int = 64

    def __post_init__(self) -> None:
        if self.name not in KINDS:
            raise ValueError(f"unknown column kind {self.name!r}")

    @property
    def domain(self) -> tuple[str, int]:
        """What makes two kinds' values comparable as stored: the domain and, for decimals, the scale."""
        return self.name, self.scale


def kind_of(spark_type: str) -> Kind | None:
    """The kind of a Spark SQL type name (``simpleString`` form), or None if statistics do not cover it.

    char(n) is not covered: Spark pads it on read, so its values differ from what the files hold."""
    t = spark_type.strip().lower()
    if t in _INT_BITS:
        return Kind("int", bits=_INT_BITS[t])
    if t in ("float", "real"):
        return Kind("float", bits=32)  # stored as float64 exactly; Spark may compare it in 32 bits
    if t == "double":
        return Kind("float")
    if t == "date":
        return Kind("date")
    if t in ("timestamp", "timestamp_ltz"):
        return Kind("timestamp")
    if t == "timestamp_ntz":
        return Kind("timestamp_ntz")
    if t == "string" or t.startswith("varchar"):
        return Kind("string")
    m = re.fullmatch(r"decimal\((\d+),\s*(\d+)\)", t)
    if m:
        return Kind("decimal", scale=int(m.group(2)), precision=int(m.group(1)))
    if t == "decimal":
        return Kind("decimal", scale=0, precision=10)
    return None


@dataclasses.dataclass(frozen=True)
class RangeSets:
    """Sorted disjoint intervals ``[lo[i], hi[i]]`` covering every non-null value of file ``file[i]``."""

    lo: np.ndarray
    hi: np.ndarray
    file: np.ndarray  # int64 file index per interval
    present: np.ndarray  # bool per file: the file has a range-set (else use min/max)


@dataclasses.dataclass(frozen=True)
class ValueLists:
    """Every distinct non-null value ``values[i]`` of file ``file[i]``, for files with few distinct values."""

    values: np.ndarray
    file: np.ndarray
    present: np.ndarray  # bool per file


@dataclasses.dataclass(frozen=True)
class ColumnStats:
    kind: Kind
    lo: np.ndarray  # min of the non-null values, in the kind's domain
    hi: np.ndarray  # max
    known: np.ndarray  # bool: lo/hi are valid bounds for this file (False: unknown, e.g. NaN or truncated)
    null_count: np.ndarray  # int64, -1 where unknown
    ranges: RangeSets | None = None
    values: ValueLists | None = None
    # Statistic kinds of stats/indexes.py this column has (kind name -> loaded values, e.g. Bloom filters).
    indexes: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class TableStats:
    table: str  # db.table
    paths: np.ndarray  # object (str), as Spark reports _metadata.file_path
    sizes: np.ndarray  # int64 bytes
    mtimes: np.ndarray  # int64 microseconds since the epoch (UTC)
    rows: np.ndarray  # int64
    columns: dict[str, ColumnStats]
    # Files present on storage now that the store does not describe (new, or changed since collection).
    # They are always read; a table with any of them is not fully covered and originates no diPs.
    unknown_files: int = 0
    unknown_bytes: int = 0
    partition_columns: tuple[str, ...] = ()
    # Where the table was when these statistics were collected (as the catalog spelled it): they describe the
    # table only while the catalog still reads it there (proxy/catalog_check.py).
    location: str = ""
    format: str = ""  # the table's file format as the catalog names it (parquet, orc, ...); "" if not known
    # bool per file: described from its Parquet footer (stats/upkeep.py), not by the statistics job. Its
    # string bounds may be a writer's truncated prefixes (wider, never wrong: fine for skipping, not values).
    # None: no such file.
    from_footer: np.ndarray | None = None

    @property
    def n_files(self) -> int:
        return len(self.paths)

    @property
    def covered(self) -> bool:
        return self.unknown_files == 0


def one_row_files(table: str, n: int, columns: dict[str, ColumnStats]) -> TableStats:
    """``n`` rows as a table of one-row files, so that the rewriter's file evaluator decides a predicate on
    every row at once (the layout planner's samples and senders, exact keys' distinct rows). The files have no
    path, size or time; ``columns`` come from ``row_values``."""
    none = np.zeros(n, dtype=np.int64)
    return TableStats(table, np.empty(n, dtype=object), none, none, np.ones(n, dtype=np.int64), columns)


def row_values(kind: Kind, values: np.ndarray, valid: np.ndarray) -> ColumnStats:
    """A column of one-row files: each row's value as both bounds, NaN not a known bound, and a NULL
    (``valid`` False, its value a placeholder) a null count of 1."""
    known = valid & ~np.isnan(values) if values.dtype == np.float64 else valid
    return ColumnStats(kind, values, values, known, (~valid).astype(np.int64))
