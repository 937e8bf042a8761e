"""What the rewriter declines (rewriter/modelled.py), what may raise (rewriter/raising.py), the session
settings it models (rewriter/session.py) and the types it gives functions (rewriter/monotone.py)."""

from __future__ import annotations

import numpy as np
import pytest
import sqlglot

from rewriter.modelled import unmodelled
from rewriter.monotone import apply, literal_bits, output_kind
from rewriter.predicate import Fn
from rewriter.raising import can_raise, proven_kind
from rewriter.session import SessionSettings, session_settings
from stats.model import ColumnStats, Kind, TableStats


def why(sql: str) -> str | None:
    return unmodelled(sql, sqlglot.parse_one(sql, read="spark"))


@pytest.mark.parametrize("sql, reason", [
    ("FROM t |> WHERE x > 1 |> LIMIT 3", "SQL pipe syntax (|>)"),
    ("WITH RECURSIVE r AS (SELECT 1 AS k UNION ALL SELECT k + 1 FROM r WHERE k < 3) SELECT * FROM r", "a recursive CTE"),
    ("SELECT * FROM t WHERE x > ${limit}", "variable substitution (${...}): Spark changes the text before it parses it"),
    ("SELECT * FROM t WHERE x > 1 AND rand(7) < 0.5", "the nondeterministic function rand()"),
    ("SELECT monotonically_increasing_id() FROM t WHERE x > 1", "the nondeterministic function monotonically_increasing_id()"),
    ("SELECT k FROM t QUALIFY row_number() OVER (ORDER BY k) = 1", "Qualify is not modelled"),
    ("SELECT * FROM t VERSION AS OF 3 WHERE x > 1", "Version is not modelled"),
])
def test_statements_it_does_not_model_are_declined(sql: str, reason: str) -> None:
    assert why(sql) == reason


@pytest.mark.parametrize("sql", [
    "SELECT a.x FROM a JOIN (SELECT y, count(*) AS c FROM b GROUP BY y) t ON a.x = t.y WHERE a.d >= DATE '2020-01-01'",
    "SELECT 'a |> b' AS s FROM t WHERE x > 1",  # the characters inside a string are not pipe syntax
    "WITH c AS (SELECT * FROM t) SELECT sum(x) OVER (PARTITION BY y) FROM c WHERE x IN (1, 2) UNION ALL SELECT 1",
])
def test_ordinary_statements_are_modelled(sql: str) -> None:
    assert why(sql) is None


KINDS = {"i": Kind("int", bits=32), "b": Kind("int", bits=64), "d": Kind("decimal", scale=2, precision=15),
         "s": Kind("string"), "day": Kind("date"), "f": Kind("float")}


@pytest.mark.parametrize("expression, ansi_on, ansi_off", [
    ("i * 1000000000 < 0", True, False), ("i + 1 > 2", True, False), ("d * 2.5 > 1", False, False),
    ("i / 0 > 1", True, False), ("i / 2 > 1", False, False), ("i % 0 = 1", True, False),
    ("i = '5'", False, False), ("i = '5x'", True, False), ("day = '2020-13-01'", True, False),
    ("day BETWEEN '2020-01-01' AND '2020-02-01'", False, False), ("CAST(s AS INT) > 1", True, False),
    ("TRY_CAST(s AS INT) > 1", False, False), ("CAST(i AS BIGINT) > 1", False, False),
    ("upper(s) = 'A' AND s LIKE 'x%'", False, False), ("my_udf(i) > 1", True, True), ("hash(s) < 0", False, False),
    ("day >= DATE '2020-01-01' + INTERVAL 3 DAYS", False, False), ("i IN (SELECT x FROM t)", False, False),
])
def test_what_may_raise(expression: str, ansi_on: bool, ansi_off: bool) -> None:
    node = sqlglot.parse_one(expression, read="spark")
    kind_of = lambda column: KINDS.get(column.name)  # noqa: E731
    assert (can_raise(node, kind_of, True), can_raise(node, kind_of, False)) == (ansi_on, ansi_off)


