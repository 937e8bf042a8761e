"""A per-file Bloom filter on a high-cardinality column (join keys, ids): a statistic kind as one module
(``stats/indexes.py`` says what a kind declares; seed 001 is Xskipper's index types).

Min/max, range-sets and value lists describe a column whose values are clustered or few. A key column of a
fact table is neither when the layout clusters it by something else (TPC-DS ``store_sales`` by date: every
file holds some ten thousand customers spread over the whole key range). A Bloom filter answers "may this
file hold value v?" for any v, with false positives only: a file it rules out holds no row with that value.
Used for ``col = literal``, ``col IN (...)`` and diPs that carry few enough keys.

**Collected** in one Spark statement per table (after the statistics scan, for the files it described):
every non-null value's domain value (``stats/model.py``: integers, dates as days, timestamps as micros,
decimals of up to 18 digits unscaled, all as bigint; strings as they are) is hashed with Spark's
``xxhash64`` (XXH64, seed 42, over the bigint's 8 little-endian bytes or the string's UTF-8 bytes: the
standard algorithm, so the ``xxhash`` package gives the same 64 bits on the driver; a test checks it
against Spark). ``HASHES`` bit positions per value come from the two 32-bit halves of that hash
(Kirsch and Mitzenmacher's double hashing: ``h1 + j·h2``) modulo the file's collection size, and Spark returns one
``bit_or`` word per (file, column, 64-bit word) that any value set: fixed-size buffers, hash-aggregated.

**Sized per file on the driver** by folding: a filter of ``m`` bits (a power of two) becomes one of ``m/2``
by OR-ing its halves, since ``pos mod m/2`` is ``(pos mod m) mod m/2``. So the filter is collected at
``BITS_PER_VALUE`` bits per non-null value of the file (at most ``MAX_BITS``) and folded to the least power of
two of at least ``BITS_PER_VALUE`` bits per distinct value, the count of distinct values estimated from the
bits set (Swamidass and Baldi, 2007). Folding keeps every
bit a value set, so no value is ever lost; at 10 bits per value and 7 hashes, about 1% of absent values
pass. A file with more distinct values than ``MAX_BITS / BITS_PER_VALUE`` keeps ``MAX_BITS`` and a higher
false-positive rate: never a false negative.

**Stored** as one struct per file (``log2`` of its size in bits and its ``words`` as little-endian bytes)
in the column ``bloom:<column>``; a file collected before the filter was asked for, or described from its
footer only, has none and so always might match.

**Evaluated** for a set of values (sorted, distinct, in the column's domain): a file might match if every
one of some value's ``HASHES`` bits is set. Vectorised over files x values x hashes.
"""

from __future__ import annotations

import dataclasses
import math
import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import xxhash

from stats.model import Kind
from stats.store import COLUMN_PREFIX

NAME = "bloom"
HELP = ("a per-file Bloom filter on high-cardinality columns (join keys, ids), for col = v, col IN (...) and joins "
        "that bring few keys; up to 128 KiB per file and column")
HASHES = 7
BITS_PER_VALUE = 10  # with 7 hashes: about 0.8% false positives
MAX_BITS = 1 << 20  # 128 KiB per file and column at most
MIN_BITS = 1 << 9
SEED = 42  # Spark's xxhash64 seed
_MASK32 = (1 << 32) - 1
_CHUNK = 1 << 20  # bit tests per step of might_contain


def covers(kind: Kind) -> bool:
    """Kinds whose domain value Spark and the driver hash alike: integers, dates, timestamps, decimals of up
    to 18 digits (all as a bigint) and strings. Floats are not (NaN, -0.0), nor wider decimals."""
    if kind.name == "decimal":
        return kind.precision <= 18
    return kind.name in ("int", "date", "timestamp", "string")


def arrow_type() -> pa.DataType:
    return pa.struct([("log2", pa.int8()), ("words", pa.binary())])


# -- collection -----------------------------------------------------------------------------------------------

