"""A search for wrong conclusions of ``rewriter/implication.py`` against Spark: random conjunctions P and
clauses C over a table of boundary values and NULLs, with literals of every type a user may write against each
column (numbers in strings, out-of-range values, more decimal places than the column has, dates as strings,
typed literals). Where the module says C is TRUE on every row P keeps, Spark must find no row with P TRUE and C
not TRUE; where it says C is TRUE on none, no row with both. ANSI mode on and off. Each claim is what lets a
layout block be skipped (``rewriter/blocks.py``), so a wrong one is a wrong answer."""

from __future__ import annotations

import random

import pytest
import sqlglot

from rewriter.falsify import Translator
from rewriter.implication import always_true, never_true, region
from rewriter.predicate import And
from stats.model import kind_of
from tests.conftest import Stack

pytestmark = pytest.mark.spark

COLUMNS = {"i": "int", "t": "tinyint", "b": "bigint", "d": "decimal(7,2)", "dt": "date", "s": "string", "f": "double",
           "ts": "timestamp", "dd": "decimal(38,2)"}
BIG = "123456789012345678901234567890123456"  # 36 digits: DECIMAL(38,2)'s integer part
ROWS = [
    f"(0, 0, 0, 0.00, DATE '2000-01-01', '', 0.0, TIMESTAMP '2000-01-01 00:00:00', {BIG}.95)",
    f"(1, 1, 1, 0.01, DATE '2000-01-02', 'A', 1.0, TIMESTAMP '2000-01-01 05:00:00', {BIG}.96)",
    "(5, 5, 5, 5.00, DATE '1999-12-31', 'AIR', 5.5, TIMESTAMP '1999-12-31 23:59:59.999999', 5.00)",
    "(-5, -5, -5, -5.00, DATE '1970-01-01', 'a', -1.0, TIMESTAMP '1970-01-01 00:00:00', -5.00)",
    "(23, 23, 3000000000, 23.99, DATE '1995-01-01', 'MAIL', double('NaN'), TIMESTAMP '1995-01-01 12:00:00', 23.99)",
    "(24, 24, -3000000000, 24.00, DATE '1994-12-31', 'SHIP', double('Infinity'), TIMESTAMP '1994-12-31 12:00:00', 24.00)",
    "(2147483647, 127, 9223372036854775807, 99999.99, DATE '9999-12-31', 'Ä', 1e300, "
    f"TIMESTAMP '9999-12-31 23:59:59.999999', {BIG}.99)",
    "(-2147483648, -128, -9223372036854775808, -99999.99, DATE '0001-01-01', 'B', -0.0, "
    f"TIMESTAMP '0001-01-01 00:00:00', -{BIG}.99)",
    "(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    "(10, NULL, 10, 10.50, DATE '2020-02-29', 'AIR ', NULL, TIMESTAMP '2020-02-29 10:00:00', 10.50)",
]
LITERALS = {
    "int": ["0", "1", "5", "-5", "23", "24", "2147483647", "-2147483648", "3000000000", "'5'", "'24'", "'5.5'",
            "5.5", "23.99", "'abc'", "1e1", "-0", "CAST('7' AS INT)", "CAST('x' AS INT)"],
    "date": ["DATE '2000-01-01'", "'2000-01-01'", "DATE '1995-01-01'", "'1994-12-31'", "'2000-1-1'",
             "'2000-01-01 10:00:00'", "'not a date'", "DATE '9999-12-31'", "DATE '0001-01-01'", "'2020-02-29'",
             "CAST('1999-12-31' AS DATE)"],
    "string": ["''", "'A'", "'AIR'", "'AIR '", "'a'", "'B'", "'MAIL'", "'Ä'", "5", "'5'", "'SHIP'"],
    "double": ["0", "1.0", "5.5", "double('NaN')", "-0.0", "1e300", "'NaN'"],
    "timestamp": ["TIMESTAMP '2000-01-01 00:00:00'", "TIMESTAMP '2000-01-01 05:00:00'", "'2000-01-01 00:00:00'",
                  "TIMESTAMP '2000-01-01 00:00:00-05:00'", "TIMESTAMP '1999-12-31 23:59:59.999999'", "DATE '2000-01-01'",
                  "'2000-01-01'", "TIMESTAMP '9999-12-31 23:59:59.999999'", "TIMESTAMP '9999-12-31 16:00:00'", "TIMESTAMP '9999-12-31 18:00:00-08:00'",
                  "TIMESTAMP '9999-12-31 23:00:00'", "TIMESTAMP '2020-01-01 00:00:00'",
                  "TIMESTAMP '0001-01-01 00:00:00'", "'garbage'", "CAST('1995-01-01 12:00:00' AS TIMESTAMP)"],
    "big": [f"{BIG}.95", f"{BIG}.96", f"{BIG}.955", f"-{BIG}.99", "5", "24", "23.99", "9223372036854775807",
            f"CAST({BIG}.96 AS DECIMAL(38,2))", "CAST(123.456 AS DECIMAL(4,2))", "1e1", f"'{BIG}.96'"],
}
KIND_LITERALS = {"int": "int", "tinyint": "int", "bigint": "int", "decimal(7,2)": "int", "date": "date",
                 "string": "string", "double": "double", "timestamp": "timestamp", "decimal(38,2)": "big"}
