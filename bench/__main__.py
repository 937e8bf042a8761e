"""``python -m bench``: benchmark datasets and the demo.

    python -m bench generate --suite tpch --sf 1 --layout tuned
    python -m bench generate --suite tpcds --sf 1 --layout partitioned --files 16
    python -m bench demo --sf 1
    python -m bench stop
    python -m bench measure-datasets --sf 1
    python -m bench proxy
    python -m bench proxy-overhead --sf 1
    python -m bench soak --minutes 15
    python -m bench metadata --database tpch_sf1_tuned
    python -m bench bloom --database tpcds_sf1_tuned
    python -m bench dip-effect --database tpcds_sf1_tuned
    python -m bench run --suite tpch --sf 1 --layout tuned --stats rangeset:8
    python -m bench run --quick
    python -m bench report docs/results/bench/sf1/tpch-tuned-rangeset20
    python -m bench fuzz-queries --seed 7 --count 500 --datasets tpch:tuned,tpch:qdtree,adversarial
    python -m bench fuzz-predicates --seed 7 --count 2000
    python -m bench workload --suite tpch --seed 1 --per-query 10 --output train.sql
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

from dipper import cli
from dipper.config import load
from dipper.errors import DipperError

from bench.datasets import DEFAULT_TARGET_FILE_MB
from bench.fuzz import DEFAULT_DATASETS as DEFAULT_FUZZ_DATASETS
from layout.simple import LAYOUT_HELP
from layout.qdtree import DEFAULT_WEIGH, MEASURED_FILE_COST_ROWS, WEIGHINGS, file_cost_argument
from bench.suites import SUITES


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = cli.parser("python -m bench", "Dipper's benchmark datasets and demo.")
    sub = p.add_subparsers(dest="command", required=True)

    g = sub.add_parser("generate", help="generate a benchmark and lay it out as catalog tables in the warehouse",
                       description="Generate TPC-H (tpchgen-cli) or TPC-DS (duckdb dsdgen) at a scale factor, write it "
                                   "into the warehouse in a layout, and register it. The database is named "
                                   "<suite>_sf<sf>_<layout>, e.g. tpch_sf1_tuned. An existing dataset is reused "
                                   "unless --force is given; generated raw data is reused across layouts.")
    g.add_argument("--suite", required=True, help=f"benchmark: {' | '.join(SUITES)}")
    g.add_argument("--sf", type=float, default=1.0, help="scale factor, > 0 (default: %(default)s)")
    g.add_argument("--layout", default="tuned", help=f"{LAYOUT_HELP} (default: %(default)s)")
    size = g.add_mutually_exclusive_group()
    size.add_argument("--files", type=int, help="files per table (each file keeps at least 1000 rows)")
    size.add_argument("--target-file-mb", type=float, default=DEFAULT_TARGET_FILE_MB,
                      help="approximate file size when --files is not given (default: %(default)s MB)")
    g.add_argument("--tables", type=lambda v: tuple(t for t in v.split(",") if t), default=(),
                   help="comma-separated subset of the suite's tables (default: all)")
    g.add_argument("--force", action="store_true", help="rebuild the layout even if the dataset exists")
    g.add_argument("--collect-stats", type=int, metavar="K",
                   help="then collect (or refresh) the dataset's statistics with range-sets of K intervals")

    d = sub.add_parser("demo", help="start the stack if needed and query it through pyhive and beeline",
                       description="Start server.py in the background (unless one is already running), run a sample "
                                   "TPC-H query through pyhive and through beeline, and print how to connect. "
                                   "Expects `python -m bench generate --suite tpch --sf SF` to have run.")
    d.add_argument("--sf", type=float, default=1.0, help="scale factor of the TPC-H tuned dataset (default: %(default)s)")

    sub.add_parser("stop", help="stop the server that `demo` started")

    m = sub.add_parser("measure-datasets", help="time and size the generation of TPC-H and TPC-DS; write docs/results/datasets.md",
                       description="Generate TPC-H and TPC-DS at one scale factor in the tuned layout from scratch "
                                   "(raw generation and layout timed separately) and record the wall times and "
                                   "sizes in docs/results/datasets.md. Rebuilds the datasets (like --force).")
    m.add_argument("--sf", type=float, default=1.0, help="scale factor (default: %(default)s)")
    m.add_argument("--layouts", default="tuned", help="comma-separated layouts to measure (default: %(default)s)")
    m.add_argument("--output", type=Path, default=Path("docs/results/datasets.md"), help="report file (default: %(default)s)")

    r = sub.add_parser("rewrite-latency", help="time the rewriter over the TPC-DS queries; write docs/results/rewriter.md",
                       description="Rewrite every TPC-DS query with the collected statistics of a dataset, and again "
                                   "with store_sales replaced by a synthetic 100,000-file table; report p50/p95/max.")
    r.add_argument("--database", default="tpcds_sf1_tuned", help="dataset with statistics (default: %(default)s)")
    r.add_argument("--repeat", type=int, default=5, help="timed rewrites per query (default: %(default)s)")
    r.add_argument("--output", type=Path, default=Path("docs/results/rewriter.md"), help="report file (default: %(default)s)")

    pf = sub.add_parser("prune-filter-cost", help="what the prune filter costs Spark per row and to plan; docs/results/prune-filter.md",
                        description="Run TPC-H queries on lineitem as written and with prune filters that skip nothing "
                                    "(they list files that do not exist), interleaved, and time Spark's planning of "
                                    "filters listing 10 to 100,000 files.")
    pf.add_argument("--database", default="tpch_sf1_tuned", help="a TPC-H dataset with statistics (default: %(default)s)")
    pf.add_argument("--repeat", type=int, default=5, help="timed rounds (default: %(default)s)")
    pf.add_argument("--output", type=Path, default=Path("docs/results/prune-filter.md"), help="report file (default: %(default)s)")
    nr = sub.add_parser("name-ranges", help="prune filters naming block files by name ranges vs keys; docs/results/name-ranges.md",
                        description="Split a TPC-H dataset's lineitem into block files as `layout apply` names them, "
                                    "then compare the prune filter naming skipped files by name ranges with naming "
                                    "each by its key: SQL bytes, Spark's planning time, and scan and q06 time with "
                                    "the same files skipped.")
    nr.add_argument("--source", default="tpch_sf1_tuned", help="a TPC-H dataset (default: %(default)s)")
    nr.add_argument("--files", type=int, default=2000, help="block files to split lineitem into (default: %(default)s)")
    nr.add_argument("--repeat", type=int, default=5, help="timed rounds (default: %(default)s)")
    nr.add_argument("--laid-out", default="tpch_sf1_tuned_qdtree",
                    help="a dataset whose lineitem `python -m bench layout-effect` laid out, to count the ranges of "
                         "unseen TPC-H instances on it; '' for none (default: %(default)s)")
    nr.add_argument("--output", type=Path, default=Path("docs/results/name-ranges.md"), help="report file (default: %(default)s)")
    t = sub.add_parser("stats", help="time and size statistics collection; load time of 100,000 files; docs/results/stats.md")
    t.add_argument("--database", default="tpch_sf1_tuned", help="dataset to collect (default: %(default)s)")
    t.add_argument("--sizes", default="1,4,8,20", help="range-set sizes K to compare (default: %(default)s)")
    t.add_argument("--output", type=Path, default=Path("docs/results/stats.md"), help="report file (default: %(default)s)")
    fs = sub.add_parser("files-skipped", help="files each query would skip, as CSV; or compare two such CSVs",
                        description="Rewrite every query of a dataset's suite (no query runs) and write, per query, "
                                    "the files kept with local predicates and with diPs; with --compare, render two "
                                    "such CSVs (before and after a rewriter change) as a markdown section.")
    fs.add_argument("--database", help="dataset with statistics, e.g. tpch_sf1_tuned")
    fs.add_argument("--output", type=Path, help="CSV to write (with --database)")
    fs.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"), help="two CSVs to compare")
    fs.add_argument("--title", default="files skipped", help="section title for --compare (default: %(default)s)")
    e = sub.add_parser("dip-effect", help="bytes kept by local predicates vs with diPs, per query; docs/results/dips.md",
                       description="Rewrite every query of the dataset's suite with and without data-induced "
                                   "predicates over its collected statistics and report the bytes each would read.")
    e.add_argument("--database", default="tpcds_sf1_tuned", help="dataset with statistics (default: %(default)s)")
    e.add_argument("--output", type=Path, default=Path("docs/results/dips.md"), help="report file (default: %(default)s)")
    le = sub.add_parser("layout-effect", help="apply qd-trees to a copy of tables; what Dipper reads on unseen instances",
                        description="Copy a dataset's tables into <source>_qdtree, learn a qd-tree for each on "
                                    "training instances (TPC-H: the specification's parameters; TPC-DS: literals "
                                    "redrawn from the data) and apply it, then compare the bytes Dipper keeps on the "
                                    "source layout and on the qd-trees for unseen instances (per table and as "
                                    "INPUTCUT per statement), against the what-if's prediction, and run the first "
                                    "instance of each query on Spark (results compared). Writes "
                                    "docs/results/layout/<source>-<tables>.md. Tables already laid out are measured again.")
    le.add_argument("--source", default="tpch_sf1_tuned", help="dataset with statistics (default: %(default)s)")
    le.add_argument("--table", action="append", dest="tables",
                    help="a table to lay out; repeat for several, in the order they are laid out: a dimension "
                         "before the tables cut on it, whose joined cuts pin its files (default: lineitem)")
    le.add_argument("--train-seed", type=int, default=1, help="seed of the training instances (default: %(default)s)")
    le.add_argument("--test-seed", type=int, default=2, help="seed of the unseen instances (default: %(default)s)")
    le.add_argument("--per-query", type=int, default=10, help="instances of each query (default: %(default)s)")
    le.add_argument("--queries", help="comma-separated query names to train and test on (default: all)")
    le.add_argument("--sample-rows", type=int, default=100_000, help="rows sampled to plan (default: %(default)s)")
    le_size = le.add_mutually_exclusive_group()
    le_size.add_argument("--min-block-rows", type=int,
                         help="minimum rows per block of every laid-out table (default: each table's mean file size)")
    le_size.add_argument("--min-block-mb", type=_block_mb, action="append", metavar="[TABLE=]MB",
                         help="minimum MB per block, of one table (TABLE=MB) or of every other (MB); repeat for "
                              "several. A table of one file (a dimension) needs it to be split at all")
    le.add_argument("--lead-ranges", type=_lead_ranges, action="append", metavar="TABLE=COLUMN:N",
                    help="lay TABLE out in N ranges of COLUMN first, the workload's cuts inside each (python -m "
                         "layout's --lead-ranges; TABLE=SENDER.COLUMN:N@FOREIGN=KEY for ranges of a joined "
                         "table's column); repeat for several tables, and for one table to cut each of its "
                         "ranges into ranges of the next column")
    le.add_argument("--weigh", choices=WEIGHINGS, default=DEFAULT_WEIGH,
                    help="how the qd-trees weigh the training scans (python -m layout's --weigh; default: %(default)s)")
    le.add_argument("--file-cost-rows", type=file_cost_argument, default=MEASURED_FILE_COST_ROWS, metavar="ROWS",
                    help="a file's cost in rows read, by which blocks the workload reads together are merged (python -m "
                         "layout's --file-cost-rows; default: %(default)g; 0 keeps every block the greedy makes)")
    le.add_argument("--merge-seed", type=int, metavar="SEED",
                    help="judge the merge on instances of this seed instead of the training ones (held out: a split "
                         "is kept where it serves literals the tree was not learned on; python -m layout's "
                         "--merge-on); unseen instances then differ from these too")
    le.add_argument("--target", help="the database of the copy laid out (default: <source>_qdtree); another name lays "
                                     "the tables out again beside an earlier copy")
    le.add_argument("--no-spark", action="store_true", help="decisions and prediction only: run no query on Spark")
    le.add_argument("--no-predict", action="store_true",
                    help="skip the what-if's prediction of each table's scans, which plans every table again (GBs of "
                         "memory each); the tables are then not checked to be laid out by these options")
    le.add_argument("--spark-queries", help="comma-separated queries whose first unseen instance runs on Spark "
                                            "(default: every query; at SF 10 each takes minutes)")
    le.add_argument("--output", type=Path, default=Path("docs/results/layout"), help="report folder (default: %(default)s)")
    lb = sub.add_parser("layout-bound", help="what any layout could reach: INPUTCUT if tables read only wanted rows",
                        description="Rewrite the unseen instances of a dataset's workload (as layout-effect draws "
                                    "them) on its current layout, and set beside each the INPUTCUT it would reach if "
                                    "the fact tables, the other tables, each table or every table read only the rows "
                                    "its scans may want (the what-if's model, on a sample: a bound on it per scan, not a proof "
                                    "about every layout). Writes "
                                    "docs/results/layout/<source>-bound.md; nothing is written to the data.")
    lb.add_argument("--source", default="tpcds_sf1_tuned", help="dataset with statistics (default: %(default)s)")
    lb.add_argument("--train-seed", type=int, default=1,
                    help="seed of the training instances, left out of the unseen ones (default: %(default)s)")
    lb.add_argument("--test-seed", type=int, default=2, help="seed of the unseen instances (default: %(default)s)")
    lb.add_argument("--per-query", type=int, default=10, help="instances of each query (default: %(default)s)")
    lb.add_argument("--queries", help="comma-separated query names (default: all)")
    lb.add_argument("--sample-rows", type=int, default=100_000,
                    help="rows sampled per table to decide which are wanted (default: %(default)s)")
    lb.add_argument("--output", type=Path, default=Path("docs/results/layout"), help="report folder (default: %(default)s)")
    x = sub.add_parser("proxy-overhead", help="one client: latency, fetch throughput and memory of the proxy; docs/results/proxy.md",
                       description="Against the Spark Thrift Server of a running `make demo`, compare a trivial "
                                   "statement's latency and a large fetch's throughput directly and through a proxy "
                                   "started in this process, and measure its memory with 32 sessions.")
    x.add_argument("--sf", type=float, default=1.0, help="scale factor of the demo's TPC-H dataset (default: %(default)s)")
    x.add_argument("--repeat", type=int, default=200, help="timed runs of SELECT 1 per path (default: %(default)s)")
    x.add_argument("--rows", type=int, default=1_000_000, help="rows to fetch (default: %(default)s)")
    x.add_argument("--output", type=Path, default=Path("docs/results/proxy.md"), help="report file (default: %(default)s)")
    pl = sub.add_parser("proxy", help="the proxy under concurrent load against Spark directly; docs/results/proxy.md (issue 62)",
                        description="Start the embedded stack (server.py: Spark, its Thrift Server and the proxy on "
                                    "private ports, over this checkout's data), or attach to a running one, and run the "
                                    "same load on Spark directly and through the proxy: N concurrent pyhive clients x M "
                                    "selective statements on TPC-H lineitem (clustered by l_shipdate, so the proxy "
                                    "skips most files), then SELECT 1 alone and beside clients sending statements "
                                    "that are expensive to rewrite. Reports p50/p95/max per path, errors and the "
                                    "proxy's rewrite time share (decision log); appends a section to docs/results/proxy.md, "
                                    "raw results to docs/results/proxy-load/<time>.csv. Needs tpch_sf1_tuned with statistics "
                                    "(python -m bench generate --suite tpch --sf 1 --layout tuned --collect-stats 20). "
                                    "Takes about 5-10 minutes on 2 cores with the defaults.")
    pl.add_argument("--clients", type=int, default=32, help="concurrent clients of the skipping phase (default: %(default)s)")
    pl.add_argument("--queries", type=int, default=20, help="statements per client (default: %(default)s)")
    pl.add_argument("--database", default="tpch_sf1_tuned", help="a TPC-H dataset with statistics (default: %(default)s)")
    pl.add_argument("--heavy-clients", type=int, default=4,
                    help="clients sending statements expensive to rewrite while SELECT 1 is timed (default: %(default)s)")
    pl.add_argument("--heavy-literals", type=int, default=3000,
                    help="keys in each heavy statement's IN list (default: %(default)s)")
    pl.add_argument("--probe-seconds", type=float, default=20.0,
                    help="seconds SELECT 1 is timed, alone and again beside the heavy clients (default: %(default)s)")
    pl.add_argument("--warmup", type=int, default=8, help="untimed statements per path first (default: %(default)s)")
    pl.add_argument("--workers", choices=("threads", "processes"), default="threads",
                    help="run clients as threads of this process or as processes (default: %(default)s; the report "
                         "gives the clients' CPU share so the choice can be checked)")
    pl.add_argument("--seed", type=int, default=1, help="seed of the statements' literals (default: %(default)s)")
    pl.add_argument("--proxy-port", type=int, help="a running proxy's port (with --backend-port): start nothing")
    pl.add_argument("--backend-port", type=int, help="the Spark Thrift Server behind it")
    pl.add_argument("--decision-log", type=Path,
                    help="with a running stack: its proxy's decision log, for the rewrite time share")
    pl.add_argument("--output", type=Path, default=Path("docs/results/proxy.md"),
                    help="report file; a section is added (default: %(default)s)")
    so = sub.add_parser("soak", help="mixed load through Dipper for N minutes with readings of Spark's heap, sessions, "
                                     "the proxy's memory; docs/results/proxy.md (issue 62)",
                        description="Start the embedded stack (or attach with --proxy-port/--backend-port) and run mixed "
                                    "load through the proxy (TPC-DS query texts, random fuzz queries sized for SF 1, "
                                    "TPC-H skipping statements) for --minutes. At the start, every --every minutes and "
                                    "at the end, with the load paused: a fixed probe query and SELECT 1 directly and "
                                    "through the proxy, Spark's heap (jstat) and live sessions, operations and "
                                    "statement records (jcmd GC.class_histogram), the proxy's gauges and RSS. "
                                    "Readings go to docs/results/soak/<time>.csv as they are taken; a section to docs/results/proxy.md "
                                    "at the end. Needs tpcds_sf1_tuned and tpch_sf1_tuned with statistics.")
    so.add_argument("--minutes", type=float, default=15.0, help="how long the load runs (default: %(default)s)")
    so.add_argument("--every", type=float, default=5.0, help="minutes between readings (default: %(default)s)")
    so.add_argument("--in-flight", type=int, default=2, help="statements running at once (default: %(default)s)")
    so.add_argument("--probe", default="q03", help="the TPC-DS query timed at every reading (default: %(default)s)")
    so.add_argument("--seed", type=int, default=1, help="seed of the statement mix (default: %(default)s)")
    so.add_argument("--statement-timeout", type=float, default=300.0,
                    help="seconds before a statement is cancelled (default: %(default)s)")
    so.add_argument("--proxy-port", type=int, help="a running proxy's port (with --backend-port): start nothing")
    so.add_argument("--backend-port", type=int, help="the Spark Thrift Server behind it (its JVM is read by pid)")
    so.add_argument("--metrics-port", type=int, help="with a running stack: its proxy's metrics port, if served")
    so.add_argument("--output", type=Path, default=Path("docs/results/proxy.md"),
                    help="report file; a section is added (default: %(default)s)")
    md = sub.add_parser("metadata", help="answers from statistics for a BI-like workload; write docs/results/metadata.md",
                        description="Against the Spark Thrift Server of a running `make demo`, run what a BI tool sends "
                                    "to browse a database (SHOW TABLES, row counts, MIN/MAX of date columns, distinct "
                                    "values of low-cardinality string columns) directly and through a proxy started in "
                                    "its own process: latency, which were answered from statistics, identical results.")
    md.add_argument("--database", action="append", help="a database to browse (repeatable; default: the demo's "
                                                          "tpch_sf1_tuned)")
    md.add_argument("--max-distinct", type=int, default=100,
                    help="string columns with at most this many values get a DISTINCT statement (default: %(default)s)")
    md.add_argument("--output", type=Path, default=Path("docs/results/metadata.md"), help="report file (default: %(default)s)")
    bl = sub.add_parser("bloom", help="what per-file Bloom filters skip on TPC-DS and cost; write docs/results/bloom.md",
                        description="Over a TPC-DS dataset whose statistics have Bloom filters (python -m stats collect "
                                    "--database DB --bloom COLUMNS): their size, the bytes the 99 queries keep with and "
                                    "without them, and lookups by customer and item key run on Spark both ways.")
    bl.add_argument("--database", default="tpcds_sf1_tuned", help="TPC-DS dataset (default: %(default)s)")
    bl.add_argument("--lookups", type=int, default=5, help="instances of each lookup shape (default: %(default)s)")
    bl.add_argument("--output", type=Path, default=Path("docs/results/bloom.md"), help="report file (default: %(default)s)")
    b = sub.add_parser("run", help="every query in four variants (Spark, Spark-noDPP, Preds, Dipper; Dipper+cols on request): bytes, time, results",
                       description="Run a suite's queries on one Spark session as plain Spark, Spark without its runtime "
                                   "pruning, Dipper with local pruning only (Preds) and Dipper with diPs; record files "
                                   "and bytes read (Spark's scan metrics), wall time, rewrite time and diPs built; "
                                   "check every result against plain Spark's (a mismatch fails the run). Writes CSV, "
                                   "a markdown table and plots to OUTPUT/sf<SF>/<suite>-<layout>-<stats>/. The "
                                   "dataset and its statistics must exist: make dataset SUITE=.. SF=.. LAYOUT=.. "
                                   "With --database, the suite's tables are read from a database of the persistent "
                                   "catalog instead, as they are (e.g. the copy `bench layout-effect` lays out), "
                                   "into OUTPUT/sf<SF>/<suite>-<database>-<stats>/.")
    b.add_argument("--suite", help=f"benchmark: {' | '.join(SUITES)} (default: tpch)")
    b.add_argument("--sf", type=float, help="scale factor of the dataset (default: 1)")
    b.add_argument("--layout", help=f"{LAYOUT_HELP} (default: tuned)")
    b.add_argument("--database",
                   help="a database of the catalog holding every table of the suite, with statistics collected, "
                        "instead of a generated dataset (e.g. tpcds_sf1_tuned_qdtree); no server may hold an "
                        "embedded catalog meanwhile")
    b.add_argument("--stats", default="rangeset:20",
                   help="statistics the rewriter may use: zonemap (min/max only) or rangeset:K (range-sets of at most "
                        "K intervals; the store must have been collected with K or more; 20 is the paper's default) (default: %(default)s)")
    b.add_argument("--queries", help="comma-separated query names, e.g. q01,q03 (default: every query)")
    b.add_argument("--variants", default="spark,spark-nodpp,preds,dipper",
                   help="comma-separated variants; plain Spark always runs once as the reference; dipper-cols is "
                        "Dipper with diPs also written as column predicates (rewriter/dip_column.py) "
                        "(default: %(default)s)")
    b.add_argument("--repeat", type=int, help="timed runs per variant, median reported (default: 3)")
    b.add_argument("--no-warmup", dest="warmup", action="store_false", help="skip the untimed warm-up run")
    b.add_argument("--output", type=Path, help="report root (default: docs/results/bench; data/bench with --quick)")
    b.add_argument("--resume", action="store_true",
                   help="keep the queries already measured in the output folder by a run with the same options and "
                        "run only the others (the report is rewritten after every query, so a long run that stops "
                        "loses at most the query in progress)")
    b.add_argument("--quick", action="store_true",
                   help="the small run the test suite does: TPC-H SF 0.01, tuned, three queries, one run each; "
                        "explicit options override it")
    cr = sub.add_parser("compare-runs", help="`bench run` folders side by side against the first one's plain Spark",
                        description="Compare `bench run` folders of one suite, e.g. the `tuned` dataset and the copy "
                                    "`bench layout-effect` laid out (run with --database): per variant and query the "
                                    "wall time, its speed-up over the first folder's plain Spark, and INPUTCUT against "
                                    "the first folder's bytes. Writes markdown and a PNG beside it; nothing is run.")
    cr.add_argument("folders", nargs="+", type=Path, help="run folders, the baseline first")
    cr.add_argument("--output", type=Path, required=True, help="markdown file to write (the PNG goes beside it)")
    rr = sub.add_parser("report", help="render a benchmark run's README.md and plots again from its results.csv",
                        description="Write README.md and the plots of a `bench run` folder again from its results.csv "
                                    "and run.json, e.g. after a change to the report. Nothing is run on Spark.")
    rr.add_argument("folder", type=Path, help="a run folder, e.g. docs/results/bench/sf1/tpch-tuned-rangeset20")
    rr.add_argument("--notes", action="store_true",
                    help="explain again why queries gain nothing, with the current rewriter and statistics")
    wl = sub.add_parser("workload", help="a SQL file of query instances with other literals (TPC-H, TPC-DS), for layouts",
                        description="Draw the substitution parameters of the TPC-H queries as the specification does "
                                    "(§2.4), or redraw the TPC-DS queries' predicate literals from a dataset's values "
                                    "(bench/redraw.py), and write the instances to a SQL file: a training workload for "
                                    "`python -m layout plan`, and with another seed a test set of unseen literals "
                                    "for `python -m layout what-if --replay`.")
    wl.add_argument("--suite", default="tpch", choices=("tpch", "tpcds"), help="(default: %(default)s)")
    wl.add_argument("--dataset", help="TPC-DS: the dataset whose values the literals are drawn from, e.g. tpcds_sf1_tuned")
    wl.add_argument("--seed", type=int, default=1, help="parameter seed (default: %(default)s)")
    wl.add_argument("--per-query", type=int, default=10, help="instances of each query (default: %(default)s)")
    wl.add_argument("--queries", help="comma-separated query names (default: all)")
    wl.add_argument("--output", type=Path, required=True, help="the SQL file to write")
    fp = sub.add_parser("fuzz-predicates", help="the predicate property test on Spark, for as long as asked (issue 13)",
                        description="Write a small table holding every edge of every type, collect its statistics, and "
                                    "check random predicates under ANSI on/off and several session time zones: every "
                                    "file the rewriter skips must hold no matching row and raise no error, and the "
                                    "rewritten query must answer (or fail) as the original. Stops at the first "
                                    "failure with a shrunk reproducer (exit 1).")
    fp.add_argument("--seed", type=int, default=0, help="predicate seed (default: %(default)s)")
    fp.add_argument("--count", type=int, default=500, help="cases to check (default: %(default)s)")
    fp.add_argument("--start", type=int, default=0, help="first case index (default: %(default)s)")
    fp.add_argument("--case", type=int, help="replay this one case under every setting, with what each variant skipped")
    fp.add_argument("--batch", type=int, default=100, help="cases per batch of Spark queries (default: %(default)s)")
    fp.add_argument("--zones", default="UTC,America/Los_Angeles",
                    help="comma-separated session time zones (default: %(default)s)")
    fp.add_argument("--ansi", default="on,off", help="ANSI modes to run: on, off or both (default: %(default)s)")
    fp.add_argument("--pushdown", default="on,off",
                    help="Parquet filter pushdown on Spark: on, off or both (default: %(default)s)")
    fp.add_argument("--data-seed", type=int, default=0, help="seed of the table's layout (default: %(default)s)")
    fp.add_argument("--files", type=int, default=18, help="files in the table (default: %(default)s)")
    fp.add_argument("--workdir", type=Path, help="where to write the table and statistics (default: a temporary directory)")
    fp.add_argument("--shrink-budget", type=int, default=120,
                    help="Spark checks spent shrinking a failure (default: %(default)s)")
    cf = sub.add_parser("conform", help="compare every definition of rewriter/spark/ with Spark (issue 61)",
                        description="Apply every registered Spark function to arguments drawn per type from the "
                                    "edges and at random, under ANSI on/off and several session time zones, and "
                                    "compare Spark's typeof(), value and errors with what the rewriter derives. "
                                    "Repeats with new seeds until the time is up; writes a report. Exit 1 on any "
                                    "disagreement.")
    cf.add_argument("--seed", type=int, default=0, help="first seed (default: %(default)s)")
    cf.add_argument("--minutes", type=float, default=5, help="how long to run (default: %(default)s)")
    cf.add_argument("--per-template", type=int, default=8, help="cases per template and round (default: %(default)s)")
    cf.add_argument("--output", type=Path, help="the Markdown report to write (default: print it)")
    fq = sub.add_parser("fuzz-queries", help="random differential queries: original vs rewritten on Spark (issue 13)",
                        description="Generate random Spark SQL over TPC-H / TPC-DS (join trees of every kind, "
                                    "subqueries, CTEs, aggregates, windows, set operations) and over an adversarial "
                                    "schema (mixed-type joins, keyword and odd identifiers, renamed columns; dataset "
                                    "'adversarial'), run each as written and "
                                    "as rewritten on one Spark session and compare exactly. Failures are shrunk to a "
                                    "minimal reproducer. Outcomes go to a JSON-lines log; running the same seed again "
                                    "resumes from it. Exit 1 if any query failed.")
    fq.add_argument("--seed", type=int, default=0, help="query seed (default: %(default)s)")
    fq.add_argument("--count", type=int, default=200, help="queries per dataset (default: %(default)s)")
    fq.add_argument("--start", type=int, default=0, help="first query index (default: %(default)s)")
    fq.add_argument("--only", help="comma-separated query indices to run instead of --start/--count")
    fq.add_argument("--datasets", default=DEFAULT_FUZZ_DATASETS,
                    help="comma-separated suite:layout pairs, or 'adversarial'; the layout 'qdtree' is 'tuned' with "
                         "its fact tables laid out as qd-tree blocks, laid out anew each run (default: %(default)s)")
    fq.add_argument("--sf", type=float, default=0.01, help="scale factor of the datasets (default: %(default)s)")
    fq.add_argument("--files", type=int, default=8, help="files per big table when a dataset is built (default: %(default)s)")
    fq.add_argument("--timeout", type=float, default=300, help="seconds before a query is cancelled (default: %(default)s)")
    fq.add_argument("--no-shrink", action="store_true", help="report failures without shrinking them")
    fq.add_argument("--shrink-budget", type=int, default=300, help="queries tried while shrinking one failure (default: %(default)s)")
    fq.add_argument("--log", type=Path, help="JSON-lines log (default: <paths.logs>/fuzz-queries-seed<S>-sf<SF>.jsonl)")
    fq.add_argument("--fresh", action="store_true", help="run every query again instead of resuming from the log")
    fq.add_argument("--ansi", choices=("on", "off"), default="on",
                    help="spark.sql.ansi.enabled for every query, and the rewriter told so (default: %(default)s)")
    return p.parse_args(argv)


def bench_options(args: argparse.Namespace):  # noqa: ANN201 - bench.run is imported lazily
    """`bench run`'s options: --quick supplies defaults, explicit options win."""
    from bench.run import QUICK, parse_options

    base = dict(QUICK) if args.quick else {"suite": "tpch", "sf": 1.0, "layout": "tuned", "queries": None, "repeat": 3}
    pick = lambda name: getattr(args, name) if getattr(args, name) is not None else base[name]  # noqa: E731
    queries = args.queries if args.queries is not None else (",".join(base["queries"]) if base["queries"] else None)
    output = args.output or Path("data/bench" if args.quick else "docs/results/bench")
    layout = args.layout if args.database else pick("layout")  # a default layout does not clash with --database
    return parse_options(pick("suite"), pick("sf"), layout, args.stats, queries, args.variants,
                         pick("repeat"), args.warmup, output, args.resume, args.database)


