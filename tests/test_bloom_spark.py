"""Bloom filters (stats/bloom.py) on real Spark: what the collector's SQL builds is bit for bit the driver's
reference filter of the file's values, for every covered kind; equality, IN and joins that bring few keys
skip files min/max and range-sets cannot, and return Spark's rows; and the filters follow the table through
refresh, and go when asked."""

from __future__ import annotations

import datetime
import decimal
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.bloom_bench import without_indexes
from dipper.errors import StatsError
from rewriter.rewrite import RewriteContext, rewrite
from stats import bloom
from stats.collect import collect
from stats.freshness import Lister
from stats.loader import StatsLoader
from stats.model import TableStats
from stats.store import StatsStore
from tests.conftest import Stack, spark_rows
from tests.test_stats import domain

pytestmark = pytest.mark.spark

DB = "bloom_test"
FILES = 8
KEYS = 4000  # key k lives in file k % FILES: every file spans the whole key range
UTC = datetime.timezone.utc
WORDS = ["", "a", "Ä", "日本", "emoji 🙂", "x" * 40, "tab\t", "NULL"]


def _fact(f: int) -> pa.Table:
    rng = random.Random(f)
    keys = [k for k in range(f, KEYS, FILES) if rng.random() < 0.7]
    maybe = lambda v: None if rng.random() < 0.05 else v  # noqa: E731
    return pa.table({
        "k": pa.array(keys, pa.int64()),
        "a": pa.array([maybe(k * 7919 % 100_003 - 50_000) for k in keys], pa.int32()),
        "d": pa.array([maybe(datetime.date(1899, 1, 1) + datetime.timedelta(days=k * 13 % 80_000)) for k in keys],
                      pa.date32()),
        "t": pa.array([maybe(datetime.datetime(1969, 12, 31, 23, tzinfo=UTC) + datetime.timedelta(seconds=k * 977))
                       for k in keys], pa.timestamp("us", tz="UTC")),
        "m": pa.array([maybe(decimal.Decimal(k * 31 - 60_000).scaleb(-2)) for k in keys], pa.decimal128(10, 2)),
        "w": pa.array([maybe(decimal.Decimal(k * 10**12 + 7).scaleb(-3)) for k in keys], pa.decimal128(17, 3)),
        "s": pa.array([maybe(f"{rng.choice(WORDS)}-{k}") for k in keys], pa.string()),
        "v": pa.array([k % 17 for k in keys], pa.int64()),
    })


def _dim() -> pa.Table:
    keys = list(range(KEYS))
    return pa.table({"k": pa.array(keys, pa.int64()), "g": pa.array([k % 500 for k in keys], pa.int64())})


COLUMNS = ["k", "a", "d", "t", "m", "w", "s"]


@pytest.fixture(scope="module")
def tables(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, StatsStore]:
    root = tmp_path_factory.mktemp("bloom")
    for name, files in (("fact", [_fact(f) for f in range(FILES)]), ("dim", [_dim()])):
        (root / name).mkdir()
        for i, t in enumerate(files):
            pq.write_table(t, root / name / f"part-{i:02d}.parquet")
    spark = stack.spark
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DB}")
    for name in ("fact", "dim"):
        spark.sql(f"DROP TABLE IF EXISTS {DB}.{name}")
        spark.sql(f"CREATE TABLE {DB}.{name} USING parquet LOCATION '{root / name}'")
    store = StatsStore(root / "store")
    collect(spark, store, [f"{DB}.fact", f"{DB}.dim"], indexes={"bloom": COLUMNS})
    return root, store


def test_spark_and_the_driver_hash_alike(stack: Stack) -> None:
    rng = random.Random(5)
    ints = [0, 1, -1, 2**63 - 1, -2**63, 2**31, -2**31 - 1] + [rng.randint(-2**63, 2**63 - 1) for _ in range(300)]
    rows = stack.spark.sql("SELECT v, xxhash64(v) FROM VALUES " + ", ".join(f"(CAST({v} AS bigint))" for v in ints)
                           + " AS t(v)").collect()
    got = bloom.hashes(np.array([r[0] for r in rows], dtype=object), bloom.Kind("int"))
    assert got is not None and [int(h) for h in got.astype(np.int64)] == [r[1] for r in rows]
    texts = WORDS + ["".join(chr(rng.choice([rng.randint(32, 126), rng.randint(0x80, 0x7FF), rng.randint(0x800, 0xD7FF),
                                             rng.randint(0x10000, 0x10FFFF)])) for _ in range(rng.randint(0, 30)))
                     for _ in range(200)]
    frame = stack.spark.createDataFrame([(t,) for t in texts], "s string")
    rows = frame.selectExpr("s", "xxhash64(s)").collect()
    got = bloom.hashes(np.array([r[0] for r in rows], dtype=object), bloom.Kind("string"))
    assert got is not None and [int(h) for h in got.astype(np.int64)] == [r[1] for r in rows]


