"""The statistics store and collector: bounds are correct by construction, range-sets are optimal, refresh
and crash safety hold, odd data never yields a wrong bound."""

from __future__ import annotations

import datetime
import decimal
import itertools
import math
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from dipper.errors import StatsError
from stats.collect import collect
from stats.freshness import Lister, list_files
from stats.loader import StatsLoader
from stats.model import EXACT
from stats.range_set import optimal_range_set, total_width
from stats.scan import fitting_shift
from stats.store import FORMAT_VERSION, StatsStore
from tests.conftest import Stack

EPOCH = datetime.date(1970, 1, 1)


# -- range-sets: optimal against brute force ------------------------------------------------------------------

def brute_force_width(values: list[int], k: int) -> int:
    """Least total width over every way to cut the sorted distinct values into at most k runs."""
    distinct = sorted(set(values))
    n = len(distinct)
    best = distinct[-1] - distinct[0]
    for cuts in range(1, min(k, n) ):
        for positions in itertools.combinations(range(1, n), cuts):
            bounds = [0, *positions, n]
            best = min(best, sum(distinct[b - 1] - distinct[a] for a, b in zip(bounds, bounds[1:])))
    return best


@given(st.lists(st.integers(-1000, 1000), min_size=1, max_size=9), st.integers(1, 5))
@settings(max_examples=300, deadline=None)
def test_range_set_is_optimal_and_covers(values: list[int], k: int) -> None:
    lo, hi = optimal_range_set(np.array(values), k)
    assert len(lo) <= k
    assert all(any(a <= v <= b for a, b in zip(lo, hi)) for v in values)
    assert list(lo) == sorted(lo) and all(b < a for a, b in zip(lo[1:], hi[:-1]))  # sorted and disjoint
    assert total_width(lo, hi) == brute_force_width(values, k)


# -- store ----------------------------------------------------------------------------------------------------

def test_store_refuses_other_format_versions(tmp_path: Path) -> None:
    (tmp_path / "versions" / "v1").mkdir(parents=True)
    (tmp_path / "versions" / "v1" / "manifest.json").write_text(f'{{"format_version": {FORMAT_VERSION + 1}, "tables": {{}}}}')
    (tmp_path / "CURRENT").write_text("v1\n")
    with pytest.raises(StatsError, match=f"format version {FORMAT_VERSION + 1}"):
        StatsStore(tmp_path).snapshot()
    assert StatsStore(tmp_path / "never-written").snapshot().tables == {}


CRASHING_WRITER = textwrap.dedent("""
    import sys, pyarrow as pa
    from pathlib import Path
    from stats.store import StatsStore, TableEntry
    store = StatsStore(Path(sys.argv[1]))
    entry = TableEntry.from_json(store.snapshot().entry("db.t").to_json())
    big = pa.table({"path": [f"file:/x/{i}" for i in range(3_000_000)], "size": list(range(3_000_000))})
    print("writing", flush=True)
    store.commit({"db.t": (entry, big)})
""")


