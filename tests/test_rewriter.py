"""Rewriter I without Spark: translation and evaluation units, the minimal edit, join semantics, adversarial
input. Statistics are built by hand: per file, the rows it holds."""

from __future__ import annotations

import datetime
from collections.abc import Mapping

import numpy as np
import pytest
import sqlglot

from rewriter.domain import literal_interval
from rewriter.errors import Untranslatable
from rewriter.evaluate import might_match
from rewriter.falsify import Translator
from rewriter.literals import Timestamp, fold
from rewriter.monotone import apply
from rewriter.predicate import Fn
from rewriter.rewrite import RewriteContext, rewrite
from stats.model import ColumnStats, Kind, RangeSets, TableStats, ValueLists
from stats.range_set import optimal_range_set

EPOCH = datetime.date(1970, 1, 1)
INT, DATE, STR = Kind("int"), Kind("date"), Kind("string")


def table(name: str, files: list[dict[str, list]], kinds: Mapping[str, Kind], k: int = 2,
          paths: list[str] | None = None) -> TableStats:
    """TableStats over files given as {column: values}; None values are NULLs."""
    n = len(files)
    columns = {}
    for column, kind in kinds.items():
        to_domain = (lambda v: (v - EPOCH).days) if kind.name == "date" else (lambda v: v)
        per_file = [[to_domain(v) for v in f[column] if v is not None] for f in files]
        dtype = object if kind.name == "string" else np.int64
        fill = "" if kind.name == "string" else 0
        lo = np.array([min(v) if v else fill for v in per_file], dtype=dtype)
        hi = np.array([max(v) if v else fill for v in per_file], dtype=dtype)
        nulls = np.array([sum(v is None for v in f[column]) for f in files], dtype=np.int64)
        ranges = None
        if kind.name != "string":
            los, his, owner = [], [], []
            for i, values in enumerate(per_file):
                a, b = optimal_range_set(np.array(values, dtype=np.int64), k)
                los += list(a)
                his += list(b)
                owner += [i] * len(a)
            ranges = RangeSets(np.array(los, dtype=np.int64), np.array(his, dtype=np.int64), np.array(owner, dtype=np.int64),
                               np.ones(n, dtype=bool))
        values = None
        if kind.name == "string":  # as the collector keeps them: every distinct value of files with few
            listed = [sorted(set(v)) if len(set(v)) <= 16 else None for v in per_file]
            flat = [(i, x) for i, vs in enumerate(listed) for x in vs or []]
            values = ValueLists(np.array([x for _, x in flat], dtype=object), np.array([i for i, _ in flat], dtype=np.int64),
                                np.array([vs is not None for vs in listed]))
        columns[column] = ColumnStats(kind, lo, hi, np.array([bool(v) for v in per_file]) | (nulls > 0), nulls, ranges,
                                      values)
    rows = np.array([len(next(iter(f.values()))) for f in files], dtype=np.int64)
    paths = paths or [f"file:/wh/{name}/part-{i}.parquet" for i in range(n)]
    return TableStats(name, np.array(paths, dtype=object), np.full(n, 1000, dtype=np.int64),
                      np.arange(n, dtype=np.int64) + 1_700_000_000_000_000, rows, columns)


class Source:
    def __init__(self, *tables: TableStats, types: Mapping[str, str] | None = None) -> None:
        self.tables = {t.table: t for t in tables}
        self._schemas = {t.table: {c: {"int": "bigint", "date": "date", "string": "string"}[s.kind.name]
                                   for c, s in t.columns.items()} for t in tables}

    def schemas(self) -> Mapping[str, Mapping[str, str]]:
        return self._schemas

    def table_stats(self, name: str, fresh_listing: bool = False) -> TableStats | None:
        return self.tables.get(name)


def days(*ds: str) -> list[datetime.date]:
    return [datetime.date.fromisoformat(d) for d in ds]


