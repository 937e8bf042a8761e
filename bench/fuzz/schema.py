"""What the random query generator knows of the benchmark tables (``bench/fuzz/generate.py``).

Not the full schemas: the columns worth generating queries over, each with its Spark type, the *join
domain* it belongs to (columns of one domain hold the same kind of value, e.g. every order key or every
date surrogate key, so joining them makes sense and yields rows), a value range and rough distinct count
at SF 0.01 (literals are drawn from it, and row estimates keep random joins small), whether the data holds
NULLs, and whether some layout orders files on it (``clustered``: a predicate on it prunes files in
``tuned`` or ``keyed``, so the generator prefers such columns for local predicates).

Numbers were read from the SF 0.01 data the test stack builds (TPC-H by tpchgen-cli, TPC-DS by duckdb's
dsdgen). TPC-H key ranges and row counts grow linearly with the scale factor (``scaled``); TPC-DS
dimensions grow sub-linearly and are left as they are (literals stay valid, only less selective).
"""

from __future__ import annotations

import dataclasses
import datetime
from decimal import Decimal

Value = int | Decimal | datetime.date

REFERENCE_SF = 0.01


@dataclasses.dataclass(frozen=True)
class ColumnInfo:
    name: str
    kind: str  # "bigint" | "int" | "decimal" | "date" | "string"
    domain: str = ""  # join domain; "" for measures and labels
    lo: Value | None = None  # value range at SF 0.01 (ordered kinds)
    hi: Value | None = None
    ndv: int = 0  # distinct values at SF 0.01, roughly
    values: tuple[str, ...] = ()  # strings: values that occur
    nulls: bool = False  # the data holds NULLs in this column
    clustered: bool = False  # some layout (tuned, keyed) orders files on it
    scaled: bool = False  # TPC-H keys: range grows with the scale factor

    @property
    def ordered(self) -> bool:
        return self.kind != "string"

    @property
    def integral(self) -> bool:
        return self.kind in ("int", "bigint")


@dataclasses.dataclass(frozen=True)
class TableInfo:
    name: str
    rows: int  # at SF 0.01
    key: tuple[str, ...]  # unique: ORDER BY these is a total order (LIMIT inside derived tables)
    columns: tuple[ColumnInfo, ...]
    weight: float = 1.0  # how often the generator picks it

    def column(self, name: str) -> ColumnInfo:
        return next(c for c in self.columns if c.name == name)


@dataclasses.dataclass(frozen=True)
class SuiteInfo:
    name: str
    tables: tuple[TableInfo, ...]

    def table(self, name: str) -> TableInfo:
        return next(t for t in self.tables if t.name == name)


def _key(name: str, domain: str, lo: int, hi: int, ndv: int, *, clustered: bool = False, nulls: bool = False,
         kind: str = "bigint", scaled: bool = False) -> ColumnInfo:
    return ColumnInfo(name, kind, domain, lo, hi, ndv, nulls=nulls, clustered=clustered, scaled=scaled)


def _num(name: str, kind: str, lo: Value, hi: Value, ndv: int = 1000, *, nulls: bool = False) -> ColumnInfo:
    return ColumnInfo(name, kind, "", lo, hi, ndv, nulls=nulls)


def _date(name: str, lo: datetime.date, hi: datetime.date, *, clustered: bool = False) -> ColumnInfo:
    return ColumnInfo(name, "date", "date", lo, hi, (hi - lo).days + 1, clustered=clustered)


def _text(name: str, *values: str, nulls: bool = False) -> ColumnInfo:
    return ColumnInfo(name, "string", "", ndv=len(values), values=values, nulls=nulls)


D = datetime.date
_H_LO, _H_HI = D(1992, 1, 1), D(1998, 12, 31)
_NATIONS = ("ALGERIA", "ARGENTINA", "BRAZIL", "CANADA", "EGYPT", "ETHIOPIA", "FRANCE", "GERMANY", "INDIA",
            "INDONESIA", "IRAN", "IRAQ", "JAPAN", "JORDAN", "KENYA", "MOROCCO", "MOZAMBIQUE", "PERU", "CHINA",
            "ROMANIA", "SAUDI ARABIA", "VIETNAM", "RUSSIA", "UNITED KINGDOM", "UNITED STATES")

