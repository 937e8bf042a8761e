"""The one owner of join semantics (rewriter/join_tree.py): which references each FROM clause pads with
NULLs, and which conjuncts may prune which reference, on nested and parenthesised joins of every kind."""

from __future__ import annotations

import pytest
import sqlglot

from rewriter.join_tree import FromClause, common_factors, from_clause, lowest_common_site


def clause(sql: str) -> FromClause:
    select = sqlglot.parse_one(sql, read="spark")
    return from_clause(select)


def local(sql: str) -> dict[str, list[str]]:
    return {alias: sorted(c.sql("spark") for c in cs) for alias, cs in clause(sql).local_predicates().items()}


@pytest.mark.parametrize("sql, padded", [
    ("SELECT * FROM a JOIN b ON a.x = b.x", set()),
    ("SELECT * FROM a LEFT JOIN b ON a.x = b.x", {"b"}),
    ("SELECT * FROM a RIGHT JOIN b ON a.x = b.x", {"a"}),
    ("SELECT * FROM a FULL JOIN b ON a.x = b.x", {"a", "b"}),
    ("SELECT * FROM a LEFT SEMI JOIN b ON a.x = b.x", set()),
    ("SELECT * FROM a LEFT ANTI JOIN b ON a.x = b.x", set()),
    ("SELECT * FROM a, b CROSS JOIN c", set()),
    # a parenthesised join on the null-supplying side pads every reference inside it
    ("SELECT * FROM a LEFT JOIN (b JOIN c ON b.x = c.x) ON a.x = b.x", {"b", "c"}),
    ("SELECT * FROM (a JOIN b ON a.x = b.x) RIGHT JOIN c ON c.y = a.y", {"a", "b"}),
    ("SELECT * FROM a JOIN ((b JOIN c ON b.x = c.x) LEFT JOIN d ON d.x = c.x) ON a.x = b.x", {"d"}),
    ("SELECT * FROM a LEFT JOIN b ON a.x = b.x JOIN c ON c.x = a.x", {"b"}),
    ("SELECT * FROM a LEFT JOIN b ON a.x = b.x RIGHT JOIN c ON c.x = a.x", {"a", "b"}),
])
def test_null_supplied_references(sql: str, padded: set[str]) -> None:
    assert set(clause(sql).null_supplied) == padded


