"""``python -m bench fuzz-queries``: random differential queries over benchmark datasets, for long runs.

    python -m bench fuzz-queries --seed 7 --count 500 --datasets tpch:tuned,tpch:keyed,tpcds:tuned

Query ``i`` of a suite is ``generate(suite, seed, i)``; every dataset of a suite runs the same queries
(so ``tpch:tuned`` and ``tpch:keyed`` see one query in two layouts). The dataset ``adversarial`` is not a
benchmark suite: mixed-type joins, keyword and odd identifiers, renamed columns (``bench/fuzz/adversarial.py``).
The layout ``qdtree`` (``tpch:qdtree``, ``tpcds:qdtree``) is the ``tuned`` dataset with its fact tables laid out
as qd-tree blocks (``bench/qdtree_dataset.py``, laid out anew on every run), so that block descriptions, joined
cuts included, decide files. Datasets are built at ``--sf`` with ``--files`` files per big table if the
warehouse lacks them, and their statistics are collected or refreshed in the configured store. Each outcome is
appended to a JSON-lines log as soon as it is known; a run started again with the same seed skips what the log
already holds for the same query text, so a killed run resumes where it stopped. A failure is shrunk
(``bench/fuzz/shrink.py``) and its minimal reproducer printed and logged. At the end: queries run, share rewritten,
share with files removed by diPs and by block descriptions, rewrites that failed open, and every failure. Exit
status 1 if any query failed.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import qdtree_dataset
from bench.fuzz import adversarial
from bench.fuzz.differential import FAILURES, Outcome, differential
from bench.fuzz.generate import GeneratedQuery, generate
from bench.fuzz.shrink import shrink
from layout.simple import parse_layout
from bench.suites import check_scale_factor, suite as get_suite
from dipper.config import Config
from dipper.errors import DatasetError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from rewriter.rewrite import RewriteContext

log = logging.getLogger("dipper.bench")

@dataclasses.dataclass(frozen=True)
class FuzzOptions:
    seed: int
    count: int
    datasets: tuple[tuple[str, str], ...]  # (suite, layout)
    sf: float = 0.01
    files: int = 8
    start: int = 0
    only: tuple[int, ...] = ()  # run just these indices
    shrink: bool = True
    shrink_budget: int = 300
    timeout: float = 300.0
    log_path: Path | None = None
    fresh: bool = False
    ansi: bool = True  # spark.sql.ansi.enabled for every query (Spark's default is true)

    def indices(self) -> list[int]:
        return list(self.only) if self.only else list(range(self.start, self.start + self.count))


def parse_datasets(text: str) -> tuple[tuple[str, str], ...]:
    """``tpch:tuned,tpcds:tuned,adversarial`` -> (("tpch", "tuned"), ("tpcds", "tuned"), ("adversarial", "")),
    each checked."""
    out = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        if item == adversarial.SUITE:
            out.append((adversarial.SUITE, ""))
            continue
        suite_name, _, layout = item.partition(":")
        suite = get_suite(suite_name)
        if layout == qdtree_dataset.LAYOUT:
            if suite.name not in qdtree_dataset.FACTS:
                raise DatasetError(f"the {layout} layout is built for {', '.join(qdtree_dataset.FACTS)}, not "
                                   f"{suite.name}")
        else:
            parse_layout(layout or "tuned").check_suite(suite.name)
        out.append((suite.name, layout or "tuned"))
    if not out:
        raise DatasetError("--datasets is empty; e.g. tpch:tuned,tpch:keyed,tpcds:tuned,tpch:qdtree,adversarial")
    return tuple(out)


def parse_options(seed: int, count: int, datasets: str, sf: float, files: int, start: int, only: str | None,
                  no_shrink: bool, shrink_budget: int, timeout: float, log_path: Path | None,
                  fresh: bool, ansi: bool = True) -> FuzzOptions:
    """Validate the command line without touching Spark."""
    check_scale_factor(sf)
    if count < 1 and not only:
        raise DatasetError(f"--count must be at least 1, not {count}")
    if files < 1:
        raise DatasetError(f"--files must be at least 1, not {files}")
    indices = tuple(int(x) for x in only.split(",") if x.strip()) if only else ()
    return FuzzOptions(seed, count, parse_datasets(datasets), sf, files, start, indices, not no_shrink,
                       shrink_budget, timeout, log_path, fresh, ansi)


def default_log(config: Config, opts: FuzzOptions) -> Path:
    ansi = "" if opts.ansi else "-ansi-off"
    return opts.log_path or config.paths.logs / f"fuzz-queries-seed{opts.seed}-sf{opts.sf:g}{ansi}.jsonl"


def fuzz(config: Config, environ: Mapping[str, str], opts: FuzzOptions) -> int:
    """Check, start Spark, prepare every dataset, run (resuming from the log), print totals."""
    from dipper.environment import java_executable

    java_executable(environ)
    from backend.spark_session import spark_session

    path = default_log(config, opts)
    path.parent.mkdir(parents=True, exist_ok=True)
    done = {} if opts.fresh else load_log(path)
    spark = spark_session(config, "dipper-fuzz")
    quiet_spark(spark)
    spark.conf.set("spark.sql.ansi.enabled", str(opts.ansi).lower())
    try:
        contexts = {ds: prepare(spark, config, ds, opts) for ds in opts.datasets}
        records = run_queries(spark, contexts, opts, done, path)
    finally:
        spark.stop()
    print()
    print(summary(records))
    return 1 if any(r["status"] in FAILURES for r in records) else 0


def quiet_spark(spark: SparkSession) -> None:
    """Queries that raise on purpose (overflow) would fill the terminal with executor stack traces."""
    spark.sparkContext.setLogLevel("OFF")
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    logging.getLogger("py4j").setLevel(logging.WARNING)


def prepare(spark: SparkSession, config: Config, dataset: tuple[str, str], opts: FuzzOptions) -> RewriteContext:
    """The dataset (built if missing) and a rewrite context on its fresh statistics."""
    from bench.datasets import build_dataset
    from bench.suites import indexes as suite_indexes
    from rewriter.rewrite import RewriteContext
    from rewriter.session import SessionSettings
    from stats.collect import collect
    from stats.freshness import Lister
    from stats.loader import StatsLoader
    from stats.store import StatsStore

    suite, layout = dataset
    store = StatsStore(config.paths.stats)
    indexes = None
    if suite == adversarial.SUITE:
        database = adversarial.DATABASE
        tables = adversarial.build(spark, config.paths.warehouse / database, database)
        indexes = {"bloom": adversarial.BLOOM_COLUMNS}
    elif layout == qdtree_dataset.LAYOUT:
        ds = build_dataset(spark, config, suite, opts.sf, "tuned", files=opts.files)
        collect(spark, store, [f"{ds.database}.{t.name}" for t in ds.tables], range_set_size=None, refresh=True,
                indexes=suite_indexes(suite, [t.name for t in ds.tables]))
        database = qdtree_dataset.database_name(ds.database)
        print(f"laying out the fact tables of {ds.database} as qd-trees into {database} ...", flush=True)
        built = qdtree_dataset.build(spark, suite, opts.sf, ds.database, store, store,
                                     config.paths.warehouse / database)
        print(f"  blocks: {', '.join(f'{t} {n}' for t, n in built.blocks.items())}", flush=True)
        for fact, tables in built.voided.items():
            if tables:
                print(f"  note: the joined cuts of {', '.join(tables)} on {fact}, laid out after them, no longer apply",
                      flush=True)
        tables = list(built.tables)
    else:
        ds = build_dataset(spark, config, suite, opts.sf, layout, files=opts.files)
        database, tables = ds.database, [f"{ds.database}.{t.name}" for t in ds.tables]
        indexes = suite_indexes(suite, [t.name for t in ds.tables])
    collect(spark, store, tables, range_set_size=None, refresh=True, indexes=indexes)
    # Every skip emitted, however small: the search is for wrong answers, and each skipped file is a chance of one.
    options = {**config.rewriter.context_options(), "min_skip_fraction": 0.0, "dip_column_max_share": 1.0}
    return RewriteContext(StatsLoader(store, Lister(60)), database=database, session=SessionSettings(ansi=opts.ansi),
                          **options)


def query_for(suite: str, seed: int, index: int, sf: float) -> GeneratedQuery:
    """Query ``index`` of ``seed`` for a dataset of ``suite``."""
    return adversarial.generate(seed, index) if suite == adversarial.SUITE else generate(suite, seed, index, sf)


def run_queries(spark: SparkSession, contexts: dict[tuple[str, str], RewriteContext], opts: FuzzOptions,
                done: dict[tuple[str, int], dict[str, Any]], path: Path) -> list[dict[str, Any]]:
    """Every (index, dataset) not already in ``done`` for the same text; returns all records of this run's
    indices and datasets (from the log too)."""
    indices = opts.indices()
    total = len(indices) * len(contexts)
    records: list[dict[str, Any]] = []
    started = time.monotonic()
    n = 0
    with path.open("a", encoding="utf-8") as out:
        for index in indices:
            for (suite, layout), ctx in contexts.items():
                n += 1
                name = f"{suite}:{layout}" if layout else suite
                query = query_for(suite, opts.seed, index, opts.sf)
                previous = done.get((name, index))
                if previous is not None and previous.get("sql") == query.sql:
                    records.append(previous)
                    continue
                spark.sql(f"USE {ctx.database}")
                outcome = differential(spark, query.sql, ctx, timeout=opts.timeout)
                record = _record(name, opts.seed, index, query.features, outcome)
                if outcome.failed and opts.shrink:
                    print(f"  {name} #{index} {outcome.status}: {outcome.detail[:300]}; shrinking ...", flush=True)
                    record["shrunk"] = shrink_failure(spark, ctx, query.sql, outcome, opts)
                out.write(json.dumps(record, default=str) + "\n")
                out.flush()
                records.append(record)
                elapsed = time.monotonic() - started
                print(_progress(n, total, record, elapsed), flush=True)
                if "shrunk" in record:
                    print(f"  minimal reproducer ({name}):\n    {record['shrunk']}", flush=True)
    return records


def shrink_failure(spark: SparkSession, ctx: RewriteContext, sql: str, outcome: Outcome, opts: FuzzOptions) -> str:
    """The smallest query that still fails the way ``sql`` did (same status) on this dataset."""
    def fails(candidate: str) -> bool:
        o = differential(spark, candidate, ctx, timeout=opts.timeout, run_unchanged=False)
        return o.status == outcome.status

    smallest = shrink(sql, fails, opts.shrink_budget)
    again = differential(spark, smallest, ctx, timeout=opts.timeout, run_unchanged=False)
    return smallest if again.status == outcome.status else sql  # a flaky reduction is not reported


def load_log(path: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """The last record per (dataset, index) of a log (a missing log is empty)."""
    out: dict[tuple[str, int], dict[str, Any]] = {}
    if not path.exists():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            r = json.loads(line)
            out[(r["dataset"], int(r["index"]))] = r
        except (ValueError, KeyError):
            continue  # a line cut short by a killed run
    return out


def summary(records: Iterable[dict[str, Any]]) -> str:
    """Totals: queries run, share rewritten, share with files removed by diPs, fail-opens, failures."""
    records = list(records)
    n = len(records)
    if not n:
        return "no queries run"
    by_status = collections.Counter(r["status"] for r in records)
    rewritten = sum(1 for r in records if r["changed"])
    dips = sum(1 for r in records if r["dip_files_removed"])
    blocks = sum(1 for r in records if r.get("block_files_removed"))
    failed_open = collections.Counter(r["rewrite_error"].split(":")[0] + ": " + r["rewrite_error"].split(":", 1)[-1][:80]
                                      for r in records if r.get("rewrite_error"))
    nontrivial = sum(1 for r in records if not r.get("trivial", True))
    features = collections.Counter(f for r in records for f in r.get("features", ()))
    per_dataset = collections.Counter(r["dataset"] for r in records)
    lines = [
        f"queries run: {n} ({', '.join(f'{d} {c}' for d, c in per_dataset.items())})",
        f"rewritten: {rewritten} ({rewritten / n:.0%}); files skipped in all: {sum(r['files_skipped'] for r in records)}",
        f"with files removed by diPs: {dips} ({dips / n:.0%}); diP removals in all: "
        f"{sum(r['dip_files_removed'] for r in records)}",
        f"with files removed by block descriptions: {blocks} ({blocks / n:.0%}); in all: "
        f"{sum(r.get('block_files_removed', 0) for r in records)}",
        f"outcomes: {', '.join(f'{s} {c}' for s, c in by_status.most_common())}",
        f"non-trivial results (rows beyond one row of zeros/NULLs): {nontrivial} ({nontrivial / n:.0%})",
        f"rewriter failed open: {sum(failed_open.values())}" +
        "".join(f"\n  {c} x {reason}" for reason, c in failed_open.most_common(5)),
        "features: " + ", ".join(f"{f} {c}" for f, c in sorted(features.items())),
    ]
    failures = [r for r in records if r["status"] in FAILURES]
    lines.append(f"failures: {len(failures)}")
    for r in failures:
        lines.append(f"  {r['dataset']} seed {r['seed']} #{r['index']} {r['status']}: {r['detail'][:300]}")
        lines.append(f"    query: {r['sql']}")
        if r.get("shrunk"):
            lines.append(f"    shrunk: {r['shrunk']}")
    return "\n".join(lines)


def _record(dataset: str, seed: int, index: int, features: Iterable[str], o: Outcome) -> dict[str, Any]:
    return {"dataset": dataset, "seed": seed, "index": index, "sql": o.sql, "status": o.status, "detail": o.detail,
            "changed": o.changed, "files_total": o.files_total, "files_skipped": o.files_skipped,
            "dip_files_removed": o.dip_files_removed, "block_files_removed": o.block_files_removed,
            "rewrite_error": o.rewrite_error, "rows": o.rows,
            "trivial": o.trivial, "seconds": round(o.seconds, 3), "features": sorted(features)}


def _progress(n: int, total: int, r: dict[str, Any], elapsed: float) -> str:
    what = f"skipped {r['files_skipped']}/{r['files_total']} files" if r["changed"] else "unchanged"
    if r["dip_files_removed"]:
        what += f", diPs removed {r['dip_files_removed']}"
    if r.get("block_files_removed"):
        what += f", blocks removed {r['block_files_removed']}"
    if r.get("rewrite_error"):
        what += f" (failed open: {r['rewrite_error'][:60]})"
    return (f"[{n}/{total} {elapsed:.0f}s] {r['dataset']} #{r['index']}: {r['status']:<14} {what} "
            f"({r['seconds']:.1f}s)")
