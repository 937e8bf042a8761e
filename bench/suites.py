"""The two benchmark suites: their tables, keys and the row counts their specifications promise.

Keys drive the layouts (``layout/simple.py``); row counts are what the generated data is checked against.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable

from dipper.errors import DatasetError


@dataclasses.dataclass(frozen=True)
class TableSpec:
    name: str
    # Primary key (or the key the paper sorts the table on), in sort order.
    key: tuple[str, ...]
    # The date key a fact table is clustered (tuned) or partitioned (partitioned) on; None for other tables.
    date_key: str | None = None
    # Rows the specification promises at scale factor 1, and whether that number scales with SF.
    rows_at_sf1: int | None = None
    scales: bool = True
    # Relative tolerance where the specification gives an approximate count.
    tolerance: float = 0.0
    # Columns given per-file Bloom filters (stats/bloom.py) when the dataset's statistics are collected.
    bloom: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Suite:
    name: str
    tables: tuple[TableSpec, ...]

    def table(self, name: str) -> TableSpec:
        for t in self.tables:
            if t.name == name:
                return t
        raise DatasetError(f"suite {self.name} has no table {name}")


# TPC-H v3 §4.2.5 (cardinalities); lineitem's count is only approximately 6,000,000 x SF (1 to 7 lines per
# order). Keys: §13.1 of the diP paper:
# lineitem clustered on l_shipdate and ordered by l_orderkey, orders clustered on o_orderdate and ordered by
# o_orderkey, partsupp sorted by ps_partkey, the rest sorted on their primary keys.
TPCH = Suite("tpch", (
    TableSpec("lineitem", ("l_orderkey", "l_linenumber"), date_key="l_shipdate", rows_at_sf1=6_000_000, tolerance=0.01),
    TableSpec("orders", ("o_orderkey",), date_key="o_orderdate", rows_at_sf1=1_500_000),
    TableSpec("partsupp", ("ps_partkey", "ps_suppkey"), rows_at_sf1=800_000),
    TableSpec("part", ("p_partkey",), rows_at_sf1=200_000),
    TableSpec("customer", ("c_custkey",), rows_at_sf1=150_000),
    TableSpec("supplier", ("s_suppkey",), rows_at_sf1=10_000),
    TableSpec("nation", ("n_nationkey",), rows_at_sf1=25, scales=False),
    TableSpec("region", ("r_regionkey",), rows_at_sf1=5, scales=False),
))

# TPC-DS v3 Table 3-2 (row counts at SF 1) and its primary keys; date keys: §13.2 of the diP paper (the six
# sales and returns tables) plus inventory, the seventh fact table. dsdgen scales dimension tables
# sub-linearly, so row counts are only checked at SF 1 and for the tables of fixed size. Returns are drawn
# from sales at a random rate, so their counts are approximate (duckdb's dsdgen at SF 1: store_returns
# 287,867 and web_returns 71,654 against the spec's 287,514 and 71,763).
# Bloom filters on the order and ticket numbers: every line of one sale shares its date, so wherever a
# layout clusters dates, a sale's lines sit in few files; yet store and web numbers are drawn apart from
# dates, so every file spans all of them and min/max or range-sets cannot say which (catalog order numbers
# follow dates, and range-sets already do; the filters cost little there). A date-filtered reference's
# order numbers (exact keys, rewriter/exact_keys.py) then rule out the files of another reference of the
# same sales through the filters: TPC-DS q94 and q95's self-joins on web_sales.
TPCDS = Suite("tpcds", (
    TableSpec("store_sales", ("ss_item_sk", "ss_ticket_number"), date_key="ss_sold_date_sk", rows_at_sf1=2_880_404, bloom=("ss_ticket_number",)),
    TableSpec("store_returns", ("sr_item_sk", "sr_ticket_number"), date_key="sr_returned_date_sk", rows_at_sf1=287_514, tolerance=0.01, bloom=("sr_ticket_number",)),
    TableSpec("catalog_sales", ("cs_item_sk", "cs_order_number"), date_key="cs_sold_date_sk", rows_at_sf1=1_441_548, bloom=("cs_order_number",)),
    TableSpec("catalog_returns", ("cr_item_sk", "cr_order_number"), date_key="cr_returned_date_sk", rows_at_sf1=144_067, tolerance=0.01, bloom=("cr_order_number",)),
    TableSpec("web_sales", ("ws_item_sk", "ws_order_number"), date_key="ws_sold_date_sk", rows_at_sf1=719_384, bloom=("ws_order_number",)),
    TableSpec("web_returns", ("wr_item_sk", "wr_order_number"), date_key="wr_returned_date_sk", rows_at_sf1=71_763, tolerance=0.01, bloom=("wr_order_number",)),
    TableSpec("inventory", ("inv_date_sk", "inv_item_sk", "inv_warehouse_sk"), date_key="inv_date_sk", rows_at_sf1=11_745_000),
    TableSpec("call_center", ("cc_call_center_sk",), rows_at_sf1=6),
    TableSpec("catalog_page", ("cp_catalog_page_sk",), rows_at_sf1=11_718),
    TableSpec("customer", ("c_customer_sk",), rows_at_sf1=100_000),
    TableSpec("customer_address", ("ca_address_sk",), rows_at_sf1=50_000),
    TableSpec("customer_demographics", ("cd_demo_sk",), rows_at_sf1=1_920_800),
    TableSpec("date_dim", ("d_date_sk",), rows_at_sf1=73_049, scales=False),
    TableSpec("household_demographics", ("hd_demo_sk",), rows_at_sf1=7_200, scales=False),
    TableSpec("income_band", ("ib_income_band_sk",), rows_at_sf1=20, scales=False),
    TableSpec("item", ("i_item_sk",), rows_at_sf1=18_000),
    TableSpec("promotion", ("p_promo_sk",), rows_at_sf1=300),
    TableSpec("reason", ("r_reason_sk",), rows_at_sf1=35),
    TableSpec("ship_mode", ("sm_ship_mode_sk",), rows_at_sf1=20, scales=False),
    TableSpec("store", ("s_store_sk",), rows_at_sf1=12),
    TableSpec("time_dim", ("t_time_sk",), rows_at_sf1=86_400, scales=False),
    TableSpec("warehouse", ("w_warehouse_sk",), rows_at_sf1=5),
    TableSpec("web_page", ("wp_web_page_sk",), rows_at_sf1=60),
    TableSpec("web_site", ("web_site_sk",), rows_at_sf1=30),
))

SUITES = {s.name: s for s in (TPCH, TPCDS)}


def indexes(name: str, tables: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """The statistic kinds of ``stats/indexes.py`` a suite's ``tables`` are collected with (kind -> columns,
    as ``stats.collect.collect`` takes them; only columns of those tables, which it requires): every place
    that collects a generated dataset asks here."""
    names = set(tables)
    bloom = tuple(c for t in suite(name).tables if t.name in names for c in t.bloom)
    return {"bloom": bloom} if bloom else {}


def suite(name: str) -> Suite:
    try:
        return SUITES[name]
    except KeyError:
        raise DatasetError(f"unknown benchmark {name!r}; choose one of: {', '.join(SUITES)}") from None


def check_scale_factor(sf: float) -> float:
    if not (isinstance(sf, (int, float)) and math.isfinite(sf) and sf > 0):
        raise DatasetError(f"scale factor must be a positive number, not {sf!r}")
    return float(sf)


def expected_rows(spec: TableSpec, suite_name: str, sf: float) -> int | None:
    """Rows the specification promises for a table at ``sf`` (within ``spec.tolerance``); None where it
    promises no number."""
    if spec.rows_at_sf1 is None:
        return None
    if not spec.scales:
        return spec.rows_at_sf1
    if suite_name == "tpch":
        return int(spec.rows_at_sf1 * sf)
    return spec.rows_at_sf1 if sf == 1 else None


def rows_match(spec: TableSpec, suite_name: str, sf: float, rows: int) -> bool | None:
    """Whether ``rows`` is what the specification promises at ``sf``; None where it promises nothing."""
    expected = expected_rows(spec, suite_name, sf)
    if expected is None:
        return None
    return abs(rows - expected) <= spec.tolerance * expected
