"""Rewriter II without Spark: diP construction and application, the schedule of Fig. 9, the join graph's
semantics, and the paper's query shapes over hand-made statistics (tests/test_rewriter.py's helpers)."""

from __future__ import annotations

import dataclasses
import random

import networkx as nx
import numpy as np
import pytest

from rewriter.dip import DiP, admitted, compact, data_pred, dip_of_values, satisfy, union
from rewriter.rewrite import RewriteContext, rewrite
from rewriter.schedule import junction_tree, rooted, run
from stats.model import ColumnStats, Kind, RangeSets
from rewriter.predicate import Fn
from tests.test_rewriter import INT, STR, Source, table

# -- DataPred and Satisfy ---------------------------------------------------------------------------------------


def column(intervals_per_file: list[list[tuple[int, int]]], nulls: list[int] | None = None) -> tuple[ColumnStats, np.ndarray]:
    lo, hi, owner = [], [], []
    for i, ivs in enumerate(intervals_per_file):
        for a, b in ivs:
            lo.append(a), hi.append(b), owner.append(i)
    n = len(intervals_per_file)
    present = np.array([bool(ivs) for ivs in intervals_per_file])
    mins = np.array([ivs[0][0] if ivs else 0 for ivs in intervals_per_file], dtype=np.int64)
    maxs = np.array([ivs[-1][1] if ivs else 0 for ivs in intervals_per_file], dtype=np.int64)
    rows = np.full(n, 10, dtype=np.int64)
    null_count = np.array(nulls if nulls is not None else [0 if ivs else 10 for ivs in intervals_per_file], dtype=np.int64)
    ranges = RangeSets(np.array(lo, dtype=np.int64), np.array(hi, dtype=np.int64), np.array(owner, dtype=np.int64), present)
    return ColumnStats(INT, mins, maxs, present, null_count, ranges), rows


def test_data_pred_merges_and_compacts() -> None:
    col, rows = column([[(1, 3), (10, 12)], [(2, 5)], [(40, 40)], []])
    d = data_pred(col, rows, np.array([True, True, True, True]), max_ranges=10)
    assert list(zip(d.lo, d.hi)) == [(1, 5), (10, 12), (40, 40)]
    d2 = data_pred(col, rows, np.array([True, True, True, True]), max_ranges=2)
    assert list(zip(d2.lo, d2.hi)) == [(1, 12), (40, 40)]  # the smallest gap (5..10) is bridged
    assert data_pred(col, rows, np.array([False, False, False, True]), 10).ranges == 0  # only NULLs: nothing joins


def test_a_union_is_exact_only_if_its_inputs_are_and_it_needed_no_compaction() -> None:
    a, b = DiP(np.array([1, 10]), np.array([2, 12])), DiP(np.array([5]), np.array([6]))
    assert union([a, b], 10).exact and list(zip(union([a, b], 10).lo, union([a, b], 10).hi)) == [(1, 2), (5, 6), (10, 12)]
    assert not union([a, b], 2).exact  # three intervals into two: a gap bridged
    assert not union([compact(a, 1), b], 10).exact  # an input that was compacted already


def test_unknown_bounds_make_no_dip_and_are_always_kept() -> None:
    col, rows = column([[(1, 3)], [(5, 6)]])
    unknown = ColumnStats(INT, col.lo, col.hi, np.array([True, False]), col.null_count, None)
    assert data_pred(unknown, rows, np.array([True, True]), 10) is None
    assert satisfy(DiP(np.array([100]), np.array([200])), unknown, rows).tolist() == [False, True]


def test_satisfy_uses_range_set_gaps() -> None:
    col, rows = column([[(1, 3), (10, 12)], [(4, 9)], [(13, 20)], []])
    d = DiP(np.array([5, 14]), np.array([8, 14]))
    assert satisfy(d, col, rows).tolist() == [False, True, True, False]  # file 0's gap 4..9 holds no value


def test_compaction_is_sound() -> None:
    rng = random.Random(5)
    starts = sorted(rng.sample(range(0, 10_000, 10), 200))
    d = DiP(np.array(starts, dtype=np.int64), np.array([s + rng.randint(0, 5) for s in starts], dtype=np.int64))
    c = compact(d, 16)
    assert c.ranges == 16
    for lo, hi in zip(d.lo, d.hi):  # every original interval is inside a compacted one
        k = np.searchsorted(c.hi, lo)
        assert c.lo[k] <= lo and hi <= c.hi[k]


