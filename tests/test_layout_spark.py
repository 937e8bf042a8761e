"""The layout planner against Spark: on the TPC-H SF 0.01 ``tuned`` lineitem and the 22 TPC-H queries,
every block's description selects in Spark exactly the rows the planner routed to the block (so the cuts
mean what Spark means), the blocks partition the table, each scan's lower bound counts the rows Spark finds
for its conjuncts, and the proposed layout reads less than the current files."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sqlglot

from bench.query_suite import runnable_queries
from layout.joined import JoinedKeys
from layout.sample import sample_rows
from layout.whatif import block_stats, dipper_today, min_block_rows, plan, render, what_if
from layout.workload import Resolutions, Statement, table_workload
from rewriter.joined_filter import Joined, unqualified
from rewriter.evaluate import fully_translated, might_match
from stats.collect import collect
from stats.freshness import Lister
from stats.loader import StatsLoader
from stats.store import StatsStore
from tests.conftest import Stack, own_env

pytestmark = pytest.mark.spark


def _exact(j: Joined) -> bool:
    return fully_translated(j.pred) and all(_exact(n) for n in j.nested)


def test_qd_tree_blocks_and_scans_agree_with_spark(stack: Stack) -> None:
    ds = stack.dataset("tpch", "tuned")
    loader = StatsLoader(stack.stats_store("tpch", "tuned"), Lister(0))
    table = f"{ds.database}.lineitem"
    statements = [Statement(sql, ds.database) for sql in runnable_queries("tpch").values()]
    workload = table_workload(statements, table, loader)
    assert len(workload.scans) >= 20 and len(workload.cuts) >= 10, workload
    stats = loader.table_stats(table, fresh_listing=True)
    assert stats is not None
    sample = sample_rows(stats, list(workload.columns), max_rows=10**8)  # every row: exact counts to compare
    assert sample.n == sample.table_rows == int(stats.rows.sum())
    keys = JoinedKeys(loader)
    p = plan(workload, sample, min_block_rows(table, stats.n_files, sample, rows=sample.table_rows // 16,
                                              megabytes=None), keys)
    assert len(p.tree.blocks) >= 4

    holds, fails = [c.holds() for c in workload.cuts], [c.fails() for c in workload.cuts]
    spark = stack.spark

    def count(where: str) -> int:
        return spark.sql(f"SELECT count(*) FROM {table} WHERE {where}").collect()[0][0]

    for block in p.tree.blocks:
        assert count(p.tree.describe(block, holds, fails)) == block.size, p.tree.describe(block, holds, fails)
    assert sum(b.size for b in p.tree.blocks) == sample.n

    for q, scan in enumerate(workload.scans):
        if not scan.conjuncts and not scan.joined:
            assert p.matches[q].all()
            continue
        # The scan's conjuncts over the table's own columns (a scan's alias is the query's).
        where = " AND ".join([f"({unqualified(sqlglot.parse_one(c, read='spark'))})" for c in scan.conjuncts] +
                             [j.sql() for j in scan.joined])
        found = count(where)
        may = int(p.matches[q].sum())
        if fully_translated(scan.pred) and all(_exact(j) for j in scan.joined):
            assert may == found, (scan.describe(), may, found)
        else:
            assert may >= found, (scan.describe(), may, found)

    today, today_files = dipper_today(workload, statements, loader, {"min_skip_fraction": 0.0})
    w = what_if(p, sample, keys, today, loader, today_files=today_files)  # judged on every row: shares are exact
    assert w.workload is workload
    judged, ideal, current = w.layouts[0], w.layouts[1], w.layouts[2]
    assert (judged.name, ideal.name, current.name) == ("qd-tree", "qd-tree, ideal", "Dipper today")
    assert w.total(ideal.read) <= w.total(current.read)
    assert (ideal.read >= w.matching - 1e-12).all()
    assert w.layouts[3].name == "random" and w.total(ideal.read) < w.total(w.layouts[3].read)
    # Judged as the rewriter judges files, a block holding a row the scan wants is never ruled out (the
    # descriptions and statistics are sound on the very rows they were computed from), and the descriptions
    # rule out blocks that the blocks' statistics alone keep: the training statements are spelled as the cuts.
    assert (judged.read >= ideal.read - 1e-12).all()
    blocks = block_stats(sample.rows, p.tree.route(p.cut_masks), len(p.tree.blocks), table)
    rows = blocks.rows / blocks.rows.sum()
    by_statistics = [rows[might_match(s.pred, blocks) &
                          np.logical_and.reduce([keys.overlap(j, blocks.columns[j.column]) for j in s.joined] +
                                                [np.ones(len(rows), dtype=bool)])].sum() for s in workload.scans]
    assert (judged.read <= np.array(by_statistics) + 1e-12).all()
    assert w.total(judged.read) < w.total(np.array(by_statistics)) - 0.02, (w.total(judged.read), by_statistics)
    # Files opened, what a scan's time follows besides its rows: the ideal opens the blocks holding a matching
    # row, the rewriter at least those, Dipper today the files its decision keeps.
    block_of_row = p.tree.route(p.cut_masks)
    assert ideal.files.tolist() == [len(np.unique(block_of_row[m])) for m in p.matches]
    assert (judged.files >= ideal.files).all() and (judged.files <= len(p.tree.blocks)).all()
    assert current.files.tolist() == today_files.tolist() and (today_files <= stats.n_files).all()
    assert 0 < w.total(current.files) and not np.isnan(today_files).any()
    report = render(w)
    assert f"{w.total(ideal.files):,.1f}" in report and "files opened per scan (mean)" in report
    assert "rows read + 8,000 per file opened" in report  # the measured cost judges a plan made without it

    # A decision log repeats a dashboard's statements: the report lists a repeated scan once, with its count.
    doubled = dataclasses.replace(workload, scans=workload.scans + tuple(  # each repeat its own statement, as logged
        dataclasses.replace(scan, statement=scan.statement + workload.statements) for scan in workload.scans),
        statements=2 * workload.statements)
    again = what_if(p, sample, keys, np.concatenate([today, today]), loader, doubled)
    once, twice = (_listed(render(x, limit=1000)) for x in (w, again))
    assert twice == {line: 2 * times for line, times in once.items()} and sum(once.values()) == len(workload.scans)
    assert again.total(again.layouts[1].read) == pytest.approx(w.total(ideal.read))  # each run weighs the same


def _listed(report: str) -> dict[str, int]:
    """The what-if report's scan lines: the line but for its count, and the count."""
    out = {}
    for line in report.splitlines():
        m = re.match(r"\s*(\d+)\s+(\d+)\s+(.*)$", line)
        if m and "%" in m.group(3):
            out[f"{m.group(1)} {m.group(3)}"] = int(m.group(2))
    return out


