"""The workload a layout is made for, and what each statement asks of one table.

A workload is either the proxy's decision log (``decisions.jsonl``: the statements users ran, each with
its time and database; statements the proxy did not hand to the rewriter are left out) or a SQL file of
statements separated by ``;``. For one table, every statement is analysed as the rewriter analyses it
(``rewriter/table_refs.py``: the references to the table and the conjuncts local to each, and
``rewriter/falsify.py``: their translation over the table's statistics), so a layout is planned for the
predicates that will later prune its files, and a conjunct the rewriter cannot use cannot become a cut.
Each reference is one *scan*: a self-join reads the table twice, and each read skips blocks on its own.

**Joined filters** (the join-aware part, issue 15 §2; ``rewriter/joined_filter.py``): where the rewriter
would send a diP into a scan, the scan reads only rows whose join column holds a key of the sender's
passing rows, ``l_orderkey IN (SELECT o_orderkey FROM orders WHERE o_orderdate < ...)``. That is a predicate
of the table's own rows, decided through the join (as seed 003 denormalises TPC-H through its foreign keys);
it restricts the scan, and it is a candidate cut, so ``store_sales`` can be laid out on ``i_category``
through ``ss_item_sk``.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import sqlglot
from sqlglot import exp

from layout.qdtree import WEIGHINGS
from layout.sample import LayoutError
from rewriter.blocks import Restriction
from rewriter.errors import RewriteError
from rewriter.evaluate import fully_translated
from rewriter.falsify import Translator
from rewriter.join_graph import channels
from rewriter.joined_filter import Joined, joined_filters, translator_for, unqualified
from rewriter.predicate import And, Or, Pred, columns_of
from rewriter.rewrite import RewriteContext, column_kinds
from rewriter.session import SessionSettings
from rewriter.table_refs import annotate, resolve, sqlglot_schema
from stats.blocks import BOUNDED_KINDS, RecordedCut
from stats.loader import StatsLoader

log = logging.getLogger("dipper.layout")


def check_weigh(weigh: str) -> None:
    """That ``weigh`` names a weighing of the scans (``TableWorkload.scan_weights``): before any work."""
    if weigh not in WEIGHINGS:
        raise LayoutError(f"the workload's scans are weighed by {' or '.join(WEIGHINGS)}, not {weigh!r}")


@dataclasses.dataclass(frozen=True)
class Statement:
    sql: str
    database: str
    time: str | None = None  # when it ran (decision log), for reports
    session: SessionSettings = SessionSettings()  # the settings it ran under (ANSI mode, time zone)


@dataclasses.dataclass(frozen=True)
class Scan:
    """One read of the table by one statement, and the conjuncts that restrict it."""

    statement: int  # index into the workload
    conjuncts: tuple[str, ...]  # as Spark SQL
    pred: Pred  # their conjunction, translated over the table's statistics
    joined: tuple[Joined, ...] = ()  # filters through joins that the rewriter's diPs would follow
    reference: int = 0  # which reference to the table in its statement (0: the first), as the rewriter lists them
    local: frozenset[str] = frozenset()  # the conjuncts as the table's own SQL (``unqualified``): matched to cuts
    session: SessionSettings = SessionSettings()  # its statement's

    def restriction(self) -> Restriction:
        """What the scan restricts the table by, as the rewriter hands it to block descriptions."""
        return Restriction(self.local, self.pred, self.joined)

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

    def sources(self) -> tuple[str, ...]:
        """The tables the cut reads: a joined cut's sender and the senders it nests; none for a local cut."""
        if self.joined is None:
            return ()
        out, stack = [], [self.joined]
        while stack:
            f = stack.pop()
            out.append(f.source)
            stack.extend(f.nested)
        return tuple(sorted(set(out)))

    def recorded(self, unique_key: bool) -> RecordedCut:
        """The cut as a block layout records it (``stats/blocks.py``); ``unique_key``: no two rows of a joined
        cut's sender hold one non-NULL key."""
        j = self.joined
        if j is None:
            return RecordedCut(self.sql, False, (), (self.sql,))
        return RecordedCut(j.sql(), True, self.sources(), tuple(j.conjuncts), j.column, j.source, j.key, bool(j.nested),
                           unique_key)