@pytest.mark.parametrize("delay", [0.3, 0.8, 1.5])
def test_killing_a_writer_leaves_the_previous_store_readable(tmp_path: Path, delay: float) -> None:
    """A writer killed ``delay`` seconds into its commit of 3,000,000 rows."""
    from stats.store import TableEntry

    store = StatsStore(tmp_path)
    entry = TableEntry("db.t", "file:/x", "parquet", (), {"a": "int"}, {}, {}, 4, 8, "now", 1, 10)
    store.commit({"db.t": (entry, pa.table({"path": ["file:/x/0"], "size": [10]}))})
    before = store.snapshot()
    proc = subprocess.Popen([sys.executable, "-c", CRASHING_WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    after = StatsStore(tmp_path).snapshot()
    table = after.read("db.t")
    # Either the old version, or (if the writer got that far) the complete new one: never a mix.
    assert table.num_rows in (1, 3_000_000)
    if after.version == before.version:
        assert table.to_pylist() == [{"path": "file:/x/0", "size": 10}]


# -- the collector on real Spark ------------------------------------------------------------------------------

ODD_STRINGS = ["it's", 'say "hi"', "line\nbreak", "tab\there", "ünïcödé ✓", "🙂 emoji", "", "x' OR '1'='1"]


def write_table(folder: Path, files: list[pa.Table]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i, t in enumerate(files):
        pq.write_table(t, folder / f"part-{i:03d}.parquet")


def register(stack: Stack, name: str, folder: Path) -> None:
    if not stack.spark.catalog.databaseExists("stats_test"):
        stack.spark.sql("CREATE DATABASE stats_test")
    stack.spark.sql(f"DROP TABLE IF EXISTS stats_test.{name}")
    stack.spark.sql(f"CREATE TABLE stats_test.{name} USING parquet LOCATION '{folder}'")


ODD_SCHEMA = pa.schema([
    ("i", pa.int64()), ("d38", pa.decimal128(38, 10)), ("d", pa.decimal128(10, 2)), ("f", pa.float64()),
    ("day", pa.date32()), ("ts", pa.timestamp("us", tz="UTC")), ("s", pa.string()),
    ("flag", pa.bool_()), ("tags", pa.list_(pa.string())),
])


def odd_files() -> list[pa.Table]:
    big = decimal.Decimal("9999999999999999999999999999.9999999999")
    rows = [
        # extremes, 38-digit decimals, dates before 1900, a timestamp given with a zone offset
        [dict(i=-2**63, d38=big.copy_negate(), d=decimal.Decimal("-99999999.99"), f=-math.inf, day=datetime.date(1, 1, 1),
              ts=datetime.datetime(1899, 12, 31, 23, 59, 59, tzinfo=datetime.timezone(datetime.timedelta(hours=5))),
              s=ODD_STRINGS[0], flag=True, tags=["a"]),
         dict(i=2**63 - 1, d38=big, d=decimal.Decimal("99999999.99"), f=math.inf, day=datetime.date(9999, 12, 31),
              ts=datetime.datetime(2262, 1, 1, tzinfo=datetime.timezone.utc), s=ODD_STRINGS[1], flag=False, tags=[])],
        # NaN makes the double bounds unknown
        [dict(i=1, d38=decimal.Decimal(0), d=decimal.Decimal("0.01"), f=math.nan, day=datetime.date(1899, 1, 1),
              ts=None, s=s, flag=None, tags=None) for s in ODD_STRINGS[2:]],
        # all NULL
        [dict(i=None, d38=None, d=None, f=None, day=None, ts=None, s=None, flag=None, tags=None)] * 3,
        # empty file
        [],
    ]
    return [pa.Table.from_pylist(r, schema=ODD_SCHEMA) for r in rows]


@pytest.mark.spark
def test_odd_data_never_yields_a_wrong_bound(stack: Stack, tmp_path: Path) -> None:
    folder = tmp_path / "odd"
    files = odd_files()
    write_table(folder, files)
    register(stack, "odd", folder)
    store = StatsStore(tmp_path / "store")
    collect(stack.spark, store, ["stats_test.odd"], range_set_size=3, value_list_max=16)
    entry = store.snapshot().entry("stats_test.odd")
    assert set(entry.skipped_columns) == {"flag", "tags"}  # unsupported types: skipped with a reason
    stats = StatsLoader(store, Lister(0)).table_stats("stats_test.odd")
    assert stats.n_files == 4 and stats.unknown_files == 0  # the empty file is known, with zero rows
    by_name = {Path(p).name: i for i, p in enumerate(stats.paths)}
    assert_sound(stats, {f"part-{i:03d}.parquet": t for i, t in enumerate(files)}, by_name, 3)
    f = stats.columns["f"]
    assert not f.known[by_name["part-001.parquet"]]  # NaN: unknown bounds
    s = stats.columns["s"]
    listed = sorted(s.values.values[s.values.file == by_name["part-001.parquet"]])
    assert listed == sorted(ODD_STRINGS[2:])


def domain(value: object, kind_name: str, scale: int) -> object:
    if value is None:
        return None
    if kind_name == "date":
        return (value - EPOCH).days
    if kind_name == "timestamp":
        delta = value - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if kind_name == "decimal":
        return int(EXACT.scaleb(value, scale))  # exact: 38 digits, not the default context's 28
    return value


def assert_sound(stats, tables: dict[str, pa.Table], by_name: dict[str, int], k: int) -> None:
    """Every non-null value lies within its file's min/max and range-set; counts are exact."""
    for fname, table in tables.items():
        i = by_name[fname]
        assert stats.rows[i] == table.num_rows
        for column, c in stats.columns.items():
            values = table.column(column).to_pylist()
            assert c.null_count[i] == sum(v is None for v in values), (fname, column)
            for v in values:
                if v is None or (isinstance(v, float) and math.isnan(v)):
                    continue
                dv = domain(v, c.kind.name, c.kind.scale)
                if c.known[i]:
                    assert c.lo[i] <= dv <= c.hi[i], (fname, column, v)
                if c.ranges is not None and c.ranges.present[i]:
                    mine = c.ranges.file == i
                    assert np.any((c.ranges.lo[mine] <= dv) & (dv <= c.ranges.hi[mine])), (fname, column, v)
                    assert mine.sum() <= k


row_values = st.fixed_dictionaries({
    "i": st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)),
    "d": st.one_of(st.none(), st.decimals(min_value=-10**6, max_value=10**6, places=2, allow_nan=False)),
    "f": st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
    "day": st.one_of(st.none(), st.dates(datetime.date(1, 1, 1), datetime.date(9999, 12, 31))),
    "s": st.one_of(st.none(), st.text(max_size=8)),
})
GENERATED_SCHEMA = pa.schema([("i", pa.int64()), ("d", pa.decimal128(12, 2)), ("f", pa.float64()),
                              ("day", pa.date32()), ("s", pa.string())])


@pytest.mark.spark
@given(st.lists(st.lists(row_values, max_size=12), min_size=1, max_size=4), st.integers(1, 4))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          phases=[Phase.explicit, Phase.reuse, Phase.generate])
def test_collected_bounds_hold_every_value(stack: Stack, tmp_path: Path, files: list[list[dict]], k: int) -> None:
    name = f"gen_{uuid.uuid4().hex[:8]}"
    folder = tmp_path / name
    tables = [pa.Table.from_pylist(rows, schema=GENERATED_SCHEMA) for rows in files]
    write_table(folder, tables)
    register(stack, name, folder)
    store = StatsStore(tmp_path / f"store-{name}")
    collect(stack.spark, store, [f"stats_test.{name}"], range_set_size=k, value_list_max=4)
    stats = StatsLoader(store, Lister(0)).table_stats(f"stats_test.{name}")
    assert stats.n_files == len(tables)
    by_name = {Path(p).name: i for i, p in enumerate(stats.paths)}
    assert_sound(stats, {f"part-{i:03d}.parquet": t for i, t in enumerate(tables)}, by_name, k)
    # The range-sets come from occupancy bitmaps of 128 buckets (stats/scan.py): exactly the optimal range-set
    # when a file spans fewer than 128 values, else at most one bucket wider than optimal at each interval edge.
    for column, scale in (("i", 0), ("day", 0), ("d", 2)):
        c = stats.columns[column]
        for fname, table in zip(sorted(by_name), tables):
            values = [int(domain(v, c.kind.name, scale)) for v in table.column(column).to_pylist() if v is not None]
            if not values or c.ranges is None:
                continue
            mine = c.ranges.file == by_name[fname]
            lo, hi = optimal_range_set(np.array(values, dtype=object), k)
            got = sum(int(b) - int(a) for a, b in zip(c.ranges.lo[mine], c.ranges.hi[mine]))
            optimal = sum(int(b) - int(a) for a, b in zip(lo, hi))
            bucket = 1 << fitting_shift(min(values), max(values))
            assert optimal <= got <= optimal + 2 * k * (bucket - 1), (column, values, k)
            if bucket == 1:
                assert [int(v) for v in c.ranges.lo[mine]] == [int(v) for v in lo]
    stack.spark.sql(f"DROP TABLE stats_test.{name}")


