"""The Bloom filter statistic (stats/bloom.py) without Spark: the driver's hash is Spark's, folding never
loses a value, loading and subsetting keep each file's filter, and the evaluators rule files out only
where the filter says no value can be there. ``tests/test_bloom_spark.py`` checks the Spark side."""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewriter.dip import DiP, dip_of_values, enumerated, satisfy, union
from rewriter.evaluate import might_match
from rewriter.predicate import Cmp, InSet, Term
from stats import bloom, indexes
from stats.model import ColumnStats, Kind, TableStats

INT = Kind("int")
STRING = Kind("string")


@pytest.mark.parametrize("value, kind, spark", [
    # SELECT xxhash64(CAST(5 AS bigint)), xxhash64(CAST(-1 AS bigint)), xxhash64('abc') on Spark 4.3
    (5, INT, 6251837290343458373), (-1, INT, 3858142552250413010), ("abc", STRING, 1423657621850124518),
])
def test_driver_hash_is_sparks_xxhash64(value: object, kind: Kind, spark: int) -> None:
    got = bloom.hashes(np.array([value], dtype=object), kind)
    assert got is not None and int(got[0].astype(np.int64)) == spark


def test_values_without_a_spark_hash_learn_nothing() -> None:
    assert bloom.hashes(np.array([2**70], dtype=object), INT) is None
    assert bloom.hashes(np.array(["\ud800"], dtype=object), STRING) is None
    stored = bloom.reference_filter(np.array([1, 2, 3]), INT)
    filters = bloom.load(pa.array([stored], type=bloom.arrow_type()), INT)
    assert filters is not None and filters.might_contain(np.array([2**70], dtype=object)).all()


def _filters(files: list[list], kind: Kind) -> bloom.BloomFilters:
    stored = [bloom.reference_filter(np.array(v, dtype=object), kind) if v else None for v in files]
    loaded = bloom.load(pa.array(stored, type=bloom.arrow_type()), kind)
    assert loaded is not None
    return loaded


@given(st.lists(st.lists(st.integers(-2**63, 2**63 - 1), max_size=300), min_size=1, max_size=6))
@settings(max_examples=60, deadline=None)
def test_every_value_of_a_file_is_found_in_its_filter(files: list[list[int]]) -> None:
    if not any(files):
        return
    filters = _filters(files, INT)
    for i, values in enumerate(files):
        for v in values[:40]:
            assert filters.might_contain(np.array([v], dtype=object))[i], (i, v)
    assert not filters.present[[i for i, v in enumerate(files) if not v]].any()


@given(st.lists(st.text(max_size=12), min_size=1, max_size=200))
@settings(max_examples=40, deadline=None)
def test_strings_are_found_and_folding_sizes_by_distinct_values(values: list[str]) -> None:
    filters = _filters([values], STRING)
    assert filters.might_contain(np.array(values, dtype=object)).all()
    bits = 1 << int(filters.log2[0])
    assert bloom.MIN_BITS <= bits <= max(bloom.MIN_BITS, 4 * bloom.BITS_PER_VALUE * len(set(values)))


def test_false_positives_are_rare_and_the_biggest_filter_is_capped() -> None:
    rng = np.random.default_rng(3)
    present = rng.choice(10**9, size=20_000, replace=False)
    filters = _filters([list(present)], INT)
    absent = np.setdiff1d(rng.choice(10**9, size=4000, replace=False), present)
    passed = sum(bool(filters.might_contain(absent[i:i + 1])[0]) for i in range(len(absent)))
    assert passed / len(absent) < 0.03, passed
    assert int(filters.log2[0]) <= bloom.MAX_BITS.bit_length() - 1


def test_subset_keeps_each_files_own_filter() -> None:
    filters = _filters([[1, 2], [], [3, 4], [5]], INT)
    part = filters.subset(np.array([False, True, True, False]))
    assert part.might_contain(np.array([3])).tolist() == [True, True]  # no filter (file 1): might match
    assert part.might_contain(np.array([5])).tolist() == [True, False]
    assert part.might_contain(np.array([1])).tolist() == [True, False]


