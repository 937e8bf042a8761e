"""What the proxy adds to an answer from statistics (``rewriter/stats_answer.py``, issue 17) before a client sees
it, and the analysis check that guards every statistic a user is shown.

- **Analysis in the user's own session** (``analysis_statement``). Statistics are read by the proxy, not by
  Spark, so they would bypass whatever access control the deployment enforces when Spark analyses a
  statement (a catalog that hides a database, a table dropped since collection, a column that does not exist).
  Before an answer from statistics, an ``EXPLAIN SKIPPING`` result or a byte-budget refusal reaches a user,
  the proxy has Spark analyse the statement in that user's backend session: ``SELECT * FROM (<statement>)
  LIMIT 0``, which Spark resolves in full (names, types, access) and optimises to an empty relation, so no
  file is read. When Spark refuses it, the user gets Spark's error (or, for an answer or a budget, the
  statement goes to Spark, which raises it), and nothing from the statistics. The analysis also gives the
  answer's column names and types exactly as Spark would (``count(1)``, ``min(l_shipdate)``, DECIMAL(15,2)).
- **The types agree** (``schema_disagreement``): each output column's type in Spark's analysis is the type the
  statistics computed the value in; any difference (a column retyped since collection, a type the answer does
  not model) sends the statement to Spark.
- **Values as Spark's Thrift Server sends them** (``answer_result``): integers in the column of their width,
  strings as strings, and dates, timestamps and decimals as the strings Spark's ``HiveResult.toHiveString``
  gives (``yyyy-MM-dd``; ``yyyy-MM-dd HH:mm:ss`` with the fraction's trailing zeros dropped, in the session's
  time zone; the decimal's plain digits at its scale).
- **Cached briefly** (``TimedCache``): a session reuses a statement's analysis, and a table's location, for
  ``proxy.analysis_cache_seconds``, and forgets both at any statement that changes the session.
"""

from __future__ import annotations

import datetime as dt
import decimal
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from TCLIService import ttypes as t

from proxy.results import ResultSet

T = TypeVar("T")
_T = t.TTypeId
# The Thrift type Spark's Thrift Server gives each Spark type an answer can have, and how the value travels.
_THRIFT = {
    "tinyint": (_T.TINYINT_TYPE, "tinyint"), "byte": (_T.TINYINT_TYPE, "tinyint"),
    "smallint": (_T.SMALLINT_TYPE, "smallint"), "short": (_T.SMALLINT_TYPE, "smallint"),
    "int": (_T.INT_TYPE, "int"), "integer": (_T.INT_TYPE, "int"),
    "bigint": (_T.BIGINT_TYPE, "bigint"), "long": (_T.BIGINT_TYPE, "bigint"),
    "string": (_T.STRING_TYPE, "string"),
    "date": (_T.DATE_TYPE, "date"), "timestamp": (_T.TIMESTAMP_TYPE, "timestamp"),
    "timestamp_ltz": (_T.TIMESTAMP_TYPE, "timestamp"),
}


def analysis_statement(statement: str) -> str:
    """What Spark analyses in place of ``statement``: its result's schema, without reading a row. The statement
    stands on lines of its own, so a trailing ``--`` comment ends before the closing parenthesis."""
    body = statement.strip()
    while body.endswith(";"):
        body = body[:-1].rstrip()
    return f"SELECT * FROM (\n{body}\n) AS __dipper_analysis LIMIT 0"


def _spark_type(desc: t.TColumnDesc) -> tuple[int, dict[str, Any]]:
    entry = desc.typeDesc.types[0].primitiveEntry
    qualifiers = entry.typeQualifiers.qualifiers if entry.typeQualifiers is not None else {}
    return entry.type, {k: (v.i32Value if v.i32Value is not None else v.stringValue) for k, v in qualifiers.items()}