def test_cuts_the_sample_cannot_decide_exactly_are_left_out(stack: Stack, tmp_path) -> None:  # noqa: ANN001
    """NaN (unknown bounds), a timestamp literal without a session time zone (a range of instants), a LIKE
    pattern that is a range of strings, and a literal between two integers: both the cut and its negation may
    hold on some rows, so routing by the sample would disagree with Spark. Those cuts are never chosen, and
    every block's description still selects in Spark exactly the rows routed to it."""
    import datetime

    import pyarrow as pa
    import pyarrow.parquet as pq

    from layout.sample import sample_rows
    from stats.collect import collect
    from stats.store import StatsStore

    folder = tmp_path / "odd"
    folder.mkdir()
    for f in range(4):
        n = 400
        x = [float("nan") if i % 50 == 0 else float(f * 100 + i % 100) for i in range(n)]
        ts = [datetime.datetime(2020, 1, 1 + f, i % 24, tzinfo=datetime.timezone.utc) for i in range(n)]
        s = [("A" if i % 3 else "B") + ("x" * (i % 4)) + ("B" if i % 2 else "C") for i in range(n)]
        k = [f * 10 + i % 10 for i in range(n)]
        pq.write_table(pa.table({"x": x, "ts": ts, "s": s, "k": k}), folder / f"part-{f}.parquet")
    spark = stack.spark
    spark.sql("CREATE DATABASE IF NOT EXISTS layout_odd")
    spark.sql("DROP TABLE IF EXISTS layout_odd.t")
    spark.sql(f"CREATE TABLE layout_odd.t USING parquet LOCATION '{folder}'")
    store = StatsStore(tmp_path / "store")
    collect(spark, store, ["layout_odd.t"])
    loader = StatsLoader(store, Lister(0))
    sqls = ["SELECT count(*) FROM t WHERE x < 150", "SELECT count(*) FROM t WHERE ts < '2020-01-03 05:00:00'",
            "SELECT count(*) FROM t WHERE s LIKE 'A%B'", "SELECT count(*) FROM t WHERE k = 15.5",
            "SELECT count(*) FROM t WHERE k < 25", "SELECT count(*) FROM t WHERE k >= 32"]
    workload = table_workload([Statement(q, "layout_odd") for q in sqls], "layout_odd.t", loader)
    stats = loader.table_stats("layout_odd.t", fresh_listing=True)
    sample = sample_rows(stats, list(workload.columns), max_rows=10**6)
    p = plan(workload, sample, 100, JoinedKeys(loader))
    assert p.undecided >= 4, [c.sql for c in workload.cuts]
    assert len(p.tree.blocks) >= 3  # the decidable cuts on k still split
    holds, fails = [c.holds() for c in workload.cuts], [c.fails() for c in workload.cuts]
    spark.sql("SET spark.sql.session.timeZone=UTC")
    try:
        for block in p.tree.blocks:
            found = spark.sql(f"SELECT count(*) FROM layout_odd.t WHERE {p.tree.describe(block, holds, fails)}").collect()[0][0]
            assert found == block.size, p.tree.describe(block, holds, fails)
    finally:
        spark.sql("RESET spark.sql.session.timeZone")


