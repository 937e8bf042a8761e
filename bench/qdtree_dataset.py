"""A TPC dataset whose fact tables are laid out as qd-trees (issue 15), for the tests that search for wrong answers on
block layouts: every TPC query (``tests/test_layout_queries_spark.py``) and random differential queries
(``tests/test_random_queries.py``; ``python -m bench fuzz-queries --datasets tpch:qdtree,tpcds:qdtree``).

The ``tuned`` dataset's tables are defined again in a second database, its fact tables (TPC-H orders and lineitem;
TPC-DS store_sales, catalog_sales, web_sales, inventory) over copies that ``layout apply`` writes as the blocks of
plans learned from two workloads: query instances of another seed than the queries' own literals (TPC-H
substitution parameters, TPC-DS redrawn literals), and random queries of another seed than the tests'
(``bench/fuzz``), so that the cuts, local and through joins, are also of the shapes the random queries test (IN
lists, LIKE, functions, OR, NOT, IS NULL) and decide files for the literals and columns those draw. lineitem and
store_sales are laid out in four date ranges first, the workload's cuts inside them (``--lead-ranges``,
``layout/lead.py``). The blocks are the greedy's (no file cost: no merge), at least a thirty-second of the table
each: at SF 0.01 that is up to 32 blocks of a table's 8 files, so that block descriptions (joined cuts included)
decide files in many queries. Nothing here is random: the same source gives the same blocks.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from bench import suites
from bench.layout_effect import collect_as_source, copy_tables
from bench.fuzz.generate import generate
from bench.redraw import TPCDS_TIME, Domains
from bench.workloads import instances
from layout.apply import apply
from layout.joined import JoinedKeys
from layout.lead import LeadRanges, sampled_columns
from layout.sample import sample_rows
from layout.whatif import min_block_rows, plan
from layout.workload import Resolutions, Statement, table_workload
from stats.blocks import pinning
from stats.freshness import Lister
from stats.loader import StatsLoader

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from stats.store import StatsStore

LAYOUT = "qdtree"  # the name ``fuzz-queries --datasets`` and the tests give this dataset's layout
# In the order laid out: a table's cuts through another table are pinned to that table's files (``layout/apply.py``),
# so orders goes first, and lineitem's cuts on the orders it joins (o_orderdate through l_orderkey) hold.
FACTS = {"tpch": ("orders", "lineitem"), "tpcds": ("store_sales", "catalog_sales", "web_sales", "inventory")}
BLOCKS = 32  # the minimum block is 1/32 of the table
# Ranges first (up to four blocks in each): TPC-H filters l_shipdate with literals, so the rewriter decides the
# range cuts through the blocks' descriptions; TPC-DS reaches ss_sold_date_sk only through date_dim's diPs,
# and store_sales has NULL dates (their own block).
LEAD = {"lineitem": LeadRanges("l_shipdate", 4), "store_sales": LeadRanges("ss_sold_date_sk", 4)}
# The instances the plans learn from: literals drawn with another seed than the queries' own, but for the
# queries whose literals are not redrawn (docs/results/layout.md, TPC-DS query instances), whose instances are the query.
TRAIN_SEED = 11
TRAIN_PER_QUERY = 2
# The random queries the plans also learn from: a seed no test or default run draws (the tests use 13); as many
# as the TPC instances, so that each workload weighs the same in the greedy (each statement counts once).
RANDOM_TRAIN_SEED = 90_001


@dataclasses.dataclass(frozen=True)
class QdtreeDataset:
    tables: tuple[str, ...]  # every table of the suite, qualified
    blocks: dict[str, int]  # fact table (unqualified) -> the blocks its plan wrote
    # fact table -> the tables whose joined cuts on it no longer apply, laid out before it (qualified)
    voided: dict[str, list[str]]


def database_name(source_database: str) -> str:
    """Not ``<source>_qdtree``: that is ``bench layout-effect``'s copy, a benchmark this must not overwrite."""
    return f"{source_database}_fuzz_{LAYOUT}"


def build(spark: SparkSession, suite: str, sf: float, source_database: str, source_store: StatsStore,
          store: StatsStore, folder: Path, database: str | None = None) -> QdtreeDataset:
    """Define ``database`` (by default :func:`database_name`) over ``source_database`` (the suite's ``tuned``
    dataset at scale factor ``sf``, whose statistics are in ``source_store``), copy its fact tables under
    ``folder``, give the copy the source's statistics in ``store`` (carried over to the copied files,
    ``stats/copied.py``; collected with the source's kinds where they cannot be) and lay each fact table out as its
    plan's blocks, whose statistics ``apply`` collects with the kinds the copy had."""
    if suite not in FACTS:
        raise ValueError(f"qd-tree datasets are defined for {', '.join(FACTS)}, not {suite!r}")
    db = database or database_name(source_database)
    names = [t.name for t in suites.suite(suite).tables]
    uncollected = copy_tables(spark, source_database, db, names, list(FACTS[suite]), folder, (source_store, store))
    collect_as_source(spark, source_store, store, source_database, db, uncollected)
    tables = tuple(f"{db}.{t}" for t in names)
    domains = Domains(StatsLoader(source_store, Lister(0)), source_database, TPCDS_TIME) if suite == "tpcds" else None
    train = [Statement(sql, db) for _, sql in instances(suite, TRAIN_SEED, TRAIN_PER_QUERY, None, domains)]
    train += [Statement(generate(suite, RANDOM_TRAIN_SEED, i, sf).sql, db) for i in range(len(train))]

    def run(sql: str) -> list[tuple]:
        return [tuple(r) for r in spark.sql(sql).collect()]

    blocks, voided = {}, {}
    resolutions = Resolutions()  # each statement parsed and resolved once, for every fact table
    for fact in FACTS[suite]:
        loader = StatsLoader(store, Lister(0))
        table = f"{db}.{fact}"
        workload = table_workload(train, table, loader, resolutions)
        stats = loader.table_stats(table, fresh_listing=True)
        leads = (LEAD[fact],) if fact in LEAD else ()
        sample = sample_rows(stats, sampled_columns(workload.columns, leads), max_rows=10**8)  # every row
        min_rows = min_block_rows(table, stats.n_files, sample, rows=sample.table_rows // BLOCKS, megabytes=None)
        p = plan(workload, sample, min_rows, JoinedKeys(loader), leads)
        done = apply(run, store, loader, p)
        blocks[fact] = len(p.tree.blocks)
        voided[fact] = pinning(store.root, done.table)
        shutil.rmtree(done.old_location.removeprefix("file:"), ignore_errors=True)  # the copy's files before apply
    return QdtreeDataset(tables, blocks, voided)
