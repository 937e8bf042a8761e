"""Joined bounds (issue 15): files of a laid-out table that no row of a joined filter's sender can reach, by
the values of the sender rows each file's rows join to.

``layout apply`` records, per file of the table and per (sender, key, column) the workload joins it through,
the sender's rows whose key equals some row's column in the file (``stats/blocks.py``, ``JoinedBounds``):
how many, and per sender column the workload tests, their min, max and NULL count. Those rows, and no others,
are the ones an inner or semi join on ``column = key`` can pair with the file's rows. So they make a *file of
the sender*: statistics of a set of sender rows, on which the file evaluator (``rewriter/evaluate.py``)
decides a joined filter's own conjuncts exactly as it decides them on the sender's real files.

**Why a file is ruled out.** A joined filter (``rewriter/joined_filter.py``) keeps the rows whose column holds
the key of some sender row that passes its conjuncts (and its nested filters, which only keep fewer). Let M
be the sender rows that join the file. If the evaluator finds that no row within M's bounds can pass the
conjuncts, then no sender row that passes has a key among the file's values: a sender row with such a key
would be in M. So no row of the file passes the filter. This needs no unique key (M is every sender row with
a matching key, duplicates included), and it holds for any literals, not only the workload's: the bounds are
of the data, not of the cuts. A file no sender row joins (M empty) passes no joined filter from that sender.

**When the bounds are the data's.** Only while the sender holds exactly the files it held when the bounds were
computed (pinned by identity, as a joined cut is: ``rewriter/blocks.py``), only for files of the table the
record describes by identity, and only for attributes whose kind is still the one recorded. The statement's
filter must come through the same column, sender and key; the derivation makes it a channel through which a
diP could be sent (inner or semi join, one domain of values, nothing padding between), the same equality
Spark evaluated when it computed M.
"""

from __future__ import annotations

import numpy as np

from rewriter.evaluate import might_match
from rewriter.joined_filter import Joined
from stats.blocks import JoinedBounds
from stats.model import ColumnStats, TableStats


def unreached(bounds: JoinedBounds, stats: TableStats, described: np.ndarray, j: Joined,
              source: TableStats) -> np.ndarray:
    """Per file of ``stats``: no row of ``j``'s sender that passes ``j``'s conjuncts joins a row of the file.
    ``described``: the files the record describes (by identity); ``source``: the sender's statistics now, whose
    files the caller has checked are the pinned ones (for the kinds the conjuncts were translated by)."""
    out = np.zeros(stats.n_files, dtype=bool)
    if (j.column, j.source, j.key) != (bounds.column, bounds.source, bounds.key):
        return out
    rows = np.zeros(stats.n_files, dtype=np.int64)
    summaries: list[tuple[int, tuple] | None] = [None] * stats.n_files
    for k in np.flatnonzero(described):
        summaries[k] = bounds.files.get(stats.paths[k])
        if summaries[k] is not None:
            rows[k] = summaries[k][0]
    have = np.array([s is not None for s in summaries], dtype=bool)
    if not have.any():
        return out
    columns = {}
    for a, (name, kind_name) in enumerate(bounds.attributes):
        current = source.columns.get(name)
        if current is None or current.kind.name != kind_name:
            continue  # not what was bounded: the evaluator takes an absent column as unknown
        string = kind_name == "string"
        lo = np.zeros(stats.n_files, dtype=object if string else np.int64)
        hi = lo.copy()
        known = np.zeros(stats.n_files, dtype=bool)
        nulls = np.full(stats.n_files, -1, dtype=np.int64)
        for k in np.flatnonzero(have):
            low, high, n = summaries[k][1][a]
            nulls[k] = n
            if low is not None and high is not None:
                lo[k], hi[k], known[k] = low, high, True
        if string:
            lo[~known], hi[~known] = "", ""
        columns[name] = ColumnStats(current.kind, lo, hi, known, nulls)
    joining = TableStats(source.table, stats.paths, stats.sizes, stats.mtimes, rows, columns)
    return have & ((rows == 0) | ~might_match(j.pred, joining))