def test_collected_filters_are_the_reference_filters_of_the_files_values(tables: tuple[Path, StatsStore]) -> None:
    root, store = tables
    snap = store.snapshot()
    entry = snap.entry(f"{DB}.fact")
    assert entry is not None and entry.indexes == {"bloom": tuple(sorted(COLUMNS))}
    data = snap.read(f"{DB}.fact")
    by_path = {p.rpartition("/")[2]: i for i, p in enumerate(data.column("path").to_pylist())}
    checked = 0
    for f in range(FILES):
        table = pq.read_table(root / "fact" / f"part-{f:02d}.parquet")
        for column in COLUMNS:
            kind = entry.kinds[column]
            values = [domain(v, kind.name, kind.scale) for v in table.column(column).to_pylist() if v is not None]
            want = bloom.reference_filter(np.array(values, dtype=object), kind)
            got = data.column(f"bloom:{column}")[by_path[f"part-{f:02d}.parquet"]].as_py()
            assert got == want, (f, column)
            checked += 1
    assert checked == FILES * len(COLUMNS)


def _context(store: StatsStore, filters: bool = True) -> RewriteContext:
    source = StatsLoader(store, Lister(0))
    return RewriteContext(source if filters else without_indexes(source), database=DB)


def _fact_skipped(result) -> int:
    return sum(t.files_skipped for t in result.decision.tables if t.table == f"{DB}.fact")


def _rows(stack: Stack, sql: str) -> list:
    stack.spark.sql(f"USE {DB}")
    try:
        return spark_rows(stack, sql)
    finally:
        stack.spark.sql("USE default")


def _lookups() -> dict[str, str]:
    """Six rounds of five statements on random keys: equality, IN, a string, a join, a semi join (by name)."""
    rng = random.Random(11)
    cases = {}
    for r in range(6):
        k = rng.randrange(KEYS)
        statements = [f"SELECT k, v, s FROM fact WHERE k = {k}",
                      f"SELECT count(*), sum(v) FROM fact WHERE k IN ({k}, {k + 8}, {k + 16}, {KEYS + 5})",
                      f"SELECT k, m FROM fact WHERE s = '{rng.choice(WORDS)}-{k}'",
                      f"SELECT f.k, f.v FROM fact f JOIN dim d ON f.k = d.k WHERE d.g = {k % 500}",
                      f"SELECT count(*) FROM fact f WHERE f.k IN (SELECT k FROM dim WHERE g = {k % 500} AND k < {k})"]
        cases |= {f"{r}-{kind}": sql for kind, sql in zip(("equality", "in", "string", "join", "semi-join"), statements)}
    return cases


LOOKUPS = _lookups()


@pytest.mark.differential
@pytest.mark.parametrize("name", LOOKUPS)
def test_equality_in_and_joins_skip_files_and_return_sparks_rows(stack: Stack, tables: tuple[Path, StatsStore],
                                                                 name: str) -> None:
    _, store = tables
    sql = LOOKUPS[name]
    with_filters, without = rewrite(sql, _context(store)), rewrite(sql, _context(store, filters=False))
    assert with_filters.decision.error is None, with_filters.decision.error
    assert _rows(stack, with_filters.sql) == _rows(stack, sql), sql
    assert _fact_skipped(with_filters) >= _fact_skipped(without), sql


def test_the_filters_skip_half_the_files_more_in_most_of_those_statements(tables: tuple[Path, StatsStore]) -> None:
    """Every fact file spans every key: min/max and range-sets skip a file only where it has a wide gap. Measured
    when written: 30 of 30 (a key lives in one file of 8; a join's 8 keys in 2); min/max and range-sets skipped 1
    file in all."""
    _, store = tables
    on, off = _context(store), _context(store, filters=False)
    gained = sum(_fact_skipped(rewrite(sql, on)) >= _fact_skipped(rewrite(sql, off)) + FILES // 2
                 for sql in LOOKUPS.values())
    assert gained >= len(LOOKUPS) * 3 // 4, (gained, len(LOOKUPS))