def collect(run: Callable[[str], list[tuple]], rows: dict[str, dict[str, Any]], columns: list[str],
            sql: Any) -> tuple[dict[tuple[str, str], Any], set[str]]:
    """The filter of every file of ``rows`` for each of ``columns``, in one statement: ((path, column) -> stored
    filter; a file without non-null values has none), and the paths whose identity in this statement differs
    from the row's (the file changed since the statistics scan described it: the caller leaves it out).
    ``sql`` is the scan's ``stats.scan.ScanSql``."""
    paths = sorted(rows)
    if not paths or not columns:
        return {}, set()
    p = sql.prefix
    # Each file's filters are collected at the size its non-null count calls for (at most MAX_BITS): what
    # reaches the driver, and what it holds until the statement ends, grows with the data, not the cap.
    nonnull = {path: [rows[path]["rows"] - rows[path][COLUMN_PREFIX + c]["nulls"] for c in columns] for path in paths}
    sizes = {path: [collected_bits(n) for n in nonnull[path]] for path in paths}
    picks = []
    for i, column in enumerate(columns):
        kind = sql.req.kinds[column]
        value = sql.column(column)
        hashed = f"xxhash64({value})" if kind.name == "string" else f"xxhash64({sql.domain_bigint(value, kind)})"
        # xxhash64 of NULL is its seed, not NULL: NULLs must set no bit.
        picks.append((i, f"CASE WHEN {value} IS NOT NULL THEN named_struct('h', {hashed}, "
                         f"'m', element_at({p}f.{p}m, {i + 1})) END"))
    positions = ", ".join(f"(({p}v.h & {_MASK32}) + {j} * shiftrightunsigned({p}v.h, 32)) & {p}v.m"
                          for j in range(HASHES))
    masks = {path: f"array({', '.join(f'{b - 1}L' for b in sizes[path])})" for path in paths}
    statement = (f"SELECT {p}i, {p}id, {p}size, {p}mtime, shiftright({p}pos, 6) AS {p}w, "
                 f"bit_or(shiftleft(1L, {p}pos & 63)) FROM (SELECT {p}i, {p}id, {p}size, {p}mtime, "
                 f"explode(array({positions})) AS {p}pos FROM ({sql.file_values(paths, picks, masks)}) "
                 f"WHERE {p}v IS NOT NULL) "
                 f"GROUP BY {p}i, {p}id, {p}size, {p}mtime, shiftright({p}pos, 6)")
    words: dict[tuple[str, int], np.ndarray] = {}
    changed = set()
    for i, file_id, size, mtime, word, bits in run(statement):
        path = paths[int(file_id)]
        if (int(size), int(mtime)) != (rows[path]["size"], rows[path]["mtime"]):
            changed.add(path)  # not the version the statistics scan read
            continue
        w = words.setdefault((path, int(i)), np.zeros(sizes[path][int(i)] // 64, dtype=np.uint64))
        w[int(word)] = np.uint64(int(bits) & (2**64 - 1))
    out: dict[tuple[str, str], Any] = {}
    for path in paths:
        for i, column in enumerate(columns):
            filter_words = words.get((path, i))
            if filter_words is None:
                if nonnull[path][i] > 0:
                    changed.add(path)  # values the scan counted, none hashed here: another version of the file
                continue
            out[(path, column)] = _stored(_folded(filter_words))
    return out, changed


def collected_bits(nonnull: int) -> int:
    """The size a file's filter is collected at: ``BITS_PER_VALUE`` bits per non-null value (an upper bound of
    its distinct values), a power of two within [MIN_BITS, MAX_BITS]. Folding later sizes it by the distinct
    values."""
    want = max(1, nonnull) * BITS_PER_VALUE
    return min(MAX_BITS, max(MIN_BITS, 1 << (want - 1).bit_length()))


def reference_filter(values: np.ndarray, kind: Kind) -> dict[str, Any] | None:
    """The stored filter of a file whose non-null domain values are ``values`` (with repeats, as the file holds
    them), computed on the driver: the reference implementation of what :func:`collect` computes in Spark
    (tests compare the two)."""
    h = hashes(values, kind)
    if h is None or len(h) == 0:
        return None
    m = collected_bits(len(values))
    words = np.zeros(m // 64, dtype=np.uint64)
    for pos in _positions(h, m - 1).ravel():
        words[pos >> 6] |= np.uint64(1) << np.uint64(pos & 63)
    return _stored(_folded(words))


def _positions(h: np.ndarray, mask: np.ndarray | int) -> np.ndarray:
    """The ``HASHES`` bit positions of each hash (``h1 + j·h2``, masked), as [hash, j] (or [file, hash, j] with
    a mask per file)."""
    h1 = (h & np.uint64(_MASK32)).astype(np.int64)
    h2 = (h >> np.uint64(32)).astype(np.int64)
    j = np.arange(HASHES, dtype=np.int64)
    pos = h1[:, None] + j[None, :] * h2[:, None]
    return pos & mask if np.isscalar(mask) else pos[None, :, :] & np.asarray(mask)[:, None, None]


def _folded(words: np.ndarray) -> np.ndarray:
    """The least power-of-two filter of at least ``BITS_PER_VALUE`` bits per distinct value (estimated from
    the bits set), by OR-ing halves: every bit set stays set at its position modulo the new size."""
    m = len(words) * 64
    ones = int(np.unpackbits(words.view(np.uint8)).sum())
    estimate = m if ones >= m else -m / HASHES * math.log1p(-ones / m)
    want = max(MIN_BITS, 1 << max(0, math.ceil(math.log2(max(1.0, estimate * BITS_PER_VALUE)))))
    while len(words) * 64 > want:
        half = len(words) // 2
        words = words[:half] | words[half:]
    return words


def _stored(words: np.ndarray) -> dict[str, Any]:
    return {"log2": int(len(words) * 64).bit_length() - 1, "words": words.astype("<u8").tobytes()}


# -- hashing on the driver ------------------------------------------------------------------------------------

def hashes(values: np.ndarray, kind: Kind) -> np.ndarray | None:
    """Spark's ``xxhash64`` of each domain value, as uint64; None if some value has no such hash (an integer
    outside int64, a string that is not valid Unicode): the caller then learns nothing from the filter."""
    out = np.empty(len(values), dtype=np.uint64)
    try:
        if kind.name == "string":
            for n, v in enumerate(values):
                out[n] = xxhash.xxh64_intdigest(str(v).encode("utf-8"), seed=SEED)
        else:
            for n, v in enumerate(values):
                out[n] = xxhash.xxh64_intdigest(struct.pack("<q", int(v)), seed=SEED)
    except (struct.error, UnicodeEncodeError, OverflowError, ValueError, TypeError):
        return None
    return out


# -- loaded filters -------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class BloomFilters:
    """Every file's filter of one column: the words of all files concatenated, with each file's offset (in
    words) and size (log2 of its bits); ``present`` is False for files without a filter."""

    kind: Kind
    words: np.ndarray  # uint64
    offset: np.ndarray  # int64 per file
    log2: np.ndarray  # int64 per file
    present: np.ndarray  # bool per file

    @property
    def nbytes(self) -> int:
        return int(self.words.nbytes)

    def subset(self, keep: np.ndarray) -> BloomFilters:
        return BloomFilters(self.kind, self.words, self.offset[keep], self.log2[keep], self.present[keep])

    def might_contain(self, values: np.ndarray) -> np.ndarray:
        """Per file: may it hold one of ``values`` (domain values of the column)? A file without a filter,
        or values without a hash, may."""
        n = len(self.present)
        h = hashes(values, self.kind)
        if h is None:
            return np.ones(n, dtype=bool)
        out = ~self.present
        files = np.flatnonzero(self.present)
        if len(files) == 0 or len(h) == 0:
            return out
        step = max(1, _CHUNK // (len(h) * HASHES))  # files per chunk: bounded memory for files x values x hashes
        for start in range(0, len(files), step):
            some = files[start:start + step]
            pos = _positions(h, (np.int64(1) << self.log2[some]) - 1)
            word = self.words[self.offset[some][:, None, None] + (pos >> 6)]
            bit = (word >> (pos & 63).astype(np.uint64)) & np.uint64(1)
            out[some] = (bit == 1).all(axis=2).any(axis=1)
        return out


def load(arr: pa.Array, kind: Kind) -> BloomFilters | None:
    """The filters of a store column ``bloom:<column>`` (a struct per file, NULL for none)."""
    present = arr.is_valid().to_numpy(zero_copy_only=False)
    if not present.any():
        return None
    log2 = arr.field("log2").fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    blobs = arr.field("words").to_pylist()
    chunks = [np.frombuffer(b, dtype="<u8").astype(np.uint64) if b is not None and ok else np.zeros(0, np.uint64)
              for b, ok in zip(blobs, present)]
    sizes = np.array([len(c) for c in chunks], dtype=np.int64)
    # A damaged filter (a size outside what collect writes, words of another size) is no filter.
    sane = (log2 >= MIN_BITS.bit_length() - 1) & (log2 <= MAX_BITS.bit_length() - 1)
    present &= sane & (sizes == np.where(present & sane, (np.int64(1) << np.clip(log2, 0, 62)) // 64, 0))
    offset = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    words = np.concatenate(chunks) if chunks else np.zeros(0, np.uint64)
    return BloomFilters(kind, words, offset, log2, present)
