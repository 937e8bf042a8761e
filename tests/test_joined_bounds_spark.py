"""Joined bounds (``rewriter/joined_bounds.py``) against Spark: a dimension of 60 rows with duplicate and NULL keys
and columns of every kind joined bounds hold (TINYINT, INT, BIGINT, STRING, DATE, TIMESTAMP, TIMESTAMP_NTZ;
extremes, unicode, trailing blanks, numeric-looking strings, dates in year 1 and 9999, timestamps in DST gaps),
files of the fact table joining single keys and random key sets, and conjuncts of every shape a statement may
filter the dimension by (arithmetic that overflows, casts, comparisons across types, date and time functions,
patterns, collations, NULL-safe equality, OR, NOT). For every conjunct, in six sessions (ANSI on and off; UTC,
Los Angeles, Kolkata), each file the bounds rule out must hold no key of a dimension row Spark says passes.
Conjuncts Spark refuses to run in a session are no question about rows there. The conjuncts are those of an
adversarial review of the rule; its bounds are computed here from Spark's rows, independently of ``apply``."""

from __future__ import annotations

import random

import numpy as np
import pytest
import sqlglot

from rewriter.joined_bounds import unreached
from rewriter.joined_filter import Joined, translator_for, unqualified
from rewriter.predicate import And
from rewriter.session import SessionSettings
from stats.blocks import JoinedBounds
from stats.model import ColumnStats, Kind, TableStats
from tests.conftest import Stack

pytestmark = pytest.mark.spark

DIM = "joined_bounds.dim"
ATTRIBUTES = (("d_moy", "int"), ("d_q", "int"), ("d_big", "int"), ("d_name", "string"), ("d_date", "date"),
              ("d_ts", "timestamp"), ("d_ntz", "timestamp_ntz"))
KINDS = {"d_key": Kind("int", bits=32), "d_moy": Kind("int", bits=8), "d_q": Kind("int", bits=32),
         "d_big": Kind("int", bits=64), "d_name": Kind("string"), "d_date": Kind("date"), "d_ts": Kind("timestamp"),
         "d_ntz": Kind("timestamp_ntz")}
