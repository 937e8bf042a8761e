"""The conversion of literals into the statistics' domain of a column (domains: ``stats/model.py``).

:func:`literal_interval` returns the interval ``[lo, hi]`` of domain values the literal can stand for
under Spark's comparison rules, or raises :class:`Untranslatable` when we cannot be sure what Spark does.
"""

from __future__ import annotations

import datetime
import decimal
import math
import zoneinfo
from typing import Any

import numpy as np

from rewriter.errors import Untranslatable
from stats.model import EPOCH, EPOCH_DATE, EXACT, Kind
from rewriter.literals import Interval, Timestamp, Value, parse_date, parse_timestamp
from rewriter.spark.zones import MAX_OFFSET_MICROS, checked, fixed_offset

MICROS_PER_DAY = 86_400_000_000
# No time zone is further than 18 hours from UTC (java.time.ZoneOffset's bound): a wall-clock time read in
# an unknown session zone is within this much of the same wall-clock time read as UTC.
# Doubles represent every integer up to 2^53 exactly; beyond that an int column compared with a double
# literal is rounded by Spark and no integer interval is safe.
MAX_EXACT_DOUBLE_INT = 2**53
NTZ_SHIFT_MICROS = 3 * 3_600_000_000

def days(d: datetime.date) -> int:
    return (d - EPOCH_DATE).days


def wall_micros(t: datetime.datetime) -> int:
    delta = t - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def literal_interval(value: Value, kind: Kind, session_time_zone: str | None) -> tuple[Any, Any]:
    """The domain interval a literal compared with a column of ``kind`` stands for."""
    if isinstance(value, bool) or isinstance(value, Interval):
        raise Untranslatable("boolean or interval literal")
    if isinstance(value, Timestamp) and value.shifted and not fixed_offset(session_time_zone):
        # TIMESTAMP '2020-03-08 01:00:00' + INTERVAL 2 HOURS is 08:00Z in New York, not 07:00Z: Spark moves a
        # timestamp through the session zone, across its offset changes.
        raise Untranslatable("a timestamp moved by an interval, in a session time zone whose offset changes")
    name = kind.name
    if name == "int":
        if isinstance(value, (int, decimal.Decimal, float)) and not -2**63 <= value < 2**63:
            # Spark folds an integer column's comparison with a number beyond BIGINT to a constant (true
            # on NULL rows too): not a comparison these bounds can decide
            raise Untranslatable(f"{value!r} is beyond BIGINT")
        if isinstance(value, int):
            return value, value
        if isinstance(value, decimal.Decimal):
            return math.floor(value), math.ceil(value)
        if isinstance(value, float) and math.isfinite(value) and abs(value) < MAX_EXACT_DOUBLE_INT:
            return math.floor(value), math.ceil(value)
        raise Untranslatable(f"{value!r} compared with an integer column")
    if name == "decimal":
        if isinstance(value, (int, decimal.Decimal)):
            scaled = EXACT.scaleb(decimal.Decimal(value), kind.scale)
            return math.floor(scaled), math.ceil(scaled)
        raise Untranslatable(f"{value!r} compared with a decimal column")
    if name == "float":
        if isinstance(value, (int, decimal.Decimal, float)):
            f = float(value)
            if math.isnan(f):
                raise Untranslatable("NaN literal")
            if kind.bits == 32 and math.isfinite(f) and float(np.float32(f)) != f:
                # A FLOAT column: Spark may compare in 32 bits (an integer literal without ANSI is cast to
                # FLOAT, 16777217 becoming 16777216), or in 64: which value is compared is not certain.
                raise Untranslatable(f"{value!r} is not a FLOAT value")
            return f, f
        raise Untranslatable(f"{value!r} compared with a floating-point column")
    if name == "string":
        if isinstance(value, str):
            return value, value
        raise Untranslatable(f"{value!r} compared with a string column")
    if name == "date":
        if isinstance(value, str):
            parsed = parse_date(value)
            if parsed is None:
                raise Untranslatable(f"{value!r} is not a date Spark can cast")
            value = parsed
        if isinstance(value, datetime.date):
            return days(value), days(value)
        if isinstance(value, Timestamp) and value.offset is None:
            # Spark compares a date with a timestamp by reading the date as midnight in the session zone,
            # the same zone it reads the zone-less literal in: compare wall-clock times, in whole days.
            micros = wall_micros(value.local)
            return micros // MICROS_PER_DAY, -(-micros // MICROS_PER_DAY)
        raise Untranslatable(f"{value!r} compared with a date column")
    if name in ("timestamp", "timestamp_ntz"):
        if isinstance(value, str):
            parsed = parse_timestamp(value)
            if parsed is None:
                raise Untranslatable(f"{value!r} is not a timestamp Spark can cast")
            value = parsed
        if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
            value = Timestamp(datetime.datetime(value.year, value.month, value.day))
        if not isinstance(value, Timestamp):
            raise Untranslatable(f"{value!r} compared with a timestamp column")
        wall = wall_micros(value.local)
        if name == "timestamp_ntz":
            if value.offset is not None:
                raise Untranslatable("timestamp with a zone compared with TIMESTAMP_NTZ")
            # A TIMESTAMP literal reaches an NTZ column through the session zone: a wall time in a DST gap
            # moves by the gap (02:30 becomes 03:30). No zone's gap is longer than 3 hours.
            return wall - NTZ_SHIFT_MICROS, wall + NTZ_SHIFT_MICROS
        if value.offset is not None:
            utc = wall - value.offset // datetime.timedelta(microseconds=1)
            return utc, utc
        if session_time_zone is not None:
            return _in_zone(value.local, session_time_zone)
        return wall - MAX_OFFSET_MICROS, wall + MAX_OFFSET_MICROS
    raise Untranslatable(f"unsupported column kind {name}")


def _in_zone(local: datetime.datetime, zone: str) -> tuple[int, int]:
    """UTC micros of a wall-clock time in ``zone``; both readings of an ambiguous (DST fold) time. Outside
    the years whose rules were compared with the backend's (``rewriter/spark/zones.py``), every reading."""
    if not checked(zone, local.year):
        wall = wall_micros(local)
        return wall - MAX_OFFSET_MICROS, wall + MAX_OFFSET_MICROS
    try:
        tz = zoneinfo.ZoneInfo(zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise Untranslatable(f"unknown session time zone {zone!r}") from None
    readings = []
    for fold in (0, 1):
        aware = local.replace(tzinfo=tz, fold=fold)
        try:
            utc = aware.astimezone(datetime.timezone.utc)
        except OverflowError:  # past year 9999 in UTC (Python's range; Spark's goes further)
            raise Untranslatable(f"{local} in {zone} is past the range the rewriter computes in") from None
        readings.append(wall_micros(utc.replace(tzinfo=None)))
    return min(readings), max(readings)
