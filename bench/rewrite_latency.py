"""``python -m bench rewrite-latency``: how long the rewriter takes per query (issue "Rewriter I", Measure).

Two settings, both over the 99 TPC-DS queries:

1. the statistics of a collected dataset (default ``tpcds_sf1_tuned``), files listed once and cached, as the
   proxy runs;
2. the same statistics with ``store_sales`` replaced by a synthetic table of 100,000 files (random
   clustered date ranges), to show how evaluation scales with the file count.

Each query is rewritten once to warm up, then ``--repeat`` times; the report gives p50, p95 and max per
setting, in ``docs/results/rewriter.md``.
"""

from __future__ import annotations

import datetime
import platform
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from bench.query_suite import runnable_queries
from dipper.config import Config
from dipper.errors import DatasetError
from rewriter.rewrite import RewriteContext, rewrite
from stats.freshness import Lister
from stats.loader import StatsLoader
from stats.model import ColumnStats, RangeSets, TableStats
from stats.store import StatsStore

SYNTHETIC_FILES = 100_000


class _WithSynthetic:
    """A statistics source that serves one table from memory and the rest from the store."""

    def __init__(self, base: StatsLoader, table: str, stats: TableStats) -> None:
        self.base, self.table, self.stats = base, table, stats

    def schemas(self) -> Mapping[str, Mapping[str, str]]:
        return self.base.schemas()

    def table_stats(self, table: str, fresh_listing: bool = False) -> TableStats | None:
        return self.stats if table == self.table else self.base.table_stats(table)


def synthetic(like: TableStats, n: int, seed: int = 7) -> TableStats:
    """``like``'s columns over ``n`` files: each file a narrow slice of every column's overall range (a
    clustered layout), range-sets of one interval per file."""
    rng = np.random.default_rng(seed)
    columns = {}
    for name, c in like.columns.items():
        if c.kind.name == "string" or not c.known.any() or c.lo.dtype == object:
            columns[name] = ColumnStats(c.kind, np.full(n, "", dtype=object) if c.lo.dtype == object else
                                        np.zeros(n, dtype=c.lo.dtype), np.zeros(n, dtype=c.hi.dtype),
                                        np.zeros(n, dtype=bool), np.full(n, -1, dtype=np.int64))
            continue
        lo_all, hi_all = c.lo[c.known].min(), c.hi[c.known].max()
        starts = np.sort(rng.uniform(lo_all, hi_all, n)).astype(c.lo.dtype)
        width = (hi_all - lo_all) / n * 2
        ends = (starts + width).astype(c.hi.dtype)
        columns[name] = ColumnStats(c.kind, starts, ends, np.ones(n, dtype=bool), np.zeros(n, dtype=np.int64),
                                    RangeSets(starts.copy(), ends.copy(), np.arange(n), np.ones(n, dtype=bool)))
    return TableStats(like.table, np.array([f"file:/synthetic/part-{i:06d}.parquet" for i in range(n)], dtype=object),
                      np.full(n, 64 << 20, dtype=np.int64), np.full(n, 1_700_000_000_000_000, dtype=np.int64),
                      np.full(n, 100_000, dtype=np.int64), columns)


def measure(config: Config, database: str, repeat: int, output: Path) -> int:
    loader = StatsLoader(StatsStore(config.paths.stats), Lister(3600))
    if not any(t.startswith(database + ".") for t in loader.schemas()):
        raise DatasetError(f"no statistics for {database} in {config.paths.stats}; run `python -m bench generate "
                           f"--suite tpcds --sf 1` and `python -m stats collect --all` first")
    queries = runnable_queries("tpcds")
    fact = f"{database}.store_sales"
    settings = {"collected statistics": loader}
    stored = loader.stored(fact)
    if stored is not None:
        settings[f"store_sales as {SYNTHETIC_FILES:,} files"] = _WithSynthetic(loader, fact, synthetic(stored, SYNTHETIC_FILES))
    results = {}
    for label, source in settings.items():
        ctx = RewriteContext(source, database=database)
        times, changed, skipped = [], 0, 0
        for sql in queries.values():
            first = rewrite(sql, ctx)
            changed += first.changed
            skipped += sum(t.files_skipped for t in first.decision.tables)
            for _ in range(repeat):
                started = time.perf_counter()
                rewrite(sql, ctx)
                times.append((time.perf_counter() - started) * 1000)
        results[label] = (np.array(times), changed, skipped)
        print(f"{label}: p50 {np.percentile(times, 50):.1f} ms, p95 {np.percentile(times, 95):.1f} ms, max {max(times):.1f} ms")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(_report(database, repeat, len(queries), results))
    print(f"wrote {output}")
    return 0


def _report(database: str, repeat: int, n: int, results: dict) -> str:
    lines = [
        "# Rewriter latency",
        "",
        f"Measured {datetime.date.today().isoformat()} by `python -m bench rewrite-latency --database {database}` on "
        f"{platform.machine()} with 2 cores, Python {platform.python_version()}: each of the {n} TPC-DS queries "
        f"rewritten once to warm up, then {repeat} times; file listings cached as in the proxy. Targets: p50 <= 10 ms, "
        "p95 <= 50 ms (the diP paper reports a median of 84 ms of added optimizer time).",
        "",
        "| statistics | p50 (ms) | p95 (ms) | max (ms) | queries rewritten | files skipped (sum) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, (times, changed, skipped) in results.items():
        lines.append(f"| {label} | {np.percentile(times, 50):.1f} | {np.percentile(times, 95):.1f} | {times.max():.1f} "
                     f"| {changed}/{n} | {skipped:,} |")
    return "\n".join(lines) + "\n"

