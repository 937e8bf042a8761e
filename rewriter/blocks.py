"""Block descriptions as exact knowledge (issue 15, part 5): files of a table ``layout apply`` rewrote that no
row of a reference can come from, because of what every row of the file is known to satisfy.

A file written by ``layout apply`` holds exactly the rows of one qd-tree block (``stats/blocks.py``): on each
of its rows every cut on the block's path is TRUE ("holds") or FALSE-or-NULL ("fails"), as Spark evaluated it
when it routed the row. Where a statement restricts a reference by that very cut and the block's path says
it fails, the file contributes no row:

- **A local cut** is a conjunct local to the reference (``rewriter/table_refs.py``: it drops the rows that
  fail it for good), spelled exactly as the cut (``rewriter/joined_filter.py``, ``unqualified``). A conjunct
  that is FALSE or NULL on every row of the file passes none of them. This is what min/max statistics
  cannot hold: a comparison of two columns, a pattern, an IN list over a spread column.
- **A joined cut** is a joined filter of the reference (the semi join a diP stands for, derived from the
  statement's channels exactly as the planner derived it). The file's rows hold no key of the sender's rows
  that pass, so none joins. That conclusion rests on the sender's rows being the ones the cut was evaluated
  on: every table the cut reads (the sender, and senders it nests) must hold exactly the files it held when
  the rows were routed, identity by identity, in a listing taken now; a changed dimension voids the cut.
  It also rests on the statement's channel being one through which the rewriter could send a diP, which the
  derivation guarantees (inner or semi join, one domain, nothing padding between).

**Other literals than the cut's.** A cut was learned from the workload's literals; a statement written with
others still proves something about a block (``rewriter/implication.py``), from the box its conjuncts bound
every kept row in:

- a block on which the cut **fails** (FALSE or NULL on every row) is ruled out when the statement's conjuncts
  make the cut TRUE on every row they keep (``o_orderdate < DATE '1994-06-01'`` against the cut ``o_orderdate
  < DATE '1995-01-01'``). For a joined cut, every conjunct of the cut must be, so the keys the statement admits
  are among those the cut admitted (a cut that nests joined filters of its sender admitted fewer: not used);
- a block on which the cut **holds** (TRUE on every row) is ruled out when the statement's conjuncts make it TRUE
  on no row they keep. For a joined cut that says the sender's rows the statement keeps are not the rows the
  cut admitted; their keys differ only where no two sender rows share a key, which ``apply`` checked on the
  rows it pinned (``unique_key``).

**Joined bounds.** Beside the paths, a record may hold per file the bounds of the sender rows its rows join
(``rewriter/joined_bounds.py``): a joined filter whose sender's passing rows all lie outside them reaches no
row of the file, whatever its literals. They are pinned to the sender's files as joined cuts are.

**Sessions.** A cut's text means what it meant in the session the rows were routed in (its ANSI mode and time
zone: a timestamp literal, or a cast, may mean something else in another). A statement's conjunct spelled as
the cut means the same only in a session with the same settings, so matching by spelling needs them. Deciding
by implication does not: the cut is translated under the routing session's settings (its meaning when the
rows were routed; a time zone the record does not know widens timestamps to every zone's reading), the
statement's conjuncts under the statement's, and both are compared as values.

Only files whose identity (size, mtime) is the record's are judged: a file the record does not describe, or
describes otherwise, is judged by its statistics alone.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable

import numpy as np
import sqlglot
from sqlglot import exp

from rewriter.implication import Region, always_true, never_true, region
from rewriter.joined_bounds import unreached
from rewriter.joined_filter import Joined, translator_for
from rewriter.predicate import Pred
from rewriter.session import SessionSettings
from stats.blocks import BlockLayout, identities
from stats.model import TableStats


@dataclasses.dataclass(frozen=True)
class Restriction:
    """What a statement restricts one reference by: its local conjuncts as the table's own SQL
    (``rewriter/joined_filter.py``, ``unqualified``), the same translated over the table's statistics, and its
    joined filters."""

    local: frozenset[str]
    pred: Pred
    joined: tuple[Joined, ...] = ()


def ruled_out(layout: BlockLayout, stats: TableStats, restriction: Restriction, session: SessionSettings,
              fresh: Callable[[str], TableStats | None]) -> tuple[np.ndarray, list[str]]:
    """Per file of ``stats``: does its block's description prove that no row passes? ``fresh(table)`` gives a
    table's statistics checked against a listing taken now. Also returns how each cut used was decided, for
    the decision record."""
    out = np.zeros(stats.n_files, dtype=bool)
    if layout.table != stats.table or layout.location != stats.location:
        return out, []
    # Spelling means the same only under the routing session's settings; values mean the same anywhere.
    same = layout.ansi == session.ansi and layout.time_zone is not None and layout.time_zone == session.time_zone
    routed = SessionSettings(ansi=layout.ansi, time_zone=layout.time_zone)
    implied, refuted = set(), set()  # cuts TRUE on every row the statement keeps; cuts TRUE on none of them
    local = _Side(stats, restriction.pred, routed)
    joined = {j.sql() for j in restriction.joined} if same else set()
    # Many cuts read one sender and meet one joined filter: list, compare and bound each once per statement.
    fresh = functools.cache(fresh)
    pinned = functools.cache(lambda table: _pinned(layout, table, fresh))
    sides: dict[int, _Side] = {}
    for i, cut in enumerate(layout.cuts):
        if not cut.joined:
            if same and cut.sql in restriction.local:
                implied.add(i)
            elif cut.conjuncts:
                _decided(i, local.decide(cut.conjuncts), implied, refuted)
            continue
        if not cut.sources or not all(pinned(table) for table in cut.sources):
            continue
        if cut.sql in joined:
            implied.add(i)
            continue
        for n, j in enumerate(restriction.joined):
            if not cut.source or (j.column, j.source, j.key) != (cut.column, cut.source, cut.key):
                continue
            source = fresh(cut.source)
            if source is None:
                break
            if n not in sides:
                sides[n] = _Side(source, j.pred, routed, frozenset(j.conjuncts) if same else frozenset())
            if _decided(i, sides[n].decide(cut.conjuncts, allow_implied=not cut.nested, allow_refuted=cut.unique_key),
                        implied, refuted):
                break
    described = layout.described(stats)
    unjoined, through = _joined_bounds(layout, stats, described, restriction, fresh, pinned)
    if not implied and not refuted and not unjoined.any():
        return out, []
    for k in np.flatnonzero(described):
        out[k] = any(cut in refuted if holds else cut in implied for cut, holds in layout.files[stats.paths[k]][2])
    used = [layout.cuts[i].sql for i in sorted(implied)] + [f"NOT ({layout.cuts[i].sql})" for i in sorted(refuted)]
    return out | unjoined, used + [f"no row joins {j.sql()} (joined bounds)" for j in through]


def _joined_bounds(layout: BlockLayout, stats: TableStats, described: np.ndarray, restriction: Restriction,
                   fresh: Callable[[str], TableStats | None], pinned: Callable[[str], bool]) -> tuple[np.ndarray, list[Joined]]:
    """Files no row of a joined filter's passing sender rows joins, by the record's joined bounds
    (``rewriter/joined_bounds.py``), while the sender is as pinned; and the filters that ruled some out."""
    out = np.zeros(stats.n_files, dtype=bool)
    through = []
    for bounds in layout.joined_bounds:
        for j in restriction.joined:
            if (j.column, j.source, j.key) != (bounds.column, bounds.source, bounds.key) or not pinned(j.source):
                continue
            source = fresh(j.source)
            if source is None:
                continue
            newly = unreached(bounds, stats, described, j, source) & ~out
            if newly.any():
                out |= newly
                through.append(j)
    return out, through


class _Side:
    """The rows a statement keeps of one table (its own, or a joined cut's sender), against a cut's conjuncts:
    ``pred`` is the statement's conjuncts translated under its session, ``routed`` the session the cut's rows
    were routed in, ``texts`` the statement's conjuncts whose spelling means what the cut's does."""

    def __init__(self, stats: TableStats, pred: Pred, routed: SessionSettings, texts: frozenset[str] = frozenset()) -> None:
        self.pred, self.texts = pred, texts
        self.translator = translator_for(stats, "", routed)  # of the cut's conjuncts, as the rows were routed
        self._region: Region | None = None

    def decide(self, conjuncts: Iterable[str], allow_implied: bool = True,
               allow_refuted: bool = True) -> tuple[bool, bool]:
        """(every conjunct is TRUE on every kept row, some conjunct is TRUE on none of them); both where the
        statement keeps no row."""
        conjuncts = tuple(conjuncts)
        r = self.region()
        nodes = [_parsed(c) for c in conjuncts]
        if not conjuncts or any(n is None for n in nodes) or not r.empty and not any(_columns(n) & r.bounded for n in nodes):
            return False, False  # the statement says nothing about the columns the cut tests
        refuted = allow_refuted and any(never_true(r, n, self.translator) for n in nodes)
        implied = allow_implied and all(text in self.texts or always_true(r, n, self.translator)
                                        for text, n in zip(conjuncts, nodes))
        return implied, refuted

    def region(self) -> Region:
        if self._region is None:
            self._region = region(self.pred, self.translator.kinds)
        return self._region


def _decided(cut: int, decided: tuple[bool, bool], implied: set[int], refuted: set[int]) -> bool:
    if decided[0]:
        implied.add(cut)
    if decided[1]:
        refuted.add(cut)
    return decided[0] or decided[1]


@functools.lru_cache(maxsize=8192)
def _parsed(text: str) -> exp.Expression | None:
    """A recorded conjunct's SQL, parsed once (the translator reads it and never changes it)."""
    try:
        return sqlglot.parse_one(text, read="spark")
    except sqlglot.errors.SqlglotError:
        return None


def _columns(node: exp.Expression) -> frozenset[str]:
    return frozenset(c.name.lower() for c in node.find_all(exp.Column))


def _pinned(layout: BlockLayout, table: str, fresh: Callable[[str], TableStats | None]) -> bool:
    """Whether ``table``, read by a joined cut, holds exactly the files it held when the rows were routed."""
    recorded = layout.pinned.get(table)
    stats = fresh(table)
    if recorded is None or stats is None or stats.unknown_files:
        return False
    return identities(stats) == recorded
