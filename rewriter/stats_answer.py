"""Answers from statistics: the result of a statement that the statistics store holds exactly, computed without
reading a file (issue 17, part 1). BI tools send many of them: a row count for a table browser, the MIN and MAX
of a date column to draw a filter, the distinct values of a column to fill a drop-down.

Statements answered, all over one catalog table with an optional ``WHERE`` and ``LIMIT n``:

- **aggregates** without ``GROUP BY``: ``COUNT(*)``, ``COUNT(<literal>)``, ``COUNT(col)``, ``MIN(col)``,
  ``MAX(col)``, any number of them, each with or without an alias;
- **distinct values** of one string column: ``SELECT DISTINCT c`` or ``SELECT c ... GROUP BY c``, with or
  without ``ORDER BY c`` (or ``ORDER BY 1``) in either direction and NULL order.

Why an answer is exact, file by file (``stats_answer``):

1. Every file Spark would read is described by statistics of its current identity: the table's listing, taken
   now, holds no file the store does not describe (``TableStats.covered`` over ``table_stats(fresh_listing=
   True)``), and the store's rows of files that changed or are gone are not used. Files described from their
   Parquet footers only (added since the statistics job ran, by a writer Dipper did not see) are not answered
   from: the job reads each file as Spark reads the table, a footer does not (a ``._COPYING_`` file, a table
   option such as ``pathGlobFilter``). Partitioned tables are not answered: which partition folders Spark
   reads is the catalog's list, not the folder's listing. What is not modelled: a session whose Spark caches
   the table's file listing from before an outside writer changed the folder (until ``REFRESH TABLE``)
   answers from that listing, and Dipper from the folder; likewise ``CACHE TABLE``.
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
import time
import zoneinfo
from typing import Any

import numpy as np
import sqlglot
from sqlglot import exp

from rewriter.evaluate import might_match
from rewriter.implication import must_match
from rewriter.join_tree import conjuncts
from rewriter.joined_filter import translator_for
from rewriter.modelled import unmodelled
from rewriter.predicate import And
from rewriter.raising import can_raise, scope_kinds
from rewriter.rewrite import RewriteContext, column_kinds, schema_of
from rewriter.table_refs import annotate, emittable, resolve
from stats.model import EXACT, ColumnStats, TableStats

# The clauses a SELECT may carry and still be answered; any other (joins, HAVING, windows, CTEs, hints,
# LATERAL VIEW, OFFSET, CLUSTER BY, ...) means no answer.
_ALLOWED_ARGS = {"expressions", "from_", "where", "group", "order", "limit", "distinct"}
_OUTPUTS = (exp.Count, exp.Min, exp.Max, exp.Column)  # what an answered statement may select
_EPOCH = dt.date(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
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
    outputs = _outputs(select, tree, ref.alias)
    stats = context.stats.table_stats(ref.table, fresh_listing=True)
    if stats is None:
        raise NotAnswerable(f"no statistics for {ref.table}")
    if not stats.covered:
        raise NotAnswerable(f"{stats.unknown_files} files of {ref.table} have no fresh statistics")
    if stats.partition_columns:
        raise NotAnswerable("a partitioned table (the catalog, not the folder, says which partitions are read)")
    if stats.from_footer is not None and stats.from_footer.any():
        raise NotAnswerable("files described from their footers only (added since the statistics job ran)")
    taken, ruled_out = _files_taken(select, scope, ref.alias, stats, context)
    schema = context.stats.schemas().get(ref.table, {})
    types = tuple("bigint" if o.what in ("rows", "count") else schema[o.column] for o in outputs)
    if outputs[0].what == "value":
        rows = _distinct_values(stats, outputs[0].column, taken, tree)
    else:
        rows = [tuple(_aggregate(stats, o, taken, context) for o in outputs)]
    limit = _limit(tree)
    if limit is not None:
        rows = rows[:limit]
    return Answer(ref.table, types, tuple(rows), int(taken.sum()), int(ruled_out.sum()), stats.location)


def _outputs(select: exp.Select, original: exp.Select, alias: str) -> list[_Output]:
    """What each output column is, from the qualified SELECT; the shape rules of the module's docstring."""
    outputs = [_output(p.unalias(), alias) for p in select.expressions]
    aggregates = [o for o in outputs if o.what != "value"]
    if aggregates and len(aggregates) != len(outputs):
        raise NotAnswerable("aggregates beside plain columns")
    if aggregates:
        if original.args.get("group") or original.args.get("distinct") or original.args.get("order"):
            raise NotAnswerable("GROUP BY, DISTINCT or ORDER BY with aggregates")
        return outputs
    if len(outputs) != 1:
        raise NotAnswerable("more than one plain column")
    column = outputs[0].column
    group = select.args.get("group")
    distinct = original.args.get("distinct")
    if distinct is not None and (distinct.args.get("on") or group is not None):
        raise NotAnswerable("DISTINCT ON, or DISTINCT with GROUP BY")
    if group is not None:
        keys = group.expressions
        if group.args.get("rollup") or group.args.get("cube") or group.args.get("grouping_sets") or len(keys) != 1 \
                or not _is_column(keys[0], alias, column):
            raise NotAnswerable("GROUP BY other than the one selected column")
    elif distinct is None:
        raise NotAnswerable("a plain column without DISTINCT or GROUP BY (every row)")
    return outputs


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


