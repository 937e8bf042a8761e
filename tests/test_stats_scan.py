"""The bounded scan behind ``stats collect`` (stats/scan.py): range-sets from occupancy bitmaps, value lists
behind a hash gate, string bounds from footers, and a second look at whatever the first scan could not finish.

Each path is driven on real Spark with files built to take it (no footer statistics, a footer made to lie,
a file replaced between two scans, partition values), and its result is checked against the values the
files really hold. A differential against ``use_footers=False`` checks that footers change the speed of the
job, never what it records."""

from __future__ import annotations

import datetime
import decimal
import random
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stats.scan
from stats.collect import collect, session_runner
from stats.freshness import Lister, list_files
from stats.loader import StatsLoader
from stats.range_set import optimal_range_set, range_set_of_intervals
from stats.scan import BUCKETS, _bitmap_range_set, fitting_shift
from stats.store import COLUMN_PREFIX, StatsStore
from tests.conftest import Stack
from tests.test_stats import assert_sound, register, write_table


# -- the arithmetic, against references --------------------------------------------------------------------

@given(st.integers(-2**63, 2**63 - 1), st.integers(0, 2**64))
def test_fitting_shift_is_the_least_that_fits(lo: int, width: int) -> None:
    hi = min(lo + width, 2**63 - 1)
    shift = fitting_shift(lo, hi)
    assert (hi >> shift) - (lo >> shift) < BUCKETS
    assert shift == 0 or (hi >> (shift - 1)) - (lo >> (shift - 1)) >= BUCKETS


@given(st.lists(st.integers(-10**6, 10**6), min_size=1, max_size=12), st.integers(1, 5))
def test_intervals_of_single_values_are_the_optimal_range_set(values: list[int], k: int) -> None:
    distinct = sorted(set(values))
    lo, hi = range_set_of_intervals(distinct, distinct, k)
    want_lo, want_hi = optimal_range_set(np.array(values), k)
    assert (lo, hi) == (list(want_lo), list(want_hi))


def spark_bitmap(values: list[int], shift: int) -> int:
    """The bitmap the scan's SQL builds: bit ((v >> shift) & 127) for every value (Spark's shiftright is
    arithmetic, as Python's >>)."""
    bits = 0
    for v in values:
        bits |= 1 << ((v >> shift) & (BUCKETS - 1))
    return bits


@given(st.lists(st.integers(-2**63, 2**63 - 1), min_size=1, max_size=40), st.integers(1, 8), st.integers(0, 6))
@settings(max_examples=300)
def test_bitmap_range_sets_cover_every_value(values: list[int], k: int, narrower: int) -> None:
    """Sound for any shift: a fitting one gives a range-set within a bucket of optimal at each edge; one from
    a footer narrower than the file gives None (scan again), never a range-set that misses a value."""
    from stats.model import Kind

    lo, hi = min(values), max(values)
    shift = max(0, fitting_shift(lo, hi) - narrower)
    got = _bitmap_range_set(spark_bitmap(values, shift), shift, Kind("int"), lo, hi, k)
    if (hi >> shift) - (lo >> shift) >= BUCKETS:
        assert got is None
        return
    assert got is not None
    rs_lo, rs_hi = got
    assert len(rs_lo) <= k and rs_lo[0] == lo and rs_hi[-1] == hi
    assert all(any(a <= v <= b for a, b in zip(rs_lo, rs_hi)) for v in values)
    want_lo, want_hi = optimal_range_set(np.array(values, dtype=object), k)
    optimal = sum(b - a for a, b in zip(want_lo, want_hi))
    assert optimal <= sum(b - a for a, b in zip(rs_lo, rs_hi)) <= optimal + 2 * k * ((1 << shift) - 1)


# -- on Spark -----------------------------------------------------------------------------------------------

SCHEMA = pa.schema([("i", pa.int64()), ("d", pa.decimal128(12, 2)), ("day", pa.date32()), ("s", pa.string()),
                    ("low", pa.string())])


def files_of(seed: int, count: int = 3, rows: int = 400) -> list[pa.Table]:
    rng = random.Random(seed)
    out = []
    for f in range(count):
        base = rng.randrange(-10**12, 10**12)
        out.append(pa.Table.from_pylist([{
            # keys in a few clusters far apart: range-sets with real gaps
            "i": None if rng.random() < 0.05 else base + rng.choice((0, 4 * 10**8, 10**9)) + rng.randrange(1000),
            "d": decimal.Decimal(rng.randrange(-10**6, 10**6)) / 100,
            "day": None if rng.random() < 0.1 else 10_000 + 30 * f + rng.randrange(30),
            "s": f"name-{rng.randrange(10**6):06d}",
            "low": rng.choice(["AIR", "MAIL", "SHIP", None]) if f != 1 else rng.choice(["a", "b"]),
        } for _ in range(rows)], schema=SCHEMA))
    return out