CONJUNCTS = [
    'd_moy + 1 = 6',
    'd_moy + 1 < 0',
    'd_moy + d_moy < 0',
    'd_moy * 2 > 200',
    '-d_moy < -100',
    'abs(d_moy) = 128',
    'd_moy % 3 = 0',
    "cast(d_moy as string) = '5'",
    "cast(d_moy as string) < '2'",
    "d_moy = '5'",
    "d_moy < '10'",
    'd_moy = 5.5',
    'd_moy < 5.5',
    'd_moy > 4.9',
    'cast(d_moy as double) > 4.9',
    'd_moy IN (1, NULL)',
    'd_moy NOT IN (1, NULL)',
    'd_moy NOT IN (1, 5)',
    'NOT (d_moy <> 5)',
    'coalesce(d_moy, 0) = 0',
    'nvl(d_moy, 7) = 7',
    'd_moy IS NULL OR d_moy = 127',
    'greatest(d_moy, 3) = 3',
    'least(d_moy, 3) = 3',
    'CASE WHEN d_moy > 5 THEN 1 ELSE 0 END = 1',
    'd_moy BETWEEN 10 AND 1',
    'd_moy <=> NULL',
    'd_moy <=> 5',
    'd_moy IS DISTINCT FROM 5',
    'd_q + 1 < 0',
    'd_q * 2 < 0',
    'd_q - 1 > 0',
    'd_q + d_moy > 2147483647',
    'd_big + 1 < 0',
    'd_big = 9007199254740992',
    'cast(d_big as double) = 9007199254740992',
    'd_big = 9.007199254740992E15',
    'cast(d_q as bigint) * 2 > 4294967290',
    'd_q / 2 > 2',
    'd_q div 2 = 2',
    'year(d_date) = 1969',
    'year(d_date) = 1',
    'month(d_date) = 12',
    'dayofmonth(d_date) = 31',
    "d_date + 1 > DATE'2000-01-01'",
    "date_add(d_date, 1) = DATE'1970-01-01'",
    "date_sub(d_date, 1) = DATE'1969-12-30'",
    "d_date > '2000-01-01'",
    "d_date = '1969-12-31'",
    "d_date < '1970'",
    "cast(d_date as string) LIKE '19%'",
    "cast(d_date as timestamp) >= TIMESTAMP'1970-01-01 00:00:00'",
    "d_date = TIMESTAMP'1969-12-31 00:00:00'",
    "d_date < TIMESTAMP'1970-01-01 01:00:00'",
    'd_date > d_ts',
    'd_date = cast(d_ts as date)',
    "d_ts >= '2000-01-01'",
    "d_ts >= '2000-01-01 08:00:00'",
    "d_ts < TIMESTAMP'1970-01-01 00:00:00'",
    "cast(d_ts as date) = DATE'1970-01-01'",
    "cast(d_ts as date) = DATE'1969-12-31'",
    "to_date(d_ts) = DATE'2000-01-01'",
    'hour(d_ts) = 23',
    'year(d_ts) = 1969',
    "date_trunc('DAY', d_ts) = TIMESTAMP'2000-01-01 00:00:00'",
    'unix_timestamp(d_ts) > 0',
    'd_ts = d_ntz',
    "d_ntz >= TIMESTAMP_NTZ'2000-01-01 08:00:00'",
    "d_ntz < '1970-01-01'",
    "cast(d_ntz as timestamp) < TIMESTAMP'1970-01-01 00:00:00'",
    "cast(d_ntz as date) = DATE'1969-12-31'",
    'd_ntz > d_ts',
    'year(d_ntz) = 1969',
    "d_name LIKE 'b%'",
    "d_name LIKE '%b'",
    "d_name LIKE 'b_'",
    "d_name LIKE 'a\\\\%'",
    "d_name ILIKE 'b%'",
    "upper(d_name) = 'B'",
    "lower(d_name) = 'b'",
    "substr(d_name, 1, 1) = 'b'",
    "substring(d_name, 2) = ''",
    "left(d_name, 1) = 'b'",
    'length(d_name) = 1',
    "trim(d_name) = 'b'",
    "rtrim(d_name) = 'b'",
    "d_name = 'b '",
    "d_name > 'B'",
    "d_name < 'a'",
    "d_name >= 'é'",
    "d_name > 'z'",
    "d_name || 'x' = 'bx'",
    "concat(d_name, 'x') > 'c'",
    "d_name IN ('b', 'é')",
    "d_name RLIKE '^b'",
    "d_name BETWEEN 'a' AND 'c'",
    "coalesce(d_name, 'zz') = 'zz'",
    "NOT d_name LIKE 'b%'",
    'd_name = 10',
    'd_name > 9',
    'd_name < 10',
    'cast(d_name as int) = 10',
    'cast(d_name as double) = 10',
    'd_name = d_q',
    'd_name = 1e1',
    "d_name >= DATE'2000-01-01'",
    "cast(d_name as date) = DATE'2000-01-01'",
    "d_name <> ''",
    "d_name = ''",
    'd_name IS NOT NULL AND d_moy IS NULL',
    'd_moy > d_q',
    'd_q = d_moy',
    'd_big > d_q',
    "d_moy = 5 OR d_name = 'b'",
    "NOT (d_moy = 5 OR d_name = 'b')",
    "startswith(d_name, 'b')",
    "contains(d_name, 'b')",
    "endswith(d_name, 'b')",
    "d_name = 'B' COLLATE UTF8_LCASE",
    "d_name COLLATE UTF8_LCASE = 'B'",
    'd_moy IN (127, 1000)',
    'd_moy = 1000',
    'd_moy > 1000',
    'd_moy < -1000',
    'd_moy = 127.0',
    'd_q = 2147483648',
    'd_q IN (2147483648, 5)',
    'cast(d_q as tinyint) = 0',
    'cast(d_q as smallint) < 0',
    'cast(d_big as int) = 0',
    'cast(d_big as int) < 0',
    'd_q + 1 = -2147483648',
]
NAMES = ["''", "'b'", "'b '", "' b'", "'B'", "'bb'", "'é'", "'E'", "'ß'", "'😀'", "'10'", "'9'", "'1e1'", "'2000-01-01'",
         "'a%'", "NULL"]
DATES = ["DATE'1969-12-31'", "DATE'1970-01-01'", "DATE'0001-01-01'", "DATE'9999-12-31'", "DATE'2000-02-29'",
         "DATE'1582-10-04'", "NULL"]
TIMES = ["TIMESTAMP'1969-12-31 23:59:59.999999'", "TIMESTAMP'1970-01-01 00:00:00'", "TIMESTAMP'2024-03-10 02:30:00'",
         "TIMESTAMP'2024-11-03 01:30:00'", "TIMESTAMP'2000-01-01 07:59:59'", "TIMESTAMP'2000-01-01 08:00:00'", "NULL"]
MONTHS = ["127", "-128", "0", "1", "5", "12", "100", "NULL"]
INTS = ["2147483647", "-2147483648", "0", "5", "10", "NULL"]
BIGS = ["9223372036854775807", "-9223372036854775808", "9007199254740993", "0", "NULL"]


def _dimension(spark) -> list[tuple]:  # noqa: ANN001 - a SparkSession
    """The dimension's rows, written in UTC, and read back in the statistics' domain."""
    rng = random.Random(7)
    rows = []
    for k in range(60):
        key = "NULL" if k % 17 == 16 else str(k % 50)  # keys 0..9 twice
        rows.append(f"({key}, {rng.choice(MONTHS)}, {rng.choice(INTS)}, {rng.choice(BIGS)}, {rng.choice(NAMES)}, "
                    f"{rng.choice(DATES)}, {rng.choice(TIMES)}, CAST({rng.choice(TIMES)} AS TIMESTAMP_NTZ))")
    spark.sql("CREATE DATABASE IF NOT EXISTS joined_bounds")
    spark.sql(f"DROP TABLE IF EXISTS {DIM}")
    spark.sql(f"CREATE TABLE {DIM} (d_key INT, d_moy TINYINT, d_q INT, d_big BIGINT, d_name STRING, d_date DATE, "
              f"d_ts TIMESTAMP, d_ntz TIMESTAMP_NTZ) USING parquet")
    spark.sql(f"INSERT INTO {DIM} VALUES " + ", ".join(rows))
    return [tuple(r) for r in spark.sql(
        f"SELECT d_key, cast(d_moy AS bigint), cast(d_q AS bigint), d_big, d_name, unix_date(d_date), unix_micros(d_ts), "
        f"timestampdiff(MICROSECOND, TIMESTAMP_NTZ'1970-01-01 00:00:00', d_ntz) FROM {DIM}").collect()]


