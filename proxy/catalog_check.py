"""Whether the statistics a rewrite used still describe the tables the catalog names (issue 14).

Statistics are kept per table name and describe the files under the location the table had when they were
collected. A statement that passes through the proxy and points a name at other files (``ALTER TABLE ... SET
LOCATION``, ``DROP`` and re-``CREATE``) drops them once Spark confirmed the change (``proxy/execution.py``,
``_after_redefinition``, which compares :func:`catalog_fingerprints` before and after); one that does
not (another Spark application on a shared metastore, a client connected to the backend directly) leaves
them describing files the table no longer reads. The freshness check cannot see that: it lists the old
location, whose files are all still there. Local pruning would then only skip keys that match nothing, but a
diP from such a table carries values its real rows need not hold, and would drop rows of the tables it
joins.

So before a rewritten statement is sent (and before a dry run or a byte budget reports sizes), the proxy asks
the catalog, in the client's own backend session, where each table whose statistics the rewrite used lives
now: one ``SHOW TABLE EXTENDED`` per database. It compares with the location of the statistics the rewrite
*used* (carried in the decision), not with the store's now, which another client may have changed meanwhile.
A table the catalog reads elsewhere has its statistics dropped (only if they are still those of the old
location) and the statement is rewritten again without them; one the catalog does not hold, or whose
location cannot be read unambiguously, is only left out of this rewrite. The check runs only when the answer
could matter (the statement was changed, or sizes are reported), so unchanged statements cost nothing more.

Not seen, and said so in docs/guide.md: a partition given a location of its own outside the table's by
another application (the collector refuses such tables, but one added later is only seen by ``stats
refresh``, which refuses it then); a table redefined at the same location with another format or schema.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from stats.collect import describe_sections
from stats.sql_text import quote_literal, quote_name

# Names Spark's SHOW TABLES pattern matches literally: it is a regular expression with "*" as ".*" and "|"
# between alternatives, so any other name is looked up on its own with DESCRIBE.
_PLAIN_NAME = re.compile(r"[a-z0-9_]+")

Rows = Callable[[str], list[tuple[Any, ...]]]
UNREADABLE = "?"  # the catalog's answer could not be read unambiguously


def catalog_locations(run: Rows, tables: Iterable[str]) -> dict[str, str | None]:
    """``db.table`` -> the location the catalog gives it now; None when the catalog has no such table, and
    ``UNREADABLE`` when its answer names no single location."""
    described, unspelled = _descriptions(run, tables)
    out = {table: None if info is None else _location(info) for table, info in described.items()}
    for database, name in unspelled:
        out[f"{database}.{name}"] = _described_location(run, database, name)
    return out


def catalog_fingerprints(run: Rows, tables: Iterable[str]) -> dict[str, str | None]:
    """``db.table`` -> what the catalog says about how Spark reads the table (provider, location, storage
    properties, schema, partition columns: ``SHOW TABLE EXTENDED``'s text without the lines a statement may
    change without changing what is read: times, table properties, ``ANALYZE``'s statistics); None when the
    catalog has no such table, ``UNREADABLE`` for a name its pattern cannot spell. Two equal fingerprints of
    an unpartitioned table mean a statement left it as Spark reads it; a partitioned table's partitions may
    have moved without changing its text (``ALTER TABLE ... PARTITION ... SET LOCATION``), so
    :func:`unchanged` never says so of one."""
    described, unspelled = _descriptions(run, tables)
    out = {table: None if info is None else _fingerprint(info) for table, info in described.items()}
    out.update({f"{database}.{name}": UNREADABLE for database, name in unspelled})
    return out


def unchanged(before: str | None, after: str | None) -> bool:
    """Whether a statement between two fingerprints of a table provably left what Spark reads as it was."""
    return (before is not None and before != UNREADABLE and before == after
            and not any(line.startswith("Partition Columns") for line in before.splitlines()))


def _descriptions(run: Rows, tables: Iterable[str]) -> tuple[dict[str, str | None], list[tuple[str, str]]]:
    """``db.table`` -> ``SHOW TABLE EXTENDED``'s information text (one statement per database), or None when the
    catalog holds no such table; and the (database, name) pairs its pattern cannot spell, not asked."""
    by_database: dict[str, list[str]] = {}
    for table in sorted({t.lower() for t in tables}):
        database, _, name = table.rpartition(".")
        by_database.setdefault(database, []).append(name)
    out: dict[str, str | None] = {}
    unspelled: list[tuple[str, str]] = []
    for database, names in by_database.items():
        plain = [n for n in names if _PLAIN_NAME.fullmatch(n)]
        if plain:
            found: dict[str, str | None] = {}
            for namespace, name, temporary, information in run(
                    f"SHOW TABLE EXTENDED IN {quote_name(database)} LIKE {quote_literal('|'.join(plain))}"):
                if namespace and not temporary:
                    found[str(name).lower()] = str(information)
            out.update({f"{database}.{n}": found.get(n) for n in plain})
        unspelled += [(database, n) for n in names if not _PLAIN_NAME.fullmatch(n)]
    return out, unspelled


_VOLATILE = ("Created Time:", "Last Access:", "Statistics:", "Table Properties:")


def _fingerprint(information: str) -> str:
    return "\n".join(line for line in information.splitlines() if not line.startswith(_VOLATILE))


def check_locations(run: Rows, used: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """For the tables a rewrite used statistics of (table -> where those statistics were collected): which may not
    be used (table -> why), and which statistics are stale for good (table -> their location: the catalog reads
    the table elsewhere now). A table the catalog does not hold, or whose location cannot be read, is only
    not used: that is no proof its statistics are wrong."""
    now = catalog_locations(run, used)
    unusable: dict[str, str] = {}
    stale: dict[str, str] = {}
    for table, location in used.items():
        current = now.get(table)
        if current == location:
            continue
        if current is None:
            unusable[table] = f"the catalog holds no table {table} now"
        elif current == UNREADABLE:
            unusable[table] = f"the catalog's description of {table} names no single location"
        else:
            unusable[table] = (f"the catalog now reads {table} at {current}, not at {location} where its statistics "
                               f"were collected; they were dropped (collect them again: python -m stats collect "
                               f"{table})")
            stale[table] = location
    return unusable, stale


def catalog_partitions(run: Rows, table: str) -> frozenset[str]:
    """The partitions the catalog lists for the partitioned ``table``, each as ``SHOW PARTITIONS`` spells it
    (``a=1/b=x``, escaped as Spark names a partition's default folder): Spark reads these partitions' folders
    and no other folder under the table's location."""
    return frozenset(str(row[0]) for row in run(f"SHOW PARTITIONS {quote_name(table)}"))


def _described_location(run: Rows, database: str, name: str) -> str | None:
    """The location of a table whose name SHOW TABLE's pattern cannot spell, asked only if the database lists it
    (DESCRIBE of a missing table is an error, and an error here means the catalog could not be read)."""
    if name not in {str(r[1]).lower() for r in run(f"SHOW TABLES IN {quote_name(database)}") if r[0] and not r[2]}:
        return None
    _, _, details = describe_sections(run(f"DESCRIBE TABLE EXTENDED {quote_name(f'{database}.{name}')}"))
    return details.get("Location") or UNREADABLE


def _location(information: str) -> str:
    """The location in SHOW TABLE EXTENDED's text: its one ``Location:`` line. A comment or property holding a
    line break can add lines of its own, so more than one such line is unreadable, never guessed."""
    found = [line.partition(": ")[2].strip() for line in information.splitlines() if line.startswith("Location: ")]
    return found[0] if len(found) == 1 else UNREADABLE
