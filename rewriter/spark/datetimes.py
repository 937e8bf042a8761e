"""Date and time functions: Spark's definitions. A string argument is cast to a date or a timestamp, which
under ANSI raises on text that does not parse; date arithmetic raises out of Spark's range."""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from rewriter.spark.coercion import DATES, SMALL_INTEGERS, expects
from rewriter.spark.registry import Call, Function, register
from rewriter.spark.types import DATE, DOUBLE, INT
from stats.model import Kind

_TIMESTAMP = Kind("timestamp")
_EXTRACT_INT = frozenset({"YEAR", "MONTH", "DAY", "QUARTER", "DAYOFWEEK", "DOW", "DOY", "HOUR", "MINUTE", "WEEK"})


def _constant(kind: Kind) -> Any:
    return lambda call: kind


def _ansi(call: Call) -> bool:
    return call.ansi


def _day_unit(node: exp.Expression) -> bool:
    return (node.text("unit") or "DAY").upper() in ("DAY", "DAYS")


_PARTS = (exp.Year, exp.Month, exp.Quarter, exp.Day, exp.DayOfMonth, exp.DayOfWeek, exp.DayOfYear, exp.WeekOfYear,
          exp.Hour, exp.Minute, exp.Second)

register(
    *(Function(cls, cls.__name__.lower(), ("this",), _constant(INT), expects(DATES)) for cls in _PARTS),
    Function(exp.Extract, "extract", ("expression",), lambda call: INT, expects(DATES), flags=frozenset({"this"}),
             when=lambda node: node.text("this").upper() in _EXTRACT_INT),
    Function(exp.TsOrDsToDate, "to_date", ("this",), _constant(DATE), expects(DATES), flags=frozenset({"safe"})),
    Function(exp.DateTrunc, "trunc", ("this",), _constant(DATE), expects(DATES), flags=frozenset({"unit"})),
    Function(exp.TimestampTrunc, "date_trunc", ("this",), _constant(_TIMESTAMP), expects(DATES),
             flags=frozenset({"unit"})),
    Function(exp.LastDay, "last_day", ("this",), _constant(DATE), expects(DATES)),
    Function(exp.DateDiff, "datediff", ("this", "expression"), _constant(INT), expects(DATES)),
    Function(exp.MonthsBetween, "months_between", ("this", "expression"), _constant(DOUBLE), expects(DATES)),
    # Out of Spark's range of dates date_add raises under ANSI (and wraps without it); add_months raises
    # (ARITHMETIC_OVERFLOW) under either setting.
    Function(exp.AddMonths, "add_months", ("this", "expression"), _constant(DATE), expects(DATES, SMALL_INTEGERS),
             raises=lambda call: True),
    *(Function(cls, "date_add", ("this", "expression"), _constant(DATE), expects(DATES, SMALL_INTEGERS),
               raises=_ansi, flags=frozenset({"unit"}), when=_day_unit)
      for cls in (exp.TsOrDsAdd, exp.DateAdd, exp.DateSub)),
)
