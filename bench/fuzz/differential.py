"""One random query against Spark, as written and as rewritten: the verdict (ARCHITECTURE.md §3.3, §3.6).

Rewritten and original run on the same Spark session, one after the other. The verdict:

- ``ok``: both ran and returned the same rows (a multiset; a list when the query's top level has an
  ORDER BY, which the generator only writes when it is total), under the same column names and types;
- ``both raised``: both raised an error of the same class (Spark's error condition, e.g.
  ``ARITHMETIC_OVERFLOW``, else the exception type; ``bench/spark_errors.py``) - the rewrite kept the error, as
  it must;
- ``unchanged``: the rewriter sent the text as it was (the original is still run unless asked not to,
  so an invalid generated query shows up as ``original raised``);
- failures: ``mismatch`` (different rows or schema), ``rewrite raised`` (only the rewritten query
  raised), ``rewrite hid error`` (only the original raised: skipped files held the rows that raise),
  ``error differs`` (both raised, different classes);
- ``agree without AQE``: only one of the two raised, or the rewrite raised a condition the original did not
  (``bench/spark_errors.py``), but run again with adaptive query execution off both raise the same error class
  (or return the same rows). With AQE on, whether Spark evaluates an expression
  that raises can depend on which stage finishes first: a join whose other side turns out empty is
  replaced by an empty relation before its stream side runs, so the *original* text raises on one run and
  returns no rows on the next (fuzz-queries seed 1532, adversarial #66: three raises, then ``[]``). With AQE
  off the plans are static and differ only in the files read, so a rewrite that hid an error by skipping
  the rows that raise still fails there; this verdict is not a failure;
- ``timeout``: a query ran longer than allowed and was cancelled (neither pass nor failure).
"""

from __future__ import annotations

import collections
import dataclasses
import math
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

import sqlglot
from sqlglot import exp

from bench.execute import spark_conf
from bench.spark_errors import error_class, same_error
from rewriter.rewrite import Rewrite, RewriteContext, rewrite

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FAILURES = ("mismatch", "rewrite raised", "rewrite hid error", "error differs")


@dataclasses.dataclass
class Outcome:
    sql: str
    status: str  # ok | both raised | agree without AQE | unchanged | original raised | timeout | one of FAILURES
    detail: str = ""
    rewritten_sql: str = ""
    changed: bool = False
    files_total: int = 0
    files_skipped: int = 0
    dip_files_removed: int = 0  # sum of files_removed over every diP of every reference
    block_files_removed: int = 0  # files the blocks' descriptions removed beyond their statistics (layout/)
    rewrite_error: str | None = None  # decision.error: the rewriter failed open
    rows: int = 0  # rows the original returned
    trivial: bool = True  # no rows, or one row of zeros and NULLs: a weak check
    original_error: str | None = None
    rewritten_error: str | None = None
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return self.status in FAILURES


@dataclasses.dataclass
class _Run:
    rows: list[tuple] | None = None
    schema: list[tuple[str, str]] | None = None
    error: str | None = None  # error class
    message: str = ""
    timed_out: bool = False


def differential(spark: SparkSession, sql: str, context: RewriteContext, timeout: float = 300.0,
                 run_unchanged: bool = True, prepared: Rewrite | None = None) -> Outcome:
    """Rewrite ``sql`` (or take ``prepared``, its rewrite made earlier), run it both ways on ``spark`` (its
    current database must be the context's), compare."""
    started = time.perf_counter()
    r = prepared if prepared is not None else rewrite(sql, context)
    d = r.decision
    out = Outcome(sql=sql, status="ok", rewritten_sql=r.sql, changed=r.changed, rewrite_error=d.error,
                  files_total=sum(t.files_total for t in d.tables),
                  files_skipped=sum(t.files_skipped for t in d.tables),
                  dip_files_removed=sum(x.files_removed for t in d.tables for x in t.dips),
                  block_files_removed=sum(t.files_removed_by_blocks for t in d.tables))
    try:
        if not r.changed and not run_unchanged:
            out.status = "unchanged"
            return out
        original = _run(spark, sql, timeout)
        out.original_error = original.error
        out.rows = len(original.rows or [])
        out.trivial = not original.rows or (len(original.rows) == 1 and all(v in (0, None) for v in original.rows[0]))
        if original.timed_out:
            out.status, out.detail = "timeout", "original"
            return out
        if not r.changed:
            out.status = "original raised" if original.error else "unchanged"
            out.detail = original.message
            return out
        rewritten = _run(spark, r.sql, timeout)
        out.rewritten_error = rewritten.error
        if rewritten.timed_out:
            out.status, out.detail = "timeout", "rewritten"
            return out
        out.status, out.detail = _verdict(original, rewritten, ordered(sql))
        if out.status in ("rewrite hid error", "rewrite raised", "error differs"):
            runs = _without_aqe(spark, [sql, r.sql], timeout)
            static = _verdict(*runs, ordered(sql))
            if static[0] in ("ok", "both raised") and not any(run.timed_out for run in runs):
                out.status, out.detail = "agree without AQE", f"{out.detail}; with AQE off: {static[0]} ({static[1]})"
        return out
    finally:
        out.seconds = time.perf_counter() - started