@pytest.mark.spark
def test_collector_on_tpch(stack: Stack, tmp_path: Path) -> None:
    ds = stack.dataset("tpch", "tuned")
    store = StatsStore(tmp_path / "store")
    collect(stack.spark, store, [f"{ds.database}.{t.name}" for t in ds.tables], range_set_size=4)
    loader = StatsLoader(store, Lister(0))
    for t in ds.tables:
        stats = loader.table_stats(f"{ds.database}.{t.name}")
        assert stats.n_files == t.files and stats.unknown_files == 0
        assert int(stats.rows.sum()) == t.rows
        assert int(stats.sizes.sum()) == t.bytes
    ship = loader.table_stats(f"{ds.database}.lineitem").columns["l_shipdate"]
    first = datetime.date(1992, 1, 1)
    assert ship.lo.min() >= (first - EPOCH).days  # dates arrive as day numbers, not shifted by any zone


@pytest.mark.spark
def test_refresh_after_add_delete_overwrite(stack: Stack, tmp_path: Path) -> None:
    folder = tmp_path / "evolving"
    schema = pa.schema([("x", pa.int64())])
    write_table(folder, [pa.table({"x": [i * 10, i * 10 + 5]}, schema=schema) for i in range(3)])
    register(stack, "evolving", folder)
    store = StatsStore(tmp_path / "store")
    collect(stack.spark, store, ["stats_test.evolving"], range_set_size=3)
    loader = StatsLoader(store, Lister(0))
    assert loader.table_stats("stats_test.evolving").n_files == 3

    (folder / "part-000.parquet").unlink()                                        # delete
    pq.write_table(pa.table({"x": [100, 200, 300]}, schema=schema), folder / "part-001.parquet")  # overwrite
    pq.write_table(pa.table({"x": [7]}, schema=schema), folder / "part-009.parquet")             # add
    stack.spark.sql("REFRESH TABLE stats_test.evolving")
    stale = loader.table_stats("stats_test.evolving")
    assert stale.n_files == 1 and stale.unknown_files == 2  # only part-002 is still described correctly

    collect(stack.spark, store, ["stats_test.evolving"], range_set_size=None, value_list_max=None, refresh=True)
    assert store.snapshot().entry("stats_test.evolving").range_set_size == 3  # a refresh keeps the precision
    fresh = StatsLoader(store, Lister(0)).table_stats("stats_test.evolving")
    assert sorted(Path(p).name for p in fresh.paths) == ["part-001.parquet", "part-002.parquet", "part-009.parquet"]
    assert fresh.unknown_files == 0
    x = fresh.columns["x"]
    bounds = {Path(p).name: (x.lo[i], x.hi[i]) for i, p in enumerate(fresh.paths)}
    assert bounds == {"part-001.parquet": (100, 300), "part-002.parquet": (20, 25), "part-009.parquet": (7, 7)}


