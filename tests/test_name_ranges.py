"""Name ranges over block files (rewriter/name_ranges.py) and their text in the prune filter (rewriter/emit.py).
The property: over any listing, a file the ranges' test (folder, mtime, name between a run's ends) passes is
exactly a file the runs cover, and a covered file is a skipped block file the record describes. Spark's side
(the text skips exactly these files, and reads a block file rewritten since) is in
tests/test_layout_apply_spark.py."""

from __future__ import annotations

import numpy as np
import pytest
from sqlglot import exp, parse_one

from rewriter.emit import SIZE_SQL, prune_filter
from rewriter.name_ranges import MAX_RUNS, MIN_RUN, NameRanges, name_ranges
from stats.blocks import BlockLayout
from stats.model import TableStats

FOLDER = "file:/w/t.layout-1/"


def _table(paths: list[str], sizes: list[int] | None = None, mtimes: list[int] | None = None,
           unknown: int = 0) -> TableStats:
    n = len(paths)
    return TableStats("db.t", np.array(paths, dtype=object),
                      np.array(sizes or [1000 + i for i in range(n)], dtype=np.int64),
                      np.array(mtimes or [5_000 + i for i in range(n)], dtype=np.int64),
                      np.ones(n, dtype=np.int64), {}, unknown_files=unknown, location="file:/w/t.layout-1")


def _layout(stats: TableStats, recorded: np.ndarray) -> BlockLayout:
    files = {str(p): (int(s), int(m), ((0, True),))
             for p, s, m, r in zip(stats.paths, stats.sizes, stats.mtimes, recorded) if r}
    return BlockLayout("db.t", "file:/w/t.layout-1", True, "UTC", (), {}, files)


def _passes(ranges: NameRanges, path: str, mtime: int) -> bool:
    """The ranges' test as Spark evaluates it on a file (its name is the part after the last '/')."""
    name = path.rpartition("/")[2]
    return path.startswith(ranges.folder) and ranges.oldest <= mtime <= ranges.newest and \
        any(first <= name <= last for first, last in ranges.runs)


def _blocks(n: int) -> list[str]:
    return [f"{FOLDER}block-{i:05d}-000.parquet" for i in range(n)]


def test_runs_of_skipped_block_files_become_ranges_and_stop_at_kept_ones() -> None:
    stats = _table(_blocks(10))
    skip = np.array([1, 1, 1, 0, 1, 0, 1, 1, 1, 0], dtype=bool)
    r = name_ranges(stats, skip, _layout(stats, np.ones(10, dtype=bool)))
    assert r is not None and r.folder == FOLDER
    assert r.runs == (("block-00000-000.parquet", "block-00002-000.parquet"),
                      ("block-00006-000.parquet", "block-00008-000.parquet"))
    assert r.covered.tolist() == [1, 1, 1, 0, 0, 0, 1, 1, 1, 0]  # block 4 alone: a key
    assert (r.oldest, r.newest) == (5_000, 5_008)


def test_only_the_longest_runs_become_ranges() -> None:
    """Every range is another test on every row Spark reads: past MAX_RUNS, the longest runs are ranges and the
    other files keys."""
    n = 4 * (MAX_RUNS + 4) + 40
    stats = _table(_blocks(n))
    skip = np.zeros(n, dtype=bool)
    for start in range(0, 4 * (MAX_RUNS + 4), 4):
        skip[start:start + MIN_RUN] = True  # MAX_RUNS + 4 runs of MIN_RUN files
    skip[-40:-1] = True  # and one of 39
    r = name_ranges(stats, skip, _layout(stats, np.ones(n, dtype=bool)))
    assert r is not None and len(r.runs) == MAX_RUNS
    assert r.runs[-1] == (f"block-{n - 40:05d}-000.parquet", f"block-{n - 2:05d}-000.parquet")
    assert list(r.runs) == sorted(r.runs) and r.covered.sum() == 39 + MIN_RUN * (MAX_RUNS - 1)
    assert (r.covered <= skip).all()


