"""Exact join keys of small senders (issue 16): a diP from the rows that pass, not from file statistics.

A diP is only as narrow as the files its sender keeps: in TPC-DS q55 the one ``date_dim`` file kept by
``d_moy = 11 AND d_year = 1999`` spans three years of ``d_date_sk``, while the 30 rows that pass hold 30
keys. For a sender whose kept files are small (``RewriteContext.exact_keys_max_bytes``), this module reads
the columns the sender's local predicates and join keys use from those files, decides the predicates row
by row, and hands the exchange the key values of the rows that may pass.

Why the keys are sound (a superset of the keys of the rows that pass in Spark):

- **The predicates are decided by the evaluator that decides files** (``rewriter/evaluate.py``), over
  "statistics" in which every row is a file of one row: its value as both bounds, its NULL as a null
  count of 1. That evaluator is sound for any file, so it is sound for these; a conjunct it cannot decide
  (untranslated, ``Unknown``) keeps every row. The same translation of literals into the statistics'
  domain under the session's settings (``rewriter/domain.py``) is used, so no comparison rule is new.
- **The values are the ones Spark reads.** Parquet's physical values decode the same in pyarrow and Spark
  for the kinds read here (integers, dates, decimals at the column's scale, UTF-8 strings, timestamps at
  their unit); anything else is refused. Each column read is checked against the statistics Spark
  computed over the same file: row count, null count, and min and max wherever they are known. A
  mismatch (a rebased legacy date, a column resolved differently, a file that is not what it claims)
  means the keys are not used.
- **The files are the ones the statistics describe.** A sender's statistics were checked against a
  listing taken for this rewrite (a diP origin's always is), and after reading each file its (size, mtime)
  on storage must still equal the identity the statistics hold. A file replaced since is detected and the
  keys are not used; the rewritten query pins every skipped file by identity anyway (``rewriter/emit.py``).
- **Partition columns** take their value from the statistics (one value per file, as the path says).

The rows read are those of the files the sender keeps at its first exchange that has something to decide
(its own predicates' files, less any a diP removed before); each exchange then uses only the rows of the
files the sender still keeps at that point of the schedule, and only those whose columns lie inside the
diPs the sender itself received (a row outside one joins nothing there: the same argument that lets a
received diP remove the sender's files, applied per row), so keys narrow with every hop. Inside a CTE read
at several places a row is needed if every diP of *one* read holds it (the union of the reads' needs, as
for files; TPC-DS q31's ``ss1.d_qoy = 1`` and ``ss2.d_qoy = 2`` leave the dates of both quarters). A sender whose
kept files are over the limits is asked again once diPs have removed some of them: in TPC-DS q16 the
outer ``catalog_sales`` has no predicate of its own (120 MB in ``tuned``) but keeps 19 MB once the ship
dates' diP has arrived, and its order numbers then rule out 21 of the 25 files of the EXISTS subquery's
``catalog_sales`` (through range-sets: catalog order numbers follow dates; web order numbers do not, and
q94's go through Bloom filters).
Reading later is as sound as reading first: a file is only ever removed from a reference's kept files
(never added back), so the files kept at any later exchange are among those read, and a removed file's
rows are rows no diP needs to carry.

Caching: decoded, checked columns are cached per (file identity, column) and the rows that pass per (file
identities, predicate, columns), so a dashboard repeating a filter pays the read once. Both caches are
bounded; a changed file has a new identity and so a new entry (the old one ages out).
"""

from __future__ import annotations

import collections
import dataclasses
import math
import threading
import time
from collections.abc import Hashable, Iterable, Sequence, Set

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dipper.errors import StatsError
from rewriter.budget import check
from rewriter.decision import TableDecision
from rewriter.dip import INTEGRAL, DiP, admitted
from rewriter.join_graph import Channel
from rewriter.evaluate import might_match
from rewriter.predicate import Fn, Pred, columns_of
from stats.freshness import identity_now, open_listed
from stats import spark_reader
from stats.model import ColumnStats, Kind, TableStats, one_row_files, row_values