@pytest.mark.spark
def test_unknown_table_is_one_clear_error(stack: Stack, tmp_path: Path) -> None:
    """Asked of the catalog, not caught from a failed statement (which, in one run of the whole suite, PySpark's
    own error logging turned into "Logger._log() got an unexpected keyword argument 'errorClass'")."""
    with pytest.raises(StatsError, match="unknown database nope"):
        collect(stack.spark, StatsStore(tmp_path), ["nope.nothing"])
    stack.spark.sql("CREATE DATABASE IF NOT EXISTS stats_test")
    with pytest.raises(StatsError, match=r"unknown table stats_test.nothing \(`SHOW TABLES IN stats_test`"):
        collect(stack.spark, StatsStore(tmp_path), ["stats_test.nothing"])


def test_listing_matches_sparks_spelling(tmp_path: Path) -> None:
    (tmp_path / "a=1").mkdir()
    (tmp_path / "a=1" / "part-0.parquet").write_bytes(b"x")
    (tmp_path / "_SUCCESS").write_bytes(b"")
    (tmp_path / ".part-0.parquet.crc").write_bytes(b"")
    files = list_files(f"file:{tmp_path}")
    assert [f.path for f in files] == [f"file:{tmp_path}/a=1/part-0.parquet"]
    assert files[0].size == 1 and files[0].mtime % 1000 == 0


@pytest.mark.spark
def test_footers_agree_with_the_spark_collector(stack: Stack, tmp_path: Path) -> None:
    """Footer zone maps, taken without Spark, name every file exactly as Spark does (same path, size and
    mtime, so the rewriter's pinned keys match) and never claim a tighter bound than the data allows."""
    from stats.footers import collect_footers

    ds = stack.dataset("tpch", "tuned")
    table = f"{ds.database}.lineitem"
    spark_store, footer_store = StatsStore(tmp_path / "spark"), StatsStore(tmp_path / "footers")
    collect(stack.spark, spark_store, [table])
    location = spark_store.snapshot().entry(table).location
    assert collect_footers(footer_store, table, location) == ds.table("lineitem").files
    by_spark = StatsLoader(spark_store, Lister(0)).table_stats(table)
    by_footer = StatsLoader(footer_store, Lister(0)).table_stats(table)
    assert by_footer.unknown_files == 0
    assert list(by_footer.paths) == list(by_spark.paths)
    assert list(by_footer.sizes) == list(by_spark.sizes) and list(by_footer.mtimes) == list(by_spark.mtimes)
    for column, c in by_footer.columns.items():
        s = by_spark.columns[column]
        both = c.known & s.known
        assert (c.lo[both] <= s.lo[both]).all() and (c.hi[both] >= s.hi[both]).all(), column
        assert (c.null_count == s.null_count).all(), column
    assert by_footer.columns["l_shipdate"].known.all()
