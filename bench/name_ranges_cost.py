"""``python -m bench name-ranges``: the prune filter naming skipped block files by ranges of file names against
naming each by its key (issue 15, part 6), written to ``docs/results/name-ranges.md``.

The table: lineitem of a TPC-H dataset split, in its stored row order, into ``--files`` files named as ``layout
apply`` names blocks (``block-<id>-000.parquet``) in a folder of their own, registered as
``name_ranges_bench.lineitem``, with a block-layout record that describes every file (the filter depends only
on the files' names, sizes and mtimes, so the record's cuts are left empty). Made once and reused while its
files are unchanged.

Skips as a qd-tree's ruled-out subtrees give them: a share of the files in R runs of consecutive blocks,
spread evenly over the table. For each, with the same files skipped either way:

- the filter's SQL bytes with keys only (``rewriter/emit.py`` without ranges) and with ranges;
- Spark's planning time (SQL text to executed plan) of TPC-H q06, median of ``--repeat`` after a warm-up;
- wall and executor CPU time of a scan (``sum(l_quantity), count(*)``) and of q06, interleaved, median of
  ``--repeat`` rounds after a warm-up round; both forms must return the same rows (they read the same files).
"""

from __future__ import annotations

import datetime
import json
import platform
import statistics
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from backend.cpu_time import CpuMeter
from bench.prune_filter_cost import plan_seconds, timed_run, wrap
from bench.query_suite import select_queries
from dipper.config import Config
from dipper.environment import java_executable
from dipper.errors import DatasetError
from rewriter.emit import prune_filter
from rewriter.name_ranges import MAX_RUNS, name_ranges
from stats.blocks import BlockLayout, identities
from stats.freshness import Lister, list_files
from stats.model import TableStats

DATABASE = "name_ranges_bench"
TABLE = "lineitem"
# (share of the files skipped, runs)
SKIPS = ((0.5, 1), (0.5, 16), (0.5, 32), (0.5, 64), (0.5, 256), (0.9, 16), (0.1, 16))


def _folder(config: Config, files: int) -> Path:
    return config.paths.warehouse / DATABASE / f"{TABLE}.layout-{files}"


def _make_files(source: Path, folder: Path, files: int) -> None:
    """``files`` block files holding the source's rows in their stored order; kept while complete."""
    if folder.is_dir() and len(list(folder.glob("block-*.parquet"))) == files:
        return
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*"):
        old.unlink()
    data = pads.dataset(str(source), format="parquet").to_table()
    bounds = np.linspace(0, data.num_rows, files + 1).astype(np.int64)
    print(f"writing {files} block files of about {data.num_rows // files:,} rows into {folder}", flush=True)
    for i in range(files):
        pq.write_table(data.slice(int(bounds[i]), int(bounds[i + 1] - bounds[i])),
                       folder / f"block-{i:05d}-000.parquet", compression="snappy")


def _table(location: str) -> tuple[TableStats, BlockLayout]:
    listed = sorted(list_files(location), key=lambda f: f.path)
    stats = TableStats(f"{DATABASE}.{TABLE}", np.array([f.path for f in listed], dtype=object),
                       np.array([f.size for f in listed], dtype=np.int64), np.array([f.mtime for f in listed], dtype=np.int64),
                       np.zeros(len(listed), dtype=np.int64), {}, location=location)
    files = {p: (s, m, ()) for p, s, m in identities(stats)}
    return stats, BlockLayout(stats.table, location, True, "UTC", (), {}, files)


def skip_mask(n: int, share: float, runs: int) -> np.ndarray:
    """``share`` of ``n`` files (in name order) skipped in ``runs`` runs spread evenly."""
    skip = np.zeros(n, dtype=bool)
    edges = np.linspace(0, n, runs + 1).astype(np.int64)
    for lo, hi in zip(edges, edges[1:]):
        skip[lo:lo + max(2, int(round((hi - lo) * share)))] = True
    return skip


def workload_runs(config: Config, database: str, seed: int, per_query: int) -> tuple[list[tuple[str, int, int, int]], int]:
    """(query, lineitem files skipped, of them named by ranges, ranges) of every TPC-H instance that skips some
    of ``database``'s laid-out lineitem (``python -m bench layout-effect`` makes one), rewritten in the session
    the rows were routed in; and the files of the laid-out lineitem."""
    from bench.workloads import instances
    from rewriter.rewrite import RewriteContext, rewrite
    from rewriter.session import SessionSettings
    from stats.loader import StatsLoader
    from stats.store import StatsStore

    loader = StatsLoader(StatsStore(config.paths.stats), Lister(600))
    layout = loader.block_layout(f"{database}.{TABLE}")
    if layout is None:
        raise DatasetError(f"{database}.{TABLE} has no applied layout; make one with: python -m bench layout-effect")
    ctx = RewriteContext(loader, database=database, session=SessionSettings(ansi=layout.ansi, time_zone=layout.time_zone),
                         **config.rewriter.context_options())
    out = []
    for name, sql in instances("tpch", seed, per_query):
        for t in rewrite(sql, ctx).decision.tables:
            if t.table == f"{database}.{TABLE}" and t.files_skipped:
                out.append((name, t.files_skipped, t.files_by_name_range, t.name_ranges))
    stats = loader.table_stats(f"{database}.{TABLE}")
    return out, 0 if stats is None else stats.n_files


