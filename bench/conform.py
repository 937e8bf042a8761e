"""Conformance of the registry of Spark functions with Spark (issue 61; ARCHITECTURE.md §3.6).

For every registered definition (``rewriter/spark/``) the templates below apply it to arguments of each type
it accepts and of types Spark must cast; arguments are drawn per type from the edges (NULL, empty and
whitespace strings, strings that fail casts, non-ASCII digits, integer and decimal limits, NaN, ±inf, -0.0,
dates before 1582 and 1900) and at random. Each case runs on Spark, batched into one SELECT per batch
over one row of typed columns, under ANSI on and off and several session time zones, and is compared with
what the rewriter derives:

- the result type (``rewriter.spark.model.result_kind``) with ``typeof()``, where the model names one;
- whether it may raise (``rewriter.spark.model.can_raise``): Spark raising where the model says it cannot is
  a disagreement (the model saying "may" where Spark does not is only caution, and is counted);
- the value (``rewriter.spark.evaluate``), where the model evaluates it, with Spark's value.

``python -m bench conform --seed N --minutes M`` runs it for a while and writes a report; the test suite
runs a fixed sample (``tests/test_spark_conformance.py``).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime
import decimal
import random
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot import exp

from rewriter.errors import Untranslatable
from rewriter.literals import Timestamp
from rewriter.spark import definitions, evaluate, model
from rewriter.spark.types import spark_name
from stats.model import Kind, kind_of

# Placeholder -> Spark type of the argument.
TYPES = {"i": "int", "b": "bigint", "t": "tinyint", "m": "smallint", "d": "decimal(15,2)", "D": "decimal(38,2)",
         "W": "decimal(38,20)", "f": "double", "s": "string", "day": "date", "ts": "timestamp", "z": "boolean"}
EDGES: dict[str, list[Any]] = {
    "i": [None, 0, 1, -1, 7, 100, 2**31 - 1, -2**31, 46341],
    "b": [None, 0, 1, -1, 3_000_000_000, 2**63 - 1, -2**63, 4_294_967_296],
    "t": [None, 0, 1, -1, 127, -128],
    "m": [None, 0, -1, 32767, -32768],
    "d": [None, decimal.Decimal("0.00"), decimal.Decimal("1.50"), decimal.Decimal("-1.25"),
          decimal.Decimal("9999999999999.99"), decimal.Decimal("-0.01")],
    "D": [None, decimal.Decimal("0.00"), decimal.Decimal("999999999999999999999999999999999999.99"),
          decimal.Decimal("-1.50")],
    "W": [None, decimal.Decimal("0E-20"), decimal.Decimal("1.5"), decimal.Decimal("-999999999999999999.99999999999999999999")],
    "f": [None, 0.0, -0.0, 1.5, -2.5, float("nan"), float("inf"), float("-inf"), 1e308, 9.3e18, -1e19],
    "s": [None, "", " ", "abc", "5", " 5 ", "\uff15", "2020-01-01", "x\\y", "\u00dcn\u00ef", "ab%_", "1e3", "-0",
          "2020-13-01", "BRAND#52", "true"],
    "day": [None, datetime.date(2020, 2, 29), datetime.date(1000, 1, 1), datetime.date(1582, 10, 15),
            datetime.date(1899, 12, 31), datetime.date(1, 1, 1), datetime.date(9999, 12, 31)],
    "ts": [None, datetime.datetime(2020, 3, 8, 2, 30), datetime.datetime(1900, 1, 1), datetime.datetime(2021, 11, 7, 1, 30)],
    "z": [None, True, False],
}
# Templates per definition (by its Spark name): each applies the function to typed placeholders.
TEMPLATES: dict[str, list[str]] = {
    "and": ["{z} AND {z}", "{z} AND {s}"], "or": ["{z} OR {z}", "{z} OR {i}"], "not": ["NOT {z}", "NOT {s}"],
    "=": ["{i} = {i}", "{i} = {s}", "{s} = {s}", "{day} = {s}", "{d} = {i}", "{i} = '5'", "{day} = '2020-02-29'",
          "{b} = {W}", "{D} = {W}"],
    "<>": ["{i} <> {b}", "{s} <> {s}"], "<": ["{i} < {s}", "{d} < {f}"], "<=": ["{day} <= {ts}", "{s} <= {s}"],
    ">": ["{b} > {i}", "{s} > {i}"], ">=": ["{i} >= {d}", "{day} >= {s}"], "<=>": ["{i} <=> {s}", "{i} <=> {i}"],
    "not <=>": ["{i} IS DISTINCT FROM {b}", "{s} IS DISTINCT FROM {i}"],
    "between": ["{i} BETWEEN {i} AND {i}", "{s} BETWEEN {s} AND {s}", "{day} BETWEEN {s} AND '2021-01-01'"],
    "in": ["{i} IN ({i}, {b})", "{s} IN ({s}, 'abc')", "{i} IN ({s})", "{s} IN ({i}, 5)"],
    "is": ["{i} IS NULL", "{s} IS NOT NULL"],
    "like": ["{s} LIKE {s}", "{s} LIKE 'a%'", "{i} LIKE '1%'", r"{s} LIKE 'x\\y'"],
    "ilike": ["{s} ILIKE {s}", "{s} ILIKE 'A%'"],
    "startswith": ["startswith({s}, {s})"], "endswith": ["endswith({s}, {s})"], "contains": ["contains({s}, {s})"],
    "isnull": ["isnull({s})"], "isnotnull": ["isnotnull({d})"],
    "upper": ["upper({s})", "upper({i})"], "lower": ["lower({s})", "lower({day})"], "initcap": ["initcap({s})"],
    "reverse": ["reverse({s})"], "trim": ["trim({s})"], "length": ["length({s})", "length({i})"],
    "concat": ["concat({s}, {s})", "concat({s}, {i}, {day})"], "||": ["{s} || {s}", "{s} || {d}"],
    "concat_ws": ["concat_ws({s}, {s}, {s})", "concat_ws('/', {s}, {s})", "concat_ws('-', {s}, {i})"],
    "substring": ["substring({s}, {i}, {i})", "substring({s}, {i})", "substring({s}, {b}, 2)", "substring({s}, {s})"],
    "left": ["left({s}, {i})", "left({s}, {s})"], "right": ["right({s}, {i})"],
    # (lengths of a TINYINT: a length near 2^31 takes the driver's whole heap, an OutOfMemoryError on Spark)
    "lpad/rpad": ["lpad({s}, 5, 'x')", "rpad({s}, {t}, 'ab')"], "replace": ["replace({s}, 'a', 'b')", "replace({s}, {s}, {s})"],
    "locate": ["locate({s}, {s})", "instr({s}, {s})", "locate({s}, {s}, {i})"],
    "md5": ["md5({s})"], "sha1": ["sha1({s})"], "sha2": ["sha2({s}, 256)", "sha2({s}, {i})"],
    "octet_length": ["octet_length({s})"], "bit_length": ["bit_length({s})"], "ascii": ["ascii({s})"],
    "base64": ["base64({s})"], "hex": ["hex({s})", "hex({i})"], "soundex": ["soundex({s})"],
    "+": ["{i} + {i}", "{t} + {t}", "{b} + {i}", "{d} + {d}", "{D} + {D}", "{d} + 1", "{f} + {i}", "{i} + {s}",
          "{day} + {i}", "{d} + {f}"],
    "-": ["{i} - {i}", "{m} - {m}", "{d} - {b}", "{D} - 1", "{day} - {i}", "{s} - {i}"],
    "*": ["{i} * {i}", "{b} * 2", "{d} * {d}", "{D} * {d}", "{f} * {f}", "{i} * {s}"],
    "/": ["{i} / {i}", "{d} / {d}", "{d} / 3", "{f} / {f}", "{b} / {s}", "{D} / {D}"],
    "div": ["{i} div {i}", "{b} div 2", "{i} div -1", "{d} div {d}"],
    "%": ["{i} % {i}", "{b} % 3", "{d} % {d}", "{f} % {f}"],
    "negative": ["-{i}", "-{d}", "-{f}", "-{t}"], "abs": ["abs({i})", "abs({d})", "abs({f})", "abs({s})"],
    "floor": ["floor({f})", "floor({d})", "floor({i})", "floor({s})"],
    "ceil": ["ceil({f})", "ceil({d})", "ceil({b})"],
    "round": ["round({i}, -1)", "round({f}, 2)", "round({d}, 1)", "round({b})", "round({s})", "round({d}, 2)",
              "round({d}, -1)", "round({D}, 1)", "round({D}, -1)", "round({d})"],
    "sign": ["sign({i})", "sign({d})", "sign({f})"],
    "hash": ["hash({s})", "hash({i}, {day})"], "xxhash64": ["xxhash64({s})"], "crc32": ["crc32({s})"],
    "coalesce": ["coalesce({i}, {b})", "coalesce({s}, {i})", "coalesce({s}, {s})", "coalesce({i}, {d})",
                 "nvl({day}, {ts})", "coalesce({s}, {day})", "ifnull({i}, {f})", "coalesce({b}, {W})"],
    "if": ["if({z}, {i}, {b})", "if({z}, {s}, {i})", "if({i} > 0, {d}, {i})"],
    "nullif": ["nullif({i}, {b})", "nullif({s}, {i})"],
    "greatest": ["greatest({i}, {b})", "greatest({s}, {i})", "greatest({d}, {i})"],
    "least": ["least({day}, {day})", "least({s}, {s})"],
    "cast": ["CAST({s} AS INT)", "CAST({b} AS INT)", "CAST({i} AS BIGINT)", "CAST({s} AS DATE)", "CAST({d} AS DECIMAL(5, 2))",
             "CAST({f} AS BIGINT)", "CAST({i} AS STRING)", "CAST({day} AS TIMESTAMP)", "CAST({d} AS DECIMAL(20, 4))",
             "CAST({s} AS DECIMAL(10, 2))", "CAST({i} AS DOUBLE)"],
    "try_cast": ["TRY_CAST({s} AS INT)", "TRY_CAST({s} AS DATE)", "TRY_CAST({b} AS INT)"],
    "year": ["year({day})", "year({s})"], "month": ["month({day})", "month({ts})"], "quarter": ["quarter({day})"],
    "day": ["day({day})"], "dayofmonth": ["dayofmonth({day})"], "dayofweek": ["dayofweek({day})"],
    "dayofyear": ["dayofyear({day})"], "weekofyear": ["weekofyear({day})"], "hour": ["hour({ts})", "hour({s})"],
    "minute": ["minute({ts})"], "second": ["second({ts})"],
    "extract": ["extract(YEAR FROM {day})", "extract(MONTH FROM {ts})"],
    "to_date": ["to_date({s})", "to_date({ts})", "to_date({day})"],
    "trunc": ["trunc({day}, 'MM')", "trunc({day}, 'YEAR')"], "date_trunc": ["date_trunc('MONTH', {day})"],
    "last_day": ["last_day({day})"], "datediff": ["datediff({day}, {day})", "datediff({s}, {day})"],
    "months_between": ["months_between({day}, {day})"], "add_months": ["add_months({day}, {i})"],
    "date_add": ["date_add({day}, {i})", "date_sub({day}, {i})", "date_add({s}, 1)"],
    # aggregates and window functions over the one row
    "count": ["count({s})", "count(*)"], "min": ["min({d})"], "max": ["max({s})"], "sum": ["sum({i})", "sum({d})",
                                                                                     "sum({f})", "sum({s})"],
    "avg": ["avg({i})", "avg({d})", "avg({D})"], "stddev": ["stddev({f})"], "stddev_samp": ["stddev_samp({d})"],
    "stddev_pop": ["stddev_pop({i})"], "variance": ["variance({i})"], "var_pop": ["var_pop({d})"],
    "corr": ["corr({f}, {i})"], "approx_count_distinct": ["approx_count_distinct({s})"],
    "count_if": ["count_if({z})"], "first": ["first({i})"], "last": ["last({s})"],
    "row_number": ["row_number() OVER (ORDER BY {i})"], "rank": ["rank() OVER (ORDER BY {s})"],
    "dense_rank": ["dense_rank() OVER (ORDER BY {d})"],
    "lag": ["lag({i}) OVER (ORDER BY {i})", "lag({i}, 1, {s}) OVER (ORDER BY {i})", "lag({i}, 1, {b}) OVER (ORDER BY {i})",
            "lag({b}, 1, {i}) OVER (ORDER BY {i})"],
    "lead": ["lead({s}, 1, 'x') OVER (ORDER BY {i})"],
    "grouping": [],  # only in a GROUP BY with grouping sets: its type is checked by test_spark_registry
}


@dataclasses.dataclass
class Case:
    function: str
    template: str
    sql: str  # the expression over columns c0, c1, ...
    types: list[str]
    values: list[Any]


@dataclasses.dataclass
class Outcome:
    case: Case
    setting: str
    spark_type: str | None
    spark_value: Any
    spark_error: str | None
    dipper_type: str | None
    dipper_raises: bool
    dipper_value: Any  # _NOT_EVALUATED where the model does not evaluate

    def disagreements(self) -> list[str]:
        out = []
        if self.spark_error is not None and not self.spark_error.startswith("analysis:") and not self.dipper_raises:
            out.append(f"Spark raises {self.spark_error}; the model says it cannot")
        if self.spark_type is not None and self.dipper_type is not None and self.spark_type != self.dipper_type:
            out.append(f"type: Spark {self.spark_type}, model {self.dipper_type}")
        if self.spark_error is None and self.dipper_value is not _NOT_EVALUATED and \
                not _same_value(self.spark_value, self.dipper_value):
            out.append(f"value: Spark {self.spark_value!r}, model {self.dipper_value!r}")
        return out


_NOT_EVALUATED = object()
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def _same_value(spark: str | None, ours: Any) -> bool:
    """Spark's value as it prints it, against the model's Python value."""
    if ours is None or spark is None:
        return ours is None and spark is None
    if isinstance(ours, bool):
        return spark == ("true" if ours else "false")
    if isinstance(ours, decimal.Decimal):
        return spark == format(ours, "f")
    if isinstance(ours, float):
        return ours != ours and spark == "NaN" or spark not in ("NaN",) and float(spark) == ours
    if isinstance(ours, Timestamp) and ours.offset is None:
        return spark == ours.local.isoformat(sep=" ")
    if isinstance(ours, datetime.date):
        return spark == ours.isoformat()
    return spark == str(ours)


def missing_templates() -> list[str]:
    """Registered definitions without conformance templates (each must have some)."""
    names = {f.spark for f in definitions()}
    return sorted(n for n in names if n not in TEMPLATES)


def draw_cases(seed: int, per_template: int) -> Iterator[Case]:
    """``per_template`` cases of every template, arguments drawn from the edges and at random."""
    rng = random.Random(seed)
    for name in sorted(TEMPLATES):
        for template in TEMPLATES[name]:
            for _ in range(per_template):
                types: list[str] = []

                def column(m: re.Match[str]) -> str:
                    types.append(m.group(1))
                    return f"c{len(types) - 1}"
                sql = _PLACEHOLDER.sub(column, template)
                values = [_draw(rng, t) for t in types]
                yield Case(name, template, sql, [TYPES[t] for t in types], values)


def _draw(rng: random.Random, placeholder: str) -> Any:
    if rng.random() < 0.7:
        return rng.choice(EDGES[placeholder])
    if placeholder in ("i", "b", "t", "m"):
        bits = {"i": 32, "b": 64, "t": 8, "m": 16}[placeholder]
        return rng.randint(-2**(bits - 1), 2**(bits - 1) - 1) if rng.random() < 0.3 else rng.randint(-50, 50)
    if placeholder in ("d", "D"):
        return decimal.Decimal(rng.randint(-10**6, 10**6)).scaleb(-2)
    if placeholder == "f":
        return rng.choice([rng.uniform(-1e6, 1e6), float(rng.randint(-100, 100))])
    if placeholder == "s":
        alphabet = "ab5 -%_\\#\u00e9\uff15Z0"
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 5)))
    if placeholder == "day":
        return datetime.date(2020, 1, 1) + datetime.timedelta(days=rng.randint(-737_000, 2_900_000))
    if placeholder == "ts":
        return datetime.datetime(2020, 1, 1) + datetime.timedelta(seconds=rng.randint(-10**9, 10**9))
    return rng.choice([True, False, None])


def _literal(value: Any, spark_type: str) -> str:
    if value is None:
        return f"CAST(NULL AS {spark_type})"
    if isinstance(value, float):
        text = "NaN" if value != value else ("Infinity" if value == float("inf") else
                                              "-Infinity" if value == float("-inf") else repr(value))
        return f"CAST('{text}' AS DOUBLE)"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    text = value.isoformat(sep=" ") if isinstance(value, datetime.datetime) else str(value)
    return f"CAST({exp.Literal.string(text).sql('spark')} AS {spark_type})"


def _python_env(case: Case) -> dict[str, Any] | None:
    """Column values as the row evaluator takes them (ints, decimals, strings, dates, booleans); None when a
    column is of a type it does not evaluate."""
    env = {}
    for i, (t, v) in enumerate(zip(case.types, case.values)):
        if t in ("double", "timestamp") and v is not None:
            return None
        env[f"c{i}"] = v
    return env


def model_view(case: Case, ansi: bool) -> tuple[str | None, bool, Any]:
    """What the rewriter derives for a case: the type, whether it may raise, the value (or not evaluated)."""
    node = sqlglot.parse_one(case.sql, read="spark")
    kinds = {f"c{i}": kind_of(t) if t != "boolean" else Kind("boolean") for i, t in enumerate(case.types)}
    kind_of_column = lambda c: kinds.get(c.name)  # noqa: E731
    kind = model.result_kind(node, kind_of_column)
    raises = model.can_raise(node, kind_of_column, ansi)
    value: Any = _NOT_EVALUATED
    env = _python_env(case)
    if env is not None and evaluate.supported(node):
        try:
            value = evaluate.evaluate(node, env, lambda c: c.name, {k: v for k, v in kinds.items() if v is not None})
        except Untranslatable:
            value = _NOT_EVALUATED
    return (spark_name(kind) if kind is not None and kind.name != "void" else None), raises, value


def run_batch(spark: Any, cases: list[Case], setting: str) -> list[Outcome]:
    """Run ``cases`` on ``spark`` (a session already set to ``setting``), splitting a batch that raises until
    each raising case stands alone."""
    ansi = setting.startswith("ansi=on")
    results: dict[int, tuple[str | None, Any, str | None]] = {}
    _run(spark, list(enumerate(cases)), results)
    outcomes = []
    for index, case in enumerate(cases):
        spark_type, spark_value, error = results[index]
        dipper_type, raises, value = model_view(case, ansi)
        outcomes.append(Outcome(case, setting, spark_type, spark_value, error, dipper_type, raises, value))
    return outcomes


def _run(spark: Any, cases: list[tuple[int, Case]], results: dict[int, tuple[str | None, Any, str | None]]) -> None:
    columns, projections = [], []
    for index, case in cases:
        names = {}
        for j, (t, v) in enumerate(zip(case.types, case.values)):
            name = f"a{index}_{j}"
            names[f"c{j}"] = name
            columns.append(f"{_literal(v, t)} AS {name}")
        expression = re.sub(r"\bc(\d+)\b", lambda m: names[m.group(0)], case.sql)
        # The value as Spark prints it: a DATE past Python's years 1-9999 would fail on the way to Python.
        projections += [f"typeof({expression}) AS t{index}", f"CAST({expression} AS STRING) AS v{index}"]
    source = f"(SELECT {', '.join(columns) or '1 AS one'}) AS r"
    try:
        row = spark.sql(f"SELECT {', '.join(projections)} FROM {source}").collect()[0]
    except Exception as e:  # noqa: BLE001 - Spark's error is the result under test
        if _lost(e):
            raise RuntimeError(f"Spark's JVM is gone (the run stops here): {str(e)[:200]}") from e
        if len(cases) > 1:
            middle = len(cases) // 2
            _run(spark, cases[:middle], results)
            _run(spark, cases[middle:], results)
            return
        index = cases[0][0]
        results[index] = (None, None, _error_class(e))
        return
    for index, _ in cases:
        results[index] = (row[f"t{index}"], row[f"v{index}"], None)


def _lost(error: Exception) -> bool:
    """Whether the error is the JVM's end, not Spark's answer (an OutOfMemoryError takes the gateway down)."""
    from py4j.protocol import Py4JNetworkError

    return isinstance(error, (Py4JNetworkError, ConnectionError)) or "OutOfMemoryError" in str(error)[:2000]


def _error_class(error: Exception) -> str:
    """Spark's error class; ``analysis:`` first where Spark refused the statement before reading a row (a
    type mismatch fails the same whatever files are read, so it is no error of rows)."""
    from pyspark.errors import AnalysisException

    text = str(error)
    if isinstance(error, AnalysisException):
        return "analysis:" + (re.search(r"\[([A-Z_]+(?:\.[A-Z_]+)?)\]", text) or re.match(".*", text)).group(1)[:120]
    m = re.search(r"\[([A-Z_]+(?:\.[A-Z_]+)?)\]", text)
    return m.group(1) if m else text.splitlines()[0][:120]


SETTINGS = [("on", "UTC"), ("off", "UTC"), ("on", "America/Los_Angeles"), ("off", "Asia/Kolkata")]


def conform(spark: Any, seed: int, per_template: int, batch: int = 60, deadline: float | None = None,
            settings: list[tuple[str, str]] = SETTINGS) -> list[Outcome]:
    """Every template's cases under every setting; stops starting batches past ``deadline`` (time.time()).

    The settings run at once, each on a thread and a Spark session of its own (its own ANSI mode and time
    zone): a batch is one small query, so one setting alone leaves the driver and the executors waiting on
    each other. Outcomes come back in the settings' order."""
    cases = list(draw_cases(seed, per_template))

    def one(ansi: str, zone: str) -> list[Outcome]:
        session = spark.newSession()
        session.conf.set("spark.sql.ansi.enabled", "true" if ansi == "on" else "false")
        session.conf.set("spark.sql.session.timeZone", zone)
        outcomes: list[Outcome] = []
        for start in range(0, len(cases), batch):
            if deadline is not None and time.time() > deadline:
                break
            outcomes += run_batch(session, cases[start:start + batch], f"ansi={ansi},{zone}")
        return outcomes

    with concurrent.futures.ThreadPoolExecutor(len(settings), thread_name_prefix="conform") as pool:
        return [o for outcomes in pool.map(lambda s: one(*s), settings) for o in outcomes]


