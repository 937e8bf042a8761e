"""Emit the minimal edit (ARCHITECTURE.md §3.1): replace chosen table references in the *original text*
with ``(SELECT * FROM <same text> WHERE <prune filter>) [AS <name>]`` and change nothing else.

The prune filter skips exactly the files whose identity (path, size, modification time) the statistics
pinned (§3.2): a file rewritten since collection no longer matches its key and is read. Spark evaluates
the filter on file metadata at planning time and lists only the remaining files (SPARK-37273). One
``IN`` list of keys, rather than an OR per file, keeps the text linear and Spark's parser shallow (a
3,000-way OR overflows its stack; a 20,000-key IN does not). Runs of skipped block files of a table ``layout
apply`` wrote are named by ranges of file names instead, pinned by name, folder and the window of their mtimes
(``rewriter/name_ranges.py`` says why that is sound).

Partitioned tables get the same file-key filter, not a predicate on partition values: Spark applies the
key filter to the files of the partitions it lists, so the same files are skipped, while a partition
predicate would also drop any file added to a skipped partition after the statistics were read.

Why no row is lost: a replaced reference yields the table's rows minus the rows of skipped files, with the
same columns in the same order (``SELECT *`` never includes the hidden ``_metadata`` column), under the same
name; the evaluator proved that no row of a skipped file satisfies the reference's local predicates, which
the enclosing query applies to every row anyway.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

import numpy as np
from sqlglot import exp

from rewriter.errors import RewriteError
from rewriter.name_ranges import NameRanges
from rewriter.per_object import PerObject
from stats.model import TableStats

KEY_SEPARATOR = "|"


def file_key(path: str, size: int, mtime_micros: int) -> str:
    """The key Spark's side of the filter computes for a file. Size and time are digits only, so splitting
    from the right is unambiguous even when a path contains the separator."""
    return f"{path}{KEY_SEPARATOR}{size}{KEY_SEPARATOR}{mtime_micros}"


def _metadata(field: str) -> exp.Expression:
    return exp.Dot(this=exp.column("_metadata"), expression=exp.to_identifier(field))


def _key_sql(path: exp.Expression) -> str:
    """The key Spark computes per file, over ``path``. Anonymous: sqlglot would otherwise 'transpile' CONCAT_WS
    into a NULL-guarding CASE that Spark cannot evaluate on file metadata alone."""
    return exp.Anonymous(this="concat_ws", expressions=[
        exp.Literal.string(KEY_SEPARATOR),
        path,
        exp.cast(_metadata("file_size"), "string"),
        exp.cast(exp.Anonymous(this="unix_micros", expressions=[_metadata("file_modification_time")]), "string"),
    ]).sql("spark")


_KEY_SQL = _key_sql(_metadata("file_path"))
_PATH_SQL = _metadata("file_path").sql("spark")
# A file's size folded into an INT (the low 31 bits: never negative, so the cast cannot overflow, ANSI or not).
# Spark compiles ``<int> IN (...)`` of up to spark.sql.optimizer.inSetSwitchThreshold (400) values into a
# Java switch, which costs a row about what reading the constant costs; a longer list is a hash set of boxed
# values, about three times that. Only short lists are left to become switches: the switch is inlined into the
# stage's generated method, and 1,215 values in four switches made a scan of TPC-H SF 10 lineitem 20x slower
# (likely the JVM declining to compile a method that long, which then runs interpreted). A list of more than
# SWITCH_VALUES sizes tests the size as a BIGINT (SIZE_SET_SQL), which Spark looks up in a hash set at any
# length, in code of one size: TPC-DS q48 at SF 10 on store_sales as 460 blocks, 92 kept, spent 8.5-9.3 s of
# executor CPU with its 368 skipped sizes as a switch, 2.4-2.6 s as a hash set, 1.9-2.1 s reading the kept files
# with no filter at all (docs/results/layout.md, "A switch too long to compile").
_FOLDED_SIZE_SQL = f"{_metadata('file_size').sql('spark')} & {2**31 - 1}"  # folded_sizes() in Spark
SIZE_SQL = f"CAST({_FOLDED_SIZE_SQL} AS INT)"
SIZE_SET_SQL = f"({_FOLDED_SIZE_SQL})"
SWITCH_VALUES = 64


def folded_sizes(sizes: np.ndarray) -> np.ndarray:
    return np.asarray(sizes, dtype=np.int64) & (2**31 - 1)


# Characters that need no escaping inside a Spark string literal. Keys made only of these are quoted as is;
# every other key goes through sqlglot's own literal generator (quotes, backslashes, control characters).
_PLAIN = re.compile(r"[A-Za-z0-9_./:=|+,@%~ -]*")


def string_literal(text: str) -> str:
    return f"'{text}'" if _PLAIN.fullmatch(text) else exp.Literal.string(text).sql("spark")


def prune_filter(stats: TableStats, skip: np.ndarray, ranges: NameRanges | None = None) -> str:
    """The filter that skips the files where ``skip`` is True and reads the others: see :func:`files_filter`;
    the files ``ranges`` covers (``rewriter/name_ranges.py``) by their names instead of their keys. The per-file
    pieces of the text come from a cache per statistics object (:class:`_Keys`)."""
    keyed = skip & ~ranges.covered if ranges is not None else skip
    return _filter(_keys_of(stats), np.flatnonzero(keyed), stats.sizes[~skip], ranges,
                   stats.sizes[ranges.covered] if ranges is not None else ())


def files_filter(paths: Sequence[str], sizes: Sequence[int], mtimes: Sequence[int],
                 kept_sizes: Sequence[int] = ()) -> str:
    """``NOT (<size> IN (<skipped sizes>) AND <file key> IN ('<key>', ...))`` skips exactly the files with these
    identities; the key alone decides. The size test is for the rows: Spark evaluates the filter again on
    every row it reads, after it pruned the files, and a row of a kept file fails it there for the price of
    an INT switch or hash lookup, where hashing the path added 2.6 times, and building the key for every row
    7.0 times, the CPU time of the scan itself (TPC-H SF 10, docs/results/prune-filter.md). When the kept files have
    at most SWITCH_VALUES sizes and none of them is a skipped file's, ``(<size> IN (<kept sizes>) OR NOT
    (...))`` lets their rows pass at a switch, and skips the same files. A path such as ``x' OR '1'='1``
    stays a string: sqlglot's literal generator escapes it."""
    keys = _Keys(np.asarray(paths, dtype=object), np.asarray(sizes, dtype=np.int64), np.asarray(mtimes, dtype=np.int64))
    return _filter(keys, np.arange(len(keys.paths)), kept_sizes)


