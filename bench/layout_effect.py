"""``python -m bench layout-effect``: a qd-tree layout applied for real, and what it makes Dipper read on query
instances it was not learned on (issue 15's measurements after ``apply``).

1. **A copy to lay out.** Database ``<source>_qdtree`` holds the source dataset's tables (the same folders)
   except the laid-out table, which is copied, so ``apply`` leaves the benchmark dataset as it was.
   Statistics are collected for it.
2. **Plan and apply** on the training instances (TPC-H substitution parameters, ``bench/workloads.py``),
   timed.
3. **Per test instance** (another seed): the share of the table's bytes Dipper keeps on the source layout and
   on the qd-tree layout (the decision records, no query run), the files the block descriptions remove beyond
   statistics, and the what-if's prediction for the same scans (rows of the blocks holding a matching row of
   a held-out sample).
4. **On Spark**, the first instance of each query: the original and Dipper's rewrite on the qd-tree layout,
   results compared, wall time and the table's files Spark read, one run each after a warm-up.

Writes ``docs/layout/<source>-<table>.md`` (with the CSV and a plot beside it). Resumable: a copy already
laid out is measured again, not rewritten.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import platform
import shutil
import time
from pathlib import Path

import numpy as np

from bench.workloads import instances
from dipper.config import Config
from dipper.errors import DatasetError

DOCS = Path(__file__).resolve().parent.parent / "docs" / "layout"


@dataclasses.dataclass(frozen=True)
class Row:
    name: str  # q06#3
    source_share: float  # of the table's bytes, Dipper on the source layout
    qdtree_share: float  # Dipper on the qd-tree layout
    predicted: float  # the what-if's share of rows for this scan (mean over the statement's scans)
    block_files: int  # files the block descriptions removed beyond statistics
    seconds_spark: float | None = None
    seconds_dipper: float | None = None
    files_spark: int | None = None
    files_dipper: int | None = None
    identical: bool | None = None
    predicted_ideal: float = float("nan")  # the what-if's ideal: a block skipped when none of its rows matches


def measure(config: Config, source: str, table: str, train_seed: int, test_seed: int, per_query: int,
            sample_rows: int, min_block_rows: int | None, on_spark: bool = True, output: Path = DOCS) -> Path:
    from backend.sql_client import backend_sql
    from layout.apply import apply, backend_session
    from rewriter.session import SessionSettings
    from layout.joined import JoinedKeys
    from layout.sample import sample_rows as draw
    from layout.whatif import dipper_today, what_if
    from layout.workload import Statement, table_workload
    from stats.collect import collect
    from stats.freshness import Lister
    from stats.loader import StatsLoader
    from stats.store import StatsStore

    suite = source.split("_", 1)[0]
    target = f"{source}_qdtree"
    store = StatsStore(config.paths.stats)
    loader = StatsLoader(store, Lister(0))
    source_tables = sorted(t.rpartition(".")[2] for t in loader.schemas() if t.startswith(source + "."))
    if table not in source_tables:
        raise DatasetError(f"no statistics for {source}.{table}; generate the dataset first (python -m bench generate)")
    train = [Statement(sql, target) for _, sql in instances(suite, train_seed, per_query)]
    test = [(name, sql) for name, sql in instances(suite, test_seed, per_query)
            if sql not in {s.sql for s in train}]
    timings: dict[str, float] = {}
    with backend_sql(config, "dipper-layout-effect") as run:
        if loader.block_layout(f"{target}.{table}") is None:
            _copy(run, config, source, target, table, source_tables)
            started = time.monotonic()
            collect(run, store, [f"{target}.{t}" for t in source_tables])
            timings["statistics of the copy"] = time.monotonic() - started
            loader = StatsLoader(store, Lister(0))
            started = time.monotonic()
            p = _plan(loader, train, f"{target}.{table}", sample_rows, min_block_rows, seed=0)
            timings["plan"] = time.monotonic() - started
            print(f"plan: {len(p.tree.blocks)} blocks in {timings['plan']:.0f}s; applying", flush=True)
            done = apply(run, store, loader, p)
            timings["apply (route, write, swap, statistics)"] = done.seconds
            print(f"applied: {done.files} files, {done.rows:,} rows in {done.seconds:.0f}s", flush=True)
            shutil.rmtree(done.old_location.removeprefix("file:"), ignore_errors=True)  # the copy's old files
        loader = StatsLoader(store, Lister(0))
        ansi, zone = backend_session(run)  # what the proxy learns of a session on this backend
        session = SessionSettings(ansi=ansi, time_zone=zone)
        options = config.rewriter.context_options()
        rows = _shares(loader, test, source, target, table, session, options)
        p = _plan(loader, train, f"{target}.{table}", sample_rows, min_block_rows, seed=0, stats_of=f"{source}.{table}")
        statements = [Statement(sql, target, session=session) for _, sql in test]  # as _shares rewrote them
        replay = table_workload(statements, f"{target}.{table}", loader)
        keys = JoinedKeys(loader)
        holdout = draw(loader.table_stats(f"{source}.{table}", fresh_listing=True), sorted(set(p.workload.columns) | set(replay.columns)),
                       sample_rows, 1)
        today = dipper_today(replay, statements, loader, options)
        w = what_if(p, holdout, keys, today, loader, replay, 0, routed=session)
        shares = {s.name: _per_statement(replay, s.read, len(test)) for s in w.layouts}
        rows = [dataclasses.replace(r, predicted=shares["qd-tree"][i], predicted_ideal=shares["qd-tree, ideal"][i])
                for i, r in enumerate(rows)]
        if on_spark:
            rows = _on_spark(run, loader, rows, test, target, table, session, options)
    return _write(output, source, table, rows, timings, len(train), len(test), p)


def _copy(run, config: Config, source: str, target: str, table: str, tables: list[str]) -> None:  # noqa: ANN001
    from stats.collect import describe_table

    run(f"CREATE DATABASE IF NOT EXISTS {target}")
    for t in tables:
        location = describe_table(run, f"{source}.{t}").location
        if t == table:
            copy = Path(config.paths.warehouse).resolve() / target / t
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(location.removeprefix("file:"), copy)
            location = f"file:{copy}"
        run(f"DROP TABLE IF EXISTS {target}.{t}")
        run(f"CREATE TABLE {target}.{t} USING parquet LOCATION '{location}'")


def _plan(loader, train, table: str, sample_rows: int, min_block_rows: int | None, seed: int,  # noqa: ANN001
          stats_of: str | None = None):  # noqa: ANN202
    """The plan apply used (the same workload, sample seed and block size give the same tree), learned on
    the copy's statistics; ``stats_of`` draws the sample from another table of the same rows instead (after
    apply the copy's files are the blocks, and a sample of them is ordered otherwise)."""
    from layout.joined import JoinedKeys
    from layout.sample import sample_rows as draw
    from layout.whatif import min_block_rows as min_rows_of, plan
    from layout.workload import table_workload

    workload = table_workload(train, table, loader)
    stats = loader.table_stats(stats_of or table, fresh_listing=True)
    sample = draw(stats, list(workload.columns), sample_rows, seed)
    min_rows = min_rows_of(table, stats.n_files, sample, min_block_rows, None)
    return plan(workload, sample, min_rows, JoinedKeys(loader))


