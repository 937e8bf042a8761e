"""``python -m bench layout-bound`` on the TPC-H SF 0.01 ``tuned`` dataset: the bytes a table's rows are
wanted are Spark's own count of them (Q06 reads lineitem once, Q04 through a joined filter from orders,
Q21 three times), no decision of the rewriter keeps less than the bound, and the report says so."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from bench.layout_bound import input_cut, kept_today, measure, mixed, wanted
from bench.workloads import instances
from layout.workload import Statement, table_workload
from rewriter.session import SessionSettings
from stats.freshness import Lister
from stats.loader import StatsLoader
from tests.conftest import Stack

pytestmark = pytest.mark.spark

SESSION = SessionSettings(ansi=True, time_zone="UTC")


def test_the_row_bound_is_what_spark_counts_and_no_decision_keeps_less(stack: Stack, tmp_path: Path) -> None:
    ds = stack.dataset("tpch", "tuned")
    db = ds.database
    loader = StatsLoader(stack.stats_store("tpch", "tuned"), Lister(0))
    test = instances("tpch", 2, 1, ["q04", "q06", "q21"])
    tables, total, kept = kept_today(loader, test, db, SESSION, {})
    bound = wanted(loader, [Statement(sql, db, session=SESSION) for _, sql in test], tables, 10**8)  # every row
    li, orders = tables.index(f"{db}.lineitem"), tables.index(f"{db}.orders")
    spark = stack.spark
    rows = spark.sql(f"SELECT count(*) FROM {db}.lineitem").collect()[0][0]
    stats = loader.table_stats(f"{db}.lineitem")
    size = float(stats.sizes.sum())

    def share(where: str) -> float:
        return spark.sql(f"SELECT count(*) FROM {db}.lineitem WHERE {where}").collect()[0][0] / rows

    sql = dict(test)
    q04, q06, q21 = (list(sql).index(n) for n in ("q04#0", "q06#0", "q21#0"))
    # Q06: lineitem's own conjuncts, one scan.
    where = sql["q06#0"].split("WHERE", 1)[1]
    assert total[q06, li] == pytest.approx(size)
    assert bound[q06, li] == pytest.approx(share(where) * size)
    assert 0 < bound[q06, li] < kept[q06, li] <= total[q06, li]  # the rewriter keeps files, not rows
    # Q04: lineitem wanted only where its order passes the orders window (the diP's joined filter) and its
    # own l_commitdate < l_receiptdate.
    window = sql["q04#0"].split("WHERE", 1)[1].split("AND EXISTS", 1)[0]
    joined = share(f"l_commitdate < l_receiptdate AND l_orderkey IN (SELECT o_orderkey FROM {db}.orders WHERE {window})")
    assert bound[q04, li] == pytest.approx(joined * size)
    assert 0 < bound[q04, orders] < total[q04, orders]
    # Q21 reads lineitem three times: three references, each counted whole and by its own wanted rows (the
    # three scans' own conjuncts and joined filters, counted by Spark, summed).
    assert total[q21, li] == pytest.approx(3 * size)
    scans = table_workload([Statement(sql["q21#0"], db, session=SESSION)], f"{db}.lineitem", loader).scans
    assert len(scans) == 3
    parts = [share(" AND ".join([*scan.local, *(j.sql() for j in scan.joined)]) or "TRUE") for scan in scans]
    assert bound[q21, li] == pytest.approx(sum(parts) * size)
    assert sum(p > 0 for p in parts) >= 2  # more than one scan contributes: the sum is tested, not one scan
    # The model of wanted rows never wants more than the rewriter keeps on these statements.
    assert (bound <= kept * (1 + 1e-9)).all()

    everything = mixed(kept, bound, np.ones(len(tables), dtype=bool))
    assert (everything <= kept + 1e-6).all() and (everything < kept).any()
    assert (input_cut(total, everything) >= input_cut(total, kept)).all()
    only_lineitem = mixed(kept, bound, np.arange(len(tables)) == li)
    assert (only_lineitem[:, orders] == kept[:, orders]).all()

    paths = dataclasses.replace(stack.config.paths, stats=stack.config.paths.stats / db)
    report = measure(dataclasses.replace(stack.config, paths=paths), db, 1, 2, 1, 10**8, tmp_path,
                     ["q04", "q06", "q21"]).read_text()
    assert "| Dipper today |" in report and "| every table at its row bound |" in report
    assert "| only lineitem at its row bound |" in report and "| lineitem | 3 |" in report
    assert "taken as reading whole: 0." in report