def _is_column(node: exp.Expression, alias: str, column: str | None) -> bool:
    return isinstance(node, exp.Column) and node.table == alias and node.name.lower() == column


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
            return _EPOCH + dt.timedelta(days=int(value))
        if kind.name == "timestamp":
            if context.session.time_zone is None:
                raise NotAnswerable("a timestamp in a session whose time zone is not known")
            if value < _FIRST_SHOWN_MICROS:
                raise NotAnswerable("a timestamp before 1900, which Spark may show with another zone offset")
            return (_EPOCH_UTC + dt.timedelta(microseconds=int(value))).astimezone(
                zoneinfo.ZoneInfo(context.session.time_zone))
    except (OverflowError, ValueError):
        raise NotAnswerable(f"a {kind.name} value outside the years 1-9999") from None
    raise NotAnswerable(f"values of kind {kind.name}")


def _distinct_values(stats: TableStats, column: str | None, taken: np.ndarray, tree: exp.Select) -> list[tuple[Any]]:
    col = stats.columns.get(column or "")
    if col is None or col.kind.name != "string":
        raise NotAnswerable("distinct values of a column other than a string column with statistics")
    values = _listed_values(col, _with_values(col, stats, taken), column)
    has_null = bool((col.null_count[taken] > 0).any())
    order = tree.args.get("order")
    descending, nulls_first = False, True
    if order is not None:
        if len(order.expressions) != 1:
            raise NotAnswerable("ORDER BY of several keys")
        key = order.expressions[0]
        target = key.this
        if not (isinstance(target, exp.Literal) and target.this == "1" and not target.is_string) and \
                not (isinstance(target, exp.Column) and target.name.lower() == column):
            raise NotAnswerable("ORDER BY other than the selected column")
        descending, nulls_first = bool(key.args.get("desc")), bool(key.args.get("nulls_first"))
    if descending:
        values.reverse()
    rows: list[tuple[Any]] = [(v,) for v in values]
    if has_null:
        rows = [(None,)] + rows if nulls_first else rows + [(None,)]
    return rows


def _limit(tree: exp.Select) -> int | None:
    limit = tree.args.get("limit")
    if limit is None:
        return None
    n = limit.expression
    if limit.args.get("offset") or not isinstance(n, exp.Literal) or n.is_string or not n.this.isdigit():
        raise NotAnswerable("LIMIT other than a whole number")
    return int(n.this)