@pytest.fixture(scope="module")
def sampled(tables: tuple[Path, StatsStore]) -> tuple[TableStats, list[int], dict[str, tuple[dict, list]]]:
    """The fact's statistics, each file's place in them, and per column the files holding each value and 60
    values drawn from those (one generator over the columns in order)."""
    root, store = tables
    stats = StatsLoader(store, Lister(0)).table_stats(f"{DB}.fact", fresh_listing=True)
    assert stats is not None
    order = [int(p.rpartition("-")[2].partition(".")[0]) for p in stats.paths]
    contents = {f: pq.read_table(root / "fact" / f"part-{f:02d}.parquet") for f in range(FILES)}
    rng = random.Random(3)
    by_column = {}
    for column in COLUMNS:
        col = stats.columns[column]
        holding: dict[object, set[int]] = {}
        for f, table in contents.items():
            for v in table.column(column).to_pylist():
                if v is not None:
                    holding.setdefault(domain(v, col.kind.name, col.kind.scale), set()).add(f)
        by_column[column] = holding, rng.sample(sorted(holding, key=repr), 60)
    return stats, order, by_column


@pytest.mark.parametrize("column", COLUMNS)
def test_no_file_holding_a_value_is_ruled_out(sampled: tuple[TableStats, list[int], dict[str, tuple[dict, list]]],
                                              column: str) -> None:
    """Against the files' contents: for values present and absent, of every kind, a file that holds one is kept."""
    stats, order, by_column = sampled
    filters = stats.columns[column].indexes["bloom"]
    holding, present = by_column[column]
    for v in present:
        kept = filters.might_contain(np.array([v], dtype=object))
        assert all(kept[order.index(f)] for f in holding[v]), (column, v)
    ruled_out = sum(int((~filters.might_contain(np.array([v], dtype=object))).sum()) for v in present)
    assert ruled_out > 0, column  # a value lives in one file: the others go


def test_filters_follow_refresh_and_go_when_asked(stack: Stack, tables: tuple[Path, StatsStore], tmp_path: Path) -> None:
    folder = tmp_path / "t"
    folder.mkdir()
    for f in range(3):
        pq.write_table(_fact(f), folder / f"part-{f:02d}.parquet")
    spark = stack.spark
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DB}")
    spark.sql(f"DROP TABLE IF EXISTS {DB}.moving")
    spark.sql(f"CREATE TABLE {DB}.moving USING parquet LOCATION '{folder}'")
    store = StatsStore(tmp_path / "store")
    name = f"{DB}.moving"
    with pytest.raises(StatsError, match="no table collected has a column nope"):
        collect(spark, store, [name], indexes={"bloom": ["nope"]})
    collect(spark, store, [name], indexes={"bloom": ["k", "v"]})
    first = store.snapshot().read(name).column("bloom:k").to_pylist()
    pq.write_table(_fact(3), folder / "part-03.parquet")
    collect(spark, store, [name], refresh=True)  # no kind named: the table keeps its filters
    snap = store.snapshot()
    assert snap.entry(name).indexes == {"bloom": ("k", "v")}
    after = snap.read(name).column("bloom:k").to_pylist()
    assert after[:3] == first and after[3] is not None  # unchanged files kept, the new one described
    # Asked for columns of another table only, a table keeps its own filters.
    collect(spark, store, [name, f"{DB}.dim"], indexes={"bloom": ["g"]})
    snap = store.snapshot()
    assert snap.entry(name).indexes == {"bloom": ("k", "v")} and snap.entry(f"{DB}.dim").indexes == {"bloom": ("g",)}
    collect(spark, store, [name, f"{DB}.dim"], indexes={"bloom": []})
    snap = store.snapshot()
    assert snap.entry(name).indexes == {} and "bloom:k" not in snap.read(name).column_names
    assert snap.entry(f"{DB}.dim").indexes == {}
    stats = StatsLoader(store, Lister(0)).table_stats(name, fresh_listing=True)
    assert stats is not None and all(not c.indexes for c in stats.columns.values())
