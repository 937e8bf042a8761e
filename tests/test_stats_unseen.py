"""Issue 13, statistics the collector did not see: a listed file Spark's scan did not see is unknown, never
recorded as an empty (and so always skippable) file; a file whose footer proves it holds no row is known and
empty; every stored identity is one observed for that file before its content was read."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import stats.collect as collector
from rewriter.rewrite import RewriteContext, rewrite
from stats.collect import collect
from stats.freshness import Lister, list_files
from stats.loader import StatsLoader
from stats.store import StatsStore
from tests.conftest import Stack
from tests.test_stats import register, write_table

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.string())])


def rows(*keys: int) -> pa.Table:
    return pa.table({"k": list(keys), "v": [f"v{k}" for k in keys]}, schema=SCHEMA)


def by_name(stats) -> dict[str, int]:
    return {Path(p).name: i for i, p in enumerate(stats.paths)}


@pytest.mark.differential
@pytest.mark.parametrize("refresh", [False, True], ids=["collect", "refresh"])
def test_a_file_added_behind_sparks_back_is_never_skipped(stack: Stack, tmp_path: Path, refresh: bool) -> None:
    name = f"behind_{'refresh' if refresh else 'collect'}"
    table = f"stats_test.{name}"
    folder = tmp_path / name
    write_table(folder, [rows(1, 2), rows(3, 4)])
    register(stack, name, folder)
    store = StatsStore(tmp_path / "store")
    if refresh:
        collect(stack.spark, store, [table])
    assert stack.spark.sql(f"SELECT count(*) FROM {table}").collect()[0][0] == 4  # Spark caches the listing
    pq.write_table(rows(99), folder / "part-002.parquet")  # behind Spark's back

    collect(stack.spark, store, [table], range_set_size=None, value_list_max=None, refresh=refresh)
    stats = StatsLoader(store, Lister(0)).table_stats(table)
    new = by_name(stats).get("part-002.parquet")
    # Either described as it is (the collector refreshed Spark's listing) or unknown: never empty.
    assert new is None and stats.unknown_files == 1 or stats.rows[new] == 1 and stats.columns["k"].hi[new] == 99

    stack.spark.sql(f"REFRESH TABLE {table}")  # so that the original query sees the new file too
    stack.spark.sql("USE stats_test")
    try:
        sql = f"SELECT * FROM {name} WHERE k = 99"
        result = rewrite(sql, RewriteContext(StatsLoader(store, Lister(0)), database="stats_test"))
        assert result.decision.error is None, result.decision.error
        want = sorted(tuple(r) for r in stack.spark.sql(sql).collect())
        assert want == [(99, "v99")]
        assert sorted(tuple(r) for r in stack.spark.sql(result.sql).collect()) == want, result.sql
        assert [t.files_skipped for t in result.decision.tables] == [2]  # the two old files still go
    finally:
        stack.spark.sql("USE default")


def test_an_empty_file_is_known_and_a_file_spark_ignores_is_unknown(stack: Stack, tmp_path: Path) -> None:
    """An empty file yields no group in a scan grouped by file, exactly like a file the scan never saw; its
    footer tells them apart. ``*._COPYING_`` is a file Spark's listing ignores (a copy in progress) while
    ours lists it: it holds rows, so it must stay unknown until it is a data file Spark reads."""
    name = "unseen_and_empty"
    table = f"stats_test.{name}"
    folder = tmp_path / name
    write_table(folder, [rows(1, 2), rows()])  # part-001 holds no row
    pq.write_table(rows(5), folder / "part-002.parquet._COPYING_")
    register(stack, name, folder)
    store = StatsStore(tmp_path / "store")

    collect(stack.spark, store, [table])
    stats = StatsLoader(store, Lister(0)).table_stats(table)
    assert sorted(by_name(stats)) == ["part-000.parquet", "part-001.parquet"]
    assert stats.unknown_files == 1 and not stats.covered  # the copy in progress: read, and no diPs
    empty = by_name(stats)["part-001.parquet"]
    assert stats.rows[empty] == 0 and stats.columns["k"].null_count[empty] == 0
    result = rewrite(f"SELECT * FROM {table} WHERE k = 1", RewriteContext(StatsLoader(store, Lister(0))))
    assert [t.files_skipped for t in result.decision.tables] == [1], result.decision  # the empty file goes

    # A refresh keeps the empty file (its identity is unchanged) and still does not describe the copy.
    collect(stack.spark, store, [table], range_set_size=None, value_list_max=None, refresh=True)
    stats = StatsLoader(store, Lister(0)).table_stats(table)
    assert sorted(by_name(stats)) == ["part-000.parquet", "part-001.parquet"] and stats.unknown_files == 1

    # The copy completes: the next refresh sees it, and the table is covered again.
    (folder / "part-002.parquet._COPYING_").rename(folder / "part-002.parquet")
    collect(stack.spark, store, [table], range_set_size=None, value_list_max=None, refresh=True)
    stats = StatsLoader(store, Lister(0)).table_stats(table)
    assert sorted(by_name(stats)) == ["part-000.parquet", "part-001.parquet", "part-002.parquet"]
    assert stats.covered and stats.rows[by_name(stats)["part-002.parquet"]] == 1


def test_identities_are_the_ones_the_scan_observed(stack: Stack, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Files added or rewritten between the collector's listing and Spark's scan: each is stored under the
    identity the scan reported for the content it read, never under the listing's (older or missing) one."""
    name = "listing_race"
    table = f"stats_test.{name}"
    folder = tmp_path / name
    write_table(folder, [rows(1, 2), rows(3, 4)])
    register(stack, name, folder)
    stack.spark.sql(f"SELECT count(*) FROM {table}").collect()
    location = f"file:{folder}"
    before = list_files(location)
    pq.write_table(rows(30, 31, 32, 33), folder / "part-001.parquet")  # rewritten: another size
    pq.write_table(rows(50), folder / "part-002.parquet")              # added
    monkeypatch.setattr(collector, "list_files", lambda _: before)  # the listing taken before both

    store = StatsStore(tmp_path / "store")
    collect(stack.spark, store, [table])
    stored = {r["path"]: r for r in store.snapshot().read(table).to_pylist()}
    now = {f.path: f for f in list_files(location)}
    assert sorted(stored) == sorted(now)
    for path, f in now.items():
        assert (stored[path]["size"], stored[path]["mtime"]) == (f.size, f.mtime), path
    bounds = {Path(p).name: (r["rows"], r["c:k"]["min"], r["c:k"]["max"]) for p, r in stored.items()}
    assert bounds == {"part-000.parquet": (2, 1, 2), "part-001.parquet": (4, 30, 33), "part-002.parquet": (1, 50, 50)}


def test_every_file_spark_reads_is_listed(stack: Stack, tmp_path: Path) -> None:
    """Spark reads a name starting with ``_`` when it holds ``=`` (its rule for partition directories,
    applied to every path component): the listing must count such a file, or a table whose scan reads it
    would look fully covered by statistics that never describe it, and originate diPs without its rows."""
    name = "underscore_equals"
    table = f"stats_test.{name}"
    folder = tmp_path / name
    write_table(folder, [rows(1, 2)])
    pq.write_table(rows(7), folder / "_x=1.parquet")
    register(stack, name, folder)
    assert sorted(r[0] for r in stack.spark.sql(f"SELECT k FROM {table}").collect()) == [1, 2, 7]
    assert sorted(Path(f.path).name for f in list_files(f"file:{folder}")) == ["_x=1.parquet", "part-000.parquet"]
    store = StatsStore(tmp_path / "store")
    collect(stack.spark, store, [table])
    stats = StatsLoader(store, Lister(0)).table_stats(table)
    assert stats.n_files == 2 and stats.covered and int(stats.rows.sum()) == 3
