"""diPs as column predicates (issue 16, part 4): a diP that reached a reference, written as a predicate on its
join column, so that Spark drops the rows it rules out inside the files it still reads — by Parquet's row-group
statistics in the reader, and row by row before the join.

Why it is sound where the diP is: a channel (``rewriter/join_graph.py``) exists only where a row of the
receiver whose join value lies outside the values the sender's rows take cannot contribute to the result, at
a site the filter commutes down to. File skipping drops whole files of such rows, and is sound whichever rows
share a file, so it is sound for any subset of them: the rows this predicate drops are exactly such rows. A
NULL key satisfies no equi-join and fails the predicate as it fails the join. Spark may infer the same
predicate for the sender's column through the equality and drop sender rows with it; those hold values
outside what the diP admits, which by construction are only rows the sender's own predicates and received
diPs rule out.

Only the plain shape is written, where the column predicate means exactly what the diP means:
- an integral column compared for equality with integral columns, with no function on either side (a
  predicate on ``k`` for ``k + 1 = s.k`` would need the inverse function);
- not NOT IN (NULLs on the other side decide it), not a CTE read at several places (a predicate inside it
  would hold for every read, while each read received its own diPs), not a constant filter on a derived
  table's output (Spark pushes that filter down itself);
- not a reference where a local conjunct may raise an error: the predicate might then be evaluated first
  and drop rows the conjunct would have raised on (the rewriter declines such statements for references
  that take part in a diP; the check says so here too);
- not a column the statement compares, anywhere, with a value of another domain or an expression
  (:func:`converted_names`): Spark infers the predicate through ``t.k = CAST(u.code AS INT)`` as
  ``CAST(u.code AS INT) IN (...)`` on ``u`` and evaluates it before ``u``'s own filters, where the cast may
  raise on rows the original never cast.

The form keeps Spark's cost per row at a comparison or two: at most SWITCH_VALUES values become
``k IN (...)`` (an INT switch in generated code, like the prune filter's sizes; ``rewriter/emit.py`` says why
longer switches are a trap), and any other diP becomes ``(k BETWEEN a AND b OR ...)`` over at most
MAX_RANGES intervals, compacted as a diP is (wider intervals admit more rows: sound). Parquet's filter
push-down takes both shapes (an IN list longer than 10 values as its minimum and maximum).

Where it pays: a predicate costs every row it is evaluated on and gains only on the rows it drops. It is
written only where it keeps at most a configured share (``rewriter.dip_column_max_share``) of the values the
reference's kept files hold (their statistics' merged intervals, :func:`share`), so not where file skipping
already did the work (a date-clustered fact whose kept files hold little else than the diP's dates) nor
where the diP admits about everything.
"""

from __future__ import annotations

import numpy as np

from collections.abc import Callable

from sqlglot import exp
from sqlglot.optimizer.scope import Scope

from rewriter.dip import DiP, compact, same_domain
from rewriter.emit import SWITCH_VALUES, quoted
from rewriter.join_graph import CONSTANT, Channel
from rewriter.raising import scope_kinds
from stats.model import Kind

MAX_RANGES = 8


def eligible(c: Channel, dst_kind: Kind) -> bool:
    """Whether a diP arriving over channel ``c`` into a column of kind ``dst_kind`` may become a column
    predicate (the module's docstring gives each reason)."""
    return (c.src != CONSTANT and not c.null_aware and c.dst_use is None and not c.dst_fns
            and all(not fns for _, _, fns in c.members()) and dst_kind.name == "int")


def converted_names(scopes: list[Scope], column_kind: Callable[[str, str], Kind | None], database: str) -> set[str]:
    """Names (lower case) of the columns some equality of the statement compares with a column of another or
    unknown domain, or with an expression: Spark may infer a column predicate through it onto the other side,
    converted. By name, across scopes, as for the filters Spark infers (a rename inside a derived table is
    flagged on both sides)."""
    out: set[str] = set()
    for scope in scopes:
        kind_of = scope_kinds(scope, column_kind, database)
        for node in scope.expression.find_all(exp.EQ):
            sides = [node.this, node.expression]
            if not all(side.find(exp.Column) is not None for side in sides):
                continue  # a comparison with a constant infers nothing onto another column
            kinds = [kind_of(side) if isinstance(side, exp.Column) else None for side in sides]
            if kinds[0] is None or kinds[1] is None or not same_domain(kinds[0], kinds[1]):
                out |= {c.name.lower() for side in sides for c in side.find_all(exp.Column)}
    return out


def admitted_values(d: DiP) -> int:
    """How many integers the diP admits."""
    return int(np.sum(np.asarray(d.hi, dtype=object) - np.asarray(d.lo, dtype=object) + 1)) if d.ranges else 0


def narrowest(dips: list[DiP]) -> DiP:
    """Of several diPs on one column (each sound alone), the one admitting the fewest values."""
    return min(dips, key=admitted_values)


def written(d: DiP, kind: Kind) -> DiP:
    """The intervals the predicate will test: restricted to the values the column's type holds (a bigint
    sender's keys beyond an int column's range match no row of it, and the literals then never widen the
    column's type), intervals one apart merged (no integer lies between them), and compacted to MAX_RANGES
    unless an IN list of at most SWITCH_VALUES values says it exactly."""
    lo_limit, hi_limit = -(2 ** (kind.bits - 1)), 2 ** (kind.bits - 1) - 1
    lo, hi = [], []
    for a, b in zip(d.lo, d.hi):
        a, b = max(int(a), lo_limit), min(int(b), hi_limit)
        if a > b:
            continue
        if hi and a <= hi[-1] + 1:
            hi[-1] = max(hi[-1], b)
        else:
            lo.append(a)
            hi.append(b)
    out = DiP(np.array(lo, dtype=object), np.array(hi, dtype=object), d.exact)
    return out if admitted_values(out) <= SWITCH_VALUES else compact(out, MAX_RANGES)


def share(d: DiP, files: DiP) -> float:
    """The share of the values the files hold (their merged intervals) that ``d`` admits: under a uniform
    spread, the share of their rows the predicate keeps."""
    total = admitted_values(files)
    if total == 0:
        return 0.0
    inside, j = 0, 0
    for a, b in zip(files.lo, files.hi):
        a, b = int(a), int(b)
        while j < d.ranges and int(d.hi[j]) < a:
            j += 1
        k = j
        while k < d.ranges and int(d.lo[k]) <= b:
            inside += min(b, int(d.hi[k])) - max(a, int(d.lo[k])) + 1
            k += 1
    return inside / total


def predicate(column: str, d: DiP) -> str | None:
    """The column predicate testing a diP's :func:`written` intervals, as Spark SQL over the unqualified
    column; None if it admits nothing (the files it rules out are skipped already)."""
    if d.ranges == 0:
        return None
    name = quoted(column)
    if admitted_values(d) <= SWITCH_VALUES:
        values = [str(v) for lo, hi in zip(d.lo, d.hi) for v in range(int(lo), int(hi) + 1)]
        return f"{name} IN ({', '.join(values)})"
    ranges = [f"{name} BETWEEN {lo} AND {hi}" if lo != hi else f"{name} = {lo}" for lo, hi in zip(d.lo, d.hi)]
    return ranges[0] if len(ranges) == 1 else "(" + " OR ".join(ranges) + ")"
