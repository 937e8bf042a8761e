"""What any layout could reach on a workload: ``python -m bench layout-bound`` (issue 15's targets).

A file is read when one of its rows may be wanted, so a layout whose files the rewriter judged by exactly the
rows the what-if's model says a scan may want (its conjuncts and the joined filters the diPs would carry into
it, decided on each row of a sample: ``layout/whatif.py``, ``matches_of``) reads at least those rows. This
module sets that *row bound* beside what Dipper keeps on the source layout today, per unseen instance, as
INPUTCUT (bytes of every table the statement reads / bytes kept), and mixes the two per table: which tables'
layouts the targets depend on.

- **today**: the rewriter's decision on the source layout (``rewriter.rewrite``), bytes as it counts them;
- **row bound of a set of tables**: those tables read only their wanted rows (a scan of a table of B bytes
  whose sampled rows are wanted in a share s reads s·B), the others as today.

It is a bound on the model, not a proof about every layout:

- where the rewriter proves more than the model sees (constant and null-aware channels, multi-use CTEs) or
  the sample misses the few wanted rows, the model can want more than Dipper keeps today; the bound is then
  taken as today's, and the report counts those pairs;
- each scan is bounded on its own, as if it had a layout of its own, so the bound shows what a layout cannot
  beat, not that one layout reaches it;
- bytes per row are taken as even within a table (a layout changes how rows compress);
- a statement the workload analysis cannot read is taken as reading its tables whole.

The sample is ``--sample-rows`` rows of each table (all rows of a smaller one), so the bound of a large table
is an estimate. Nothing is written to the data or the statistics; the report goes to
``docs/results/layout/<source>-bound.md``.
"""

from __future__ import annotations

import datetime
import platform
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from bench.execute import inputcut
from bench.workloads import training_and_unseen
from dipper.config import Config
from dipper.errors import DatasetError

DOCS = Path(__file__).resolve().parent.parent / "docs" / "results" / "layout"
FACTS = {"tpch": ("lineitem", "orders", "partsupp"),
         "tpcds": ("store_sales", "catalog_sales", "web_sales", "inventory", "store_returns", "catalog_returns",
                   "web_returns")}