def collected(stack: Stack, tmp_path: Path, name: str, **options) -> dict[str, dict]:
    store = StatsStore(tmp_path / f"store-{name}-{uuid.uuid4().hex[:6]}")
    collect(options.pop("run", stack.spark), store, [f"stats_test.{name}"], **options)
    return {Path(r["path"]).name: r for r in store.snapshot().read(f"stats_test.{name}").to_pylist()}


def true_values(table: pa.Table, column: str) -> list:
    return [v for v in table.column(column).to_pylist() if v is not None]


@pytest.mark.spark
def test_footers_change_the_speed_never_the_statistics(stack: Stack, tmp_path: Path) -> None:
    tables = files_of(1)
    folder = tmp_path / "diff"
    write_table(folder, tables)
    register(stack, "scan_diff", folder)
    with_footers = collected(stack, tmp_path, "scan_diff", range_set_size=4, value_list_max=4)
    without = collected(stack, tmp_path, "scan_diff", range_set_size=4, value_list_max=4, use_footers=False)
    assert with_footers == without
    store = StatsStore(tmp_path / "store-diff")
    collect(stack.spark, store, ["stats_test.scan_diff"], range_set_size=4, value_list_max=4)
    stats = StatsLoader(store, Lister(0)).table_stats("stats_test.scan_diff")
    assert_sound(stats, {f"part-{i:03d}.parquet": t for i, t in enumerate(tables)},
                 {Path(p).name: i for i, p in enumerate(stats.paths)}, 4)
    for i, table in enumerate(tables):
        row = with_footers[f"part-{i:03d}.parquet"]
        s = row[COLUMN_PREFIX + "s"]
        assert (s["min"], s["max"]) == (min(true_values(table, "s")), max(true_values(table, "s")))
        assert s["values"] is None  # 400 distinct names: no list of 4
        low = row[COLUMN_PREFIX + "low"]
        assert low["values"] == sorted(set(true_values(table, "low")))  # NULLs are not a value
        assert row[COLUMN_PREFIX + "i"]["rs_lo"][0] == min(true_values(table, "i"))
        assert len(row[COLUMN_PREFIX + "i"]["rs_lo"]) == 3  # the three clusters, not one interval
    stack.spark.sql("DROP TABLE stats_test.scan_diff")


@pytest.mark.spark
def test_files_without_footer_statistics_are_scanned_for_everything(stack: Stack, tmp_path: Path) -> None:
    tables = files_of(2)
    folder = tmp_path / "nostats"
    folder.mkdir()
    for i, t in enumerate(tables):
        pq.write_table(t, folder / f"part-{i:03d}.parquet", write_statistics=i != 1)  # one file without
    register(stack, "scan_nostats", folder)
    rows = collected(stack, tmp_path, "scan_nostats", range_set_size=4, value_list_max=4)
    reference = collected(stack, tmp_path, "scan_nostats", range_set_size=4, value_list_max=4, use_footers=False)
    assert rows == reference
    bare = rows["part-001.parquet"]
    assert bare[COLUMN_PREFIX + "s"]["min"] == min(true_values(tables[1], "s"))
    # Under 128 days per file: one bucket per day, so the range-set is exactly the optimal one.
    days = [(d - datetime.date(1970, 1, 1)).days for d in true_values(tables[1], "day")]
    want_lo, want_hi = optimal_range_set(np.array(days), 4)
    got = bare[COLUMN_PREFIX + "day"]
    assert (got["rs_lo"], got["rs_hi"]) == (list(want_lo), list(want_hi))
    stack.spark.sql("DROP TABLE stats_test.scan_nostats")


