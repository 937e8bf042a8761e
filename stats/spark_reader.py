"""How Spark reads a Parquet file: the one owner of it (issue 61; ARCHITECTURE.md §3.6). The footer reader
(``stats/footers.py``) and exact keys (``rewriter/exact_keys.py``) read files with pyarrow; whatever they
take from a file must be what Spark's reader takes from it, value for value, or they refuse (never guess).

- **Types.** A column of a file is read as the table's column only where Spark reads it value for value:
  the same kind, integers only widened, decimals of the same precision and scale, FLOAT and DOUBLE each
  from its own width; unsigned integers and nanosecond timestamps are refused (Spark widens or rejects
  them).
- **Calendars.** Spark 2.4 and earlier wrote dates and timestamps in the hybrid Julian + Gregorian
  calendar; Spark 3 and 4 record in a file's key-value metadata which Spark wrote it
  (``org.apache.spark.version``) and whether it was written in the legacy calendar
  (``org.apache.spark.legacyDateTime``, ``org.apache.spark.legacyINT96``). Spark's reader rebases such a
  file's values (``DataSourceUtils.datetimeRebaseSpec``): a DATE, TIMESTAMP_MILLIS or TIMESTAMP_MICROS
  column when the writer was older than 3.0.0 or left the legacy key, an INT96 column when the writer was
  older than 3.1.0 or left the INT96 key; a file no Spark wrote is read as it stands (Spark 4's default
  ``CORRECTED``; a session that changes it is not modelled, ``rewriter/session.py``). pyarrow never
  rebases. The calendars agree on dates from 1582-10-15 and, through every zone's history, on timestamps
  from 1900-01-01, so a value of a rebased column from then on reads the same; an earlier one is refused.
- **Strings.** Spark compares a string by its bytes. A file may hold bytes that are not UTF-8 (Hive, Impala
  and others write what they are given); decoding them to text (U+FFFD) changes their order and merges
  distinct values, so such a column is refused. The collector asks Spark the same question of every file
  (``is_valid_utf8``, ``stats/scan.py``).
"""

from __future__ import annotations

import datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from stats.loader import domain_values
from stats.model import EPOCH_DATE, Kind, kind_of

SPARK_VERSION_KEY = b"org.apache.spark.version"
LEGACY_DATETIME_KEY = b"org.apache.spark.legacyDateTime"
LEGACY_INT96_KEY = b"org.apache.spark.legacyINT96"
# From these on, the hybrid and the proleptic calendars (and every zone's history) read a value alike.
FIRST_SAME_DAY = (datetime.date(1582, 10, 15) - EPOCH_DATE).days
FIRST_SAME_MICROS = (datetime.date(1900, 1, 1) - EPOCH_DATE).days * 86_400 * 1_000_000


class NotReadAsSpark(ValueError):
    """A file or column Dipper cannot read as Spark reads it; the message says why."""


def spark_type(t: pa.DataType) -> str | None:
    """The Spark type name of an Arrow type, for the types statistics cover."""
    if pa.types.is_integer(t):
        return {8: "tinyint", 16: "smallint", 32: "int"}.get(t.bit_width, "bigint")
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


def reads_as(file_type: pa.DataType, table_type: str) -> bool:
    """Whether Spark reads a Parquet column of ``file_type`` into a table column of ``table_type`` value for
    value: the same kind of value, integers only widened, decimals of the same precision and scale."""
    if pa.types.is_unsigned_integer(file_type) or pa.types.is_timestamp(file_type) and file_type.unit == "ns":
        return False  # Spark reads these as wider types, or refuses them
    written = spark_type(file_type)
    want, got = kind_of(table_type), kind_of(written) if written else None
    if want is None or got is None or want.name != got.name:
        return False
    if want.name == "int":
        return file_type.bit_width <= want.bits
    if want.name == "decimal":
        return (want.precision, want.scale) == (got.precision, got.scale)
    if want.name == "float":  # FLOAT and DOUBLE each only from their own width (Spark refuses to narrow)
        return file_type.bit_width == (32 if table_type.strip().lower() in ("float", "real") else 64)
    return True


