"""Query instances with substitution parameters (``bench/workloads.py``): every TPC-H query, every parameter
drawn, deterministic per seed, different across seeds, valid Spark SQL; a missing literal is an error. TPC-DS
instances by redrawn literals (``bench/redraw.py``): time moves as one inside the window, numbers within their
bounds, strings to distinct existing values, nothing but parameters changes."""

from __future__ import annotations

import random
import re
from decimal import Decimal
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from bench.query_suite import runnable_queries
from bench.redraw import TPCDS_TIME, redraw
from bench.workloads import TPCH, instances, substitute, write
from dipper.errors import DatasetError
from layout.workload import read_workload


def test_every_query_has_instances_that_parse_and_change_with_the_seed() -> None:
    assert sorted(TPCH) == sorted(runnable_queries("tpch"))
    first, again, other = instances("tpch", 1, 3), instances("tpch", 1, 3), instances("tpch", 2, 3)
    assert first == again and len(first) == 66
    for name, sql in first:
        sqlglot.parse_one(sql, read="spark")
    changed = {name.split("#")[0] for (name, a), (_, b) in zip(first, other) if a != b}
    assert len(changed) == 22  # every query's parameters are drawn (3 instances: at least one differs)
    originals = runnable_queries("tpch")
    assert sum(sql != originals[name.split("#")[0]] for name, sql in first) >= 60  # few draws equal the defaults


def test_parameters_stay_in_the_specifications_ranges() -> None:
    for name, sql in instances("tpch", 7, 20, ["q01", "q06", "q14", "q18"]):
        if name.startswith("q01"):
            d = re.search(r"l_shipdate <= CAST\('(\d{4}-\d\d-\d\d)'", sql).group(1)
            assert "1998-08-03" <= d <= "1998-10-02"  # 1998-12-01 minus 60 to 120 days
        if name.startswith("q06"):
            lo, hi = (float(x) for x in re.search(r"BETWEEN (0\.\d+) AND (0\.\d+)", sql).groups())
            assert round(hi - lo, 2) == 0.02 and 0.01 <= lo and hi <= 0.10
            year = int(re.search(r"l_shipdate >= CAST\('(\d{4})-01-01'", sql).group(1))
            assert 1993 <= year <= 1997 and f"'{year + 1}-01-01'" in sql
        if name.startswith("q14"):
            start, end = re.findall(r"CAST\('(\d{4}-\d\d)-01' AS DATE\)", sql)
            assert start < end and "1993-01" <= start <= "1997-12"
        if name.startswith("q18"):
            assert 312 <= int(re.search(r"> (\d+)", sql).group(1)) <= 315


def test_a_parameter_missing_from_the_text_is_an_error() -> None:
    with pytest.raises(DatasetError, match="'1994-01-01'"):
        substitute("SELECT 1", [("'1994-01-01'", "'1995-01-01'")], "q06")
    assert substitute("'A' 'B'", [("'A'", "'B'"), ("'B'", "'A'")], "swap") == "'B' 'A'"  # one pass


def test_the_file_reads_back_as_a_workload(tmp_path: Path) -> None:
    items = instances("tpch", 3, 2, ["q03", "q06"])
    write(tmp_path / "w.sql", items)
    statements = read_workload(tmp_path / "w.sql", "tpch")
    assert len(statements) == 4 and all(s.database == "tpch" for s in statements)


class FakeDomains:
    """What ``bench.redraw`` asks of a dataset, for a handful of TPC-DS columns."""

    time = TPCDS_TIME
    numbers = {"d_year": (1900, 2100), "d_month_seq": (0, 2400), "d_moy": (1, 12), "i_manufact_id": (1, 1000),
               "s_gmt_offset": (-10, -5), "ss_quantity": (1, 100), "i_current_price": (Decimal("0.09"), Decimal("99.99"))}
    strings_of = {"i_category": ["Books", "Children", "Electronics", "Home", "Jewelry", "Men", "Music", "Shoes",
                                 "Sports", "Women"], "s_state": ["TN"], "ca_state": ["GA", "IN", "TX"]}

    def kind(self, column: str) -> str | None:
        return "number" if column in self.numbers else "string" if column in self.strings_of else None

    def bounds(self, column: str) -> tuple[Decimal, Decimal]:
        lo, hi = self.numbers[column]
        return Decimal(lo), Decimal(hi)

    def strings(self, column: str) -> list[str]:
        return self.strings_of[column]


def _literals(sql: str) -> list[str]:
    return [lit.sql() for lit in sqlglot.parse_one(sql, read="spark").find_all(exp.Literal)]


def _shape(sql: str) -> str:
    """The query with every literal blanked: what a redraw must leave as it was."""
    tree = sqlglot.parse_one(sql, read="spark")
    for lit in list(tree.find_all(exp.Literal)):
        lit.replace(exp.Literal.string("?"))
    return tree.sql(dialect="spark")


