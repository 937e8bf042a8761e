"""Query instances with substitution parameters (``bench/workloads.py``): every TPC-H query, every parameter
drawn, deterministic per seed, different across seeds, valid Spark SQL; a missing literal is an error."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlglot

from bench.query_suite import runnable_queries
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
    with pytest.raises(DatasetError, match="tpch only"):
        instances("tpcds", 1, 1)


def test_the_file_reads_back_as_a_workload(tmp_path: Path) -> None:
    items = instances("tpch", 3, 2, ["q03", "q06"])
    write(tmp_path / "w.sql", items)
    statements = read_workload(tmp_path / "w.sql", "tpch")
    assert len(statements) == 4 and all(s.database == "tpch" for s in statements)
