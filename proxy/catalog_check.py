"""Whether the statistics a rewrite used still describe the tables the catalog names (issue 14).

Statistics are kept per table name and describe the files under the location the table had when they were
collected. A statement that passes through the proxy and points a name at other files (``ALTER TABLE ... SET
LOCATION``, ``DROP`` and re-``CREATE``) drops them first (``proxy/statements.tables_redefined``); one that does
not (another Spark application on a shared metastore, a client connected to the backend directly) leaves
them describing files the table no longer reads. The freshness check cannot see that: it lists the old
location, whose files are all still there. Local pruning would then only skip keys that match nothing, but a
diP from such a table carries values its real rows need not hold, and would drop rows of the tables it
joins.

So before a rewritten statement is sent (and before a dry run or a byte budget reports sizes), the proxy asks
the catalog, in the client's own backend session, where each table whose statistics the rewrite used lives
now: one ``SHOW TABLE EXTENDED`` per database. A table whose location differs from the one its statistics
were collected at, or that the catalog no longer holds, is *moved*: its statistics are dropped and the
statement is rewritten again without them. The check runs only when the answer could matter (the statement
was changed, or sizes are reported), so unchanged statements cost nothing more.

Left out, and said so in docs/stats.md: a partition added outside the proxy with a location of its own
outside the table's (the collector refuses such tables, but one added later is only seen by ``stats
refresh``, which refuses it then).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from stats.collect import quote_literal, quote_name

# Names Spark's SHOW TABLES pattern matches literally: it is a regular expression with "*" as ".*" and "|"
# between alternatives, so any other name is looked up on its own with DESCRIBE.
_PLAIN_NAME = re.compile(r"[a-z0-9_]+")

Rows = Callable[[str], list[tuple[Any, ...]]]


def catalog_locations(run: Rows, tables: Iterable[str]) -> dict[str, str | None]:
    """``db.table`` -> the location the catalog gives it now, or None when the catalog has no such table."""
    by_database: dict[str, list[str]] = {}
    for table in sorted({t.lower() for t in tables}):
        database, _, name = table.rpartition(".")
        by_database.setdefault(database, []).append(name)
    out: dict[str, str | None] = {}
    for database, names in by_database.items():
        plain = [n for n in names if _PLAIN_NAME.fullmatch(n)]
        if plain:
            found: dict[str, str | None] = {}
            rows = run(f"SHOW TABLE EXTENDED IN {quote_name(database)} LIKE {quote_literal('|'.join(plain))}")
            for namespace, name, temporary, information in rows:
                if namespace and not temporary:
                    found[str(name).lower()] = _location(str(information).splitlines())
            out.update({f"{database}.{n}": found.get(n) for n in plain})
        for name in names:
            if not _PLAIN_NAME.fullmatch(name):
                out[f"{database}.{name}"] = _described_location(run, f"{database}.{name}")
    return out


def moved_tables(run: Rows, stored_location: Callable[[str], str | None],
                 tables: Iterable[str]) -> dict[str, str]:
    """The tables among ``tables`` whose statistics describe another location than the catalog's now, with why."""
    stored = {t: stored_location(t) for t in tables}
    stored = {t: loc for t, loc in stored.items() if loc is not None}
    if not stored:
        return {}
    now = catalog_locations(run, stored)
    moved = {}
    for table, location in stored.items():
        current = now.get(table)
        if current is None:
            moved[table] = (f"the catalog no longer holds {table} as a table; its statistics (collected at "
                            f"{location}) were dropped")
        elif current != location:
            moved[table] = (f"the catalog now reads {table} at {current}, not at {location} where its statistics "
                            f"were collected; they were dropped (collect them again: python -m stats collect "
                            f"{table})")
    return moved


def _described_location(run: Rows, table: str) -> str | None:
    """The location of a table whose name SHOW TABLE's pattern cannot spell, asked only if the database lists it
    (DESCRIBE of a missing table is an error, and an error here means the catalog could not be read)."""
    database, _, name = table.rpartition(".")
    if name not in {str(r[1]).lower() for r in run(f"SHOW TABLES IN {quote_name(database)}") if r[0] and not r[2]}:
        return None
    return _location(f"{r[0]}: {r[1]}" for r in run(f"DESCRIBE TABLE EXTENDED {quote_name(table)}") if r and r[0])


def _location(lines: Iterable[str]) -> str | None:
    for line in lines:
        key, sep, value = line.partition(": ")
        if sep and key.strip() == "Location":
            return value.strip()
    return None
