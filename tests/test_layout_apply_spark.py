"""``layout apply`` on Spark: a copy of TPC-H SF 0.01 lineitem rewritten into the blocks of a plan learned on
TPC-H query instances (joined cuts included). The table keeps exactly its rows; every new file holds exactly
the rows of its block's description; queries answer as before, directly and through Dipper's rewrite on the
new statistics, which skip more than on the old files for unseen instances; and a failure before the swap,
or a table changing during the job, leaves the old version as it was and nothing behind."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from bench.layout_effect import copy_tables
from bench.suites import TPCH
from bench.workloads import instances
from layout.apply import apply, shared_joins
from layout.joined import JoinedKeys
from layout.qdtree import coarsen
from layout.sample import LayoutError, sample_rows
from layout.whatif import Plan, cut_masks_of, min_block_rows, plan
from layout.workload import Statement, table_workload
from rewriter.emit import prune_filter
from rewriter.name_ranges import name_ranges
from rewriter.rewrite import RewriteContext, rewrite
from stats.collect import collect
from stats.freshness import Lister
from stats.loader import StatsLoader
from stats.store import StatsStore
from tests.conftest import Stack

pytestmark = pytest.mark.spark

DB = "layout_apply"
TABLE = f"{DB}.lineitem"


def _runner(stack: Stack) -> Any:
    return lambda sql: [tuple(r) for r in stack.spark.sql(sql).collect()]


def _location(stack: Stack) -> str:
    rows = stack.spark.sql(f"DESCRIBE TABLE EXTENDED {TABLE}").collect()
    return next(r[1] for r in rows if r[0] == "Location")


def _fingerprint(stack: Stack) -> tuple[int, int]:
    return tuple(stack.spark.sql(f"SELECT count(*), sum(hash(*)) FROM {TABLE}").collect()[0])


@pytest.fixture()
def tables(stack: Stack, tmp_path: Path) -> Iterator[tuple[StatsStore, StatsLoader]]:
    """TPC-H under ``layout_apply``: lineitem and orders copies (apply moves lineitem; a test changes orders),
    the others the test dataset's folders."""
    ds = stack.dataset("tpch", "tuned")
    spark = stack.spark
    store = StatsStore(tmp_path / "store")
    uncollected = copy_tables(spark, ds.database, DB, [t.name for t in TPCH.tables], ["lineitem", "orders"], tmp_path,
                              (stack.stats_store("tpch", "tuned"), store))  # the statistics carried over
    assert uncollected == []
    yield store, StatsLoader(store, Lister(0))
    spark.sql(f"DROP TABLE IF EXISTS {TABLE}")


