"""The qd-tree (seed 003 Algorithm 1) and the what-if arithmetic, on matrices whose best answer is known;
the workload reader and the command's errors. Spark-backed checks are in ``test_layout_spark.py``."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, strategies as st

from layout.joined import _among
from layout.qdtree import QdTree, build, coarsen
from layout.sample import LayoutError, Sample
from layout.whatif import block_stats, min_block_rows, read_blocks
from stats.model import ColumnStats, Kind, TableStats
from layout.workload import Resolutions, Statement, read_workload
from tests.conftest import own_env


def _rows(n: int) -> np.ndarray:
    return np.arange(n)


def test_a_cut_that_isolates_each_query_is_taken_and_blocks_partition_the_rows() -> None:
    v = _rows(1000)
    # Two queries: v < 100 and v >= 900. Candidate cuts: their own predicates, and a useless one.
    matches = np.stack([v < 100, v >= 900])
    cuts = np.stack([v % 2 == 0, v < 100, v >= 900])
    tree = build(matches, cuts, min_rows=50)
    sizes = sorted(b.size for b in tree.blocks)
    assert sizes == [100, 100, 800]
    assert sorted(np.concatenate([b.rows for b in tree.blocks]).tolist()) == v.tolist()  # a partition
    for b in tree.blocks:  # every row of a block satisfies the block's path
        for step in b.path:
            assert (cuts[step.cut, b.rows] == step.holds).all()
        assert all(step.cut != 0 for step in b.path)  # the useless cut is never chosen
    shares = read_blocks(tree.block_of_rows(), len(tree.blocks), matches)[0]
    assert shares.tolist() == [0.1, 0.1]  # each query reads exactly its own rows


def test_the_minimum_block_size_is_kept_and_no_gain_means_no_split() -> None:
    v = _rows(1000)
    matches = np.stack([v < 10])  # a cut isolating it would leave a block of 10 rows
    cuts = np.stack([v < 10, v < 300])
    tree = build(matches, cuts, min_rows=100)
    assert min(b.size for b in tree.blocks) >= 100
    assert sorted(b.size for b in tree.blocks) == [300, 700]  # the second-best cut that respects b
    everything = build(np.ones((1, 1000), dtype=bool), cuts, min_rows=10)
    assert len(everything.blocks) == 1  # a query reading everything gains nothing from any cut
    none = build(matches, np.zeros((0, 1000), dtype=bool), min_rows=10)
    assert len(none.blocks) == 1


def test_greedy_splits_recursively_until_blocks_reach_twice_b() -> None:
    v = _rows(1024)
    edges = range(64, 1024, 64)
    matches = np.stack([(v >= e - 64) & (v < e) for e in range(64, 1025, 64)])  # 16 disjoint ranges
    cuts = np.stack([v < e for e in edges])
    tree = build(matches, cuts, min_rows=64)
    assert len(tree.blocks) == 16 and {b.size for b in tree.blocks} == {64}
    assert read_blocks(tree.block_of_rows(), 16, matches)[0].tolist() == [1 / 16] * 16


def test_weights_decide_which_scans_the_greedy_serves() -> None:
    """Three scans of one statement want v < 100, two statements' scans want v >= 900; one split fits (b =
    400). Each scan weighing 1, the three outvote the two and the root cuts at 400 (skipping 600 rows for each
    of the three); each statement weighing 1 (its scans a third each), the root cuts at 600 (600 rows for each
    of the two). ``TableWorkload.scan_weights`` gives those weights and refuses another weighing."""
    from layout.workload import Scan, TableWorkload

    v = _rows(1000)
    matches = np.stack([v < 100] * 3 + [v >= 900] * 2)
    cuts = np.stack([v < 400, v < 600])
    w = TableWorkload("db.t", tuple(Scan(i, (), None) for i in (0, 0, 0, 1, 2)), (), (), 3, ())  # type: ignore[arg-type]
    per_scan = build(matches, cuts, min_rows=400, weights=w.scan_weights("scans"))
    per_statement = build(matches, cuts, min_rows=400, weights=w.scan_weights("statements"))
    assert [b.path[0].cut for b in per_scan.blocks] == [0, 0] and [b.path[0].cut for b in per_statement.blocks] == [1, 1]
    with pytest.raises(LayoutError, match="weighed by statements or scans, not 'rows'"):
        w.scan_weights("rows")


def test_every_subtree_is_one_range_of_block_ids() -> None:
    """Block ids follow the tree depth-first, the holding side first: the blocks under any node (those whose
    path starts with the node's) are consecutive ids, so a subtree a statement rules out is one name range.
    Random trees, unbalanced on purpose (cuts of random density, random b)."""
    rng = np.random.default_rng(15)
    deepest = 0
    for _ in range(40):
        n = int(rng.integers(200, 3000))
        cuts = rng.random((int(rng.integers(1, 12)), n)) < rng.random((1, 1)) * 0.9 + 0.05
        matches = rng.random((int(rng.integers(1, 10)), n)) < 0.2
        matches[:, rng.integers(0, n)] = True
        matches &= cuts[rng.integers(0, len(cuts), size=len(matches))]  # scans a cut can isolate
        tree = build(matches, cuts, min_rows=int(rng.integers(5, 80)))
        assert [b.id for b in tree.blocks] == list(range(len(tree.blocks)))
        assert sorted(np.concatenate([b.rows for b in tree.blocks]).tolist()) == list(range(n))
        prefixes = {b.path[:k] for b in tree.blocks for k in range(len(b.path) + 1)}
        for prefix in prefixes:
            ids = [b.id for b in tree.blocks if b.path[:len(prefix)] == prefix]
            assert ids == list(range(ids[0], ids[0] + len(ids))), (prefix, ids)
            if prefix:  # the holding side of a node comes before its other side
                sibling = prefix[:-1] + (dataclasses.replace(prefix[-1], holds=not prefix[-1].holds),)
                other = [b.id for b in tree.blocks if b.path[:len(prefix)] == sibling]
                assert other and (ids[0] < other[0]) == prefix[-1].holds
        deepest = max(deepest, *(len(b.path) for b in tree.blocks))
    assert deepest >= 3  # level-by-level numbering breaks the ranges only below two levels


def _pruning_costs(tree: QdTree, matches: np.ndarray, file_rows: float, w: np.ndarray) -> list[float]:
    """Every pruning of ``tree`` (each node a block, or its children pruned each in every way), by the cost
    ``coarsen`` minimises, written out as its definition: per block, the weight of the scans with a matching
    row in it, times a file plus its rows."""
    def prunings(blocks: list, depth: int) -> list[list[np.ndarray]]:
        merged = [[np.concatenate([b.rows for b in blocks])]]
        if len(blocks) == 1:
            return merged
        left = [b for b in blocks if b.path[depth].holds]
        right = [b for b in blocks if not b.path[depth].holds]
        return merged + [a + b for a in prunings(left, depth + 1) for b in prunings(right, depth + 1)]

    return [sum(float(w @ matches[:, rows].any(axis=1)) * (file_rows + len(rows)) for rows in blocks)
            for blocks in prunings(list(tree.blocks), 0)]


def test_blocks_read_together_are_merged_where_their_file_costs_more_than_their_split_saves() -> None:
    v = _rows(1000)
    # Scan 0 reads v < 100, scan 1 v >= 900, scan 2 100 <= v < 200: the greedy isolates each.
    matches = np.stack([v < 100, v >= 900, (v >= 100) & (v < 200)])
    cuts = np.stack([v < 100, v >= 900, v < 200])
    tree = build(matches, cuts, min_rows=50)
    assert sorted(b.size for b in tree.blocks) == [100, 100, 100, 700]
    assert coarsen(tree, matches, 0) is tree  # no file cost: the greedy's blocks
    # A file costing 50 rows: every split still saves more rows than a file costs.
    assert [b.size for b in coarsen(tree, matches, 50).blocks] == [b.size for b in tree.blocks]
    # Scans 0 and 2 each read 100 rows in 1 file; merged, 200 rows in 1 file: 100 rows more each, against
    # no file saved. Block v >= 200 (700 rows, scan 1 reads 100 of them in its own block) is what a file of
    # 700 rows costs to merge: scan 1 would read 800 rows in one file instead of 100 in one.
    assert [b.size for b in coarsen(tree, matches, 10**6).blocks] == [b.size for b in tree.blocks]
    # Scan 0 reads v < 100, scans 1-3 v < 200: the greedy cuts v < 200, then v < 100 for scan 0 alone. Kept
    # split, 4 scans read block v < 100 and 3 read block 100 <= v < 200: 7 files and 700 rows; merged, 4 scans
    # read 200 rows in one file each: 4 files and 800 rows. Merged when 3 files cost more than 100 rows.
    nested = np.stack([v < 100, v < 200, v < 200, v < 200])
    tree = build(nested, np.stack([v < 100, v < 200]), min_rows=50)
    assert [b.size for b in tree.blocks] == [100, 100, 800]
    assert [b.size for b in coarsen(tree, nested, 33).blocks] == [100, 100, 800]
    merged = coarsen(tree, nested, 34)
    assert [b.size for b in merged.blocks] == [200, 800] and [b.id for b in merged.blocks] == [0, 1]
    assert merged.blocks[0].path == tree.blocks[0].path[:1]  # the node's description: v < 200
    assert merged.blocks[0].rows.tolist() == list(range(200))


def test_coarsen_finds_the_cheapest_pruning_and_keeps_the_tree_whole() -> None:
    """Random trees (as in the numbering test) against every pruning of them: ``coarsen``'s blocks cost what
    the cheapest pruning costs; they partition the rows; each block's path is a prefix of the paths of the
    greedy blocks it holds, so its description holds for its rows; ids run depth-first, every subtree one
    range; and a row routed down the cuts lands in the block that holds it."""
    rng = np.random.default_rng(1535)
    merged_some = kept_some = 0
    for _ in range(60):
        n = int(rng.integers(200, 2000))
        cuts = rng.random((int(rng.integers(1, 8)), n)) < rng.random((1, 1)) * 0.9 + 0.05
        matches = rng.random((int(rng.integers(1, 8)), n)) < 0.05
        matches &= cuts[rng.integers(0, len(cuts), size=len(matches))]
        w = rng.random(len(matches)) + 0.1
        tree = build(matches, cuts, min_rows=int(rng.integers(20, 120)), weights=w)
        if len(tree.blocks) > 12:  # the enumeration grows as the square of each subtree's
            continue
        file_rows = float(rng.choice([1.0, 30.0, 200.0, 2000.0]))
        out = coarsen(tree, matches, file_rows, w)
        costs = _pruning_costs(tree, matches, file_rows, w)
        cost = sum(float(w @ matches[:, b.rows].any(axis=1)) * (file_rows + b.size) for b in out.blocks)
        assert cost == pytest.approx(min(costs))
        assert sorted(np.concatenate([b.rows for b in out.blocks]).tolist()) == list(range(n))
        assert [b.id for b in out.blocks] == list(range(len(out.blocks)))
        for b in out.blocks:
            inside = [g for g in tree.blocks if g.path[:len(b.path)] == b.path]
            assert sorted(np.concatenate([g.rows for g in inside]).tolist()) == b.rows.tolist()
            for step in b.path:
                assert (cuts[step.cut, b.rows] == step.holds).all()
        for prefix in {b.path[:k] for b in out.blocks for k in range(len(b.path) + 1)}:
            ids = [b.id for b in out.blocks if b.path[:len(prefix)] == prefix]
            assert ids == list(range(ids[0], ids[0] + len(ids)))
        assert (out.route(cuts) == out.block_of_rows()).all()
        merged_some += len(out.blocks) < len(tree.blocks)
        kept_some += 1 < len(out.blocks) == len(tree.blocks)
    assert merged_some >= 10 and kept_some >= 5  # both outcomes were exercised


def test_lead_cuts_lay_the_rows_out_in_ranges_first_and_the_greedy_cuts_inside() -> None:
    """``lead``: the tree first cuts on the lead cuts (ranges of v), though the workload gains nothing from
    them, in ranges of equal rows numbered in v's order; the greedy then cuts each range on what the workload
    asks (u), which alone it would have cut the whole table on."""
    rng = np.random.default_rng(3)
    v = rng.permutation(1024)  # rows in no order: the ranges come from the cuts, not from row positions
    u = rng.integers(0, 4, size=1024)
    matches = np.stack([u == 0, u == 1])  # the workload tests u only
    cuts = np.stack([u == 0, u == 1] + [v < e for e in range(128, 1024, 128)])
    alone = build(matches, cuts, min_rows=16)
    assert all(s.cut < 2 for b in alone.blocks for s in b.path)  # no gain from v: the greedy never cuts it
    tree = build(matches, cuts, min_rows=16, lead=[range(2, 9)])
    ranges = [(int(v[b.rows].min()), int(v[b.rows].max())) for b in tree.blocks]
    lead_depth = 3  # 8 ranges: every block's path starts with three range cuts
    for b in tree.blocks:
        assert all(s.cut >= 2 for s in b.path[:lead_depth]) and all(s.cut < 2 for s in b.path[lead_depth:])
    by_range = {}
    for b, (lo, hi) in zip(tree.blocks, ranges):
        by_range.setdefault(lo // 128, []).append(b.id)
        assert lo // 128 == hi // 128  # a block lies inside one range
    assert sorted(by_range) == list(range(8))
    assert [ids[0] for _, ids in sorted(by_range.items())] == sorted(ids[0] for ids in by_range.values())  # in v order
    assert all(len(ids) == 3 for ids in by_range.values())  # u == 0, u == 1, the rest: the greedy inside each range
    assert all(ids == list(range(ids[0], ids[0] + 3)) for ids in by_range.values())  # each range one run of ids
    shares = read_blocks(tree.block_of_rows(), len(tree.blocks), matches)[0]
    assert np.allclose(shares, [(u == 0).mean(), (u == 1).mean()])  # the ranges cost these scans nothing


def test_lead_ranges_keep_the_minimum_block_and_come_out_even() -> None:
    v = np.arange(1000)
    cuts = np.stack([v < e for e in range(200, 1000, 200)])  # 5 ranges of 200
    none = np.ones((1, 1000), dtype=bool)
    five = build(none, cuts, min_rows=100, lead=[range(4)])
    assert sorted(b.size for b in five.blocks) == [200] * 5
    assert [int(b.rows.min()) for b in five.blocks] == [0, 200, 400, 600, 800]
    fewer = build(none, cuts, min_rows=300, lead=[range(4)])  # a range of 200 rows would be below b
    assert [b.size for b in fewer.blocks] == [400, 600]  # v < 400 halves best while both sides keep b


def test_a_second_lead_cuts_every_range_of_the_first_and_the_greedy_cuts_inside() -> None:
    """Two leads (``--lead-ranges`` twice): 3 ranges of v, each cut into 2 ranges of h, then the greedy on
    what the workload asks (u). The levels keep their order though h's cut halves the table more evenly than
    any of v's (one set of lead cuts would put h at the root). A scan on h alone reads one h range in every v
    range; one on v alone its v range; a range too small for two minimum blocks is not cut by the next level."""
    rng = np.random.default_rng(5)
    n = 4800
    v, h, u = rng.permutation(n), rng.permutation(n), rng.integers(0, 2, size=n)
    matches = np.stack([h < 2400, (v >= 1600) & (v < 3200), u == 0])
    cuts = np.stack([u == 0, v < 1600, v < 3200, h < 2400])
    tree = build(matches, cuts, min_rows=150, lead=[[1, 2], [3]])
    cells = {}
    for b in tree.blocks:
        level = [{1: 0, 2: 0, 3: 1, 0: 2}[s.cut] for s in b.path]
        assert level == sorted(level) and level[0] == 0 and 1 in level, b.path  # v first, then h, then u
        cell = (int(v[b.rows].min()) // 1600, int(h[b.rows].min()) // 2400)
        assert cell == (int(v[b.rows].max()) // 1600, int(h[b.rows].max()) // 2400)  # inside one v and one h range
        cells.setdefault(cell, []).append(b.id)
    assert sorted(cells) == [(i, j) for i in range(3) for j in range(2)]
    assert all(len(ids) == 2 for ids in cells.values())  # the greedy's u cut inside every cell
    assert all(ids == list(range(ids[0], ids[0] + 2)) for ids in cells.values())  # each cell one run of ids
    shares = read_blocks(tree.block_of_rows(), len(tree.blocks), matches)[0]
    assert np.allclose(shares[:2], [0.5, 1 / 3])  # the hour alone: a half; a v range: a third
    small = build(matches, cuts, min_rows=900, lead=[[1, 2], [3]])  # 1600-row v ranges: no room for h
    assert len(small.blocks) == 3 and all(b.size >= 900 and {s.cut for s in b.path} <= {1, 2} for b in small.blocks)


def test_lead_cuts_are_quantiles_of_the_sampled_values() -> None:
    from layout.lead import lead_cuts, parse_lead
    from rewriter.evaluate import might_match
    from rewriter.session import SessionSettings

    n = 1100
    values = np.arange(n, dtype=np.int64) % 500  # each value twice in the first 1000 rows
    known = np.arange(n) < 1000  # the last 100 rows NULL
    days = values + 10_000
    columns = {"k": ColumnStats(Kind("int", bits=32), values, values, known, (~known).astype(np.int64)),
               "d": ColumnStats(Kind("date"), days, days, known, (~known).astype(np.int64)),
               "s": ColumnStats(Kind("string"), values.astype(str).astype(object), values.astype(str).astype(object),
                                known, (~known).astype(np.int64))}
    rows = TableStats("db.t", np.empty(n, dtype=object), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64),
                      np.ones(n, dtype=np.int64), columns)
    sample = Sample(rows, n, 10**6, 1)
    cuts = lead_cuts(parse_lead("k:4"), sample, SessionSettings())
    # Three quantiles of the non-NULL values, and the NULL rows split off (they fail every "<" cut).
    assert [c.sql for c in cuts] == ["k < 125", "k < 250", "k < 375", "NOT k IS NULL"]
    # Decided on every row: a NULL row fails a "<" cut and its negation (routed right), IS NOT NULL decides it.
    for c, (want_holds, want_fails) in zip(cuts, [(known & (values < t), known & (values >= t)) for t in (125, 250, 375)] +
                                           [(known, ~known)]):
        holds, fails = might_match(c.pred, rows), might_match(c.negated, rows)
        assert (holds == want_holds).all() and (fails == want_fails).all(), c.sql
    day = (np.datetime64("1970-01-01") + np.timedelta64(10_000 + 250, "D")).astype(str)  # the median, 250
    dates = lead_cuts(parse_lead("D:2"), sample, SessionSettings())
    assert [c.sql for c in dates] == [f"d < CAST('{day}' AS DATE)", "NOT d IS NULL"]
    holds, fails = might_match(dates[0].pred, rows), might_match(dates[0].negated, rows)
    assert (holds == (known & (days < 10_250))).all() and (fails == (known & (days >= 10_250))).all()
    assert len(lead_cuts(parse_lead("k:2000"), sample, SessionSettings())) == 499 + 1  # each threshold once
    # Strings by code point (Spark's UTF-8 byte order): "10" < "9"; quantiles of the text, not the number.
    words = lead_cuts(parse_lead("s:2"), sample, SessionSettings())
    text = np.sort(values[known].astype(str).astype(object))
    assert [c.sql for c in words] == [f"s < '{text[len(text) // 2]}'", "NOT s IS NULL"]
    assert (might_match(words[0].pred, rows) == (known & (values.astype(str).astype(object) < text[len(text) // 2]))).all()
    floats = Sample(dataclasses.replace(rows, columns={"f": ColumnStats(Kind("float"), values * 1.0, values * 1.0, known,
                                                                         (~known).astype(np.int64))}), n, 10**6, 1)
    with pytest.raises(LayoutError, match="integer, date or string column; db.t.f is float"):
        lead_cuts(parse_lead("f:4"), floats, SessionSettings())
    with pytest.raises(LayoutError, match="no column 'x'"):
        lead_cuts(parse_lead("x:4"), sample, SessionSettings())
    # A column sqlglot reads as a keyword is quoted; no NULLs, no NULL cut; negative thresholds as Spark reads them.
    keyword = ColumnStats(Kind("int", bits=64), values - 300, values - 300, np.ones(n, dtype=bool), np.zeros(n, dtype=np.int64))
    odd = Sample(dataclasses.replace(rows, columns={"select": keyword}), n, 10**6, 1)
    quoted = lead_cuts(parse_lead("select:2"), odd, SessionSettings())
    median = int(np.sort(values - 300)[n // 2])
    assert median < 0 and [c.sql for c in quoted] == [f"`select` < {median}"]
    assert (might_match(quoted[0].pred, odd.rows) == (values - 300 < median)).all()
    nulls = dataclasses.replace(columns["k"], known=np.zeros(n, dtype=bool), null_count=np.ones(n, dtype=np.int64))
    with pytest.raises(LayoutError, match="NULL on every sampled row"):
        lead_cuts(parse_lead("k:4"), Sample(dataclasses.replace(rows, columns={"k": nulls}), n, 10**6, 1),
                  SessionSettings())


@pytest.mark.parametrize("text, message", [("k", "COLUMN:N"), ("k:1", "COLUMN:N"), ("k:x", "COLUMN:N"),
                                           ("1k:3", "COLUMN:N"), ("k:4097", "2 <= N <= 4096")])
def test_bad_lead_ranges_are_refused(text: str, message: str) -> None:
    from layout.lead import parse_lead

    with pytest.raises(LayoutError, match=message):
        parse_lead(text)


def test_read_blocks_counts_whole_blocks() -> None:
    block = np.array([0, 0, 1, 1, 1, 2])
    matches = np.array([[True, False, False, False, False, False],
                        [False, False, False, False, False, False],
                        [False, True, False, False, False, True]])
    shares, files = read_blocks(block, 3, matches)
    assert shares.tolist() == [2 / 6, 0.0, 3 / 6] and files.tolist() == [1, 0, 2]  # the blocks (files) opened


def test_block_statistics_bound_the_rows_of_each_block() -> None:
    """A block's statistics are one file's: min and max of its non-NULL sampled values, NULLs counted, bounds
    unknown where a row's are (NaN) or where the block holds no value; strings too; empty blocks read as
    empty files."""
    x = np.array([5.0, 1.0, np.nan, 7.0, 0.0, 3.0])
    nulls = np.array([0, 0, 0, 0, 1, 0])
    s = np.array(["b", "a", "z", "c", "", "q"], dtype=object)
    one = np.ones(6, dtype=np.int64)
    rows = TableStats("db.t", np.empty(6, dtype=object), one, one, one, {
        "x": ColumnStats(Kind("float"), x, x, ~np.isnan(x) & (nulls == 0), nulls),
        "s": ColumnStats(Kind("string"), s, s, nulls == 0, nulls)})
    block = np.array([0, 0, 1, 1, 2, 0])  # block 3 gets no row
    stats = block_stats(rows, block, 4, "db.t")
    assert stats.rows.tolist() == [3, 2, 1, 0] and stats.n_files == 4 and len(set(stats.paths)) == 4
    bx, bs = stats.columns["x"], stats.columns["s"]
    assert (bx.lo[0], bx.hi[0], bool(bx.known[0])) == (1.0, 5.0, True)
    assert not bx.known[1]  # NaN: no bound
    assert bx.null_count.tolist() == [0, 0, 1, 0] and not bx.known[2] and not bx.known[3]
    assert (bs.lo[0], bs.hi[0], bs.lo[1], bs.hi[1]) == ("a", "q", "c", "z") and bs.known[:2].all()


def test_workload_from_a_decision_log_and_from_sql(tmp_path: Path) -> None:
    log = tmp_path / "decisions.jsonl"
    log.write_text('{"statement": "SELECT 1", "database": "db1", "time": "t", "decision": {}}\n'
                   '{"statement": "SET x = 1", "outcome": "passed through"}\n\n', encoding="utf-8")
    assert [(s.sql, s.database) for s in read_workload(log)] == [("SELECT 1", "db1")]
    sql = tmp_path / "w.sql"
    sql.write_text("SELECT a FROM t WHERE b = ';'; -- a comment\nSELECT 2;", encoding="utf-8")
    statements = read_workload(sql, "db2")
    assert len(statements) == 2 and "';'" in statements[0].sql and statements[1].database == "db2"
    with pytest.raises(LayoutError, match="does not exist"):
        read_workload(tmp_path / "missing.sql")
    (tmp_path / "empty.sql").write_text("  \n", encoding="utf-8")
    with pytest.raises(LayoutError, match="holds no statements"):
        read_workload(tmp_path / "empty.sql")
    (tmp_path / "bad.jsonl").write_text("not json\n", encoding="utf-8")
    with pytest.raises(LayoutError, match="not a JSON line"):
        read_workload(tmp_path / "bad.jsonl")


def test_resolutions_keep_a_statements_analysis_until_the_columns_change(parsed: list[str]) -> None:
    star = Statement("SELECT * FROM t WHERE a = 1", "db")
    r = Resolutions()

    def projected() -> list[str]:
        refs, scopes = r.of(star)
        assert [ref.table for ref in refs] == ["db.t"]
        return [e.alias_or_name for e in scopes[-1].expression.expressions]

    r.use({"db.t": {"a": "int", "b": "int"}})
    assert projected() == ["a", "b"] and projected() == ["a", "b"] and len(parsed) == 1
    r.use({"db.t": {"a": "int", "b": "int"}})  # the same columns: kept
    assert projected() == ["a", "b"] and len(parsed) == 1
    r.use({"db.t": {"a": "int", "b": "int", "c": "string"}})  # a column added: resolved again
    assert projected() == ["a", "b", "c"] and len(parsed) == 2
    r.use({"db.t": {"a": "int", "b": "bigint", "c": "string"}})  # a type changed: resolved again
    assert projected() == ["a", "b", "c"] and len(parsed) == 3
    bad = Statement("SELECT FROM WHERE", "db")
    assert r.of(bad).startswith("ParseError: ") and r.of(bad) == r.of(bad) and len(parsed) == 4


def test_the_minimum_block_is_refused_when_it_cannot_split_the_table() -> None:
    """A minimum block in rows or MB of the whole table, in sampled rows: 100 rows sampled of 10,000 rows of
    1 MB (100 bytes a row). A block larger than the table, of no rows, smaller than a row, or given both ways is
    refused with what to give instead."""
    n = 100
    rows = TableStats("db.t", np.empty(n, dtype=object), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64),
                      np.ones(n, dtype=np.int64), {})
    sample = Sample(rows, 10_000, 10**6, 1)
    assert min_block_rows("db.t", 8, sample, rows=2_500, megabytes=None) == 25
    assert min_block_rows("db.t", 8, sample, rows=None, megabytes=0.5) == 50  # 5,000 rows
    assert min_block_rows("db.t", 8, sample, rows=None, megabytes=None) == 13  # the mean file: 1,250 rows
    assert min_block_rows("db.t", 8, sample, rows=10_000, megabytes=None) == 100


@pytest.mark.parametrize("block, message", [
    ((10_001, None), r"a minimum block of 10,001 rows is larger than db.t \(10,000 rows\): "
                     r"nothing to split; give a smaller --min-block-rows or --min-block-mb"),
    ((None, 20.0), r"a minimum block of 200,000 rows is larger than db.t"),
    ((0, None), "--min-block-rows must be positive, not 0"),
    ((-5, None), "--min-block-rows must be positive, not -5"),
    ((None, 0.00005), r"--min-block-mb 5e-05 is less than one row \(100 bytes\) of db.t"),
    ((None, 0.0), "--min-block-mb 0 is less than one row"),
    ((100, 1.0), "give the minimum block size in rows or in MB, not both"),
], ids=["rows-over-the-table", "mb-over-the-table", "no-rows", "negative-rows", "mb-under-a-row", "no-mb", "both"])
def test_a_minimum_block_that_cannot_split_the_table_is_refused(block: tuple, message: str) -> None:
    """100 rows sampled of 10,000 rows of 1 MB (100 bytes a row), as above."""
    n = 100
    rows = TableStats("db.t", np.empty(n, dtype=object), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64),
                      np.ones(n, dtype=np.int64), {})
    with pytest.raises(LayoutError, match=message):
        min_block_rows("db.t", 8, Sample(rows, 10_000, 10**6, 1), *block)


def _layout(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "layout", *args], capture_output=True, text=True,
                          env=own_env(DIPPER_PATHS_STATS=str(tmp_path / "stats")), timeout=120)


@pytest.mark.deployment
def test_the_command_names_a_table_without_statistics(tmp_path: Path) -> None:
    (tmp_path / "w.sql").write_text("SELECT count(*) FROM t WHERE a = 1", encoding="utf-8")
    proc = _layout(tmp_path, "what-if", "db.t", "--workload", str(tmp_path / "w.sql"))
    assert proc.returncode == 1
    assert "no statistics for db.t" in proc.stderr and "python -m stats collect db.t" in proc.stderr
    helped = _layout(tmp_path, "what-if", "--help")
    assert helped.returncode == 0 and "--min-block-mb" in helped.stdout and "decision log" in helped.stdout


@pytest.mark.deployment
@pytest.mark.parametrize("value", ["ss_sold_date_sk", "ss_sold_date_sk:1", "ss_sold_date_sk:many"])
def test_the_command_refuses_bad_lead_ranges(tmp_path: Path, value: str) -> None:
    (tmp_path / "w.sql").write_text("SELECT 1", encoding="utf-8")
    proc = _layout(tmp_path, "plan", "db.t", "--workload", str(tmp_path / "w.sql"), "--lead-ranges", value)
    assert proc.returncode != 0
    assert proc.returncode == 2, proc.stderr  # a usage error, before anything is read
    assert "--lead-ranges takes COLUMN:N (ss_sold_date_sk:16), or SENDER.COLUMN:N@FOREIGN=KEY" in \
        proc.stderr.splitlines()[-1], proc.stderr


@pytest.mark.deployment
def test_the_command_refuses_a_column_given_twice_and_documents_lead_ranges(tmp_path: Path) -> None:
    (tmp_path / "w.sql").write_text("SELECT 1", encoding="utf-8")
    twice = _layout(tmp_path, "plan", "db.t", "--workload", str(tmp_path / "w.sql"), "--lead-ranges", "k:4",
                    "--lead-ranges", "s:2", "--lead-ranges", "K:8")
    assert twice.returncode == 1 and "--lead-ranges names k twice" in twice.stderr.splitlines()[-1], twice.stderr
    helped = _layout(tmp_path, "apply", "--help")
    assert helped.returncode == 0 and "--lead-ranges COLUMN:N" in helped.stdout and "SENDER.COLUMN:N@FOREIGN=KEY" in \
        " ".join(helped.stdout.split())


def test_joined_lead_ranges_name_the_sender_its_column_and_the_join() -> None:
    from layout.lead import LeadRanges, check_column, in_database, parse_lead

    lead = parse_lead("Customer_Address.ca_state:8@c_current_addr_sk=ca_address_sk")
    assert lead == LeadRanges("ca_state", 8, "customer_address", "c_current_addr_sk", "ca_address_sk")
    assert parse_lead(str(lead)) == lead and lead.sampled() == "c_current_addr_sk"
    assert parse_lead("k:4").sampled() == "k" and parse_lead("k:4").sender is None
    # The sender in the laid-out table's database, or where a plan from another copy names it.
    assert in_database([lead, parse_lead("k:4")], "target") == (
        LeadRanges("ca_state", 8, "target.customer_address", "c_current_addr_sk", "ca_address_sk"), parse_lead("k:4"))
    n = 4
    own = TableStats("db.customer", np.empty(n, dtype=object), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64),
                     np.ones(n, dtype=np.int64), {"k": ColumnStats(Kind("int"), np.arange(n), np.arange(n),
                                                                  np.ones(n, dtype=bool), np.zeros(n, dtype=np.int64))})
    with pytest.raises(LayoutError, match="cannot be laid out by its own rows"):
        check_column(parse_lead("customer.k:4@k=k"), own, lambda t: own)
    with pytest.raises(LayoutError, match="no statistics for db.customer_address"):
        check_column(lead, own, lambda t: None)


@pytest.mark.parametrize("text", ["customer_address.ca_state:8", "ca_state:8@c_current_addr_sk=ca_address_sk",
                                  "a.b:8@c=", "a.b.c:8@d=e", "a.b:1@c=d"])
def test_a_joined_lead_range_names_the_sender_and_the_join_or_is_refused(text: str) -> None:
    from layout.lead import parse_lead

    with pytest.raises(LayoutError, match="SENDER.COLUMN:N@FOREIGN=KEY"):
        parse_lead(text)


def test_layout_effect_keeps_every_lead_of_a_table_in_order() -> None:
    """``bench layout-effect --lead-ranges web_sales=...`` twice: both levels reach the plan, outermost first
    (a mapping of one lead per table kept only the last)."""
    from bench.__main__ import _grouped, parse_args
    from layout.lead import parse_lead

    args = parse_args(["layout-effect", "--source", "s", "--table", "web_sales", "--table", "item",
                       "--lead-ranges", "web_sales=ws_sold_date_sk:13", "--lead-ranges", "item=i_brand:4",
                       "--lead-ranges", "web_sales=ws_sold_time_sk:2"])
    assert _grouped(args.lead_ranges) == {"web_sales": [parse_lead("ws_sold_date_sk:13"), parse_lead("ws_sold_time_sk:2")],
                                          "item": [parse_lead("i_brand:4")]}


def test_layout_effect_counts_the_copy_growth_as_nothing_skipped() -> None:
    """Smaller blocks compress worse: the laid-out copy of a table is larger than the source's. INPUTCUT on the
    copy divides the copy's larger bytes by what Dipper keeps; ``qdtree_cut_of_source`` divides the source's
    bytes instead, so growth does not pass for skipping. Three references, one without statistics (not counted)."""
    from bench.layout_effect import statement_cuts
    from rewriter.decision import Decision, TableDecision

    def decision(db: str, total: int, kept: int) -> Decision:
        return Decision(db, [TableDecision(f"{db}.store_sales", "ss", bytes_total=total, bytes_kept=kept, has_stats=True),
                             TableDecision(f"{db}.date_dim", "d", bytes_total=1_000, bytes_kept=1_000, has_stats=True),
                             TableDecision(f"{db}.item", "i", bytes_total=9_999, bytes_kept=9_999)])

    q = statement_cuts("q34#0", decision("src", 173_000, 99_000), decision("src_qdtree", 184_000, 89_000), True)
    assert q.source_cut == pytest.approx(174_000 / 100_000)
    assert q.qdtree_cut == pytest.approx(185_000 / 90_000)  # 2.06x: over 2x only by the copy's growth
    assert q.qdtree_cut_of_source == pytest.approx(174_000 / 90_000)  # 1.93x

    def one(total: int, kept: int) -> Decision:
        return Decision("db", [TableDecision("db.t", "t", bytes_total=total, bytes_kept=kept, has_stats=True)])

    assert statement_cuts("q", one(5, 5), one(6, 0), False).qdtree_cut_of_source == math.inf  # nothing kept
    assert statement_cuts("q", one(0, 0), one(0, 0), False).qdtree_cut_of_source == 1.0  # nothing read


def test_layout_effect_reports_the_instances_that_read_a_table_with_or_without_predictions(tmp_path: Path) -> None:
    """The report's per-table column counts the instances whose decisions read the table, and means the
    what-if's predictions over those it made: "-" where it made none (``--no-predict``)."""
    from bench.layout_effect import Query, Row, _write

    nan = float("nan")
    rows = [Row("q01#0", "item", 1.0, 0.5, nan, 2), Row("q01#1", "item", 0.5, 0.25, nan, 0),
            Row("q02#0", "item", 1.0, 1.0, nan, 0, reads=False),  # does not read item: left out
            Row("q01#0", "store_sales", 0.4, 0.2, 0.3, 1, predicted_ideal=0.1),
            Row("q01#1", "store_sales", 0.4, 0.4, nan, 0)]  # a prediction not made: left out of its mean
    queries = [Query("q01#0", 2.0, 4.0, True, 3.0), Query("q01#1", 2.0, 4.0, True, 3.0), Query("q02#0", 1.0, 1.0, False, 1.0)]
    path = _write(tmp_path, "python -m bench layout-effect ... --no-predict", "src", ["item", "store_sales"], rows,
                  queries, {}, 10, 3, {"item": 1, "store_sales": 37})
    table = {line.split(" | ")[0].lstrip("| "): line.rstrip(" |").split(" | ")[1:]
             for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("| ")}
    assert table["blocks"] == ["1", "37"] and table["instances that read it"] == ["2", "2"]
    assert table["bytes Dipper keeps, source layout (mean share)"] == ["75.0%", "40.0%"]
    assert table["bytes Dipper keeps, qd-tree layout (mean share)"] == ["37.5%", "30.0%"]
    assert table["what-if prediction, judged as Dipper judges files (mean share of rows)"] == ["-", "30.0%"]
    assert table["what-if ideal: blocks without a matching row skipped (mean share of rows)"] == ["-", "10.0%"]
    assert table["prediction error, mean absolute (share points)"] == ["-", "10.0"]
    assert table["instances where the qd-tree layout keeps less / more"] == ["2 / 0", "1 / 0"]
    assert table["instances whose block descriptions removed files"] == ["1", "1"]
    assert (tmp_path / "src-item+store_sales.png").exists()


def test_sort_by_names_columns_of_the_table_once() -> None:
    from layout.apply import check_sort_by

    assert check_sort_by("db.t", ["B", "a"], ["a", "b", "c"]) == ("b", "a")
    assert check_sort_by("db.t", ["ss_Item_SK"], ["SS_ITEM_SK"]) == ("SS_ITEM_SK",)  # as the table spells it
    assert check_sort_by("db.t", [], ["a"]) == ()
    with pytest.raises(LayoutError, match=r"--sort-by x: db.t has no column x; its columns: a, b \(as its statistics"):
        check_sort_by("db.t", ["a", "x"], ["b", "a"])
    with pytest.raises(LayoutError, match="--sort-by A is given twice"):
        check_sort_by("db.t", ["a", "A"], ["a"])


def test_blocks_keep_the_tables_order_unless_a_column_would_clash_with_the_order() -> None:
    from layout.apply import _order

    assert _order(["a", "b"], ()) is None  # the table's: file path, then position
    assert _order(["a", "b"], ("b",)) == ("b",)
    assert _order(["a", "_metadata"], ("a",)) == ("a",)
    assert _order(["__dipper_file", "__dipper_row"], ("__dipper_file", "__dipper_row")) == ("__dipper_file", "__dipper_row")


@pytest.mark.parametrize("own", ["_Metadata", "__dipper_file", "__DIPPER_ROW"])
def test_a_column_named_like_the_orders_own_takes_the_shuffles_order(own: str) -> None:
    """t._metadata would be the table's own column, or the order's names ambiguous: the shuffle's order."""
    from layout.apply import _order

    assert _order(["a", own], ()) == ()


@given(st.lists(st.integers(-2**40, 2**40) | st.integers(-50, 50), max_size=60),
       st.lists(st.integers(-2**40, 2**40) | st.integers(-50, 50), max_size=30))
def test_joined_keys_membership_is_isins(values: list[int], keys: list[int]) -> None:
    """Sender rows tested against a key set (``layout/joined.py`` ``_among``): a lookup table where the keys span
    a narrow range, binary search where they do not, both ``np.isin``'s answer; strings by binary search."""
    v, k = np.array(values, dtype=np.int64), np.unique(np.array(keys, dtype=np.int64))
    assert _among(v, k).tolist() == np.isin(v, k).tolist()
    small = np.array([x for x in values if -2**31 <= x < 2**31], dtype=np.int32)  # narrower values, wide keys
    assert _among(small, k).tolist() == np.isin(small, k).tolist()
    wide = np.unique(np.array([x * 10**12 for x in keys] + [10**30], dtype=object))  # decimals past 18 digits
    assert _among(v, wide).tolist() == np.isin(v, wide).tolist()
    words = np.array([str(x) for x in values], dtype=object)
    assert _among(words, np.unique(np.array([str(x) for x in keys] or [""], dtype=object))).tolist() == \
        np.isin(words, np.array([str(x) for x in keys] or [""], dtype=object)).tolist()
