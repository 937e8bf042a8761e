"""``python -m bench prune-filter-cost``: what the prune filter costs Spark beyond the files it skips (issue 16,
part 3), written to ``docs/results/prune-filter.md``.

Spark prunes files with the filter at planning time, then evaluates it again on every row it reads
(``FileSourceStrategy`` keeps a filter on ``_metadata`` fields as a data filter, so it stays in the Filter
above the scan). What that costs is measured where it is all cost: the filter skips files that do not exist
(real paths with ``.absent`` appended, sizes no file of the table has) and reads every file of the table, so
every row pays for it, and the rewritten query reads exactly the original's files. Each form of the filter
runs interleaved with the unrewritten query; median wall and executor CPU time of ``--repeat`` rounds after a
warm-up round.

Planning: the same absent-file filter with 10 to 100,000 files, the time Spark takes from the SQL text to the
executed plan (parse, analyze, optimize, list and prune files, plan), median of ``--repeat``, against the
unrewritten query's.
"""

from __future__ import annotations

import datetime
import platform
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from backend.cpu_time import CpuMeter
from backend.warehouse import Dataset, read_dataset
from bench.query_suite import select_queries
from dipper.config import Config
from dipper.environment import java_executable
from dipper.errors import DatasetError
from rewriter.emit import files_filter, string_literal, whole_keys_in
from stats.freshness import Lister
from stats.loader import StatsLoader
from stats.store import StatsStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TABLE = "lineitem"
# A scan with the cheapest aggregation (the filter's share is largest), and two TPC-H queries on lineitem.
QUERIES = {"scan": "SELECT sum(l_quantity), count(*) FROM lineitem", "q06": None, "q01": None}
PLAN_SIZES = (10, 100, 1_000, 10_000, 100_000)
# Paths, sizes and modification times of the files to skip; sizes of the files to read.
Files = tuple[Sequence[str], Sequence[int], Sequence[int], Sequence[int]]


def _path_first(paths: Sequence[str], sizes: Sequence[int], mtimes: Sequence[int], kept: Sequence[int]) -> str:
    """The form emitted before this measurement: a row of a kept file fails on a hash of its path."""
    return (f"NOT (_metadata.file_path IN ({', '.join(map(string_literal, sorted(set(paths))))}) "
            f"AND {whole_keys_in(sorted(zip(paths, sizes, mtimes)))})")


def _key_only(paths: Sequence[str], sizes: Sequence[int], mtimes: Sequence[int], kept: Sequence[int]) -> str:
    """The first form: every row builds its file's key."""
    return f"NOT ({whole_keys_in(sorted(zip(paths, sizes, mtimes)))})"


FORMS: Mapping[str, Callable[[Sequence[str], Sequence[int], Sequence[int], Sequence[int]], str]] = {
    "sizes first (emitted)": files_filter,
    "path first (before)": _path_first,
    "key only (first)": _key_only,
}


def absent_files(stats, n: int) -> Files:  # noqa: ANN001 - a TableStats
    """``n`` files like the table's that do not exist (their paths are real paths with ``.absent`` appended,
    their sizes past every real size, below 2^31), and the table's own files as the files to read."""
    shift = int(stats.sizes.max()) + 1
    idx = [i % stats.n_files for i in range(n)]
    paths = [f"{stats.paths[i]}.absent{'' if i == j else j}" for j, i in enumerate(idx)]
    return (paths, [shift + j for j in range(n)], [int(stats.mtimes[i]) for i in idx],
            [int(s) for s in stats.sizes])


def wrap(sql: str, condition: str) -> str:
    """The query with its one lineitem reference replaced as the rewriter replaces it."""
    from sqlglot import exp, parse_one

    from rewriter.emit import splice

    tables = [t for t in parse_one(sql, read="spark").find_all(exp.Table) if t.name == TABLE]
    if len(tables) != 1:
        raise DatasetError(f"expected one reference to {TABLE} in {sql[:60]!r}")
    return splice(sql, tables, {0: condition})


def timed_run(spark: SparkSession, meter: CpuMeter, sql: str) -> tuple[float, float, list]:
    mark = meter.mark()
    started = time.perf_counter()
    rows = spark.sql(sql).collect()
    return time.perf_counter() - started, meter.since(mark), rows


def plan_seconds(spark: SparkSession, sql: str) -> float:
    started = time.perf_counter()
    spark.sql(sql)._jdf.queryExecution().executedPlan()  # noqa: SLF001 - planning only, nothing runs
    return time.perf_counter() - started