def test_statistics_prove_a_bigint_column_fits_an_int() -> None:
    def stats(lo: list[int], hi: list[int], unknown: int = 0) -> TableStats:
        n = len(lo)
        col = ColumnStats(Kind("int", bits=64), np.array(lo), np.array(hi), np.ones(n, dtype=bool), np.zeros(n, dtype=np.int64))
        return TableStats("db.t", np.array([f"f{i}" for i in range(n)], dtype=object), np.ones(n, dtype=np.int64),
                          np.ones(n, dtype=np.int64), np.full(n, 10, dtype=np.int64), {"x": col}, unknown_files=unknown)
    small = stats([1, -5], [100, 2**31 - 1])
    assert proven_kind(small.columns["x"], small).bits == 32
    big = stats([1, 5], [100, 2**31])
    assert proven_kind(big.columns["x"], big).bits == 64
    uncovered = stats([1, 5], [100, 200], unknown=1)  # a file without statistics could hold anything
    assert proven_kind(uncovered.columns["x"], uncovered).bits == 64


@pytest.mark.parametrize("fn, kind, result", [
    (Fn("add", 1), Kind("int", bits=8), Kind("int", bits=32)),  # TINYINT + INT literal is an INT
    (Fn("mul", 3_000_000_000), Kind("int", bits=32), Kind("int", bits=64)),  # a BIGINT literal widens
    (Fn("add", 1), Kind("decimal", scale=2, precision=15), Kind("decimal", scale=2, precision=16)),
    (Fn("mul", 3), Kind("decimal", scale=2, precision=15), Kind("decimal", scale=2, precision=17)),
    (Fn("date_trunc", ("month", None)), Kind("date"), Kind("timestamp")),
    (Fn("trunc", "month"), Kind("date"), Kind("date")),
    (Fn("year"), Kind("date"), Kind("int", bits=32)),
    (Fn("cast", "bigint"), Kind("int", bits=16), Kind("int", bits=64)),
])
def test_result_types(fn: Fn, kind: Kind, result: Kind) -> None:
    assert output_kind(fn, kind) == result


def test_integer_arithmetic_is_followed_only_where_its_type_cannot_overflow() -> None:
    lo, hi = np.array([1, 1, -2]), np.array([2, 3, -1])
    _, _, ok = apply(Fn("mul", 1_000_000_000), Kind("int", bits=32), lo, hi)
    assert ok.tolist() == [True, False, True]  # 3 * 10^9 > 2^31 - 1; -2 * 10^9 fits
    _, _, ok = apply(Fn("mul", 1_000_000_000), Kind("int", bits=64), lo, hi)
    assert ok.all()
    _, _, ok = apply(Fn("add", 1), Kind("int", bits=64), np.array([2**63 - 2]), np.array([2**63 - 1]))
    assert not ok[0]
    assert literal_bits(2**31 - 1) == 32 and literal_bits(2**31) == 64


def test_date_trunc_maps_days_to_local_midnight() -> None:
    day = np.array([9190])  # 1995-03-01
    lo, _, _ = apply(Fn("date_trunc", ("month", "UTC")), Kind("date"), day, day)
    assert lo[0] == 9190 * 86_400_000_000
    lo, hi, _ = apply(Fn("date_trunc", ("month", None)), Kind("date"), day, day)
    assert lo[0] < 9190 * 86_400_000_000 < hi[0]  # any zone: within 18 hours either way
    lo, _, _ = apply(Fn("date_trunc", ("month", "America/Los_Angeles")), Kind("date"), day, day)
    assert lo[0] == 9190 * 86_400_000_000 + 8 * 3_600_000_000


@pytest.mark.parametrize("values, expected", [
    ({}, SessionSettings()),
    ({"spark.sql.ansi.enabled": "false", "spark.sql.session.timeZone": "America/New_York"},
     SessionSettings(ansi=False, time_zone="America/New_York")),
    ({"spark.sql.session.timeZone": "+08:00"}, SessionSettings(time_zone=None)),  # any zone: sound
    ({"spark.sql.shuffle.partitions": "4", "spark.sql.adaptive.enabled": "false", "spark.executor.memory": "2g",
      "spark.sql.caseSensitive": "false"}, SessionSettings()),
    ({"spark.sql.caseSensitive": "true"}, SessionSettings(unmodelled=("spark.sql.caseSensitive=true",))),
    ({"spark.sql.legacy.timeParserPolicy": "LEGACY"}, SessionSettings(unmodelled=("spark.sql.legacy.timeParserPolicy=LEGACY",))),
    ({"spark.sql.ansi.enabled": "maybe"}, SessionSettings(unmodelled=("spark.sql.ansi.enabled=maybe",))),
])
def test_session_settings(values: dict[str, str], expected: SessionSettings) -> None:
    assert session_settings(values) == expected