def _bounds(rows: list[tuple], keys: list[int]) -> tuple[int, tuple]:
    """By the definition: the dimension rows whose key is among the file's keys."""
    joined = [r for r in rows if r[0] is not None and r[0] in set(keys)]
    per = []
    for a in range(len(ATTRIBUTES)):
        values = [r[1 + a] for r in joined if r[1 + a] is not None]
        per.append((min(values), max(values), len(joined) - len(values)) if values else (None, None, len(joined)))
    return len(joined), tuple(per)


def _passing(spark, conjuncts: list[str]) -> dict[str, set[int] | None]:  # noqa: ANN001
    """Per conjunct, the keys of the dimension rows on which Spark finds it TRUE (None: Spark refuses it)."""
    out: dict[str, set[int] | None] = {}
    try:
        rows = spark.sql("SELECT d_key, " + ", ".join(f"coalesce(({c}), false)" for c in conjuncts) +
                         f" FROM {DIM} WHERE d_key IS NOT NULL").collect()
        for i, c in enumerate(conjuncts):
            out[c] = {r[0] for r in rows if r[1 + i]}
        return out
    except Exception:  # noqa: BLE001 - one conjunct raises in this session: ask one at a time
        pass
    for c in conjuncts:
        try:
            out[c] = {r[0] for r in spark.sql(f"SELECT d_key FROM {DIM} WHERE d_key IS NOT NULL AND ({c})").collect()}
        except Exception:  # noqa: BLE001 - Spark refuses it (ANSI, types): no question about rows
            out[c] = None
    return out


def test_no_file_the_bounds_rule_out_holds_a_key_of_a_row_spark_passes(stack: Stack) -> None:
    spark = stack.spark
    before = {key: spark.conf.get(key) for key in ("spark.sql.ansi.enabled", "spark.sql.session.timeZone")}
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    rows = _dimension(spark)
    rng = random.Random(15)
    keys = sorted({r[0] for r in rows if r[0] is not None})
    files = [[k] for k in keys] + [rng.sample(keys, rng.randint(2, 6)) for _ in range(40)]
    paths = np.array([f"file:/t/f{i}.parquet" for i in range(len(files))], dtype=object)
    n = len(files)
    fact = TableStats("joined_bounds.fact", paths, np.ones(n, dtype=np.int64), np.zeros(n, dtype=np.int64),
                      np.ones(n, dtype=np.int64), {}, location="file:/t")
    bounds = JoinedBounds(DIM, "d_key", "f_key", ATTRIBUTES, {str(p): _bounds(rows, f) for p, f in zip(paths, files)})
    unknown = {name: ColumnStats(kind, np.zeros(1, dtype=object if kind.name == "string" else np.int64),
                                 np.zeros(1, dtype=object if kind.name == "string" else np.int64), np.zeros(1, dtype=bool),
                                 np.full(1, -1)) for name, kind in KINDS.items()}
    dim = TableStats(DIM, np.array(["file:/d/1"], dtype=object), np.ones(1, dtype=np.int64), np.ones(1, dtype=np.int64),
                     np.ones(1, dtype=np.int64), unknown)
    wrong, ruled, asked = [], 0, 0
    try:
        for ansi in (False, True):
            for zone in ("UTC", "America/Los_Angeles", "Asia/Kolkata"):
                spark.conf.set("spark.sql.ansi.enabled", str(ansi).lower())
                spark.conf.set("spark.sql.session.timeZone", zone)
                session = SessionSettings(ansi=ansi, time_zone=zone)
                for c, passing in _passing(spark, CONJUNCTS).items():
                    if passing is None:
                        continue
                    asked += 1
                    node = sqlglot.parse_one(c, read="spark")
                    j = Joined("f_key", DIM, "d_key", And((translator_for(dim, "", session).translate(node),)),
                               (unqualified(node),))
                    out = unreached(bounds, fact, np.ones(n, dtype=bool), j, dim)
                    ruled += int(out.sum())
                    wrong += [(ansi, zone, c, files[i]) for i in np.flatnonzero(out) if set(files[i]) & passing]
    finally:
        for key, value in before.items():
            spark.conf.set(key, value)
        spark.sql(f"DROP TABLE IF EXISTS {DIM}")
    assert not wrong, wrong[:5]
    assert asked >= 700 and ruled >= 5000, (asked, ruled)  # asked (729), and the bounds do rule out (18,018)