def _shares(loader, test, source: str, target: str, table: str, session, options) -> list[Row]:  # noqa: ANN001
    from rewriter.rewrite import RewriteContext, rewrite

    rows = []
    for name, sql in test:
        shares, block_files = [], 0
        for db in (source, target):
            d = rewrite(sql, RewriteContext(loader, database=db, session=session, **options)).decision
            if d.error:
                raise DatasetError(f"{name}: the rewriter failed on {db}: {d.error}")
            refs = [t for t in d.tables if t.table == f"{db}.{table}" and t.has_stats and t.bytes_total]
            shares.append(sum(t.bytes_kept for t in refs) / max(1, sum(t.bytes_total for t in refs)) if refs else 1.0)
            if db == target:
                block_files = sum(e.files_removed for t in refs for e in t.predicates
                                  if e.sql.startswith("block descriptions: "))
        rows.append(Row(name, shares[0], shares[1], float("nan"), block_files))
    return rows


def _per_statement(w, read: np.ndarray, n: int) -> list[float]:  # noqa: ANN001 - TableWorkload
    """The mean predicted share of each statement's scans of the table (NaN where it has none)."""
    sums, counts = np.zeros(n), np.zeros(n)
    for q, scan in enumerate(w.scans):
        sums[scan.statement] += read[q]
        counts[scan.statement] += 1
    return [float(s / c) if c else float("nan") for s, c in zip(sums, counts)]


def _on_spark(run, loader, rows: list[Row], test, target: str, table: str, session, options) -> list[Row]:  # noqa: ANN001
    """The first instance of each query, original against rewritten on the qd-tree layout."""
    from rewriter.rewrite import RewriteContext, rewrite

    out, queries = [], set()
    for row, (name, sql) in zip(rows, test):
        query = name.partition("#")[0]  # q06#3: the fourth instance of q06
        if query in queries:
            out.append(row)
            continue
        queries.add(query)
        rewritten = rewrite(sql, RewriteContext(loader, database=target, session=session, **options))
        run(f"USE {target}")
        try:
            run(sql)  # warm-up
            started = time.perf_counter()
            want = run(sql)
            spark = time.perf_counter() - started
            started = time.perf_counter()
            got = run(rewritten.sql)
            dipper = time.perf_counter() - started
        finally:
            run("USE default")
        d = rewritten.decision
        kept = sum(t.files_kept for t in d.tables if t.table == f"{target}.{table}")
        total = sum(t.files_total for t in d.tables if t.table == f"{target}.{table}")
        same = sorted(map(repr, want)) == sorted(map(repr, got))
        print(f"{row.name}: spark {spark:.2f}s, dipper {dipper:.2f}s, files {kept}/{total}, "
              f"{'identical' if same else 'DIFFERENT'}", flush=True)
        out.append(dataclasses.replace(row, seconds_spark=spark, seconds_dipper=dipper, files_spark=total,
                                       files_dipper=kept, identical=same))
    return out