class _Keys:
    """The files of a table as the filter names them: their order in the text (by path, so the text does not
    depend on the store's order), folded sizes, and their keys quoted relative to the folder all of them share,
    each computed once. Writing 10^5 keys anew for every statement took about three quarters of the rewrite
    time with store_sales as 100,000 files (docs/results/rewriter.md); with these kept per statistics object, a
    statement joins strings."""

    def __init__(self, paths: np.ndarray, sizes: np.ndarray, mtimes: np.ndarray, folder: str | None = None) -> None:
        self.paths = paths
        order = np.array(sorted(range(len(paths)), key=lambda i: (paths[i], sizes[i], mtimes[i])), dtype=np.int64)
        self.rank = np.empty(len(paths), dtype=np.int64)
        self.rank[order] = np.arange(len(paths))
        self.folded = folded_sizes(sizes)
        if folder is None:
            folder = os.path.commonprefix(list(paths))
            folder = folder[:folder.rfind("/") + 1]
        self.folder = folder
        self.quoted = np.array([string_literal(file_key(p[len(self.folder):], int(s), int(m)))
                                for p, s, m in zip(paths, sizes, mtimes)], dtype=object)

    def in_order(self, index: np.ndarray) -> np.ndarray:
        return index[np.argsort(self.rank[index], kind="stable")]


_KEYS = PerObject[_Keys](64)


def _keys_of(stats: TableStats) -> _Keys:
    """The :class:`_Keys` of a statistics object while it lives, for at most 64 objects."""
    return _KEYS.get(stats, lambda: _Keys(stats.paths, stats.sizes, stats.mtimes))


def _filter(keys: _Keys, skipped: np.ndarray, kept_sizes: Sequence[int], ranges: NameRanges | None = None,
            ranged_sizes: Sequence[int] = ()) -> str:
    skipped = keys.in_order(skipped)
    skipped_sizes = set(np.unique(keys.folded[skipped]).tolist())
    parts = [_ranges_sql(ranges)] if ranges is not None else []
    if len(skipped):
        parts.append(f"NOT ({_size_in(skipped_sizes)} AND {_keys_in(keys, skipped)})")
    text = " AND ".join(parts)
    kept = set(np.unique(folded_sizes(np.asarray(kept_sizes, dtype=np.int64))).tolist())
    skipped_sizes |= set(np.unique(folded_sizes(np.asarray(ranged_sizes, dtype=np.int64))).tolist())
    if 0 < len(kept) <= SWITCH_VALUES and not kept & skipped_sizes:
        return f"({_size_in(kept)} OR {text})"
    return f"({text})" if len(parts) > 1 else text


