"""``python -m stats``: collect, refresh and inspect per-file statistics.

    python -m stats collect tpch_sf1_tuned.lineitem tpch_sf1_tuned.orders
    python -m stats collect --database sales
    python -m stats collect --all --range-set-size 8
    python -m stats refresh --all
    python -m stats collect tpcds_sf1_tuned.store_sales --bloom ss_customer_sk,ss_item_sk
    python -m stats show tpch_sf1_tuned.lineitem
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from dipper import cli
from dipper.config import Config, load
from dipper.errors import StatsError
from stats.collect import DEFAULT_RANGE_SET_SIZE, DEFAULT_VALUE_LIST_MAX, MAX_VALUE_LIST
from stats.indexes import KINDS as INDEX_KINDS


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = cli.parser("python -m stats", "Dipper's per-file statistics store.")
    sub = p.add_subparsers(dest="command", required=True)
    for name, text in (("collect", "collect statistics of tables with a PySpark job (one hash-aggregated scan per table, plus small ones for value lists and for files footers could not size)"),
                       ("refresh", "re-collect only files whose (path, size, mtime) changed; drop files that are gone")):
        c = sub.add_parser(name, help=text, description=text + ". Tables are any Parquet or ORC tables of the "
                           "backend's catalog (managed or external, partitioned or not), named db.table or, when "
                           "one database holds it, table. The job runs on the backend: through the running "
                           "server's Thrift Server, or in a Spark session of its own over the same catalog when "
                           "the embedded server is not running.")
        c.add_argument("tables", nargs="*", help="table names (db.table, or table when unambiguous)")
        c.add_argument("--database", action="append", default=[], metavar="DB",
                       help="every table of database DB (repeatable)")
        c.add_argument("--all", action="store_true", help="every table of every database of the catalog")
        keep = "; refresh keeps what each table was collected with" if name == "refresh" else ""
        c.add_argument("--range-set-size", type=int, default=None if keep else DEFAULT_RANGE_SET_SIZE,
                       help=f"intervals per column per file, K >= 1 (1 = zone maps; default: {DEFAULT_RANGE_SET_SIZE}{keep})")
        c.add_argument("--value-list-max", type=int, default=None if keep else DEFAULT_VALUE_LIST_MAX,
                       help="keep a string column's distinct values when a file has at most N "
                            f"(default: {DEFAULT_VALUE_LIST_MAX}{keep}; at most {MAX_VALUE_LIST})")
        for kind in INDEX_KINDS.values():
            c.add_argument(f"--{kind.NAME}", metavar="COLUMNS", type=_columns,
                           help=f"{kind.HELP}: comma-separated column names, given to every table collected that "
                                f"has them; a table with none of them keeps its own ('none': drop them from every table "
                                f"collected; default: what each table had)")
        c.add_argument("--no-footers", action="store_true",
                       help="compute every bound in Spark, trusting no Parquet footer (by default string bounds "
                            "come from footers that prove them, and footers size the range-set buckets); slower")
    f = sub.add_parser("footers", help="zone maps from Parquet footers with pyarrow, no Spark (seconds, weaker)",
                       description="Derive min/max/null counts per file from Parquet footers (no range-sets, no value "
                                   "lists). The table's files are found at --location, by default "
                                   "<warehouse>/<db>/<table>.")
    f.add_argument("table", help="db.table")
    f.add_argument("--location", help="the table's folder (default: in the warehouse)")
    s = sub.add_parser("show", help="summarise the statistics of a table")
    s.add_argument("table", help="db.table, or table when the statistics hold one of that name")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cli.setup_logging(args.verbose)
    config = load(args.config, environ=os.environ)
    from stats.store import StatsStore

    store = StatsStore(config.paths.stats)
    if args.command == "show":
        from stats.show import show

        print(show(store, args.table))
        return 0
    if args.command == "footers":
        from stats.footers import collect_footers

        db, _, name = args.table.partition(".")
        location = args.location or str(config.paths.warehouse / db / name)
        if not name or not Path(location.removeprefix("file:")).is_dir():
            raise StatsError(f"no table folder {location}; name the table as db.table and pass --location")
        n = collect_footers(store, args.table, "file:" + str(Path(location.removeprefix("file:")).resolve()))
        print(f"zone maps of {n} files of {args.table} from their footers written to {config.paths.stats}")
        return 0
    if not args.tables and not args.all and not args.database:
        raise StatsError("name the tables to collect (db.table ...), or pass --database DB or --all")
    return _collect(config, store, args)


def _collect(config: Config, store, args: argparse.Namespace) -> int:
    from backend.sql_client import backend_sql
    from dipper.environment import ensure_writable_dir
    from stats.collect import collect, list_tables, resolve_table

    ensure_writable_dir(config.paths.stats, "statistics")
    with backend_sql(config, "dipper-stats") as run:
        named = [resolve_table(run, t) for t in args.tables]
        listed = [t for database in args.database for t in _listed(list_tables(run, database), database)]
        if args.all:
            listed += list_tables(run)
        listed = [t for t in dict.fromkeys(listed) if t not in named]

        def passed_over(table: str, error: StatsError) -> None:
            """A named table statistics cannot describe is an error; one listed by --all or --database is named
            and passed over (a view, a CSV table ...)."""
            if table in named:
                raise error
            print(f"skipped: {error}")

        asked = {name: getattr(args, name) for name in INDEX_KINDS if getattr(args, name) is not None}
        tables = collect(run, store, named + listed, args.range_set_size, args.value_list_max,
                         refresh=args.command == "refresh", passed_over=passed_over, use_footers=not args.no_footers,
                         indexes=asked)
    print(f"statistics of {len(tables)} tables written to {config.paths.stats}")
    return 0


def _columns(text: str) -> tuple[str, ...]:
    names = tuple(c.strip().lower() for c in text.split(",") if c.strip())
    return () if names == ("none",) else names


def _listed(tables: list[str], database: str) -> list[str]:
    if not tables:
        print(f"database {database} holds no tables")
    return tables


if __name__ == "__main__":
    cli.run(main)
