"""Answers from statistics without Spark (``rewriter/stats_answer.py``): every shape answered equals what the
rows hold (an oracle over the same hand-built files), every reason not to answer is honoured, and the "rows must
match" evaluator is checked against the rows on random predicates. Against Spark: tests/test_stats_answer_spark.py."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import random

import numpy as np
import pytest
import sqlglot

from proxy.stats_answers import _shown, analysis_statement
from rewriter.implication import must_match
from rewriter.joined_filter import translator_for
from rewriter.rewrite import RewriteContext
from rewriter.session import SessionSettings
from rewriter.stats_answer import stats_answer
from stats.model import Kind, TableStats
from tests.test_rewriter import DATE, INT, STR, Source, days, table

FILES = [
    {"id": [1, 2, 3], "day": days("2020-01-01", "2020-01-05", "2020-01-09"), "status": ["F", "F", "O"]},
    {"id": [10, 11, 30], "day": days("2021-06-01", "2021-06-02", "2021-06-03"), "status": ["O", "O", None]},
    {"id": [None, None], "day": [None, None], "status": [None, None]},
    {"id": [40, 41], "day": days("2022-01-01", "2022-02-01"), "status": ["P", "é"]},
]
T = table("db.t", FILES, {"id": INT, "day": DATE, "status": STR})
CTX = RewriteContext(Source(T), database="db", session=SessionSettings(time_zone="UTC"))


def rows_where(test) -> list[dict]:
    return [{c: f[c][i] for c in f} for f in FILES for i in range(len(f["id"])) if test({c: f[c][i] for c in f})]


def answer(sql: str, ctx: RewriteContext = CTX):
    attempt = stats_answer(sql, ctx)
    assert attempt.answer is not None, attempt.why_not
    return attempt.answer


def test_whole_table_aggregates_equal_the_rows() -> None:
    rows = rows_where(lambda r: True)
    a = answer("SELECT COUNT(*), count(1) AS n, COUNT(id), MIN(day), MAX(day), min(status), MAX(status) FROM t")
    ids = [r["day"] for r in rows if r["day"] is not None]
    statuses = [r["status"] for r in rows if r["status"] is not None]
    assert a.rows == ((len(rows), len(rows), sum(r["id"] is not None for r in rows), min(ids), max(ids),
                       min(statuses), max(statuses)),)
    assert a.types == ("bigint", "bigint", "bigint", "date", "date", "string", "string")
    assert (a.files, a.files_ruled_out) == (4, 0)


@pytest.mark.parametrize("where, test", [
    ("id >= 10", lambda r: r["id"] is not None and r["id"] >= 10),
    ("day < DATE '2021-01-01'", lambda r: r["day"] is not None and r["day"] < datetime.date(2021, 1, 1)),
    ("id BETWEEN 0 AND 100 AND day >= DATE '2021-06-01'",
     lambda r: r["id"] is not None and r["day"] is not None and r["day"] >= datetime.date(2021, 6, 1)),
    ("id IN (5, 6)", lambda r: r["id"] in (5, 6)),
    ("id > 1000", lambda r: False),
    ("id IS NOT NULL", lambda r: r["id"] is not None),
    ("id IS NULL", lambda r: r["id"] is None),
])
def test_where_that_splits_files_whole(where: str, test) -> None:
    rows = rows_where(test)
    a = answer(f"SELECT count(*), max(id), min(day) FROM t WHERE {where}")
    ids = [r["id"] for r in rows if r["id"] is not None]
    dates = [r["day"] for r in rows if r["day"] is not None]
    assert a.rows == ((len(rows), max(ids, default=None), min(dates, default=None)),)


def test_distinct_values_in_spark_order_with_nulls_placed() -> None:
    values = sorted({r["status"] for r in rows_where(lambda r: r["status"] is not None)})
    assert answer("SELECT DISTINCT status FROM t ORDER BY status").rows == tuple([(None,)] + [(v,) for v in values])
    assert answer("SELECT status FROM t GROUP BY status ORDER BY 1 DESC").rows == \
        tuple([(v,) for v in reversed(values)] + [(None,)])
    assert answer("SELECT DISTINCT status FROM t ORDER BY status DESC NULLS FIRST LIMIT 2").rows == ((None,), ("é",))
    assert set(answer("SELECT DISTINCT status FROM t WHERE id < 10").rows) == {("F",), ("O",)}


@pytest.mark.parametrize("sql, why", [
    ("SELECT count(*) FROM t WHERE id > 2", "only in part"),
    ("SELECT count(DISTINCT id) FROM t", "not a column"),
    ("SELECT count(*) FROM t GROUP BY status", "not constant"),
    ("SELECT status, count(*) FROM t GROUP BY status", "not constant"),
    ("SELECT id, count(*) FROM t", "aggregates beside"),
    ("SELECT id, count(*) FROM t GROUP BY status", "not a GROUP BY key"),
    ("SELECT status, count(*) FROM t GROUP BY ROLLUP (status)", "ROLLUP"),
    ("SELECT DISTINCT status, count(*) FROM t", "DISTINCT with aggregates"),
    ("SELECT count(*) FROM t ORDER BY 1", "ORDER BY with aggregates"),
    ("SELECT DISTINCT status FROM t ORDER BY id", "not an output column"),
    ("SELECT count(*) FROM t a JOIN t b ON a.id = b.id", "joins"),
    ("SELECT count(*) FROM (SELECT * FROM t) x", "one table"),
    ("SELECT count(*) FROM t WHERE id IN (SELECT id FROM t)", "subquery"),
    ("SELECT id FROM t", "every row"),
    ("SELECT DISTINCT id FROM t", "string column"),
    ("SELECT sum(id) FROM t", "is not COUNT"),
    ("SELECT count(*) FROM t WHERE id + 1 > 5", "may raise"),
    ("SELECT count(*) FROM t HAVING count(*) > 1", "having"),
    ("SELECT count(*) FROM other", "no statistics"),
    ("INSERT INTO t SELECT * FROM t", "not one SELECT"),
    ("SELECT max(id) FROM t LIMIT 1 OFFSET 1", "offset"),
    ("SELECT count(*) FROM t TABLESAMPLE (10 PERCENT)", "sample"),
    ("SELECT /*+ REPARTITION(2) */ count(*) FROM t", "hint"),
    ("WITH c AS (SELECT * FROM t) SELECT count(*) FROM c", "with_"),
])
def test_not_answered(sql: str, why: str) -> None:
    attempt = stats_answer(sql, CTX)
    assert attempt.answer is None and why in (attempt.why_not or ""), attempt.why_not


@pytest.mark.parametrize("change, why", [
    ({"session": SessionSettings(time_zone="UTC", unmodelled=("spark.sql.x=1",))}, "does not model"),
    ({"shadowed": frozenset({"t"})}, "temporary view"),
    ({"unusable": {"db.t": "the catalog reads it elsewhere"}}, "elsewhere"),
])
def test_context_refuses(change: dict, why: str) -> None:
    attempt = stats_answer("SELECT count(*) FROM t", dataclasses.replace(CTX, **change))
    assert attempt.answer is None and why in (attempt.why_not or "")


def test_statistics_that_are_not_exact_refuse() -> None:
    uncovered = dataclasses.replace(T, unknown_files=1, unknown_bytes=10)
    assert "no fresh statistics" in stats_answer("SELECT count(*) FROM t", dataclasses.replace(
        CTX, stats=Source(uncovered))).why_not
    footer = dataclasses.replace(T, from_footer=np.array([False, True, False, False]))
    assert "footers" in stats_answer("SELECT count(*) FROM t", dataclasses.replace(CTX, stats=Source(footer))).why_not
    col = T.columns["status"]  # string bounds without value lists: no answer (bounds may be truncated)
    unlisted = dataclasses.replace(T, columns={**T.columns, "status": dataclasses.replace(
        col, values=dataclasses.replace(col.values, present=np.array([True, False, True, True])))})
    assert "value list" in stats_answer("SELECT max(status) FROM t", dataclasses.replace(
        CTX, stats=Source(unlisted))).why_not
    col = T.columns["id"]
    unknown_nulls = dataclasses.replace(T, columns={**T.columns, "id": dataclasses.replace(
        col, null_count=np.array([0, -1, 2, 0]))})
    assert "null counts unknown" in stats_answer("SELECT count(id) FROM t", dataclasses.replace(
        CTX, stats=Source(unknown_nulls))).why_not
    no_list = dataclasses.replace(T, columns={**T.columns, "status": dataclasses.replace(
        T.columns["status"], values=None)})
    assert "value list" in stats_answer("SELECT DISTINCT status FROM t", dataclasses.replace(
        CTX, stats=Source(no_list))).why_not


def test_empty_answers() -> None:
    assert answer("SELECT count(*), min(id), count(status) FROM t WHERE id > 1000").rows == ((0, None, 0),)
    assert answer("SELECT DISTINCT status FROM t WHERE id > 1000").rows == ()
    assert answer("SELECT count(*) FROM t LIMIT 0").rows == ()


def test_values_keep_spark_types() -> None:
    dec, ts = Kind("decimal", scale=2, precision=7), Kind("timestamp")
    files = [{"d": [150, -5], "ts": [0, 1_500_000]}, {"d": [0], "ts": [86_400_000_000 * 365]}]
    stats = table("db.v", files, {"d": dec, "ts": ts})
    source = Source(dataclasses.replace(stats, columns={}))  # its schema: the types below
    source.tables["db.v"] = stats
    source._schemas = {"db.v": {"d": "decimal(7,2)", "ts": "timestamp"}}
    ctx = RewriteContext(source, database="db", session=SessionSettings(time_zone="America/Los_Angeles"))
    a = answer("SELECT min(d), max(d), min(ts), max(ts) FROM v", ctx)
    assert a.types == ("decimal(7,2)", "decimal(7,2)", "timestamp", "timestamp")
    lo_d, hi_d, lo_t, hi_t = a.rows[0]
    assert (_shown("decimal", lo_d), _shown("decimal", hi_d)) == ("-0.05", "1.50")
    assert _shown("timestamp", lo_t) == "1969-12-31 16:00:00"
    assert _shown("timestamp", hi_t) == "1970-12-31 16:00:00"
    unknown_zone = dataclasses.replace(ctx, session=SessionSettings(time_zone=None))
    assert "time zone" in stats_answer("SELECT max(ts) FROM v", unknown_zone).why_not
    assert stats_answer("SELECT max(d) FROM v", unknown_zone).answer is not None


def test_timestamp_strings_as_spark_shows_them() -> None:
    zone = datetime.timezone.utc
    assert _shown("timestamp", datetime.datetime(999, 1, 2, 3, 4, 5, 500000, tzinfo=zone)) == "0999-01-02 03:04:05.5"
    assert _shown("timestamp", datetime.datetime(2024, 1, 2, 3, 4, 5, 120, tzinfo=zone)) == "2024-01-02 03:04:05.00012"
    assert _shown("date", datetime.date(5, 1, 1)) == "0005-01-01"
    assert _shown("decimal", decimal.Decimal("1E+3")) == "1000"


@pytest.mark.parametrize("text", ["SELECT 1;", "SELECT 1 -- a comment", "SELECT 1 ;; ",
                                  "WITH x AS (SELECT 1 a) SELECT a FROM x"])
def test_analysis_statement_wraps_any_query_text(text: str) -> None:
    wrapped = analysis_statement(text)
    assert sqlglot.parse_one(wrapped, read="spark").args["limit"].expression.this == "0"


def test_must_match_never_claims_a_row_that_fails() -> None:
    """On random files and random one-column clauses, a file the evaluator says must match has every row
    TRUE (the oracle evaluates the clause in Python with SQL's three-valued logic)."""
    rng = random.Random(7)
    claims = 0
    for _ in range(200):
        files = [{"x": [rng.choice([None, *range(-5, 6)]) for _ in range(rng.randint(0, 4))]} for _ in range(5)]
        stats = table("db.r", files, {"x": INT})
        translator = translator_for(stats, "r", SessionSettings())
        a, b = sorted(rng.sample(range(-6, 7), 2))
        op = rng.choice(["<", "<=", ">", ">=", "=", "<>"])
        text, oracle = rng.choice([
            (f"r.x {op} {a}", lambda v: None if v is None else eval(f"v {'!=' if op == '<>' else '==' if op == '=' else op} a",
                                                                    {"v": v, "a": a})),
            (f"r.x BETWEEN {a} AND {b}", lambda v: None if v is None else a <= v <= b),
            (f"NOT r.x BETWEEN {a} AND {b}", lambda v: None if v is None else not a <= v <= b),
            (f"r.x IN ({a}, {b})", lambda v: None if v is None else v in (a, b)),
            (f"r.x IS NULL OR r.x > {a}", lambda v: True if v is None else v > a),
            ("r.x IS NULL", lambda v: v is None),
            ("NOT (r.x IS NULL)", lambda v: v is not None),
            ("r.x IS NOT NULL", lambda v: v is not None),
        ])
        node = sqlglot.parse_one(f"SELECT * FROM r WHERE {text}", read="spark").args["where"].this
        mask = must_match(node, translator, stats)
        for f, claimed in zip(files, mask):
            if claimed:
                claims += 1
                assert all(oracle(v) is True for v in f["x"]), (text, f["x"])
    assert claims > 100


# -- what an adversarial review of answers found (each was a wrong answer; the pruning ones wrong rewrites too) --

@pytest.mark.parametrize("literal", [
    "CAST('2020-06-01Z' AS TIMESTAMP)",  # Spark takes a zone only after the seconds
    "CAST('2020-06-01 00:00+05:00' AS TIMESTAMP)",
    "CAST('2020-06-01 00:00:00 utc' AS TIMESTAMP)",  # zone names are case-sensitive
    "CAST('2020-06-01 00:00:00+530' AS TIMESTAMP)",  # java.time.ZoneOffset refuses these
    "CAST('2020-06-01 00:00:00+05:60' AS TIMESTAMP)",
    "CAST('2020-06-01 00:00:00+19:00' AS TIMESTAMP)",
    "CAST('２０２０-06-01' AS DATE)",  # fullwidth digits: Python's \d, not Spark's
    "CAST('\u30002020-06-01' AS DATE)",  # an ideographic space: Python's \s, not Spark's trim
    "CAST('１２' AS INT)",
    "CAST('2020-01-01 03:00:00+05:00' AS TIMESTAMP_NTZ)",  # Spark drops the zone: another instant
])
def test_literals_spark_reads_otherwise_are_no_constants(literal: str) -> None:
    from rewriter.literals import is_constant

    assert not is_constant(sqlglot.parse_one(literal, read="spark"))


@pytest.mark.parametrize("literal", [
    "CAST('2020-06-01' AS DATE)", "CAST(' 2020-06-01 ' AS DATE)", "CAST('2020-06-01T10:00' AS TIMESTAMP)",
    "CAST('2020-06-01 10:00:00+05:00' AS TIMESTAMP)", "CAST('2020-06-01 10:00:00.5 UTC' AS TIMESTAMP)",
    "CAST('2020-06-01 10:00:00Z' AS TIMESTAMP)", "CAST(' 12 ' AS INT)",
])
def test_literals_spark_reads_alike_stay_constants(literal: str) -> None:
    from rewriter.literals import fold

    assert fold(sqlglot.parse_one(literal, read="spark")) is not None


@pytest.mark.parametrize("where", ["ts < TRY_CAST('2030-01-01 00:00:00' AS TIMESTAMP)", "f > 16777219",
                                   "f >= 16777217", "f = 16777216"])
def test_try_cast_and_float_columns_are_never_taken_whole(where: str) -> None:
    ts = table("db.w", [{"ts": [10, 20], "f": [16777220, 16777220]}, {"ts": [30], "f": [16777216]}],
               {"ts": Kind("timestamp"), "f": Kind("float", bits=32)})
    source = Source(dataclasses.replace(ts, columns={}))
    source.tables["db.w"], source._schemas = ts, {"db.w": {"ts": "timestamp", "f": "float"}}
    ctx = RewriteContext(source, database="db", session=SessionSettings(time_zone="UTC", ansi=False))
    attempt = stats_answer(f"SELECT count(*) FROM w WHERE {where}", ctx)
    assert attempt.answer is None, where


def test_float_literals_a_float_column_cannot_hold_are_not_translated() -> None:
    from rewriter.domain import literal_interval
    from rewriter.errors import Untranslatable

    with pytest.raises(Untranslatable):
        literal_interval(16777217, Kind("float", bits=32), "UTC")
    assert literal_interval(16777216, Kind("float", bits=32), "UTC") == (16777216.0, 16777216.0)
    assert literal_interval(16777217, Kind("float"), "UTC") == (16777217.0, 16777217.0)  # DOUBLE holds it


def test_session_settings_path_is_not_modelled() -> None:
    from rewriter.session import session_settings

    assert not session_settings({"PATH": "other, default"}).prunable


class Listing(Source):
    """A source that records the tables whose folder it was asked to list (``fresh_listing``)."""

    def __init__(self, *tables: TableStats) -> None:
        super().__init__(*tables)
        self.listed: list[str] = []

    def table_stats(self, name: str, fresh_listing: bool = False) -> TableStats | None:
        if fresh_listing:
            self.listed.append(name)
        return super().table_stats(name, fresh_listing)


@pytest.mark.parametrize("sql", ["SELECT * FROM t WHERE id > 2", "SELECT id, day FROM t", "SELECT sum(id) FROM t",
                                 "SELECT status, count(*) FROM t GROUP BY status"])
def test_statements_of_other_shapes_never_list_the_table(sql: str) -> None:
    """Every single-table SELECT through the proxy is tried: the folder's listing (``fresh_listing``, remote
    storage's slowest call) is taken only for a statement whose outputs could be answered."""
    source = Listing(T)
    assert stats_answer(sql, dataclasses.replace(CTX, stats=source)).answer is None
    assert source.listed == []


def test_a_statement_that_could_be_answered_lists_the_table() -> None:
    source = Listing(T)
    assert stats_answer("SELECT count(*) FROM t", dataclasses.replace(CTX, stats=source)).answer is not None
    assert source.listed == ["db.t"]


# A table partitioned by region and year (one value of each per file, or NULL: __HIVE_DEFAULT_PARTITION__), whose
# other columns vary within files.
PART_FILES = [
    {"region": ["EU"] * 3, "year": [2020] * 3, "id": [1, 2, 3], "day": days("2020-01-01", "2020-01-05", "2020-01-09")},
    {"region": ["EU"] * 2, "year": [2021] * 2, "id": [7, None], "day": days("2021-03-01", "2021-03-02")},
    {"region": ["US"] * 2, "year": [2020] * 2, "id": [20, 21], "day": [None, None]},
    {"region": [None] * 2, "year": [2021] * 2, "id": [30, 31], "day": days("2021-01-01", "2021-01-02")},
    {"region": ["EU"], "year": [2020], "id": [4], "day": days("2020-02-01")},
    {"region": [], "year": [], "id": [], "day": []},  # an empty file in a folder of its own
]
PART_FOLDERS = ["region=EU/year=2020", "region=EU/year=2021", "region=US/year=2020",
                "region=__HIVE_DEFAULT_PARTITION__/year=2021", "region=EU/year=2020", "region=XX/year=1999"]
P = dataclasses.replace(
    table("db.p", PART_FILES, {"region": STR, "year": INT, "id": INT, "day": DATE},
          paths=[f"file:/wh/p/{f}/part-{i}.parquet" for i, f in enumerate(PART_FOLDERS)]),
    partition_columns=("region", "year"), location="file:/wh/p")
PCTX = RewriteContext(Source(P), database="db", session=SessionSettings(time_zone="UTC"))


def part_rows(test=lambda r: True) -> list[dict]:
    return [{c: f[c][i] for c in f} for f in PART_FILES for i in range(len(f["id"])) if test({c: f[c][i] for c in f})]


def spark_sorted(rows: list[tuple], index: int, descending: bool = False) -> list[tuple]:
    """Spark's order on one key: NULL first ascending, last descending."""
    present = sorted((r for r in rows if r[index] is not None), key=lambda r: r[index], reverse=descending)
    absent = [r for r in rows if r[index] is None]
    return present + absent if descending else absent + present


def test_groups_of_partition_columns_equal_the_rows() -> None:
    rows = part_rows()
    expected = {}
    for r in rows:
        key = (r["region"], r["year"])
        ids = [x["id"] for x in rows if (x["region"], x["year"]) == key and x["id"] is not None]
        dates = [x["day"] for x in rows if (x["region"], x["year"]) == key and x["day"] is not None]
        expected[key] = key + (sum((x["region"], x["year"]) == key for x in rows), min(ids, default=None),
                               max(dates, default=None), len(ids))
    a = answer("SELECT region, year, count(*), min(id), max(day), count(id) FROM p GROUP BY region, year", PCTX)
    assert sorted(a.rows, key=repr) == sorted(expected.values(), key=repr)
    assert a.types == ("string", "bigint", "bigint", "bigint", "date", "bigint")
    # Every folder holding a counted row, and not the empty file's, whose partition need not be listed.
    assert a.folders == frozenset(PART_FOLDERS[:4])


@pytest.mark.parametrize("sql, index, descending", [
    ("SELECT region, count(*) AS n FROM p GROUP BY region ORDER BY region", 0, False),
    ("SELECT region, count(*) AS n FROM p GROUP BY region ORDER BY 1 DESC", 0, True),
    ("SELECT region, count(*) AS n FROM p GROUP BY region ORDER BY n DESC", 1, True),
    ("SELECT region, count(*) AS n FROM p GROUP BY region ORDER BY count(*)", 1, False),
    ("SELECT DISTINCT region FROM p ORDER BY region DESC", 0, True),
])
def test_groups_in_spark_order(sql: str, index: int, descending: bool) -> None:
    counts: dict = {}
    for r in part_rows():
        counts[r["region"]] = counts.get(r["region"], 0) + 1
    rows = [(k, v) for k, v in counts.items()] if "count" in sql else [(k,) for k in counts]
    assert list(answer(sql, PCTX).rows) == spark_sorted(rows, index, descending)


def test_groups_under_where_and_limit() -> None:
    a = answer("SELECT year, count(*) FROM p WHERE region = 'EU' GROUP BY year ORDER BY year DESC LIMIT 1", PCTX)
    assert a.rows == ((2021, 2),)
    assert a.files_ruled_out == 3  # US, NULL, and the empty file's XX
    assert a.folders == frozenset({"region=EU/year=2020", "region=EU/year=2021"})
    assert answer("SELECT year, count(*) FROM p WHERE year > 3000 GROUP BY year", PCTX).rows == ()
    assert answer("SELECT count(*) FROM p WHERE region IS NULL", PCTX).rows == ((2,),)
    assert answer("SELECT DISTINCT year, region FROM p WHERE year = 2020 ORDER BY 2", PCTX).rows == \
        ((2020, "EU"), (2020, "US"))


@pytest.mark.parametrize("sql", ["SELECT id, count(*) FROM p GROUP BY id", "SELECT DISTINCT year, id FROM p",
                                 "SELECT day, count(*) FROM p GROUP BY day"])
def test_groups_of_columns_not_constant_in_a_file_refuse(sql: str) -> None:
    why = stats_answer(sql, PCTX).why_not or ""
    assert "not constant" in why, why


def test_a_group_of_values_and_nulls_in_one_file_refuses() -> None:
    """A file with values and NULLs of the key is two groups: no answer."""
    mixed = dataclasses.replace(P, columns={**P.columns, "year": dataclasses.replace(
        P.columns["year"], null_count=np.array([1, 0, 0, 0, 0, 0]))})
    assert "values and NULLs" in stats_answer("SELECT year, count(*) FROM p GROUP BY year", dataclasses.replace(
        PCTX, stats=Source(mixed))).why_not


def test_unpartitioned_answers_name_no_folders() -> None:
    assert answer("SELECT count(*) FROM t").folders is None


def test_timestamp_groups_are_instants_across_a_daylight_saving_change() -> None:
    """New York's clocks go back at 06:00Z on 2021-11-07: 05:30Z and 06:30Z both read 01:30, and 06:15Z reads 01:15
    though it comes later. Spark groups and orders by instant (a review found both merged, and ordered by the
    wall clock)."""
    ts_kind = Kind("timestamp")

    def micros(text: str) -> int:
        return int((datetime.datetime.fromisoformat(text) - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc))
                   .total_seconds() * 1_000_000)

    def context(*instants: str) -> RewriteContext:
        files = [{"ts": [micros(x)] * (i + 2), "id": list(range(i + 2))} for i, x in enumerate(instants)]
        built = table("db.e", files, {"ts": INT, "id": INT})
        source = Source(built)
        source.tables["db.e"] = dataclasses.replace(built, columns={
            **built.columns, "ts": dataclasses.replace(built.columns["ts"], kind=ts_kind)})
        source._schemas = {"db.e": {"ts": "timestamp", "id": "bigint"}}
        return RewriteContext(source, database="db", session=SessionSettings(time_zone="America/New_York"))

    merged = answer("SELECT ts, count(*) FROM e GROUP BY ts ORDER BY ts",
                    context("2021-11-07T05:30:00+00:00", "2021-11-07T06:30:00+00:00"))
    assert [(r[0].utcoffset(), r[1]) for r in merged.rows] == [(datetime.timedelta(hours=-4), 2),
                                                               (datetime.timedelta(hours=-5), 3)]
    later = answer("SELECT DISTINCT ts FROM e ORDER BY ts DESC LIMIT 1",
                   context("2021-11-07T05:30:00+00:00", "2021-11-07T06:15:00+00:00"))
    assert later.rows[0][0].astimezone(datetime.timezone.utc).isoformat() == "2021-11-07T06:15:00+00:00"


def test_partition_folders_are_named_as_on_storage() -> None:
    """Spark's paths are URIs; SHOW PARTITIONS names a folder as it is on storage."""
    files = [{"region": ["New York"], "id": [1]}, {"region": ["a%b"], "id": [2]}]
    spaced = dataclasses.replace(
        table("db.s", files, {"region": STR, "id": INT},
              paths=["file:/wh/s/region=New%20York/part-0.parquet", "file:/wh/s/region=a%2525b/part-1.parquet"]),
        partition_columns=("region",), location="file:/wh/s")
    a = answer("SELECT count(*) FROM s", RewriteContext(Source(spaced), database="db",
                                                        session=SessionSettings(time_zone="UTC")))
    assert a.folders == frozenset({"region=New York", "region=a%25b"})