def test_keys_a_dip_carries_admit_exactly_those_values_and_compacted_ranges_admit_more() -> None:
    """Row by row (exact keys, rewriter/exact_keys.py), a received diP that carries its origin's keys admits
    those keys only: its compacted intervals admit every value between them too. Under a function of the
    receiving column the keys say nothing (they are values of the comparison), so the intervals decide."""
    rng = random.Random(94)
    keys = np.array(sorted(rng.sample(range(0, 100_000), 1500)), dtype=np.int64)
    d = dip_of_values(keys, INT, 64)
    assert d is not None and d.keys is not None and not d.exact and d.ranges == 64
    values = np.arange(0, 100_000, dtype=np.int64)
    exact = admitted(d, values, INT)
    assert exact.tolist() == np.isin(values, keys).tolist()
    by_ranges = admitted(dataclasses.replace(d, keys=None), values, INT)
    assert (by_ranges >= exact).all() and by_ranges.sum() > 10 * exact.sum()  # compaction spans most values
    words = np.array([f"w{v:05d}" for v in range(0, 3000)], dtype=object)  # strings: another path, same answer
    sent = dip_of_values(words[::7].copy(), STR, 4)
    assert sent is not None and sent.keys is not None and sent.ranges == 4
    assert admitted(sent, words, STR).tolist() == [v % 7 == 0 for v in range(3000)]
    wide = np.array([2**70, *range(0, 3000, 3)], dtype=object)  # DECIMAL(38) keys against DECIMAL(9) values
    assert admitted(DiP(np.array([0]), np.array([2**70]), keys=wide), values[:3000], INT).tolist() == \
        [v % 3 == 0 for v in range(3000)]
    plus_one = (Fn("add", 1),)
    assert (admitted(d, values, INT, plus_one) == admitted(dataclasses.replace(d, keys=None), values, INT,
                                                           plus_one)).all()


def test_value_lists_describe_string_files_exactly() -> None:
    """A string file's value list is its exact set of values: a diP built from it is a set of points, and a
    receiving file goes when none of its listed values is among them, though its min/max overlaps."""
    src = table("db.s", [{"c": ["AL", "TX"]}, {"c": ["CA"]}, {"c": [None, None]}], {"c": STR})
    dst = table("db.d", [{"c": ["AL", "CO", "NY"]}, {"c": ["CA", "ZZ"]}, {"c": ["B", "C", "D"]}], {"c": STR})
    a, b = src.columns["c"], dst.columns["c"]
    d = data_pred(a, src.rows, np.array([True, True, True]), 10)
    assert list(zip(d.lo, d.hi)) == [("AL", "AL"), ("CA", "CA"), ("TX", "TX")]
    assert satisfy(d, b, dst.rows).tolist() == [True, True, False]  # "B".."D" spans "CA"; its values do not
    only_first = data_pred(a, src.rows, np.array([True, False, False]), 10)
    assert satisfy(only_first, b, dst.rows).tolist() == [True, False, False]  # "CA".."ZZ" spans "TX"; no list value is


def test_monotone_functions_map_both_sides_into_the_compared_values() -> None:
    """``src.k + 1 = dst.k * 2``: both sides' intervals are mapped before they are compared."""
    col, rows = column([[(1, 3)], [(10, 12)]])
    plus_one = (Fn("add", 1),)
    d = data_pred(col, rows, np.array([True, True]), 10, plus_one)
    assert list(zip(d.lo, d.hi)) == [(2, 4), (11, 13)]
    dst, dst_rows = column([[(1, 1)], [(2, 2)], [(6, 6)], [(7, 9)]])
    assert satisfy(d, dst, dst_rows, (Fn("mul", 2),)).tolist() == [True, True, True, False]  # 2, 4, 12, 14..18
    huge, huge_rows = column([[(1, 2)], [(2**63 - 4, 2**63 - 1)]])  # + 1 overflows BIGINT
    assert data_pred(huge, huge_rows, np.array([True, True]), 10, plus_one) is None  # could overflow: no diP
    assert satisfy(DiP(np.array([100]), np.array([200])), huge, huge_rows, plus_one).tolist() == [False, True]
    dates = ColumnStats(Kind("date"), np.array([0, 366]), np.array([30, 400]), np.array([True, True]),
                        np.zeros(2, dtype=np.int64))
    years = data_pred(dates, rows, np.array([True, True]), 10, (Fn("year"),))  # 1970-01..31, 1971-01..02-05
    assert list(zip(years.lo, years.hi)) == [(1970, 1970), (1971, 1971)]


# -- the schedule ------------------------------------------------------------------------------------------------


def _value_model(graph: nx.Graph, seed: int) -> tuple[dict, dict]:
    """Every table: 6 files, each holding a few values of one join key shared by all edges."""
    rng = random.Random(seed)
    files = {n: [set(rng.sample(range(40), 3)) for _ in range(6)] for n in graph}
    keep = {n: [rng.random() < 0.7 for _ in range(6)] for n in graph}
    return files, keep


def _exchange(files: dict, keep: dict, counter: list[int]):
    def exchange(u, v) -> bool:
        counter[0] += 1
        values = set().union(*(f for f, k in zip(files[u], keep[u]) if k))
        new = [k and bool(f & values) for f, k in zip(files[v], keep[v])]
        changed = new != keep[v]
        keep[v] = new
        return changed
    return exchange


@pytest.mark.parametrize("seed", range(25))
def test_tree_schedule_reaches_the_naive_fixpoint_with_at_most_2n_minus_2_dips(seed: int) -> None:
    n = random.Random(seed).randint(2, 12)
    graph = nx.random_labeled_tree(n, seed=seed) if hasattr(nx, "random_labeled_tree") else nx.random_tree(n, seed=seed)
    files, keep = _value_model(graph, seed)
    naive_keep = {k: list(v) for k, v in keep.items()}
    naive = _exchange(files, naive_keep, [0])
    while any([naive(u, v) for u, v in list(graph.edges) + [(v, u) for u, v in graph.edges]]):
        pass
    counter = [0]
    from rewriter.schedule import tree_schedule

    tree_schedule(graph, _exchange(files, keep, counter))
    assert keep == naive_keep
    assert counter[0] <= 2 * (n - 1)