def _write(output: Path, source: str, table: str, rows: list[Row], timings: dict[str, float], n_train: int,
           n_test: int, p) -> Path:  # noqa: ANN001
    output.mkdir(parents=True, exist_ok=True)
    stem = f"{source}-{table}"
    with (output / f"{stem}.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow([field.name for field in dataclasses.fields(Row)])
        for r in rows:
            writer.writerow(dataclasses.astuple(r))
    _plot(output / f"{stem}.png", rows, source, table)
    reads = np.array([not np.isnan(r.predicted) for r in rows])  # the what-if predicts only scans of the table
    src = np.array([r.source_share for r in rows])[reads]
    qd = np.array([r.qdtree_share for r in rows])[reads]
    pred = np.array([r.predicted for r in rows])[reads]
    ideal = np.array([r.predicted_ideal for r in rows])[reads]
    ran = [r for r in rows if r.identical is not None]
    lines = [f"# {source}.{table} laid out as a qd-tree, measured after apply", "",
             f"{datetime.date.today().isoformat()}, {platform.machine()}, `python -m bench layout-effect --source "
             f"{source} --table {table}`: planned on {n_train} training instances, {len(p.tree.blocks)} blocks; "
             f"measured on {n_test} unseen instances (another seed; instances equal to a training one left out), "
             f"{int(reads.sum())} of which read {table}: the shares below are theirs.", "",
             "| measure | value |", "|---|---:|",
             f"| bytes of {table} Dipper keeps, source layout (mean share) | {src.mean():.1%} |",
             f"| bytes of {table} Dipper keeps, qd-tree layout (mean share) | {qd.mean():.1%} |",
             f"| what-if prediction for the qd-tree, judged as Dipper judges files (mean share of rows) | {pred.mean():.1%} |",
             f"| what-if ideal: blocks without a matching row skipped (mean share of rows) | {ideal.mean():.1%} |",
             f"| instances where the qd-tree layout keeps less / more | {(qd < src - 1e-9).sum()} / {(qd > src + 1e-9).sum()} |",
             f"| instances whose block descriptions removed files beyond statistics | {sum(r.block_files > 0 for r in rows)} |",
             f"| prediction error, mean absolute (share points) | {np.abs(pred - qd).mean() * 100:.1f} |",
             f"| ideal's error, mean absolute (share points) | {np.abs(ideal - qd).mean() * 100:.1f} |"]
    lines += [f"| {what} | {seconds:.0f} s |" for what, seconds in timings.items()]
    if ran:
        lines += ["", "On Spark (the first instance of each query, one run after a warm-up, qd-tree layout):", "",
                  "| instance | Spark s | Dipper s | speed-up | files read / all | results |", "|---|---:|---:|---:|---:|---|"]
        for r in ran:
            lines.append(f"| {r.name} | {r.seconds_spark:.2f} | {r.seconds_dipper:.2f} | "
                         f"{r.seconds_spark / max(r.seconds_dipper, 1e-9):.2f}x | {r.files_dipper} / {r.files_spark} | "
                         f"{'identical' if r.identical else 'DIFFERENT'} |")
    lines += ["", f"Per instance: [{stem}.csv]({stem}.csv); plot: ![shares]({stem}.png)", ""]
    path = output / f"{stem}.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    if ran and not all(r.identical for r in ran):
        raise DatasetError(f"a rewritten query returned other rows than the original: see {path}")
    return path


def _plot(path: Path, rows: list[Row], source: str, table: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if not np.isnan(r.predicted)]  # the instances that read the table
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for values, label in (([r.source_share for r in rows], f"Dipper on {source}"),
                          ([r.qdtree_share for r in rows], "Dipper on the qd-tree layout"),
                          ([r.predicted for r in rows if not np.isnan(r.predicted)], "what-if prediction (rows)"),
                          ([r.predicted_ideal for r in rows if not np.isnan(r.predicted_ideal)], "what-if ideal (rows)")):
        v = np.sort(np.array(values))
        ax.step(v, np.arange(1, len(v) + 1) / max(1, len(v)), where="post", label=label)
    ax.set_xlabel(f"share of {table} read")
    ax.set_ylabel("share of unseen instances")
    ax.set_title(f"{source}.{table}: qd-tree applied, unseen instances")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
