"""``python -m bench run``: every query of a suite in four variants (a fifth on request), measured and reported (issue 7).

Checks run cheapest first and say what to do: an unknown suite, layout, statistics spec, variant or
query; a dataset not in the warehouse (and the ``make`` target that creates it); statistics missing,
stale, or collected with fewer range-set intervals than asked for. Only then does Spark start.

The run prints a line per query as it goes, writes ``results.csv``, ``README.md`` and PNG plots to
``<output>/sf<SF>/<suite>-<layout>-<stats>/`` (see ``bench.report``) and exits with 1, after writing
everything, if any variant's rows differ from plain Spark's.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import re
import resource
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from backend.warehouse import Dataset, TableInfo, database_name
from bench.datasets import existing_dataset
from bench.execute import DEFAULT_VARIANTS, VARIANTS, Measurement, measure_query, why_no_gain
from layout.simple import parse_layout
from bench.query_suite import select_queries
from bench.report import CATALOG, RunInfo, load_run, run_label, write_report
from bench.suites import check_scale_factor, suite as get_suite
from dipper.config import Config
from dipper.environment import java_executable
from dipper.errors import DatasetError, DipperError, StatsError
from rewriter.rewrite import RewriteContext, rewrite
from stats.coarsen import CoarseStats, StatsSpec, check_store, parse_stats_spec
from stats.freshness import Lister
from stats.loader import StatsLoader
from stats.store import StatsStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("dipper.bench")

# The quick mode: one small scale and three queries covering local pruning (q06), a join with local
# predicates and diPs (q14) and a diP through a join and a GROUP BY (q17); the test suite runs it.
QUICK = {"suite": "tpch", "sf": 0.01, "layout": "tuned", "queries": ["q06", "q14", "q17"], "repeat": 1}


@dataclasses.dataclass(frozen=True)
class BenchOptions:
    suite: str
    sf: float
    layout: str
    stats: StatsSpec
    queries: list[str] | None = None  # None: every runnable query of the suite
    variants: tuple[str, ...] = DEFAULT_VARIANTS
    repeat: int = 3
    warmup: bool = True
    output: Path = Path("docs/results/bench")
    resume: bool = False
    catalog_database: str | None = None  # with layout CATALOG: the catalog's database the run reads

    @property
    def database(self) -> str:
        if self.layout == CATALOG:
            return self.catalog_database
        return database_name(self.suite, self.sf, parse_layout(self.layout).name)

    @property
    def out_dir(self) -> Path:
        layout = self.layout if self.layout == CATALOG else parse_layout(self.layout).name
        return self.output / f"sf{self.sf:g}" / f"{self.suite}-{run_label(layout, self.database)}-{self.stats.slug}"

    def make_target(self, tables: Sequence[str] = ()) -> str:
        if self.layout == CATALOG:
            return f"python -m stats collect {' '.join(tables) or self.database + '.<table> ...'}"
        return f"make dataset SUITE={self.suite} SF={self.sf:g} LAYOUT={self.layout}"


def parse_options(suite: str, sf: float, layout: str | None, stats: str, queries: str | None, variants: str,
                  repeat: int, warmup: bool, output: Path, resume: bool = False,
                  database: str | None = None) -> BenchOptions:
    """Validate the command line without touching Spark or the warehouse. ``database``: a database of the
    catalog holding the suite's tables, read as it is (layout CATALOG), instead of a generated dataset's."""
    get_suite(suite)
    check_scale_factor(sf)
    if database is not None:
        if layout is not None:
            raise DatasetError(f"--layout {layout} names a generated dataset and --database {database} a catalog "
                               "database: give one of them")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", database):
            raise DatasetError(f"--database {database!r} is not a database name (letters, digits and _)")
        layout = CATALOG
    else:
        layout = layout or "tuned"
        parse_layout(layout).check_suite(get_suite(suite).name)
    names = [q for q in re.split(r"[,\s]+", queries) if q] if queries else None
    if names is not None and not names:
        raise DatasetError("--queries is empty; give query names such as q01,q03 or leave it out for all")
    select_queries(suite, names)
    chosen = tuple(v.strip() for v in variants.split(",") if v.strip())
    unknown = [v for v in chosen if v not in VARIANTS]
    if unknown or not chosen:
        raise DatasetError(f"unknown variant {', '.join(unknown) or '(none)'}; choose from: {', '.join(VARIANTS)}")
    if repeat < 1:
        raise DatasetError(f"--repeat must be at least 1, not {repeat}")
    ordered = tuple(v for v in VARIANTS if v in chosen)
    return BenchOptions(suite, sf, layout, parse_stats_spec(stats), names, ordered, repeat, warmup, output, resume,
                        database if layout == CATALOG else None)


def check_inputs(config: Config, opts: BenchOptions, loader: StatsLoader) -> Dataset:
    """The dataset exists and its statistics describe exactly its files, at the asked precision."""
    if opts.layout == CATALOG:
        dataset = catalog_dataset(opts, loader)
    else:
        dataset = existing_dataset(config, opts.suite, opts.sf, opts.layout)
        if dataset is None:
            raise DatasetError(f"no dataset {opts.database} in {config.paths.warehouse}; create it (and its "
                               f"statistics) with: {opts.make_target()}")
    tables = [f"{dataset.database}.{t.name}" for t in dataset.tables]
    missing = [t for t in tables if loader.stored(t) is None]
    if missing:
        raise StatsError(f"no statistics for {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''} in "
                         f"{loader.store.root}; collect them with: {opts.make_target(missing)}")
    for table in tables:
        stored, fresh = loader.stored(table), loader.table_stats(table, fresh_listing=True)
        gone = stored.n_files - fresh.n_files
        if fresh.unknown_files or gone:
            raise StatsError(f"the statistics of {table} do not match the dataset: {fresh.unknown_files} of its "
                             f"files are not described and {gone} described files are gone (was it regenerated "
                             f"since?); update them with: python -m stats refresh {' '.join(tables)}")
    check_store(loader.snapshot(), tables, opts.stats)
    return dataset


def catalog_dataset(opts: BenchOptions, loader: StatsLoader) -> Dataset:
    """The suite's tables in the catalog database ``opts.database`` as its statistics describe them (their
    files, rows and bytes); an error naming the tables without statistics and the command collecting them."""
    names = [t.name for t in get_suite(opts.suite).tables]
    stored = {t: loader.stored(f"{opts.database}.{t}") for t in names}
    missing = [f"{opts.database}.{t}" for t, s in stored.items() if s is None]
    if missing:
        raise StatsError(f"no statistics for {len(missing)} of the {opts.suite} tables in database {opts.database} "
                         f"({', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}); a run over a catalog "
                         f"database needs all of them: {opts.make_target(missing)}")
    tables = tuple(TableInfo(name=t, rows=int(s.rows.sum()), files=s.n_files, bytes=int(s.sizes.sum()))
                   for t, s in stored.items())
    return Dataset(database=opts.database, suite=opts.suite, scale_factor=opts.sf, layout=CATALOG, tables=tables,
                   created_at="", seconds_to_build=0.0)


def check_locations(spark: SparkSession, dataset: Dataset, loader: StatsLoader) -> None:
    """Each table of a catalog database is where its statistics were collected: the rewriter names files of
    that folder, so a table the catalog moved since (a layout applied by another store, say) is refused."""
    from stats.collect import describe_table
    from stats.freshness import location_prefix

    for t in dataset.tables:
        table = f"{dataset.database}.{t.name}"
        there, described = describe_table(spark, table).location, loader.stored(table).location
        if location_prefix(there) != location_prefix(described):
            raise StatsError(f"the catalog keeps {table} in {there} but its statistics describe {described}; "
                             f"collect them again: python -m stats collect {table}")


def run(config: Config, environ: Mapping[str, str], opts: BenchOptions) -> int:
    """``python -m bench run``: check, start Spark, measure, report. A generated dataset is registered in an
    in-memory catalog (the run may go beside a server); a catalog database is read from the persistent
    catalog, which no server may hold then (Derby admits one process)."""
    loader = StatsLoader(StatsStore(config.paths.stats), Lister(60))
    dataset = check_inputs(config, opts, loader)
    java_executable(environ)
    from backend.catalog import register_dataset
    from backend.spark_session import spark_session
    from backend.sql_client import check_catalog

    done = resumed(opts, dataset)
    spark = spark_session(config, "dipper-bench", persistent_catalog=opts.layout == CATALOG)
    try:
        if opts.layout == CATALOG:
            check_catalog(spark, config)
            check_locations(spark, dataset, loader)
        else:
            register_dataset(spark, config.paths.warehouse, dataset)
        measurements = run_suite(spark, config, dataset, loader, opts, done)
    finally:
        spark.stop()
    return finish(opts, dataset, measurements)


def resumed(opts: BenchOptions, dataset: Dataset) -> list[Measurement]:
    """With ``--resume``: the measurements of the queries a run with the same options completed in the output
    folder (every variant measured). A folder written with other options, or over a dataset of other files
    (regenerated since, with another layout rule), is refused, not mixed in."""
    if not opts.resume or not (opts.out_dir / "results.csv").is_file():
        return []
    info, ms = load_run(opts.out_dir)
    mine = run_info(opts, dataset)
    keys = ("suite", "sf", "layout", "stats", "database", "files", "bytes", "repeat", "warmup", "variants")
    differ = [k for k in keys if getattr(info, k) != getattr(mine, k)]
    if differ:
        raise DatasetError(f"{opts.out_dir} holds a run with other options or data ({', '.join(differ)}: "
                           f"{info.command}); resume it with those options, or drop --resume to start again")
    complete = {q for q in {m.query for m in ms} if {m.variant for m in ms if m.query == q} >= set(opts.variants)}
    print(f"resuming {opts.out_dir}: {len(complete)} queries already measured", flush=True)
    return [m for m in ms if m.query in complete]


# The share of a reference's values a column predicate may keep in the dipper-cols variant when the
# configuration writes none (rewriter.dip_column_max_share = 0).
COLUMN_SHARE = 0.5


def rewrite_contexts(config: Config, source: CoarseStats, database: str) -> dict[str, RewriteContext]:
    """The rewrite of the Preds variant (local predicates only), of the Dipper variant (with diPs) and of the
    Dipper-cols variant (diPs also written as column predicates)."""
    options = config.rewriter.context_options()
    share = options["dip_column_max_share"] or COLUMN_SHARE
    return {"preds": RewriteContext(source, database=database, **{**options, "dips": False}),
            "dipper": RewriteContext(source, database=database, **options),
            "dipper-cols": RewriteContext(source, database=database, **{**options, "dip_column_max_share": share})}


def run_suite(spark: SparkSession, config: Config, dataset: Dataset, loader: StatsLoader,
              opts: BenchOptions, done: list[Measurement]) -> list[Measurement]:
    """Measure every query not in ``done``; prints one line per query as it completes and writes the report
    so far after each."""
    contexts = {v: c for v, c in rewrite_contexts(config, CoarseStats(loader, opts.stats), dataset.database).items()
                if v in opts.variants}
    table_bytes = {f"{dataset.database}.{t.name}": t.bytes for t in dataset.tables}
    queries = select_queries(opts.suite, opts.queries)
    spark.sql(f"USE {dataset.database}")
    print(f"{dataset.database}: {len(queries)} queries x {len(opts.variants)} variants, statistics "
          f"{opts.stats.label}, median of {opts.repeat} run(s){' after a warm-up' if opts.warmup else ''}", flush=True)
    out: list[Measurement] = list(done)
    finished = {m.query for m in done}
    started = time.monotonic()
    for i, (name, sql) in enumerate(queries.items(), 1):
        if name in finished:
            continue
        spark.sparkContext.setJobDescription(f"bench {opts.suite} {name}")
        got = measure_query(spark, name, sql, contexts, table_bytes, opts.variants, opts.repeat, opts.warmup)
        out.extend(got)
        elapsed = time.monotonic() - started
        print(f"[{i:>3}/{len(queries)} {elapsed:>6.0f}s] {name}  " + "  ".join(_brief(m) for m in got), flush=True)
        for m in got:
            if not m.identical:
                print(f"MISMATCH: {name} {m.variant} returned different rows from plain Spark", file=sys.stderr, flush=True)
            if m.rewrite_error:
                print(f"warning: {name} {m.variant}: the rewriter failed open: {m.rewrite_error}", file=sys.stderr, flush=True)
        write_report(opts.out_dir, run_info(opts, dataset), out)
    return out


def _brief(m: Measurement) -> str:
    extra = f" {m.dips_built} diPs" if m.variant == "dipper" else ""
    return f"{m.variant} {m.seconds:.2f}s {m.files_read}f {m.bytes_read / 1e6:.1f}MB cut {m.inputcut:.2f}x{extra}"


def run_info(opts: BenchOptions, dataset: Dataset) -> RunInfo:
    return RunInfo(
        suite=opts.suite, sf=opts.sf, layout=opts.layout, stats=opts.stats.label, database=dataset.database,
        files=sum(t.files for t in dataset.tables), bytes=sum(t.bytes for t in dataset.tables),
        repeat=opts.repeat, warmup=opts.warmup, spark_version=_spark_version(),
        when=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, queries=opts.queries,
        variants=list(opts.variants))


def finish(opts: BenchOptions, dataset: Dataset, measurements: list[Measurement]) -> int:
    """Write the report; then fail loudly if any result differed from plain Spark's."""
    folder = write_report(opts.out_dir, run_info(opts, dataset), measurements)
    print(f"wrote {folder}")
    bad = sorted({f"{m.query} ({m.variant})" for m in measurements if not m.identical})
    if bad:
        raise DipperError(f"results differ from plain Spark in {len(bad)} case(s): {', '.join(bad)}")
    return 0


def _spark_version() -> str:
    import pyspark

    return pyspark.__version__


def rerender(config: Config, folder: Path, notes: bool) -> int:
    """``python -m bench report``: write a run's markdown and plots again from its results.csv; with
    ``notes``, first explain again, with the current rewriter and statistics, why queries gain nothing."""
    info, ms = load_run(folder)
    if notes:
        source = CoarseStats(StatsLoader(StatsStore(config.paths.stats), Lister(60)), parse_stats_spec(info.stats))
        queries = select_queries(info.suite, None)
        contexts = rewrite_contexts(config, source, info.database)
        ms = [dataclasses.replace(m, note=why_no_gain(rewrite(queries[m.query], contexts[m.variant]).decision))
              if m.variant in contexts else m for m in ms]
    print(f"wrote {write_report(folder, info, ms)}")
    return 0
