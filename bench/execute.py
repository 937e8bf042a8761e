"""Run one benchmark query in the five variants on one Spark session and measure each (issue 7).

Variants:

- ``spark``: the query as written, Spark's runtime features (dynamic partition pruning, adaptive query
  execution, runtime bloom filters) at their defaults;
- ``spark-nodpp``: the same query with those runtime features switched off;
- ``preds``: Dipper's rewrite with local pruning only (rewriter I), run with Spark's defaults;
- ``dipper``: Dipper's rewrite with data-induced predicates too (rewriter II), run with Spark's defaults;
- ``dipper-cols``: the same, with diPs also written as predicates on the receiving join columns where they
  keep at most half the values of the kept files (``rewriter/dip_column.py``; ``rewriter.dip_column_max_share``
  when the configuration sets one), to measure row dropping against file skipping alone (issue 16, part 4).

Dipper runs with Spark's defaults because that is what a user of the proxy gets: the rewrite adds to
Spark's own pruning, it does not replace it.

Files and bytes read come from the scan nodes' metrics of the executed plan (``backend.scan_metrics``):
the files a scan listed, whole. Inside them Spark's Parquet reader skips row groups whose footer
statistics falsify a pushed-down filter, which those metrics do not show; the rows the scans produced
(``rows_scanned``) do. A query's input, the same for every variant, is the size of the whole table
behind every scan in its non-adaptive plan (with adaptive execution, a scan whose result turned out not
to be needed never runs, and would drop out of the input too). Wall time and executor CPU time
(``backend.cpu_time``: the sum of the tasks' CPU, what a cluster bills) are the medians of ``repeat`` runs
after one warm-up run, which also provides the rows and the metrics; the variants take turns. A
variant's rows are compared with plain Spark's as a multiset; doubles are compared to 10 significant
digits, since a different set of files can change the order in which Spark adds them up.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import decimal
import math
import statistics
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from backend.cpu_time import CpuMeter
from backend.scan_metrics import collect_with_metrics, scan_metrics
from rewriter.decision import Decision
from rewriter.rewrite import RewriteContext, rewrite

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

VARIANTS = ("spark", "spark-nodpp", "preds", "dipper", "dipper-cols")
DEFAULT_VARIANTS = VARIANTS[:4]  # what `python -m bench run` measures unless told; dipper-cols is asked for

# Spark's runtime pruning and adaptivity, all on by default in Spark 4 (the semi-join reduction is off by
# default and stays off in both variants).
RUNTIME_FEATURES_OFF = {
    "spark.sql.optimizer.dynamicPartitionPruning.enabled": "false",
    "spark.sql.optimizer.runtime.bloomFilter.enabled": "false",
    "spark.sql.adaptive.enabled": "false",
}


@dataclasses.dataclass(frozen=True)
class Measurement:
    query: str
    variant: str
    files_read: int
    bytes_read: int
    bytes_input: int  # the whole tables behind the scans that ran
    rows_scanned: int  # rows the scans produced: Spark's own row-group skipping shows here, not in bytes
    seconds: float  # median wall time, rewrite included
    runs: int
    rewrite_ms: float  # 0 for the Spark variants
    dips_built: int
    dips_naive: int  # Dipper only: diPs the naive schedule (every edge until nothing changes) builds
    naive_same: bool  # ... and whether it kept the same files
    identical: bool  # rows equal to plain Spark's
    rewrite_error: str = ""  # the rewriter failed open (the original query ran)
    note: str = ""  # for Preds and Dipper: why the rewrite could not skip more (see why_no_gain)
    # Median executor CPU time of the timed runs (backend.cpu_time): the cluster cost. NaN in runs recorded
    # before it was measured.
    cpu_seconds: float = math.nan

    @property
    def inputcut(self) -> float:
        return inputcut(self.bytes_input, self.bytes_read)


def inputcut(total: float, kept: float) -> float:
    """INPUTCUT (seed 000): bytes read whole / bytes kept; infinite where nothing is kept, 1 where there is
    nothing to read. Every benchmark's one definition."""
    return total / kept if kept else (math.inf if total else 1.0)