@dataclasses.dataclass(frozen=True)
class TableWorkload:
    table: str
    scans: tuple[Scan, ...]
    cuts: tuple[Cut, ...]
    columns: tuple[str, ...]  # every column a scan or cut tests
    statements: int  # in the workload
    skipped: tuple[tuple[int, str], ...]  # statements not analysed, and why

    def usual_session(self) -> SessionSettings:
        """The session most of the scans ran in: the one a plan's range cuts are translated in and, unless
        told otherwise, the what-if routes rows in (``layout/whatif.py``). The workload has scans."""
        return collections.Counter(s.session for s in self.scans).most_common(1)[0][0]

    def scan_weights(self, weigh: str) -> np.ndarray:
        """Per scan, its weight in the greedy's objective (``layout/qdtree.py``: the rows a scan skips count
        times its weight). ``"statements"``: every statement weighs 1, shared by its scans of the table, so a
        statement that reads the table k times (TPC-DS q09 reads store_sales in fifteen subqueries) counts as
        one statement, not k; the tree then serves each statement's share of the table read, what its time
        follows. ``"scans"``: every scan weighs 1 (seed 003's C(T), where each query is one scan): the rows the
        whole workload reads, so a statement that reads the table often counts that often."""
        check_weigh(weigh)
        if weigh == "scans":
            return np.ones(len(self.scans))
        per = collections.Counter(s.statement for s in self.scans)
        return np.array([1.0 / per[s.statement] for s in self.scans])

    def joined_attributes(self, loader: StatsLoader) -> dict[tuple[str, str, str], tuple[tuple[str, str], ...]]:
        """Per (sender, key, column) the scans' joined filters come through, the sender's columns their
        conjuncts test, with their kinds: what ``apply`` bounds per file (``stats/blocks.py``,
        ``JoinedBounds``; columns of other kinds than ``BOUNDED_KINDS`` are left out, a join with none left is
        kept: a file it reaches no row of is still told). A filter from the table itself is left out: apply
        rewrites the table, so the rows it joined would not be pinned."""
        tested: dict[tuple[str, str, str], set[str]] = {}
        for scan in self.scans:
            for j in scan.joined:
                if j.source != self.table:
                    tested.setdefault((j.source, j.key, j.column), set()).update(columns_of(j.pred))
        out = {}
        for (source, key, column), names in sorted(tested.items()):
            stats = loader.table_stats(source)
            if stats is None:
                continue
            out[(source, key, column)] = tuple((c, stats.columns[c].kind.name) for c in sorted(names)
                                               if c in stats.columns and stats.columns[c].kind.name in BOUNDED_KINDS)
        return out


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


class Resolutions:
    """Statements parsed and their columns resolved, each once for the workloads of every table read from them.
    Parsing and qualifying are most of :func:`table_workload`'s time (about 0.1-0.2 s per TPC-DS query), and the
    workloads of several tables (``bench layout-effect``'s twelve, the qd-tree test datasets' four) read the same
    statements. What is kept depends only on a statement's text, its database and the tables' columns; the
    statistics each table's workload translates with and the join channels, which depend on the session and on
    the files, are computed for each table anew."""

    def __init__(self) -> None:
        self._columns: tuple | None = None
        self._schema = None
        self._done: dict[tuple[str, str], tuple[list, list] | str] = {}

    def use(self, schemas: Mapping[str, Mapping[str, str]]) -> None:
        """Resolve against ``schemas`` (``{db.table: {column: type}}``) from now on: when the columns of a table
        differ from those the statements were resolved with, every statement is resolved again."""
        columns = tuple(sorted((name, tuple(cols.items())) for name, cols in schemas.items()))
        if columns != self._columns:
            self._columns, self._schema, self._done = columns, sqlglot_schema(schemas), {}

    def of(self, st: Statement) -> tuple[list, list] | str:
        """The table references and scopes of ``st``, or why it cannot be analysed."""
        key = (st.sql, st.database)
        if key not in self._done:
            try:
                tree = sqlglot.parse_one(st.sql, read="spark")
                annotate(tree)
                self._done[key] = resolve(tree, st.database, self._schema)
            except (sqlglot.errors.SqlglotError, RewriteError) as e:
                self._done[key] = _why(e)
        return self._done[key]