def test_chosen_columns_pass_over_what_a_kind_cannot_describe() -> None:
    kinds = {"k": INT, "x": Kind("float"), "p": INT, "w": Kind("decimal", scale=2, precision=30)}
    chosen, passed = indexes.chosen({"bloom": ("k", "x", "p", "w", "absent")}, kinds, ("p",))
    assert chosen == {"bloom": ("k",)}
    assert set(passed) == {"x", "p", "w"}


# -- the evaluators ------------------------------------------------------------------------------------------

def _table(files: list[list[int]]) -> TableStats:
    """Files whose min/max all span 0..1000 (so only the filter can tell them apart)."""
    n = len(files)
    filters = _filters(files, INT)
    col = ColumnStats(INT, np.zeros(n, dtype=np.int64), np.full(n, 1000, dtype=np.int64), np.ones(n, dtype=bool),
                      np.zeros(n, dtype=np.int64), indexes={"bloom": filters})
    return TableStats("db.t", np.array([f"f{i}" for i in range(n)], dtype=object), np.full(n, 10, dtype=np.int64),
                      np.zeros(n, dtype=np.int64), np.array([max(1, len(v)) for v in files], dtype=np.int64),
                      {"k": col})


FILES = [[0, 1000, 17], [0, 1000, 500, 501], [0, 1000, 999]]


def test_equality_and_in_rule_out_files_without_the_value() -> None:
    stats = _table(FILES)
    assert might_match(Cmp(Term("k"), "=", 17, 17), stats).tolist() == [True, False, False]
    assert might_match(InSet(Term("k"), (500, 999)), stats).tolist() == [False, True, True]
    assert might_match(Cmp(Term("k"), "=", 0, 0), stats).all()
    # An interval literal (k = 16.5 over an integer stands for [16, 17]) asks no filter: nothing is ruled out.
    assert might_match(Cmp(Term("k"), "=", 16, 17), stats).all()
    assert might_match(Cmp(Term("k"), "<", 18, 18), stats).all()


def test_dips_of_few_keys_rule_out_receivers_without_them() -> None:
    stats = _table(FILES)
    col = stats.columns["k"]
    keys = dip_of_values(np.array([17, 999]), INT, max_ranges=1)  # compacted to one interval, keys kept
    assert keys is not None and keys.ranges == 1 and list(keys.keys) == [17, 999]
    assert satisfy(keys, col, stats.rows).tolist() == [True, False, True]
    # Few values in intervals are listed; many are not (then only the intervals decide).
    assert satisfy(DiP(np.array([499]), np.array([501])), col, stats.rows).tolist() == [False, True, False]
    wide = DiP(np.array([0]), np.array([indexes.MAX_PROBED_VALUES + 5]))
    assert enumerated(wide, INT, indexes.MAX_PROBED_VALUES) is None and satisfy(wide, col, stats.rows).all()
    both = union([keys, dip_of_values(np.array([500]), INT, 8)], 8)
    assert list(both.keys) == [17, 500, 999]
    assert union([keys, wide], 8).keys is None


def test_strings_list_only_single_values() -> None:
    assert enumerated(DiP(np.array(["a", "b"], dtype=object), np.array(["a", "c"], dtype=object)), STRING, 10) is None
    got = enumerated(DiP(np.array(["a", "b"], dtype=object), np.array(["a", "b"], dtype=object)), STRING, 10)
    assert got is not None and list(got) == ["a", "b"]


def test_a_table_without_filters_is_untouched() -> None:
    stats = _table(FILES)
    plain = dataclasses.replace(stats, columns={"k": dataclasses.replace(stats.columns["k"], indexes={})})
    assert might_match(Cmp(Term("k"), "=", 17, 17), plain).all()