def _version_before(metadata: dict[bytes, bytes], version: str) -> bool:
    """Spark compares the writer's version as a string (``version < "3.0.0"``); so does this."""
    written = metadata.get(SPARK_VERSION_KEY)
    return written is not None and written.decode("utf-8", "replace") < version


def rebased(metadata: dict[bytes, bytes] | None, int96: bool = False) -> bool:
    """Whether Spark reads the file's dates and timestamps (``int96``: its INT96 timestamps) through the
    legacy calendar."""
    metadata = metadata or {}
    # A legacy key counts even without the version key (Spark consults it only beside one): a file that
    # says it is in the legacy calendar is never read as if it were not. Without either, the file is read
    # as it stands (CORRECTED, Spark 4's default for files no Spark wrote).
    if int96:
        return _version_before(metadata, "3.1.0") or LEGACY_INT96_KEY in metadata
    return _version_before(metadata, "3.0.0") or LEGACY_DATETIME_KEY in metadata


def first_same(kind: Kind) -> int | None:
    """The least value in ``kind``'s domain that both calendars read alike, None for a kind without dates."""
    if kind.name == "date":
        return FIRST_SAME_DAY
    if kind.name in ("timestamp", "timestamp_ntz"):
        return FIRST_SAME_MICROS
    return None


def check(arr: pa.Array, kind: Kind, metadata: dict[bytes, bytes] | None = None, int96: bool = False) -> None:
    """Raise :class:`NotReadAsSpark` unless every value of ``arr`` (a column of a file with key-value
    ``metadata``; ``int96``: stored as INT96) reads as Spark reads it: of a type Spark reads value for
    value, strings in UTF-8, dates and timestamps of a rebased file from the days both calendars share."""
    if kind.name == "string" and (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        try:
            arr.validate(full=True)  # UTF-8 of every value
        except pa.ArrowInvalid:
            raise NotReadAsSpark("holds bytes that are not UTF-8") from None
    first = first_same(kind)
    if first is None or arr.null_count == len(arr) or not rebased(metadata, int96):
        read_values(arr.slice(0, 0), kind)  # the type check alone
        return
    bounds = pc.min_max(arr)
    lo = read_values(pa.array([bounds["min"].as_py()], type=arr.type), kind)[0]
    if int(lo) < first:
        version = (metadata or {}).get(SPARK_VERSION_KEY, b"?").decode("utf-8", "replace")
        raise NotReadAsSpark(f"holds dates or timestamps Spark reads through the legacy calendar (written by Spark "
                             f"{version} or in its LEGACY rebase mode)")


def read_values(arr: pa.Array, kind: Kind) -> np.ndarray:
    """The values of a column in the statistics' domain (NULLs as a placeholder), for a column :func:`check`
    accepted; raises :class:`NotReadAsSpark` for a type Spark might read differently."""
    t = arr.type
    name = kind.name
    if name == "int" and pa.types.is_integer(t) and not pa.types.is_unsigned_integer(t) or \
            name == "decimal" and pa.types.is_decimal(t) and t.scale == kind.scale or \
            name == "string" and (pa.types.is_string(t) or pa.types.is_large_string(t)) or \
            name == "float" and pa.types.is_floating(t):
        return domain_values(arr, kind)
    if name == "date" and pa.types.is_date32(t):
        return domain_values(arr.cast(pa.int32()), kind)
    if name in ("timestamp", "timestamp_ntz") and pa.types.is_timestamp(t) and (name == "timestamp" or t.tz is None):
        raw = arr.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        if t.unit == "ns":
            if (raw % 1000).any():
                raise NotReadAsSpark("holds nanoseconds")
            return raw // 1000
        return raw * {"s": 1_000_000, "ms": 1000, "us": 1}[t.unit]
    raise NotReadAsSpark(f"is stored as {t}, not read here as Spark reads a {name} column")