OPS = ["=", "<>", "<", "<=", ">", ">="]
# Pairs a review found wrong conclusions with, checked in every run beside the random ones.
FIXED = [
    (["ts > TIMESTAMP '2020-01-01 00:00:00'"], "ts > TIMESTAMP '9999-12-31 18:00:00-08:00'"),  # past 9999 in UTC
    (["ts > TIMESTAMP '9999-12-31 18:00:00-08:00'"], "s = 'no such value'"),
    (["i > 200"], "i > CAST(123.456 AS DECIMAL(4,2))"),  # NULL: past the type's precision
    (["i > 200"], "i > TRY_CAST(9.999 AS DECIMAL(3,2))"),
    (["b > 5"], "b <> 0.00000000000000000001"),  # compared as DECIMAL(38,20): overflows to NULL with ANSI off
    ([f"dd > {BIG}.95"], f"dd > {BIG}.96"),  # 38 digits: not rounded to 28
    ([f"dd < {BIG}.96"], f"dd <= {BIG}.95"),
]


def _literal(rng: random.Random, column: str) -> str:
    pool = LITERALS[KIND_LITERALS[COLUMNS[column]]]
    if COLUMNS[column] == "decimal(7,2)":
        pool = pool + ["0.005", "24.001", "23.995", "99999.99", "100000", "'23.99'", "CAST(123.456 AS DECIMAL(4,2))",
                       "CAST(9.999 AS DECIMAL(3,2))", "0.00000000000000000001"]
    if COLUMNS[column] == "bigint":
        pool = pool + ["0.00000000000000000001", "9223372036854775807.5", "CAST(1.5 AS DECIMAL(38,37))"]
    return rng.choice(pool)


def _clause(rng: random.Random, column: str) -> str:
    shape = rng.random()
    if shape < 0.55:
        return f"{column} {rng.choice(OPS)} {_literal(rng, column)}" if rng.random() < 0.8 else \
            f"{_literal(rng, column)} {rng.choice(OPS)} {column}"
    if shape < 0.7:
        return f"{column} {'NOT ' if rng.random() < 0.2 else ''}BETWEEN {_literal(rng, column)} AND {_literal(rng, column)}"
    if shape < 0.85:
        values = ", ".join(_literal(rng, column) for _ in range(rng.randint(1, 4)))
        return f"{column} {'NOT ' if rng.random() < 0.2 else ''}IN ({values})"
    if shape < 0.92:
        return f"NOT ({column} {rng.choice(OPS)} {_literal(rng, column)})"
    if shape < 0.96:
        return f"{column} IS {'NOT ' if rng.random() < 0.5 else ''}NULL"
    return f"({_clause(rng, column)} OR {_clause(rng, column)})"