TIME_QUERY = """SELECT d_year, 'label', CASE WHEN d_moy = 11 THEN 1 ELSE 0 END FROM date_dim, store_sales
WHERE d_date_sk = ss_sold_date_sk AND (d_year = 1999 OR d_year = 1999 + 1)
  AND d_month_seq BETWEEN 1200 AND 1200 + 11
  AND d_date BETWEEN CAST('1999-02-22' AS DATE) AND (CAST('1999-02-22' AS DATE) + INTERVAL 30 DAY)
  AND ss_quantity <> 7
LIMIT 100"""


def test_time_literals_move_together_and_stay_in_the_window() -> None:
    shifts = set()
    for seed in range(60):
        sql = redraw(TIME_QUERY, FakeDomains(), random.Random(seed))
        assert _shape(sql) == _shape(TIME_QUERY)
        year = int(re.search(r"d_year = (\d{4}) OR", sql).group(1))
        assert f"d_year = {year} + 1" in sql and 1998 <= year and year + 1 <= 2002
        seq = int(re.search(r"BETWEEN (\d+) AND", sql).group(1))
        assert seq == 1200 + 12 * (year - 1999) and 1176 <= seq and seq + 11 <= 1235
        assert sql.count(f"CAST('{year}-02-22' AS DATE)") == 2
        assert "'label'" in sql and "d_moy = 11" in sql and "LIMIT 100" in sql and "<> 7" in sql  # not parameters
        shifts.add(year - 1999)
    assert shifts == {-1, 0, 1, 2}  # every shift that keeps 1999..2000 inside 1998..2002 is drawn
    q = "SELECT 1 FROM date_dim WHERE d_year IN (1999, 1999 + 1, 1999 + 2) AND d_moy BETWEEN 2 AND 2 + 9"
    years, months = set(), set()
    for seed in range(60):
        sql = redraw(q, FakeDomains(), random.Random(seed))
        year = int(re.search(r"IN \((\d{4}),", sql).group(1))
        month = int(re.search(r"BETWEEN (\d+) AND", sql).group(1))
        assert f"({year}, {year} + 1, {year} + 2)" in sql and f"BETWEEN {month} AND {month} + 9" in sql
        years.add(year)
        months.add(month)
    assert years == {1998, 1999, 2000} and months == {1, 2, 3}  # the compared values, not only the literals, fit


def test_numbers_shift_within_bounds_and_keep_their_sign() -> None:
    q = ("SELECT 1 FROM item, store, date_dim WHERE i_manufact_id IN (128, 130) AND s_gmt_offset = -5 "
         "AND d_moy BETWEEN 4 AND 10 AND i_current_price BETWEEN 0.99 AND 1.49 AND ss_quantity > 0")
    moved = set()
    for seed in range(60):
        sql = redraw(q, FakeDomains(), random.Random(seed))
        a, b = (int(x) for x in re.search(r"IN \((\d+), (\d+)\)", sql).groups())
        assert b - a == 2 and 1 <= a and b <= 1000
        lo, hi = (int(x) for x in re.search(r"d_moy BETWEEN (\d+) AND (\d+)", sql).groups())
        assert hi - lo == 6 and 1 <= lo and hi <= 12
        offset = int(re.search(r"s_gmt_offset = -(\d+)", sql).group(1))
        assert 5 <= offset <= 10
        p, r = (Decimal(x) for x in re.search(r"price BETWEEN ([\d.]+) AND ([\d.]+)", sql).groups())
        assert r - p == Decimal("0.50") and p % 1 == Decimal("0.99")
        assert "ss_quantity > 0" in sql  # a zero is a sign test
        moved.add((a, lo, offset))
    assert len(moved) > 50


def test_strings_map_to_distinct_values_the_same_way_everywhere() -> None:
    q = ("SELECT 1 FROM item, store WHERE i_category IN ('Sports', 'Books', 'Home') AND s_state = 'TN' "
         "AND i_item_sk IN (SELECT i_item_sk FROM item WHERE i_category = 'Books') AND ca_state IN ('GA', 'IN', 'TX', 'KY')")
    for seed in range(30):
        sql = redraw(q, FakeDomains(), random.Random(seed))
        three = re.search(r"i_category IN \('(\w+)', '(\w+)', '(\w+)'\)", sql).groups()
        assert len(set(three)) == 3 and set(three) <= set(FakeDomains.strings_of["i_category"])
        assert f"i_category = '{three[1]}'" in sql  # 'Books' became the same value in both places
        assert "s_state = 'TN'" in sql  # the only value
        assert "('GA', 'IN', 'TX', 'KY')" in sql  # four literals, three values: left as written


TPCDS_QUERIES = runnable_queries("tpcds")


@pytest.mark.parametrize("name", list(TPCDS_QUERIES))
def test_every_tpcds_query_keeps_its_shape(name: str) -> None:
    sql = TPCDS_QUERIES[name]
    out = redraw(sql, FakeDomains(), random.Random(name))
    assert _shape(out) == _shape(sql), name
    assert len(_literals(out)) == len(_literals(sql)), name


def test_tpcds_instances_need_a_dataset() -> None:
    with pytest.raises(DatasetError, match="--dataset"):
        instances("tpcds", 1, 1)
    with pytest.raises(DatasetError, match="tpch and tpcds"):
        instances("ssb", 1, 1)