TPCH = SuiteInfo("tpch", (
    TableInfo("lineitem", 60175, ("l_orderkey", "l_linenumber"), (
        _key("l_orderkey", "orderkey", 1, 60000, 15000, clustered=True, scaled=True),
        _key("l_partkey", "partkey", 1, 2000, 2000, scaled=True),
        _key("l_suppkey", "suppkey", 1, 100, 100, scaled=True),
        _num("l_linenumber", "int", 1, 7, 7),
        _num("l_quantity", "decimal", Decimal(1), Decimal(50), 50),
        _num("l_extendedprice", "decimal", Decimal(900), Decimal(100000)),
        _num("l_discount", "decimal", Decimal("0.00"), Decimal("0.10"), 11),
        _text("l_returnflag", "A", "N", "R"),
        _text("l_linestatus", "F", "O"),
        _date("l_shipdate", D(1992, 1, 4), D(1998, 11, 29), clustered=True),
        _date("l_commitdate", D(1992, 2, 2), D(1998, 10, 31)),
        _date("l_receiptdate", D(1992, 1, 10), D(1998, 12, 25)),
        _text("l_shipmode", "AIR", "FOB", "MAIL", "RAIL", "REG AIR", "SHIP", "TRUCK"),
    ), weight=2.0),
    TableInfo("orders", 15000, ("o_orderkey",), (
        _key("o_orderkey", "orderkey", 1, 60000, 15000, clustered=True, scaled=True),
        _key("o_custkey", "custkey", 1, 1499, 1000, scaled=True),
        _text("o_orderstatus", "F", "O", "P"),
        _num("o_totalprice", "decimal", Decimal(850), Decimal(500000)),
        _date("o_orderdate", _H_LO, D(1998, 8, 2), clustered=True),
        _text("o_orderpriority", "1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"),
        _num("o_shippriority", "int", 0, 0, 1),
    ), weight=2.0),
    TableInfo("partsupp", 8000, ("ps_partkey", "ps_suppkey"), (
        _key("ps_partkey", "partkey", 1, 2000, 2000, clustered=True, scaled=True),
        _key("ps_suppkey", "suppkey", 1, 100, 100, scaled=True),
        _num("ps_availqty", "int", 1, 9999, 5000),
        _num("ps_supplycost", "decimal", Decimal(1), Decimal(1000)),
    )),
    TableInfo("part", 2000, ("p_partkey",), (
        _key("p_partkey", "partkey", 1, 2000, 2000, clustered=True, scaled=True),
        _text("p_brand", "Brand#12", "Brand#23", "Brand#34", "Brand#45", "Brand#51"),
        _text("p_type", "PROMO BURNISHED COPPER", "STANDARD POLISHED TIN", "ECONOMY ANODIZED STEEL",
              "LARGE BRUSHED BRASS", "MEDIUM PLATED NICKEL"),
        _num("p_size", "int", 1, 50, 50),
        _text("p_container", "SM CASE", "MED BOX", "LG PACK", "JUMBO JAR", "WRAP BAG"),
        _num("p_retailprice", "decimal", Decimal(900), Decimal(2100)),
    )),
    TableInfo("customer", 1500, ("c_custkey",), (
        _key("c_custkey", "custkey", 1, 1500, 1500, clustered=True, scaled=True),
        _key("c_nationkey", "nationkey", 0, 24, 25),
        _num("c_acctbal", "decimal", Decimal(-1000), Decimal(10000)),
        _text("c_mktsegment", "AUTOMOBILE", "BUILDING", "FURNITURE", "HOUSEHOLD", "MACHINERY"),
    )),
    TableInfo("supplier", 100, ("s_suppkey",), (
        _key("s_suppkey", "suppkey", 1, 100, 100, clustered=True, scaled=True),
        _key("s_nationkey", "nationkey", 0, 24, 25),
        _num("s_acctbal", "decimal", Decimal(-1000), Decimal(10000)),
    )),
    TableInfo("nation", 25, ("n_nationkey",), (
        _key("n_nationkey", "nationkey", 0, 24, 25, clustered=True),
        _text("n_name", *_NATIONS),
        _key("n_regionkey", "regionkey", 0, 4, 5),
    )),
    TableInfo("region", 5, ("r_regionkey",), (
        _key("r_regionkey", "regionkey", 0, 4, 5, clustered=True),
        _text("r_name", "AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"),
    )),
))

