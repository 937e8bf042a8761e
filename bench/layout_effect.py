"""``python -m bench layout-effect``: qd-tree layouts applied for real, and what they make Dipper read on
query instances they were not learned on (issue 15's measurements after ``apply``).

1. **A copy to lay out.** Database ``<source>_qdtree`` holds the source dataset's tables (the same folders)
   except the laid-out tables, which are copied, so ``apply`` leaves the benchmark dataset as it was.
   Their statistics are the source's, carried over to the copies' files (``stats/copied.py``; collected
   where they cannot be).
2. **Plan and apply** each laid-out table on the training instances (``bench/workloads.py``: TPC-H's
   substitution parameters, TPC-DS's literals redrawn from the data), timed.
3. **Per test instance** (another seed), from the decision records (no query run): for each laid-out table,
   the share of its bytes Dipper keeps on the source layout and on the qd-tree layout, the files the block
   descriptions remove beyond statistics, and the what-if's prediction for the same scans; for the whole
   statement, its INPUTCUT (bytes of every table it reads / bytes Dipper keeps) on either layout.
4. **On Spark**, the first instance of each query: the original and Dipper's rewrite on the qd-tree layout,
   results compared, wall time and the laid-out tables' files Spark read, one run each after a warm-up.

Writes ``docs/results/layout/<source>-<tables>.md`` (with the CSVs and a plot beside it). Resumable: a table already
laid out in the copy is measured again, not rewritten.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import platform
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from bench.execute import inputcut
from bench.workloads import instances, training_and_unseen, unlike
from dipper.config import Config
from dipper.errors import DatasetError
from layout.qdtree import DEFAULT_WEIGH, check_file_cost

if TYPE_CHECKING:
    from layout.lead import LeadRanges
    from rewriter.decision import Decision
    from stats.store import StatsStore

DOCS = Path(__file__).resolve().parent.parent / "docs" / "results" / "layout"


@dataclasses.dataclass(frozen=True)
class Row:
    """One laid-out table in one test instance."""

    name: str  # q06#3
    table: str
    source_share: float  # of the table's bytes, Dipper on the source layout (1.0 where the instance does not read it)
    qdtree_share: float  # Dipper on the qd-tree layout
    predicted: float  # the what-if's share of rows for this scan (mean over the statement's scans; NaN: no scan)
    block_files: int  # files the block descriptions removed beyond statistics
    predicted_ideal: float = float("nan")  # the what-if's ideal: a block skipped when none of its rows matches
    # Of the table's bytes, what Spark's scans of the rewritten query read on the qd-tree layout (its scan
    # metrics; the first instance of each query, NaN elsewhere or when the backend is reached over Thrift).
    spark_share: float = float("nan")
    reads: bool = True  # the instance reads the table (Dipper's decision on either layout has a reference to it)


@dataclasses.dataclass(frozen=True)
class Query:
    """One test instance, every table it reads."""

    name: str
    source_cut: float  # INPUTCUT: bytes of every table the statement reads / bytes Dipper keeps, source layout
    qdtree_cut: float  # the same on the copy with the laid-out tables
    reads_laid_out: bool  # the statement reads one of the laid-out tables
    # Bytes of every table the statement reads as the source layout holds them / bytes Dipper keeps on the
    # copy. Smaller blocks compress worse, so the copy's tables are larger than the source's; this measure
    # does not count that growth as bytes skipped.
    qdtree_cut_of_source: float
    seconds_spark: float | None = None
    seconds_dipper: float | None = None
    files_spark: int | None = None  # files of the laid-out tables
    files_dipper: int | None = None
    identical: bool | None = None


def measure(config: Config, source: str, tables: list[str], train_seed: int, test_seed: int, per_query: int,
            sample_rows: int, min_block_rows: int | None, on_spark: bool = True, output: Path = DOCS,
            queries: list[str] | None = None, spark_queries: list[str] | None = None,
            min_block_mb: Mapping[str, float] | None = None, lead_ranges: Mapping[str, Sequence[LeadRanges]] | None = None,
            weigh: str = DEFAULT_WEIGH, file_cost_rows: float = 0.0, target: str | None = None,
            predict: bool = True, merge_seed: int | None = None) -> Path:
    """``min_block_mb``: the minimum block in MB per table name, under ``"*"`` for every other table
    (exclusive of ``min_block_rows``); a table given neither gets its mean file size today. ``lead_ranges``:
    per table name, the ranges its tree cuts first, outermost first (``layout/lead.py``). ``weigh``: how the greedy weighs the
    training scans (``TableWorkload.scan_weights``). ``file_cost_rows``: a file's cost in rows read, by which
    the blocks read together are merged (``qdtree.coarsen``; 0: none). ``target``: the copy's database
    (default ``<source>_qdtree``). ``predict``: also plan each table again for the what-if's prediction of its
    scans (GBs of memory per table: the senders read whole); without it, the report's prediction rows are "-".
    ``merge_seed``: the merge is judged on the instances of this seed that differ from the training ones
    (``whatif.plan``'s ``merge_on``), and the unseen instances are also those that differ from these."""
    from backend.sql_client import backend_sql
    from bench.redraw import TPCDS_TIME, Domains
    from layout.apply import apply, backend_session
    from layout.lead import check_column, check_levels
    from layout.whatif import check_merge_on
    from rewriter.session import SessionSettings
    from layout.workload import Resolutions, Statement, check_weigh
    from stats.blocks import pinning
    from stats.freshness import Lister
    from stats.loader import StatsLoader
    from stats.store import StatsStore

    mbs = dict(min_block_mb or {})
    unknown = sorted(set(mbs) - set(tables) - {"*"})
    if unknown:
        raise DatasetError(f"--min-block-mb names {', '.join(unknown)}, which no --table lays out")

    check_weigh(weigh)
    check_file_cost(file_cost_rows)
    if merge_seed is not None:
        check_merge_on(file_cost_rows, "--merge-seed")
    if merge_seed is not None and merge_seed in (train_seed, test_seed):
        raise DatasetError(f"--merge-seed {merge_seed} is the training or the test seed: held-out instances need a "
                           f"seed of their own")
    leads = {table: tuple(ranges) for table, ranges in (lead_ranges or {}).items()}
    unknown = sorted(set(leads) - set(tables))
    if unknown:
        raise DatasetError(f"--lead-ranges names {', '.join(unknown)}, which no --table lays out")
    for ranges in leads.values():
        check_levels(ranges)

    def block(table: str) -> tuple[int | None, float | None]:
        return min_block_rows, mbs.get(table, mbs.get("*"))

    suite = source.split("_", 1)[0]
    target = (target or f"{source}_qdtree").lower()
    if target == source.lower():
        raise DatasetError(f"--target {target} is the source dataset: the copy to lay out needs a database of its own")
    store = StatsStore(config.paths.stats)
    loader = StatsLoader(store, Lister(0))
    source_tables = sorted(t.rpartition(".")[2] for t in loader.schemas() if t.startswith(source + "."))
    for table in tables:
        if table not in source_tables:
            raise DatasetError(f"no statistics for {source}.{table}; generate the dataset first (python -m bench generate)")
        for lead in leads.get(table, ()):  # before anything is copied
            check_column(lead, loader.table_stats(f"{source}.{table}"), loader.table_stats)
    domains = Domains(loader, source, TPCDS_TIME) if suite == "tpcds" else None
    training, test = training_and_unseen(suite, train_seed, test_seed, per_query, queries, domains)
    train = [Statement(sql, target) for _, sql in training]
    merge_on = None
    if merge_seed is not None:
        held_out = unlike(instances(suite, merge_seed, per_query, queries, domains), training)
        test = unlike(test, held_out)  # unseen: by the tree and by its merge
        merge_on = [Statement(sql, target) for _, sql in held_out]
    unknown = sorted(set(spark_queries or ()) - {name.partition("#")[0] for name, _ in test})
    if unknown:
        raise DatasetError(f"--spark-queries names {', '.join(unknown)}, which no unseen instance is of "
                           f"(query names such as q03; with --queries, one of those)")
    timings: dict[str, float] = {}
    resolutions = Resolutions()  # each statement parsed and resolved once, for every table's workload
    with backend_sql(config, "dipper-layout-effect") as run:
        pending = [t for t in tables if loader.block_layout(f"{target}.{t}") is None]
        if pending:
            redefined = [t for t in source_tables if t not in tables or t in pending]
            started = time.monotonic()
            uncollected = copy_tables(run, source, target, redefined, pending,
                                      Path(config.paths.warehouse).resolve() / target, (store, store))
            timings["copy of the laid-out tables, statistics carried over"] = time.monotonic() - started
            started = time.monotonic()
            collect_as_source(run, store, store, source, target, uncollected)  # those not carried over
            timings["statistics of the copied tables"] = time.monotonic() - started
        for table in pending:
            loader = StatsLoader(store, Lister(0))
            started = time.monotonic()
            p = _plan(loader, train, f"{target}.{table}", sample_rows, block(table), seed=0, leads=leads.get(table, ()),
                      weigh=weigh, file_cost_rows=file_cost_rows, merge_on=merge_on, resolutions=resolutions)
            timings[f"{table}: plan"] = time.monotonic() - started
            print(f"{table}: plan of {len(p.tree.blocks)} blocks (the greedy's {p.greedy_blocks}, merged where a file "
                  f"costs more than the rows it saves) in {timings[f'{table}: plan']:.0f}s; applying", flush=True)
            done = apply(run, store, loader, p)
            timings[f"{table}: apply (route, write, swap, statistics)"] = done.seconds
            print(f"{table}: applied, {done.files} files, {done.rows:,} rows in {done.seconds:.0f}s", flush=True)
            voided = pinning(config.paths.stats, done.table)
            if voided:  # lay dimensions out before the tables cut on them (--table order)
                print(f"note: the joined cuts of {', '.join(voided)} on {done.table} no longer apply", flush=True)
            shutil.rmtree(done.old_location.removeprefix("file:"), ignore_errors=True)  # the copy's old files
        loader = StatsLoader(store, Lister(0))
        ansi, zone = backend_session(run)  # what the proxy learns of a session on this backend
        session = SessionSettings(ansi=ansi, time_zone=zone)
        options = config.rewriter.context_options()
        started = time.monotonic()
        print(f"deciding {len(test)} unseen instances on {source} and on {target}", flush=True)
        rows, statements = _shares(loader, test, source, target, tables, session, options)
        print(f"decided in {time.monotonic() - started:.0f}s", flush=True)
        blocks = {t: len(loader.block_layout(f"{target}.{t}").files) for t in tables}
        for i, table in enumerate(tables if predict else (), 1):
            started = time.monotonic()
            print(f"{table}: planning again to predict its scans ({i} of {len(tables)})", flush=True)
            rows = _predicted(loader, train, test, rows, source, target, table, sample_rows, block(table), session,
                                 options, leads.get(table, ()), weigh, file_cost_rows, merge_on, resolutions)
            print(f"{table}: predicted in {time.monotonic() - started:.0f}s", flush=True)
        if on_spark:
            statements, rows = _on_spark(run, loader, statements, rows, test, target, tables, session, options,
                                         spark_queries)
    options = [("--train-seed", train_seed), ("--test-seed", test_seed), ("--per-query", per_query),
               ("--queries", ",".join(queries or [])), ("--sample-rows", sample_rows),
               ("--min-block-rows", min_block_rows), ("--min-block-mb", " --min-block-mb ".join(
                   f"{t}={mb!r}" if t != "*" else repr(mb) for t, mb in mbs.items())),
               ("--lead-ranges", " --lead-ranges ".join(f"{t}={lead}" for t, ranges in leads.items() for lead in ranges)),
               ("--spark-queries", ",".join(spark_queries or [])), ("--weigh", weigh),
               ("--file-cost-rows", f"{file_cost_rows:g}"), ("--merge-seed", merge_seed)]
    command = " ".join(["python -m bench layout-effect", f"--source {source}", f"--target {target}",
                        *(f"--table {t}" for t in tables),
                        *(f"{flag} {value}" for flag, value in options if value not in (None, "")),
                        *([] if on_spark else ["--no-spark"]), *([] if predict else ["--no-predict"])])
    # every option, so the report says how to repeat it (with --no-predict, not checked against the plans applied)
    return _write(output, command, source, tables, rows, statements, timings, len(train), len(test), blocks)


def _predicted(loader, train, test, rows: list[Row], source: str, target: str, table: str, sample_rows: int,  # noqa: ANN001
               block: tuple[int | None, float | None], session, options,  # noqa: ANN001
               leads: Sequence[LeadRanges] = (), weigh: str = DEFAULT_WEIGH, file_cost_rows: float = 0.0,
               merge_on=None, resolutions=None) -> list[Row]:  # noqa: ANN001
    """``rows`` with the what-if's prediction for ``table``'s scans, by the plan ``apply`` used (planned again;
    an error if the table was laid out by another)."""
    from layout.joined import JoinedKeys
    from layout.lead import in_database
    from layout.sample import sample_rows as draw
    from layout.whatif import dipper_today, sample_columns, what_if
    from layout.workload import Statement, table_workload

    p = _plan(loader, train, f"{target}.{table}", sample_rows, block, seed=0, stats_of=f"{source}.{table}",
              leads=in_database(leads, target),  # a joined lead's sender as laid out, not the source's
              weigh=weigh, file_cost_rows=file_cost_rows, merge_on=merge_on, resolutions=resolutions)
    applied = loader.block_layout(f"{target}.{table}")
    paths = {tuple((s.cut, s.holds) for s in b.path) for b in p.tree.blocks}
    if applied is None or len(applied.cuts) != len(p.workload.cuts) or \
            not {steps for _, _, steps in applied.files.values()} <= paths:
        raise DatasetError(f"{target}.{table} was laid out by another plan (other options, --weigh and --file-cost-rows "
                           f"included, or queries) than this "
                           f"run makes again to predict it; run with the options it was applied with, or drop "
                           f"database {target} to lay it out anew")
    statements = [Statement(sql, target, session=session) for _, sql in test]  # as _shares rewrote them
    replay = table_workload(statements, f"{target}.{table}", loader, resolutions)
    holdout = draw(loader.table_stats(f"{source}.{table}", fresh_listing=True),
                   sample_columns(p.workload, replay), sample_rows, 1)
    today, today_files = dipper_today(replay, statements, loader, options)
    w = what_if(p, holdout, JoinedKeys(loader), today, loader, replay, 0, routed=session, today_files=today_files)
    shares = {s.name: _per_statement(replay, s.read, len(test)) for s in w.layouts}
    index = {name: i for i, (name, _) in enumerate(test)}
    return [dataclasses.replace(r, predicted=shares["qd-tree"][index[r.name]],
                                   predicted_ideal=shares["qd-tree, ideal"][index[r.name]])
               if r.table == table else r for r in rows]


def copy_tables(backend, source: str, target: str, tables: list[str], copied: list[str], folder: Path,  # noqa: ANN001
                statistics: tuple[StatsStore, StatsStore] | None = None) -> list[str]:
    """Database ``target``'s definitions of ``tables`` (SparkSession or SQL runner): over ``source``'s folders,
    but ``copied``'s over copies of them under ``folder`` (which ``apply`` may then move; the source stays).
    A copied table's earlier laid-out versions in ``folder`` (``apply``'s ``<name>.layout-*``, left for readers
    that a benchmark does not have) are removed: the table is copied again to be laid out anew.

    With ``statistics`` (the source's store, the target's), each table's statistics are carried over from the
    source's (``stats/copied.py`` says when that is sound) and committed at once; returns the tables whose
    statistics could not be carried, for :func:`collect_as_source` (all of them without ``statistics``)."""
    from backend.catalog import define_parquet_table
    from stats.collect import as_runner, describe_table
    from stats.copied import carried, copy_files, renamed

    run = as_runner(backend)
    run(f"CREATE DATABASE IF NOT EXISTS {target}")
    snapshot = statistics[0].snapshot() if statistics is not None else None
    kept: dict[str, tuple | None] = {}
    for t in tables:
        location = describe_table(run, f"{source}.{t}").location
        copy = None
        if t in copied:
            destination = folder / t
            for old in [destination, *folder.glob(f"{t}.layout-*")]:
                shutil.rmtree(old, ignore_errors=True)
            copy = copy_files(snapshot, f"{source}.{t}", location, destination)
            location = f"file:{destination}"
        run(f"DROP TABLE IF EXISTS {target}.{t}")
        described = define_parquet_table(run, target, t, location)
        if snapshot is not None:
            kept[t] = carried(copy, described) if copy is not None else renamed(snapshot, f"{source}.{t}", described)
    if statistics is None:
        return list(tables)
    statistics[1].update(lambda _: ({f"{target}.{t}": s for t, s in kept.items() if s is not None}, ()))
    return [t for t in tables if kept[t] is None]


def collect_as_source(backend, source_store: StatsStore, store: StatsStore, source: str, target: str,  # noqa: ANN001
                      tables: list[str]) -> None:
    """Collect the statistics of ``target``'s ``tables`` into ``store`` with the statistic kinds (Bloom filters)
    the source's tables had in ``source_store``, so that both layouts are measured with the same kinds
    (``collect`` gives each table the columns it has); range-sets and value lists of the default sizes."""
    from stats.collect import collect

    if not tables:
        return
    snapshot = source_store.snapshot()
    kinds: dict[str, tuple[str, ...]] = {}
    for table in tables:
        entry = snapshot.entry(f"{source}.{table}")
        for kind, columns in (entry.indexes.items() if entry is not None else ()):
            kinds[kind] = tuple(dict.fromkeys(kinds.get(kind, ()) + tuple(columns)))
    collect(backend, store, [f"{target}.{t}" for t in tables], indexes=kinds, refresh=True)


def _plan(loader, train, table: str, sample_rows: int, block: tuple[int | None, float | None], seed: int,  # noqa: ANN001
          stats_of: str | None = None, leads: Sequence[LeadRanges] = (), weigh: str = DEFAULT_WEIGH,
          file_cost_rows: float = 0.0, merge_on=None, resolutions=None):  # noqa: ANN001,ANN202
    """The plan apply used (the same workload, sample seed and block size give the same tree), learned on
    the copy's statistics. ``block``: the minimum block in rows or in MB (neither: the table's mean file
    size). ``stats_of`` draws the sample from another table of the same rows instead (after apply the
    copy's files are the blocks, and a sample of them is ordered otherwise). ``leads``: ranges cut first;
    ``weigh``: how the greedy weighs the scans; ``file_cost_rows``: what merges blocks read together;
    ``merge_on``: held-out statements that judge the merge (None: the training ones); ``resolutions``: the
    statements' analyses shared with other tables' plans (``layout.workload.Resolutions``)."""
    from layout.joined import JoinedKeys
    from layout.lead import sampled_columns
    from layout.sample import sample_rows as draw
    from layout.whatif import min_block_rows as min_rows_of, plan, sample_columns
    from layout.workload import table_workload

    workload = table_workload(train, table, loader, resolutions)
    held_out = table_workload(merge_on, table, loader, resolutions) if merge_on is not None else None
    stats = loader.table_stats(stats_of or table, fresh_listing=True)
    sample = draw(stats, sampled_columns(sample_columns(workload, held_out), leads), sample_rows, seed)
    min_rows = min_rows_of(table, stats.n_files, sample, *block)
    return plan(workload, sample, min_rows, JoinedKeys(loader), leads, weigh, file_cost_rows, held_out)


def _shares(loader, test, source: str, target: str, tables: list[str], session, options  # noqa: ANN001
            ) -> tuple[list[Row], list[Query]]:
    """From the decision records on either layout: each laid-out table's kept share, and each instance's INPUTCUT."""
    from bench.workloads import decisions as decisions_of

    by_db = {db: decisions_of(loader, test, db, session, options) for db in (source, target)}
    rows, queries = [], []
    for i, (name, _) in enumerate(test):
        decisions = {db: by_db[db][i] for db in (source, target)}
        reads = False
        for table in tables:
            shares, block_files, table_read = [], 0, False
            for db in (source, target):
                refs = [t for t in decisions[db].tables if t.table == f"{db}.{table}" and t.has_stats and t.bytes_total]
                table_read = table_read or bool(refs)
                shares.append(sum(t.bytes_kept for t in refs) / max(1, sum(t.bytes_total for t in refs)) if refs else 1.0)
                if db == target:
                    block_files = sum(t.files_removed_by_blocks for t in refs)
            reads = reads or table_read
            rows.append(Row(name, table, shares[0], shares[1], float("nan"), block_files, reads=table_read))
        queries.append(statement_cuts(name, decisions[source], decisions[target], reads))
    return rows, queries


def statement_cuts(name: str, on_source: Decision, on_target: Decision, reads_laid_out: bool) -> Query:
    """One instance's INPUTCUT on either layout, and its bytes on the source layout against what Dipper keeps
    on the copy (``Query.qdtree_cut_of_source``)."""
    def bytes_of(decision: Decision) -> tuple[int, int]:
        refs = [t for t in decision.tables if t.has_stats]
        return sum(t.bytes_total for t in refs), sum(t.bytes_kept for t in refs)

    (source_total, source_kept), (target_total, target_kept) = bytes_of(on_source), bytes_of(on_target)
    return Query(name, inputcut(source_total, source_kept), inputcut(target_total, target_kept), reads_laid_out,
                 inputcut(source_total, target_kept))


def _per_statement(w, read: np.ndarray, n: int) -> list[float]:  # noqa: ANN001 - TableWorkload
    """The mean predicted share of each statement's scans of the table (NaN where it has none)."""
    sums, counts = np.zeros(n), np.zeros(n)
    for q, scan in enumerate(w.scans):
        sums[scan.statement] += read[q]
        counts[scan.statement] += 1
    return [float(s / c) if c else float("nan") for s, c in zip(sums, counts)]


def _on_spark(run, loader, queries: list[Query], rows: list[Row], test, target: str, tables: list[str],  # noqa: ANN001
              session, options, only: list[str] | None = None) -> tuple[list[Query], list[Row]]:  # noqa: ANN001
    """The first instance of each query (of ``only``, if given), original against rewritten on the qd-tree
    layout; with an in-process session, the bytes of each laid-out table its scans read."""
    from rewriter.rewrite import RewriteContext, rewrite

    out, seen, read = [], set(), {}
    laid_out = {f"{target}.{t}" for t in tables}
    to_run = {n.partition("#")[0] for n, _ in test if only is None or n.partition("#")[0] in only}
    for q, (name, sql) in zip(queries, test):
        query = name.partition("#")[0]  # q06#3: the fourth instance of q06
        if query in seen or query not in to_run:
            out.append(q)
            continue
        seen.add(query)
        print(f"on Spark: {name} ({len(seen)} of {len(to_run)})", flush=True)
        rewritten = rewrite(sql, RewriteContext(loader, database=target, session=session, **options))
        run(f"USE {target}")
        try:
            # Each text warmed up once: a statement's first run in a session pays for compiling and JIT-warming
            # its generated code (q88 at SF 10: 37-41 s cold against 12-18 s warm, original and rewrite alike),
            # and warming only the original charged that to the rewrite.
            _answer(run, sql, False)
            _answer(run, rewritten.sql, False)
            want, spark, _ = _answer(run, sql, False)
            got, dipper, metrics = _answer(run, rewritten.sql, True)
        finally:
            run("USE default")
        d = rewritten.decision
        for t in tables:
            total = sum(r.bytes_total for r in d.tables if r.table == f"{target}.{t}" and r.has_stats)
            if metrics is not None and total:
                read[(name, t)] = sum(m.bytes for m in metrics if m.table.endswith(f"{target}.{t}")) / total
        kept = sum(t.files_kept for t in d.tables if t.table in laid_out)
        total = sum(t.files_total for t in d.tables if t.table in laid_out)
        same = want == got
        print(f"{name}: spark {spark:.2f}s, dipper {dipper:.2f}s, files {kept}/{total}, "
              f"{'identical' if same else 'DIFFERENT'}{' (both raise)' if str(want).startswith('error: ') else ''}",
              flush=True)
        if not same:  # what differed, for the log: a difference seen once must be diagnosable afterwards
            print(f"  {name}: original {_brief(want, got)}; rewrite {_brief(got, want)}", flush=True)
        out.append(dataclasses.replace(q, seconds_spark=spark, seconds_dipper=dipper, files_spark=total,
                                       files_dipper=kept, identical=same))
    return out, [dataclasses.replace(r, spark_share=read[(r.name, r.table)]) if (r.name, r.table) in read else r
                 for r in rows]


def _brief(answer: object, other: object) -> str:
    """An answer of ``_answer`` for a log line: its error, or its row count and up to three rows the other
    answer lacks."""
    if not isinstance(answer, list):
        return str(answer)
    missing = [r for r in answer if not isinstance(other, list) or r not in set(other)][:3]
    return f"{len(answer)} rows" + (f", not in the other: {'; '.join(missing)}" if missing else "")


def _answer(run, sql: str, metered: bool) -> tuple[object, float, list | None]:  # noqa: ANN001
    """The statement's rows as the benchmark compares them (``bench/execute.py`` ``normalised``: a multiset,
    doubles to 10 significant digits, since another set of files changes the order Spark adds them in), or
    its error's first line (a redrawn literal can make a query fail, say a division by zero over an empty
    window: the rewrite must fail alike); seconds; with ``metered`` and an in-process session, the scan
    metrics."""
    from backend.scan_metrics import collect_with_metrics
    from bench.execute import normalised

    started = time.perf_counter()
    metrics = None
    try:
        if metered and hasattr(run, "spark"):
            rows, metrics = collect_with_metrics(run.spark.sql(sql))
            rows = [tuple(r) for r in rows]
        else:
            rows = run(sql)
        answer: object = [repr(r) for r in normalised(rows)]
    except Exception as e:  # noqa: BLE001 - the error is the answer to compare
        answer = f"error: {type(e).__name__}: {str(e).strip().splitlines()[0]}"
    return answer, time.perf_counter() - started, metrics


def _mean(values: np.ndarray, spelled: str) -> str:
    """The mean of the values known (a prediction is NaN where none was made), or "-"."""
    known = values[~np.isnan(values)]
    return spelled.format(known.mean()) if len(known) else "-"


def _write(output: Path, command: str, source: str, tables: list[str], rows: list[Row], queries: list[Query],
           timings: dict[str, float], n_train: int, n_test: int, blocks: Mapping[str, int]) -> Path:
    output.mkdir(parents=True, exist_ok=True)
    stem = f"{source}-{'+'.join(tables)}"
    for path, items, kind in ((output / f"{stem}.csv", rows, Row), (output / f"{stem}-queries.csv", queries, Query)):
        with path.open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow([field.name for field in dataclasses.fields(kind)])
            for r in items:
                writer.writerow(dataclasses.astuple(r))
    _plot(output / f"{stem}.png", rows, queries, source, tables)
    lines = [f"# {source}: {', '.join(tables)} laid out as qd-trees, measured after apply", "",
             f"{datetime.date.today().isoformat()}, {platform.machine()}, `{command}`: planned on {n_train} training "
             f"instances; measured on {n_test} unseen instances (another seed; instances equal to a training one, or "
             f"with --merge-seed to a held-out one, left out). Per table, the shares are those of the instances that read it.", "",
             "| measure | " + " | ".join(tables) + " |", "|---|" + "---:|" * len(tables)]
    columns = {}
    for table in tables:
        mine = [r for r in rows if r.table == table and r.reads]
        src, qd = np.array([r.source_share for r in mine]), np.array([r.qdtree_share for r in mine])
        pred, ideal = np.array([r.predicted for r in mine]), np.array([r.predicted_ideal for r in mine])
        columns[table] = [
            str(blocks[table]), str(len(mine)),
            f"{src.mean():.1%}" if mine else "-", f"{qd.mean():.1%}" if mine else "-",
            _mean(pred, "{:.1%}"), _mean(ideal, "{:.1%}"),
            f"{(qd < src - 1e-9).sum()} / {(qd > src + 1e-9).sum()}",
            str(sum(r.block_files > 0 for r in mine)),
            _mean(np.abs(pred - qd) * 100, "{:.1f}"), _mean(np.abs(ideal - qd) * 100, "{:.1f}")]
        ran = [r for r in mine if not np.isnan(r.spark_share)]
        sp, dq, dp = (np.array([getattr(r, f) for r in ran]) for f in ("spark_share", "qdtree_share", "predicted"))
        columns[table] += [str(len(ran)), f"{sp.mean():.1%} / {dq.mean():.1%} / {_mean(dp, '{:.1%}')}" if ran else "-",
                           _mean(np.abs(dp - sp) * 100, "{:.1f}")]  # predictions not made (NaN) left out
    labels = ["blocks", "instances that read it", "bytes Dipper keeps, source layout (mean share)",
              "bytes Dipper keeps, qd-tree layout (mean share)",
              "what-if prediction, judged as Dipper judges files (mean share of rows)",
              "what-if ideal: blocks without a matching row skipped (mean share of rows)",
              "instances where the qd-tree layout keeps less / more", "instances whose block descriptions removed files",
              "prediction error, mean absolute (share points)", "ideal's error, mean absolute (share points)",
              "instances run on Spark with scan metrics", "... bytes Spark's scans read / Dipper's decision / what-if (mean share)",
              "... what-if against Spark's scans, mean absolute error (share points)"]
    for i, label in enumerate(labels):
        lines.append(f"| {label} | " + " | ".join(columns[t][i] for t in tables) + " |")
    lines += ["", "INPUTCUT per instance (bytes of every table the statement reads / bytes Dipper keeps; \"qd-tree, of "
              "source bytes\": the statement's bytes as the source layout holds them / bytes Dipper keeps on the qd-tree "
              "layout, which does not count the laid-out tables' growth as bytes skipped):", "",
              "| instances | count | median, source | median, qd-tree | median, qd-tree of source bytes | >= 2x, source | "
              ">= 2x, qd-tree | >= 2x, qd-tree of source bytes | >= 10x, source | >= 10x, qd-tree | "
              ">= 10x, qd-tree of source bytes |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, group in (("all", queries), (f"reading {' or '.join(tables)}", [q for q in queries if q.reads_laid_out])):
        cuts = [np.array([getattr(q, f) for q in group]) for f in ("source_cut", "qdtree_cut", "qdtree_cut_of_source")]
        if len(group):
            lines.append(f"| {label} | {len(group)} | " + " | ".join(f"{np.median(c):.2f}x" for c in cuts) + " | " +
                         " | ".join(f"{(c >= bound).mean():.1%} ({int((c >= bound).sum())})"
                                    for bound in (2, 10) for c in cuts) + " |")
    if timings:
        lines += ["", "| job | seconds |", "|---|---:|"] + [f"| {what} | {seconds:.0f} |" for what, seconds in timings.items()]
    else:
        lines += ["", "Nothing was copied, planned or applied in this run: the tables were laid out by an earlier one "
                      "(its job times are in that run's report)."]
    ran = [q for q in queries if q.identical is not None]
    if ran:
        lines += ["", "On Spark (the first instance of each query, one run after a warm-up run of each text, qd-tree layout):", "",
                  "| instance | Spark s | Dipper s | speed-up | files of laid-out tables read / all | results |",
                  "|---|---:|---:|---:|---:|---|"]
        for q in ran:
            lines.append(f"| {q.name} | {q.seconds_spark:.2f} | {q.seconds_dipper:.2f} | "
                         f"{q.seconds_spark / max(q.seconds_dipper, 1e-9):.2f}x | {q.files_dipper} / {q.files_spark} | "
                         f"{'identical' if q.identical else 'DIFFERENT'} |")
    lines += ["", f"Per table and instance: [{stem}.csv]({stem}.csv); per instance: [{stem}-queries.csv]({stem}-queries.csv); "
              f"plot: ![shares]({stem}.png)", ""]
    path = output / f"{stem}.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    if ran and not all(q.identical for q in ran):
        raise DatasetError(f"a rewritten query returned other rows than the original: see {path}")
    return path


def _plot(path: Path, rows: list[Row], queries: list[Query], source: str, tables: list[str]) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(tables) + 1, figsize=(4.2 * (len(tables) + 1), 4.2), squeeze=False)
    for ax, table in zip(axes[0], tables):
        mine = [r for r in rows if r.table == table and r.reads]  # the instances that read it
        for values, label in (([r.source_share for r in mine], f"Dipper on {source}"),
                              ([r.qdtree_share for r in mine], "Dipper on the qd-tree"),
                              ([r.predicted for r in mine if not np.isnan(r.predicted)], "what-if prediction"),
                              ([r.predicted_ideal for r in mine if not np.isnan(r.predicted_ideal)], "what-if ideal")):
            _cdf(ax, values, label)
        ax.set_xlabel(f"share of {table} read")
        ax.set_title(table)
    ax = axes[0][-1]
    for values, label in (([q.source_cut for q in queries], f"Dipper on {source}"),
                          ([q.qdtree_cut for q in queries], "Dipper on the qd-trees")):
        _cdf(ax, [min(v, 1000.0) for v in values], label)
    ax.set_xscale("log")
    ax.set_xlabel("INPUTCUT (capped at 1000x)")
    ax.set_title("every table a statement reads")
    axes[0][0].set_ylabel("share of unseen instances")
    axes[0][0].legend(fontsize=8)
    axes[0][-1].legend(fontsize=8)
    fig.suptitle(f"{source}: qd-trees applied, unseen instances")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _cdf(ax, values: list[float], label: str) -> None:  # noqa: ANN001
    v = np.sort(np.array(values, dtype=float))
    ax.step(v, np.arange(1, len(v) + 1) / max(1, len(v)), where="post", label=label)
    ax.grid(alpha=0.3)
