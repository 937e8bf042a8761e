"""The predicate property test on Spark (ARCHITECTURE.md §7, issue 13).

A table of every type and edge (NULL, NaN, ±infinity, integer extremes of every width, decimals of three
scales, dates, timestamps around DST changes, timestamp_ntz, Unicode and trailing spaces) in small Parquet
files, statistics by the real collector (range-sets of 8 and of 2, value lists of 16 and of 2), and random
predicates over everything the rewriter understands, under ANSI on and off in UTC and in Los Angeles (there
without Parquet pushdown, so that Spark evaluates predicates on every row it reads): every file the rewriter
skips must hold no matching row and raise no error, and the rewritten query must answer (or fail) as the
original does. ``bench/fuzz_predicates`` holds the machinery; this runs one fixed seed, plus the failures it
found as permanent cases over hand-written files, and ``python -m bench fuzz-predicates --seed N --count M``
runs as many as wanted.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from bench.fuzz_predicates.check import SETTINGS, Checker, Outcome, Setting, path_in, quiet
from bench.fuzz_predicates.predicates import Expr, case, column, generate, leaf, shrinks, written
from bench.fuzz_predicates.shrink import reproducer, shrink
from bench.fuzz_predicates.tables import DATABASE, build, build_layout, hand_layout, lay_out
from bench.fuzz_predicates.values import BY_NAME
from tests.conftest import Stack

SEED = 13
COUNT = 150
# At least this share of the predicates must make some variant of the rewriter skip a file, or the
# property holds vacuously.
MIN_SHARE = 0.2
SHRINK_BUDGET = 40
_SHRUNK: list[Setting] = []


# -- the generator, without Spark --------------------------------------------------------------------------

def test_a_case_replays_from_its_seed_and_index() -> None:
    assert [c.sql for c in generate(SEED, 20)] == [case(SEED, i).sql for i in range(20)]
    assert generate(SEED, 5, start=7)[0].sql == case(SEED, 7).sql
    assert len({c.sql for c in generate(SEED, 50)}) > 45


@pytest.mark.parametrize("index", range(300), ids=lambda i: f"{SEED}-{i}")
def test_sqlglot_reads_a_generated_predicate_as_written(index: int) -> None:
    """What the rewriter starts from: sqlglot (Spark's dialect) reads the predicate as the WHERE clause of a
    SELECT, over exactly the columns the generator wrote (none taken for a keyword or a literal), and writes it
    back as text it reads the same way again. Whether Spark reads it is the property test below (the first
    ``COUNT`` cases of the same seed)."""
    c = case(SEED, index)
    tree = sqlglot.parse_one(f"SELECT * FROM t WHERE {c.sql}", read="spark")
    assert isinstance(tree, exp.Select) and tree.args.get("where") is not None, c.sql
    assert {col.name for col in tree.args["where"].find_all(exp.Column)} == set(c.predicate.columns()), c.sql
    written = tree.sql(dialect="spark")
    assert sqlglot.parse_one(written, read="spark").sql(dialect="spark") == written, c.sql


def test_shrinking_proposes_sub_predicates_peeled_functions_and_plainer_literals() -> None:
    i32, s = column(BY_NAME["i32"]), column(BY_NAME["s"])
    term = Expr("({0} + {1})", (i32, leaf("1", "int")), family="int")
    cmp = Expr("{0} > {1}", (term, leaf("CAST(5 AS BIGINT)", "int", simpler=(leaf("5", "int"),))))
    pred = Expr("({0} AND {1})", (cmp, Expr("{0} IS NULL", (s,))))
    assert pred.sql() == "((i32 + 1) > CAST(5 AS BIGINT) AND s IS NULL)"
    proposed = [e.sql() for e in shrinks(pred)]
    for smaller in ("(i32 + 1) > CAST(5 AS BIGINT)", "s IS NULL", "(i32 > CAST(5 AS BIGINT) AND s IS NULL)",
                    "((i32 + 1) > 5 AND s IS NULL)"):
        assert smaller in proposed
    assert pred.columns() == ["i32", "s"]


def test_the_layout_has_every_kind_of_file() -> None:
    kinds = [kind for kind, _ in lay_out(0)]
    assert {"empty", "nulls", "edges", "constant-min", "constant-max", "constant", "band"} <= set(kinds)
    assert lay_out(0) == lay_out(0)


def test_file_paths_are_quoted_by_sqlglot() -> None:
    assert path_in(["file:/x' OR '1'='1.parquet"]) == "_metadata.file_path IN ('file:/x\\' OR \\'1\\'=\\'1.parquet')"


# -- the property, on Spark ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def checker(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Checker:
    table = build(stack.spark, Path(tmp_path_factory.mktemp("fuzz-predicates")))
    return Checker(stack.spark, table)


@pytest.fixture(scope="module")
def results(checker: Checker) -> Callable[[Setting], list[Outcome]]:
    """The fixed seed's outcomes under a setting, computed once per setting."""
    cache: dict[Setting, list[Outcome]] = {}

    def get(setting: Setting) -> list[Outcome]:
        if setting not in cache:
            with quiet(checker.spark):
                cache[setting] = checker.check(generate(SEED, COUNT), setting)
        return cache[setting]

    return get


@pytest.mark.differential
@pytest.mark.spark
@pytest.mark.parametrize("setting", SETTINGS, ids=str)
def test_skipped_files_hold_no_match_and_raise_no_error(checker: Checker, results: Callable[[Setting], list[Outcome]],
                                                        setting: Setting) -> None:
    failures = [f for o in results(setting) for f in o.failures]
    if failures:
        listing = "\n".join(f.brief() for f in failures[:25])
        if _SHRUNK:  # shrinking costs Spark queries: the first failing setting of a run shows one shrunk
            pytest.fail(f"{len(failures)} failures under {setting}:\n{listing}", pytrace=False)
        _SHRUNK.append(setting)
        with quiet(checker.spark):
            first = shrink(checker, failures[0], SHRINK_BUDGET)
            report = reproducer(checker, first, failures[0])
        pytest.fail(f"{len(failures)} failures under {setting}:\n{listing}\n\nthe first, shrunk:\n{report}", pytrace=False)


@pytest.mark.differential
@pytest.mark.spark
@pytest.mark.parametrize("setting", SETTINGS, ids=str)
def test_pruning_is_not_vacuous(results: Callable[[Setting], list[Outcome]], setting: Setting) -> None:
    outcomes = results(setting)
    pruned = sum(o.pruned for o in outcomes)
    raised = sum(o.original_error is not None for o in outcomes)
    share = pruned / len(outcomes)
    print(f"{setting}: {pruned}/{len(outcomes)} predicates skip a file ({share:.0%}), {raised} originals raise")
    assert share >= MIN_SHARE, f"only {pruned}/{len(outcomes)} predicates skipped a file under {setting}"


# Failures the generator found, shrunk and checked by hand on Spark (issue 13), kept as permanent cases over
# a table of three hand-written files (every column not given is NULL), so that they do not depend on the
# generated layout: (setting, predicate). Each failed when it was added; the rewriter must make each pass.
MIN_INT, MIN_BIGINT = -2**31, -2**63
REGRESSION_FILES = [
    {"s": ["abc", "abd"], "s2": ["x", "y"], "dt": [datetime.date(1970, 1, 1)] * 2, "dt2": [datetime.date(1970, 1, 1)] * 2,
     "i8": [127, 126], "i16": [200, 100], "i32": [MIN_INT] * 2, "i64": [MIN_BIGINT] * 2,
     "ntz": [datetime.datetime(2021, 3, 14, 3, 0)] * 2},
    {"s": ["5", "5"], "dt": [datetime.date(1900, 1, 2)] * 2, "i8": [1, 2], "i16": [1, 2],
     "ntz": [datetime.datetime(2021, 3, 14, 5, 0)] * 2},  # i32, i64, ts, ts2: all NULL
    {"s": ["7", "8"], "dt": [datetime.date(2021, 3, 14)] * 2, "i8": [3, 4], "i16": [3, 4], "i32": [1, 2],
     "ntz": [datetime.datetime(2021, 3, 14, 6, 0)] * 2},  # i64: all NULL
]
UTC_ANSI_NO_PUSHDOWN, UTC_NO_ANSI = Setting(True, "UTC", pushdown=False), Setting(False, "UTC")
LA_ANSI = Setting(True, "America/Los_Angeles")
REGRESSIONS = [
    # sqlglot reads `x NOT LIKE p` as Like(negate=True); the translator took it for LIKE.
    (UTC_NO_ANSI, "s NOT LIKE 'a%'"),
    # <=> between two columns was translated as =, but NULL <=> NULL is TRUE: a file where both columns are
    # all NULL matches ...
    (UTC_NO_ANSI, "i32 <=> i64"),
    (UTC_NO_ANSI, "ts2 IS NOT DISTINCT FROM ts"),
    # ... and NOT (a <=> b) is TRUE where exactly one side is NULL, not only where a is.
    (UTC_NO_ANSI, "NOT (i32 <=> i64)"),
    # Under ANSI a STRING column compared with a number is cast, and non-numeric text raises; skipping a
    # file another conjunct rules out changed the error into rows.
    (UTC_ANSI_NO_PUSHDOWN, "(s = 5 AND year(dt) = 1900)"),
    (UTC_ANSI_NO_PUSHDOWN, "(s2 > 1 AND dt2 < DATE'1970-01-01')"),
    # ... also when the number is negative (sqlglot reads -1 as Neg(1), whose type the error model did not know).
    (UTC_ANSI_NO_PUSHDOWN, "(s >= -1 AND year(dt) = 1900)"),
    (UTC_ANSI_NO_PUSHDOWN, "(s >= -0.25D AND year(dt) = 1900)"),
    # ... also when the other side is a constant expression (a date plus an interval: fuzz-predicates seed
    # 16021 case 6) or a function whose type the error model does not know (length: an INT).
    (UTC_ANSI_NO_PUSHDOWN, "(s < DATE'2021-03-13' + INTERVAL 1 DAY AND year(dt) = 1900)"),
    (UTC_ANSI_NO_PUSHDOWN, "(s = length(s2) AND year(dt) = 1900)"),
    # A typed TINYINT/SMALLINT literal keeps the narrow type: i8 + 1Y is TINYINT arithmetic and overflows.
    (UTC_NO_ANSI, "i8 + 1Y < 0"),
    (UTC_ANSI_NO_PUSHDOWN, "i8 + 1Y < 0"),
    (UTC_NO_ANSI, "i16 * 300S < 0"),
    # Unary minus of an INT or BIGINT minimum wraps (ANSI off): -(-2147483648) is -2147483648, not 2^31.
    (UTC_NO_ANSI, "-i32 < 0"),
    (UTC_NO_ANSI, "-i64 < 0"),
    # Without ANSI, Spark types `date IN (string, ...)` as a string comparison (CAST(dt AS STRING) = '1970-01'),
    # unlike `dt = '1970-01'`, which casts the string to a date: NOT IN is TRUE for 1970-01-01.
    (UTC_NO_ANSI, "dt2 NOT IN ('1970-01')"),
    # A zone-less TIMESTAMP literal compared with a TIMESTAMP_NTZ column is turned into the wall-clock time
    # of its instant in the session zone: 02:00 does not exist on 2021-03-14 in Los Angeles and becomes 03:00.
    (LA_ANSI, "ntz = TIMESTAMP'2021-03-14 02:00:00'"),
    (LA_ANSI, "ntz IN (TIMESTAMP'2021-03-14 02:00:00')"),
    # Spark's analyzer folds an integral column compared with a number beyond BIGINT (a DECIMAL literal) into
    # the constant TRUE or FALSE, NULLs and all: on Spark, NULL >= -10^28 is TRUE here.
    (UTC_NO_ANSI, "i64 >= -10000000000000000000000000000"),
    (UTC_ANSI_NO_PUSHDOWN, "i32 <= 9223372036854775808"),
]


@pytest.fixture(scope="module")
def regression_checker(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Checker:
    table = build_layout(stack.spark, Path(tmp_path_factory.mktemp("fuzz-regressions")),
                         hand_layout(REGRESSION_FILES), f"{DATABASE}_regressions.t")
    return Checker(stack.spark, table)


@pytest.mark.differential
@pytest.mark.spark
@pytest.mark.parametrize(("setting", "predicate"), REGRESSIONS, ids=[f"{s}: {p}" for s, p in REGRESSIONS])
def test_regressions(regression_checker: Checker, setting: Setting, predicate: str) -> None:
    with quiet(regression_checker.spark):
        outcome = regression_checker.check([written(predicate)], setting)[0]
        report = reproducer(regression_checker, outcome.failures[0]) if outcome.failures else ""
    if outcome.failures:
        listing = "\n".join(f.brief() for f in outcome.failures)
        pytest.fail(f"{listing}\n\n{report}", pytrace=False)