ORDERS = table("db.orders", [
    {"id": [1, 2, 3], "day": days("2020-01-01", "2020-01-05", "2020-01-09"), "status": ["F", "F", "O"]},
    {"id": [10, 11, 30], "day": days("2021-06-01", "2021-06-02", "2021-06-03"), "status": ["O", "O", None]},
    {"id": [None, None], "day": [None, None], "status": [None, None]},
], {"id": INT, "day": DATE, "status": STR})
ITEMS = table("db.items", [
    {"order_id": [1, 2], "qty": [5, 6]},
    {"order_id": [10, 11], "qty": [50, 60]},
], {"order_id": INT, "qty": INT})
CTX = RewriteContext(Source(ORDERS, ITEMS), database="db")
LOCAL = RewriteContext(Source(ORDERS, ITEMS), database="db", dips=False)  # rewriter I alone


def kept(sql: str, ctx: RewriteContext = CTX) -> dict[str, int]:
    result = rewrite(sql, ctx)
    assert result.decision.error is None, result.decision.error
    if result.changed:
        sqlglot.parse_one(result.sql, read="spark")  # what goes to Spark parses
    return {t.alias: t.files_kept for t in result.decision.tables}


# -- units ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, value", [
    ("1", 1), ("-5", -5), ("1.50", __import__("decimal").Decimal("1.50")), ("1e3", 1000.0), ("'it''s'", "its"),
    ("DATE '1995-03-01'", datetime.date(1995, 3, 1)), ("CAST('1995-3' AS DATE)", datetime.date(1995, 3, 1)),
    ("DATE '2020-01-31' + INTERVAL 1 MONTH", datetime.date(2020, 2, 29)),
    ("date_add(DATE '2020-12-31', 1)", datetime.date(2021, 1, 1)),
    ("DATE '2020-03-01' - INTERVAL '1' DAY", datetime.date(2020, 2, 29)),
    ("TIMESTAMP '2020-01-01 10:00:00'", Timestamp(datetime.datetime(2020, 1, 1, 10))),
])
def test_fold(text: str, value: object) -> None:
    assert fold(sqlglot.parse_one(text, read="spark")) == value


def test_literal_intervals_are_sound() -> None:
    assert literal_interval(__import__("decimal").Decimal("10.5"), INT, None) == (10, 11)
    with pytest.raises(Untranslatable):
        literal_interval(2.0**60, INT, None)  # Spark compares in double: no integer interval is safe
    lo, hi = literal_interval(Timestamp(datetime.datetime(2020, 1, 1)), Kind("timestamp"), None)
    assert hi - lo == 36 * 3600 * 10**6  # zone unknown: every zone's reading
    assert literal_interval(Timestamp(datetime.datetime(2020, 1, 1)), Kind("timestamp"), "UTC")[0] == \
        literal_interval(Timestamp(datetime.datetime(2020, 1, 1)), Kind("timestamp"), "UTC")[1]
    assert literal_interval("1995-03-01", DATE, None) == ((datetime.date(1995, 3, 1) - EPOCH).days,) * 2
    # 38 digits stay 38 digits (Python's default context would round to 28)
    big = __import__("decimal").Decimal("123456789012345678901234567890123456.96")
    assert literal_interval(big, Kind("decimal", 2, 38), None) == (12345678901234567890123456789012345696,) * 2
    # past 2099 the zone's rules were not compared with the backend's: every zone's reading (and past year 9999
    # in UTC no crash)
    from rewriter.domain import wall_micros
    from rewriter.spark.zones import MAX_OFFSET_MICROS
    late = datetime.datetime(9999, 12, 31, 20)
    assert literal_interval(Timestamp(late), Kind("timestamp"), "America/Los_Angeles") == \
        (wall_micros(late) - MAX_OFFSET_MICROS, wall_micros(late) + MAX_OFFSET_MICROS)


@pytest.mark.parametrize("text", [
    "CAST(123.456 AS DECIMAL(4,2))", "CAST(9.999 AS DECIMAL(3,2))", "CAST(100 AS DECIMAL(2,0))",
    # DECIMAL(35,1) times INT's DECIMAL(10,0) passes 38 digits: Spark then drops scale, rounding; not folded.
    "CAST(1234567890123456789012345678901234.5 * 10 AS DECIMAL(38,1))",
])
def test_a_cast_past_the_decimal_type_precision_is_not_a_constant(text: str) -> None:
    """Spark gives NULL (TRY_CAST, or CAST with ANSI off) or raises: no value to compare with."""
    with pytest.raises(Untranslatable):
        fold(sqlglot.parse_one(text, read="spark"))