def test_lead_ranges_are_date_ranges_in_spark_with_the_workloads_cuts_inside(stack: Stack) -> None:
    """``--lead-ranges l_shipdate:4``: every block's description (DATE literals of the range cuts included)
    selects in Spark exactly the rows routed to it; the blocks, in id order, lie in four disjoint ranges of
    l_shipdate of about equal rows, in date order; and the workload's own cuts split the ranges further."""
    from layout.__main__ import render_plan
    from layout.lead import LeadRanges, lead_cuts
    from rewriter.session import SessionSettings

    ds = stack.dataset("tpch", "tuned")
    loader = StatsLoader(stack.stats_store("tpch", "tuned"), Lister(0))
    table = f"{ds.database}.lineitem"
    stats = loader.table_stats(table, fresh_listing=True)
    statements = [Statement(sql, ds.database) for sql in runnable_queries("tpch").values()]
    columns = sorted(set(table_workload(statements, table, loader).columns) | {"l_shipdate"})
    sample = sample_rows(stats, columns, max_rows=10**8)
    # A statement spelled as the middle range cut: the workload offers that cut itself, and the plan uses it once.
    middle = lead_cuts(LeadRanges("l_shipdate", 4), sample, SessionSettings())[1].sql
    workload = table_workload(statements + [Statement(f"SELECT count(*) FROM lineitem WHERE {middle}", ds.database)],
                              table, loader)
    offered = [c.sql for c in workload.cuts].index(middle)
    p = plan(workload, sample, min_block_rows(table, stats.n_files, sample, rows=sample.table_rows // 32,
                                              megabytes=None), JoinedKeys(loader), [LeadRanges("l_shipdate", 4)])
    assert len({c.sql for c in p.workload.cuts}) == len(p.workload.cuts) and p.workload.cuts[offered].sql == middle
    assert all(b.path[0].cut == offered for b in p.tree.blocks)  # the root halves the table on the offered cut
    assert p.ranges() == 4 and "ranges first: 4 ranges of l_shipdate (4 asked" in render_plan(p)
    many = plan(workload, sample, p.min_rows, JoinedKeys(loader), [LeadRanges("l_shipdate", 64)])
    assert 16 <= many.ranges() <= 32 and f"ranges first: {many.ranges()} ranges of l_shipdate (64 asked" in render_plan(many)
    holds, fails = [c.holds() for c in p.workload.cuts], [c.fails() for c in p.workload.cuts]
    where = [p.tree.describe(b, holds, fails) for b in p.tree.blocks]
    # One pass: each row's block (the first description it satisfies) and how many descriptions it satisfies.
    case = " ".join(f"WHEN {w} THEN {b.id}" for w, b in zip(where, p.tree.blocks))
    count = " + ".join(f"CAST({w} AS INT)" for w in where)
    found = {r[0]: r[1:] for r in stack.spark.sql(
        f"SELECT b, min(l_shipdate), max(l_shipdate), count(*), min(n), max(n) FROM (SELECT l_shipdate, "
        f"CASE {case} END AS b, {count} AS n FROM {table}) GROUP BY b").collect()}
    ranges: dict[tuple, list] = {}
    for block in p.tree.blocks:
        lo, hi, rows, fewest, most = found[block.id]
        assert rows == block.size and fewest == most == 1, where[block.id]  # exactly its rows, in no other block
        lead = block.path[:2]
        assert all(p.workload.cuts[s.cut].sql.startswith("l_shipdate < CAST(") for s in lead), where[block.id]
        ranges.setdefault(lead, []).append((block.id, lo, hi, rows))
    assert None not in found and len(found) == len(p.tree.blocks)
    assert len(ranges) == 4
    ordered = sorted(ranges.values(), key=lambda blocks: blocks[0][0])  # by the ranges' first block id
    for before, after in zip(ordered, ordered[1:]):
        assert max(b[2] for b in before) < min(b[1] for b in after)  # disjoint, in date order
        assert max(b[0] for b in before) < min(b[0] for b in after)  # each range one run of block ids
    sizes = [sum(b[3] for b in blocks) for blocks in ordered]
    assert max(sizes) < 1.1 * min(sizes), sizes
    assert any(len(blocks) > 1 for blocks in ordered)  # the workload's cuts split inside the ranges