def test_ranges_naming_less_than_half_of_the_skipped_files_are_not_used() -> None:
    stats = _table(_blocks(10))
    skip = np.array([1, 1, 1, 0, 1, 0, 1, 0, 1, 1], dtype=bool)  # one run of three; four files in shorter runs
    assert name_ranges(stats, skip, _layout(stats, np.ones(10, dtype=bool))) is None
    skip[8] = False  # one run of three, three files alone
    r = name_ranges(stats, skip, _layout(stats, np.ones(10, dtype=bool)))
    assert r is not None and r.covered.sum() == 3


@pytest.mark.parametrize("why, paths, recorded, unknown", [
    ("a file of the listing without statistics (its name is not known)", _blocks(4), [1, 1, 1, 1], 1),
    ("no file recorded as a block file", _blocks(4), [0, 0, 0, 0], 0),
    ("an escaped name: Spark orders file_name decoded", _blocks(3) + [f"{FOLDER}block-00001-0%20.parquet"], [1, 1, 1, 0], 0),
])
def test_no_ranges(why: str, paths: list[str], recorded: list[int], unknown: int) -> None:
    stats = _table(paths, unknown=unknown)
    assert name_ranges(stats, np.ones(len(paths), dtype=bool), _layout(stats, np.array(recorded, dtype=bool))) is None, why


def test_a_file_of_another_layout_or_table_location_is_never_described() -> None:
    stats = _table(_blocks(4))
    moved = BlockLayout("db.t", "file:/w/t.layout-0", True, "UTC", (), {}, _layout(stats, np.ones(4, dtype=bool)).files)
    assert name_ranges(stats, np.ones(4, dtype=bool), moved) is None


def test_a_run_stops_at_a_file_that_is_not_a_recorded_block_file() -> None:
    """An unrecorded or re-collected block file, a foreign name between block names, and a file in a subfolder
    with a block file's name each break the run they would fall into."""
    paths = _blocks(20) + [f"{FOLDER}block-00004-000.parquet.bak", f"{FOLDER}sub/block-00008-000.parquet"]
    stats = _table(paths)
    recorded = np.ones(len(paths), dtype=bool)
    recorded[[1, 20, 21]] = False  # block 1 is not in the record, nor the two foreign files
    layout = _layout(stats, recorded)
    changed = dict(layout.files)
    changed[paths[6]] = (1, 2, ((0, True),))  # block 6 was rewritten since the record (another identity)
    layout = BlockLayout(layout.table, layout.location, True, "UTC", (), {}, changed)
    skip = np.ones(len(paths), dtype=bool)
    r = name_ranges(stats, skip, layout)
    assert r is not None
    for k, path in enumerate(paths):
        assert _passes(r, path, int(stats.mtimes[k])) == bool(r.covered[k]), path
    assert not r.covered[[1, 6, 8, 20, 21]].any()
    assert r.runs == (("block-00002-000.parquet", "block-00004-000.parquet"),
                      ("block-00009-000.parquet", "block-00019-000.parquet"))


def test_random_listings_the_ranges_pass_exactly_the_covered_files() -> None:
    """Over random listings (block files with several files per block, part files, files elsewhere, records
    missing or stale) and random skips: what the ranges' test passes is what they cover, every covered file is
    a skipped block file the record describes, and a file written later into a range (a later mtime) fails."""
    rng = np.random.default_rng(11)
    tried = 0
    for trial in range(300):
        paths = []
        for b in range(int(rng.integers(1, 40))):
            paths += [f"{FOLDER}block-{b:05d}-{n:03d}.parquet" for n in range(int(rng.integers(1, 3)))]
        paths += [f"{FOLDER}part-{i:05d}.parquet" for i in range(int(rng.integers(0, 3)))]
        paths += [f"file:/w/other/block-{i:05d}-000.parquet" for i in range(int(rng.integers(0, 2)))]
        order = rng.permutation(len(paths))
        paths = [paths[i] for i in order]  # the store's order is not the name order
        stats = _table(paths, mtimes=[int(m) for m in rng.integers(1, 10**6, len(paths))])
        recorded = rng.random(len(paths)) < 0.9
        recorded &= np.array(["/block-" in p and p.startswith(FOLDER) for p in paths])
        skip = rng.random(len(paths)) < rng.random()
        r = name_ranges(stats, skip, _layout(stats, recorded))
        if r is None:
            continue
        tried += 1
        assert all(last >= first for first, last in r.runs)
        for k, path in enumerate(paths):
            assert _passes(r, path, int(stats.mtimes[k])) == bool(r.covered[k]), (trial, path)
            if r.covered[k]:
                assert skip[k] and recorded[k]
        assert (r.oldest, r.newest) == (int(stats.mtimes[r.covered].min()), int(stats.mtimes[r.covered].max()))
        assert all(int(r.covered[[paths.index(FOLDER + f), paths.index(FOLDER + s)]].sum()) == 2 for f, s in r.runs)
        assert sum(1 for p in paths if r.covered[paths.index(p)]) >= MIN_RUN * len(r.runs)
    assert tried > 80