def _why(e: Exception) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def table_workload(statements: Iterable[Statement], table: str, loader: StatsLoader,
                   resolutions: Resolutions | None = None) -> TableWorkload:
    """The scans of ``table`` (``db.name``) in ``statements`` and the candidate cuts they offer. A caller that
    reads the workloads of several tables from the same statements passes one :class:`Resolutions` to each call."""
    table = table.lower()
    stats = loader.table_stats(table)
    if stats is None:
        raise LayoutError(f"no statistics for {table}; collect them first (python -m stats collect {table})")
    resolutions = resolutions if resolutions is not None else Resolutions()
    resolutions.use(loader.schemas())
    scans: list[Scan] = []
    cuts: dict[tuple[str, SessionSettings], Cut] = {}  # a cut's translation depends on the session (time zone)
    skipped = []
    statements = list(statements)
    for index, st in enumerate(statements):
        session = st.session
        resolved = resolutions.of(st)
        if isinstance(resolved, str):
            skipped.append((index, resolved))
            continue
        refs, scopes = resolved
        try:
            links = channels(scopes, column_kinds(RewriteContext(loader, database=st.database, session=session)),
                             session.ansi) if any(r.table == table for r in refs) else []
        except (sqlglot.errors.SqlglotError, RewriteError) as e:
            skipped.append((index, _why(e)))
            continue
        by_id = {r.ref_id: r for r in refs}
        for k, ref in enumerate(r for r in refs if r.table == table):
            if ref.refused or not session.prunable:
                scans.append(Scan(index, (), And(()), (), k, session=session))  # read whole, whatever the layout
                continue
            translator = translator_for(stats, ref.alias, session)
            preds = [translator.translate(c) for c in ref.predicates]
            joined = joined_filters(ref, stats, links, by_id, loader.table_stats, session)
            scans.append(Scan(index, tuple(c.sql("spark") for c in ref.predicates), And(tuple(preds)), joined, k,
                              frozenset(unqualified(c) for c in ref.predicates), session))
            for conjunct, pred in zip(ref.predicates, preds):
                for node, p in _cut_candidates(conjunct, pred, translator):
                    if fully_translated(p):
                        sql = unqualified(node)
                        cuts.setdefault((sql, session), Cut(sql, pred=p, negated=translator.translate(node, negate=True)))
            for j in joined:
                for part in _joined_candidates(j):
                    cuts.setdefault((part.sql(), session), Cut(part.sql(), joined=part))
    columns = sorted({c for cut in cuts.values() if cut.pred is not None for c in columns_of(cut.pred)} |
                     {c for s in scans for c in columns_of(s.pred)} | {j.column for s in scans for j in s.joined})
    return TableWorkload(table, tuple(scans), tuple(cuts.values()), tuple(c for c in columns if c in stats.columns),
                         len(statements), tuple(skipped))


def _joined_candidates(j: Joined) -> list[Joined]:
    """The cuts a joined filter offers: one per conjunct of its sender (``o_orderdate >= DATE '1995-03-01'``
    and ``o_orderdate < DATE '1995-06-01'`` each through ``l_orderkey``), as a local conjunct offers itself
    alone; and the whole filter where it nests its sender's own joined filters (a dimension two hops away).
    Not the whole window: a cut is learned from the training literals, and the rewriter decides a block for a
    statement with other literals only where they imply or exclude the cut (``rewriter/blocks.py``). A
    one-sided bound is decided for every window that lies on one side of it; a window is decided only for
    windows inside it or disjoint from it, so trees of windows fitted the training instances and left unseen
    ones reading blocks their rows never match (docs/results/layout.md). A statement spelled as the whole filter is
    still decided: its conjuncts imply each part."""
    pred = j.pred.items if isinstance(j.pred, And) else ()
    negated = j.negated.items if isinstance(j.negated, Or) else ()
    if len(j.conjuncts) < 2 or not len(pred) == len(negated) == len(j.conjuncts):
        return [j]
    parts = [Joined(j.column, j.source, j.key, And((p,)), (c,), (), Or((n,)))
             for c, p, n in zip(j.conjuncts, pred, negated)]
    return parts + ([j] if j.nested else [])


def _cut_candidates(conjunct: exp.Expression, pred: Pred, translator: Translator) -> list[tuple[exp.Expression, Pred]]:
    """The conjunct itself, and each disjunct of a disjunction (``(a < 10 OR b > 90)`` offers both, as in
    seed 003 §3.4)."""
    out = [(conjunct, pred)]
    node = conjunct.unnest()
    if isinstance(node, exp.Or) and isinstance(pred, Or):
        out += [(d, translator.translate(d)) for d in node.flatten()]
    return out