def measure(config: Config, environ: Mapping[str, str], database: str, repeat: int, output: Path) -> int:
    folder = config.paths.warehouse / database
    if not folder.is_dir():
        raise DatasetError(f"no dataset {database} in {config.paths.warehouse}; create it with: make dataset "
                           "SUITE=tpch SF=1 LAYOUT=tuned")
    dataset = read_dataset(folder)
    if dataset.suite != "tpch":
        raise DatasetError(f"{database} is a {dataset.suite} dataset; the prune filter is measured on TPC-H's lineitem")
    stats = StatsLoader(StatsStore(config.paths.stats), Lister(600)).table_stats(f"{database}.{TABLE}", fresh_listing=True)
    if stats is None:
        raise DatasetError(f"no statistics for {database}.{TABLE}; collect them with: python -m stats collect {database}.{TABLE}")
    queries = {n: q or select_queries("tpch", [n])[n] for n, q in QUERIES.items()}
    half = absent_files(stats, stats.n_files // 2)
    java_executable(environ)
    from backend.catalog import register_dataset
    from backend.spark_session import spark_session

    spark = spark_session(config, "dipper-prune-filter-cost")
    try:
        register_dataset(spark, config.paths.warehouse, dataset)
        spark.sql(f"USE {database}")
        meter = CpuMeter(spark)
        runtime = []
        for name, sql in queries.items():
            variants = {"unrewritten": sql} | {form: wrap(sql, build(*half)) for form, build in FORMS.items()}
            wall: dict[str, list[float]] = {v: [] for v in variants}
            cpu: dict[str, list[float]] = {v: [] for v in variants}
            reference = None
            for round_ in range(repeat + 1):
                for v, text in variants.items():
                    w, c, rows = timed_run(spark, meter, text)
                    if reference is None:
                        reference = rows
                    elif rows != reference:
                        raise DatasetError(f"{name} {v}: the filter of absent files changed the result")
                    if round_:
                        wall[v].append(w)
                        cpu[v].append(c)
            base_w, base_c = statistics.median(wall["unrewritten"]), statistics.median(cpu["unrewritten"])
            for v in variants:
                w, c = statistics.median(wall[v]), statistics.median(cpu[v])
                runtime.append((name, v, w, c, w / base_w - 1, c / base_c - 1))
                print(f"{name} {v}: {w:.3f}s wall ({w / base_w - 1:+.1%}), {c:.3f}s CPU ({c / base_c - 1:+.1%})", flush=True)
        sql = queries["q06"]
        planning = []
        for n in (0, *PLAN_SIZES):
            text = sql if n == 0 else wrap(sql, files_filter(*absent_files(stats, n)))
            plan_seconds(spark, text)
            runs = [plan_seconds(spark, text) for _ in range(repeat)]
            planning.append((n, len(text.encode()), statistics.median(runs)))
            print(f"planning with {n} files: {planning[-1][2] * 1000:.0f} ms, SQL {planning[-1][1] / 1e6:.2f} MB", flush=True)
    finally:
        spark.stop()
    plot = output.with_suffix(".png")
    output.write_text(_report(config, dataset, stats.n_files, repeat, runtime, planning, plot.name))
    _plot(plot, planning)
    print(f"wrote {output}")
    return 0


def _report(config: Config, dataset: Dataset, files: int, repeat: int, runtime: list, planning: list, plot: str) -> str:
    database = dataset.database
    lines = [
        "# The prune filter's cost in Spark (issue 16, part 3)", "",
        f"Measured {datetime.date.today().isoformat()} by `python -m bench prune-filter-cost --database {database} "
        f"--repeat {repeat}` on {platform.machine()}, 2 cores, Spark master `{config.backend.spark_master}`. "
        f"Table `{database}.{TABLE}`: {files} files, {dataset.table(TABLE).rows:,} rows, "
        f"{dataset.table(TABLE).bytes / 1e6:.0f} MB.", "",
        "## Per row", "",
        "Spark prunes files with the filter when it plans the query, then evaluates the filter again on every "
        "row it reads. To measure only that, each query's lineitem is replaced as the rewriter replaces it, with "
        f"a filter that skips {files // 2} files that do not exist (the table's paths with `.absent` "
        f"appended, sizes no file of the table has) and reads all {files} of the table's: nothing is skipped, "
        "every row pays. Median of "
        f"{repeat} interleaved rounds after a warm-up round; the change is against the unrewritten query.", "",
        "| query | form | wall s | change | executor CPU s | change |", "|---|---|---:|---:|---:|---:|"]
    lines += [f"| {q} | {v} | {w:.3f} | {dw:+.1%} | {c:.3f} | {dc:+.1%} |" for q, v, w, c, dw, dc in runtime]
    lines += ["", "## Planning", "",
              "Time from the SQL text to the executed plan (parse, analyze, optimize, list and prune the files, "
              f"plan) of TPC-H q06 with a filter listing n absent files, median of {repeat} after one warm-up.", "",
              "| files listed | SQL bytes | planning ms |", "|---:|---:|---:|"]
    lines += [f"| {n:,} | {b:,} | {s * 1000:.0f} |" for n, b, s in planning]
    lines += ["", f"![planning time]({plot})", ""]
    return "\n".join(lines)


def _plot(path: Path, planning: list) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [(n, s * 1000) for n, _, s in planning if n]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label="with the filter")
    ax.axhline(planning[0][2] * 1000, color="black", linewidth=0.8, label="unrewritten")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("files listed in the filter")
    ax.set_ylabel("planning time (ms)")
    ax.set_title("Spark planning time of TPC-H q06 with a prune filter")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
