"""Wrong answers a review of the Bloom filters found in how literals and set operations are read, each shown
on Spark. Bloom filters make every ``col = v`` an exact membership test, so a literal folded to another single
value than Spark's, or a key compared in another type than Spark compares it, drops the file that holds it:

- a timestamp moved by an interval across a daylight-saving change (Spark moves it through the session zone);
- a string literal ending in a NUL character (a numpy string array drops it);
- decimal literal arithmetic whose result type passes 38 digits (Spark rounds it);
- a UNION of an INT and a FLOAT column joined to an INT column (Spark compares in FLOAT).

Each rewritten query must return the original's rows; where sound pruning remains, a floor on the files
skipped keeps the case from passing vacuously."""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rewriter.rewrite import RewriteContext, rewrite
from rewriter.session import SessionSettings
from stats.collect import collect
from stats.freshness import Lister
from stats.loader import StatsLoader
from stats.store import StatsStore
from tests.conftest import Stack, spark_rows

pytestmark = [pytest.mark.spark, pytest.mark.differential]

DB = "literal_soundness"
UTC = datetime.timezone.utc
NY = "America/New_York"


def _moments(f: int) -> pa.Table:
    """Two files over the same day and the same value ranges; only file 0 holds 08:00Z, 'abc\\0' and the
    decimal Spark computes for the product below."""
    base = datetime.datetime(2020, 3, 8, tzinfo=UTC)
    hours = [0, 8, 23] if f == 0 else [0, 9, 23]
    words = [f"w{i:02d}" for i in range(20)] + (["abc\x00"] if f == 0 else ["abd"])
    d = decimal.Decimal("0.123456789012345700") if f == 0 else decimal.Decimal("0.123456789012345600")
    n = len(words)
    return pa.table({
        "ts": pa.array([base + datetime.timedelta(hours=hours[i % 3]) for i in range(n)], pa.timestamp("us", tz="UTC")),
        "s": pa.array(words, pa.string()),
        "d": pa.array([decimal.Decimal("0.1")] * (n - 2) + [d, decimal.Decimal("0.9")], pa.decimal128(18, 18)),
        "k": pa.array(list(range(n)), pa.int32()),
    })


TABLES = {
    "moments": [_moments(0), _moments(1)],
    "ints": [pa.table({"k": pa.array([16777216], pa.int32())}), pa.table({"k": pa.array([5, 7], pa.int32())})],
    "floats": [pa.table({"f": pa.array([1.5], pa.float32())})],
    "probe": [pa.table({"k": pa.array([16777217], pa.int32())})],
}


@pytest.fixture(scope="module")
def store(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StatsStore]:
    base = tmp_path_factory.mktemp("literal_soundness")
    spark = stack.spark
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DB}")
    for name, files in TABLES.items():
        (base / name).mkdir()
        for i, t in enumerate(files):
            pq.write_table(t, base / name / f"part-{i}.parquet")
        spark.sql(f"DROP TABLE IF EXISTS {DB}.{name}")
        spark.sql(f"CREATE TABLE {DB}.{name} USING parquet LOCATION '{base / name}'")
    result = StatsStore(base / "store")
    collect(spark, result, [f"{DB}.{name}" for name in TABLES], indexes={"bloom": ["ts", "s", "d", "k"]})
    spark.sql(f"USE {DB}")
    try:
        yield result
    finally:
        spark.sql("USE default")


def _rows(stack: Stack, sql: str, zone: str, ansi: bool) -> list:
    conf = stack.spark.conf
    before = conf.get("spark.sql.ansi.enabled")
    conf.set("spark.sql.session.timeZone", zone)
    conf.set("spark.sql.ansi.enabled", str(ansi).lower())
    try:
        return spark_rows(stack, sql)
    finally:
        conf.set("spark.sql.session.timeZone", "UTC")
        conf.set("spark.sql.ansi.enabled", before)


@pytest.mark.parametrize("zone, ansi, sql, floor", [
    # Spark: 01:00 EST is 06:00Z, plus 2 hours 08:00Z (file 0); wall-clock arithmetic said 07:00Z.
    (NY, True, "SELECT count(*) FROM moments WHERE ts = TIMESTAMP '2020-03-08 01:00:00' + INTERVAL 2 HOURS", 0),
    # Spark: 09:00Z is 04:00 EST on the 7th, a day later 04:00 EDT, 08:00Z (file 0); the literal's offset said 09:00Z.
    (NY, True, "SELECT count(*) FROM moments WHERE ts = TIMESTAMP '2020-03-07 04:00:00-05:00' + INTERVAL 1 DAY", 0),
    # In UTC wall-clock and instant arithmetic agree: still folded, and file 1 (no 08:00Z) skipped.
    ("UTC", True, "SELECT count(*) FROM moments WHERE ts = TIMESTAMP '2020-03-08 06:00:00' + INTERVAL 2 HOURS", 1),
    ("UTC", True, "SELECT count(*) FROM moments WHERE s = 'abc\\0'", 1),
    # DECIMAL(38,18) * INT is DECIMAL(38,16) after Spark's precision loss: 0.1234567890123457, file 0's value.
    ("UTC", True, "SELECT count(*) FROM moments WHERE d = CAST(0.123456789012345678 AS DECIMAL(38,18)) * 1", 0),
    ("UTC", True, "SELECT count(*) FROM moments WHERE d = 0.1234567890123457 * 1", 1),
    # Without ANSI, INT UNION FLOAT is FLOAT: 16777217 and 16777216 are one FLOAT, so the first file of ints
    # joins (with ANSI it is DOUBLE, which holds every INT).
    ("UTC", False, "SELECT count(*) FROM probe p JOIN (SELECT k FROM ints UNION ALL SELECT f AS k FROM floats) u "
            "ON p.k = u.k", 0),
    # INT UNION INT stays INT: the key reaches both branches and rules out every file of ints.
    ("UTC", True, "SELECT count(*) FROM probe p JOIN (SELECT k FROM ints UNION ALL SELECT k + 0 AS k FROM ints) u "
            "ON p.k = u.k", 2),
])
def test_the_rewrite_answers_as_spark(stack: Stack, store: StatsStore, zone: str, ansi: bool, sql: str,
                                      floor: int) -> None:
    ctx = RewriteContext(StatsLoader(store, Lister(0)), database=DB, session=SessionSettings(ansi=ansi, time_zone=zone))
    result = rewrite(sql, ctx)
    assert result.decision.error is None, result.decision.error
    assert _rows(stack, result.sql, zone, ansi) == _rows(stack, sql, zone, ansi), result.sql
    assert sum(t.files_skipped for t in result.decision.tables) >= floor, result.sql