def load_options(args: argparse.Namespace):  # noqa: ANN201 - bench.proxy_load is imported lazily
    """``bench proxy``'s options, checked (a clear error before anything starts)."""
    from bench.proxy_load import LoadOptions

    return LoadOptions(clients=args.clients, queries=args.queries, database=args.database,
                       heavy_clients=args.heavy_clients, heavy_literals=args.heavy_literals,
                       probe_seconds=args.probe_seconds, warmup=args.warmup, workers=args.workers, seed=args.seed,
                       output=args.output, proxy_port=args.proxy_port, backend_port=args.backend_port,
                       decision_log=args.decision_log)


def _block_mb(text: str) -> tuple[str, float]:
    """``TABLE=MB`` or ``MB`` (every table): a minimum block size of ``bench layout-effect``."""
    table, _, mb = text.rpartition("=")
    try:
        value = float(mb)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not [TABLE=]MB, such as 0.25 or customer=0.25") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"a minimum block must be a finite number of MB above 0, not {mb}")
    return table.strip() or "*", value


def _lead_ranges(text: str) -> tuple[str, object]:
    """``TABLE=COLUMN:N``: a table of ``bench layout-effect`` laid out in ranges first (``layout/lead.py``)."""
    from layout.lead import lead_argument

    table, _, lead = text.partition("=")
    if not table.strip() or not lead:
        raise argparse.ArgumentTypeError(f"{text!r} is not TABLE=COLUMN:N, such as store_sales=ss_sold_date_sk:33, or "
                                         f"TABLE=SENDER.COLUMN:N@FOREIGN=KEY")
    return table.strip().lower(), lead_argument(lead)