def test_the_filter_names_ranged_files_by_name_and_the_rest_by_key() -> None:
    stats = _table(_blocks(6) + [f"{FOLDER}part-00000.parquet"])
    skip = np.array([1, 1, 1, 0, 0, 1, 1], dtype=bool)
    recorded = np.array([1, 1, 1, 1, 1, 1, 0], dtype=bool)
    r = name_ranges(stats, skip, _layout(stats, recorded))
    assert r is not None and r.runs == (("block-00000-000.parquet", "block-00002-000.parquet"),)
    text = prune_filter(stats, skip, r)
    tree = parse_one(f"SELECT * FROM t WHERE {text}", read="spark")
    literals = {lit.this for lit in tree.find_all(exp.Literal) if lit.is_string}
    assert {"block-00000-000.parquet", "block-00002-000.parquet", FOLDER} <= literals
    assert "_metadata.file_name BETWEEN 'block-00000-000.parquet' AND 'block-00002-000.parquet'" in text
    assert f"UNIX_MICROS(_metadata.file_modification_time) BETWEEN {r.oldest} AND {r.newest}" in text
    # blocks 5 and the part file are keys; blocks 0-2 are not
    assert "block-00005-000.parquet|1005|5005" in literals and "part-00000.parquet|1006|5006" in literals
    assert not any(lit.startswith("block-00001-000.parquet|") for lit in literals)
    # kept sizes (blocks 3 and 4) come first: none is a skipped file's size, ranged or keyed
    assert text.startswith(f"({SIZE_SQL} IN (1003, 1004) OR ")
    same_size = _table(_blocks(6) + [f"{FOLDER}part-00000.parquet"], sizes=[7, 7, 7, 7, 9, 10, 11])
    r = name_ranges(same_size, skip, _layout(same_size, recorded))
    assert not prune_filter(same_size, skip, r).startswith(f"({SIZE_SQL} IN ")  # block 3, kept, has a ranged file's size


def test_only_ranges_when_every_skipped_file_is_in_a_run() -> None:
    stats = _table(_blocks(5))
    skip = np.array([1, 1, 1, 1, 0], dtype=bool)
    r = name_ranges(stats, skip, _layout(stats, np.ones(5, dtype=bool)))
    assert r is not None and r.covered.sum() == 4
    text = prune_filter(stats, skip, r)
    assert "CONCAT_WS" not in text.upper() and text == (
        f"({SIZE_SQL} IN (1004) OR NOT (_metadata.file_name BETWEEN 'block-00000-000.parquet' AND "
        f"'block-00003-000.parquet' AND startswith(_metadata.file_path, '{FOLDER}') AND "
        f"UNIX_MICROS(_metadata.file_modification_time) BETWEEN 5000 AND 5003))")


def test_what_a_listing_owes_to_its_layout_is_rebuilt_for_another_record() -> None:
    """The name order is kept per statistics object (rewriter/per_object.py); a layout record read anew (another
    object, here one that no longer describes block 1) is not judged by the order built for the old one."""
    stats = _table(_blocks(6))
    skip = np.ones(6, dtype=bool)
    old = _layout(stats, np.ones(6, dtype=bool))
    assert name_ranges(stats, skip, old).runs == (("block-00000-000.parquet", "block-00005-000.parquet"),)
    new = _layout(stats, np.array([1, 0, 1, 1, 1, 1], dtype=bool))
    assert name_ranges(stats, skip, new).runs == (("block-00002-000.parquet", "block-00005-000.parquet"),)
    assert name_ranges(stats, skip, old).runs == (("block-00000-000.parquet", "block-00005-000.parquet"),)