@pytest.mark.spark
def test_a_footer_narrower_than_its_file_costs_a_second_look_not_a_wrong_range_set(
        stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A footer whose span is narrower than the file (a buggy writer) makes the bucket numbers wrap; the exact
    min and max of the same scan tell, and the file is scanned again with its real span."""
    tables = files_of(3)
    folder = tmp_path / "liar"
    write_table(folder, tables)
    register(stack, "scan_liar", folder)
    real = stats.scan.footer_row

    def narrowed(*args, **kwargs):
        row = real(*args, **kwargs)
        for column in ("i", "day"):
            entry = row[COLUMN_PREFIX + column]
            entry["max"] = entry["min"] + 1  # claims a span of two values
        return row

    monkeypatch.setattr(stats.scan, "footer_row", narrowed)
    statements: list[str] = []
    run = session_runner(stack.spark)
    rows = collected(stack, tmp_path, "scan_liar", range_set_size=4, value_list_max=4,
                     run=lambda sql: statements.append(sql) or run(sql))
    assert sum("GROUP BY" in s and "shiftright" in s for s in statements) == 2  # the second look happened
    monkeypatch.undo()
    assert rows == collected(stack, tmp_path, "scan_liar", range_set_size=4, value_list_max=4, use_footers=False)
    stack.spark.sql("DROP TABLE stats_test.scan_liar")


@pytest.mark.spark
def test_the_first_scan_holds_fixed_size_buffers_only(stack: Stack, tmp_path: Path) -> None:
    """Bounded memory per file: no statement collects a set of values per group, and with footers proving the
    string bounds the aggregation is Spark's hash aggregate (fixed-width buffers, spills when it must)."""
    tables = files_of(4, count=2)
    folder = tmp_path / "plans"
    write_table(folder, tables)
    register(stack, "scan_plans", folder)
    statements: list[str] = []
    run = session_runner(stack.spark)
    collected(stack, tmp_path, "scan_plans", value_list_max=4, run=lambda sql: statements.append(sql) or run(sql))
    assert not any("collect_set" in s or "collect_list" in s or "array_agg" in s for s in statements)
    first = next(s for s in statements if "shiftright" in s)
    plan = stack.spark.sql(f"EXPLAIN {first}").collect()[0][0]
    assert "HashAggregate" in plan and "SortAggregate" not in plan and "ObjectHashAggregate" not in plan, plan
    stack.spark.sql("DROP TABLE stats_test.scan_plans")


@pytest.mark.spark
def test_a_value_list_holds_exactly_n_values(stack: Stack, tmp_path: Path) -> None:
    """The gate lets through a file with exactly n distinct values (and NULLs); n + 1 values get no list."""
    n = 6
    words = [f"w{i}" for i in range(n + 1)]
    tables = [pa.table({"low": pa.array(words[:n] * 20 + [None] * 5, pa.string())}),
              pa.table({"low": pa.array(words * 20, pa.string())}),
              pa.table({"low": pa.array([None] * 7, pa.string())})]
    folder = tmp_path / "gate"
    write_table(folder, tables)
    register(stack, "scan_gate", folder)
    rows = collected(stack, tmp_path, "scan_gate", value_list_max=n)
    assert rows["part-000.parquet"][COLUMN_PREFIX + "low"]["values"] == sorted(words[:n])
    assert rows["part-001.parquet"][COLUMN_PREFIX + "low"]["values"] is None
    assert rows["part-001.parquet"][COLUMN_PREFIX + "low"]["max"] == max(words)
    assert rows["part-002.parquet"][COLUMN_PREFIX + "low"] == {
        "min": None, "max": None, "nulls": 7, "known": True, "rs_lo": None, "rs_hi": None, "values": []}
    stack.spark.sql("DROP TABLE stats_test.scan_gate")


@pytest.mark.spark
def test_a_file_replaced_between_two_scans_is_left_out(stack: Stack, tmp_path: Path) -> None:
    """The value lists come from a second statement; a file replaced between the two is never described,
    under its new identity, by statistics of the old version."""
    tables = files_of(5)
    folder = tmp_path / "replaced"
    write_table(folder, tables)
    register(stack, "scan_replaced", folder)
    run = session_runner(stack.spark)

    def replacing(sql: str):
        if "stack(" in sql:  # the value-list statement: replace a file just before it runs
            pq.write_table(files_of(6, count=1, rows=50)[0], folder / "part-002.parquet")
        return run(sql)

    rows = collected(stack, tmp_path, "scan_replaced", value_list_max=4, run=replacing)
    # Spark reports the identity of its cached listing (refreshed before the first scan), so the replaced file
    # is either left out or described under its old identity, which no longer matches the file on storage:
    # either way its row is never used, and the others are described as they are.
    now = {Path(f.path).name: (f.size, f.mtime) for f in list_files("file:" + str(folder))}
    assert {"part-000.parquet", "part-001.parquet"} <= set(rows)
    for name, row in rows.items():
        assert ((row["size"], row["mtime"]) == now[name]) == (name != "part-002.parquet")
    stack.spark.sql("DROP TABLE stats_test.scan_replaced")


@pytest.mark.spark
def test_partition_values_are_exact(stack: Stack, tmp_path: Path) -> None:
    folder = tmp_path / "parts"
    for region, year in (("eu", 2024), ("us west", 2025), ("__HIVE_DEFAULT_PARTITION__", 2025)):
        target = folder / f"region={region}" / f"year={year}"
        target.mkdir(parents=True)
        pq.write_table(pa.table({"x": pa.array([1, 5, 9], pa.int64())}), target / "part-000.parquet")
    if not stack.spark.catalog.databaseExists("stats_test"):
        stack.spark.sql("CREATE DATABASE stats_test")
    stack.spark.sql("DROP TABLE IF EXISTS stats_test.scan_parts")
    stack.spark.sql(f"CREATE TABLE stats_test.scan_parts (x BIGINT, region STRING, year INT) USING parquet "
                    f"PARTITIONED BY (region, year) LOCATION '{folder}'")
    stack.spark.sql("MSCK REPAIR TABLE stats_test.scan_parts")
    store = StatsStore(tmp_path / "store-parts")
    collect(stack.spark, store, ["stats_test.scan_parts"], range_set_size=4, value_list_max=4)
    rows = store.snapshot().read("stats_test.scan_parts").to_pylist()
    got = {(r[COLUMN_PREFIX + "region"]["min"], r[COLUMN_PREFIX + "year"]["min"]) for r in rows}
    assert got == {("eu", 2024), ("us west", 2025), (None, 2025)}
    for r in rows:
        region, year = r[COLUMN_PREFIX + "region"], r[COLUMN_PREFIX + "year"]
        assert region["values"] == ([] if region["min"] is None else [region["min"]])
        assert region["nulls"] == (3 if region["min"] is None else 0)
        assert (year["rs_lo"], year["rs_hi"]) == ([year["min"]], [year["min"]])
        assert r[COLUMN_PREFIX + "x"]["rs_lo"] == [1, 5, 9]
    stack.spark.sql("DROP TABLE stats_test.scan_parts")


@pytest.mark.spark
@pytest.mark.parametrize("precision,scale", [(15, 2), (15, 15), (15, 7), (9, 4), (18, 2), (18, 18)])
def test_unscaled_decimals_are_exact(stack: Stack, precision: int, scale: int) -> None:
    """The bucket of a decimal is computed from its unscaled value, through a double up to 15 digits: every
    value, including the largest and those next to a multiple of the scale, converts exactly."""
    from stats.model import Kind
    from stats.scan import _unscaled_sql

    rng = random.Random(precision * 100 + scale)
    top = 10**precision - 1
    units = [rng.randrange(-top, top + 1) for _ in range(3000)] + [top, -top, 0, 1, -1, top - 1, 2**49, -(2**49)]
    units += [u // 10**scale * 10**scale + d for u in units[:1000] for d in (-1, 1)]
    units = [u for u in units if abs(u) <= top]
    frame = stack.spark.createDataFrame([(str(decimal.Decimal(u).scaleb(-scale)), u) for u in units], "x string, u bigint")
    frame.selectExpr(f"cast(x AS decimal({precision},{scale})) AS x", "u").createOrReplaceTempView("unscaled")
    kind = Kind("decimal", scale=scale, precision=precision)
    wrong = stack.spark.sql(f"SELECT x, u FROM unscaled WHERE {_unscaled_sql('x', kind)} != u").collect()
    assert wrong == []


@pytest.mark.spark
def test_value_lists_of_a_table_wider_than_64_columns(stack: Stack, tmp_path: Path) -> None:
    """Which columns of a file to list travels as an array of column positions: positions past 63 (a bit
    mask in a bigint would overflow there) get their lists too."""
    width = 70
    table = pa.table({f"c{j}": pa.array([f"v{j % 3}", f"w{j}", None] * 5, pa.string()) for j in range(width)})
    folder = tmp_path / "wide"
    write_table(folder, [table])
    register(stack, "scan_wide", folder)
    row = collected(stack, tmp_path, "scan_wide", value_list_max=4)["part-000.parquet"]
    for j in range(width):
        assert row[COLUMN_PREFIX + f"c{j}"]["values"] == sorted([f"v{j % 3}", f"w{j}"]), j
    stack.spark.sql("DROP TABLE stats_test.scan_wide")


@pytest.mark.spark
def test_columns_named_like_the_scans_own_aliases(stack: Stack, tmp_path: Path) -> None:
    """The scan's table and file-list aliases carry its reserved prefix: a column named ``t``, ``v`` or ``f``
    (Spark read ``t._metadata`` as a field of such a column and failed the whole job) is collected as any."""
    table = pa.table({"t": pa.array([3, 1, None, 7], pa.int64()), "v": pa.array(["x", "y", "x", None]),
                      "f": pa.array([1.5, 2.5, 0.5, 1.0])})
    folder = tmp_path / "aliases"
    write_table(folder, [table])
    register(stack, "scan_aliases", folder)
    row = collected(stack, tmp_path, "scan_aliases", value_list_max=4)["part-000.parquet"]
    assert (row[COLUMN_PREFIX + "t"]["min"], row[COLUMN_PREFIX + "t"]["max"], row[COLUMN_PREFIX + "t"]["nulls"]) == (1, 7, 1)
    assert row[COLUMN_PREFIX + "v"]["values"] == ["x", "y"]
    assert row[COLUMN_PREFIX + "f"]["max"] == 2.5
    stack.spark.sql("DROP TABLE stats_test.scan_aliases")