@pytest.mark.parametrize("sql, expected", [
    # issue 13 case 1: an inner join's ON conjunct on b, which the earlier LEFT JOIN pads, is not b's
    ("SELECT * FROM n LEFT JOIN r ON n.k = r.k JOIN s ON s.k = n.k AND r.name IS NULL AND s.v = 1 AND n.v = 2",
     {"s": ["s.v = 1"], "n": ["n.v = 2"]}),
    # issue 13 case 2: WHERE on a reference inside a parenthesised null-supplying join
    ("SELECT * FROM n LEFT JOIN (r JOIN s ON r.k = s.k AND s.w = 3) ON n.k = r.k WHERE s.id IS NULL AND n.v = 1",
     {"n": ["n.v = 1"], "s": ["s.w = 3"]}),
    ("SELECT * FROM (a JOIN b ON a.x = b.x AND a.z = 1) RIGHT JOIN c ON c.y = a.y AND a.q = 2 AND c.w = 3",
     {"a": ["a.q = 2", "a.z = 1"]}),
    # the FULL JOIN variant: nothing in the FULL JOIN's ON, nor on its sides later
    ("SELECT * FROM p1 FULL JOIN p2 ON p1.k = p2.k AND p2.c <= 5 JOIN p3 ON p3.s = p1.s AND p2.c IS NULL AND p3.v = 1",
     {"p3": ["p3.v = 1"]}),
    # semi joins drop failing rows of both sides; anti joins keep the left side's unmatched rows
    ("SELECT * FROM a LEFT SEMI JOIN b ON a.x = b.x AND a.y = 1 AND b.y = 2", {"a": ["a.y = 1"], "b": ["b.y = 2"]}),
    ("SELECT * FROM a LEFT ANTI JOIN b ON a.x = b.x AND a.y = 1 AND b.y = 2", {"b": ["b.y = 2"]}),
    ("SELECT * FROM a LEFT JOIN b ON a.x = b.x AND a.y = 1 AND b.y = 2 WHERE a.z = 3 AND b.z = 4",
     {"a": ["a.z = 3"], "b": ["b.y = 2"]}),
    ("SELECT * FROM a FULL JOIN b ON a.x = b.x AND b.y = 2 WHERE a.z = 3", {}),
    # the single-reference parts of a disjunction over several references (implied_part)
    ("SELECT * FROM a JOIN b ON a.x = b.x WHERE (a.y = 1 AND b.y = 2) OR (a.y = 3 AND b.y = 4 AND b.z = 5)",
     {"a": ["a.y = 1 OR a.y = 3"], "b": ["b.y = 2 OR (b.y = 4 AND b.z = 5)"]}),
    # a disjunct that says nothing about b alone: nothing for b
    ("SELECT * FROM a, b WHERE (a.y = 1 AND b.y = 2) OR a.y = 3 OR (a.x = b.x AND a.y = 4)",
     {"a": ["(a.y = 1 OR a.y = 3) OR a.y = 4"]}),
    # nested: a disjunction inside a disjunct, parentheses looked through
    ("SELECT * FROM a, b WHERE ((a.y = 1 AND (b.y = 2 OR (b.y = 3 AND a.z = 0))) OR (b.y = 5 AND a.y IN (7, 8)))",
     {"a": ["a.y = 1 OR a.y IN (7, 8)"], "b": ["(b.y = 2 OR b.y = 3) OR b.y = 5"]}),
    # only where the site restricts the reference: a LEFT JOIN's ON restricts its right side only, and WHERE
    # does not restrict the padded b
    ("SELECT * FROM a LEFT JOIN b ON a.x = b.x AND ((a.y = 1 AND b.y = 2) OR (a.y = 3 AND b.y = 4))",
     {"b": ["b.y = 2 OR b.y = 4"]}),
    ("SELECT * FROM a LEFT JOIN b ON a.x = b.x WHERE (a.y = 1 AND b.y = 2) OR (a.y = 3 AND b.y = 4)",
     {"a": ["a.y = 1 OR a.y = 3"]}),
    ("SELECT * FROM a FULL JOIN b ON a.x = b.x WHERE (a.y = 1 AND b.y = 2) OR (a.y = 3 AND b.y = 4)", {}),
    # a column of an enclosing query is another reference (TPC-DS q41's correlated disjunction)
    ("SELECT * FROM item WHERE (item.m = i1.m AND item.c = 'Women') OR (item.m = i1.m AND item.c = 'Men')",
     {"item": ["item.c = 'Women' OR item.c = 'Men'"]}),
    # a part holding a subquery, or under NOT, is not read into
    ("SELECT * FROM a, b WHERE (a.y IN (SELECT 1) AND b.y = 2) OR (a.y = 3 AND b.y = 4)",
     {"b": ["b.y = 2 OR b.y = 4"]}),
    ("SELECT * FROM a, b WHERE NOT ((a.y = 1 AND b.y = 2) OR (a.y = 3 AND b.y = 4))", {}),
])
def test_local_predicates(sql: str, expected: dict[str, list[str]]) -> None:
    assert local(sql) == expected


@pytest.mark.parametrize("sql, reason", [
    ("SELECT * FROM a LEFT JOIN b USING (x)", "a left outer join with USING or NATURAL"),
    ("SELECT * FROM a NATURAL FULL JOIN b", "a full outer join with USING or NATURAL"),
])
def test_constructs_it_does_not_model_refuse_the_clause(sql: str, reason: str) -> None:
    c = clause(sql)
    assert c.refused == reason and c.local_predicates() == {} and not c.may_receive("a")


def test_inner_using_is_modelled() -> None:
    assert clause("SELECT * FROM a JOIN b USING (x) WHERE a.y = 1").refused is None