# TPC-DS facts hold sold dates 1998-01-02 .. 2003-01-02 (surrogate keys 2450815 .. 2452642); date_dim
# spans 1900 .. 2100, so literals are drawn from the facts' years and most of date_dim's files go.
_DS_LO, _DS_HI = 2450815, 2452642
_STATES = ("AZ", "TN", "SD", "IL", "SC", "ID", "NJ", "LA", "KS", "CA", "TX", "GA", "VA", "OH", "MI")

TPCDS = SuiteInfo("tpcds", (
    TableInfo("store_sales", 28810, ("ss_item_sk", "ss_ticket_number"), (
        _key("ss_sold_date_sk", "date_sk", _DS_LO, _DS_HI, 1200, clustered=True, nulls=True),
        _key("ss_sold_time_sk", "time_sk", 28800, 75600, 2300, nulls=True),
        _key("ss_item_sk", "item_sk", 1, 180, 180, clustered=True),
        _key("ss_customer_sk", "customer_sk", 1, 1000, 900, nulls=True),
        _key("ss_cdemo_sk", "cdemo_sk", 1, 19208, 2250, nulls=True),
        _key("ss_hdemo_sk", "hdemo_sk", 1, 7200, 2000, nulls=True),
        _key("ss_addr_sk", "addr_sk", 1, 500, 500, nulls=True),
        _key("ss_promo_sk", "promo_sk", 1, 3, 3, nulls=True),
        _key("ss_ticket_number", "ticket", 1, 2400, 2400),
        _num("ss_quantity", "bigint", 1, 100, 100, nulls=True),
        _num("ss_sales_price", "decimal", Decimal(0), Decimal(200), nulls=True),
        _num("ss_net_profit", "decimal", Decimal(-10000), Decimal(10000), nulls=True),
    ), weight=2.0),
    TableInfo("store_returns", 2810, ("sr_item_sk", "sr_ticket_number"), (
        _key("sr_returned_date_sk", "date_sk", 2450830, 2452819, 1400, clustered=True, nulls=True),
        _key("sr_item_sk", "item_sk", 1, 180, 180, clustered=True),
        _key("sr_customer_sk", "customer_sk", 1, 1000, 900, nulls=True),
        _key("sr_ticket_number", "ticket", 1, 2400, 1700),
        _num("sr_return_quantity", "bigint", 1, 100, 100, nulls=True),
        _num("sr_return_amt", "decimal", Decimal(0), Decimal(10000), nulls=True),
    )),
    TableInfo("catalog_sales", 14313, ("cs_item_sk", "cs_order_number"), (
        _key("cs_sold_date_sk", "date_sk", _DS_LO, 2452225, 1400, clustered=True, nulls=True),
        _key("cs_ship_date_sk", "date_sk", _DS_LO, 2452315, 1500, nulls=True),
        _key("cs_bill_customer_sk", "customer_sk", 1, 1000, 790, nulls=True),
        _key("cs_item_sk", "item_sk", 1, 180, 150, clustered=True),
        _key("cs_promo_sk", "promo_sk", 1, 3, 3, nulls=True),
        _num("cs_quantity", "bigint", 1, 100, 100, nulls=True),
        _num("cs_sales_price", "decimal", Decimal(0), Decimal(300), nulls=True),
    )),
    TableInfo("web_sales", 7212, ("ws_item_sk", "ws_order_number"), (
        _key("ws_sold_date_sk", "date_sk", 2450818, _DS_HI, 500, clustered=True, nulls=True),
        _key("ws_item_sk", "item_sk", 1, 180, 180, clustered=True),
        _key("ws_bill_customer_sk", "customer_sk", 1, 1000, 700, nulls=True),
        _num("ws_quantity", "bigint", 1, 100, 100, nulls=True),
        _num("ws_sales_price", "decimal", Decimal(0), Decimal(300), nulls=True),
    )),
    TableInfo("inventory", 23490, ("inv_date_sk", "inv_item_sk", "inv_warehouse_sk"), (
        _key("inv_date_sk", "date_sk", _DS_LO, 2452635, 261, clustered=True),
        _key("inv_item_sk", "item_sk", 1, 180, 180),
        _num("inv_quantity_on_hand", "int", 0, 1000, 1000, nulls=True),
    )),
    TableInfo("date_dim", 73049, ("d_date_sk",), (
        _key("d_date_sk", "date_sk", _DS_LO - 400, _DS_HI + 400, 73049, clustered=True),
        _date("d_date", D(1997, 1, 1), D(2004, 1, 1)),
        _key("d_year", "year", 1997, 2004, 201),
        _num("d_moy", "bigint", 1, 12, 12),
        _num("d_dom", "bigint", 1, 31, 31),
        _text("d_day_name", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
    ), weight=2.0),
    TableInfo("item", 180, ("i_item_sk",), (
        _key("i_item_sk", "item_sk", 1, 180, 180, clustered=True),
        _text("i_category", "Women", "Home", "Children", "Books", "Music", "Electronics", "Shoes", "Men",
              "Jewelry", "Sports"),
        _text("i_color", "sienna", "turquoise", "yellow", "sandy", "lawn", "firebrick", "khaki", "peru"),
        _num("i_current_price", "decimal", Decimal("0.09"), Decimal("99.99"), nulls=True),
        _num("i_manufact_id", "bigint", 1, 1000, 150, nulls=True),
    )),
    TableInfo("customer", 1000, ("c_customer_sk",), (
        _key("c_customer_sk", "customer_sk", 1, 1000, 1000, clustered=True),
        _key("c_current_addr_sk", "addr_sk", 1, 500, 430),
        _key("c_current_cdemo_sk", "cdemo_sk", 1, 19208, 1000, nulls=True),
        _key("c_current_hdemo_sk", "hdemo_sk", 1, 7200, 1000, nulls=True),
        _key("c_first_sales_date_sk", "date_sk", 2448998, 2452648, 1000, nulls=True),
        _num("c_birth_year", "bigint", 1924, 1992, 69, nulls=True),
        _text("c_preferred_cust_flag", "Y", "N", nulls=True),
    )),
    TableInfo("customer_address", 500, ("ca_address_sk",), (
        _key("ca_address_sk", "addr_sk", 1, 500, 500, clustered=True),
        _text("ca_state", *_STATES, nulls=True),
        _num("ca_gmt_offset", "decimal", Decimal(-10), Decimal(-5), 6, nulls=True),
    )),
    TableInfo("customer_demographics", 19208, ("cd_demo_sk",), (
        _key("cd_demo_sk", "cdemo_sk", 1, 19208, 19208, clustered=True),
        _text("cd_gender", "M", "F"),
        _text("cd_marital_status", "M", "S", "D", "W", "U"),
        _num("cd_dep_count", "bigint", 0, 6, 7),
        _num("cd_purchase_estimate", "bigint", 500, 10000, 20),
    )),
    TableInfo("household_demographics", 7200, ("hd_demo_sk",), (
        _key("hd_demo_sk", "hdemo_sk", 1, 7200, 7200, clustered=True),
        _text("hd_buy_potential", "0-500", "501-1000", "1001-5000", "5001-10000", ">10000", "Unknown"),
        _num("hd_dep_count", "bigint", 0, 9, 10),
        _num("hd_vehicle_count", "int", -1, 4, 6),
    )),
    TableInfo("promotion", 3, ("p_promo_sk",), (
        _key("p_promo_sk", "promo_sk", 1, 3, 3, clustered=True),
        _text("p_channel_email", "Y", "N", nulls=True),
    ), weight=0.5),
    TableInfo("time_dim", 86400, ("t_time_sk",), (
        _key("t_time_sk", "time_sk", 0, 86399, 86400, clustered=True),
        _num("t_hour", "bigint", 0, 23, 24),
        _text("t_am_pm", "AM", "PM"),
    ), weight=0.5),
))

SUITES = {s.name: s for s in (TPCH, TPCDS)}