def test_a_cast_within_the_decimal_type_precision_is_a_constant() -> None:
    assert str(fold(sqlglot.parse_one("CAST(99.994 AS DECIMAL(4,2))", read="spark"))) == "99.99"
    assert str(fold(sqlglot.parse_one("CAST(1234567890123456789012345.5 * 10 AS DECIMAL(38,1))",
                                      read="spark"))) == "12345678901234567890123455.0"


def test_monotone_functions_match_python() -> None:
    rng = np.random.default_rng(3)
    d = rng.integers(-30000, 30000, 500)
    dates = [EPOCH + datetime.timedelta(days=int(x)) for x in d]
    lo, _, _ = apply(Fn("year"), DATE, d, d)
    assert list(lo) == [x.year for x in dates]
    lo, _, ok = apply(Fn("month"), DATE, d, d)
    assert list(lo) == [x.month for x in dates] and ok.all()
    _, _, ok = apply(Fn("month"), DATE, np.array([0]), np.array([400]))
    assert not ok[0]  # month is monotone only within one year
    lo, _, _ = apply(Fn("trunc", "month"), DATE, d, d)
    assert list(lo) == [(x.replace(day=1) - EPOCH).days for x in dates]
    _, _, ok = apply(Fn("mul", 4), INT, np.array([2**61]), np.array([2**61]))
    assert not ok[0]  # would overflow


def test_in_list_of_ten_thousand_values_over_ten_thousand_files() -> None:
    n = 10_000
    stats = TableStats("db.big", np.array([f"f{i}" for i in range(n)], dtype=object), np.ones(n, dtype=np.int64),
                       np.ones(n, dtype=np.int64), np.full(n, 10, dtype=np.int64),
                       {"x": ColumnStats(INT, np.arange(n) * 10, np.arange(n) * 10 + 5, np.ones(n, dtype=bool),
                                         np.zeros(n, dtype=np.int64))})
    values = ", ".join(str(v) for v in range(0, n * 10, 20))  # hits every other file
    pred = Translator(lambda c: c.name, {"x": INT}, None).translate(sqlglot.parse_one(f"x IN ({values})", read="spark"))
    assert might_match(pred, stats).sum() == n // 2


# -- pruning and semantics ------------------------------------------------------------------------------------

@pytest.mark.parametrize("where, files", [
    ("day = DATE '2020-01-05'", 1), ("day BETWEEN '2021-01-01' AND '2021-12-31'", 1), ("year(day) = 2021", 1),
    ("day >= DATE '2020-01-01' + INTERVAL 1 YEAR", 1), ("id IN (2, 30)", 2), ("id NOT IN (1, NULL)", 0),
    ("id = NULL", 0), ("id IS NULL", 1), ("id IS NOT NULL", 2), ("NOT (id < 10)", 1), ("id <=> NULL", 1),
    ("status = 'O'", 2), ("status LIKE 'F%'", 1), ("id = 20", 0),  # 20 lies in a range-set gap of [10, 30]
    ("id = 5 OR hash(status) < 0", 3), ("id = 5 AND hash(status) < 0", 0), ("NOT (id = 1 AND day = DATE '2020-01-01')", 2),
    ("id + 1 > 12", 1), ("id * 2 <= 4", 1), ("month(day) = 6", 1),
])
def test_local_predicates(where: str, files: int) -> None:
    assert kept(f"SELECT * FROM orders WHERE {where}")["orders"] == files