@dataclasses.dataclass
class Weighed:
    """A statement that reads lineitem three times (a UNION ALL of three scans for few quantities) and two
    statements that each read it once (a late ship-date window), planned each way of weighing them."""
    database: str
    table: str
    statements: list[Statement]
    workload: Any
    sample: Any
    keys: JoinedKeys
    loader: StatsLoader
    plans: dict[str, Any]  # weighing -> its plan
    root_cut: dict[str, str]  # weighing -> the cut at its plan's root


@pytest.fixture(scope="module")
def weighed(stack: Stack) -> Weighed:
    ds = stack.dataset("tpch", "tuned")
    loader = StatsLoader(stack.stats_store("tpch", "tuned"), Lister(0))
    table = f"{ds.database}.lineitem"
    few = "SELECT l_orderkey FROM lineitem WHERE l_quantity < 5"
    late = "SELECT count(*) FROM lineitem WHERE l_shipdate >= DATE '1998-06-01'"
    statements = [Statement(" UNION ALL ".join([few] * 3), ds.database), Statement(late, ds.database),
                  Statement(late + " AND l_discount >= 0", ds.database)]
    workload = table_workload(statements, table, loader)
    stats = loader.table_stats(table, fresh_listing=True)
    sample = sample_rows(stats, list(workload.columns), max_rows=10**8)
    min_rows = min_block_rows(table, stats.n_files, sample, rows=sample.table_rows // 64, megabytes=None)
    keys = JoinedKeys(loader)
    plans = {weigh: plan(workload, sample, min_rows, keys, weigh=weigh) for weigh in ("statements", "scans")}
    root_cut = {weigh: p.workload.cuts[p.tree.blocks[0].path[0].cut].sql for weigh, p in plans.items()}
    return Weighed(ds.database, table, statements, workload, sample, keys, loader, plans, root_cut)


def test_each_statement_weighs_the_same_unless_scans_are_asked(weighed: Weighed) -> None:
    """Counted per scan, the three scans outvote the two statements and the root cuts on quantity; each
    statement weighing the same (the default), the root cuts on the date window, and the plan says so."""
    from layout.__main__ import render_plan

    workload = weighed.workload
    assert [s.statement for s in workload.scans] == [0, 0, 0, 1, 2]
    assert workload.scan_weights("statements").tolist() == pytest.approx([1 / 3] * 3 + [1, 1])
    assert workload.scan_weights("scans").tolist() == [1] * 5
    assert weighed.root_cut == {"statements": "l_shipdate >= CAST('1998-06-01' AS DATE)",
                                "scans": "l_quantity < 5"}, weighed.root_cut
    min_rows = weighed.plans["statements"].min_rows
    assert plan(workload, weighed.sample, min_rows, weighed.keys).weigh == "statements"
    assert "(each statement weighing the same)" in render_plan(weighed.plans["statements"])
    assert "(each scan weighing the same)" in render_plan(weighed.plans["scans"])


@pytest.mark.parametrize("weigh", ["statements", "scans"])
def test_the_what_if_weighs_as_the_plan_did(weighed: Weighed, weigh: str) -> None:
    w = what_if(weighed.plans[weigh], weighed.sample, weighed.keys, np.ones(len(weighed.workload.scans)),
                weighed.loader)
    read = w.layouts[1].read  # the ideal: per scan
    by_statement = np.mean([read[:3].mean(), read[3], read[4]])
    assert by_statement != pytest.approx(read.mean())  # the two weighings' totals differ here
    assert w.total(read) == pytest.approx(by_statement if weigh == "statements" else read.mean())
    assert f"each {weigh[:-1]} weighing the same (the total" in render(w)


@pytest.mark.deployment
@pytest.mark.parametrize("weigh", ["scans", None], ids=["scans", "default"])
def test_the_command_passes_weigh_through_to_its_plan(stack: Stack, weighed: Weighed, tmp_path: Path,
                                                     weigh: str | None) -> None:
    """The command passes --weigh through to the plan it prints and writes."""
    import json
    import subprocess
    import sys

    from layout.whatif import weighed as weighing

    sql = tmp_path / "w.sql"
    sql.write_text(";\n".join(s.sql for s in weighed.statements), encoding="utf-8")
    env = own_env(DIPPER_PATHS_STATS=str(stack.config.paths.stats / weighed.database))
    out = tmp_path / f"plan-{weigh}.json"
    proc = subprocess.run([sys.executable, "-m", "layout", "plan", weighed.table, "--workload", str(sql), "--database",
                           weighed.database, "--sample-rows", str(10**8), "--min-block-rows",
                           str(weighed.sample.table_rows // 64), "--output", str(out),
                           *(["--weigh", weigh] if weigh else [])],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    written = json.loads(out.read_text(encoding="utf-8"))
    weigh = weigh or "statements"
    assert written["weigh"] == weigh and f"({weighing(weigh)})" in proc.stdout
    assert written["cuts"][written["blocks"][0]["path"][0]["cut"]]["sql"] == weighed.root_cut[weigh]


@pytest.mark.deployment
@pytest.mark.parametrize("text, options, message", [
    pytest.param("SELECT count(*) FROM orders WHERE o_totalprice > 10", (),
                 "no statement of --workload reads {table} (statements without a database read in {database}",
                 id="never-reads-the-table"),
    pytest.param("SELECT count(*) FROM lineitem; SELECT sum(l_quantity) FROM lineitem", (),
                 "restricts {table} with a predicate the rewriter can use: there is nothing to cut on (2 scans)",
                 id="nothing-to-cut-on"),
    pytest.param("SELECT count(*) FROM lineitem WHERE l_quantity < 5", ("--min-block-rows", "10000000"),
                 "a minimum block of 10,000,000 rows is larger than {table} (60,175 rows): nothing to split; "
                 "give a smaller --min-block-rows or --min-block-mb", id="a-block-over-the-table"),
])
def test_the_command_refuses_a_workload_or_block_it_cannot_plan_with(stack: Stack, tmp_path: Path, text: str,
                                                                     options: tuple[str, ...], message: str) -> None:
    """One line that names the problem and what to do: a workload that never reads the table, one that reads it
    without a predicate to cut on, and a minimum block larger than the table."""
    import subprocess
    import sys

    ds = stack.dataset("tpch", "tuned")
    stack.stats_store("tpch", "tuned")  # collected
    env = own_env(DIPPER_PATHS_STATS=str(stack.config.paths.stats / ds.database))
    table = f"{ds.database}.lineitem"
    sql = tmp_path / "w.sql"
    sql.write_text(text, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "layout", "plan", table, "--workload", str(sql), "--database",
                           ds.database, *options],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.splitlines()[-1]
    assert message.format(table=table, database=ds.database) in last and "Traceback" not in proc.stderr, proc.stderr
    assert "qd-tree" not in proc.stdout  # refused before a plan was printed


@pytest.mark.deployment
def test_apply_refuses_a_sort_column_the_table_lacks_before_it_plans(stack: Stack, tmp_path) -> None:  # noqa: ANN001
    import subprocess
    import sys

    ds = stack.dataset("tpch", "tuned")
    stack.stats_store("tpch", "tuned")  # collected
    sql = tmp_path / "w.sql"
    sql.write_text("SELECT count(*) FROM lineitem WHERE l_quantity < 5", encoding="utf-8")
    env = own_env(DIPPER_PATHS_STATS=str(stack.config.paths.stats / ds.database))
    proc = subprocess.run([sys.executable, "-m", "layout", "apply", f"{ds.database}.lineitem", "--workload", str(sql),
                           "--sort-by", "l_shipdate", "--sort-by", "l_shipdat"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.splitlines()[-1]
    assert f"--sort-by l_shipdat: {ds.database}.lineitem has no column l_shipdat; its columns: " in last, last
    assert "l_shipdate" in last and "qd-tree" not in proc.stdout  # refused before a plan was learned or printed


@pytest.mark.parametrize("reverse", [False, True], ids=["in-order", "reversed"])
def test_the_workloads_of_several_tables_parse_each_statement_once_and_are_what_each_finds_alone(
        stack: Stack, parsed: list[str], reverse: bool) -> None:
    """``bench layout-effect`` and the qd-tree test datasets read the workloads of several tables from the same
    statements through one ``Resolutions``: each statement is parsed once, and every table's scans, cuts and
    skipped statements are those it finds with a resolution of its own, in whatever order the tables come
    (a table laid out later must not see what another table's analysis left behind)."""
    ds = stack.dataset("tpch", "tuned")
    loader = StatsLoader(stack.stats_store("tpch", "tuned"), Lister(3600))
    statements = [Statement(sql, ds.database) for sql in runnable_queries("tpch").values()]
    statements += [Statement("SELECT FROM WHERE", ds.database), statements[5]]  # unparsable; read twice
    tables = [f"{ds.database}.{t}" for t in ("lineitem", "orders", "partsupp", "part", "customer")]
    alone = {t: repr(table_workload(statements, t, loader)) for t in tables}
    assert all("Scan(" in w for w in alone.values()) and "ParseError" in alone[tables[0]]
    texts = {st.sql for st in statements}
    shared = Resolutions()
    parsed.clear()
    for t in tables[::-1] if reverse else tables:
        assert repr(table_workload(statements, t, loader, shared)) == alone[t], t
    assert sorted(p for p in parsed if p in texts) == sorted(texts)  # each once, the repeated one too


def test_senders_are_read_once_per_column_and_their_keys_are_sparks(stack: Stack) -> None:
    """A sender read whole for several joined filters reads each column once (``JoinedKeys.sender``), and the
    samples built from columns read at different times line up row for row: each exact filter's key set,
    nested filters included, is the set Spark finds."""
    ds = stack.dataset("tpch", "tuned")
    loader = StatsLoader(stack.stats_store("tpch", "tuned"), Lister(0))
    orders = f"{ds.database}.orders"
    keys = JoinedKeys(loader)
    a = keys.sender(orders, ("o_orderdate", "o_orderkey"))
    b = keys.sender(orders, ("o_orderkey", "o_orderpriority"))
    assert a is not None and b is not None and set(b.rows.columns) == {"o_orderkey", "o_orderpriority"}
    assert b.rows.columns["o_orderkey"] is a.rows.columns["o_orderkey"] and b.rows.paths is a.rows.paths
    at_once = JoinedKeys(loader).sender(orders, ("o_orderdate", "o_orderkey", "o_orderpriority"))
    assert at_once is not None and b.n == at_once.n == at_once.table_rows > 1000
    for c, read in (("o_orderdate", a), ("o_orderkey", b), ("o_orderpriority", b)):
        np.testing.assert_array_equal(read.rows.columns[c].lo, at_once.rows.columns[c].lo)
        np.testing.assert_array_equal(read.rows.columns[c].null_count, at_once.rows.columns[c].null_count)

    statements = [Statement(sql, ds.database) for sql in runnable_queries("tpch").values()]
    joined = {j.sql(): j for t in ("lineitem", "orders", "partsupp")
              for scan in table_workload(statements, f"{ds.database}.{t}", loader).scans for j in scan.joined}
    checked = nested = 0
    for j in joined.values():
        if not keys.exact(j):
            continue
        found = {r[0] for r in stack.spark.sql(j.keys_sql("k")).collect()}
        assert set(keys.keys(j).tolist()) == found, j.label()
        checked += 1
        nested += bool(j.nested)
    assert checked >= 10 and nested >= 2, (checked, nested)


def test_an_empty_sender_has_its_columns_and_no_row(stack: Stack, tmp_path) -> None:  # noqa: ANN001
    """A sender with no row (an empty table) is read, not taken to keep every row: no key passes."""
    spark, table = stack.spark, "layout_empty_sender.dim"
    spark.sql("CREATE DATABASE IF NOT EXISTS layout_empty_sender")
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(f"CREATE TABLE {table} (k BIGINT, v STRING) USING parquet")
    store = StatsStore(tmp_path / "store")
    collect(spark, store, [table])
    keys = JoinedKeys(StatsLoader(store, Lister(0)))
    rows = keys.sender(table, ("k", "v"))
    assert rows is not None and rows.n == 0 and set(rows.rows.columns) == {"k", "v"}
    assert keys.sender(table, ("k",)).rows.columns["k"] is rows.rows.columns["k"]
    spark.sql(f"DROP TABLE {table}")


def test_a_sender_rewritten_between_two_reads_is_not_paired_across_versions(stack: Stack, tmp_path) -> None:  # noqa: ANN001
    """Columns of a sender read at different times pair up only while its files are the ones first read: a
    file rewritten in place (same path and rows, the rows reversed) in between is no longer the file its
    statistics describe, so the second column set is not read, rather than pairing old keys with new values."""
    import time
    from urllib.parse import unquote, urlparse

    import pyarrow as pa
    import pyarrow.parquet as pq

    spark, table = stack.spark, "layout_changed_sender.dim"
    spark.sql("CREATE DATABASE IF NOT EXISTS layout_changed_sender")
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(f"CREATE TABLE {table} (k BIGINT, v BIGINT) USING parquet")
    spark.sql(f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ * FROM VALUES (1, 10), (2, 20), (3, 30), (4, 40)")
    store = StatsStore(tmp_path / "store")
    collect(spark, store, [table])
    loader = StatsLoader(store, Lister(0))
    keys = JoinedKeys(loader)
    first = keys.sender(table, ("k",))
    assert first is not None and sorted(first.rows.columns["k"].lo.tolist()) == [1, 2, 3, 4]
    (path,) = loader.table_stats(table, fresh_listing=True).paths
    local = unquote(urlparse(path).path)
    rows = pq.read_table(local)
    time.sleep(1.1)  # a new mtime at the listing's resolution
    pq.write_table(pa.table({"k": rows["k"].to_numpy()[::-1], "v": rows["v"].to_numpy()[::-1]}), local)

    assert keys.sender(table, ("k", "v")) is None  # v of the new version is not paired with k of the old
    assert keys.sender(table, ("k",)) is first  # what was read stays as read
    assert JoinedKeys(loader).sender(table, ("k",)) is None  # the changed file is not described: not read
    spark.sql(f"DROP TABLE {table}")


@pytest.mark.deployment
def test_the_merge_judged_on_held_out_statements_keeps_only_the_splits_they_use(stack: Stack, tmp_path) -> None:  # noqa: ANN001
    """The training statement reads lineitem's late ship dates: the greedy cuts there, and judged on that
    statement the split is worth its file (it reads the late block alone). Held-out instances of the same
    query with an earlier date read both sides of the cut, so judged on them the split only adds a file:
    the merge takes the two blocks back to one. Held-out instances equal to the training ones judge as the
    training does. The command passes ``--merge-on`` through, and refuses it where nothing is merged."""
    import json
    import subprocess
    import sys

    from layout.__main__ import render_plan

    ds = stack.dataset("tpch", "tuned")
    loader = StatsLoader(stack.stats_store("tpch", "tuned"), Lister(0))
    table = f"{ds.database}.lineitem"
    late = "SELECT count(*) FROM lineitem WHERE l_shipdate >= DATE '1997-06-01'"
    earlier = "SELECT count(*) FROM lineitem WHERE l_shipdate >= DATE '1996-06-01'"
    training = table_workload([Statement(late, ds.database)], table, loader)
    held_out = table_workload([Statement(earlier, ds.database), Statement(earlier, ds.database)], table, loader)
    stats = loader.table_stats(table, fresh_listing=True)
    sample = sample_rows(stats, sorted(set(training.columns) | set(held_out.columns)), max_rows=10**8)
    min_rows = min_block_rows(table, stats.n_files, sample, rows=sample.table_rows // 16, megabytes=None)
    keys = JoinedKeys(loader)
    file_rows = 1000.0
    greedy = plan(workload=training, sample=sample, min_rows=min_rows, keys=keys)
    assert len(greedy.tree.blocks) == 2 and greedy.merge_statements == 0
    on_training = plan(training, sample, min_rows, keys, file_cost_rows=file_rows)
    assert len(on_training.tree.blocks) == 2  # the late block alone: cheaper than the whole table in one file
    on_held_out = plan(training, sample, min_rows, keys, file_cost_rows=file_rows, merge_on=held_out)
    assert len(on_held_out.tree.blocks) == 1 and on_held_out.greedy_blocks == 2
    assert on_held_out.merge_statements == 2
    assert "judged on 2 held-out statements" in render_plan(on_held_out)
    same = plan(training, sample, min_rows, keys, file_cost_rows=file_rows,
                merge_on=table_workload([Statement(late, ds.database)], table, loader))
    assert [b.rows.tolist() for b in same.tree.blocks] == [b.rows.tolist() for b in on_training.tree.blocks]

    train_sql, held_sql = tmp_path / "train.sql", tmp_path / "held.sql"
    train_sql.write_text(late, encoding="utf-8")
    held_sql.write_text(f"{earlier};\n{earlier}", encoding="utf-8")
    env = own_env(DIPPER_PATHS_STATS=str(stack.config.paths.stats / ds.database))
    common = [sys.executable, "-m", "layout", "plan", table, "--workload", str(train_sql), "--database", ds.database,
              "--sample-rows", str(10**8), "--min-block-rows", str(sample.table_rows // 16)]
    out = tmp_path / "plan.json"
    proc = subprocess.run([*common, "--file-cost-rows", "1000", "--merge-on", str(held_sql), "--output", str(out)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    written = json.loads(out.read_text(encoding="utf-8"))
    assert (len(written["blocks"]), written["greedy_blocks"], written["merge_statements"]) == (1, 2, 2)
    refused = subprocess.run([*common, "--file-cost-rows", "0", "--merge-on", str(held_sql)],
                             capture_output=True, text=True, env=env, timeout=300)
    assert refused.returncode == 1 and "--file-cost-rows 0 merges nothing" in refused.stderr, refused.stderr
