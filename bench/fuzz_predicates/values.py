"""The columns of the property test's table and the values of each type worth testing.

Every Spark type the statistics cover is a column (two for the types column-to-column comparisons and
two-column arithmetic need), and each column has a sorted *universe*: the type's extremes, the values
next to them, zero and its neighbours, and the values where Spark's semantics turn (DST changes in
America/New_York, America/Los_Angeles and Europe/Berlin, leap days, trailing spaces, non-BMP characters).
Files take bands of consecutive universe values (``bench/fuzz_predicates/tables.py``), so literals drawn from the
same universes (``bench/fuzz_predicates/predicates.py``) fall inside some files and outside others.

Dates and timestamps stay at or after 1900-01-02: Parquet files written by anything but Spark carry no
calendar metadata, and Spark refuses to read older values from them (``datetimeRebaseModeInRead``).
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
from typing import Any

import pyarrow as pa

D = decimal.Decimal
UTC = datetime.timezone.utc
NAN = float("nan")
INF = float("inf")

# Families: what a literal compared with a value must look like. Integer widths share one family (the
# literal forms carry the width: 5Y, 5S, 5, 5L), so do decimals of every scale.
FAMILIES = ("int", "decimal", "double", "date", "timestamp", "timestamp_ntz", "string")


@dataclasses.dataclass(frozen=True)
class Column:
    name: str
    spark_type: str  # as Spark's simpleString prints it
    arrow_type: pa.DataType
    family: str
    universe: tuple[Any, ...]  # sorted, distinct, every value valid for the type

    @property
    def bits(self) -> int | None:
        """Width of an integer column."""
        return {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}.get(self.spark_type)


def _ts(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text)


INT8 = (-128, -127, -100, -42, -1, 0, 1, 2, 3, 7, 10, 42, 99, 100, 126, 127)
INT16 = (-32768, -32767, -1000, -129, -128, -1, 0, 1, 2, 127, 128, 255, 1000, 12345, 32766, 32767)
INT32 = (-2147483648, -2147483647, -1000000000, -65536, -1, 0, 1, 2, 3, 10, 100, 1000, 65535, 1000000, 2147483,
         2147484, 1000000000, 2147483646, 2147483647)
INT64 = (-2**63, -2**63 + 1, -2**62, -2**53 - 1, -2**31 - 1, -2**31, -1, 0, 1, 2, 2**31 - 1, 2**31, 3037000499,
         3037000500, 2**53, 2**53 + 1, 10**15, 2**62, 2**63 - 2, 2**63 - 1)
DEC_5_2 = tuple(D(x) for x in ("-999.99", "-100.50", "-1.25", "-0.01", "0.00", "0.01", "0.50", "1.00", "1.25", "2.50",
                               "99.99", "100.00", "999.99"))
DEC_18_4 = tuple(D(x) for x in ("-99999999999999.9999", "-1234.5678", "-1.0000", "-0.0001", "0.0000", "0.0001",
                                "1.5000", "2.0000", "12345.6789", "9007199254740.9931", "99999999999999.9999"))
DEC_38_10 = tuple(D(x) for x in ("-9999999999999999999999999999.9999999999", "-100000000000000000000.0000000000",
                                 "-1.5000000000", "0.0000000000", "0.0000000001", "1.0000000000", "2.5000000000",
                                 "123456789012345678.0123456789", "1000000000000000000000000000.0000000000",
                                 "9999999999999999999999999999.9999999999"))
DOUBLE = (-INF, -1.7976931348623157e308, -1e15, -2.5, -1.0, -0.5, -0.0, 0.0, 5e-324, 1e-10, 0.5, 1.0, 2.5, 3.0,
          9007199254740993.0, 1e15, 1.7976931348623157e308, INF)
DATES = tuple(datetime.date.fromisoformat(x) for x in (
    "1900-01-02", "1969-12-31", "1970-01-01", "1995-03-01", "1999-12-31", "2000-02-29", "2020-02-29", "2021-01-01",
    "2021-03-13", "2021-03-14", "2021-03-15", "2021-03-27", "2021-03-28", "2021-10-31", "2021-11-07", "2021-12-31",
    "2022-01-01", "9999-12-31"))
# UTC instants around the DST changes: New York (07:00 and 06:00 UTC), Los Angeles (10:00, 09:00 UTC),
# Berlin (01:00 UTC both ways), each just before, at and after the change.
TIMESTAMPS = tuple(_ts(x).replace(tzinfo=UTC) for x in (
    "1900-01-02 00:00:00", "1970-01-01 00:00:00", "1995-03-01 12:00:00", "2021-03-14 06:59:59.999999",
    "2021-03-14 07:00:00", "2021-03-14 07:30:00", "2021-03-14 09:59:59", "2021-03-14 10:00:00", "2021-03-14 10:30:00",
    "2021-03-28 00:59:59", "2021-03-28 01:00:00", "2021-03-28 01:30:00", "2021-10-31 00:30:00", "2021-10-31 01:30:00",
    "2021-11-07 05:30:00", "2021-11-07 06:30:00", "2021-11-07 08:30:00", "2021-11-07 09:30:00",
    "2021-12-31 23:59:59.999999", "2022-01-01 00:00:00", "9999-12-31 15:59:59.999999"))
# Wall-clock times that do not exist (02:30 on a spring-forward day) or exist twice (01:30 in the fall).
TIMESTAMPS_NTZ = tuple(_ts(x) for x in (
    "1900-01-02 00:00:00", "1970-01-01 00:00:00", "2021-03-14 01:59:59", "2021-03-14 02:00:00", "2021-03-14 02:30:00",
    "2021-03-14 03:00:00", "2021-03-28 02:30:00", "2021-10-31 02:30:00", "2021-11-07 01:00:00", "2021-11-07 01:30:00",
    "2021-11-07 02:00:00", "2021-12-31 23:59:59.999999", "2022-01-01 00:00:00", "9999-12-31 23:59:59.999999"))
STRINGS = tuple(sorted({
    "", " ", "  ", "-1", " 5", "1", "10", "2", "1e3", "2021-03-14", "A", "Z", "a", "a ", "a  ", "ab", "abc", "abc ",
    "abd", "b", "z", "zz", "~", "\x7f", "é", "ß", "ü", "ǅ", "日本", "日本語", "\uffff", "😀", "😀x", "\U0010ffff",
}))

COLUMNS: tuple[Column, ...] = (
    Column("i8", "tinyint", pa.int8(), "int", INT8),
    Column("i16", "smallint", pa.int16(), "int", INT16),
    Column("i32", "int", pa.int32(), "int", INT32),
    Column("j32", "int", pa.int32(), "int", INT32),
    Column("i64", "bigint", pa.int64(), "int", INT64),
    Column("d52", "decimal(5,2)", pa.decimal128(5, 2), "decimal", DEC_5_2),
    Column("d184", "decimal(18,4)", pa.decimal128(18, 4), "decimal", DEC_18_4),
    Column("d3810", "decimal(38,10)", pa.decimal128(38, 10), "decimal", DEC_38_10),
    Column("f64", "double", pa.float64(), "double", DOUBLE),
    Column("dt", "date", pa.date32(), "date", DATES),
    Column("dt2", "date", pa.date32(), "date", DATES),
    Column("ts", "timestamp", pa.timestamp("us", tz="UTC"), "timestamp", TIMESTAMPS),
    Column("ts2", "timestamp", pa.timestamp("us", tz="UTC"), "timestamp", TIMESTAMPS),
    Column("ntz", "timestamp_ntz", pa.timestamp("us"), "timestamp_ntz", TIMESTAMPS_NTZ),
    Column("s", "string", pa.string(), "string", STRINGS),
    Column("s2", "string", pa.string(), "string", STRINGS),
)
BY_NAME = {c.name: c for c in COLUMNS}


def arrow_schema() -> pa.Schema:
    return pa.schema([pa.field(c.name, c.arrow_type) for c in COLUMNS])


def spark_schema() -> dict[str, str]:
    """``{column: simpleString}``: what Spark must infer from the files."""
    return {c.name: c.spark_type for c in COLUMNS}