def test_outer_join_semantics() -> None:
    # WHERE on the null-supplying side must not prune it (b.qty IS NULL keeps unmatched rows) ...
    assert kept("SELECT * FROM orders o LEFT JOIN items i ON o.id = i.order_id WHERE i.qty > 40")["i"] == 2
    # ... ON on the null-supplying side prunes it; ON on the preserved side prunes nothing.
    assert kept("SELECT * FROM orders o LEFT JOIN items i ON o.id = i.order_id AND i.qty > 40 AND o.id > 5") == {"o": 3, "i": 1}
    assert kept("SELECT * FROM items i RIGHT JOIN orders o ON o.id = i.order_id AND i.qty < 10") == {"i": 1, "o": 3}
    assert kept("SELECT * FROM orders o FULL JOIN items i ON o.id = i.order_id AND i.qty > 40 WHERE o.id = 1") == {"o": 3, "i": 2}
    # Locally o keeps ids 1..3 and i keeps order_ids 10..11; the semi join's diPs prove no pair can match.
    assert kept("SELECT * FROM orders o LEFT SEMI JOIN items i ON o.id = i.order_id AND i.qty > 40 WHERE o.id < 5") == {"o": 0, "i": 0}
    assert kept("SELECT * FROM orders o LEFT SEMI JOIN items i ON o.id = i.order_id AND i.qty > 40 WHERE o.id < 5",
                LOCAL) == {"o": 1, "i": 1}
    assert kept("SELECT * FROM orders o JOIN items i ON o.id = i.order_id WHERE i.qty > 40 AND o.id < 5", LOCAL) == {"o": 1, "i": 1}
    assert kept("SELECT * FROM orders o JOIN items i ON o.id = i.order_id WHERE i.qty > 40 AND o.id < 5") == {"o": 0, "i": 0}


def test_nested_shapes_and_self_joins() -> None:
    # a.id = 1 and b.id = 30 with a.id = b.id: the diPs prove the join empty, so neither alias reads a file.
    assert kept("SELECT * FROM orders a JOIN orders b ON a.id = b.id WHERE a.id = 1 AND b.id = 30") == {"a": 0, "b": 0}
    assert kept("SELECT * FROM orders a JOIN orders b ON a.id = b.id WHERE a.id = 1 AND b.id = 30", LOCAL) == {"a": 1, "b": 1}
    assert kept("WITH c AS (SELECT * FROM orders WHERE id > 20) SELECT * FROM c") == {"orders": 1}
    assert kept("SELECT * FROM (SELECT id FROM orders WHERE id < 5) x") == {"orders": 1}
    # The IN subquery's orders file holds ids {10, 11, 30}: items' file of order_ids {1, 2} cannot match.
    assert kept("SELECT * FROM items WHERE order_id IN (SELECT id FROM orders WHERE id > 20)") == {"items": 1, "orders": 1}
    assert kept("SELECT * FROM items WHERE order_id IN (SELECT id FROM orders WHERE id > 20)", LOCAL) == {"items": 2, "orders": 1}
    assert kept("SELECT id FROM orders WHERE id = 1 UNION ALL SELECT order_id FROM items WHERE qty > 40") == {"orders": 1, "items": 1}


def test_minimal_edit_keeps_the_text() -> None:
    sql = "-- leading comment\nSELECT  o.id  /* keep me */\nFROM   db.orders AS o\nWHERE o.id = 30"
    out = rewrite(sql, CTX).sql
    assert out.startswith("-- leading comment\nSELECT  o.id  /* keep me */\nFROM   (SELECT * FROM db.orders WHERE NOT ")
    assert out.endswith(") AS o\nWHERE o.id = 30")
    unaliased = rewrite("SELECT * FROM `Orders` WHERE ID = 30", CTX).sql
    assert "(SELECT * FROM `Orders` WHERE " in unaliased and unaliased.rstrip().endswith("AS `Orders` WHERE ID = 30")


@pytest.mark.parametrize("sql", [
    "SELECT * FROM items WHERE qty > 0",  # nothing to skip
    "CREATE TABLE t AS SELECT * FROM orders WHERE id = 1", "INSERT INTO orders SELECT * FROM orders WHERE id = 1",
    "SET spark.sql.shuffle.partitions = 4", "USE db", "SELECT 1; SELECT * FROM orders WHERE id = 1",
    "SELECT * FROM nowhere WHERE x = 1", "SELEKT garbage FROM", "SELECT * FROM orders TABLESAMPLE (10 PERCENT) WHERE id = 1",
    "SELECT db.orders.id FROM db.orders WHERE id = 30",
])
def test_passes_through_byte_for_byte(sql: str) -> None:
    result = rewrite(sql, CTX)
    assert result.sql == sql and not result.changed