def _encoding(spark_type: str) -> tuple[int, str, dict[str, int]] | None:
    """(Thrift type id, ResultSet kind, type qualifiers) of a Spark type, None if answers do not model it."""
    name = spark_type.strip().lower()
    if name.startswith("decimal"):
        inside = name[len("decimal"):].strip("() ")
        precision, _, scale = inside.partition(",")
        return _T.DECIMAL_TYPE, "decimal", {"precision": int(precision or 10), "scale": int(scale or 0)}
    found = _THRIFT.get(name)
    return (found[0], found[1], {}) if found is not None else None


def schema_disagreement(types: tuple[str, ...], schema: t.TTableSchema | None) -> str | None:
    """Why Spark's schema of the statement is not the one the statistics answer in, or None if it is."""
    columns = schema.columns if schema is not None and schema.columns else []
    if len(columns) != len(types):
        return f"Spark's result has {len(columns)} columns, the answer {len(types)}"
    for desc, spark_type in zip(columns, types):
        encoding = _encoding(spark_type)
        if encoding is None:
            return f"{desc.columnName}: the type {spark_type} is not modelled"
        type_id, qualifiers = _spark_type(desc)
        if type_id != encoding[0] or (encoding[2] and qualifiers != encoding[2]):
            return (f"{desc.columnName}: Spark's type is {_T._VALUES_TO_NAMES.get(type_id, type_id)} {qualifiers or ''}, "
                    f"the statistics' {spark_type}")
    return None


def answer_result(types: tuple[str, ...], rows: tuple[tuple[Any, ...], ...], schema: t.TTableSchema) -> ResultSet:
    """The answer as a result set with Spark's own schema (``schema_disagreement`` found none)."""
    kinds = [_encoding(spark_type)[1] for spark_type in types]  # type: ignore[index]
    names = [desc.columnName for desc in schema.columns]
    shown = [tuple(_shown(kind, value) for kind, value in zip(kinds, row)) for row in rows]
    return ResultSet([(name, "string" if kind in ("date", "timestamp", "decimal") else kind)
                      for name, kind in zip(names, kinds)], shown, schema_override=schema)


def _shown(kind: str, value: Any) -> Any:
    """A value as Spark's Thrift Server sends it (HiveResult.toHiveString for dates, timestamps, decimals)."""
    if value is None:
        return None
    if kind == "date":
        assert isinstance(value, dt.date)
        return value.isoformat()
    if kind == "timestamp":
        assert isinstance(value, dt.datetime)
        text = f"{value.year:04d}-{value.month:02d}-{value.day:02d} {value.hour:02d}:{value.minute:02d}:{value.second:02d}"
        return text + (f".{value.microsecond:06d}".rstrip("0") if value.microsecond else "")
    if kind == "decimal":
        assert isinstance(value, decimal.Decimal)
        return format(value, "f")
    return value


class TimedCache(Generic[T]):
    """Recent results by key (a session's, or the proxy's), each kept ``ttl`` seconds; at most ``size`` of them.
    Thread-safe; a value is computed outside the lock (two threads may compute the same one)."""

    def __init__(self, ttl: float, size: int = 256) -> None:
        self.ttl = ttl
        self.size = size
        self._entries: OrderedDict[Any, tuple[float, T]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any, compute: Callable[[], T]) -> T:
        hit = self.peek(key)
        if hit is not None:
            return hit
        value = compute()  # an exception is not cached: the next statement asks again
        self.put(key, value)
        return value

    def peek(self, key: Any) -> T | None:
        with self._lock:
            hit = self._entries.get(key)
        return hit[1] if hit is not None and time.monotonic() - hit[0] < self.ttl else None

    def put(self, key: Any, value: T) -> None:
        if self.ttl > 0:
            with self._lock:
                self._entries[key] = (time.monotonic(), value)
                self._entries.move_to_end(key)
                while len(self._entries) > self.size:
                    self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        """Entries held, expired ones included until pushed out (for the proxy's metrics)."""
        return len(self._entries)
