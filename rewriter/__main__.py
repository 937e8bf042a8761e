"""``python -m rewriter explain "<sql>"``: what Dipper would send to Spark for a query, and why.

    python -m rewriter explain --database tpch_sf1_tuned "SELECT count(*) FROM lineitem WHERE l_shipdate = DATE '1995-03-01'"

Reads the statistics store of the configuration (``paths.stats``) and lists the tables' files now; runs no
query and needs no Spark.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from dipper import cli
from dipper.config import DEFAULT_CONFIG, load


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rewriter", description="Explain Dipper's rewrite of a query.")
    p.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="configuration file (default: %(default)s)")
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("explain", help="print the rewritten SQL and, per table reference, files and bytes kept and why")
    e.add_argument("sql", help="the query ('-' reads it from standard input)")
    e.add_argument("--database", default="default", help="current database for unqualified tables (default: %(default)s)")
    e.add_argument("--time-zone", help="the session time zone, if known (zone-less timestamps then read exactly)")
    e.add_argument("--json", action="store_true", help="print the decision record as JSON instead")
    e.add_argument("--no-dips", action="store_true", help="local predicates only (no data-induced predicates)")
    args = p.parse_args(argv)
    cli.setup_logging()
    config = load(args.config, environ=os.environ)

    from rewriter.decision import render
    from rewriter.rewrite import RewriteContext, rewrite
    from rewriter.session import SessionSettings, time_zone
    from stats.freshness import Lister
    from stats.loader import StatsLoader
    from stats.store import StatsStore

    sql = sys.stdin.read() if args.sql == "-" else args.sql
    r = config.rewriter
    context = RewriteContext(StatsLoader(StatsStore(config.paths.stats), Lister(0)), database=args.database,
                             session=SessionSettings(time_zone=time_zone(args.time_zone)) if args.time_zone else SessionSettings(), dips=r.dips and not args.no_dips,
                             dip_max_ranges=r.dip_max_ranges, kappa=r.kappa)
    result = rewrite(sql, context)
    if args.json:
        print(result.decision.to_json())
        return 0
    print(result.sql if result.changed else "-- unchanged: the original text goes to Spark\n" + sql)
    print()
    print(render(result.decision))
    return 0


if __name__ == "__main__":
    cli.run(main)