def test_file_names_with_quotes_are_escaped() -> None:
    evil = table("db.evil", [{"x": [1]}, {"x": [9]}], {"x": INT},
                 paths=["file:/wh/evil/x' OR '1'='1.parquet", "file:/wh/evil/back\\slash.parquet"])
    out = rewrite("SELECT * FROM evil WHERE x > 5 UNION ALL SELECT * FROM evil WHERE x < 5",
                  RewriteContext(Source(evil), database="db")).sql
    literals = [lit.this for lit in sqlglot.parse_one(out, read="spark").find_all(sqlglot.exp.Literal) if lit.is_string]
    # Keys hold the path after the table's folder, which is tested once (rewriter/emit.py).
    assert "file:/wh/evil/" in literals
    assert "x' OR '1'='1.parquet|1000|1700000000000000" in literals
    assert "back\\slash.parquet|1000|1700000000000001" in literals


def test_fails_open() -> None:
    class Broken(Source):
        def table_stats(self, name: str, fresh_listing: bool = False) -> TableStats | None:
            raise RuntimeError("store on fire")

    result = rewrite("SELECT * FROM orders WHERE id = 1", RewriteContext(Broken(ORDERS), database="db"))
    assert result.sql == "SELECT * FROM orders WHERE id = 1" and "store on fire" in result.decision.error


def test_unknown_files_are_read_and_counted() -> None:
    import dataclasses

    tainted = dataclasses.replace(ORDERS, unknown_files=2, unknown_bytes=500)
    result = rewrite("SELECT * FROM orders WHERE id = 30", RewriteContext(Source(tainted), database="db"))
    t = result.decision.tables[0]
    assert (t.files_total, t.files_kept, t.unknown_files) == (5, 3, 2)


def test_same_value_files() -> None:
    """Seed 002 §5.3.11: clauses without a falsifiable expression, decided on files holding one value."""
    zips = table("db.addr", [{"zip": ["12345-678"] * 2, "n": [7, 7]}, {"zip": ["99999-000"] * 2, "n": [-7, -7]},
                             {"zip": ["12345-678", "55555"], "n": [1, 2]}], {"zip": STR, "n": INT})
    ctx = RewriteContext(Source(zips), database="db")
    assert kept("SELECT * FROM addr WHERE substr(zip, 1, 5) IN ('12345', '00000')", ctx) == {"addr": 2}
    assert kept("SELECT * FROM addr WHERE n % 5 = 2", ctx) == {"addr": 2}  # -7 % 5 is -2 in Spark
    assert kept("SELECT * FROM addr WHERE n % 5 = -2", ctx) == {"addr": 2}
    assert kept("SELECT * FROM addr WHERE NOT (length(zip) = 9)", ctx) == {"addr": 1}
    assert kept("SELECT * FROM addr WHERE upper(concat(zip, 'x')) = '99999-000X'", ctx) == {"addr": 2}
    assert kept("SELECT * FROM addr WHERE substr(zip, -3) = '000'", ctx) == {"addr": 2}
    assert kept("SELECT * FROM addr WHERE n % 0 = 1", ctx) == {"addr": 3}  # not evaluated: might match


def test_date_trunc_bounds_past_year_9999_are_wide_not_an_error() -> None:
    """``date_trunc('MM', d + INTERVAL 400 DAY)`` over dates near 9999-12-31 leaves Python's date range (found by
    ``fuzz-predicates --seed 2615``: the statement failed open); the bounds widen by the largest zone offset."""
    from rewriter.monotone import MAX_OFFSET_MICROS as MAX_ZONE_OFFSET_MICROS, MICROS_PER_DAY, _midnight

    days = np.array([2_932_896 + 400, 0], dtype=np.int64)  # 9999-12-31 plus 400 days; 1970-01-01
    low, high = _midnight(days, "America/New_York", low=True), _midnight(days, "America/New_York", low=False)
    assert low[0] == days[0] * MICROS_PER_DAY - MAX_ZONE_OFFSET_MICROS
    assert high[0] == days[0] * MICROS_PER_DAY + MAX_ZONE_OFFSET_MICROS
    assert low[1] == high[1] == 5 * 3_600_000_000  # midnight in New York is 05:00 UTC