@pytest.mark.parametrize("seed", range(20))
def test_rewrite_on_random_acyclic_queries_builds_at_most_2n_minus_2_dips(seed: int) -> None:
    """The whole pipeline, not the schedule alone: a random tree of n tables joined on their own column per
    edge, predicates on a few of them, random values per file. The Fig. 9 schedule keeps exactly the files
    the naive exchange-until-fixpoint keeps, building at most 2(n-1) diPs."""
    import dataclasses

    rng = random.Random(seed)
    n = rng.randint(2, 9)
    tree = nx.random_labeled_tree(n, seed=seed) if hasattr(nx, "random_labeled_tree") else nx.random_tree(n, seed=seed)
    edges = sorted(tuple(sorted(e)) for e in tree.edges)
    tables = []
    for i in range(n):
        cols = [f"e{a}_{b}" for a, b in edges if i in (a, b)] + ["x"]
        files = []
        for f in range(6):
            files.append({c: sorted(rng.sample(range(60), 2)) for c in cols})
        tables.append(table(f"db.t{i}", files, {c: INT for c in cols}))
    ctx = RewriteContext(Source(*tables), database="db", dip_max_ranges=1000)
    predicates = [f"t{i}.x < {rng.randint(10, 50)}" for i in rng.sample(range(n), max(1, n // 3))]
    joins = [f"t{a}.e{a}_{b} = t{b}.e{a}_{b}" for a, b in edges]
    sql = f"SELECT count(*) FROM {', '.join(f't{i}' for i in range(n))} WHERE {' AND '.join(joins + predicates)}"
    fig9 = rewrite(sql, ctx)
    naive = rewrite(sql, dataclasses.replace(ctx, naive_schedule=True))
    assert fig9.decision.error is None and naive.decision.error is None
    assert [t.files_kept for t in fig9.decision.tables] == [t.files_kept for t in naive.decision.tables]
    assert fig9.decision.dips_built <= 2 * (n - 1) <= naive.decision.dips_built


def test_compacted_dips_repeat_the_schedule_until_nothing_changes() -> None:
    """Compaction to one interval makes every diP inexact (§6): b -> a keeps a's file 40-41 under
    [1, 51], so a's next diP [1, 41] removes b's file 50-51, and so on. One round of the tree schedule
    would stop at a: 2, b: 3 files; repeating reaches the naive schedule's fixpoint, one file each."""
    import dataclasses

    a = table("db.a", [{"k": [1, 2]}, {"k": [98, 99]}, {"k": [40, 41]}], {"k": INT})
    b = table("db.b", [{"k": [1, 2], "j": [5]}, {"k": [50, 51], "j": [5]}, {"k": [98, 99], "j": [60]},
                       {"k": [30, 31], "j": [5]}], {"k": INT, "j": INT})
    c = table("db.c", [{"j": [5], "y": [1]}, {"j": [60], "y": [9]}], {"j": INT, "y": INT})
    sql = "SELECT count(*) FROM a JOIN b ON a.k = b.k JOIN c ON b.j = c.j WHERE c.y < 5"
    ctx = RewriteContext(Source(a, b, c), database="db", dip_max_ranges=1)
    fig9 = rewrite(sql, ctx)
    naive = rewrite(sql, dataclasses.replace(ctx, naive_schedule=True))
    assert {t.alias: t.files_kept for t in fig9.decision.tables} == {"a": 1, "b": 1, "c": 1}
    assert [t.files_kept for t in fig9.decision.tables] == [t.files_kept for t in naive.decision.tables]
    assert any(d.compacted for t in fig9.decision.tables for d in t.dips)
    exact = rewrite(sql, dataclasses.replace(ctx, dip_max_ranges=64))  # exact diPs: one round, 2(n-1) diPs
    assert {t.alias: t.files_kept for t in exact.decision.tables} == {"a": 1, "b": 1, "c": 1}
    assert exact.decision.dips_built <= 4 < fig9.decision.dips_built


def test_junction_tree_of_figure_10() -> None:
    """Fig. 8 (right) / Fig. 10: seven relations, two cycles (one not a clique)."""
    g = nx.Graph([(1, 2), (2, 3), (2, 5), (3, 5), (3, 4), (4, 5), (4, 6), (5, 6), (6, 7)])
    tree = junction_tree(g)
    assert nx.is_tree(tree)
    nodes = set(tree.nodes)
    assert {frozenset({1, 2}), frozenset({6, 7})} <= nodes
    assert {frozenset({2, 3, 5}), frozenset({3, 4, 5}), frozenset({4, 5, 6})} <= nodes
    parent, height = rooted(tree)
    assert max(height.values()) == 2  # rooted at the centre, {3, 4, 5}
    files, keep = _value_model(g, 1)
    naive_keep = {k: list(v) for k, v in keep.items()}
    naive = _exchange(files, naive_keep, [0])
    while any([naive(u, v) for u, v in list(g.edges) + [(v, u) for u, v in g.edges]]):
        pass
    run(g, _exchange(files, keep, [0]))
    assert keep == naive_keep  # with repetition to fixpoint, the cyclic schedule converges as well



def test_seven_relations_with_two_cycles_through_sql() -> None:
    """Fig. 8 (right) / Fig. 10 through rewrite(): seven tables joined along the graph above, each join on
    its own pair of columns. File f of every table holds join values 10f..10f+9, so predicates at the two
    ends (t1 keeps files 0-1, t7 keeps files 1-2) leave only file 1 of every table at the fixpoint: the
    information has to cross both cycles in both directions."""
    edges = [(1, 2), (2, 3), (2, 5), (3, 5), (3, 4), (4, 5), (4, 6), (5, 6), (6, 7)]
    tables = []
    for i in range(1, 8):
        cols = [f"e{a}{b}" for a, b in edges if i in (a, b)] + ["x"]
        files = [{c: [10 * f + 1, 10 * f + 8] for c in cols} for f in range(4)]
        tables.append(table(f"db.t{i}", files, {c: INT for c in cols}))
    ctx = RewriteContext(Source(*tables), database="db")
    joins = " AND ".join(f"t{a}.e{a}{b} = t{b}.e{a}{b}" for a, b in edges)
    sql = f"SELECT count(*) FROM {', '.join(f't{i}' for i in range(1, 8))} WHERE {joins} AND t1.x < 20 AND t7.x BETWEEN 10 AND 29"
    result = rewrite(sql, ctx)
    assert result.decision.error is None
    assert {t.alias: t.files_kept for t in result.decision.tables} == {f"t{i}": 1 for i in range(1, 8)}
    assert all(t.dips for t in result.decision.tables if t.alias not in ("t1", "t7"))

# -- the paper's shapes, through rewrite() ------------------------------------------------------------------------

# part: 4 files by partkey; lineitem: 4 files by partkey. Only part's file 2 has brand 'B#23'.
PART = table("db.part", [
    {"p_partkey": [1, 2, 3], "p_brand": ["B#11", "B#12", "B#11"]},
    {"p_partkey": [10, 11, 12], "p_brand": ["B#11", "B#12", "B#12"]},
    {"p_partkey": [20, 21], "p_brand": ["B#23", "B#23"]},
    {"p_partkey": [30, 31], "p_brand": ["B#11", "B#11"]},
], {"p_partkey": INT, "p_brand": Kind("string")})
LINEITEM = table("db.lineitem", [
    {"l_partkey": [1, 2, 3, 3], "l_quantity": [1, 2, 3, 4], "l_orderkey": [100, 101, 102, 103]},
    {"l_partkey": [10, 12], "l_quantity": [5, 6], "l_orderkey": [200, 201]},
    {"l_partkey": [20, 21, 21], "l_quantity": [7, 8, 9], "l_orderkey": [300, 301, 302]},
    {"l_partkey": [30, 31], "l_quantity": [1, 1], "l_orderkey": [400, 401]},
], {"l_partkey": INT, "l_quantity": INT, "l_orderkey": INT})
ORDERS = table("db.orders", [
    {"o_orderkey": [100, 101, 102, 103], "o_year": [1995, 1995, 1995, 1995]},
    {"o_orderkey": [200, 201], "o_year": [1996, 1996]},
    {"o_orderkey": [300, 301, 302], "o_year": [1997, 1997, 1997]},
    {"o_orderkey": [400, 401], "o_year": [1998, 1998]},
], {"o_orderkey": INT, "o_year": INT})
CTX = RewriteContext(Source(PART, LINEITEM, ORDERS), database="db")


def kept(sql: str, ctx: RewriteContext = CTX) -> dict[str, int]:
    result = rewrite(sql, ctx)
    assert result.decision.error is None, result.decision.error
    return {t.alias: t.files_kept for t in result.decision.tables}


def test_q17_shape_sideways_and_into_a_correlated_subquery() -> None:
    """Fig. 2 (left): part's predicate prunes the outer lineitem (join) and the inner one (correlation)."""
    sql = """SELECT sum(l_extendedprice) FROM lineitem, part
             WHERE p_partkey = l_partkey AND p_brand = 'B#23'
               AND l_quantity < (SELECT 0.2 * avg(l2.l_quantity) FROM lineitem l2 WHERE l2.l_partkey = p_partkey)"""
    assert kept(sql.replace("l_extendedprice", "l_quantity")) == {"lineitem": 1, "part": 1, "l2": 1}


def test_q17_shape_through_group_by() -> None:
    """The same with the aggregate as a derived table: the diP is pushed below the GROUP BY key."""
    sql = """SELECT count(*) FROM part JOIN (SELECT l_partkey AS k, avg(l_quantity) AS q FROM lineitem GROUP BY l_partkey) a
             ON a.k = p_partkey WHERE p_brand = 'B#23'"""
    assert kept(sql) == {"part": 1, "lineitem": 1}
    # not a grouping key: the diP cannot go below the aggregate
    no_key = """SELECT count(*) FROM part JOIN (SELECT max(l_partkey) AS k FROM lineitem GROUP BY l_orderkey) a
                ON a.k = p_partkey WHERE p_brand = 'B#23'"""
    assert kept(no_key)["lineitem"] == 4
    rollup = """SELECT count(*) FROM part JOIN (SELECT l_partkey AS k, avg(l_quantity) AS q FROM lineitem
                GROUP BY ROLLUP (l_partkey)) a ON a.k = p_partkey WHERE p_brand = 'B#23'"""
    assert kept(rollup)["lineitem"] == 4  # the grand-total row depends on every file


def test_three_way_chain_where_every_table_has_a_predicate() -> None:
    """Fig. 2 (middle): diPs flow both ways along part - lineitem - orders until nothing changes."""
    sql = """SELECT count(*) FROM part JOIN lineitem ON p_partkey = l_partkey JOIN orders ON l_orderkey = o_orderkey
             WHERE p_partkey < 25 AND l_quantity > 4 AND o_year >= 1997"""
    # part < 25: files 0-2; quantity > 4: lineitem 1-2; year >= 1997: orders 2-3 -> only the 2x range survives
    assert kept(sql) == {"part": 1, "lineitem": 1, "orders": 1}


def test_outer_full_anti_and_not_in_directions() -> None:
    left = "SELECT count(*) FROM part LEFT JOIN lineitem ON p_partkey = l_partkey WHERE p_brand = 'B#23'"
    assert kept(left) == {"part": 1, "lineitem": 1}  # preserved part prunes the null-supplying side
    right = "SELECT count(*) FROM part LEFT JOIN lineitem ON p_partkey = l_partkey AND l_quantity > 6"
    assert kept(right) == {"part": 4, "lineitem": 1}  # ... and never the other way
    full = "SELECT count(*) FROM part FULL JOIN lineitem ON p_partkey = l_partkey WHERE p_brand = 'B#23'"
    assert kept(full)["lineitem"] == 4
    not_exists = """SELECT count(*) FROM part WHERE p_brand = 'B#23'
                    AND NOT EXISTS (SELECT 1 FROM lineitem WHERE l_partkey = p_partkey AND l_quantity > 8)"""
    assert kept(not_exists) == {"part": 1, "lineitem": 1}  # into the subquery only
    not_in = "SELECT count(*) FROM part WHERE p_brand = 'B#23' AND p_partkey NOT IN (SELECT l_partkey FROM lineitem)"
    assert kept(not_in) == {"part": 1, "lineitem": 1}  # into the subquery only, no NULLs on either side
    not_in_back = "SELECT count(*) FROM part WHERE p_partkey NOT IN (SELECT l_partkey FROM lineitem WHERE l_quantity > 8)"
    assert kept(not_in_back)["part"] == 4
    semi = "SELECT count(*) FROM part WHERE p_partkey IN (SELECT l_partkey FROM lineitem WHERE l_quantity > 8)"
    assert kept(semi) == {"part": 1, "lineitem": 1}
    exists = "SELECT count(*) FROM part WHERE EXISTS (SELECT 1 FROM lineitem WHERE l_partkey = p_partkey AND l_quantity > 8)"
    assert kept(exists) == {"part": 1, "lineitem": 1}
    counted = "SELECT count(*) FROM part WHERE EXISTS (SELECT count(*) FROM lineitem WHERE l_partkey = p_partkey AND l_quantity > 8)"
    assert kept(counted)["part"] == 4  # a global aggregate returns a row even on no input


def test_not_in_keeps_null_files_and_never_sends_from_nulls() -> None:
    """A NULL in the subquery makes NOT IN unknown for every row, and a NULL on the left is decided by
    whether the subquery is empty: files holding NULLs are kept, and a sender with NULLs sends nothing."""
    a = table("db.a", [{"k": [1, 2]}, {"k": [10, 11]}, {"k": [20, None]}], {"k": INT})
    b = table("db.b", [{"k": [1, 3]}, {"k": [12, None]}, {"k": [20, 21]}, {"k": [None, None]}], {"k": INT})
    ctx = RewriteContext(Source(a, b), database="db")
    both = kept("SELECT * FROM a WHERE k < 5 AND k NOT IN (SELECT k FROM b)", ctx)
    assert both == {"a": 1, "b": 1 + 2}  # b's file 0 by the diP; files 1 and 3 hold NULLs
    assert kept("SELECT * FROM a WHERE k > 15 AND k NOT IN (SELECT k FROM b)", ctx)["b"] == 4  # a's file has a NULL
    outer = "SELECT * FROM b LEFT JOIN a ON a.k = b.k WHERE b.k < 5 AND a.k NOT IN (SELECT k FROM b b2)"
    assert kept(outer, ctx)["b2"] == 4  # a.k is NULL wherever the outer join found no match
    padded = "SELECT * FROM (SELECT a.k FROM b LEFT JOIN a ON a.k = b.k AND a.k < 5) t WHERE t.k NOT IN (SELECT k FROM b b2)"
    assert kept(padded, ctx)["b2"] == 4  # the same NULLs, made inside a derived table


def test_set_operations_receive_in_every_branch_and_send_as_union_or_single_branch() -> None:
    union = """SELECT count(*) FROM part JOIN (SELECT l_partkey AS k FROM lineitem WHERE l_quantity > 0
               UNION ALL SELECT l_partkey FROM lineitem l2) u ON u.k = p_partkey WHERE p_brand = 'B#23'"""
    assert kept(union) == {"part": 1, "lineitem": 1, "l2": 1}
    in_union = """SELECT count(*) FROM part WHERE p_brand = 'B#23' AND p_partkey IN
                  (SELECT l_partkey FROM lineitem INTERSECT SELECT l_partkey FROM lineitem l2)"""
    assert kept(in_union) == {"part": 1, "lineitem": 1, "l2": 1}
    sends = """SELECT count(*) FROM part JOIN (SELECT l_partkey AS k FROM lineitem WHERE l_quantity > 8
               UNION ALL SELECT l_partkey FROM lineitem l2 WHERE l2.l_quantity > 8) u ON u.k = p_partkey"""
    assert kept(sends) == {"part": 1, "lineitem": 1, "l2": 1}  # the union of both branches' diPs
    wide = """SELECT count(*) FROM part JOIN (SELECT l_partkey AS k FROM lineitem WHERE l_quantity > 8
              UNION ALL SELECT l_partkey FROM lineitem l2 WHERE l2.l_quantity < 2) u ON u.k = p_partkey"""
    assert kept(wide)["part"] == 3  # file 2 from one branch, files 0 and 3 from the other
    constant = """SELECT count(*) FROM part JOIN (SELECT l_partkey AS k FROM lineitem WHERE l_quantity > 8
                  UNION ALL SELECT 3) u ON u.k = p_partkey"""
    assert kept(constant)["part"] == 4  # a branch that no statistic describes bounds nothing
    intersect = """SELECT count(*) FROM part JOIN (SELECT l_partkey AS k FROM lineitem WHERE l_quantity > 8
                   INTERSECT SELECT l_partkey FROM lineitem l2) u ON u.k = p_partkey"""
    assert kept(intersect) == {"part": 1, "lineitem": 1, "l2": 1}  # one branch alone bounds the output
    except_ = """SELECT count(*) FROM part JOIN (SELECT l_partkey AS k FROM lineitem l2 EXCEPT
                 SELECT l_partkey FROM lineitem WHERE l_quantity > 8) u ON u.k = p_partkey"""
    assert kept(except_)["part"] == 4  # only EXCEPT's left branch bounds the output
    left = """SELECT count(*) FROM part JOIN (SELECT l_partkey AS k FROM lineitem WHERE l_quantity > 8 EXCEPT
              SELECT l_partkey FROM lineitem l2) u ON u.k = p_partkey"""
    assert kept(left)["part"] == 1
    limited = """SELECT count(*) FROM part JOIN (SELECT l_partkey AS k FROM lineitem UNION ALL
                 SELECT l_partkey FROM lineitem l2 LIMIT 3) u ON u.k = p_partkey WHERE p_brand = 'B#23'"""
    assert kept(limited)["lineitem"] == 4


def test_ctes_read_twice_receive_the_union_of_both_reads_needs() -> None:
    sql = """WITH l AS (SELECT l_partkey FROM lineitem)
             SELECT count(*) FROM l a JOIN part ON a.l_partkey = p_partkey JOIN l b ON b.l_partkey = p_partkey
             WHERE p_brand = 'B#23'"""
    assert kept(sql)["lineitem"] == 1
    two_needs = """WITH l AS (SELECT l_partkey, l_quantity FROM lineitem)
                   SELECT count(*) FROM l a JOIN part p1 ON a.l_partkey = p1.p_partkey AND p1.p_brand = 'B#23'
                   UNION ALL SELECT count(*) FROM l b JOIN part p2 ON b.l_partkey = p2.p_partkey AND p2.p_partkey < 5"""
    assert kept(two_needs)["lineitem"] == 2  # file 2 for the first read, file 0 for the second
    one_unbounded = """WITH l AS (SELECT l_partkey FROM lineitem)
                       SELECT count(*) FROM l a JOIN part ON a.l_partkey = p_partkey WHERE p_brand = 'B#23'
                       UNION ALL SELECT count(*) FROM l b"""
    assert kept(one_unbounded)["lineitem"] == 4  # the second read needs every file
    aliased_once = "WITH l AS (SELECT l_partkey FROM lineitem) SELECT count(*) FROM l x JOIN part ON x.l_partkey = p_partkey WHERE p_brand = 'B#23'"
    assert kept(aliased_once)["lineitem"] == 1
    once = "WITH l AS (SELECT l_partkey FROM lineitem) SELECT count(*) FROM l JOIN part ON l.l_partkey = p_partkey WHERE p_brand = 'B#23'"
    assert kept(once) == {"lineitem": 1, "part": 1}


def test_tainted_tables_receive_but_never_send() -> None:
    import dataclasses

    tainted = dataclasses.replace(PART, unknown_files=1, unknown_bytes=10)
    ctx = RewriteContext(Source(tainted, LINEITEM, ORDERS), database="db")
    sql = "SELECT count(*) FROM lineitem JOIN part ON p_partkey = l_partkey WHERE p_brand = 'B#23' AND l_quantity > 8"
    out = kept(sql, ctx)
    assert out["lineitem"] == 1  # by its own predicate only: part's unknown file could hold any key
    assert out["part"] == 1 + 1  # receives from lineitem (file 2), and its unknown file is always read


def test_equivalence_classes_join_columns_the_query_never_compares() -> None:
    """``p_partkey = m_k AND m_k = l_partkey`` makes part and lineitem exchange diPs directly (§3.2), which
    matters when the table in the middle cannot relay them: here it has a file without statistics, so it
    may receive but never send. Not through outer joins: a RIGHT JOIN preserves lineitem whatever part holds."""
    import dataclasses

    mid = dataclasses.replace(table("db.mid", [{"m_k": [1, 2, 3, 10, 11, 20, 21, 30]}], {"m_k": INT}),
                              unknown_files=1, unknown_bytes=10)
    ctx = RewriteContext(Source(PART, LINEITEM, ORDERS, mid), database="db")
    inner = "SELECT count(*) FROM part JOIN mid ON p_partkey = m_k JOIN lineitem ON m_k = l_partkey WHERE p_brand = 'B#23'"
    assert kept(inner, ctx) == {"part": 1, "mid": 2, "lineitem": 1}
    where = "SELECT count(*) FROM part, mid, lineitem WHERE p_partkey = m_k AND l_partkey = m_k AND p_brand = 'B#23'"
    assert kept(where, ctx)["lineitem"] == 1
    result = rewrite(where, ctx)
    assert any(d.via == "inner join (transitive)" for t in result.decision.tables for d in t.dips)
    right = "SELECT count(*) FROM part JOIN mid ON p_partkey = m_k RIGHT JOIN lineitem ON m_k = l_partkey WHERE p_brand = 'B#23'"
    assert kept(right, ctx)["lineitem"] == 4
    functions = "SELECT count(*) FROM part JOIN mid ON p_partkey + 1 = m_k JOIN lineitem ON m_k = l_partkey WHERE p_brand = 'B#23'"
    assert kept(functions, ctx)["lineitem"] == 4  # only plain columns are classed


def test_only_equalities_of_one_domain_join_an_equivalence_class() -> None:
    """``a.s = d.k AND d.k = b.s`` with strings s and an integer k: Spark reads both strings as integers, so
    '01' and '1' join through 1, while ``a.s = b.s`` compares strings and '01' <> '1'. A class through the
    conversion made b's diP of strings drop a's file of '01' (found by review; a wrong count on Spark)."""
    a = table("db.a", [{"s": ["01"], "v": [1]}, {"s": ["7"], "v": [2]}], {"s": STR, "v": INT})
    d = table("db.d", [{"k": [1], "w": [1]}], {"k": INT, "w": INT})
    b = table("db.b", [{"s": ["1"], "x": [5]}, {"s": ["9"], "x": [6]}], {"s": STR, "x": INT})
    ctx = RewriteContext(Source(a, d, b), database="db", exact_keys_max_bytes=0)
    sql = "SELECT count(*) FROM a JOIN d ON a.s = d.k JOIN b ON d.k = b.s WHERE b.x = 5"
    assert kept(sql, ctx) == {"a": 2, "d": 1, "b": 1}
    assert not any(t.dips for t in rewrite(sql, ctx).decision.tables)
    same = table("db.m", [{"s": ["1"]}], {"s": STR})  # one domain throughout: the class stands
    ctx = RewriteContext(Source(a, same, b), database="db", exact_keys_max_bytes=0)
    assert kept("SELECT count(*) FROM a JOIN m ON a.s = m.s JOIN b ON m.s = b.s WHERE b.x = 5", ctx)["a"] == 0


def test_q35_shape_exists_with_joins_inside() -> None:
    """Fig. 7, reduced: customers pruned by what a date-filtered EXISTS over sales can hold, and sales
    pruned by the customers read."""
    customer = table("db.customer", [{"c_sk": [1, 2]}, {"c_sk": [10, 11]}, {"c_sk": [20, 21]}], {"c_sk": INT})
    sales = table("db.sales", [{"s_c": [1, 2], "s_d": [1, 1]}, {"s_c": [10, 11], "s_d": [2, 2]}, {"s_c": [20], "s_d": [3]}],
                  {"s_c": INT, "s_d": INT})
    dates = table("db.dates", [{"d_sk": [1], "d_year": [2001]}, {"d_sk": [2], "d_year": [2002]}, {"d_sk": [3], "d_year": [2003]}],
                  {"d_sk": INT, "d_year": INT})
    ctx = RewriteContext(Source(customer, sales, dates), database="db")
    sql = """SELECT count(*) FROM customer c WHERE c.c_sk > 5 AND EXISTS (
               SELECT * FROM sales, dates WHERE c.c_sk = s_c AND s_d = d_sk AND d_year = 2002)"""
    assert kept(sql, ctx) == {"c": 1, "sales": 1, "dates": 1}


def test_monotone_expressions_pass_dips_through_joins_and_projections() -> None:
    """Joins on ``k + c`` and derived tables projecting ``k + c`` or ``year(d)`` pass diPs as renames do
    (§3.3 rule 2, invertible single-column projections); decreasing expressions pass none."""
    shifted = "SELECT count(*) FROM part JOIN lineitem ON l_partkey + 1 = p_partkey + 1 WHERE p_brand = 'B#23'"
    assert kept(shifted) == {"part": 1, "lineitem": 1}
    off_by_ten = "SELECT count(*) FROM part JOIN lineitem ON l_partkey = p_partkey - 10 WHERE p_brand = 'B#23'"
    assert kept(off_by_ten) == {"part": 1, "lineitem": 1}  # part's 20..21 become 10..11: lineitem's file 1
    derived = """SELECT count(*) FROM part JOIN (SELECT l_partkey * 2 AS k2 FROM lineitem) t ON t.k2 = p_partkey * 2
                 WHERE p_brand = 'B#23'"""
    assert kept(derived) == {"part": 1, "lineitem": 1}
    sends_back = """SELECT count(*) FROM part JOIN (SELECT l_partkey + 0 AS k FROM lineitem WHERE l_quantity > 8) t
                    ON t.k = p_partkey"""
    assert kept(sends_back) == {"part": 1, "lineitem": 1}  # the derived table's side sends through its expression
    grouped = """SELECT count(*) FROM part JOIN (SELECT l_partkey + 1 AS k1, sum(l_quantity) AS q FROM lineitem
                 GROUP BY l_partkey) t ON t.k1 = p_partkey + 1 WHERE p_brand = 'B#23'"""
    assert kept(grouped)["lineitem"] == 1  # a function of a grouping key commutes with GROUP BY
    grouped_expr = """SELECT count(*) FROM part JOIN (SELECT l_partkey + 1 AS k1, sum(l_quantity) AS q FROM lineitem
                      GROUP BY l_partkey + 1) t ON t.k1 = p_partkey + 1 WHERE p_brand = 'B#23'"""
    assert kept(grouped_expr)["lineitem"] == 1  # ... as does the grouping expression itself
    not_key = """SELECT count(*) FROM part JOIN (SELECT max(l_partkey) + 1 AS k1 FROM lineitem GROUP BY l_orderkey) t
                 ON t.k1 = p_partkey + 1 WHERE p_brand = 'B#23'"""
    assert kept(not_key)["lineitem"] == 4
    decreasing = "SELECT count(*) FROM part JOIN lineitem ON 100 - l_partkey = 100 - p_partkey WHERE p_brand = 'B#23'"
    assert kept(decreasing)["lineitem"] == 4
    result = rewrite(off_by_ten, CTX)
    assert [d.columns for t in result.decision.tables for d in t.dips if t.alias == "lineitem"] == \
        ["add(p_partkey, -10) -> l_partkey"]


def test_string_join_keys_use_value_lists() -> None:
    """A join on strings: value lists make the diP a set of points, and part's files 0 and 1 (brands
    B#11..B#12) go though their min/max spans B#115."""
    brands = table("db.brands", [{"b_brand": ["B#23", "B#115"], "b_name": ["x", "x"]}, {"b_brand": ["B#99"], "b_name": ["y"]}],
                   {"b_brand": STR, "b_name": STR})
    ctx = RewriteContext(Source(PART, brands), database="db")
    assert kept("SELECT count(*) FROM part JOIN brands ON b_brand = p_brand WHERE b_name = 'x'", ctx) == \
        {"part": 1, "brands": 1}


def test_an_equality_every_disjunct_has_carries_a_dip() -> None:
    """TPC-DS q85's shape: the join equality repeated inside each disjunct is a channel like a top-level one
    (``join_tree.common_factors``); part is pruned by the disjunction's part on it, lineitem by the diP."""
    factored = """SELECT count(*) FROM part, lineitem
                  WHERE (p_partkey = l_partkey AND p_brand = 'B#23' AND l_quantity > 0)
                     OR (l_partkey = p_partkey AND p_brand = 'B#23' AND l_quantity < 0)"""
    assert kept(factored) == {"part": 1, "lineitem": 1}
    # one disjunct without the equality: nothing passes to lineitem
    partial = """SELECT count(*) FROM part, lineitem
                 WHERE (p_partkey = l_partkey AND p_brand = 'B#23') OR (p_brand = 'B#23' AND l_quantity < 0)"""
    assert kept(partial) == {"part": 1, "lineitem": 4}
    # in a LEFT JOIN's ON the factor passes into the null-supplying side only, never back into part
    left = """SELECT count(*) FROM part LEFT JOIN lineitem
              ON (p_partkey = l_partkey AND l_quantity > 6) OR (p_partkey = l_partkey AND l_quantity > 8)"""
    assert kept(left) == {"part": 4, "lineitem": 1}
    # a correlated subquery's disjunction (TPC-DS q41's shape): from the outer query into the subquery
    correlated = """SELECT count(*) FROM part WHERE p_brand = 'B#23' AND EXISTS (SELECT 1 FROM lineitem
                    WHERE (l_partkey = p_partkey AND l_quantity > 0) OR (l_partkey = p_partkey AND l_quantity < 0))"""
    assert kept(correlated) == {"part": 1, "lineitem": 1}