def kept_today(loader, test: Sequence[tuple[str, str]], source: str, session, options  # noqa: ANN001
               ) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The tables the statements read (with statistics), and per statement and table the bytes of its
    references and the bytes the rewriter keeps on ``source``."""
    from bench.workloads import decisions as decisions_of

    decisions = decisions_of(loader, list(test), source, session, options)
    tables = sorted({t.table for d in decisions for t in d.tables if t.has_stats})
    column = {t: k for k, t in enumerate(tables)}
    total, kept = np.zeros((len(test), len(tables))), np.zeros((len(test), len(tables)))
    for i, d in enumerate(decisions):
        for t in d.tables:
            if t.has_stats:
                total[i, column[t.table]] += t.bytes_total
                kept[i, column[t.table]] += t.bytes_kept
    return tables, total, kept


def wanted(loader, statements, tables: Iterable[str], sample_rows: int) -> np.ndarray:  # noqa: ANN001
    """Per statement and table: the bytes of the table's rows its scans may want (``matches_of`` on a
    sample, each scan's share times the table's bytes, summed over the statement's scans of it); NaN where
    the workload analysis skipped the statement (it cannot say which rows are wanted)."""
    from layout.joined import JoinedKeys
    from layout.sample import sample_rows as draw
    from layout.whatif import matches_of
    from layout.workload import Resolutions, table_workload

    tables = list(tables)
    keys = JoinedKeys(loader)
    out = np.zeros((len(statements), len(tables)))
    resolutions = Resolutions()  # each statement parsed and resolved once, for every table
    for k, table in enumerate(tables):
        w = table_workload(statements, table, loader, resolutions)
        stats = loader.table_stats(table, fresh_listing=True)
        for index, _ in w.skipped:  # not analysed: read whole, whatever the layout (NaN: ``measure`` says)
            out[index, k] = np.nan
        if not w.scans or not int(stats.rows.sum()):  # an empty table: no row is wanted
            continue
        sample = draw(stats, list(w.columns), sample_rows, 0)
        share = matches_of(w, sample, keys).mean(axis=1)
        for q, scan in enumerate(w.scans):
            out[scan.statement, k] += share[q] * sample.table_bytes
        print(f"{table}: {len(w.scans)} scans, {float(share.mean()):.1%} of its rows wanted on average", flush=True)
    return out


def input_cut(total: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """INPUTCUT per statement (row): bytes of every table it reads / bytes kept (infinite where none kept)."""
    return np.array([inputcut(t, k) for t, k in zip(total.sum(axis=1), kept.sum(axis=1))], dtype=float)


def mixed(kept: np.ndarray, bound: np.ndarray, use: np.ndarray) -> np.ndarray:
    """Bytes kept when the tables of ``use`` (a boolean per table) read only their wanted rows (never more
    than today) and the others as today."""
    return np.where(use[None, :], np.minimum(kept, bound), kept)


def measure(config: Config, source: str, train_seed: int, test_seed: int, per_query: int, sample_rows: int,
            output: Path = DOCS, queries: list[str] | None = None) -> Path:
    from bench.redraw import TPCDS_TIME, Domains
    from layout.workload import Statement
    from rewriter.session import SessionSettings
    from stats.freshness import Lister
    from stats.loader import StatsLoader
    from stats.store import StatsStore

    suite = source.split("_", 1)[0]
    if suite not in FACTS:
        raise DatasetError(f"{source} is not a dataset of the benchmark (tpch_... or tpcds_...)")
    loader = StatsLoader(StatsStore(config.paths.stats), Lister(0))
    if not any(t.startswith(source + ".") for t in loader.schemas()):
        raise DatasetError(f"no statistics for {source}; generate the dataset first (python -m bench generate)")
    domains = Domains(loader, source, TPCDS_TIME) if suite == "tpcds" else None
    _, test = training_and_unseen(suite, train_seed, test_seed, per_query, queries, domains)
    session = SessionSettings(ansi=True, time_zone="UTC")  # the benchmark's Spark sessions'
    tables, total, kept = kept_today(loader, test, source, session, config.rewriter.context_options())
    bound = wanted(loader, [Statement(sql, source, session=session) for _, sql in test], tables, sample_rows)
    unknown = np.isnan(bound)
    bound = np.where(unknown, total, bound)  # a statement not analysed is read whole
    above = (bound > kept * (1 + 1e-9)) & (total > 0)  # what the sample model of wanted rows does not see
    facts = np.array([t.rpartition(".")[2] in FACTS[suite] for t in tables])
    variants = [("Dipper today", kept), ("fact tables at their row bound", mixed(kept, bound, facts)),
                ("other tables at their row bound", mixed(kept, bound, ~facts)),
                ("every table at its row bound", mixed(kept, bound, np.ones(len(tables), dtype=bool)))]
    variants += [(f"only {t.rpartition('.')[2]} at its row bound", mixed(kept, bound, np.arange(len(tables)) == k))
                 for k, t in enumerate(tables)]
    command = (f"python -m bench layout-bound --source {source} --train-seed {train_seed} --test-seed {test_seed} "
               f"--per-query {per_query} --sample-rows {sample_rows}" + (f" --queries {','.join(queries)}" if queries else ""))
    lines = [f"# {source}: what any layout could reach on {len(test)} unseen instances", "",
             f"{datetime.date.today()}, {platform.machine()}, `{command}` (module docstring of `bench/layout_bound.py`: "
             f"a table at its row bound reads only the rows its scans may want, the others what Dipper keeps today).",
             "", f"Statements the workload analysis could not read, taken as reading whole: "
             f"{int(unknown.any(axis=1).sum())}. (statement, table) pairs whose modelled wanted rows exceed what "
             f"Dipper keeps today (the rewriter proves more than the model sees: constant and null-aware channels, "
             f"or rows the sample misses), where the bound is taken as today's: {int(above.sum())} "
             f"({float(np.where(above, bound - kept, 0).sum()) / 1e6:.1f} MB).",
             "", "| tables | INPUTCUT median | >= 2x | >= 10x |", "|---|---:|---:|---:|"]
    for label, k in variants:
        cut = input_cut(total, k)
        lines.append(f"| {label} | {np.median(cut):.2f}x | {np.mean(cut >= 2):.0%} | {np.mean(cut >= 10):.0%} |")
    lines += ["", "| table | instances that read it | bytes | kept today (mean share) | min(kept, row bound) (mean share) |",
              "|---|---:|---:|---:|---:|"]
    for k, t in enumerate(tables):
        reads = total[:, k] > 0
        if not reads.any():  # an empty table: no bytes to share
            continue
        lines.append(f"| {t.rpartition('.')[2]} | {int(reads.sum())} | {total[reads, k].min() / 1e6:.1f} MB | "
                     f"{np.mean(kept[reads, k] / total[reads, k]):.1%} | "
                     f"{np.mean(np.minimum(kept, bound)[reads, k] / total[reads, k]):.1%} |")
    path = output / f"{source}-bound.md"
    output.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
