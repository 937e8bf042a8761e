"""Layouts: what each plans for every table (no Spark), and that ``keyed`` writes what it claims (Spark)."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from backend.warehouse import table_location
from layout.simple import Layout, TablePlan, parse_layout
from bench.suites import TPCDS, TPCH
from dipper.errors import DatasetError
from tests.conftest import TEST_FILES, Stack
from tests.test_datasets import column_ranges, overlap_factor


@pytest.mark.parametrize("text, kind", [("tuned", "tuned"), ("keyed", "keyed"), ("partitioned", "partitioned"),
                                        ("random:3", "random")])
def test_layout_names_parse(text: str, kind: str) -> None:
    layout = parse_layout(text)
    assert layout.kind == kind
    assert layout.name == text


@pytest.mark.parametrize("text", ["Keyed", "key", "random", "random:x", ""])
def test_unknown_layouts_are_refused_with_the_choices(text: str) -> None:
    with pytest.raises(DatasetError, match="keyed"):
        parse_layout(text)


@pytest.mark.parametrize("spec", TPCH.tables + TPCDS.tables, ids=lambda s: s.name)
def test_keyed_clusters_and_sorts_every_table_on_its_key(spec) -> None:  # noqa: ANN001 - a TableSpec
    suite = TPCH if spec in TPCH.tables else TPCDS
    assert Layout("keyed").plan(suite.name, spec, list(spec.key)) == TablePlan(cluster_by=spec.key, sort_by=spec.key)


@pytest.mark.parametrize("suite, spec", [(suite, spec) for suite in (TPCH, TPCDS) for spec in suite.tables],
                         ids=[f"{suite.name}.{spec.name}" for suite in (TPCH, TPCDS) for spec in suite.tables])
def test_keyed_differs_from_tuned_only_on_tables_with_a_date_key(suite, spec) -> None:  # noqa: ANN001 - a Suite, a TableSpec
    keyed, tuned = Layout("keyed").plan(suite.name, spec, []), Layout("tuned").plan(suite.name, spec, [])
    assert (keyed != tuned) == (spec.date_key is not None), spec.name


def test_tuned_clusters_lineitem_by_its_ship_date() -> None:
    assert parse_layout("tuned").plan("tpch", TPCH.table("lineitem"), []).cluster_by == ("l_shipdate",)


@pytest.mark.spark
@pytest.mark.parametrize("table, key, date", [("lineitem", "l_orderkey", "l_shipdate"),
                                              ("orders", "o_orderkey", "o_orderdate")], ids=["lineitem", "orders"])
def test_keyed_lineitem_and_orders_files_hold_disjoint_key_ranges(stack: Stack, table: str, key: str, date: str) -> None:
    ds = stack.dataset("tpch", "keyed")
    assert "clustered by l_orderkey, l_linenumber" in ds.table("lineitem").ordering
    folder = table_location(stack.config.paths.warehouse, ds.database, table)
    keys = column_ranges(folder, key)
    assert len(keys) == TEST_FILES
    ordered = sorted(keys)
    assert all(prev[1] <= nxt[0] for prev, nxt in zip(ordered, ordered[1:])), (table, ordered)
    # ... and the date, which tuned clusters on, now spans (nearly) the whole range in every file.
    assert overlap_factor(column_ranges(folder, date)) > 0.9 * TEST_FILES
    for path in folder.glob("*.parquet"):
        values = pq.read_table(path, columns=[key]).column(0).to_pylist()
        assert values == sorted(values)


def test_random_orders_on_one_seeded_column_and_breaks_ties_with_the_key() -> None:
    """A column of few values alone cannot be range-split into more files than it has values (TPC-DS SF 10
    store_sales on ss_quantity made 101 files): the key comes second."""
    spec = TPCDS.table("store_sales")
    columns = ["ss_quantity", "ss_item_sk", "ss_ticket_number", "ss_sold_date_sk"]
    plan = Layout("random", 1).plan("tpcds", spec, columns)
    assert plan == Layout("random", 1).plan("tpcds", spec, list(reversed(columns)))  # seeded, not order-dependent
    first = plan.cluster_by[0]
    assert first in columns and plan.cluster_by == (first, *[k for k in spec.key if k != first])
    assert plan.sort_by == plan.cluster_by
    chosen = {Layout("random", seed).plan("tpcds", spec, columns).cluster_by[0] for seed in range(20)}
    assert len(chosen) > 1
