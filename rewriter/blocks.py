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

Both are used only under the session settings the rows were routed under (ANSI mode and time zone: a cut
with a timestamp literal, or a cast, may mean something else in another session), and only for files whose
identity (size, mtime) is the record's. A file the record does not describe, or describes otherwise, is
judged by its statistics alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from rewriter.session import SessionSettings
from stats.blocks import BlockLayout
from stats.model import TableStats


def ruled_out(layout: BlockLayout, stats: TableStats, local: Iterable[str], joined: Iterable[str],
              session: SessionSettings, fresh: Callable[[str], TableStats | None]) -> tuple[np.ndarray, list[str]]:
    """Per file of ``stats``: does its block's description prove that no row passes? ``local`` and ``joined``
    are the reference's local conjuncts and joined filters as SQL text; ``fresh(table)`` gives a table's
    statistics checked against a listing taken now. Also returns the cuts used, for the decision record."""
    out = np.zeros(stats.n_files, dtype=bool)
    if layout.table != stats.table or layout.location != stats.location or \
            layout.ansi != session.ansi or layout.time_zone is None or layout.time_zone != session.time_zone:
        return out, []
    local, joined = set(local), set(joined)
    usable = set()
    for i, cut in enumerate(layout.cuts):
        if not cut.joined and cut.sql in local or cut.joined and cut.sql in joined and _pinned(layout, cut.sources, fresh):
            usable.add(i)
    if not usable:
        return out, []
    for k in range(stats.n_files):
        described = layout.files.get(stats.paths[k])
        if described is None or (described[0], described[1]) != (int(stats.sizes[k]), int(stats.mtimes[k])):
            continue
        out[k] = any(not holds and cut in usable for cut, holds in described[2])
    return out, [layout.cuts[i].sql for i in sorted(usable)]


def _pinned(layout: BlockLayout, sources: tuple[str, ...], fresh: Callable[[str], TableStats | None]) -> bool:
    """Whether every table a joined cut reads holds exactly the files it held when the rows were routed."""
    if not sources:
        return False
    for table in sources:
        recorded = layout.pinned.get(table)
        stats = fresh(table)
        if recorded is None or stats is None or stats.unknown_files:
            return False
        now = {(p, int(s), int(m)) for p, s, m in zip(stats.paths, stats.sizes, stats.mtimes)}
        if now != recorded:
            return False
    return True