def report(outcomes: list[Outcome], seed: int, minutes: float) -> str:
    """The Markdown report: per function, cases, disagreements and cautious answers."""
    per: dict[str, dict[str, int]] = {}
    failures = []
    for o in outcomes:
        row = per.setdefault(o.case.function, {"cases": 0, "typed": 0, "evaluated": 0, "raised": 0, "cautious": 0,
                                               "disagreements": 0})
        row["cases"] += 1
        row["typed"] += o.dipper_type is not None and o.spark_type is not None
        row["evaluated"] += o.dipper_value is not _NOT_EVALUATED and o.spark_error is None
        row["raised"] += o.spark_error is not None
        row["cautious"] += o.spark_error is None and o.dipper_raises
        bad = o.disagreements()
        row["disagreements"] += bool(bad)
        failures += [f"- `{o.case.sql}` with {o.case.values!r} ({o.setting}): {'; '.join(bad)}" for _ in bad[:1]]
    lines = [f"# Conformance of `rewriter/spark/` with Spark (seed {seed}, {minutes:g} min)", "",
             "Generated by `python -m bench conform`. Per function: cases run on Spark; those whose type the model "
             "names and Spark checked (typed); whose value the model computed and Spark checked (evaluated); that "
             "raised on Spark; where the model said \"may raise\" and Spark did not (cautious: costs pruning, never "
             "correctness); and disagreements (a type or value that differs, or an error the model ruled out).", "",
             "| function | cases | typed | evaluated | raised | cautious | disagreements |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name in sorted(per):
        r = per[name]
        lines.append(f"| `{name}` | {r['cases']} | {r['typed']} | {r['evaluated']} | {r['raised']} | {r['cautious']} | "
                     f"{r['disagreements']} |")
    total = sum(r["disagreements"] for r in per.values())
    lines += ["", f"{len(outcomes)} cases, {total} disagreements.", ""]
    if failures:
        lines += ["## Disagreements", "", *failures[:200], ""]
    return "\n".join(lines)


def main(seed: int, minutes: float, per_template: int, output: Path | None) -> int:
    from backend.spark_session import spark_session
    from dipper.config import load

    spark = spark_session(load(), "dipper-conform")
    deadline = time.time() + minutes * 60
    outcomes: list[Outcome] = []
    rounds = 0
    while time.time() < deadline:
        outcomes += conform(spark, seed + rounds, per_template, deadline=deadline)
        rounds += 1
        print(f"round {rounds}: {len(outcomes)} cases, "
              f"{sum(bool(o.disagreements()) for o in outcomes)} disagreements", flush=True)
    text = report(outcomes, seed, minutes)
    if output is not None:
        output.write_text(text)
        print(f"wrote {output}")
    else:
        print(text)
    return 1 if any(o.disagreements() for o in outcomes) else 0
