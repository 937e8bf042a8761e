"""``python -m rewriter explain "<sql>"``: what Dipper would send to Spark for a query, and why.

    python -m rewriter explain --database tpch_sf1_tuned "SELECT count(*) FROM lineitem WHERE l_shipdate = DATE '1995-03-01'"

Reads the statistics store of the configuration (``paths.stats``) and lists the tables' files now; runs no
query and needs no Spark. A table without statistics is named with the database it was looked up in, and
with the databases whose statistics do hold a table of that name (an unqualified name is read in
``--database``, ``default`` if not given, as in a fresh Spark session).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from dipper import cli
from dipper.config import load
from stats.store import databases_holding

DEFAULT_DATABASE = "default"


def main(argv: list[str] | None = None) -> int:
    p = cli.parser("python -m rewriter", "Explain Dipper's rewrite of a query.", verbose=False)
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("explain", help="print the rewritten SQL and, per table reference, files and bytes kept and why")
    e.add_argument("sql", help="the query ('-' reads it from standard input)")
    e.add_argument("--database", help=f"current database for unqualified tables (default: {DEFAULT_DATABASE})")
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
    stats = StatsLoader(StatsStore(config.paths.stats), Lister(0))
    database = args.database or DEFAULT_DATABASE
    settings = SessionSettings(time_zone=time_zone(args.time_zone)) if args.time_zone else SessionSettings()
    context = RewriteContext(stats, database=database, session=settings,
                             **{**r.context_options(), "dips": r.dips and not args.no_dips})
    result = rewrite(sql, context)
    missing = [td.table for td in result.decision.tables if not td.has_stats]
    if missing and args.database is None:
        # Unqualified names read in the default database; if the statistics hold every missing one in exactly
        # one other database, that is the database meant: explain there, and say so.
        names = {t.rpartition(".")[2] for t in missing if t.rpartition(".")[0] == database}
        candidates = set.intersection(*(set(databases_holding(stats.schemas(), n)) for n in names)) if names else set()
        if len(candidates) == 1:
            database = candidates.pop()
            context = dataclasses.replace(context, database=database)
            result = rewrite(sql, context)
            missing = [td.table for td in result.decision.tables if not td.has_stats]
            print(f"-- unqualified names read in {database}, the one database whose statistics hold "
                  f"{', '.join(sorted(names))} (pass --database to choose another)", file=sys.stderr)
    notes = missing_statistics(missing, stats.schemas(), database, args.database is not None, config.paths.stats)
    if args.json:
        print(result.decision.to_json())
        for note in notes:
            print(note, file=sys.stderr)
        return 0
    print(result.sql if result.changed else "-- unchanged: the original text goes to Spark\n" + sql)
    print()
    print(render(result.decision))
    for note in notes:
        print(note)
    return 0


def missing_statistics(tables: Iterable[str], schemas: Mapping[str, object], database: str, database_given: bool,
                       store: Path) -> list[str]:
    """One line per table (``db.table``) without statistics: in which database it was looked up, and which
    databases' statistics hold a table of that name."""
    notes = []
    for table in dict.fromkeys(tables):
        db, _, name = table.rpartition(".")
        holders = databases_holding(schemas, name)
        where = f"no statistics for table {name} in database {db or database}"
        if db == database and not database_given:
            where += f" (no --database given: unqualified names are read in {DEFAULT_DATABASE})"
        if holders:
            notes.append(f"{where}; the statistics hold a table {name} in: {', '.join(holders)} "
                         f"(e.g. --database {holders[0]})")
        else:
            notes.append(f"{where}, nor in any other database of the statistics store at {store} "
                         f"(collect them with: python -m stats collect {db or database}.{name})")
    return notes


if __name__ == "__main__":
    cli.run(main)
