"""One zone database: the rewriter computes with a session time zone only where Python's rules for it are
the backend JVM's (issue 61 case 4; ARCHITECTURE.md §3.6).

Spark converts timestamps with the JVM's time zone rules (its tzdb.dat), the rewriter with Python's
(``zoneinfo``: the system's or the ``tzdata`` package's). Their versions differ, and so can their rules:
tzdata 2025b moved a 1978 change of Asia/Tehran, so a rewriter on the newer rules read a timestamp literal
30 minutes off and skipped a file whose rows matched. Rather than guess which database the backend has, the
proxy asks it once per zone (:func:`probe_sql`, run in the client's backend session) for the zone's offset
at every day from 1900 to 2100 and around each of Python's transitions, and compares the points where the
offset changes with Python's (:func:`expected_changes`). A zone whose rules differ is not computed with: the
session counts as one of unknown zone, where a zone-less timestamp stands for every zone's reading (sound,
only wider) and no timestamp is answered from statistics.

Fixed offsets (UTC, +05:30) have no rules to differ and are not probed.
"""

from __future__ import annotations

import datetime
import re
import threading
import zoneinfo
from collections.abc import Iterable
from typing import Any

from stats.model import EPOCH_UTC

_UTC = datetime.timezone.utc
_EPOCH = EPOCH_UTC
_FIRST = datetime.datetime(1900, 1, 1, tzinfo=_UTC)  # before 1900 offsets are local mean time: never used
_LAST = datetime.datetime(2100, 1, 1, tzinfo=_UTC)
_DAY = 86_400_000_000


# No time zone is further than 18 hours from UTC (java.time.ZoneOffset's bound): a wall-clock time in an
# unknown zone, or outside the checked span, stands for every reading within that much of UTC.
MAX_OFFSET_MICROS = 18 * 3_600_000_000
_FIXED = re.compile(r"(?:UTC|GMT|UT|Z|Etc/UTC|Etc/GMT|Etc/Universal|Etc/Zulu|Universal|Zulu)"
                    r"|(?:(?:UTC|GMT|UT)?[+-][0-9]{1,2}(?::?[0-9]{2})?)")


def fixed_offset(zone: str | None) -> bool:
    """Whether a session time zone's offset is one forever (UTC, an offset such as +05:30): there wall-clock
    and instant arithmetic agree. Region names (even Asia/Kolkata, whose offset changed in 1945) are not."""
    return zone is not None and _FIXED.fullmatch(zone.strip()) is not None


def checked(zone: str, year: int) -> bool:
    """Whether the rules of ``zone`` were compared with the backend's for ``year`` (1900 to 2099; a fixed
    offset for every year). Outside, a wall-clock time in the zone stands for every zone's reading."""
    return fixed_offset(zone) or _FIRST.year <= year < _LAST.year


def _micros(t: datetime.datetime) -> int:
    return (t - _EPOCH) // datetime.timedelta(microseconds=1)


def needs_probe(zone: str | None) -> bool:
    """Whether a session zone has rules that could differ between Python and the backend."""
    return zone is not None and not fixed_offset(zone)


def _probes(zone: str) -> list[int]:
    """Instants (UTC micros): every day's midnight UTC from 1900 to 2100, and one second either side of
    each of Python's transitions in that span."""
    tz = zoneinfo.ZoneInfo(zone)
    points = set(range(_micros(_FIRST), _micros(_LAST), _DAY))
    previous = None
    for day in range(_micros(_FIRST), _micros(_LAST), _DAY):
        offset = (_EPOCH + datetime.timedelta(microseconds=day)).astimezone(tz).utcoffset()
        if previous is not None and offset != previous:
            # a change within the last day: find it to the second
            lo, hi = day - _DAY, day
            while hi - lo > 1_000_000:
                mid = (lo + hi) // 2 // 1_000_000 * 1_000_000
                if mid in (lo, hi):
                    break
                if (_EPOCH + datetime.timedelta(microseconds=mid)).astimezone(tz).utcoffset() == previous:
                    lo = mid
                else:
                    hi = mid
            points.update((lo - 1_000_000, lo, hi, hi + 1_000_000))
        previous = offset
    return sorted(points)


def expected_changes(zone: str) -> list[tuple[int, int]]:
    """(instant, offset in seconds) at the first probe and wherever the offset changes from the probe
    before, by Python's rules."""
    tz = zoneinfo.ZoneInfo(zone)
    out: list[tuple[int, int]] = []
    for x in _probes(zone):
        offset = int((_EPOCH + datetime.timedelta(microseconds=x)).astimezone(tz).utcoffset().total_seconds())
        if not out or out[-1][1] != offset:
            out.append((x, offset))
    return out


def probe_sql(zone: str) -> str:
    """The statement that asks Spark the same: its offset of ``zone`` at each probe (``from_utc_timestamp``
    adds the zone's offset at the instant to its micros, whatever the session's own zone), keeping the
    probes where it changes."""
    from sqlglot import exp

    points = _probes(zone)
    literal = exp.Literal.string(zone).sql("spark")
    extra = ", ".join(str(p) for p in points if (p - _micros(_FIRST)) % _DAY)
    grid = f"sequence({_micros(_FIRST)}L, {_micros(_LAST) - _DAY}L, {_DAY}L)"
    probes = f"array_union({grid}, array({extra}))" if extra else grid
    return (f"SELECT x, o FROM (SELECT x, o, lag(o) OVER (ORDER BY x) AS p FROM ("
            f"SELECT x, CAST((unix_micros(from_utc_timestamp(timestamp_micros(x), {literal})) - x) / 1000000 AS BIGINT) "
            f"AS o FROM (SELECT explode({probes}) AS x))) WHERE p IS NULL OR o <> p ORDER BY x")


def agrees(zone: str, rows: Iterable[tuple[Any, ...]]) -> bool:
    """Whether the backend's answer to :func:`probe_sql` is Python's."""
    return [(int(x), int(o)) for x, o in rows] == expected_changes(zone)


class ZoneRules:
    """The verdicts of one backend, per zone (the proxy keeps one for the process): True where Python's rules
    are the backend's, False where they differ or the probe failed."""

    def __init__(self) -> None:
        self._verdicts: dict[str, bool] = {}
        self._lock = threading.Lock()

    def verdict(self, zone: str) -> bool | None:
        with self._lock:
            return self._verdicts.get(zone)

    def record(self, zone: str, agrees_: bool) -> None:
        with self._lock:
            self._verdicts[zone] = agrees_
