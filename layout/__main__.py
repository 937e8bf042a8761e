"""``python -m layout``: plan a workload-driven layout (qd-tree) for a table and show what it would skip.

    python -m layout plan tpch_sf1_tuned.lineitem --workload data/logs/decisions.jsonl
    python -m layout what-if lineitem --database tpch_sf1_tuned --workload queries.sql --plot what-if.png

Reads the statistics store of the configuration and the table's Parquet files (a sample of their rows);
needs no Spark and writes no data. ``apply`` plans the same way, then rewrites the table into the blocks on the
backend (``layout/apply.py``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from pathlib import Path

from dipper import cli
from dipper.config import load
from layout.lead import check_levels, lead_argument
from layout.sample import DEFAULT_SAMPLE_ROWS, LayoutError
from layout.qdtree import DEFAULT_WEIGH, MEASURED_FILE_COST_ROWS, WEIGHINGS, file_cost_argument

log = logging.getLogger("dipper.layout")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = cli.parser("python -m layout", "Workload-driven layouts (qd-tree, seed 003).")
    sub = p.add_subparsers(dest="command", required=True)
    for name, text in (("plan", "learn a qd-tree for a table from a workload and print its blocks"),
                       ("what-if", "replay the workload over the proposed blocks, the current files and simple "
                                   "layouts: the share of the table each query would read"),
                       ("apply", "learn the plan as `plan` does (same options, same seed: the same blocks) and "
                                 "rewrite the table into its blocks as a new version the catalog switches to at "
                                 "once; the old files stay where they were until you remove them")):
        tail = " Nothing is written to the table." if name != "apply" else \
            " Runs on the backend (the running server, or a Spark session of its own), then collects the " \
            "table's statistics."
        c = sub.add_parser(name, help=text, description=text + "." + tail)
        c.add_argument("table", help="the table: db.table, or table with --database")
        c.add_argument("--workload", type=Path, required=True,
                       help="the proxy's decision log (*.jsonl) or a file of SQL statements separated by ';'")
        c.add_argument("--database", default="default",
                       help="current database of the workload's SQL statements and of an unqualified table "
                            "(default: %(default)s; a decision log records each statement's own)")
        size = c.add_mutually_exclusive_group()
        size.add_argument("--min-block-rows", type=int, help="minimum rows per block (seed 003's b)")
        size.add_argument("--min-block-mb", type=float,
                          help="minimum MB per block (default: the table's mean file size today)")
        c.add_argument("--lead-ranges", type=lead_argument, metavar="COLUMN:N", action="append", default=[],
                       help="cut the table into N ranges of COLUMN (integer, date or string; equal rows each, in COLUMN's "
                            "order) before the workload's cuts, which then split each range: keeps what a "
                            "table clustered on COLUMN skips (a date window reads its ranges) and adds the "
                            "workload's cuts inside (e.g. ss_sold_date_sk:8). SENDER.COLUMN:N@FOREIGN=KEY cuts "
                            "ranges of another table's column through a join on its unique KEY (e.g. "
                            "customer_address.ca_state:8@c_current_addr_sk=ca_address_sk lays customer out by "
                            "the state of its address, so a filter on the state skips customer's blocks). Give it again "
                            "to cut each range into ranges of the next column (ss_sold_date_sk:33 then "
                            "ss_sold_time_sk:4: a filter on the hour alone reads a quarter of every date range)")
        c.add_argument("--weigh", choices=WEIGHINGS, default=DEFAULT_WEIGH,
                       help="what the tree serves: 'statements' counts every statement once, its scans of the table "
                            "sharing the weight, so the layout speeds up each statement (a statement reading the "
                            "table fifteen times counts once); 'scans' counts every scan once, so the layout "
                            "reduces the rows the whole workload reads (default: %(default)s)")
        c.add_argument("--file-cost-rows", type=file_cost_argument, default=MEASURED_FILE_COST_ROWS, metavar="ROWS",
                       help="what opening one more file costs a query, in rows read: blocks the workload reads together "
                            "are merged into one where the files they add cost more than the rows their split "
                            "saves (default: %(default)g, Spark 3.5's executor CPU per file and per row fitted on TPC-DS "
                            "at SF 1, docs/results/layout.md; 0 keeps every block the greedy makes, each a file)")
        c.add_argument("--merge-on", type=Path, metavar="WORKLOAD",
                       help="judge the merge (--file-cost-rows) on these statements instead of --workload: other "
                            "instances of the same queries, held out from the tree's training, so a split is kept "
                            "where it serves literals the tree was not learned on (same formats as --workload)")
        c.add_argument("--sample-rows", type=int, default=DEFAULT_SAMPLE_ROWS,
                       help="rows sampled to build and judge the tree (default: %(default)s)")
        c.add_argument("--seed", type=int, default=0,
                       help="sampling seed (default: %(default)s; the what-if judges on a sample drawn with seed+1)")
        c.add_argument("--time-zone", help="spark.sql.session.timeZone of a SQL file's statements, if known (a "
                                           "decision log records each statement's); without it timestamp "
                                           "literals are read in every zone, and cuts on them are left out")
        if name == "apply":
            c.add_argument("--sort-by", action="append", default=[], metavar="COLUMN",
                           help="write each block's rows ordered on COLUMN (give it again for the next column: "
                                "--sort-by ss_item_sk --sort-by ss_ticket_number); default: in the order the table "
                                "holds them (by file, then position), so a table written in an order keeps it inside "
                                "each block")
        if name == "plan":
            c.add_argument("--output", type=Path, help="also write the plan as JSON here")
        elif name == "what-if":
            c.add_argument("--replay", type=Path,
                           help="replay this workload instead of the one the plan is learned from (a test set of "
                                "unseen query instances; same formats as --workload)")
            c.add_argument("--plot", type=Path, help="also draw the shares read per query (PNG)")
            c.add_argument("--limit", type=int, default=60,
                           help="lines of scans listed; scans of one predicate with the same shares are one line "
                                "(default: %(default)s)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cli.setup_logging(args.verbose)
    config = load(args.config, environ=os.environ)
    if args.sample_rows < 1:
        raise LayoutError(f"--sample-rows must be at least 1, not {args.sample_rows}")
    check_levels(args.lead_ranges)  # before anything is read

    from layout import whatif
    from layout.lead import check_column, sampled_columns
    from layout.joined import JoinedKeys
    from rewriter.session import SessionSettings, time_zone
    from layout.sample import sample_rows
    from layout.workload import read_workload, table_workload
    from stats.freshness import Lister
    from stats.loader import StatsLoader
    from stats.store import StatsStore, databases_holding

    loader = StatsLoader(StatsStore(config.paths.stats), Lister(0))
    table = args.table.lower() if "." in args.table else f"{args.database.lower()}.{args.table.lower()}"
    stats = loader.table_stats(table, fresh_listing=True)
    if stats is None:
        elsewhere = databases_holding(loader.schemas(), table.rpartition(".")[2])
        hint = f"; the store holds {table.rpartition('.')[2]} in {', '.join(elsewhere)}" if elsewhere else \
            f"; collect them first: python -m stats collect {table}"
        raise LayoutError(f"no statistics for {table} in {config.paths.stats}{hint}")
    if args.command == "apply":  # before the plan is learned; apply checks again on the table's schema
        from layout.apply import check_sort_by
        check_sort_by(table, args.sort_by, loader.schemas()[table])
    session = SessionSettings(time_zone=time_zone(args.time_zone)) if args.time_zone else SessionSettings()
    statements = read_workload(args.workload, args.database, session)
    workload = table_workload(statements, table, loader)
    replayed = read_workload(args.replay, args.database, session) if getattr(args, "replay", None) else None
    replay = table_workload(replayed, table, loader) if replayed is not None else None
    merge_on = table_workload(read_workload(args.merge_on, args.database, session), table, loader) \
        if args.merge_on else None
    if merge_on is not None:
        whatif.check_merge_on(args.file_cost_rows, "--merge-on")
    for name, w in (("--workload", workload), ("--replay", replay), ("--merge-on", merge_on)):
        if w is not None and not w.scans:
            raise LayoutError(f"no statement of {name} reads {table} (statements without a database read in "
                              f"{args.database}: pass --database){_skipped(w)}")
    columns = whatif.sample_columns(workload, replay, merge_on)
    if not columns and not args.lead_ranges:
        raise LayoutError(f"no statement of {args.workload} restricts {table} with a predicate the rewriter can use: "
                          f"there is nothing to cut on ({len(workload.scans)} scans){_skipped(workload)}")
    if args.lead_ranges:
        for lead in args.lead_ranges:
            check_column(lead, stats, loader.table_stats)
        columns = sampled_columns(columns, args.lead_ranges)
    log.info("sampling %s (%d files) for columns %s", table, stats.n_files, ", ".join(columns))
    sample = sample_rows(stats, columns, args.sample_rows, args.seed)
    min_rows = whatif.min_block_rows(table, stats.n_files, sample, args.min_block_rows, args.min_block_mb)
    keys = JoinedKeys(loader)
    p = whatif.plan(workload, sample, min_rows, keys, args.lead_ranges, args.weigh, args.file_cost_rows, merge_on)
    if args.command == "apply":
        return _apply(config, loader, p, args.sort_by)
    if args.command == "plan":
        print(render_plan(p))
        if args.output:
            args.output.parent.mkdir(parents=True, exist_ok=True)
            args.output.write_text(json.dumps(plan_json(p), indent=1) + "\n", encoding="utf-8")
            print(f"\nplan written to {args.output}")
        return 0
    holdout = sample_rows(stats, columns, args.sample_rows, args.seed + 1)
    judged = replay if replay is not None else workload
    today, today_files = whatif.dipper_today(judged, replayed if replayed is not None else statements, loader,
                                             config.rewriter.context_options())
    w = whatif.what_if(p, holdout, keys, today, loader, replay, args.seed, today_files=today_files)
    print(whatif.render(w, args.limit))
    for name, wl in (("workload", workload), ("replayed", replay)):
        for index, why in (wl.skipped[:5] if wl is not None else ()):
            print(f"  {name} statement {index + 1} not analysed: {why[:120]}")
    if args.plot:
        whatif.plot(w, args.plot)
        print(f"\nplot written to {args.plot}")
    return 0


def _skipped(w) -> str:  # noqa: ANN001 - layout.workload.TableWorkload
    if not w.skipped:
        return ""
    index, why = w.skipped[0]
    return f"; {len(w.skipped)} statements not analysed, the first ({index + 1}) for {why[:160]}"


def _apply(config, loader, p, sort_by: list[str]) -> int:  # noqa: ANN001 - Config, StatsLoader, layout.whatif.Plan
    from backend.sql_client import backend_sql
    from layout.apply import apply
    from stats.blocks import pinning
    from stats.store import StatsStore

    print(render_plan(p))
    print()
    with backend_sql(config, "dipper-layout") as run:
        done = apply(run, StatsStore(config.paths.stats), loader, p, sort_by)
    print(f"{done.table}: {done.rows:,} rows rewritten into {done.files} files at {done.new_location} in "
          f"{done.seconds:.0f}s; statistics collected; blocks recorded in {done.record}")
    print(f"the old files are still at {done.old_location}: remove them once no running query reads them")
    voided = pinning(config.paths.stats, done.table)
    if voided:
        print(f"note: {', '.join(voided)} {'was' if len(voided) == 1 else 'were'} laid out with joined cuts on the rows "
              f"of {done.table} as they were; its files changed, so the rewriter no longer uses those cuts. Lay "
              f"{'it' if len(voided) == 1 else 'them'} out again (python -m layout apply TABLE --workload ...) to cut "
              f"on its new files")
    return 0


def render_plan(p) -> str:  # noqa: ANN001 - layout.whatif.Plan, imported lazily
    from layout.whatif import weighed

    cuts = p.workload.cuts
    rows = p.block_rows()
    used = sorted(p.on_paths())
    lines = [f"{p.workload.table}: qd-tree of {len(p.tree.blocks)} blocks from {len(p.workload.scans)} scans of "
             f"{len({s.statement for s in p.workload.scans})} statements ({weighed(p.weigh)}), "
             f"{len(p.workload.cuts)} candidate cuts ({len(used)} used, {p.undecided} not decided exactly on the "
             f"sample); minimum block {p.min_rows:,} of {p.sample.n:,} sampled rows"]
    if p.file_cost_rows > 0:
        lines.append(f"blocks read together merged, a file costing {p.file_cost_rows:,.0f} rows read: {len(p.tree.blocks)} "
                     f"of the greedy's {p.greedy_blocks} blocks (--file-cost-rows 0 keeps them all)" +
                     (f", judged on {p.merge_statements} held-out statements" if p.merge_statements else ""))
    if p.leads:
        of = ", each cut into ranges of ".join(f"{lead.label()} ({lead.ranges} asked)" for lead in p.leads)
        made = f"{p.ranges()} ranges of" if len(p.leads) == 1 else f"{p.ranges()} cells: ranges of"
        lines.append(f"ranges first: {made} {of}; fewer where values tie or a range would be under the minimum "
                     f"block")
    lines.append("")
    for b in p.tree.blocks:
        path = " AND ".join(cuts[s.cut].shown(s.holds) for s in b.path) or "(all rows)"
        lines.append(f"block {b.id:>4}  ~{rows[b.id]:>14,.0f} rows  {path}")
    return "\n".join(lines)


def plan_json(p) -> dict:  # noqa: ANN001 - layout.whatif.Plan
    cuts = p.workload.cuts
    rows = p.block_rows()
    return {"table": p.workload.table, "weigh": p.weigh, "file_cost_rows": p.file_cost_rows,
            "greedy_blocks": p.greedy_blocks, "merge_statements": p.merge_statements, "sample_rows": p.sample.n, "table_rows": p.sample.table_rows,
            "min_block_sample_rows": p.min_rows,
            "cuts": [{"sql": c.sql, **({"joined": c.joined.to_dict()} if c.joined is not None else {})} for c in cuts],
            "blocks": [{"id": b.id, "estimated_rows": round(float(rows[b.id])),
                        "path": [{"cut": s.cut, "holds": s.holds} for s in b.path],
                        "description": p.tree.describe(b, [c.holds() for c in cuts], [c.fails() for c in cuts])}
                       for b in p.tree.blocks]}


if __name__ == "__main__":
    cli.run(main)