def measure(config: Config, environ: Mapping[str, str], source_db: str, files: int, repeat: int, output: Path,
            laid_out: str | None = None) -> int:
    source = config.paths.warehouse / source_db / TABLE
    if not source.is_dir():
        raise DatasetError(f"no {TABLE} in {config.paths.warehouse / source_db}; create the dataset with: make dataset "
                           "SUITE=tpch SF=1 LAYOUT=tuned")
    workload, laid_out_files = workload_runs(config, laid_out, seed=2, per_query=10) if laid_out else ([], 0)
    folder = _folder(config, files)
    _make_files(source, folder, files)
    location = f"file:{folder.resolve()}"
    java_executable(environ)
    from backend.spark_session import spark_session

    queries = {"scan": "SELECT sum(l_quantity), count(*) FROM lineitem", "q06": select_queries("tpch", ["q06"])["q06"]}
    spark = spark_session(config, "dipper-name-ranges")
    try:
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
        spark.sql(f"DROP TABLE IF EXISTS {DATABASE}.{TABLE}")
        spark.sql(f"CREATE TABLE {DATABASE}.{TABLE} USING parquet LOCATION '{location}'")
        spark.sql(f"USE {DATABASE}")
        path = spark.sql(f"SELECT _metadata.file_path FROM {TABLE} LIMIT 1").collect()[0][0]
        stats, layout = _table(path.rpartition("/")[0])
        meter = CpuMeter(spark)
        rows = []
        for share, runs in SKIPS:
            skip = skip_mask(stats.n_files, share, runs)
            every = name_ranges(stats, skip, layout, max_runs=stats.n_files)
            if every is None or not every.covered[skip].all():
                raise DatasetError(f"the ranges do not cover the {int(skip.sum())} skipped block files")
            ranges = name_ranges(stats, skip, layout)
            forms = {"keys": prune_filter(stats, skip), "ranges": prune_filter(stats, skip, ranges),
                     "every run a range": prune_filter(stats, skip, every)}
            if len(every.runs) <= MAX_RUNS:
                del forms["every run a range"]  # the same text as "ranges"
            row = {"share": share, "runs": runs, "skipped": int(skip.sum()), "ranges": len(ranges.runs) if ranges else 0,
                   "bytes": {f: len(t.encode()) for f, t in forms.items()}}
            texts = {(q, f): wrap(sql, t) for q, sql in queries.items() for f, t in forms.items()}
            for q, sql in queries.items():
                texts[(q, "unrewritten")] = sql
            plan = {}
            for f in ("unrewritten", *forms):
                plan_seconds(spark, texts[("q06", f)])
                plan[f] = statistics.median(plan_seconds(spark, texts[("q06", f)]) for _ in range(repeat))
            row["plan_ms"] = {f: s * 1000 for f, s in plan.items()}
            times: dict[tuple[str, str], list[tuple[float, float]]] = {k: [] for k in texts}
            results: dict[tuple[str, str], list] = {}
            for round_ in range(repeat + 1):
                for key, text in texts.items():
                    wall, cpu, got = timed_run(spark, meter, text)
                    results[key] = got
                    if round_:
                        times[key].append((wall, cpu))
            for q in queries:
                if any(results[(q, "keys")] != results[(q, f)] for f in forms):
                    raise DatasetError(f"{q}: the key list and the name ranges returned different rows")
            row["run"] = {f"{q} {f}": (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
                          for (q, f), v in times.items()}
            rows.append(row)
            b = row["bytes"]
            print(f"{share:.0%} in {runs} runs: {row['skipped']} files skipped, SQL {b['keys']:,} -> {b['ranges']:,} B, "
                  f"planning {plan['keys'] * 1000:.0f} -> {plan['ranges'] * 1000:.0f} ms; scan "
                  f"{row['run']['scan keys'][1]:.2f} -> {row['run']['scan ranges'][1]:.2f} s CPU", flush=True)
    finally:
        spark.stop()
    plot = output.with_suffix(".png")
    output.with_suffix(".json").write_text(json.dumps({"rows": rows, "workload": workload}, indent=1) + "\n")
    output.write_text(_report(source_db, stats, repeat, rows, plot.name, laid_out, workload, laid_out_files))
    _plot(plot, rows, stats.n_files)
    print(f"wrote {output}")
    return 0


def _report(source_db: str, stats: TableStats, repeat: int, rows: list[dict], plot: str, laid_out: str | None,
            workload: list[tuple[str, int, int, int]], laid_out_files: int) -> str:
    n = stats.n_files
    lines = [
        "# Name ranges against keys in the prune filter (issue 15, part 6)", "",
        f"Measured {datetime.date.today().isoformat()} by `python -m bench name-ranges --source {source_db} --files {n} "
        f"--repeat {repeat}` on {platform.machine()}, 2 cores. The table: `{source_db}.lineitem` split in its stored "
        f"order into {n} files named as `layout apply` names blocks ({int(stats.sizes.sum()) / 1e6:.0f} MB), with a "
        "block-layout record describing every file. Each skip is a share of the files in R runs of consecutive "
        "blocks spread over the table (a qd-tree's ruled-out subtrees are such runs); both forms skip the same "
        f"files and return the same rows. Times are medians of {repeat} interleaved rounds after a warm-up.", "",
        f"At most {MAX_RUNS} runs become ranges (the longest; `rewriter/name_ranges.py`); the last columns give the "
        "filter with every run a range, where there are more.", "",
        "| skipped | runs | ranges | SQL bytes: keys / ranges | bytes per skipped file: keys / ranges "
        "| planning ms q06: unrewritten / keys / ranges | scan CPU s: unrewritten / keys / ranges "
        "| scan wall s: keys / ranges | q06 wall s: keys / ranges | every run a range: SQL bytes, planning ms, "
        "scan CPU s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        b, p, t = r["bytes"], r["plan_ms"], r["run"]
        every = "every run a range"
        extra = f"{b[every]:,}, {p[every]:.0f}, {t['scan ' + every][1]:.2f}" if every in b else "(the same)"
        lines.append(
            f"| {r['skipped']:,} ({r['share']:.0%}) | {r['runs']} | {r['ranges']} | {b['keys']:,} / {b['ranges']:,} | "
            f"{b['keys'] / r['skipped']:.0f} / {b['ranges'] / r['skipped']:.1f} | "
            f"{p['unrewritten']:.0f} / {p['keys']:.0f} / {p['ranges']:.0f} | "
            f"{t['scan unrewritten'][1]:.2f} / {t['scan keys'][1]:.2f} / {t['scan ranges'][1]:.2f} | "
            f"{t['scan keys'][0]:.2f} / {t['scan ranges'][0]:.2f} | {t['q06 keys'][0]:.2f} / {t['q06 ranges'][0]:.2f} | "
            f"{extra} |")
    lines += ["", f"![SQL bytes, planning and scan time]({plot})", ""]
    if laid_out:
        skipped, ranged = sum(w[1] for w in workload), sum(w[2] for w in workload)
        runs = sorted(w[3] for w in workload)
        lines += [f"## On a qd-tree layout: `{laid_out}.{TABLE}`", "",
                  f"The TPC-H test instances (seed 2, 10 per query) rewritten on the applied layout "
                  f"(`python -m bench layout-effect`) in the session its rows were routed in: {len(workload)} statements "
                  f"skip some of its {laid_out_files} block files, {skipped:,} skipped files in all, "
                  f"{ranged:,} ({ranged / max(1, skipped):.0%}) of them named by ranges; ranges per statement: "
                  f"median {runs[len(runs) // 2] if runs else 0}, max {runs[-1] if runs else 0}.", "",
                  "| query | statements | files skipped | named by ranges | ranges (max) |", "|---|---:|---:|---:|---:|"]
        for q in sorted({w[0].split("#")[0] for w in workload}):
            mine = [w for w in workload if w[0].split("#")[0] == q]
            lines.append(f"| {q} | {len(mine)} | {sum(w[1] for w in mine):,} | {sum(w[2] for w in mine):,} | "
                         f"{max(w[3] for w in mine)} |")
        lines.append("")
    return "\n".join(lines)


def _plot(path: Path, rows: list[dict], files: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['share']:.0%}/{r['runs']}" for r in rows]
    x = np.arange(len(rows))
    forms = (("keys", -0.27), ("ranges", 0), ("every run a range", 0.27))
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    panels = (("prune filter SQL bytes", lambda r, f: r["bytes"].get(f)),
              ("planning ms, TPC-H q06", lambda r, f: r["plan_ms"].get(f)),
              ("scan executor CPU s", lambda r, f: r["run"].get(f"scan {f}", (None, None))[1]))
    for ax, (label, value) in zip(axes, panels):
        for form, offset in forms:
            ax.bar(x + offset, [value(r, form) or 0 for r in rows], width=0.27, label=form)
        ax.set_ylabel(label)
        ax.set_xticks(x, labels)
        ax.set_xlabel(f"share of {files} files skipped / runs")
        ax.grid(alpha=0.3, axis="y")
    axes[0].set_yscale("log")
    axes[2].plot(x, [r["run"]["scan unrewritten"][1] for r in rows], color="black", marker="_", linestyle="",
                 markersize=20, label="unrewritten (reads every file)")
    for ax in axes:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
