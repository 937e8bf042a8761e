"""Answers from statistics: the result of a statement that the statistics store holds exactly, computed without
reading a file (issue 17, part 1). BI tools send many of them: a row count for a table browser, the MIN and MAX
of a date column to draw a filter, the distinct values of a column to fill a drop-down.

Statements answered, all over one catalog table with an optional ``WHERE`` and ``LIMIT n``:

- **aggregates** without ``GROUP BY``: ``COUNT(*)``, ``COUNT(<literal>)``, ``COUNT(col)``, ``MIN(col)``,
  ``MAX(col)``, any number of them, each with or without an alias;
- **groups** (``GROUP BY`` columns, or ``SELECT DISTINCT`` of columns) whose key columns hold one value (or only
  NULL) in each file that counts, as a partition column does: the key columns and the aggregates above, each group
  from the files holding its key;
- **distinct values** of one string column that need not be constant in a file: ``SELECT DISTINCT c`` or
  ``SELECT c ... GROUP BY c``, from complete value lists;
- with ``ORDER BY`` of output columns (by name, alias, expression or position) in either direction and NULL
  order. Rows that tie on every key are in no defined order, in Spark as here.

Why an answer is exact, file by file (``stats_answer``):

1. Every file Spark would read is described by statistics of its current identity: the table's listing, taken
   now, holds no file the store does not describe (``TableStats.covered`` over ``table_stats(fresh_listing=
   True)``), and the store's rows of files that changed or are gone are not used. Files described from their
   Parquet footers only (added since the statistics job ran, by a writer Dipper did not see) are not answered
   from: the job reads each file as Spark reads the table, a footer does not (a ``._COPYING_`` file, a table
   option such as ``pathGlobFilter``). Of a partitioned table, Spark reads the partitions the catalog lists,
   not every folder under the location (a partition dropped from an external table keeps its files; a folder
   written but never added is not read): the answer names the partition folders of the files it counts
   (``Answer.folders``) and the caller checks each is a partition the catalog lists, asked in the user's own
   session (``proxy/catalog_check.catalog_partitions``; a file read under two partitions refuses collection).
   A TIMESTAMP partition column has no statistics (stats/loader.py: Spark reads its values in the reader's
   time zone). What is not modelled: a partition another application gave a location of its own (moved
   while its old folder kept its files, or added outside the table's folder, whose files the listing never
   sees; through the proxy, any ``ALTER TABLE`` drops the table's statistics), or dropped within the session's
   ``proxy.analysis_cache_seconds`` of the last ``SHOW PARTITIONS``; and a session whose Spark caches the
   table's file listing from before an outside writer changed the folder (until ``REFRESH TABLE``) answers
   from that listing, and Dipper from the folder, unless the caller has Spark's session list the table again
   first: the proxy does (``REFRESH TABLE`` in the client's session) whenever the session may hold a listing
   other than the one the answer was taken from (``Answer.listing``), which refreshes a ``CACHE TABLE`` too.
2. The ``WHERE`` clause splits the files in two, or the statement is not answered. A file is *ruled out* when the
   file evaluator finds no row of it that can satisfy the clause (``rewriter/evaluate.py``: CANNOT_MATCH), and
   *taken whole* when every conjunct is TRUE on every row of it (``rewriter/implication.must_match``). A file that
   is neither holds rows the statistics cannot count. No conjunct may raise an error on any row
   (``rewriter/raising.py``): Spark evaluates it on every row of the ruled-out files too, and an error is a
   result.
3. Over the files taken whole, the aggregates follow from per-file statistics that are exact, not bounds: row
   counts; null counts (known for every file, else no answer); min and max of files that hold a value, which are
   values of the file for integers, decimals, dates and timestamps; for strings only the complete value lists
   (every file has one, else no answer), since string bounds may be a footer's truncated prefixes. Floating-point
   columns are not answered (NaN and -0.0 order), nor columns without statistics.
4. The values are Spark's: ``COUNT`` is BIGINT and 0 over no row, ``MIN``/``MAX`` keep the column's type and are
   NULL over no value, strings order by code point (UTF-8 byte order, Spark's binary collation), ``ORDER BY``
   puts NULL first ascending and last descending unless told. Timestamps are shown in the session's time zone,
   so a session whose zone is unknown gets no timestamp answer, nor a timestamp before 1900 (local mean time
   offsets, on which Spark's formatters and Python's zone database need not agree). A setting the rewriter does not model
   (``rewriter/session.py``) turns answers off for the session, as it turns pruning off.

The caller (``proxy/stats_answers.py``) still has Spark analyse the statement in the user's session, which
checks access and gives the result's column names and types (``types`` here is what the statistics say the
types are; a disagreement means no answer), and checks that the catalog still reads the table where the
statistics were taken.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import hashlib
import time
import zoneinfo
from typing import Any
from urllib.parse import unquote

import numpy as np
import sqlglot
from sqlglot import exp

from rewriter.budget import deadline
from rewriter.evaluate import might_match
from rewriter.implication import must_match
from rewriter.join_tree import conjuncts
from rewriter.joined_filter import translator_for
from rewriter.modelled import unmodelled
from rewriter.predicate import And
from rewriter.raising import can_raise, scope_kinds
from rewriter.rewrite import RewriteContext, column_kinds, schema_of
from rewriter.table_refs import annotate, emittable, resolve
from rewriter.spark.zones import checked
from stats.freshness import location_prefix
from stats.model import EPOCH_DATE, EPOCH_UTC, EXACT, ColumnStats, TableStats

# The clauses a SELECT may carry and still be answered; any other (joins, HAVING, windows, CTEs, hints,
# LATERAL VIEW, OFFSET, CLUSTER BY, ...) means no answer.
_ALLOWED_ARGS = {"expressions", "from_", "where", "group", "order", "limit", "distinct"}
_OUTPUTS = (exp.Count, exp.Min, exp.Max, exp.Column)  # what an answered statement may select
# Before 1900 a zone's offset is local mean time, which Spark's legacy formatter (spark.sql.datetime.java8API
# off) and Python's tz database need not agree on.
_FIRST_SHOWN_MICROS = -2_208_988_800 * 1_000_000 - 18 * 3_600_000_000


class NotAnswerable(Exception):
    """Why a statement is not answered from statistics (it goes to Spark)."""


@dataclasses.dataclass(frozen=True)
class Answer:
    table: str  # db.table
    types: tuple[str, ...]  # Spark type of each output column as the statistics know it: "bigint", "date", ...
    rows: tuple[tuple[Any, ...], ...]  # int, str, decimal.Decimal, datetime.date, datetime.datetime or None
    files: int  # files whose statistics made the answer
    files_ruled_out: int  # files the WHERE clause ruled out
    stats_location: str  # where the table was when the statistics were collected (the proxy checks the catalog)
    # Of a partitioned table: the partition folders (``a=1/b=x``, as the catalog's SHOW PARTITIONS spells them)
    # of the files holding rows the answer counts; the proxy checks the catalog lists each. None: not partitioned.
    folders: frozenset[str] | None = None
    # A digest of the identity (path, size, mtime) of every file of the table's listing the answer was taken
    # from: the proxy has Spark's session list the table again unless it listed these files already.
    listing: str = ""


@dataclasses.dataclass(frozen=True)
class Attempt:
    answer: Answer | None
    why_not: str | None
    elapsed_ms: float


def stats_answer(sql: str, context: RewriteContext) -> Attempt:
    """The answer of ``sql`` from statistics, or why there is none; never raises (see the module's docstring
    for why an answer equals Spark's)."""
    started = time.perf_counter()
    try:
        over = context.budget.before_parsing(sql)
        if over is not None:  # the rewrite that follows says so in the record
            raise NotAnswerable(f"not parsed: over the rewrite budget: {over}")
        with deadline(context.budget.max_rewrite_ms):
            answer, why = _answer(sql, context), None
    except NotAnswerable as e:
        answer, why = None, str(e)
    except Exception as e:  # noqa: BLE001 - any failure means: let Spark answer
        answer, why = None, f"failed: {type(e).__name__}: {e}"
    return Attempt(answer, why, (time.perf_counter() - started) * 1000)


@dataclasses.dataclass(frozen=True)
class _Output:
    what: str  # "rows", "count", "min", "max", "value"
    column: str | None = None


def _answer(sql: str, context: RewriteContext) -> Answer:
    if not context.session.prunable:
        raise NotAnswerable("session settings the rewriter does not model: " + ", ".join(context.session.unmodelled))
    try:
        statements = [s for s in sqlglot.parse(sql, read="spark") if s is not None]
    except sqlglot.errors.SqlglotError:
        raise NotAnswerable("not parsed") from None
    if len(statements) != 1 or not isinstance(statements[0], exp.Select):
        raise NotAnswerable("not one SELECT")
    tree = statements[0]
    over = context.budget.after_parsing(tree)
    if over is not None:
        raise NotAnswerable(f"not parsed: over the rewrite budget: {over}")
    extra = {k for k, v in tree.args.items() if v} - _ALLOWED_ARGS
    if extra:
        raise NotAnswerable(f"a SELECT with {', '.join(sorted(extra))}")
    source = tree.args["from_"].this if tree.args.get("from_") is not None else None
    if not isinstance(source, exp.Table):
        raise NotAnswerable("not a SELECT from one table")
    why = emittable(source, tree, source.alias_or_name)  # no sample, time travel, hint ... on the table
    if why is not None:
        raise NotAnswerable(why)
    if any(isinstance(n, (exp.Select, exp.Subquery)) for n in tree.walk() if n is not tree):
        raise NotAnswerable("a subquery")
    why = unmodelled(sql, tree)
    if why is not None:
        raise NotAnswerable(f"not modelled: {why}")
    if not source.db and (context.shadow_all_unqualified or source.name.lower() in context.shadowed):
        raise NotAnswerable("the name may be a temporary view of this session")
    for projection in tree.expressions:  # before qualifying and listing: most statements stop here
        if not isinstance(projection.unalias(), _OUTPUTS):
            raise NotAnswerable(_not_an_output(projection.unalias()))
    tables = annotate(tree)
    refs, scopes = resolve(tree, context.database, schema_of(context.stats.schemas()))
    if len(refs) != 1 or len(scopes) != 1 or len(tables) != 1:
        raise NotAnswerable("not a SELECT from one table")
    ref, scope = refs[0], scopes[0]
    if ref.refused:
        raise NotAnswerable(ref.refused)
    if ref.table in context.unusable:
        raise NotAnswerable(context.unusable[ref.table])
    select = scope.expression
    assert isinstance(select, exp.Select)
    outputs, keys = _outputs(select, tree, ref.alias)
    if keys is not None and not _distinct_strings(outputs, keys):
        # GROUP BY keys not constant in some file: known from the listing the rewrite takes next anyway, before
        # the fresh one (remote storage's slowest call), which BI tools' GROUP BY of any column would cost.
        cached = context.stats.table_stats(ref.table)
        if cached is not None:
            try:
                _file_keys(cached, keys, np.ones(cached.n_files, dtype=bool), context)
            except _NotConstant as e:
                raise NotAnswerable(f"a GROUP BY key that is not constant in every file: {e}") from None
    stats = context.stats.table_stats(ref.table, fresh_listing=True)
    if stats is None:
        raise NotAnswerable(f"no statistics for {ref.table}")
    if not stats.covered:
        raise NotAnswerable(f"{stats.unknown_files} files of {ref.table} have no fresh statistics")
    if stats.from_footer is not None and stats.from_footer.any():
        raise NotAnswerable("files described from their footers only (added since the statistics job ran)")
    taken, ruled_out = _files_taken(select, scope, ref.alias, stats, context)
    schema = context.stats.schemas().get(ref.table, {})
    types = tuple("bigint" if o.what in ("rows", "count") else schema[o.column] for o in outputs)
    if keys is None:
        rows = [tuple(_aggregate(stats, o, taken, context) for o in outputs)]
    else:
        rows = _grouped(stats, outputs, keys, taken, context)
    rows = _ordered(rows, select, outputs)
    limit = _limit(tree)
    if limit is not None:
        rows = rows[:limit]
    folders = _folders(stats, taken) if stats.partition_columns else None
    return Answer(ref.table, types, tuple(rows), int(taken.sum()), int(ruled_out.sum()), stats.location, folders,
                  listing_digest(stats))


def listing_digest(stats: TableStats) -> str:
    """A digest of the identities of ``stats``' files (all the files Spark lists, as the answer needs them covered)."""
    digest = hashlib.blake2b(digest_size=16)
    for path, size, mtime in sorted(zip(stats.paths.tolist(), stats.sizes.tolist(), stats.mtimes.tolist())):
        digest.update(f"{path}\0{size}\0{mtime}\n".encode())
    return digest.hexdigest()


def _outputs(select: exp.Select, original: exp.Select, alias: str) -> tuple[list[_Output], list[str] | None]:
    """What each output column is, and the group key columns (None: one row of aggregates), from the qualified
    SELECT; the shape rules of the module's docstring."""
    outputs = [_output(p.unalias(), alias) for p in select.expressions]
    values = [o.column for o in outputs if o.what == "value"]
    group = select.args.get("group")
    distinct = original.args.get("distinct")
    if distinct is not None and (distinct.args.get("on") or group is not None):
        raise NotAnswerable("DISTINCT ON, or DISTINCT with GROUP BY")
    if group is not None:
        if group.args.get("rollup") or group.args.get("cube") or group.args.get("grouping_sets") or \
                group.args.get("totals") or not group.expressions:
            raise NotAnswerable("GROUP BY with ROLLUP, CUBE or GROUPING SETS")
        keys = [_column(k, alias) for k in group.expressions]
        if any(v not in keys for v in values):
            raise NotAnswerable("a selected column that is not a GROUP BY key")
        return outputs, list(dict.fromkeys(keys))
    if distinct is not None:
        if len(values) != len(outputs):
            raise NotAnswerable("DISTINCT with aggregates")
        return outputs, list(dict.fromkeys(values))  # type: ignore[arg-type]
    if values:
        raise NotAnswerable("aggregates beside plain columns" if len(values) < len(outputs) else
                            "a plain column without DISTINCT or GROUP BY (every row)")
    if original.args.get("order"):
        raise NotAnswerable("ORDER BY with aggregates and no GROUP BY")
    return outputs, None


def _output(node: exp.Expression, alias: str) -> _Output:
    if isinstance(node, exp.Count):
        arg = node.this
        if node.expressions:
            raise NotAnswerable("COUNT of several arguments")
        if isinstance(arg, exp.Star) or isinstance(arg, exp.Literal):
            return _Output("rows")  # a literal is never NULL: every row counts
        return _Output("count", _column(arg, alias))
    if isinstance(node, (exp.Min, exp.Max)):
        if node.expressions:
            raise NotAnswerable(f"{node.key.upper()} of several arguments")
        return _Output(node.key, _column(node.this, alias))
    if isinstance(node, exp.Column):
        return _Output("value", _column(node, alias))
    raise NotAnswerable(_not_an_output(node))


def _not_an_output(node: exp.Expression) -> str:
    return f"{node.sql('spark')[:60]} is not COUNT, MIN, MAX or a column"


def _column(node: exp.Expression, alias: str) -> str:
    if not isinstance(node, exp.Column) or node.table != alias:
        raise NotAnswerable(f"{node.sql('spark')[:60]} is not a column of the table")
    return node.name.lower()


def _files_taken(select: exp.Select, scope: Any, alias: str, stats: TableStats,
                 context: RewriteContext) -> tuple[np.ndarray, np.ndarray]:
    """(files whose every row satisfies the WHERE clause, files none of whose rows can): together every file."""
    where = select.args.get("where")
    parts = conjuncts(where.this if where is not None else None)
    taken = np.ones(stats.n_files, dtype=bool)
    if not parts:
        return taken, ~taken
    translator = translator_for(stats, alias, context.session)
    kind_of = scope_kinds(scope, column_kinds(context), context.database)
    for part in parts:
        columns = list(part.find_all(exp.Column))
        if not columns or any(c.table != alias for c in columns):
            raise NotAnswerable(f"a WHERE conjunct not over the table's columns: {part.sql('spark')[:80]}")
        if can_raise(part, kind_of, context.session.ansi):
            raise NotAnswerable(f"a WHERE conjunct that may raise an error: {part.sql('spark')[:80]}")
        taken &= must_match(part, translator, stats)
    ruled_out = ~might_match(And(tuple(translator.translate(p) for p in parts)), stats)
    taken &= ~ruled_out
    if not (taken | ruled_out).all():
        raise NotAnswerable(f"the WHERE clause decides {int((~(taken | ruled_out)).sum())} files only in part")
    return taken, ruled_out


def _with_values(col: ColumnStats, stats: TableStats, taken: np.ndarray) -> np.ndarray:
    if (col.null_count[taken] < 0).any():
        raise NotAnswerable("null counts unknown")
    return taken & (col.null_count < stats.rows)


def _aggregate(stats: TableStats, o: _Output, taken: np.ndarray, context: RewriteContext) -> Any:
    if o.what == "rows":
        return int(stats.rows[taken].sum())
    col = stats.columns.get(o.column or "")
    if col is None:
        raise NotAnswerable(f"no statistics for column {o.column}")
    holding = _with_values(col, stats, taken)
    if o.what == "count":
        return int((stats.rows[taken] - col.null_count[taken]).sum())
    kind = col.kind.name
    if kind in ("float", "timestamp_ntz"):
        raise NotAnswerable(f"MIN/MAX of a {kind} column")
    if not holding.any():
        return None
    if kind == "string":  # bounds may be a footer's truncated prefixes; value lists are the values
        values = _listed_values(col, holding, o.column)
        return str(min(values) if o.what == "min" else max(values))
    if not col.known[holding].all():
        raise NotAnswerable(f"bounds of {o.column} unknown in some files")
    values = (col.lo if o.what == "min" else col.hi)[holding]
    value = min(values) if o.what == "min" else max(values)
    return _spark_value(value, col, context)


def _listed_values(col: ColumnStats, holding: np.ndarray, column: str | None) -> list[Any]:
    """Every distinct value of a string column in the files ``holding``, from their complete value lists."""
    lists = col.values
    if not holding.any():
        return []
    if lists is None or not lists.present[holding].all():
        raise NotAnswerable(f"files without a complete value list of {column}")
    return sorted(set(lists.values[holding[lists.file]].tolist()))


def _spark_value(value: Any, col: ColumnStats, context: RewriteContext) -> Any:
    """A statistics value (``stats/model.py``'s domains) as the Python value of Spark's result."""
    kind = col.kind
    try:
        if kind.name == "int":
            return int(value)
        if kind.name == "string":
            return str(value)
        if kind.name == "decimal":
            return decimal.Decimal(int(value)).scaleb(-kind.scale, EXACT)
        if kind.name == "date":
            return EPOCH_DATE + dt.timedelta(days=int(value))
        if kind.name == "timestamp":
            if context.session.time_zone is None:
                raise NotAnswerable("a timestamp in a session whose time zone is not known")
            if value < _FIRST_SHOWN_MICROS:
                raise NotAnswerable("a timestamp before 1900, which Spark may show with another zone offset")
            shown = EPOCH_UTC + dt.timedelta(microseconds=int(value))
            if not checked(context.session.time_zone, shown.year + 1):  # (a year's margin for the zone's offset)
                raise NotAnswerable("a timestamp after 2098, whose zone offset was not compared with the backend's")
            return shown.astimezone(zoneinfo.ZoneInfo(context.session.time_zone))
    except (OverflowError, ValueError):
        raise NotAnswerable(f"a {kind.name} value outside the years 1-9999") from None
    raise NotAnswerable(f"values of kind {kind.name}")


def _grouped(stats: TableStats, outputs: list[_Output], keys: list[str], taken: np.ndarray,
             context: RewriteContext) -> list[tuple[Any, ...]]:
    """One row per group. Each file that counts holds one key (``_file_key``), so a group's aggregates are those of
    its files; the one exception answered is the distinct values of one string column, from value lists."""
    try:
        file_keys = _file_keys(stats, keys, taken, context)
    except _NotConstant as e:
        if _distinct_strings(outputs, keys):
            return [(v,) * len(outputs) for v in _distinct_values(stats, keys[0], taken)]
        raise NotAnswerable(f"a GROUP BY key that is not constant in every file: {e}") from None
    groups: dict[tuple[Any, ...], tuple[tuple[Any, ...], np.ndarray]] = {}
    for i, key in file_keys.items():
        groups.setdefault(tuple(map(_instant, key)), (key, np.zeros(stats.n_files, dtype=bool)))[1][i] = True
    return [tuple(key[keys.index(o.column)] if o.what == "value" else _aggregate(stats, o, files, context)  # type: ignore[arg-type]
                  for o in outputs) for key, files in groups.values()]


def _instant(value: Any) -> Any:
    """A value to group and order by: a timestamp by its instant. Python compares two datetimes of one zone by
    their wall-clock time (``fold`` aside), so two instants of the hour a daylight-saving change repeats would
    be one group, or sort backwards; Spark compares instants."""
    return value.astimezone(dt.timezone.utc) if isinstance(value, dt.datetime) else value


def _distinct_strings(outputs: list[_Output], keys: list[str]) -> bool:
    """Whether the statement asks only the distinct values of one column (answered from value lists too)."""
    return len(keys) == 1 and all(o.what == "value" for o in outputs)


def _file_keys(stats: TableStats, keys: list[str], taken: np.ndarray, context: RewriteContext) -> dict[int, tuple[Any, ...]]:
    """File -> its one key, for each file taken that holds a row; :class:`_NotConstant` if a file holds two."""
    return {int(i): tuple(_file_key(stats, c, int(i), context) for c in keys)
            for i in np.flatnonzero(taken & (stats.rows > 0))}


class _NotConstant(Exception):
    """A column holds more than one value (or values and NULLs) in a file."""


def _file_key(stats: TableStats, column: str, i: int, context: RewriteContext) -> Any:
    """The one value column ``column`` holds in every row of file ``i`` (None: only NULLs), as Spark's value."""
    col = stats.columns.get(column)
    if col is None:
        raise NotAnswerable(f"no statistics for column {column}")
    nulls = int(col.null_count[i])
    if nulls < 0:
        raise NotAnswerable("null counts unknown")
    if nulls == stats.rows[i]:
        return None
    if nulls > 0:
        raise _NotConstant(f"{column} holds values and NULLs")
    if col.kind.name == "string":  # bounds may be truncated prefixes: only a value list is the value
        lists = col.values
        listed = [] if lists is None or not lists.present[i] else lists.values[lists.file == i].tolist()
        if len(listed) != 1:
            raise _NotConstant(f"{column} has no single listed value")
        return str(listed[0])
    if col.kind.name in ("float", "timestamp_ntz"):
        raise NotAnswerable(f"a {col.kind.name} GROUP BY key")
    if not col.known[i] or col.lo[i] != col.hi[i]:
        raise _NotConstant(f"{column} holds more than one value")
    return _spark_value(col.lo[i], col, context)


def _distinct_values(stats: TableStats, column: str, taken: np.ndarray) -> list[Any]:
    col = stats.columns.get(column)
    if col is None or col.kind.name != "string":
        raise NotAnswerable("distinct values of a column other than a string column with statistics")
    values: list[Any] = list(_listed_values(col, _with_values(col, stats, taken), column))
    if bool((col.null_count[taken] > 0).any()):
        values.append(None)
    return values


def _ordered(rows: list[tuple[Any, ...]], select: exp.Select, outputs: list[_Output]) -> list[tuple[Any, ...]]:
    """``rows`` in the order of the statement's ``ORDER BY`` (Spark's: NULL first ascending, last descending,
    unless told; strings by code point, which is UTF-8 byte order, Spark's binary collation). Without one,
    sorted ascending: any order is Spark's then, and this one is repeatable."""
    order = select.args.get("order")
    keys = [(i, False, True) for i in range(len(outputs))] if order is None else \
        [(_output_index(o, select), bool(o.args.get("desc")), bool(o.args.get("nulls_first"))) for o in order.expressions]
    for index, descending, nulls_first in reversed(keys):  # stable sorts, last key first
        present = sorted((r for r in rows if r[index] is not None), key=lambda r: _instant(r[index]),
                         reverse=descending)
        absent = [r for r in rows if r[index] is None]
        rows = absent + present if nulls_first else present + absent
    return rows


def _output_index(ordered: exp.Ordered, select: exp.Select) -> int:
    """Which output column an ``ORDER BY`` key is: a position, an output's alias or name, or its expression."""
    target = ordered.this
    projections = select.expressions
    if isinstance(target, exp.Literal) and not target.is_string and target.this.isdigit():
        if 1 <= int(target.this) <= len(projections):
            return int(target.this) - 1
        raise NotAnswerable("ORDER BY a position past the outputs")
    for i, projection in enumerate(projections):
        if target == projection.unalias() or target == projection:
            return i
    if isinstance(target, exp.Column) and not target.table:
        named = [i for i, p in enumerate(projections) if p.alias_or_name.lower() == target.name.lower()]
        if len(named) == 1:
            return named[0]
    raise NotAnswerable(f"ORDER BY {target.sql('spark')[:60]}, which is not an output column")


def _folders(stats: TableStats, taken: np.ndarray) -> frozenset[str]:
    """The partition folders (paths relative to the table's location) of the files holding rows the answer
    counts; a file elsewhere than in a folder under the location names no partition the catalog lists."""
    prefix = location_prefix(stats.location)
    folders = set()
    for path in stats.paths[taken & (stats.rows > 0)]:
        # Spark's file paths are URIs (a space is %20, % is %25): decoded, the folder's name on storage, which is
        # how SHOW PARTITIONS spells a partition (its values escaped as Spark names their folders).
        folder = unquote(str(path)[len(prefix):].rpartition("/")[0]) if str(path).startswith(prefix) else "/"
        folders.add(folder)
    return frozenset(folders)


def _limit(tree: exp.Select) -> int | None:
    limit = tree.args.get("limit")
    if limit is None:
        return None
    n = limit.expression
    if limit.args.get("offset") or not isinstance(n, exp.Literal) or n.is_string or not n.this.isdigit():
        raise NotAnswerable("LIMIT other than a whole number")
    return int(n.this)