def test_sites_and_their_lowest_common_ancestor() -> None:
    c = clause("SELECT * FROM a JOIN b ON a.x = b.x LEFT JOIN (c JOIN d ON c.y = d.y) ON b.z = c.z WHERE a.w = d.w")
    by_text = {x.node.sql("spark"): x.site for x in c.conjuncts}
    inner_ab, inner_cd, left = by_text["a.x = b.x"], by_text["c.y = d.y"], by_text["b.z = c.z"]
    assert lowest_common_site([inner_ab, inner_cd]) is left
    assert lowest_common_site([inner_ab, left]) is left
    assert lowest_common_site([inner_ab, c.where]) is c.where
    # the inner join inside the parentheses restricts c and d; the LEFT JOIN only its right side; WHERE
    # everything no outer join pads
    assert inner_cd.restricts == {"c", "d"} and left.restricts == {"c", "d"} and c.where.restricts == {"a", "b"}


def test_where_sees_no_right_side_of_a_semi_join() -> None:
    c = clause("SELECT * FROM a LEFT SEMI JOIN b ON a.x = b.x")
    assert c.where.visible == {"a"}


@pytest.mark.parametrize("condition, factors", [
    # TPC-DS q85's shape: the equality every disjunct repeats
    ("(a.x = b.x AND a.y = 1) OR (a.x = b.x AND a.y = 2) OR (a.x = b.x AND b.z = 3)", ["a.x = b.x"]),
    # an equality read either way round is one conjunct; nested ORs are flattened
    ("(a.x = b.x AND a.y = 1) OR ((b.x = a.x AND a.y = 2) OR (a.x = b.x AND a.y = 3))", ["a.x = b.x"]),
    # one disjunct without it: nothing is implied
    ("(a.x = b.x AND a.y = 1) OR a.y = 2", []),
    ("(a.x = b.x AND a.y = 1) OR (a.x = b.y AND a.y = 2)", []),
    # a disjunct implies the common factors of its own disjunctions
    ("(a.y = 1 AND ((a.x = b.x AND b.z = 1) OR (a.x = b.x AND b.z = 2))) OR (a.x = b.x AND a.y = 3)", ["a.x = b.x"]),
    # several factors, each once, in the first disjunct's order
    ("(a.x = b.x AND c.k = a.k AND a.x = b.x) OR (a.k = c.k AND a.x = b.x)", ["a.x = b.x", "c.k = a.k"]),
    # not a disjunction, and an OR of one disjunct's parts only
    ("a.x = b.x AND a.y = 1", []),
    ("a.x = b.x OR a.x = b.x", ["a.x = b.x"]),
    # a factor under NOT is not implied (NOT (p OR q) is a conjunction of negations)
    ("NOT ((a.x = b.x AND a.y = 1) OR (a.x = b.x AND a.y = 2))", []),
])
def test_common_factors_of_a_disjunction(condition: str, factors: list[str]) -> None:
    e = sqlglot.parse_one(f"SELECT * FROM a WHERE {condition}", read="spark").args["where"].this
    assert [f.sql("spark") for f in common_factors(e)] == factors


def test_factors_stand_at_their_disjunctions_site() -> None:
    c = clause("SELECT * FROM a LEFT JOIN b ON (a.x = b.x AND b.y = 1) OR (a.x = b.x AND b.y = 2) "
               "WHERE (a.k = b.k AND a.y = 1) OR (b.k = a.k AND a.y = 2)")
    sites = {f.node.sql("spark"): f.site for f in c.factors}
    assert set(sites) == {"a.x = b.x", "a.k = b.k"}
    assert sites["a.k = b.k"] is c.where and sites["a.x = b.x"].kind == "left"
    assert sites["a.x = b.x"].restricts == {"b"}  # a LEFT JOIN's ON restricts its right side only
    # the factors are the statement's own nodes, and nothing of a refused clause is read
    assert all(f.node.root() is c.conjuncts[0].node.root() for f in c.factors)
    assert clause("SELECT * FROM a LEFT JOIN b USING (x) WHERE (a.x = b.x AND a.y = 1) OR (a.x = b.x AND "
                  "a.y = 2)").factors == ()
