"""The workload a layout is made for, and what each statement asks of one table.

A workload is either the proxy's decision log (``decisions.jsonl``: the statements users ran, each with
its time and database; statements the proxy did not hand to the rewriter are left out) or a SQL file of
statements separated by ``;``. For one table, every statement is analysed as the rewriter analyses it
(``rewriter/table_refs.py``: the references to the table and the conjuncts local to each, and
``rewriter/falsify.py``: their translation over the table's statistics), so a layout is planned for the
predicates that will later prune its files, and a conjunct the rewriter cannot use cannot become a cut.
Each reference is one *scan*: a self-join reads the table twice, and each read skips blocks on its own.

**Joined filters** (the join-aware part, issue 15 §2). Where the rewriter would send a diP into a scan (a
channel of ``rewriter/join_graph.py``: an inner or semi join on one domain, nothing in between that pads
or raises), the scan reads only rows whose join column holds a key of the sender's rows that pass the
sender's predicates: ``l_orderkey IN (SELECT o_orderkey FROM orders WHERE o_orderdate < ...)``. That is a
predicate of the table's own rows, decided through the join (as seed 003 denormalises TPC-H through its
foreign keys); it restricts the scan, and it is a candidate cut, so ``store_sales`` can be laid out on
``i_category`` through ``ss_item_sk``. Senders' own joined filters are followed two hops further
(``region -> nation -> supplier -> lineitem``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Iterable
from pathlib import Path

import sqlglot
from sqlglot import exp

from layout.sample import LayoutError
from rewriter.emit import quoted
from rewriter.dip import same_domain
from rewriter.errors import RewriteError
from rewriter.join_graph import CONSTANT, Channel, channels
from rewriter.evaluate import fully_translated
from rewriter.falsify import Translator
from rewriter.predicate import And, Or, Pred, columns_of
from rewriter.session import SessionSettings
from rewriter.rewrite import RewriteContext, column_kinds
from rewriter.table_refs import TableRef, annotate, resolve, sqlglot_schema
from stats.loader import StatsLoader
from stats.model import TableStats

log = logging.getLogger("dipper.layout")


@dataclasses.dataclass(frozen=True)
class Statement:
    sql: str
    database: str
    time: str | None = None  # when it ran (decision log), for reports
    session: SessionSettings = SessionSettings()  # the settings it ran under (ANSI mode, time zone)


MAX_HOPS = 3  # joined filters followed from the scan outwards


@dataclasses.dataclass(frozen=True)
class Joined:
    """The rows whose ``column`` holds a ``key`` of some row of ``source`` that passes ``pred`` (and the
    source's own joined filters): a semi join, as a predicate of the receiving table's rows."""

    column: str  # of the receiving table
    source: str  # db.table that sends
    key: str  # its column
    pred: Pred  # the source's local conjuncts, translated over its statistics
    conjuncts: tuple[str, ...]  # the same, as Spark SQL over the source's own column names
    nested: tuple[Joined, ...] = ()
    # NOT of the conjunction (an OR of each conjunct negated): where both ``pred`` and this may hold on a
    # row, the row is not decided exactly (``layout/joined.py``, ``JoinedKeys.exact``).
    negated: Pred = And(())

    def to_dict(self) -> dict:
        return {"column": self.column, "source": self.source, "key": self.key, "conjuncts": list(self.conjuncts),
                "nested": [n.to_dict() for n in self.nested]}

    def keys_sql(self, alias: str) -> str:
        """A query of the distinct keys this filter admits, as column ``alias`` (for a join that routes rows)."""
        return f"SELECT DISTINCT {quoted(self.key)} AS {quoted(alias)} FROM {self._from_where()}"

    def _from_where(self) -> str:
        where = [f"{quoted(self.key)} IS NOT NULL"] + [f"({c})" for c in self.conjuncts] + [n.sql() for n in self.nested]
        table = ".".join(quoted(part) for part in self.source.split("."))
        return f"{table} WHERE {' AND '.join(where)}"

    def label(self) -> str:
        """A short form for reports: ``ss_sold_date_sk in date_dim(d_year = 2000)``."""
        inside = list(self.conjuncts) + [n.label() for n in self.nested]
        return f"{self.column} in {self.source.rpartition('.')[2]}({' AND '.join(inside)})"

    def sql(self, negated: bool = False) -> str:
        """Spark SQL of this filter: TRUE exactly on the rows it keeps, NULL on a NULL column, else FALSE
        (the subquery yields no NULL key, so IN is never NULL for a value). ``negated``: TRUE exactly on
        the other rows, NULLs included."""
        subquery = f"(SELECT {quoted(self.key)} FROM {self._from_where()})"
        if negated:
            return f"({quoted(self.column)} IS NULL OR {quoted(self.column)} NOT IN {subquery})"
        return f"{quoted(self.column)} IN {subquery}"


@dataclasses.dataclass(frozen=True)
class Scan:
    """One read of the table by one statement, and the conjuncts that restrict it."""

    statement: int  # index into the workload
    conjuncts: tuple[str, ...]  # as Spark SQL
    pred: Pred  # their conjunction, translated over the table's statistics
    joined: tuple[Joined, ...] = ()  # filters through joins that the rewriter's diPs would follow
    reference: int = 0  # which reference to the table in its statement (0: the first), as the rewriter lists them

    def describe(self) -> str:
        parts = list(self.conjuncts) + [j.label() for j in self.joined]
        return " AND ".join(parts) or "(no predicate: reads everything)"


@dataclasses.dataclass(frozen=True)
class Cut:
    """A candidate cut taken from the workload (seed 003 §3.4): a predicate on the table's own columns, or a
    joined filter."""

    sql: str
    pred: Pred | None = None
    joined: Joined | None = None
    negated: Pred | None = None  # a local cut's negation: a row on which both may hold is not decided exactly

    def label(self) -> str:
        return self.joined.label() if self.joined is not None else self.sql

    def holds(self) -> str:
        """SQL true exactly on the rows the cut routes left (the cut TRUE)."""
        return self.joined.sql() if self.joined is not None else f"coalesce(({self.sql}), false)"

    def fails(self) -> str:
        """SQL true exactly on the rows routed right (the cut FALSE or NULL)."""
        return self.joined.sql(negated=True) if self.joined is not None else f"NOT coalesce(({self.sql}), false)"

    def shown(self, holds: bool) -> str:
        """The cut, or its failing side, for reports (NULL rows fail: ``... IS NOT TRUE``)."""
        return self.label() if holds else f"({self.label()}) IS NOT TRUE"


@dataclasses.dataclass(frozen=True)
class TableWorkload:
    table: str
    scans: tuple[Scan, ...]
    cuts: tuple[Cut, ...]
    columns: tuple[str, ...]  # every column a scan or cut tests
    statements: int  # in the workload
    skipped: tuple[tuple[int, str], ...]  # statements not analysed, and why


_LOG = re.compile(r"\.jsonl(\.\d+)?$")  # decisions.jsonl, and its rotated decisions.jsonl.1, .2 ...
# Outcomes of decision-log records whose statement did not run as a query users waited for: a dry run, a
# statement the budget refused, one that failed or whose client went away.
_NOT_RUN = ("explained", "refused", "failed", "cancelled")


def read_workload(path: Path, database: str = "default", session: SessionSettings = SessionSettings()) -> list[Statement]:
    """The statements of a decision log (``*.jsonl``, rotated ones included) or of a SQL file (``;``-separated,
    each kept as written); ``database`` and ``session`` are a SQL file's statements' (a log records each one's)."""
    if not path.exists():
        raise LayoutError(f"workload {path} does not exist; pass the proxy's decision log "
                          f"(<paths.logs>/decisions.jsonl) or a file of SQL statements")
    text = path.read_text(encoding="utf-8")
    log_file = bool(_LOG.search(path.name))
    if log_file:
        out = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                raise LayoutError(f"{path}:{n} is not a JSON line; is this a decision log?") from None
            if "decision" not in record or not record.get("statement") or \
                    str(record.get("outcome", "")).startswith(_NOT_RUN):
                continue
            settings = record.get("settings") or {}
            ran_under = SessionSettings(ansi=settings.get("ansi", True), time_zone=settings.get("time_zone"),
                                        unmodelled=tuple(settings.get("unmodelled", ())))
            out.append(Statement(record["statement"], record.get("database") or database, record.get("time"), ran_under))
    else:
        out = [Statement(sql, database, None, session) for sql in split_statements(text)]
    if not out:
        raise LayoutError(f"workload {path} holds no statements" +
                          (" that ran as queries (run queries through the proxy first)" if log_file else ""))
    return out


def split_statements(text: str) -> list[str]:
    """The statements of a SQL text, as written, split at ``;`` outside quotes and comments (sqlglot's
    tokenizer); a piece holding only comments is no statement."""
    try:
        tokens = sqlglot.tokenize(text, read="spark")
    except sqlglot.errors.SqlglotError as e:
        raise LayoutError(f"the workload file cannot be read as Spark SQL: {str(e).splitlines()[0]}") from None
    out, start, seen = [], 0, False
    for token in tokens:
        if token.token_type == sqlglot.TokenType.SEMICOLON:
            if seen:
                out.append(text[start:token.start].strip())
            start, seen = token.end + 1, False
        else:
            seen = True
    if seen:
        out.append(text[start:].strip())
    return out


def table_workload(statements: Iterable[Statement], table: str, loader: StatsLoader) -> TableWorkload:
    """The scans of ``table`` (``db.name``) in ``statements`` and the candidate cuts they offer."""
    table = table.lower()
    stats = loader.table_stats(table)
    if stats is None:
        raise LayoutError(f"no statistics for {table}; collect them first (python -m stats collect {table})")
    schema = sqlglot_schema(loader.schemas())
    scans: list[Scan] = []
    cuts: dict[tuple[str, SessionSettings], Cut] = {}  # a cut's translation depends on the session (time zone)
    skipped = []
    statements = list(statements)
    for index, st in enumerate(statements):
        session = st.session
        try:
            tree = sqlglot.parse_one(st.sql, read="spark")
            annotate(tree)
            refs, scopes = resolve(tree, st.database, schema)
            links = channels(scopes, column_kinds(RewriteContext(loader, database=st.database, session=session)),
                             session.ansi) if any(r.table == table for r in refs) else []
        except (sqlglot.errors.SqlglotError, RewriteError) as e:
            skipped.append((index, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"))
            continue
        by_id = {r.ref_id: r for r in refs}
        for k, ref in enumerate(r for r in refs if r.table == table):
            if ref.refused or not session.prunable:
                scans.append(Scan(index, (), And(()), (), k))  # read whole: it skips nothing, whatever the layout
                continue
            translator = _translator(stats, ref.alias, session)
            preds = [translator.translate(c) for c in ref.predicates]
            joined = _joined(ref, stats, links, by_id, loader, session, {ref.ref_id}, MAX_HOPS)
            scans.append(Scan(index, tuple(c.sql("spark") for c in ref.predicates), And(tuple(preds)), joined, k))
            for conjunct, pred in zip(ref.predicates, preds):
                for node, p in _cut_candidates(conjunct, pred, translator):
                    if fully_translated(p):
                        sql = unqualified(node)
                        cuts.setdefault((sql, session), Cut(sql, pred=p, negated=translator.translate(node, negate=True)))
            for j in joined:
                cuts.setdefault((j.sql(), session), Cut(j.sql(), joined=j))
    columns = sorted({c for cut in cuts.values() if cut.pred is not None for c in columns_of(cut.pred)} |
                     {c for s in scans for c in columns_of(s.pred)} | {j.column for s in scans for j in s.joined})
    return TableWorkload(table, tuple(scans), tuple(cuts.values()), tuple(c for c in columns if c in stats.columns),
                         len(statements), tuple(skipped))


def _joined(ref: TableRef, stats: TableStats, links: list[Channel], by_id: dict[int, TableRef], loader: StatsLoader,
            session: SessionSettings, seen: set[int], hops: int) -> tuple[Joined, ...]:
    """The joined filters into ``ref``: one per channel from a plain column of another reference whose rows
    are restricted (by its own conjuncts or, recursively, its joined filters), over one domain of values
    (``rewriter/dip.py``, ``same_domain``: the keys compare as stored). Floating-point keys are left out:
    NaN equals NaN in a Spark join, not in a key set."""
    out = []
    for c in links:
        if c.dst != ref.ref_id or c.src == CONSTANT or c.null_aware or c.partners or c.src_fns or c.dst_fns or \
                c.dst_use is not None or c.src in seen:
            continue
        source = by_id.get(c.src)
        if source is None or source.refused:
            continue
        source_stats = loader.table_stats(source.table)
        if source_stats is None or c.src_column not in source_stats.columns or c.dst_column not in stats.columns:
            continue
        src_kind, dst_kind = source_stats.columns[c.src_column].kind, stats.columns[c.dst_column].kind
        if not same_domain(src_kind, dst_kind) or src_kind.name == "float":
            continue
        translator = _translator(source_stats, source.alias, session)
        pred = And(tuple(translator.translate(p) for p in source.predicates))
        negated = Or(tuple(translator.translate(p, negate=True) for p in source.predicates))
        nested = _joined(source, source_stats, links, by_id, loader, session, seen | {c.src}, hops - 1) if hops > 1 else ()
        if not source.predicates and not nested:
            continue  # every key of the source: a foreign key join restricts (almost) nothing
        out.append(Joined(c.dst_column, source.table, c.src_column, pred,
                          tuple(unqualified(p) for p in source.predicates), nested, negated))
    return tuple({j.sql(): j for j in out}.values())  # the same filter through two paths (transitive channels) once


def _translator(stats: TableStats, alias: str, session: SessionSettings) -> Translator:
    kinds = {name: col.kind for name, col in stats.columns.items()}
    return Translator(lambda c: c.name.lower() if c.table == alias else None, kinds, session.time_zone, alias,
                      session.ansi)


def unqualified(node: exp.Expression) -> str:
    """``node`` as Spark SQL over the table's own column names (a cut is the table's, not a query alias's:
    ``l1.l_receiptdate > l1.l_commitdate`` and ``l3...`` are one cut)."""
    copy = node.copy()
    for column in copy.find_all(exp.Column):
        column.set("table", None)
        column.set("db", None)
        column.set("catalog", None)
    return copy.sql("spark")


def _cut_candidates(conjunct: exp.Expression, pred: Pred, translator: Translator) -> list[tuple[exp.Expression, Pred]]:
    """The conjunct itself, and each disjunct of a disjunction (``(a < 10 OR b > 90)`` offers both, as in
    seed 003 §3.4)."""
    out = [(conjunct, pred)]
    node = conjunct.unnest()
    if isinstance(node, exp.Or) and isinstance(pred, Or):
        out += [(d, translator.translate(d)) for d in node.flatten()]
    return out
