"""Joined filters (issue 15): a predicate on a table's rows decided through an equi-join, the semi join a diP
stands for, written as one SQL predicate of the table's own column.

Where the rewriter would send a diP into a reference (a channel of ``rewriter/join_graph.py``: an inner or
semi join on one domain, nothing padding or raising in between), the reference's rows that can contribute are
those whose join column holds a key of the sender's rows that pass the sender's conjuncts:
``l_orderkey IN (SELECT o_orderkey FROM orders WHERE o_orderdate < ...)``. The layout planner (``layout/``) cuts
tables on such filters, and the rewriter recognises them again in a statement (``rewriter/blocks.py``): both
derive them here, so a filter is spelled the same way wherever it is derived.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from sqlglot import exp

from rewriter.dip import same_domain
from rewriter.emit import quoted
from rewriter.falsify import Translator
from rewriter.join_graph import CONSTANT, Channel
from rewriter.predicate import And, Or, Pred
from rewriter.session import SessionSettings
from rewriter.table_refs import TableRef
from stats.model import TableStats

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



def joined_filters(ref: TableRef, stats: TableStats, links: list[Channel], by_id: dict[int, TableRef],
                   table_stats: Callable[[str], TableStats | None], session: SessionSettings, seen: set[int] | None = None,
                   hops: int = MAX_HOPS) -> tuple[Joined, ...]:
    """The joined filters into ``ref``: one per channel from a plain column of another reference whose rows
    are restricted (by its own conjuncts or, recursively, its joined filters), over one domain of values
    (``rewriter/dip.py``, ``same_domain``: the keys compare as stored). Floating-point keys are left out:
    NaN equals NaN in a Spark join, not in a key set."""
    seen = {ref.ref_id} if seen is None else seen
    out = []
    for c in links:
        if c.dst != ref.ref_id or c.src == CONSTANT or c.null_aware or c.partners or c.src_fns or c.dst_fns or \
                c.dst_use is not None or c.src in seen:
            continue
        source = by_id.get(c.src)
        if source is None or source.refused:
            continue
        source_stats = table_stats(source.table)
        if source_stats is None or c.src_column not in source_stats.columns or c.dst_column not in stats.columns:
            continue
        src_kind, dst_kind = source_stats.columns[c.src_column].kind, stats.columns[c.dst_column].kind
        if not same_domain(src_kind, dst_kind) or src_kind.name == "float":
            continue
        translator = translator_for(source_stats, source.alias, session)
        pred = And(tuple(translator.translate(p) for p in source.predicates))
        negated = Or(tuple(translator.translate(p, negate=True) for p in source.predicates))
        nested = joined_filters(source, source_stats, links, by_id, table_stats, session, seen | {c.src}, hops - 1) \
            if hops > 1 else ()
        if not source.predicates and not nested:
            continue  # every key of the source: a foreign key join restricts (almost) nothing
        out.append(Joined(c.dst_column, source.table, c.src_column, pred,
                          tuple(unqualified(p) for p in source.predicates), nested, negated))
    return tuple({j.sql(): j for j in out}.values())  # the same filter through two paths (transitive channels) once


def translator_for(stats: TableStats, alias: str, session: SessionSettings) -> Translator:
    """The translator of one reference's conjuncts over its table's statistics: the rewriter's, the layout's and
    the block decisions' one way of building it."""
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