def _grouped(pairs: list[tuple[str, object]]) -> dict[str, list[object]]:
    """``(table, value)`` pairs of a repeated option as each table's values, in the order given."""
    out: dict[str, list[object]] = {}
    for table, value in pairs:
        out.setdefault(table, []).append(value)
    return out


def _names(text: str | None) -> list[str] | None:
    """A comma-separated list of query names; None where none is given."""
    return [q.strip() for q in text.split(",") if q.strip()] if text else None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cli.setup_logging(args.verbose)
    config = load(args.config, environ=os.environ)
    if args.command == "generate":
        from bench.datasets import generate

        return generate(config, os.environ, args.suite, args.sf, args.layout, args.files, args.target_file_mb, args.tables, args.force,
                        args.collect_stats)
    if args.command == "measure-datasets":
        from bench.measure_datasets import measure

        return measure(config, os.environ, args.sf, [x for x in args.layouts.split(",") if x], args.output)
    if args.command == "stats":
        from bench.stats_bench import measure as measure_stats

        return measure_stats(config, os.environ, args.database, [int(k) for k in args.sizes.split(",")], args.output)
    if args.command == "files-skipped":
        from bench import files_skipped

        if args.compare:
            print(files_skipped.compare(*args.compare, title=args.title))
            return 0
        if not args.database or not args.output:
            raise DipperError("files-skipped needs --database and --output (or --compare BEFORE AFTER)")
        return files_skipped.measure(config, args.database, args.output)
    if args.command == "dip-effect":
        from bench.dip_effect import measure as measure_dips

        return measure_dips(config, args.database, args.output)
    if args.command == "layout-effect":
        from bench.layout_effect import measure as measure_layout

        print(measure_layout(config, args.source, args.tables or ["lineitem"], args.train_seed, args.test_seed, args.per_query,
                             args.sample_rows, args.min_block_rows, on_spark=not args.no_spark, output=args.output,
                             queries=_names(args.queries), spark_queries=_names(args.spark_queries),
                             min_block_mb=dict(args.min_block_mb or []), lead_ranges=_grouped(args.lead_ranges or []),
                             weigh=args.weigh, file_cost_rows=args.file_cost_rows, target=args.target,
                             predict=not args.no_predict, merge_seed=args.merge_seed))
        return 0
    if args.command == "layout-bound":
        from bench.layout_bound import measure as measure_bound

        print(measure_bound(config, args.source, args.train_seed, args.test_seed, args.per_query, args.sample_rows,
                            args.output, _names(args.queries)))
        return 0
    if args.command == "proxy":
        from bench.proxy_load import measure as measure_load

        return measure_load(config, load_options(args))
    if args.command == "soak":
        from bench.soak import SoakOptions, soak

        return soak(config, SoakOptions(minutes=args.minutes, every=args.every, in_flight=args.in_flight,
                                        probe=args.probe, seed=args.seed, statement_timeout=args.statement_timeout,
                                        output=args.output, proxy_port=args.proxy_port, backend_port=args.backend_port,
                                        metrics_port=args.metrics_port))
    if args.command == "proxy-overhead":
        from bench.proxy_bench import measure as measure_proxy

        return measure_proxy(config, args.sf, args.repeat, args.rows, args.output)
    if args.command == "metadata":
        from bench.metadata_bench import measure as measure_metadata

        return measure_metadata(config, args.database or ["tpch_sf1_tuned"], args.max_distinct, args.output)
    if args.command == "bloom":
        from bench.bloom_bench import measure as measure_bloom

        return measure_bloom(config, args.database, args.lookups, args.output)
    if args.command == "report":
        from bench.run import rerender

        return rerender(config, args.folder, args.notes)
    if args.command == "compare-runs":
        from bench.compare_runs import compare

        print(f"wrote {compare(args.folders, args.output)}")
        return 0
    if args.command == "run":
        from bench.run import run as run_bench

        return run_bench(config, os.environ, bench_options(args))
    if args.command == "workload":
        from bench.redraw import domains_of
        from bench.workloads import instances, write

        items = instances(args.suite, args.seed, args.per_query,
                          _names(args.queries), domains_of(config, args.dataset) if args.dataset else None)
        write(args.output, items)
        print(f"{len(items)} query instances written to {args.output}")
        return 0
    if args.command == "conform":
        from bench.conform import main as conform_main
        return conform_main(args.seed, args.minutes, args.per_template, args.output)
    if args.command == "fuzz-predicates":
        from bench.fuzz_predicates.run import parse_options as fuzz_options, run as run_fuzz

        return run_fuzz(config, fuzz_options(args.seed, args.count, args.start, args.case, args.batch, args.zones,
                                             args.ansi, args.pushdown, args.data_seed, args.files, args.workdir,
                                             args.shrink_budget))
    if args.command == "fuzz-queries":
        from bench.fuzz.run import fuzz, parse_options as fuzz_query_options

        return fuzz(config, os.environ, fuzz_query_options(args.seed, args.count, args.datasets, args.sf, args.files,
                                                           args.start, args.only, args.no_shrink, args.shrink_budget,
                                                           args.timeout, args.log, args.fresh, args.ansi == "on"))
    if args.command == "prune-filter-cost":
        from bench.prune_filter_cost import measure as measure_filter

        return measure_filter(config, os.environ, args.database, args.repeat, args.output)
    if args.command == "name-ranges":
        from bench.name_ranges_cost import measure as measure_ranges

        return measure_ranges(config, os.environ, args.source, args.files, args.repeat, args.output, args.laid_out or None)
    if args.command == "rewrite-latency":
        from bench.rewrite_latency import measure as measure_latency

        return measure_latency(config, args.database, args.repeat, args.output)
    from bench.demo import demo, stop

    if args.command == "stop":
        return stop(config)
    return demo(config, args.config, args.sf)


if __name__ == "__main__":
    cli.run(main)
