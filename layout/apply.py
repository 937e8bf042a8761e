"""Rewrite a table into the blocks of a plan, as a new version readers switch to at once (issue 15, part 4).

The job, all of it SQL on the backend (the running server's Thrift Server, or a session of its own), so it
runs wherever ``python -m stats collect`` runs:

1. **Checks.** The table is a non-partitioned Parquet table whose statistics are fresh (every file listed now
   is one the store describes), so the rows the plan was learned on are the rows there are.
2. **Route and write, in one statement.** A staging table is created with ``CREATE TABLE ... PARTITIONED BY
   (__dipper_block) LOCATION <staging> AS SELECT``: each row gets the id of the one block whose path it
   satisfies (``routing_sql``). A local cut is evaluated as ``coalesce((cut), false)``; a joined cut by a LEFT
   JOIN with its sender grouped by key, which says per key what ``col IN (subquery)`` means, done once per row
   in the same statement, so a dimension cannot change between the cuts of one row. ``DISTRIBUTE BY`` the
   block puts each block's rows in one task: one file per block. ``SORT BY`` the block and then the order the
   rows had (``_order``) writes each file's rows in the table's order (or in ``--sort-by``'s), not in the
   order the shuffle delivers them.
   Then, per (sender, key, column) the workload's joined filters come through, one statement joins the
   staged files' rows to the sender and records per file the bounds of the sender rows they join
   (``_joined_bounds``; what they prove: ``rewriter/joined_bounds.py``).
3. **Nothing lost.** The rows in the new files (their Parquet footers) must equal the rows the statistics
   hold, and the table's listing must be the same as before the statement: a file added or replaced
   meanwhile would be missing from the new version, so the job stops and removes what it wrote.
4. **Swap.** The files move to a new folder beside the table's (``<location>.layout-<time>``), named
   ``block-<id>-<n>.parquet``, and ``ALTER TABLE ... SET LOCATION`` points the catalog there: one metastore
   update, so a query sees the old version or the new one, never a mix. Queries already running keep reading
   the old files, which are left where they were (the command says where, to remove when nothing reads them).
   A failure before the swap leaves the old version as it was and removes the staging data.
5. **Record and collect.** The blocks, their descriptions, which file (by identity) holds which block, the
   session settings the rows were routed under, the joined bounds, and the identity of every file of every
   table a joined cut or the bounds read (listed before the statements and checked unchanged after them)
   are written beside the statistics (``stats/blocks.py``), and the table's statistics are collected anew. The rewriter then uses a block's
   path as exact knowledge (``rewriter/blocks.py``).
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import time
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from layout.qdtree import Block
from layout.sample import LayoutError
from layout.whatif import Plan
from layout.workload import Cut
from rewriter.emit import quoted
from rewriter.session import ANSI, TIME_ZONE, time_zone
from stats.blocks import BlockLayout, JoinedBounds, write_layout
from stats.collect import collect, describe_table
from stats.freshness import filesystem, list_files
from stats.loader import StatsLoader
from stats.model import Kind
from stats.scan import SqlRunner, domain_sql, domain_value
from stats.sql_text import quote_literal, quote_name
from stats.store import StatsStore

log = logging.getLogger("dipper.layout")

BLOCK = "__dipper_block"


@dataclasses.dataclass(frozen=True)
class Applied:
    table: str
    old_location: str
    new_location: str
    files: int
    rows: int
    seconds: float
    record: Path


SOURCE_ORDER = ("__dipper_file", "__dipper_row")  # a row's file in the table and its position in the file


def check_sort_by(table: str, sort_by: Sequence[str], columns: Iterable[str]) -> tuple[str, ...]:
    """``sort_by`` (``--sort-by``) spelled as ``columns`` spell them (Spark's names are case-insensitive), each
    one of them and named once."""
    available = {c.lower(): c for c in columns}
    out: list[str] = []
    for given in sort_by:
        c = available.get(given.lower())
        if c is None:
            raise LayoutError(f"--sort-by {given}: {table} has no column {given}; its columns: "
                              f"{', '.join(sorted(available.values()))} (as its statistics were collected; "
                              f"collect them again if a column was added since)")
        if c in out:
            raise LayoutError(f"--sort-by {given} is given twice")
        out.append(c)
    return tuple(out)


def _order(columns: list[str], sort_by: Sequence[str]) -> tuple[str, ...] | None:
    """The columns each block's rows are written in the order of, after the block id; None: the order the
    table held them in.

    By default the order the table held them in: the file's path, then the row's position in it
    (``_metadata``). A table written in an order (``tuned`` clusters sales on their date and sorts each file
    on its key) keeps it inside each block, as a user who chose the order expects; without the sort, a block
    gathered from several files comes interleaved as the shuffle delivers it. On TPC-DS SF 1 the merged
    blocks came mostly in order anyway, and their time did not move (docs/results/layout.md, "Rows in order, and
    drift"). ``--sort-by`` orders on columns instead. A table with a column of its own named ``_metadata`` hides
    Spark's, or one named as ``SOURCE_ORDER``'s would clash with them; its blocks are then written in the
    shuffle's order."""
    if sort_by:
        return tuple(sort_by)
    clashing = sorted({c for c in columns if c.lower() in ("_metadata", *SOURCE_ORDER)})
    if clashing:
        log.warning("the table has a column named %s: its blocks are written in the order the shuffle delivers "
                    "their rows, not the table's (--sort-by orders them on columns)", clashing[0])
        return ()
    return None


def routing_sql(table: str, columns: list[str], p: Plan, sort_by: Sequence[str] = ()) -> str:
    """The SELECT that gives every row of ``table`` its block id, as column ``__dipper_block``.

    Its size grows with the senders and the tree, not with their product, so that Spark can run it at
    hundreds of blocks. A join per joined cut and a CASE branch per block did not: at SF 10, 247 blocks and 37
    joined cuts overflowed Spark's Java code generator (the stage ran interpreted, for half an hour and more),
    and a tree of hundreds of blocks on TPC-H SF 0.01 exhausted the driver's memory with a hash table per
    join (``tests/test_layout_apply_spark.py``).

    - **One join per sender key.** The joined cuts that read one sender through one key into one column
      share a LEFT JOIN with the sender grouped by that key, one flag per cut: ``bool_or`` of the cut's
      conjuncts (NULL as FALSE) over the sender's rows holding the key, which is TRUE exactly when the key is
      among those ``key IN (SELECT key ... WHERE conjuncts)`` finds, the cut's meaning. The group holds one
      row per key, so the join neither drops nor repeats a row of the table. A cut that nests further joined
      filters (subqueries themselves) keeps a join of its own with its key set (``Joined.keys_sql``).
    - **The block id by the tree.** A nested ``CASE`` follows the cuts from the root, one flag test per node
      of the tree (a CASE of one conjunction per block repeats every flag on every path below it).
    - **In order.** Each task sorts its rows on the block, then on ``_order``'s columns: the writer needs
      them grouped by block, and this sort is the one it uses (no second sort)."""
    cuts: list[Cut] = list(p.workload.cuts)
    t = quoted("__dipper_t")
    flags: dict[int, str] = {}
    joins: list[str] = []
    for i in sorted(p.on_paths()):
        j = cuts[i].joined
        if j is None:
            flags[i] = f"coalesce(({cuts[i].sql}), false)"
        elif j.nested:
            alias, name = quoted(f"__dipper_j{len(joins)}"), f"__dipper_key{len(joins)}"
            key = quoted(name)
            joins.append(f"LEFT JOIN ({j.keys_sql(name)}) {alias} ON {t}.{quoted(j.column)} = {alias}.{key}")
            flags[i] = f"({alias}.{key} IS NOT NULL)"
    for (source, key, column), members in shared_joins(p).items():
        alias, k = quoted(f"__dipper_j{len(joins)}"), quoted(f"__dipper_key{len(joins)}")
        ors = "".join(f", bool_or(coalesce({' AND '.join(f'({c})' for c in cuts[i].joined.conjuncts) or 'TRUE'}, "
                      f"false)) AS {quoted(f'__dipper_cut{i}')}" for i in members)
        joins.append(f"LEFT JOIN (SELECT {quoted(key)} AS {k}{ors} FROM {quote_name(source)} WHERE {quoted(key)} IS NOT "
                     f"NULL GROUP BY {quoted(key)}) {alias} ON {t}.{quoted(column)} = {alias}.{k}")
        for i in members:
            flags[i] = f"coalesce({alias}.{quoted(f'__dipper_cut{i}')}, false)"
    named = "".join(f", {flags[i]} AS {quoted(f'__dipper_cut{i}')}" for i in sorted(flags))
    order = _order(columns, sort_by)
    if order is None:
        order = SOURCE_ORDER
        file, row = (quoted(c) for c in SOURCE_ORDER)
        named = f", {t}._metadata.file_path AS {file}, {t}._metadata.row_index AS {row}{named}"
    inner = f"SELECT {t}.*{named} FROM {quote_name(table)} {t}{''.join(' ' + j for j in joins)}"
    listed = ", ".join(quoted(c) for c in columns)
    r = quoted("__dipper_r")
    return (f"SELECT {listed}, {_block_id(list(p.tree.blocks), 0)} AS {quoted(BLOCK)} FROM ({inner}) "
            f"{r} DISTRIBUTE BY {quoted(BLOCK)} SORT BY {', '.join([quoted(BLOCK)] + [f'{r}.{quoted(c)}' for c in order])}")


def shared_joins(p: Plan) -> dict[tuple[str, str, str], list[int]]:
    """The joined cuts on the tree's paths that ``routing_sql`` evaluates through one join, by (sender, key,
    column): every one without nested joined filters."""
    out: dict[tuple[str, str, str], list[int]] = {}
    for i in sorted(p.on_paths()):
        j = p.workload.cuts[i].joined
        if j is not None and not j.nested:
            out.setdefault((j.source, j.key, j.column), []).append(i)
    return out


def _block_id(blocks: list[Block], depth: int) -> str:
    """The id of the block among ``blocks`` (the leaves below one node at ``depth``) a row reaches."""
    if len(blocks) == 1:
        return str(blocks[0].id)
    cut = blocks[0].path[depth].cut
    left = [b for b in blocks if b.path[depth].holds]
    right = [b for b in blocks if not b.path[depth].holds]
    assert left and right and all(b.path[depth].cut == cut for b in blocks), "the blocks' paths form one tree"
    return (f"CASE WHEN {quoted(f'__dipper_cut{cut}')} THEN {_block_id(left, depth + 1)} "
            f"ELSE {_block_id(right, depth + 1)} END")


def apply(run: SqlRunner, store: StatsStore, loader: StatsLoader, p: Plan, sort_by: Sequence[str] = ()) -> Applied:
    """Rewrite ``p``'s table into ``p``'s blocks (see the module's docstring for the steps and guarantees),
    each block's rows in the table's order, or ordered on the columns ``sort_by``."""
    started = time.monotonic()
    table = p.workload.table
    d = describe_table(run, table)
    if d.format != "parquet":
        raise LayoutError(f"{table} is stored as {d.format}; apply writes Parquet tables only")
    if d.partition_columns:
        raise LayoutError(f"{table} is partitioned by {', '.join(d.partition_columns)}; apply does not rewrite "
                          f"partitioned tables yet")
    stats = loader.table_stats(table, fresh_listing=True)
    if stats is None or stats.unknown_files:
        raise LayoutError(f"the statistics of {table} do not cover its files now; collect them first "
                          f"(python -m stats collect {table}) and plan again")
    expected_rows = int(stats.rows.sum())
    before = list_files(d.location)
    fs, root, _ = filesystem(d.location)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
    tag = uuid.uuid4().hex[:8]
    staging_root = f"{root.rstrip('/')}.staging-{tag}"
    new_root = f"{root.rstrip('/')}.layout-{stamp}-{tag}"
    staging_location = _spelled(d.location, staging_root)
    new_location = _spelled(d.location, new_root)
    db = table.rpartition(".")[0]
    staging_table = f"{db}.__dipper_layout_{tag}"
    columns = list(d.schema)
    sort_by = check_sort_by(table, sort_by, columns)
    joins = p.workload.joined_attributes(loader)
    sources = sorted(set(p.sources()) | {source for source, _, _ in joins})
    pinned_before = {t: _identities(run, t) for t in sources}
    unique = _unique_keys(run, p)  # on the rows pinned: checked unchanged after routing
    ansi, zone = backend_session(run)
    created = False
    try:
        routing = routing_sql(table, columns, p, sort_by)
        log.info("routing %s into %d blocks (%d joins, %d characters of SQL)", table, len(p.tree.blocks),
                 routing.count(" LEFT JOIN "), len(routing))
        run(f"CREATE TABLE {quote_name(staging_table)} USING parquet PARTITIONED BY ({quoted(BLOCK)}) "
            f"LOCATION {quote_literal(staging_location)} AS {routing}")
        created = True
        joined = {group: _joined_bounds(run, staging_table, group, attributes) for group, attributes in joins.items()}
        log.info("joined bounds of %s: %d joins, %d sender columns", table, len(joins),
                 sum(len(a) for a in joins.values()))
        after = list_files(d.location)
        if after != before:
            raise LayoutError(f"{table} changed while it was rewritten (files added, replaced or removed); "
                              f"nothing was swapped: run apply again when no job writes to it")
        changed = [t for t in sources if _identities(run, t) != pinned_before[t]]
        if changed:
            raise LayoutError(f"{changed[0]}, which routes rows of {table} through a joined cut or bounds its files' "
                              f"joined rows, changed meanwhile; nothing was swapped: run apply again")
        moves = _block_files(fs, staging_root, new_root)
        rows = sum(pq.ParquetFile(fs.open_input_file(src)).metadata.num_rows for src, _ in moves)
        if rows != expected_rows:
            raise LayoutError(f"the blocks hold {rows:,} rows, {table} {expected_rows:,}; nothing was swapped")
        fs.create_dir(new_root)
        for src, dst in moves:
            fs.move(src, dst)
        run(f"ALTER TABLE {quote_name(table)} SET LOCATION {quote_literal(new_location)}")
    except BaseException:
        fs.delete_dir_contents(new_root, missing_dir_ok=True)
        _remove(fs, new_root)
        raise
    finally:
        if created:
            run(f"DROP TABLE IF EXISTS {quote_name(staging_table)}")
        fs.delete_dir_contents(staging_root, missing_dir_ok=True)
        _remove(fs, staging_root)
    run(f"REFRESH TABLE {quote_name(table)}")
    record = _record(store, p, d.location, new_location, moves, ansi, zone, pinned_before, unique, joins, joined)
    collect(run, store, [table], range_set_size=None, value_list_max=None)  # as the table was collected before
    return Applied(table, d.location, new_location, len(moves), rows, time.monotonic() - started, record)


def _spelled(location: str, root: str) -> str:
    """``root`` (a path inside ``location``'s filesystem) spelled as the catalog spells ``location``."""
    if location.startswith("file:") or "://" not in location:
        return ("file:" if location.startswith("file:") else "") + root
    scheme, rest = location.split("://", 1)
    return f"{scheme}://{rest.split('/', 1)[0]}/{root.lstrip('/')}"


def _block_files(fs: pafs.FileSystem, staging: str, target: str) -> list[tuple[str, str]]:
    """(staging file, its name in the new version) for every data file the staging table wrote."""
    out = []
    for info in fs.get_file_info(pafs.FileSelector(staging, recursive=True)):
        if info.type != pafs.FileType.File or not info.base_name.endswith(".parquet"):
            continue
        folder = info.path[len(staging):].strip("/").split("/")[0]
        if not folder.startswith(f"{BLOCK}="):
            raise LayoutError(f"unexpected file {info.path} in the staging folder")
        block = int(folder.split("=", 1)[1])
        out.append((info.path, block))
    named = []
    counts: dict[int, int] = {}
    for src, block in sorted(out):
        n = counts.get(block, 0)
        counts[block] = n + 1
        named.append((src, f"{target}/block-{block:05d}-{n:03d}.parquet"))
    return named


def _remove(fs: pafs.FileSystem, path: str) -> None:
    try:
        fs.delete_dir(path)
    except (FileNotFoundError, OSError):
        pass


def _unique_keys(run: SqlRunner, p: Plan) -> set[tuple[str, str]]:
    """The (sender, key) of the tree's joined cuts whose sender holds no non-NULL key twice: a statement's
    conjuncts that rule out every row such a cut admitted also rule out its keys (``rewriter/blocks.py``)."""
    pairs = sorted({(cut.joined.source, cut.joined.key) for i in p.on_paths()
                    if (cut := p.workload.cuts[i]).joined is not None})
    out = set()
    for source, key in pairs:
        rows = run(f"SELECT count({quoted(key)}) = count(DISTINCT {quoted(key)}) FROM {quote_name(source)}")
        if rows and str(rows[0][0]).lower() == "true":
            out.add((source, key))
    return out


def _identities(run: SqlRunner, table: str) -> frozenset[tuple[str, int, int]]:
    """The identity of every file ``table`` holds now."""
    return frozenset((f.path, f.size, f.mtime) for f in list_files(describe_table(run, table).location))


def backend_session(run: SqlRunner) -> tuple[bool, str | None]:
    """The ANSI mode and time zone of the backend session the rows are routed in."""
    def value(key: str) -> str:
        rows = run(f"SET {key}")
        return str(rows[0][1]) if rows else ""

    return value(ANSI).strip().lower() != "false", time_zone(value(TIME_ZONE)) if value(TIME_ZONE) else None


def _record(store: StatsStore, p: Plan, old: str, new: str, moves: list[tuple[str, str]], ansi: bool,
            zone: str | None, pinned: dict[str, frozenset[tuple[str, int, int]]], unique: set[tuple[str, str]],
            joins: dict[tuple[str, str, str], tuple[tuple[str, str], ...]],
            joined: dict[tuple[str, str, str], dict[tuple[int, str], tuple[int, tuple]]]) -> Path:
    """The plan as applied (``stats/blocks.py``), with the descriptions for people."""
    cuts = p.workload.cuts
    holds, fails = [c.holds() for c in cuts], [c.fails() for c in cuts]
    by_name = {f.path.rsplit("/", 1)[1]: f for f in list_files(new)}
    paths = {b.id: tuple((s.cut, s.holds) for s in b.path) for b in p.tree.blocks}
    files = {}
    staged = {}  # path in the new version -> (block, name in the staging folder)
    for src, dst in moves:
        name = dst.rsplit("/", 1)[1]
        info = by_name[name]
        block = int(name.split("-")[1])
        files[info.path] = (info.size, info.mtime, paths[block])
        staged[info.path] = (block, src.rsplit("/", 1)[1])
    bounds = tuple(JoinedBounds(source, key, column, joins[(source, key, column)],
                                {path: per_file.get(staged[path], (0, tuple((None, None, 0) for _ in joins[(source, key, column)])))
                                 for path in files})
                   for (source, key, column), per_file in joined.items())
    layout = BlockLayout(p.workload.table, new, ansi, zone,
                         tuple(c.recorded(c.joined is not None and (c.joined.source, c.joined.key) in unique) for c in cuts),
                         pinned, files, bounds)
    extra = {"applied": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
             "old_location": old,
             "blocks": [{"id": b.id, "description": p.tree.describe(b, holds, fails)} for b in p.tree.blocks]}
    return write_layout(store.root, layout, extra)


def _joined_bounds(run: SqlRunner, staging: str, group: tuple[str, str, str],
                   attributes: tuple[tuple[str, str], ...]) -> dict[tuple[int, str], tuple[int, tuple]]:
    """Per staged file (block, file name): the rows of the sender its rows join through ``group`` (sender, key,
    column), summarised per attribute (``stats/blocks.py``, ``JoinedBounds``): the joined pairs, and per
    attribute the min and max of its non-NULL values, in the statistics' domain, and its NULLs among the pairs.
    Counting pairs (a sender row once per row it joins) keeps what the evaluator asks of the counts: none,
    all, or some NULL. A file absent from the result joins no sender row.

    The sender is summarised per key first, so the join pairs each row with one group: a key the sender holds
    many times (a join between two fact tables on an item key) would otherwise multiply the table's rows by
    its repetitions (hundreds of millions of pairs at SF 1)."""
    source, key, column = group
    t, s = quoted("__dipper_t"), quoted("__dipper_s")
    k, n = quoted("__dipper_key"), quoted("__dipper_n")
    inner, outer = [f"{quoted(key)} AS {k}", f"count(*) AS {n}"], [f"sum({s}.{n})"]
    for i, (name, kind_name) in enumerate(attributes):
        x, lo, hi, nulls = quoted(name), quoted(f"__dipper_lo{i}"), quoted(f"__dipper_hi{i}"), quoted(f"__dipper_nulls{i}")
        inner += [f"min({domain_sql(x, Kind(kind_name))}) AS {lo}", f"max({domain_sql(x, Kind(kind_name))}) AS {hi}",
                  f"count(*) - count({x}) AS {nulls}"]
        outer += [f"min({s}.{lo})", f"max({s}.{hi})", f"sum({s}.{nulls})"]
    rows = run(f"SELECT {t}.{quoted(BLOCK)}, {t}._metadata.file_name, {', '.join(outer)} "
               f"FROM {quote_name(staging)} {t} JOIN (SELECT {', '.join(inner)} FROM {quote_name(source)} "
               f"WHERE {quoted(key)} IS NOT NULL GROUP BY {quoted(key)}) {s} ON {t}.{quoted(column)} = {s}.{k} "
               f"GROUP BY {t}.{quoted(BLOCK)}, {t}._metadata.file_name")
    out = {}
    for row in rows:
        values = []
        for a, (_, kind_name) in enumerate(attributes):
            low, high, nulls = row[3 + 3 * a: 6 + 3 * a]
            values.append((domain_value(low, Kind(kind_name)), domain_value(high, Kind(kind_name)), int(nulls)))
        out[(int(row[0]), str(row[1]))] = (int(row[2]), tuple(values))
    return out