def _plan(loader: StatsLoader, merged: bool = False) -> Plan:
    """The greedy's plan of lineitem on TPC-H instances; ``merged``: with a file cost (``qdtree.coarsen``) that
    merges some of its blocks and keeps at least two, the first of a rising series that does."""
    train = [Statement(sql, DB) for _, sql in instances("tpch", 1, 2)]
    workload = table_workload(train, TABLE, loader)
    stats = loader.table_stats(TABLE, fresh_listing=True)
    sample = sample_rows(stats, list(workload.columns), max_rows=10**8)
    min_rows = min_block_rows(TABLE, stats.n_files, sample, rows=sample.table_rows // 8, megabytes=None)
    p = plan(workload, sample, min_rows, JoinedKeys(loader))
    assert len(p.tree.blocks) >= 4 and any(workload.cuts[s.cut].joined for b in p.tree.blocks for s in b.path)
    if not merged:
        return p
    weights = workload.scan_weights(p.weigh)
    cost = next(c for c in (1e3, 3e3, 1e4, 3e4, 1e5, 3e5, 1e6)
                if 2 <= len(coarsen(p.tree, p.matches, c * sample.n / sample.table_rows, weights).blocks) < len(p.tree.blocks))
    out = plan(workload, sample, min_rows, JoinedKeys(loader), file_cost_rows=cost)
    assert out.greedy_blocks == len(p.tree.blocks) > len(out.tree.blocks) >= 2
    assert {b.path for b in out.tree.blocks} - {b.path for b in p.tree.blocks}  # a node's shorter path describes one
    return out


TEST_QUERIES = ["q01", "q03", "q04", "q06", "q12", "q14", "q15"]


def _answers(stack: Stack, queries: list[tuple[str, str]]) -> dict[str, list]:
    stack.spark.sql(f"USE {DB}")
    try:
        return {name: sorted(map(tuple, stack.spark.sql(sql).collect()), key=repr) for name, sql in queries}
    finally:
        stack.spark.sql("USE default")


def _bytes_read(loader: StatsLoader, queries: list[tuple[str, str]]) -> int:
    ctx = RewriteContext(loader, database=DB, min_skip_fraction=0.0)
    kept = 0
    for _, sql in queries:
        d = rewrite(sql, ctx).decision
        kept += sum(t.bytes_kept for t in d.tables if t.table == TABLE)
    return kept


KEY = ("l_orderkey", "l_linenumber")


def _positions(stack: Stack) -> dict[tuple, tuple[str, int]]:
    """Each row of the table (by its key): the file holding it and its position there."""
    rows = stack.spark.sql(f"SELECT {', '.join(KEY)}, _metadata.file_path, _metadata.row_index FROM {TABLE}").collect()
    return {tuple(r[:2]): (r[2], r[3]) for r in rows}


def _assert_in_order(location: str, before: dict[tuple, tuple[str, int]], sort_by: tuple[str, ...]) -> None:
    """Every file at ``location`` holds its rows ordered on ``sort_by`` or, without it, in the order the table
    held them (``before``: by file path, then position). Not by chance: files gather rows of several old files,
    which the shuffle delivers interleaved (with the order left out of the routing statement, both
    parametrisations failed here)."""
    gathering = 0
    for path in sorted(Path(location.removeprefix("file:")).glob("block-*.parquet")):
        rows = pq.read_table(path, columns=[*KEY, *sort_by]).to_pylist()
        origins = [before[tuple(r[c] for c in KEY)] for r in rows]
        gathering += len({file for file, _ in origins}) > 1
        if sort_by:
            values = [tuple(r[c] for c in sort_by) for r in rows]
            assert values == sorted(values), path
        else:
            assert origins == sorted(origins), path
    assert gathering > 0


# Merged: some blocks are a node of the greedy's tree, its description a shorter path (``qdtree.coarsen``),
# which must hold for its rows and prune as the greedy's leaves' did. The greedy's blocks are written in the
# table's order (the default), the merged ones ordered on --sort-by's columns.
@pytest.mark.differential
@pytest.mark.parametrize("merged", [False, True], ids=["greedy", "merged"])
def test_apply_keeps_every_row_puts_each_in_its_block_and_answers_as_before(
        stack: Stack, tables: tuple[StatsStore, StatsLoader], tmp_path: Path, merged: bool) -> None:
    store, loader = tables
    p = _plan(loader, merged)
    test = instances("tpch", 2, 1, TEST_QUERIES)
    before_answers, before_fingerprint, before_location = _answers(stack, test), _fingerprint(stack), _location(stack)
    before_bytes = _bytes_read(loader, test)
    positions = _positions(stack)

    done = apply(_runner(stack), store, loader, p, ("L_SHIPDATE", "l_orderkey") if merged else ())
    _assert_in_order(done.new_location, positions, ("l_shipdate", "l_orderkey") if merged else ())

    assert done.new_location != before_location and _location(stack) == done.new_location
    assert Path(before_location.removeprefix("file:")).is_dir()  # the old version stays for running readers
    assert _fingerprint(stack) == before_fingerprint and done.rows == before_fingerprint[0]
    holds = [c.holds() for c in p.workload.cuts]
    fails = [c.fails() for c in p.workload.cuts]
    spark = stack.spark
    per_file = dict(spark.sql(f"SELECT _metadata.file_name, count(*) FROM {TABLE} GROUP BY 1").collect())
    recorded = json.loads(done.record.read_text())["files"]
    assert len(per_file) == done.files and set(per_file) == {path.rsplit("/", 1)[1] for path in recorded}
    for block in p.tree.blocks:
        names = [n for n in per_file if n.startswith(f"block-{block.id:05d}-")]
        description = p.tree.describe(block, holds, fails)
        in_files = sum(per_file[n] for n in names)
        satisfying = spark.sql(f"SELECT count(*) FROM {TABLE} WHERE {description}").collect()[0][0]
        inside = spark.sql(f"SELECT count(*) FROM {TABLE} WHERE _metadata.file_name LIKE 'block-{block.id:05d}-%' "
                           f"AND {description}").collect()[0][0]
        assert in_files == satisfying == inside, (block.id, in_files, satisfying, inside)

    assert _answers(stack, test) == before_answers
    fresh = StatsLoader(store, Lister(0))
    stats = fresh.table_stats(TABLE, fresh_listing=True)
    assert stats is not None and stats.unknown_files == 0 and stats.n_files == done.files
    ctx = RewriteContext(fresh, database=DB, min_skip_fraction=0.0)
    spark.sql(f"USE {DB}")
    try:
        for name, sql in test:
            r = rewrite(sql, ctx)
            assert sorted(map(tuple, spark.sql(r.sql).collect()), key=repr) == before_answers[name], name
    finally:
        spark.sql("USE default")
    assert _bytes_read(fresh, test) < before_bytes

    # Laid out anew (bench layout-effect once a table's record is removed): the table is copied again, and the
    # version apply wrote is removed with the copy it replaces, not left in the copy's folder.
    copy_tables(spark, stack.dataset("tpch", "tuned").database, DB, ["lineitem"], ["lineitem"], tmp_path)
    assert not Path(done.new_location.removeprefix("file:")).exists()
    assert not list(tmp_path.glob("lineitem.layout-*")) and _fingerprint(stack) == before_fingerprint


def test_a_tree_of_hundreds_of_blocks_routes_each_row_to_its_block_without_a_codegen_failure(
        stack: Stack, tables: tuple[StatsStore, StatsLoader]) -> None:
    """At SF 10 a tree of 247 blocks over 37 joined cuts overflowed Spark's code generator (one join per cut,
    one CASE branch per block), and Spark went on interpreted, with an ERROR, for half an hour; on this table a
    tree of hundreds of blocks exhausted the driver's memory. With the fallbacks off, a statement Spark cannot
    compile fails here (a method over ``spark.sql.codegen.hugeMethodLimit`` still runs interpreted, silently).
    The oracles: the plan's own routing (``QdTree.route`` on the cuts decided in Python over every row of the
    new files), and Spark's reading of the recorded descriptions for blocks below a shared join."""
    store, loader = tables
    train = [Statement(sql, DB) for _, sql in instances("tpch", 3, 6)]
    workload = table_workload(train, TABLE, loader)
    stats = loader.table_stats(TABLE, fresh_listing=True)
    sample = sample_rows(stats, list(workload.columns), max_rows=10**8)
    keys = JoinedKeys(loader)
    # Blocks of 1/600 of the table: 421 blocks over 31 joined cuts, as many as overflowed at SF 10. A 2,000th
    # made 1,414 blocks over 37, and the test spent two minutes writing and reading their files.
    p = plan(workload, sample, max(1, sample.table_rows // 600), keys)
    groups = shared_joins(p)
    shared = set().union(*(g for g in groups.values() if len(g) >= 2))
    assert len(p.tree.blocks) >= 300 and sum(map(len, groups.values())) >= 20 and shared, (len(p.tree.blocks), groups)
    spark = stack.spark
    fallbacks = {"spark.sql.codegen.fallback": "false", "spark.sql.codegen.factoryMode": "CODEGEN_ONLY"}
    for key, value in fallbacks.items():
        spark.conf.set(key, value)
    try:
        done = apply(_runner(stack), store, loader, p)
    finally:
        for key in fallbacks:
            spark.conf.unset(key)

    after = StatsLoader(store, Lister(0)).table_stats(TABLE, fresh_listing=True)
    assert after is not None and after.unknown_files == 0 and int(after.rows.sum()) == done.rows == sample.table_rows
    rows = sample_rows(after, list(workload.columns), max_rows=10**8)  # every row, file by file
    written = np.repeat([int(path.rsplit("/", 1)[1].split("-")[1]) for path in after.paths], after.rows)
    masks, _ = cut_masks_of(workload, rows, keys)
    routed = p.tree.route(masks)
    assert len(set(written)) > 100 and (written == routed).all(), int((written != routed).sum())
    holds = [c.holds() for c in workload.cuts]
    fails = [c.fails() for c in workload.cuts]
    below = [b for b in p.tree.blocks if any(s.cut in shared for s in b.path)]
    for block in below[::max(1, len(below) // 4)]:
        description = p.tree.describe(block, holds, fails)
        in_files = int((written == block.id).sum())
        satisfying = spark.sql(f"SELECT count(*) FROM {TABLE} WHERE {description}").collect()[0][0]
        assert in_files == satisfying, (block.id, in_files, satisfying)


def test_apply_refuses_a_table_it_cannot_rewrite_before_anything_is_written(
        stack: Stack, tables: tuple[StatsStore, StatsLoader]) -> None:
    """apply writes unpartitioned Parquet tables: an ORC table or a partitioned one is refused with the reason,
    before any statement writes, and the table it names is left as it was."""
    store, loader = tables
    p = _plan(loader)
    spark = stack.spark
    spark.sql(f"CREATE TABLE {DB}.as_orc USING orc AS SELECT 1 AS a, 2 AS b")
    spark.sql(f"CREATE TABLE {DB}.by_day USING parquet PARTITIONED BY (b) AS SELECT 1 AS a, 2 AS b")
    try:
        for name, message in (("as_orc", "is stored as orc; apply writes Parquet tables only"),
                              ("by_day", "is partitioned by b; apply does not rewrite partitioned tables")):
            other = dataclasses.replace(p, workload=dataclasses.replace(p.workload, table=f"{DB}.{name}"))
            written: list[str] = []

            def run(sql: str) -> list:
                written.append(sql)
                return _runner(stack)(sql)

            with pytest.raises(LayoutError, match=message):
                apply(run, store, loader, other)
            assert not [sql for sql in written if not sql.lstrip().upper().startswith(("SHOW", "DESCRIBE"))], written
            assert [tuple(r) for r in spark.sql(f"SELECT a, b FROM {DB}.{name}").collect()] == [(1, 2)]
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {DB}.as_orc")
        spark.sql(f"DROP TABLE IF EXISTS {DB}.by_day")


def test_a_failure_before_the_swap_leaves_the_table_as_it_was(
        stack: Stack, tables: tuple[StatsStore, StatsLoader], tmp_path: Path) -> None:
    store, loader = tables
    p = _plan(loader)
    location, fingerprint = _location(stack), _fingerprint(stack)
    run = _runner(stack)

    def failing(sql: str) -> list:
        if sql.startswith("ALTER TABLE"):
            raise RuntimeError("the metastore went away")
        return run(sql)

    with pytest.raises(RuntimeError, match="metastore"):
        apply(failing, store, loader, p)
    assert _location(stack) == location and _fingerprint(stack) == fingerprint
    parent = Path(location.removeprefix("file:")).parent
    assert sorted(x.name for x in parent.iterdir() if x.name.startswith("lineitem.")) == []
    assert not [r for r in stack.spark.sql(f"SHOW TABLES IN {DB}").collect() if r[1].startswith("__dipper_layout")]

    def writer_meanwhile(sql: str) -> list:
        out = run(sql)
        if sql.startswith("CREATE TABLE"):  # another job appends a file while apply routes the rows
            folder = Path(location.removeprefix("file:"))
            shutil.copy(next(folder.glob("*.parquet")), folder / "part-appended.parquet")
        return out

    with pytest.raises(LayoutError, match="changed while it was rewritten"):
        apply(writer_meanwhile, store, loader, p)
    assert _location(stack) == location
    assert sorted(x.name for x in parent.iterdir() if x.name.startswith("lineitem.")) == []


@pytest.mark.differential
def test_the_rewriter_skips_files_by_their_blocks_while_the_dimensions_are_unchanged(
        stack: Stack, tables: tuple[StatsStore, StatsLoader], tmp_path: Path) -> None:
    """After apply, a statement restricted by a cut of the tree (the training instances themselves, whose
    conjuncts and joined filters are spelled as the cuts) skips the files whose block fails it, beyond what
    their statistics skip; so do instances with other literals, through what their conjuncts imply about the
    cuts (``rewriter/implication.py``); answers stay Spark's. Once orders (a joined cut's sender) gains a file,
    the joined cuts are void and only local cuts and statistics prune; answers still Spark's."""
    from rewriter.session import SessionSettings

    store, loader = tables
    p = _plan(loader)
    apply(_runner(stack), store, loader, p)
    spark = stack.spark
    session = SessionSettings(time_zone=spark.conf.get("spark.sql.session.timeZone"))
    queries = [(name, sql) for name, sql in instances("tpch", 1, 2) if "lineitem" in sql.lower()]
    unseen = [(name, sql) for name, sql in instances("tpch", 2, 2)
              if "lineitem" in sql.lower() and sql not in {text for _, text in queries}]  # a few draws repeat

    def run_all(label: str, queries: list[tuple[str, str]] = queries) -> tuple[int, set[str]]:
        ctx = RewriteContext(StatsLoader(store, Lister(0)), database=DB, session=session, min_skip_fraction=0.0)
        removed, used = 0, set()
        spark.sql(f"USE {DB}")
        try:
            for name, sql in queries:
                r = rewrite(sql, ctx)
                assert r.decision.error is None, (name, r.decision.error)
                for t in r.decision.tables:
                    for e in t.predicates:
                        if e.by_block_descriptions:
                            removed += e.files_removed
                            used.add(e.sql)
                if r.changed:
                    got = sorted(map(tuple, spark.sql(r.sql).collect()), key=repr)
                    want = sorted(map(tuple, spark.sql(sql).collect()), key=repr)
                    assert got == want, (label, name)
        finally:
            spark.sql("USE default")
        return removed, used

    removed, used = run_all("dimensions unchanged")
    assert removed > 0 and any("IN (SELECT" in u for u in used), used
    removed, used = run_all("unseen literals", unseen)
    assert removed > 0 and any("IN (SELECT" in u for u in used), used
    orders = tmp_path / "orders"
    shutil.copy(next(orders.glob("*.parquet")), orders / "part-late-arrival.parquet")
    collect(spark, store, [f"{DB}.orders"])
    _, used_after = run_all("orders changed")
    assert not any("`o_orderkey` IN (SELECT" in u or "orders" in u for u in used_after), used_after


@pytest.mark.differential
def test_name_ranges_skip_exactly_their_block_files_and_read_what_changed_since(
        stack: Stack, tables: tuple[StatsStore, StatsLoader]) -> None:
    """The prune filter with name ranges (``rewriter/name_ranges.py``), as Spark evaluates it on the applied
    files: for random skips, Spark reads exactly the files not skipped. A block file rewritten in place after
    the filter was written (same name, another content, a later mtime) is read by that filter, and so are one
    replaced by a copy with an mtime from before the layout was applied and a file an INSERT adds; the rewrite after either change uses no range (a file without statistics). Queries
    through the rewriter that use ranges answer as Spark does."""
    store, loader = tables
    apply(_runner(stack), store, loader, _plan(loader))
    fresh = StatsLoader(store, Lister(0))
    stats, layout = fresh.table_stats(TABLE, fresh_listing=True), fresh.block_layout(TABLE)
    assert stats is not None and layout is not None and stats.n_files >= 5
    spark = stack.spark

    def read(text: str) -> set[str]:
        spark.sql(f"REFRESH TABLE {TABLE}")
        return {r[0] for r in spark.sql(f"SELECT DISTINCT _metadata.file_path FROM {TABLE} WHERE {text}").collect()}

    rng = np.random.default_rng(5)
    ranged = 0
    for _ in range(10):
        skip = rng.random(stats.n_files) < rng.uniform(0.3, 1.0)
        ranges = name_ranges(stats, skip, layout)
        ranged += ranges is not None
        assert read(prune_filter(stats, skip, ranges)) == set(stats.paths[~skip]), skip
    assert ranged >= 5

    ctx = RewriteContext(fresh, database=DB, min_skip_fraction=0.0)
    spark.sql(f"USE {DB}")
    try:
        used = 0
        for name, sql in instances("tpch", 2, 2, TEST_QUERIES):
            r = rewrite(sql, ctx)
            mine = [t for t in r.decision.tables if t.table == TABLE]
            used += sum(t.name_ranges for t in mine)
            if r.changed:
                assert sorted(map(tuple, spark.sql(r.sql).collect()), key=repr) == \
                    sorted(map(tuple, spark.sql(sql).collect()), key=repr), name
        assert used > 0
    finally:
        spark.sql("USE default")

    skip = np.zeros(stats.n_files, dtype=bool)
    order = np.argsort(stats.paths)
    skip[order[:-1]] = True  # every file but the last in name order: one run
    ranges = name_ranges(stats, skip, layout)
    assert ranges is not None and ranges.covered.sum() == stats.n_files - 1
    text = prune_filter(stats, skip, ranges)
    victim = str(stats.paths[order[0]])
    # Rewritten in place with another skipped file's rows: its size is a skipped one, so no kept-size test
    # lets it through; only the mtime test can.
    shutil.copy(str(stats.paths[order[1]]).removeprefix("file:"), victim.removeprefix("file:"))
    assert read(text) == {victim, str(stats.paths[order[-1]])}
    # Replaced by a copy whose mtime was kept from before the layout was applied (cp -p from elsewhere).
    other = str(stats.paths[order[2]])
    shutil.copy(str(stats.paths[order[3]]).removeprefix("file:"), other.removeprefix("file:"))
    os.utime(other.removeprefix("file:"), ns=(0, (ranges.oldest - 60_000_000) * 1000))
    assert read(text) == {victim, other, str(stats.paths[order[-1]])}
    spark.sql(f"INSERT INTO {TABLE} SELECT * FROM {TABLE} LIMIT 3")
    added = read(text) - {victim, other, str(stats.paths[order[-1]])}
    assert len(added) == 1 and "/part-" in added.pop()
    now = StatsLoader(store, Lister(0)).table_stats(TABLE, fresh_listing=True)
    assert now is not None and now.unknown_files == 3 and name_ranges(now, np.ones(now.n_files, dtype=bool), layout) is None


def _run_ends() -> dict[int, np.ndarray]:
    """For each number of runs, the sorted block ids of their ends (random, one generator over the counts)."""
    rng = np.random.default_rng(9)
    return {count: np.sort(rng.choice(np.arange(400), size=2 * count, replace=False))
            for count in (1, 2, 3, 5, 8, 17, 40)}


RUN_ENDS = _run_ends()


@pytest.mark.parametrize("count", list(RUN_ENDS))
def test_the_name_test_of_the_ranges_is_a_binary_search_spark_agrees_with(stack: Stack, count: int) -> None:
    """The filter's test of a file name against ``count`` runs (``rewriter/emit.py``, a CASE per level down to
    one run's BETWEEN), evaluated by Spark on names at, between and around random runs' ends: TRUE exactly for
    the names inside a run."""
    from rewriter.emit import names_in_runs

    ids = RUN_ENDS[count]
    runs = tuple((f"block-{a:05d}-000.parquet", f"block-{b:05d}-001.parquet") for a, b in zip(ids[0::2], ids[1::2]))
    names = sorted({f"block-{i:05d}-{n:03d}.parquet" for i in range(-1, 402) if i >= 0 for n in (0, 1, 2)}
                   | {"block-", "block-00000", "part-00000.parquet", "a", "zz"})
    values = ", ".join(f"('{n}')" for n in names)
    test = names_in_runs(runs).replace("_metadata.file_name", "name")
    got = {r[0] for r in stack.spark.sql(f"SELECT name FROM VALUES {values} AS v(name) WHERE {test}").collect()}
    assert got == {n for n in names if any(a <= n <= b for a, b in runs)}, count


@pytest.mark.differential
def test_joined_bounds_are_the_rows_each_file_joins_and_rule_out_only_files_no_passing_row_joins(
        stack: Stack, tables: tuple[StatsStore, StatsLoader]) -> None:
    """``apply`` records, per new file and per join the workload takes into lineitem, the bounds of the sender
    rows the file's rows join (``stats/blocks.py``, ``JoinedBounds``). Oracles, on Spark: the bounds equal
    the min, max and NULLs of a join of the new files computed here; for generated windows and values of the
    senders' columns (not the workload's literals), every file the bounds rule out holds no row of the semi
    join, and some are ruled out; unseen TPC-H instances answer as Spark does, files removed by the bounds."""
    import datetime

    import sqlglot

    from rewriter.joined_bounds import unreached
    from rewriter.joined_filter import Joined, translator_for, unqualified
    from rewriter.predicate import And
    from rewriter.session import SessionSettings
    from stats.blocks import read_layout

    store, loader = tables
    p = _plan(loader)
    apply(_runner(stack), store, loader, p)
    spark = stack.spark
    record = read_layout(store.root, TABLE)
    fresh = StatsLoader(store, Lister(0))
    stats = fresh.table_stats(TABLE, fresh_listing=True)
    described = record.described(stats)
    assert described.all()
    groups = {(b.source, b.key, b.column): b for b in record.joined_bounds}
    orders = groups[(f"{DB}.orders", "o_orderkey", "l_orderkey")]
    assert ("o_orderdate", "date") in orders.attributes and set(orders.files) == set(stats.paths)
    repeated = [b for b in groups.values() if spark.sql(
        f"SELECT count(`{b.key}`) > count(DISTINCT `{b.key}`) FROM {b.source}").collect()[0][0]]
    assert repeated, sorted(groups)  # partsupp's keys: apply summarises per key, the oracle below joins row by row

    def shown(value: object, kind: str) -> object:
        return datetime.date(1970, 1, 1) + datetime.timedelta(days=value) if kind == "date" and value is not None else value

    for bounds in groups.values():
        parts = "".join(f", min(s.`{a}`), max(s.`{a}`), count(*) - count(s.`{a}`)" for a, _ in bounds.attributes)
        joined = {r[0]: tuple(r[1:]) for r in spark.sql(
            f"SELECT t._metadata.file_path, count(*){parts} FROM {TABLE} t JOIN {bounds.source} s "
            f"ON t.`{bounds.column}` = s.`{bounds.key}` GROUP BY 1").collect()}
        for path, (pairs, per) in bounds.files.items():
            recorded = (pairs,) + tuple(v for (lo, hi, nulls), (_, kind) in zip(per, bounds.attributes)
                                        for v in (shown(lo, kind), shown(hi, kind), nulls))
            want = joined.get(path, (0,) + (None, None, 0) * len(bounds.attributes))
            assert recorded == want, (bounds.source, path, recorded, want)

    session = SessionSettings(time_zone=spark.conf.get("spark.sql.session.timeZone"))
    rng = np.random.default_rng(15)
    generated = []
    for _ in range(12):
        start = datetime.date(1992, 1, 1) + datetime.timedelta(days=int(rng.integers(0, 2400)))
        end = start + datetime.timedelta(days=int(rng.integers(1, 200)))
        generated.append((orders, [f"o_orderdate >= DATE '{start}'", f"o_orderdate < DATE '{end}'"]))
    part = groups[(f"{DB}.part", "p_partkey", "l_partkey")]  # the training instances join lineitem to part
    generated += [(part, [f"p_size = {int(rng.integers(1, 51))}"]) for _ in range(3)]
    removed = 0
    for bounds, conjuncts in generated:
        source = fresh.table_stats(bounds.source, fresh_listing=True)
        nodes = [sqlglot.parse_one(c, read="spark") for c in conjuncts]
        t = translator_for(source, "", session)
        j = Joined(bounds.column, bounds.source, bounds.key, And(tuple(t.translate(n) for n in nodes)),
                   tuple(unqualified(n) for n in nodes))
        out = unreached(bounds, stats, described, j, source)
        reached = {r[0] for r in spark.sql(f"SELECT DISTINCT _metadata.file_path FROM {TABLE} WHERE {j.sql()}").collect()}
        assert not reached & set(stats.paths[out]), (conjuncts, reached & set(stats.paths[out]))
        removed += int(out.sum())
    assert removed > 0

    unseen = [(name, sql) for name, sql in instances("tpch", 2, 2) if "lineitem" in sql.lower()]
    ctx = RewriteContext(fresh, database=DB, session=session, min_skip_fraction=0.0)
    by_bounds = 0
    spark.sql(f"USE {DB}")
    try:
        for name, sql in unseen:
            r = rewrite(sql, ctx)
            assert r.decision.error is None, (name, r.decision.error)
            by_bounds += sum(e.files_removed for t in r.decision.tables for e in t.predicates
                             if e.by_block_descriptions and "(joined bounds)" in e.sql)
            if r.changed:
                got = sorted(map(tuple, spark.sql(r.sql).collect()), key=repr)
                assert got == sorted(map(tuple, spark.sql(sql).collect()), key=repr), name
    finally:
        spark.sql("USE default")
    assert by_bounds > 0