def _without_aqe(spark: SparkSession, texts: list[str], timeout: float) -> list[_Run]:
    """Each text run once with ``spark.sql.adaptive.enabled`` off, the session's setting restored after."""
    with spark_conf(spark, {"spark.sql.adaptive.enabled": "false"}):
        return [_run(spark, text, timeout) for text in texts]


def ordered(sql: str) -> bool:
    """Whether the query's top level sorts its result (then rows are compared in order)."""
    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except sqlglot.errors.SqlglotError:
        return False
    return tree.args.get("order") is not None if isinstance(tree, (exp.Select, exp.SetOperation)) else False


def _verdict(original: _Run, rewritten: _Run, in_order: bool) -> tuple[str, str]:
    if original.error and rewritten.error:
        if same_error(original.error, rewritten.error):
            return "both raised", original.error
        return "error differs", f"original: {original.message}; rewritten: {rewritten.message}"
    if original.error:
        return "rewrite hid error", f"original raised {original.message}; the rewritten query returned " \
                                    f"{len(rewritten.rows or [])} rows"
    if rewritten.error:
        return "rewrite raised", rewritten.message
    if original.schema != rewritten.schema:
        return "mismatch", f"schema {original.schema} became {rewritten.schema}"
    a, b = original.rows or [], rewritten.rows or []
    if in_order:
        if a != b:
            return "mismatch", _first_difference(a, b)
    elif collections.Counter(a) != collections.Counter(b):
        return "mismatch", _multiset_difference(a, b)
    return "ok", f"{len(a)} rows"


def _run(spark: SparkSession, sql: str, timeout: float) -> _Run:
    """Run ``sql`` to completion, cancelling its jobs after ``timeout`` seconds."""
    sc = spark.sparkContext
    group = f"fuzz-{uuid.uuid4().hex[:12]}"
    fired = threading.Event()

    def cancel() -> None:
        fired.set()
        sc.cancelJobGroup(group)

    timer = threading.Timer(timeout, cancel)
    sc.setJobGroup(group, "random differential query", interruptOnCancel=True)
    timer.start()
    try:
        df = spark.sql(sql)
        schema = [(f.name, f.dataType.simpleString()) for f in df.schema.fields]
        rows = [tuple(_normal(v) for v in row) for row in df.collect()]
        return _Run(rows=rows, schema=schema)
    except Exception as e:  # noqa: BLE001 - any error of the query is a result to compare
        if fired.is_set():
            return _Run(timed_out=True, error="timeout", message=f"cancelled after {timeout:.0f}s")
        return _Run(error=error_class(e), message=_first_line(e))
    finally:
        timer.cancel()
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


def _normal(v: Any) -> Any:
    """A value that compares equal to itself (NaN does not) and hashes (lists and rows do not)."""
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, list):
        return tuple(_normal(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _normal(x)) for k, x in v.items()))
    if hasattr(v, "asDict"):  # a struct
        return tuple(_normal(x) for x in v)
    return v


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{error_class(e)}: {text[0][:300] if text else ''}"


def _first_difference(a: list[tuple], b: list[tuple]) -> str:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"row {i}: {x!r} became {y!r} ({len(a)} rows, {len(b)} after rewriting)"
    return f"{len(a)} rows became {len(b)}"


def _multiset_difference(a: list[tuple], b: list[tuple]) -> str:
    ca, cb = collections.Counter(a), collections.Counter(b)
    lost, gained = list((ca - cb).elements()), list((cb - ca).elements())
    return (f"{len(a)} rows became {len(b)}; lost {len(lost)} (e.g. {lost[:3]!r}), "
            f"gained {len(gained)} (e.g. {gained[:3]!r})")