DEFAULT_MAX_BYTES = 64 << 20
# Decoding cost follows rows, not bytes (TPC-DS SF 1: inventory is 37 MB of Parquet and 11.7 million rows, 2.5 s to read and decide; customer_demographics 8 MB and 1.9 million rows, 0.5 s).
DEFAULT_MAX_ROWS = 1_000_000
DEFAULT_CACHE_BYTES = 256 << 20
OBJECT_BYTES = 64  # what the cache counts per Python object in a dictionary (a short str is 50-80 bytes)
# Read whatever the origin sends into (rewriter/rewrite.py): TPC-DS SF 1 customer (100,000 rows) and every
# smaller dimension, within about 0.1 s each uncached; customer_demographics (8 MB, 1.9 million rows) is over
# the rows limit anyway.
DEFAULT_SMALL_BYTES = 8 << 20


NOTHING_TO_TEST = "no local predicate or received diP to decide row by row"


class KeysRefused(Exception):
    """Exact keys cannot be had for this sender; the message says why (the diP uses statistics instead).
    ``too_big``: refused for the size of the kept files only, so worth asking again once it keeps fewer."""

    def __init__(self, why: str, too_big: bool = False) -> None:
        super().__init__(why)
        self.too_big = too_big


@dataclasses.dataclass(frozen=True)
class Encoded:
    """A column over many rows: each row's code into ``dictionary`` (its distinct values in the statistics'
    domain), -1 for NULL. Deciding a predicate, testing a diP or collecting distinct values then costs one
    pass over the codes plus work per distinct value, not per row."""

    codes: np.ndarray
    dictionary: np.ndarray

    @property
    def nbytes(self) -> int:
        """Memory held: the arrays, and ``OBJECT_BYTES`` per value of a dictionary of Python objects (strings,
        decimals wider than 18 digits), whose arrays hold only pointers."""
        objects = len(self.dictionary) * OBJECT_BYTES if self.dictionary.dtype == object else 0
        return self.codes.nbytes + self.dictionary.nbytes + objects

    def __getitem__(self, rows: np.ndarray) -> Encoded:
        return Encoded(self.codes[rows], self.dictionary)

    def distinct(self, rows: np.ndarray) -> np.ndarray:
        """The distinct non-null values on ``rows`` (a mask), in the dictionary's order (sorted, from ``_encode``)."""
        codes = self.codes[rows]
        present = np.bincount(codes[codes >= 0], minlength=len(self.dictionary)) > 0
        return self.dictionary[present]

    def within(self, dip: DiP, kind: Kind, fns: tuple[Fn, ...]) -> np.ndarray:
        """Per row: is ``fns`` of its value inside ``dip``? NULL never is (it satisfies no equi-join)."""
        inside = np.append(admitted(dip, self.dictionary, kind, fns), False)  # code -1 reads the last entry
        return inside[self.codes]


@dataclasses.dataclass(frozen=True)
class SenderRows:
    """The rows of a sender's files that may pass its local predicates."""

    file: np.ndarray  # int64: the row's file, an index into the sender's statistics
    keys: dict[str, Encoded]  # join columns, sending and receiving -> their values on these rows
    read: np.ndarray  # bool per file of the sender: was it read (its rows that may pass are all here)
    rows_read: int
    bytes_read: int

    @property
    def files_read(self) -> int:
        return int(self.read.sum())

    @property
    def nbytes(self) -> int:
        """Memory held, as the cache counts it."""
        return self.file.nbytes + self.read.nbytes + sum(e.nbytes for e in self.keys.values())

    def inside(self, received: Sequence[Received]) -> np.ndarray:
        """Per row: do its receiving columns lie inside every diP ``received``? (A row outside one joins
        nothing there, so its keys need not be sent.)"""
        rows = np.ones(len(self.file), dtype=bool)
        for r in received:
            rows &= self.keys[r.column].within(r.dip, r.kind, r.fns)
        return rows

    def values(self, column: str, keep: np.ndarray, inside: np.ndarray | None = None) -> np.ndarray:
        """The distinct non-null values of ``column`` on the rows of the files ``keep`` still holds (and
        ``inside``, a row mask). ``keep`` must be among the files read: kept files only ever shrink."""
        if (keep & ~self.read).any():
            raise AssertionError("exact keys asked for files that were not read")  # the rewrite fails open
        rows = keep[self.file]
        return self.keys[column].distinct(rows if inside is None else rows & inside)


