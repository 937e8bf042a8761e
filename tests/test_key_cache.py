"""The exact keys' cache (``rewriter/exact_keys.py`` ``KeyCache``): columns read and rows that passed share one
budget of bytes, the least recently used out first; results are also bounded in number; nothing larger than
the budget is kept. Counted only by number, the rows that passed once held 3.2 GB where the budget said
256 MB."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from rewriter.exact_keys import OBJECT_BYTES, Encoded, KeyCache, SenderRows


def _rows(n: int, dictionary: np.ndarray | None = None) -> SenderRows:
    """Rows that passed: ``n`` rows of one file, one key column."""
    keys = Encoded(np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64) if dictionary is None else dictionary)
    return SenderRows(np.zeros(n, dtype=np.int64), {"k": keys}, np.ones(1, dtype=bool), n, 8 * n)


def test_rows_count_their_arrays_and_the_objects_of_a_dictionary() -> None:
    assert _rows(100).nbytes == 100 * 8 * 3 + 1
    words = np.array([f"value {i}" for i in range(10)], dtype=object)
    assert _rows(10, words).nbytes == 10 * 8 * 3 + 1 + 10 * OBJECT_BYTES


def test_results_and_columns_share_the_budget_least_recently_used_out_first() -> None:
    one = _rows(1000).nbytes  # 24,001 bytes
    cache = KeyCache(max_bytes=3 * one + 100)
    for i in range(3):
        cache.put_result(("r", i), _rows(1000))
    assert cache.nbytes == 3 * one
    assert cache.result(("r", 0)) is not None  # now the most recently used
    column = pa.array(np.arange(1000, dtype=np.int64))  # 8,000 bytes: the least recently used result goes
    cache.put_column(("c", 0), column)
    assert cache.result(("r", 1)) is None and cache.nbytes == 2 * one + column.nbytes <= cache.max_bytes
    assert cache.result(("r", 2)) is not None and cache.result(("r", 0)) is not None  # the column is now the oldest
    cache.put_result(("r", 3), _rows(1000))  # over the budget again
    assert cache.column(("c", 0)) is None and cache.nbytes == 3 * one
    assert all(cache.result(("r", i)) is not None for i in (0, 2, 3))
    cache.put_result(("r", 3), _rows(1000))  # replacing an entry counts it once
    assert cache.nbytes == 3 * one


def test_results_are_bounded_in_number_without_dropping_columns() -> None:
    cache = KeyCache(max_bytes=1 << 30, max_results=2)
    column = pa.array(np.arange(10, dtype=np.int64))
    cache.put_column(("c", 0), column)
    for i in range(3):
        cache.put_result(("r", i), _rows(10))
    assert cache.result(("r", 0)) is None and cache.result(("r", 1)) is not None and cache.result(("r", 2)) is not None
    assert cache.column(("c", 0)) is column  # older than every result, but within the budget
    assert cache.nbytes == column.nbytes + 2 * _rows(10).nbytes


def test_an_entry_larger_than_the_budget_is_not_kept() -> None:
    cache = KeyCache(max_bytes=1000)
    cache.put_result(("r", 0), _rows(10))
    cache.put_result(("big", 0), _rows(1000))
    cache.put_column(("big", 1), pa.array(np.arange(1000, dtype=np.int64)))
    assert cache.result(("big", 0)) is None and cache.column(("big", 1)) is None
    assert cache.result(("r", 0)) is not None and cache.nbytes == _rows(10).nbytes