def _ranges_sql(ranges: NameRanges) -> str:
    """``NOT (<name in a run> AND <in the folder> AND <written when the ranged files were>)``
    (``rewriter/name_ranges.py`` says why this skips only the files of the runs). Spark evaluates it again on
    every row it reads; the name test comes first, so a row of a kept file stops there, after about log2(runs)
    + 2 comparisons (:func:`names_in_runs`)."""
    mtime = exp.Anonymous(this="unix_micros", expressions=[_metadata("file_modification_time")]).sql("spark")
    return (f"NOT ({names_in_runs(ranges.runs)} AND startswith({_PATH_SQL}, {string_literal(ranges.folder)}) "
            f"AND {mtime} BETWEEN {ranges.oldest} AND {ranges.newest})")


def names_in_runs(runs: Sequence[tuple[str, str]]) -> str:
    """Whether the file's name is in one of ``runs`` (disjoint, in name order), as a binary search: a CASE on the
    first name of the middle run, down to ``BETWEEN`` one run's ends. An OR of the runs costs a row of a kept
    file two comparisons per run, which with 16 runs tripled the CPU time of a scan (docs/results/name-ranges.md)."""
    name = _metadata("file_name").sql("spark")
    if len(runs) == 1:
        first, last = runs[0]
        return f"{name} BETWEEN {string_literal(first)} AND {string_literal(last)}"
    half = len(runs) // 2
    return (f"CASE WHEN {name} < {string_literal(runs[half][0])} THEN {names_in_runs(runs[:half])} "
            f"ELSE {names_in_runs(runs[half:])} END")


def _keys_in(keys: _Keys, chosen: np.ndarray) -> str:
    """``<key> IN (...)`` for these files. When the files share a folder (a table's files do), the keys hold
    the paths after it and the test starts with ``startswith(path, '<folder>')``: the same identities in about
    two thirds of the text (a key then pins the folder and the rest of the path, so the whole path)."""
    listed = ", ".join(keys.quoted[chosen])
    if not keys.folder:
        return f"{_KEY_SQL} IN ({listed})"
    rest = exp.Substring(this=_metadata("file_path"), start=exp.Literal.number(len(keys.folder) + 1))
    return f"startswith({_PATH_SQL}, {string_literal(keys.folder)}) AND {_key_sql(rest)} IN ({listed})"


def whole_keys_in(chosen: Sequence[tuple[str, int, int]]) -> str:
    """``<key> IN (...)`` over whole paths (the filter's first forms, measured in docs/results/prune-filter.md)."""
    paths, sizes, mtimes = zip(*chosen) if chosen else ((), (), ())
    keys = _Keys(np.array(paths, dtype=object), np.array(sizes, dtype=np.int64), np.array(mtimes, dtype=np.int64), "")
    return _keys_in(keys, keys.in_order(np.arange(len(chosen))))


def _size_in(folded: set[int]) -> str:
    """The folded size among ``folded``: a switch when the list is short, else a hash set (SWITCH_VALUES)."""
    return f"{SIZE_SQL if len(folded) <= SWITCH_VALUES else SIZE_SET_SQL} IN ({', '.join(map(str, sorted(folded)))})"


def quoted(name: str) -> str:
    """A name as a Spark identifier, always in backticks: sqlglot quotes only names outside ``[_a-zA-Z][a-zA-Z0-9_]*`` (Python's word class),
    and Spark reads a bare ``null`` or ``true`` as a literal, ``case`` as a keyword, and ``kä`` as an error."""
    return exp.to_identifier(name, quoted=True).sql("spark")


def table_span(table: exp.Table) -> tuple[int, int]:
    """Character offsets [start, end) of a table name (catalog.db.table, without its alias) in the text."""
    parts = [table.args.get(k) for k in ("catalog", "db", "this")]
    spans = [(p.meta.get("start"), p.meta.get("end")) for p in parts if isinstance(p, exp.Identifier)]
    if not spans or any(s is None or e is None for s, e in spans):
        raise RewriteError("no source position for a table reference")
    return min(s for s, _ in spans), max(e for _, e in spans) + 1


def splice(sql: str, tables: Sequence[exp.Table], filters: Mapping[int, str]) -> str:
    """The original text with each table ``tables[ref]`` for ``ref`` in ``filters`` replaced."""
    edits = []
    for ref, condition in filters.items():
        table = tables[ref]
        start, end = table_span(table)
        name_text = sql[start:end]
        suffix = "" if table.args.get("alias") else f" AS {quoted(table.name)}"
        replacement = f"(SELECT * FROM {name_text} WHERE {condition}){suffix}"
        edits.append((start, end, replacement))
    edits.sort()
    for (s1, e1, _), (s2, _, _) in zip(edits, edits[1:]):
        if s2 < e1:
            raise RewriteError("overlapping table references")
    parts, at = [], 0  # joined once: the replacements can be megabytes, and copying the text per edit shows
    for start, end, replacement in edits:
        parts += [sql[at:start], replacement]
        at = end
    parts.append(sql[at:])
    return "".join(parts)