def measure_query(spark: SparkSession, name: str, sql: str, contexts: Mapping[str, RewriteContext],
                  table_bytes: Mapping[str, int], variants: tuple[str, ...], repeat: int, warmup: bool) -> list[Measurement]:
    """Every requested variant of one query. Plain Spark always runs (its rows are the reference). The
    variants' runs are interleaved -- a warm-up round, then ``repeat`` timed rounds of one run each -- so
    that drift over time (JIT, caches, garbage collection) does not favour whichever variant runs last."""
    with spark_conf(spark, RUNTIME_FEATURES_OFF):
        planned = scan_metrics(spark.sql(sql))  # planned only: names of the scanned tables, no metrics
    bytes_input = sum(_table_bytes(m.table, table_bytes) for m in planned)
    meter = CpuMeter(spark)
    runs = {}
    for variant in ("spark",) + tuple(v for v in variants if v != "spark"):
        text, rewrite_ms, built, error, note, naive, same = sql, 0.0, 0, "", "", 0, True
        if variant in contexts:
            ctx = contexts[variant]
            rewrite(sql, ctx)  # statistics loaded and cached: time the rewrite, not the first load
            started = time.perf_counter()
            result = rewrite(sql, ctx)
            rewrite_ms = (time.perf_counter() - started) * 1000
            text, built, error = result.sql, result.decision.dips_built, result.decision.error or ""
            note = why_no_gain(result.decision)
            if ctx.dips:
                baseline = rewrite(sql, dataclasses.replace(ctx, naive_schedule=True))
                # Compaction is lossy, so the order of exchanges may (rarely) end in another sound fixpoint.
                naive, same = baseline.decision.dips_built, baseline.sql == result.sql
        runs[variant] = _Runs(text, RUNTIME_FEATURES_OFF if variant == "spark-nodpp" else {}, rewrite_ms, built,
                              naive, same, error, note)
    for r in runs.values():  # the first run gives rows and metrics (and warms up, when not timed)
        r.run(spark, meter, timed=not warmup)
    for _ in range(repeat - (0 if warmup else 1)):
        for v, r in runs.items():
            if v in variants:
                r.run(spark, meter, timed=True)
    reference = normalised(runs["spark"].rows)
    out = []
    for v in variants:
        r = runs[v]
        out.append(Measurement(
            query=name, variant=v, files_read=sum(m.files for m in r.metrics), bytes_read=sum(m.bytes for m in r.metrics),
            bytes_input=bytes_input, rows_scanned=sum(m.rows for m in r.metrics),
            seconds=statistics.median(r.times) + r.rewrite_ms / 1000, runs=len(r.times), rewrite_ms=r.rewrite_ms,
            dips_built=r.built, dips_naive=r.naive, naive_same=r.naive_same, identical=normalised(r.rows) == reference, rewrite_error=r.error, note=r.note,
            cpu_seconds=statistics.median(r.cpu)))
    return out


@dataclasses.dataclass
class _Runs:
    sql: str
    conf: Mapping[str, str]
    rewrite_ms: float
    built: int
    naive: int
    naive_same: bool
    error: str
    note: str
    rows: list[Any] | None = None
    metrics: list = dataclasses.field(default_factory=list)
    times: list[float] = dataclasses.field(default_factory=list)
    cpu: list[float] = dataclasses.field(default_factory=list)

    def run(self, spark: SparkSession, meter: CpuMeter, timed: bool) -> None:
        with spark_conf(spark, self.conf):
            mark = meter.mark() if timed else None
            started = time.perf_counter()
            rows, metrics = collect_with_metrics(spark.sql(self.sql))
            elapsed = time.perf_counter() - started
        if self.rows is None:
            self.rows, self.metrics = rows, metrics
        if timed:
            self.times.append(elapsed)
            self.cpu.append(meter.since(mark))


@contextlib.contextmanager
def spark_conf(spark: SparkSession, conf: Mapping[str, str]) -> Iterator[None]:
    """The session's settings ``conf`` for the block; the earlier values (or none) restored after."""
    saved = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def _table_bytes(scan_table: str, table_bytes: Mapping[str, int]) -> int:
    """Size of the table behind a scan (Spark names it ``spark_catalog.db.table``)."""
    name = scan_table.lower()
    for table, size in table_bytes.items():
        if name == table or name.endswith("." + table):
            return size
    raise KeyError(f"a scan of {scan_table}, which is not a table of the dataset")


def normalised(rows: list[Any]) -> list[tuple]:
    """Rows as a sorted multiset of comparable values (doubles to 10 significant digits)."""
    def value(v: object) -> object:
        if isinstance(v, float):
            return "NaN" if math.isnan(v) else float(f"{v:.10g}")
        if isinstance(v, (decimal.Decimal, datetime.date, datetime.datetime)):
            return str(v)
        return v
    return sorted((tuple(value(v) for v in r) for r in rows), key=repr)


def why_no_gain(d: Decision) -> str:
    """Which of seed 000's conditions (§2.1) a rewrite's decision shows failing, in a phrase:
    C1 a table's predicate keeps few of its files; C2 the kept files hold few of the join values;
    C3 the receiving table's join values are clustered so a diP keeps few of its files."""
    if d.error:
        return f"the rewriter failed open: {d.error}"
    if d.passthrough:
        return f"not analysed: {d.passthrough}"
    refs = [t for t in d.tables if t.has_stats]
    if not refs:
        return "no table with statistics"
    if not any(t.predicates for t in refs):
        return "no predicate on any table (C1)"
    if not any(t.files_skipped for t in refs):
        if not any(p.files_removed for t in refs for p in t.predicates):
            return "predicates keep every file of their tables (C1)"
    pruned = [t for t in refs if t.files_skipped]
    largest = max(refs, key=lambda t: t.bytes_total)
    if largest.not_worth:
        return f"{largest.alias}: {largest.refused}"
    if largest.files_skipped == 0:
        if any(dip for t in refs for dip in t.dips):
            return (f"diPs reach {largest.alias} but its join values are spread over all its files (C2/C3); "
                    f"pruned: {', '.join(sorted({t.alias for t in pruned})) or 'nothing'}")
        return f"only small tables pruned ({', '.join(sorted({t.alias for t in pruned}))}); no diP reaches {largest.alias}"
    how = "its predicates' and diPs' values" if largest.predicates else "the diPs' values"
    return (f"{largest.alias} keeps {largest.files_kept} of {largest.files_total} files: {how} are spread over "
            f"most of them ({'C1' if largest.predicates else 'C2/C3'})")
