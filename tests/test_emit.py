"""The prune filter's text (rewriter/emit.py): which files it names, how its size tests are written, and which
the forms it takes. Spark's side of it is in tests/test_rewriter_spark.py."""

from __future__ import annotations

import numpy as np
from sqlglot import exp, parse_one

from rewriter.emit import SIZE_SET_SQL, SIZE_SQL, SWITCH_VALUES, file_key, files_filter, folded_sizes, prune_filter
from stats.model import TableStats


def test_the_filter_names_every_skipped_key_and_parses_as_spark_sql() -> None:
    text = files_filter(["file:/t/a.parquet", "file:/t/x' OR '1'='1.parquet"], [7, 2**31 + 5], [1, 2], [9, 10])
    tree = parse_one(f"SELECT * FROM t WHERE {text}", read="spark")
    literals = {lit.this for lit in tree.find_all(exp.Literal) if lit.is_string}
    # The files share a folder: the keys hold the rest of each path, and the folder is tested once.
    assert {"file:/t/", file_key("a.parquet", 7, 1), file_key("x' OR '1'='1.parquet", 2**31 + 5, 2)} <= literals
    assert "startswith(_metadata.file_path, 'file:/t/') AND CONCAT_WS('|', SUBSTRING(_metadata.file_path, 9)," in text
    # No folder in common: whole paths.
    assert file_key("file:/t/a.parquet", 1, 1) in files_filter(["file:/t/a.parquet", "s3://b/a.parquet"], [1, 1], [1, 1])
    assert text.startswith(f"({SIZE_SQL} IN (9, 10) OR NOT ({SIZE_SQL} IN (5, 7) AND ")  # sizes folded to 31 bits
    assert files_filter(["file:/t/a.parquet"], [7], [1]).startswith(f"NOT ({SIZE_SQL} IN (7) AND ")  # nothing kept


def test_kept_sizes_come_first_only_when_they_make_a_short_switch() -> None:
    def kept_first(n: int) -> bool:
        return files_filter(["file:/t/a.parquet"], [1], [1], list(range(10, 10 + n))).startswith(f"({SIZE_SQL} IN (10, ")

    assert kept_first(SWITCH_VALUES) and not kept_first(SWITCH_VALUES + 1)
    assert kept_first(2) and files_filter(["file:/t/a.parquet"], [1], [1], [5, 5 + 2**31]).startswith(f"({SIZE_SQL} IN (5) OR")


def test_skipped_sizes_make_a_switch_only_when_short() -> None:
    """A longer list is a BIGINT's: Spark then looks it up in a hash set instead of inlining a switch of every value
    into the stage's method, which past the JIT's limit ran a TPC-DS scan interpreted, 3.5x its CPU time."""
    def skipping(n: int) -> str:
        return files_filter([f"file:/t/{i}.parquet" for i in range(n)], list(range(100, 100 + n)), [1] * n, [5, 6])

    assert skipping(SWITCH_VALUES).startswith(f"({SIZE_SQL} IN (5, 6) OR NOT ({SIZE_SQL} IN (100, ")
    longer = skipping(SWITCH_VALUES + 1)
    assert longer.startswith(f"({SIZE_SQL} IN (5, 6) OR NOT ({SIZE_SET_SQL} IN (100, ") and longer.count(" IN (") == 3
    lists = [(len(i.expressions), isinstance(i.this, exp.Cast)) for i in parse_one(longer, read="spark").find_all(exp.In)]
    assert sorted(lists) == [(2, True), (SWITCH_VALUES + 1, False), (SWITCH_VALUES + 1, False)]  # kept, skipped, keys


def test_kept_sizes_are_not_tested_first_when_a_skipped_file_shares_one() -> None:
    """Its rows would pass the kept-size test, and Spark would read it: the filter tests skipped sizes only."""
    assert files_filter(["file:/t/a.parquet"], [100 + 2**31], [1], [100, 200]).startswith(f"NOT ({SIZE_SQL} IN (100) AND")
    assert files_filter(["file:/t/a.parquet"], [300], [1], [100, 200]).startswith(f"({SIZE_SQL} IN (100, 200) OR NOT")
    assert folded_sizes(np.array([2**31 - 1, 2**31, 2**40 + 3])).tolist() == [2**31 - 1, 0, 3]


def test_the_filter_of_a_statistics_object_is_the_filter_of_its_files() -> None:
    """prune_filter keeps each table's quoted keys per statistics object (rewriter/emit.py, _Keys): whatever
    the store's order and whichever files are skipped, its text is files_filter's over the same files, and a
    new object (a new listing) gets its own keys."""
    rng = np.random.default_rng(3)
    n = 200
    paths = np.array([f"file:/w/t/part-{i:04d}.parquet" for i in rng.permutation(n)], dtype=object)
    paths[7] = "file:/w/t/o'dd.parquet"
    sizes = rng.integers(1, 2**33, n)
    mtimes = rng.integers(0, 2**50, n)

    def table(p: np.ndarray) -> TableStats:
        return TableStats("db.t", p, sizes, mtimes, np.ones(n, dtype=np.int64), {})

    stats = table(paths)
    for _ in range(5):
        skip = rng.random(n) < rng.random()
        if not skip.any():
            continue
        assert prune_filter(stats, skip) == files_filter(paths[skip], sizes[skip], mtimes[skip], sizes[~skip])
    moved = table(np.array([p.replace("/w/t/", "/w/u/") for p in paths], dtype=object))
    skip = np.arange(n) % 3 == 0
    assert "file:/w/u/" in prune_filter(moved, skip) and "file:/w/t/" in prune_filter(stats, skip)


def test_the_keys_of_a_statistics_object_go_with_it() -> None:
    """A table appended to gets a new statistics object per listing: the old objects' keys must not pile up."""
    import gc

    from rewriter import emit

    n = 10
    stats = TableStats("db.t", np.array([f"file:/w/t/p{i}" for i in range(n)], dtype=object), np.arange(1, n + 1),
                       np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int64), {})
    prune_filter(stats, np.arange(n) < 3)
    assert emit._keys_of(stats) is emit._keys_of(stats) and id(stats) in emit._KEYS.ids()
    gone = id(stats)
    del stats
    gc.collect()
    assert gone not in emit._KEYS.ids()