@dataclasses.dataclass(frozen=True)
class Received:
    """A diP a reference received on one of its columns: its rows outside it can be skipped."""

    column: str
    kind: Kind
    fns: tuple[Fn, ...]
    dip: DiP


class Origins:
    """The exact keys of one rewrite: which origins' rows were read (each once, with every column it sends on
    and every column it receives on), the diPs each received, and the values each sends, recomputed only
    when its files or its received diPs changed. ``links`` are the rewrite's channels; ``worth`` the origins
    worth reading (``rewriter/rewrite.py``: those that send into a reference clustered on the join column,
    small ones, and those that send into one worth reading)."""

    def __init__(self, links: Sequence[Channel], worth: set[int], max_bytes: int, max_rows: int,
                 cache: KeyCache) -> None:
        self.columns: dict[int, set[str]] = {}  # per origin: the columns it sends on, and those it receives on
        for c in links:
            for m, col, _ in c.members():
                self.columns.setdefault(m, set()).add(col)
        self.sending = {m: set(cols) for m, cols in self.columns.items()}
        for c in links:  # a diP into NOT IN decides files, not rows
            if c.dst in self.columns and not c.null_aware:
                self.columns[c.dst].add(c.dst_column)
        self.worth = worth
        self.max_bytes, self.max_rows, self.cache = max_bytes, max_rows, cache
        self._rows: dict[int, SenderRows | None] = {}
        self._too_big: dict[int, int] = {}  # origin -> how many files it kept when refused for their size
        # The latest diP each channel brought (a later one from the same channel is never wider), per
        # receiver and per read of a multi-use CTE it arrived through (None: every read's rows).
        self._received: dict[int, dict[tuple[int, int, str] | None, dict[Channel, Received]]] = {}
        self._uses: dict[int, int] = {}  # receiver inside a multi-use CTE -> how many reads the CTE has
        self._arrivals: dict[int, int] = {}
        self._inside: dict[int, tuple[int, np.ndarray]] = {}
        self._sent: dict[tuple[int, str], tuple[tuple[int, int], np.ndarray]] = {}

    def read(self, ref: int, stats: TableStats, keep: np.ndarray, pred: Pred, td: TableDecision) -> SenderRows | None:
        """The rows of origin ``ref`` that may pass ``pred`` in the files ``keep`` (those it keeps now), read
        at its first exchange with a predicate to test or a diP received, or, if its kept files were too
        big then, at the first exchange after it lost some; the outcome goes to ``td``."""
        if ref in self._rows:
            return self._rows[ref]
        kept = int(keep.sum())
        if self._too_big.get(ref, kept + 1) <= kept:
            return None  # refused for size at as many files: as big still
        if self.max_bytes <= 0 or self.max_rows <= 0:
            self._rows[ref] = None
        elif ref not in self.worth:
            self._rows[ref] = None
            td.exact_keys = "not used: no receiver's files are clustered on the join columns (each spans most " \
                            "of its column's values), so keys of rows could rule out no more files, and the files its " \
                            "own predicates keep were over rewriter.exact_keys_small_bytes (0: off)"
        else:
            got = sender_rows(stats, keep, pred, self.columns[ref], self.max_bytes, self.max_rows, self.cache,
                              received=bool(self._reads(ref)), optional=self.columns[ref] - self.sending[ref])
            td.exact_keys = got.summary if got.rows is not None else f"not used: {got.summary}"
            td.exact_keys_ms = round(got.elapsed_ms, 2)
            if got.too_big:
                self._too_big[ref] = kept  # asked again once it keeps fewer files
            elif got.rows is not None or got.summary != NOTHING_TO_TEST:
                self._rows[ref] = got.rows  # else asked again once a diP has arrived
        return self._rows.get(ref)

    def has_rows(self, ref: int) -> bool:
        return self._rows.get(ref) is not None

    def arrivals(self, ref: int) -> int:
        """How often the diPs ``ref`` received have changed (a version for deciding whether to send again)."""
        return self._arrivals.get(ref, 0)

    def receive(self, c: Channel, kind: Kind, dip: DiP) -> None:
        """Channel ``c`` brought ``dip`` into its receiver, whose column has ``kind``."""
        if c.null_aware or c.dst_column not in self.columns.get(c.dst, ()):
            return
        if c.dst_use is not None:
            self._uses[c.dst] = c.dst_uses
        channels = self._received.setdefault(c.dst, {}).setdefault(c.dst_use, {})
        before = channels.get(c)
        if before is None or not (np.array_equal(before.dip.lo, dip.lo) and np.array_equal(before.dip.hi, dip.hi)
                                  and _same_keys(before.dip.keys, dip.keys)):
            channels[c] = Received(c.dst_column, kind, c.dst_fns, dip)
            self._arrivals[c.dst] = self.arrivals(c.dst) + 1

    def _reads(self, ref: int, read: Iterable[str] | None = None) -> list[list[Received]]:
        """The diPs ``ref`` received that narrow its rows, one list per alternative: a row is needed if it
        lies inside every diP of one list. Without a multi-use CTE that is one list. A reference inside a
        CTE read at several places is needed by a row of any read (the union of the reads' needs, as its
        files are in ``rewriter/rewrite.py``): each read's diPs are one alternative, with the diPs every
        read shares, once every read has brought one; until then the reads narrow nothing. ``read``: the
        columns its rows hold; a diP on another column (one that could not be read) narrows nothing."""
        by_read = self._received.get(ref, {})
        shared = list(by_read.get(None, {}).values())
        reads = [list(channels.values()) for use, channels in by_read.items() if use is not None]
        out = [shared + r for r in reads] if reads and len(reads) == self._uses.get(ref) else [shared] if shared else []
        if read is not None:
            held = set(read)
            out = [[r for r in alternative if r.column in held] for alternative in out]
        return out

    def values(self, ref: int, column: str, keep: np.ndarray, keep_version: int) -> np.ndarray:
        """The distinct values of ``column`` that origin ``ref`` sends: on its rows that passed, in the files
        ``keep`` (of version ``keep_version``) still holds, inside every diP it received."""
        rows = self._rows[ref]
        assert rows is not None
        state = (self.arrivals(ref), keep_version)
        memo = self._sent.get((ref, column))
        if memo is None or memo[0] != state:
            inside = None
            alternatives = self._reads(ref, rows.keys)
            if alternatives:
                if self._inside.get(ref, (-1,))[0] != state[0]:
                    self._inside[ref] = (state[0], np.logical_or.reduce([rows.inside(a) for a in alternatives]))
                inside = self._inside[ref][1]
            memo = (state, rows.values(column, keep, inside))
            self._sent[(ref, column)] = memo
        return memo[1]


