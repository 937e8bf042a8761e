"""Ranges first: a qd-tree whose first levels cut the table into N ranges of one column, with the greedy's
cuts inside each range (``--lead-ranges COLUMN:N``).

Why. On TPC-DS the date-clustered ``tuned`` layout wins the instances that read a month: its files hold
narrow, disjoint date ranges, and a month window reads one or two of 33. The greedy qd-tree cuts dates where
the training instances' windows end and spends its blocks on dimension cuts, so an unseen window falls in
blocks cut on whole years (docs/layout.md, "What any layout could reach"). A tree that lays the table out
in date ranges first keeps what ``tuned`` gives and adds dimension cuts below: a block is a date range and a
combination of the workload's cuts, so a statement's date window and its dimension filters each rule blocks
out.

How. The lead cuts are ``column < t`` at the N-quantiles of the column's sampled values (:func:`lead_cuts`).
They are ordinary local cuts: the block descriptions and the rewriter treat them as any other
(``rewriter/blocks.py``, implied or excluded by a statement's literals), and each block's min/max statistics
on the column lie inside its range. ``layout/qdtree.py`` splits on them first (each node on the one that
halves it), so the ranges come out about equal in rows and numbered in the column's order. Rows whose value
is NULL fail every ``<`` cut; ``column IS NOT NULL`` splits them off the last range where they make a minimum
block. Where a range holds fewer than two minimum blocks, it is not split further: N is at most the blocks
the table is cut into, and ``Plan.ranges`` says how many came out.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import re
from collections.abc import Iterable

import numpy as np
import sqlglot
from sqlglot import exp

from layout.sample import LayoutError, Sample
from layout.workload import Cut
from rewriter.joined_filter import translator_for, unqualified
from rewriter.session import SessionSettings
from stats.model import TableStats

LEAD_KINDS = ("int", "date")  # columns whose quantiles are written as exact literals
_ALIAS = "lead"
_EPOCH = datetime.date(1970, 1, 1)
MAX_RANGES = 4096


@dataclasses.dataclass(frozen=True)
class LeadRanges:
    column: str
    ranges: int

    def __str__(self) -> str:
        return f"{self.column}:{self.ranges}"


def parse_lead(text: str) -> LeadRanges:
    """``COLUMN:N``, 2 <= N <= MAX_RANGES."""
    match = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(\d{1,6})\s*", text)
    if not match or not 2 <= int(match.group(2)) <= MAX_RANGES:
        raise LayoutError(f"--lead-ranges takes COLUMN:N with 2 <= N <= {MAX_RANGES} ranges (ss_sold_date_sk:16), "
                          f"not {text!r}")
    return LeadRanges(match.group(1).lower(), int(match.group(2)))


def lead_argument(text: str) -> LeadRanges:
    """:func:`parse_lead` for argparse, whose usage error then names the option."""
    try:
        return parse_lead(text)
    except LayoutError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def check_column(lead: LeadRanges, stats: TableStats) -> None:
    """That ``stats``' table has the column, of a kind ranges can be cut on: before any row is sampled."""
    column = stats.columns.get(lead.column)
    if column is None:
        raise LayoutError(f"--lead-ranges: {stats.table} has no column {lead.column!r} with statistics")
    if column.kind.name not in LEAD_KINDS:
        raise LayoutError(f"--lead-ranges needs an integer or date column; {stats.table}.{lead.column} is "
                          f"{column.kind.name}")


def sampled_columns(columns: Iterable[str], lead: LeadRanges | None) -> list[str]:
    """The columns a plan's sample needs: those the workload tests, and the lead column, whose range cuts are
    its sampled values' quantiles (every caller of ``layout/whatif.py`` ``plan`` with ``lead`` samples these)."""
    return sorted(set(columns) | ({lead.column} if lead is not None else set()))


def lead_cuts(lead: LeadRanges, sample: Sample, session: SessionSettings) -> list[Cut]:
    """The cuts ``column < t`` at the ``lead.ranges``-quantiles of the column's non-NULL sampled values, each
    threshold once (a value holding more than a range's rows makes fewer ranges), and ``column IS NOT NULL``
    where a sampled row is NULL: it splits the NULL rows, which fail every ``<`` cut, off the last range, so
    that range is not larger than the others and a date window reading it does not read them (their own
    block's statistics rule them out), when they make a minimum block."""
    check_column(lead, sample.rows)
    column = sample.rows.columns[lead.column]
    present = column.known & (column.null_count == 0)
    values = np.sort(np.asarray(column.lo[present], dtype=np.int64))
    if len(values) == 0:
        raise LayoutError(f"{lead.column} is NULL on every sampled row of {sample.rows.table}: no ranges to cut")
    thresholds = sorted({int(values[len(values) * i // lead.ranges]) for i in range(1, lead.ranges)} - {int(values[0])})
    translator = translator_for(sample.rows, _ALIAS, session)
    name = _column(lead.column)
    nodes = [exp.LT(this=name.copy(), expression=_literal(t, column.kind.name)) for t in thresholds]
    if not present.all():
        nodes.append(exp.Not(this=exp.Is(this=name.copy(), expression=exp.Null())))
    return [Cut(unqualified(node), pred=translator.translate(node), negated=translator.translate(node, negate=True))
            for node in nodes]


def _column(name: str) -> exp.Column:
    """The column under the translator's alias; quoted where sqlglot would not read the bare name back as the
    column (``select``)."""
    bare = exp.column(name, table=_ALIAS)
    try:
        read = sqlglot.parse_one(f"{bare.sql('spark')} < 0", read="spark")
        same = isinstance(read, exp.LT) and isinstance(read.this, exp.Column) and read.this.name == name
    except sqlglot.errors.ParseError:
        same = False
    return bare if same else exp.column(name, table=_ALIAS, quoted=True)


def _literal(value: int, kind: str) -> exp.Expression:
    if kind == "date":
        try:
            day = _EPOCH + datetime.timedelta(days=value)
        except OverflowError:
            raise LayoutError(f"a date of the sample lies outside 0001-01-01..9999-12-31 ({value} days from "
                              f"1970): no DATE literal can cut there") from None
        return exp.cast(exp.Literal.string(day.isoformat()), exp.DataType.build("date"))
    return sqlglot.parse_one(str(value), read="spark")  # a negative number as Spark reads it: -(literal)