@pytest.mark.parametrize("ansi, zone", [(True, "UTC"), (False, "America/Los_Angeles")], ids=["ansi", "no-ansi"])
def test_implication_claims_hold_in_spark(stack: Stack, ansi: bool, zone: str) -> None:
    spark = stack.spark
    spark.conf.set("spark.sql.ansi.enabled", str(ansi).lower())
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        columns = ", ".join(COLUMNS)
        spark.sql(f"SELECT * FROM VALUES {', '.join(ROWS)} AS v({columns})").selectExpr(
            *(f"CAST({c} AS {t}) AS {c}" for c, t in COLUMNS.items())).createOrReplaceTempView("implied")
        kinds = {c: kind_of(t) for c, t in COLUMNS.items()}
        translator = Translator(lambda c: c.name.lower(), kinds, zone, None, ansi)
        rng = random.Random(7 if ansi else 8)
        claims: list[tuple[str, str, str]] = []  # (kind of claim, P, C)
        vacuous = 0  # claims about a P no row can satisfy: true of any C, they test little
        for k in range(len(FIXED) + 2000):
            if k < len(FIXED):
                p, c = FIXED[k]
            else:
                column = rng.choice(list(COLUMNS))
                p = [_clause(rng, column) for _ in range(rng.randint(1, 2))]
                if rng.random() < 0.3:
                    p.append(_clause(rng, rng.choice(list(COLUMNS))))
                c = _clause(rng, column if rng.random() < 0.85 else rng.choice(list(COLUMNS)))
            nodes = [sqlglot.parse_one(x, read="spark") for x in p]
            r = region(And(tuple(translator.translate(n) for n in nodes)), kinds)
            cut = sqlglot.parse_one(c, read="spark")
            where = " AND ".join(f"({x})" for x in p)
            if r.empty and k >= len(FIXED):
                vacuous += 1
                if rng.random() < 0.9:
                    continue
            if always_true(r, cut, translator):
                claims.append(("always", where, c))
            if never_true(r, cut, translator):
                claims.append(("never", where, c))
        wrong, errors, checked = _check(spark, claims)
        assert not wrong, "\n".join(f"{kind}: P = {where}  C = {c}" for kind, where, c in wrong[:20])
        always = sum(1 for k, _, _ in checked if k == "always")
        never = sum(1 for k, _, _ in checked if k == "never")
        assert always >= 100 and never >= 150, (always, never, errors, vacuous)  # the search found claims to check
    finally:
        spark.conf.set("spark.sql.ansi.enabled", "true")
        spark.conf.set("spark.sql.session.timeZone", "UTC")


def _violations(kind: str, where: str, c: str) -> str:
    return f"count_if(({where}) AND NOT coalesce(({c}), false))" if kind == "always" else f"count_if(({where}) AND ({c}))"


def _check(spark, claims: list[tuple[str, str, str]]) -> tuple[list, int, list]:  # noqa: ANN001
    """Counts of rows contradicting each claim, 60 claims per query; a claim whose own query raises (ANSI: a
    literal Spark cannot cast or parse) is left out and counted. When a batch raises, the claim the error's SQL
    context points into is that claim (its own query evaluates the same expression on the same rows), and the
    rest is tried again; an error without a context (Spark's parser rejects a literal of 39 digits) leaves out
    the claims Spark cannot parse; otherwise the batch is split in two. One failed query per raising claim,
    where splitting took about a dozen (ANSI: 70 s, now 34)."""
    parser = spark._jsparkSession.sessionState().sqlParser()

    def unparsable(part: str) -> bool:
        try:
            parser.parseExpression(part)
        except Exception:  # noqa: BLE001 - the parser's error is the one the claim's own query would raise
            return True
        return False

    wrong, errors, checked = [], 0, []
    batches = [claims[k:k + 60] for k in range(0, len(claims), 60)]
    while batches:
        batch = batches.pop()
        parts = [_violations(*claim) for claim in batch]
        sql, spans = _select(parts)
        try:
            counts = spark.sql(f"{sql} FROM implied").collect()[0]
        except Exception as e:  # noqa: BLE001 - an analysis or runtime error of one claim's expressions
            if len(batch) == 1:
                errors += 1
                continue
            at = _raised_at(e, sql, spans)
            bad = [at] if at is not None else [i for i, part in enumerate(parts) if unparsable(part)]
            if bad:
                errors += len(bad)
                batches.append([claim for i, claim in enumerate(batch) if i not in bad])
            else:
                batches += [batch[:len(batch) // 2], batch[len(batch) // 2:]]
            continue
        for claim, count in zip(batch, counts):
            checked.append(claim)
            if count:
                wrong.append(claim)
    return wrong, errors, checked


def _select(parts: list[str]) -> tuple[str, list[tuple[int, int]]]:
    """``SELECT`` of ``parts``, and where each part stands in it (start, end)."""
    sql, spans = "SELECT ", []
    for i, part in enumerate(parts):
        sql += ", " if i else ""
        spans.append((len(sql), len(sql) + len(part)))
        sql += part
    return sql, spans


def _raised_at(error: Exception, sql: str, spans: list[tuple[int, int]]) -> int | None:
    """Which part (of ``_select``'s ``sql`` and ``spans``) the error's SQL context lies in: a context whose
    fragment is the text at its place in ``sql``, within one part (a context in another text, such as a
    view's, points nowhere here)."""
    for c in error.getQueryContext() if hasattr(error, "getQueryContext") else []:
        start, stop = c.startIndex(), c.stopIndex()
        if start < 0 or sql[start:stop + 1] != c.fragment():
            continue
        for i, (begin, end) in enumerate(spans):
            if begin <= start and stop < end:
                return i
    return None