def _same_keys(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    """Whether two diPs carry the same keys (rows are narrowed by keys where a diP carries them)."""
    return (a is None) == (b is None) and (a is None or np.array_equal(a, b))


@dataclasses.dataclass
class Outcome:
    rows: SenderRows | None
    summary: str  # for the decision record: what was read, or why the keys were not used
    elapsed_ms: float
    too_big: bool = False  # refused for the kept files' size only


class KeyCache:
    """Checked columns as read (Arrow arrays) per (file identity, column), and passing rows per request, in one
    budget of ``max_bytes`` (the least recently used out first, either kind) and at most ``max_results``
    results; thread-safe. The rows that passed count against the budget as the columns do: counted only by
    number, 1,024 of them held 3.2 GB after 693 TPC-DS statements at SF 1 (a dictionary of a sender's whole key
    range each), where the budget said 256 MB. An entry larger than the budget is not kept."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES, max_results: int = 1024) -> None:
        self.max_bytes = max_bytes
        self.max_results = max_results
        self._lock = threading.Lock()
        self._entries: collections.OrderedDict[tuple[str, Hashable], tuple[object, int]] = collections.OrderedDict()
        self._bytes = 0
        self._results = 0

    @property
    def nbytes(self) -> int:
        """The bytes the cache holds, as it counts them."""
        with self._lock:
            return self._bytes

    @property
    def entries(self) -> int:
        """Columns and results held (for the proxy's metrics)."""
        with self._lock:
            return len(self._entries)

    def column(self, key: Hashable) -> pa.Array | None:
        return self._get(("column", key))

    def put_column(self, key: Hashable, values: pa.Array) -> None:
        self._put(("column", key), values, values.nbytes)

    def result(self, key: Hashable) -> SenderRows | None:
        return self._get(("result", key))

    def put_result(self, key: Hashable, rows: SenderRows) -> None:
        self._put(("result", key), rows, rows.nbytes)

    def _get(self, key: tuple[str, Hashable]) -> object | None:
        with self._lock:
            hit = self._entries.get(key)
            if hit is None:
                return None
            self._entries.move_to_end(key)
            return hit[0]

    def _put(self, key: tuple[str, Hashable], value: object, cost: int) -> None:
        if cost > self.max_bytes:
            return
        with self._lock:
            if key in self._entries:
                self._drop(key)
            self._entries[key] = (value, cost)
            self._bytes += cost
            self._results += key[0] == "result"
            while self._bytes > self.max_bytes:
                self._drop(next(iter(self._entries)))
            if self._results > self.max_results:
                self._drop(next(k for k in self._entries if k[0] == "result"))

    def _drop(self, key: tuple[str, Hashable]) -> None:
        _, cost = self._entries.pop(key)
        self._bytes -= cost
        self._results -= key[0] == "result"


SHARED = KeyCache()  # the process's cache unless a context names another


def sender_rows(stats: TableStats, keep: np.ndarray, pred: Pred, key_columns: set[str], max_bytes: int,
                max_rows: int, cache: KeyCache, received: bool = False, optional: Set[str] = frozenset()) -> Outcome:
    """The rows of the files ``keep`` holds that may satisfy ``pred``, with their ``key_columns``; or why
    not. Worth reading only if ``pred`` tests a column or the reference ``received`` a diP on a key column.
    ``optional``: key columns the rows may go without (those it only receives on, which narrow its rows):
    one without statistics is left out, and if the rows cannot be read with them, they are read without."""
    started = time.perf_counter()
    wanted = {c for c in key_columns if c not in optional or c in stats.columns}
    try:
        try:
            rows, how = _sender_rows(stats, keep, pred, wanted, max_bytes, max_rows, cache, received)
        except KeysRefused as e:
            if e.too_big or not wanted & optional:
                raise
            rows, how = _sender_rows(stats, keep, pred, wanted - optional, max_bytes, max_rows, cache, received)
        return Outcome(rows, how, (time.perf_counter() - started) * 1000)
    except KeysRefused as e:
        return Outcome(None, str(e), (time.perf_counter() - started) * 1000, e.too_big)


def _sender_rows(stats: TableStats, keep: np.ndarray, pred: Pred, key_columns: set[str], max_bytes: int,
                 max_rows: int, cache: KeyCache, received: bool) -> tuple[SenderRows, str]:
    tested = sorted(columns_of(pred) & stats.columns.keys())
    if not tested and not received:
        # Every row of a kept file then passes, and the files' statistics describe its keys nearly as well.
        raise KeysRefused(NOTHING_TO_TEST)
    if stats.format != "parquet":
        raise KeysRefused(f"read only from Parquet tables, this one is {stats.format or 'of unknown format'}")
    files = np.flatnonzero(keep)
    size = int(stats.sizes[files].sum())
    if size > max_bytes:
        raise KeysRefused(f"the kept files hold {size / 1e6:.1f} MB, more than the limit of {max_bytes / 1e6:.1f} MB "
                          f"(rewriter.exact_keys_max_bytes)", too_big=True)
    counts = stats.rows[files].astype(np.int64)
    n_rows = int(counts.sum())
    if n_rows > max_rows:
        raise KeysRefused(f"the kept files hold {n_rows:,} rows, more than the limit of {max_rows:,} "
                          f"(rewriter.exact_keys_max_rows)", too_big=True)
    if not key_columns <= stats.columns.keys():
        raise KeysRefused("a join column has no statistics")
    columns = sorted(set(tested) | key_columns)
    identities = tuple((int(i), stats.paths[i], int(stats.sizes[i]), int(stats.mtimes[i])) for i in files)
    # The rows hold files by index: the key pins each file's index too (and the count of files), so that
    # statistics listing the same files in other places never receive another listing's indices.
    key = (stats.table, stats.n_files, identities, repr(pred), tuple((c, stats.columns[c].kind) for c in columns),
           tuple(sorted(key_columns)))
    hit = cache.result(key)
    if hit is not None:
        return hit, _summary(hit, cached=True)
    if not n_rows:
        none = np.zeros(0, dtype=np.int64)
        rows = SenderRows(none, {c: Encoded(none, stats.columns[c].lo[:0]) for c in key_columns}, keep.copy(), 0, size)
        return rows, _summary(rows, cached=False)
    read = []
    for i in files:
        check(f"reading the exact keys of {stats.table}")
        read.append(_file_columns(stats, int(i), [c for c in columns if c not in stats.partition_columns], cache))
    encoded = {c: _partition_column(stats, files, c) if c in stats.partition_columns else
               _encode(pa.concat_arrays([r[c] for r in read]), stats.columns[c].kind)
               for c in columns}
    passing = _decide(pred, {c: encoded[c] for c in tested}, {c: stats.columns[c].kind for c in tested},
                      stats.table, n_rows) if tested else np.ones(n_rows, dtype=bool)
    row_file = np.repeat(files.astype(np.int64), counts)
    rows = SenderRows(file=row_file[passing],
                      keys={c: encoded[c][passing] for c in key_columns}, read=keep.copy(),
                      rows_read=n_rows, bytes_read=size)
    cache.put_result(key, rows)
    return rows, _summary(rows, cached=False)


def _summary(rows: SenderRows, cached: bool) -> str:
    return (f"{len(rows.file):,} of {rows.rows_read:,} rows may pass, from {rows.files_read} files "
            f"({rows.bytes_read / 1e6:.1f} MB{', cached' if cached else ''})")


def _decide(pred: Pred, columns: dict[str, Encoded], kinds: dict[str, Kind], table: str, n: int) -> np.ndarray:
    """Per row: may it satisfy ``pred``? Decided once per distinct combination of the tested columns' values,
    each combination a "file" of one row: its values as both bounds, a NULL as a null count of 1."""
    widths = [len(c.dictionary) + 1 for c in columns.values()]  # code -1 (NULL) becomes 0
    if math.prod(widths) < 2**62:  # number each combination in mixed radix
        combined = np.zeros(n, dtype=np.int64)
        for c, width in zip(columns.values(), widths):
            combined = combined * width + (c.codes + 1)
        if math.prod(widths) <= max(4 * n, 1 << 20):  # few enough to index: linear, not a sort
            seen = np.zeros(math.prod(widths), dtype=bool)
            seen[combined] = True
            distinct = np.flatnonzero(seen)
            number = np.zeros(len(seen), dtype=np.int64)
            number[distinct] = np.arange(len(distinct))
            inverse = number[combined]
        else:
            distinct, inverse = np.unique(combined, return_inverse=True)
        per_column = []
        for width in reversed(widths):
            per_column.append(distinct % width - 1)
            distinct = distinct // width
        per_column.reverse()
    else:
        rows, inverse = np.unique(np.stack([c.codes for c in columns.values()], axis=1), axis=0, return_inverse=True)
        per_column = [rows[:, k] for k in range(rows.shape[1])]
    stats = {}
    for (name, c), code in zip(columns.items(), per_column):
        valid = code >= 0
        values = c.dictionary[np.where(valid, code, 0)] if len(c.dictionary) else \
            np.zeros(len(code), dtype=c.dictionary.dtype)
        stats[name] = row_values(kinds[name], values, valid)
    return might_match(pred, one_row_files(table, len(per_column[0]), stats))[inverse.reshape(-1)]


def _file_columns(stats: TableStats, i: int, columns: list[str], cache: KeyCache) -> dict[str, pa.Array]:
    """The checked columns of file ``i``, from the cache or read (one read for all that are missing)."""
    path, size, mtime = stats.paths[i], int(stats.sizes[i]), int(stats.mtimes[i])
    out: dict[str, pa.Array] = {}
    missing = []
    for c in columns:
        hit = cache.column((path, size, mtime, c, stats.columns[c].kind))
        if hit is not None:
            out[c] = hit
        else:
            missing.append(c)
    if missing:
        for c, arr in _read(stats, i, missing).items():
            cache.put_column((path, size, mtime, c, stats.columns[c].kind), arr)
            out[c] = arr
    return out


def _read(stats: TableStats, i: int, columns: list[str]) -> dict[str, pa.Array]:
    path, rows = stats.paths[i], int(stats.rows[i])
    pinned = (int(stats.sizes[i]), int(stats.mtimes[i]))

    def check_identity() -> None:
        try:
            now = identity_now(stats.location, path)
        except StatsError as e:
            raise KeysRefused(str(e)) from None
        if now is None or (now.size, now.mtime) != pinned:
            raise KeysRefused(f"{path} changed since its statistics were checked")

    # The statistics were checked against a listing of storage taken for this rewrite (a diP origin's always
    # is); a file replaced since is seen after the read, when its identity no longer matches.
    try:
        with open_listed(stats.location, path) as f:
            pf = pq.ParquetFile(f, coerce_int96_timestamp_unit="us")
            names: dict[str, str] = {}
            for name in pf.schema_arrow.names:
                if name.lower() in names:
                    raise KeysRefused(f"{path} has two columns named {name.lower()!r} apart from case")
                names[name.lower()] = name
            absent = [c for c in columns if c not in names]
            if absent:
                raise KeysRefused(f"{path} has no column {absent[0]!r}")
            table = pf.read(columns=[names[c] for c in columns])
            metadata = pf.metadata.metadata
            int96 = {c for c in columns for j in range(pf.metadata.num_columns)
                     if pf.metadata.schema.column(j).path.lower() == c
                     and pf.metadata.schema.column(j).physical_type == "INT96"}
    except (OSError, pa.ArrowException, StatsError) as e:
        raise KeysRefused(f"{path} could not be read: {e}") from None
    check_identity()
    if table.num_rows != rows:
        raise KeysRefused(f"{path} holds {table.num_rows} rows, its statistics {rows}")
    out = {}
    for c in columns:
        arr = table.column(names[c]).combine_chunks()
        try:  # read as Spark reads it: its calendar, its bytes (stats/spark_reader.py)
            spark_reader.check(arr, stats.columns[c].kind, metadata, int96=c in int96)
        except spark_reader.NotReadAsSpark as e:
            raise KeysRefused(f"{path}: {c} {e}") from None
        _check(arr, stats.columns[c], i, path, c)
        out[c] = arr
    return out


def read_domain(arr: pa.Array, kind: Kind, path: str, column: str) -> np.ndarray:
    """The values of a column read from Parquet in the statistics' domain (NULLs as a placeholder), as
    Spark reads them (``stats/spark_reader.py``); refuses what Spark might read differently."""
    try:
        return spark_reader.read_values(arr, kind)
    except spark_reader.NotReadAsSpark as e:
        raise KeysRefused(f"{path}: {column} {e}") from None


def _check(arr: pa.Array, col: ColumnStats, i: int, path: str, column: str) -> None:
    """The values read agree with what Spark computed over the same file, wherever the statistics know it."""
    if col.null_count[i] >= 0 and arr.null_count != col.null_count[i]:
        raise KeysRefused(f"{path}: {column} has {arr.null_count} NULLs, its statistics {col.null_count[i]}")
    if col.kind.name == "float" or not col.known[i] or arr.null_count == len(arr):
        return  # Spark's float bounds leave NaN out; an unknown bound says nothing
    bounds = pc.min_max(arr)
    lo, hi = read_domain(pa.array([bounds["min"].as_py(), bounds["max"].as_py()], type=arr.type), col.kind, path, column)
    if lo != col.lo[i] or hi != col.hi[i]:
        raise KeysRefused(f"{path}: {column} holds values from {lo!r} to {hi!r}, its statistics "
                          f"{col.lo[i]!r} to {col.hi[i]!r}")


def _encode(arr: pa.Array, kind: Kind) -> Encoded:
    """A column read from the files, dictionary-encoded with a sorted dictionary: integers in a dense range
    (surrogate keys, years, days) by their offset from the least, in one pass; anything else by Arrow's hash
    table."""
    if kind.name in INTEGRAL and len(arr) > arr.null_count:
        values = read_domain(arr, kind, "", "")
        if values.dtype != object:
            valid = arr.is_valid().to_numpy(zero_copy_only=False)
            lo, hi = int(values[valid].min()), int(values[valid].max())
            if hi - lo <= 4 * len(values) + 1024:
                return Encoded(np.where(valid, values - lo, -1), np.arange(lo, hi + 1, dtype=np.int64))
    encoded = pc.dictionary_encode(arr)
    codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    dictionary = read_domain(encoded.dictionary, kind, "", "")
    # Sorted once here (the rows are cached), so distinct values come out sorted and a diP of them needs no
    # sort per statement: sorting 10^5 distinct keys anew was most of a warm rewrite of TPC-DS q83 at SF 10.
    order = np.argsort(dictionary, kind="stable")
    rank = np.empty(len(order) + 1, dtype=np.int64)
    rank[order] = np.arange(len(order))
    rank[-1] = -1  # code -1 (NULL) stays -1
    return Encoded(rank[codes], dictionary[order])


def partition_value(stats: TableStats, i: int, column: str) -> object | None:
    """The value of a partition column on every row of file ``i``, from its statistics (None: NULL)."""
    col = stats.columns[column]
    if col.null_count[i] == stats.rows[i]:
        return None
    if col.null_count[i] != 0 or not col.known[i] or col.lo[i] != col.hi[i]:
        raise KeysRefused(f"partition column {column} has no single known value in {stats.paths[i]}")
    return col.lo[i]


def _partition_column(stats: TableStats, files: np.ndarray, column: str) -> Encoded:
    """A partition column on every row of ``files``, from its statistics (one value per file, or NULL)."""
    col = stats.columns[column]
    per_file = [partition_value(stats, i, column) for i in files]
    present = sorted({v for v in per_file if v is not None})
    index = {v: k for k, v in enumerate(present)}
    codes = np.repeat(np.array([index[v] if v is not None else -1 for v in per_file], dtype=np.int64),
                      stats.rows[files].astype(np.int64))
    return Encoded(codes, np.array(present, dtype=col.lo.dtype))
