"""Ranges first: a qd-tree whose first levels cut the table into N ranges of one column, with the greedy's
cuts inside each range (``--lead-ranges COLUMN:N``; given again, each range is cut into ranges of the next
column).

Why. On TPC-DS the date-clustered ``tuned`` layout wins the instances that read a month: its files hold
narrow, disjoint date ranges, and a month window reads one or two of 33. The greedy qd-tree cuts dates where
the training instances' windows end and spends its blocks on dimension cuts, so an unseen window falls in
blocks cut on whole years (docs/results/layout.md, "What any layout could reach"). A tree that lays the table out
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

Ranges within ranges (``--lead-ranges`` given twice or more, outermost first): each range of the first
column is cut into ranges of the next (``layout/qdtree.py`` ``_lead``, level by level). Statements that filter
on the second column and not on the first (TPC-DS q88 and q96 read store_sales by the hour of the day,
through ``time_dim``, over every date) then read one range of it inside every date range, and a date window
still reads its date ranges only, at the price of the greedy's room below: a range is split only while both
parts keep a minimum block. The second column's thresholds are quantiles over the whole sample, so each
date range is cut at the same values.

Through a join (``SENDER.COLUMN:N@FOREIGN=KEY``): ranges of the column of the sender's row each row joins,
as joined cuts (:func:`joined_lead_cuts`). A dimension's rows are then clustered on another dimension's
attribute (customers by the state of their address), which no column of their own holds in order.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import re
from collections.abc import Callable, Iterable

import numpy as np
import sqlglot
from sqlglot import exp

from layout.joined import JoinedKeys
from layout.sample import LayoutError, Sample
from layout.workload import Cut
from rewriter.dip import same_domain
from rewriter.joined_filter import Joined, translator_for, unqualified
from rewriter.predicate import And, Or
from rewriter.session import SessionSettings
from stats.model import EPOCH_DATE, TableStats

LEAD_KINDS = ("int", "date", "string")  # columns whose quantiles are written as exact literals
JOIN_KINDS = ("int",)  # the foreign column and the sender's key
_ALIAS = "lead"
MAX_RANGES = 4096


@dataclasses.dataclass(frozen=True)
class LeadRanges:
    """N ranges of ``column``: the table's own, or, with ``sender``, the column of the ``sender`` table's row
    that each row's ``foreign`` column joins on ``key`` (a unique key of the sender)."""

    column: str
    ranges: int
    sender: str | None = None  # table name, in the laid-out table's database
    foreign: str | None = None  # the laid-out table's column
    key: str | None = None  # the sender's column it joins

    def __str__(self) -> str:
        if self.sender is None:
            return f"{self.column}:{self.ranges}"
        return f"{self.sender}.{self.column}:{self.ranges}@{self.foreign}={self.key}"

    def label(self) -> str:
        """For reports: the column, or the joined column and the join."""
        if self.sender is None:
            return self.column
        return f"{self.sender}.{self.column} (joined on {self.foreign} = {self.key})"

    def sampled(self) -> str:
        """The laid-out table's column a plan's sample needs for the ranges."""
        return self.foreign if self.foreign is not None else self.column


_NAME = r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*"
_LEAD = re.compile(rf"(?:{_NAME}\.)?{_NAME}:\s*(\d{{1,6}})\s*(?:@{_NAME}={_NAME})?")


def parse_lead(text: str) -> LeadRanges:
    """``COLUMN:N``, or ``SENDER.COLUMN:N@FOREIGN=KEY`` (ranges of a joined table's column), 2 <= N <= MAX_RANGES."""
    match = _LEAD.fullmatch(text)
    if not match or not 2 <= int(match.group(3)) <= MAX_RANGES or (match.group(1) is None) != (match.group(4) is None):
        raise LayoutError(f"--lead-ranges takes COLUMN:N (ss_sold_date_sk:16), or SENDER.COLUMN:N@FOREIGN=KEY for "
                          f"ranges of a joined table's column (customer_address.ca_state:8@c_current_addr_sk="
                          f"ca_address_sk), with 2 <= N <= {MAX_RANGES} ranges, not {text!r}")
    sender, column, n, foreign, key = match.groups()
    return LeadRanges(column.lower(), int(n), sender and sender.lower(), foreign and foreign.lower(), key and key.lower())


def lead_argument(text: str) -> LeadRanges:
    """:func:`parse_lead` for argparse, whose usage error then names the option."""
    try:
        return parse_lead(text)
    except LayoutError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def check_column(lead: LeadRanges, stats: TableStats,
                 table_stats: Callable[[str], TableStats | None] | None = None) -> None:
    """That ``stats``' table has the column, of a kind ranges can be cut on (for a joined column: that the
    table has the foreign column and the sender, found by ``table_stats``, the key and the column): before
    any row is sampled."""
    if lead.sender is None:
        column = stats.columns.get(lead.column)
        if column is None:
            raise LayoutError(f"--lead-ranges: {stats.table} has no column {lead.column!r} with statistics")
        if column.kind.name not in LEAD_KINDS:
            raise LayoutError(f"--lead-ranges needs an integer, date or string column; {stats.table}.{lead.column} "
                              f"is {column.kind.name}")
        return
    sender = _sender_table(lead, stats)
    if sender.lower() == stats.table.lower():
        raise LayoutError(f"--lead-ranges {lead}: the table cannot be laid out by its own rows (the cuts pin the "
                          f"files the layout replaces); name another table")
    found = table_stats(sender) if table_stats is not None else None
    if found is None:
        raise LayoutError(f"--lead-ranges: no statistics for {sender}, the table {lead} joins; collect them first "
                          f"(python -m stats collect)")
    for table, name, kinds in ((stats, lead.foreign, JOIN_KINDS), (found, lead.key, JOIN_KINDS),
                               (found, lead.column, LEAD_KINDS)):
        column = table.columns.get(name)
        if column is None:
            raise LayoutError(f"--lead-ranges {lead}: {table.table} has no column {name!r} with statistics")
        if column.kind.name not in kinds:
            raise LayoutError(f"--lead-ranges {lead}: {table.table}.{name} is {column.kind.name}; it takes "
                              f"{', '.join(kinds)} columns")
    if not same_domain(stats.columns[lead.foreign].kind, found.columns[lead.key].kind):
        raise LayoutError(f"--lead-ranges {lead}: {stats.table}.{lead.foreign} and {sender}.{lead.key} compare "
                          f"in different domains; a join key must be of one type")


def check_levels(leads: Iterable[LeadRanges]) -> tuple[LeadRanges, ...]:
    """``leads`` as the levels of one plan, outermost first, each of another column: a column given twice
    would cut ranges that are already cut (the second level splits nothing, or at other thresholds, which one
    level of more ranges says plainly)."""
    leads = tuple(leads)
    seen = [lead.label() for lead in leads]
    twice = next((label for label in seen if seen.count(label) > 1), None)
    if twice is not None:
        raise LayoutError(f"--lead-ranges names {twice} twice: each one cuts every range of the one before into "
                          f"ranges of another column; for more ranges of one column, give one larger N")
    return leads


def _sender_table(lead: LeadRanges, stats: TableStats) -> str:
    """The sender, in the laid-out table's database unless the lead names one (``in_database``)."""
    sender = str(lead.sender)
    return sender if "." in sender or "." not in stats.table else f"{stats.table.rpartition('.')[0]}.{sender}"


def in_database(leads: Iterable[LeadRanges], database: str) -> tuple[LeadRanges, ...]:
    """``leads`` with each joined column's sender read in ``database``: for a plan whose sample comes from
    another database's copy of the table than the one laid out (``bench layout-effect`` predicts from the
    source)."""
    return tuple(lead if lead.sender is None or "." in lead.sender else
                 dataclasses.replace(lead, sender=f"{database}.{lead.sender}") for lead in leads)


def sampled_columns(columns: Iterable[str], leads: Iterable[LeadRanges]) -> list[str]:
    """The columns a plan's sample needs: those the workload tests, and each lead's column (the foreign column
    of a joined one), whose range cuts are its sampled values' quantiles (every caller of
    ``layout/whatif.py`` ``plan`` with ``leads`` samples these)."""
    return sorted(set(columns) | {lead.sampled() for lead in leads})


def lead_cuts(lead: LeadRanges, sample: Sample, session: SessionSettings, keys: JoinedKeys | None = None) -> list[Cut]:
    """The cuts ``column < t`` at the ``lead.ranges``-quantiles of the column's non-NULL sampled values, each
    threshold once (a value holding more than a range's rows makes fewer ranges), and ``column IS NOT NULL``
    where a sampled row is NULL: it splits the NULL rows, which fail every ``<`` cut, off the last range, so
    that range is not larger than the others and a date window reading it does not read them (their own
    block's statistics rule them out), when they make a minimum block. A joined column's ranges are
    :func:`joined_lead_cuts` (``keys`` reads the sender)."""
    if lead.sender is not None:
        if keys is None:
            raise ValueError("ranges of a joined column need the sender's rows (keys)")
        return joined_lead_cuts(lead, sample, session, keys)
    check_column(lead, sample.rows)
    column = sample.rows.columns[lead.column]
    present = column.known & (column.null_count == 0)
    translator = translator_for(sample.rows, _ALIAS, session)
    nodes = _range_nodes(lead, column.lo[present], column.kind.name, not present.all(),
                         f"{lead.column} is NULL on every sampled row of {sample.rows.table}")
    return [Cut(unqualified(node), pred=translator.translate(node), negated=translator.translate(node, negate=True))
            for node in nodes]


def _range_nodes(lead: LeadRanges, values: np.ndarray, kind: str, nulls: bool, empty: str) -> list[exp.Expression]:
    """``column < t`` at the ``lead.ranges``-quantiles of ``values`` (the non-NULL ones, of ``kind``), each
    threshold once, and ``column IS NOT NULL`` where some row has none (``nulls``). Values are ordered as
    ``<`` compares them: integers (dates as days) as int64, strings by code point, the order of Spark's
    UTF-8 bytes. ``empty``: what to say when there is no value."""
    if len(values) == 0:
        raise LayoutError(f"{empty}: no ranges to cut")
    values = np.sort(values.astype(object) if kind == "string" else np.asarray(values, dtype=np.int64))
    plain = str if kind == "string" else int  # a numpy scalar as the Python value its literal is written from
    thresholds = sorted({plain(values[len(values) * i // lead.ranges]) for i in range(1, lead.ranges)} -
                        {plain(values[0])})
    name = _column(lead.column)
    nodes = [exp.LT(this=name.copy(), expression=_literal(t, kind)) for t in thresholds]
    if nulls:
        nodes.append(exp.Not(this=exp.Is(this=name.copy(), expression=exp.Null())))
    return nodes


def joined_lead_cuts(lead: LeadRanges, sample: Sample, session: SessionSettings, keys: JoinedKeys) -> list[Cut]:
    """Ranges of a joined table's column (the join-aware ranges of issue 15): the joined cuts ``FOREIGN IN
    (SELECT KEY FROM SENDER WHERE COLUMN < t)`` at the quantiles of the values the sampled rows join, each
    threshold once, and ``... WHERE COLUMN IS NOT NULL`` where a sampled row joins no value (a NULL or
    dangling foreign key, a NULL column). Each is an ordinary joined cut: ``apply`` routes rows by it with
    the sender's files pinned, and the rewriter rules a block out for a statement whose joined filter through
    the same key excludes the block's range (``rewriter/blocks.py``). TPC-DS ``customer`` by the state of
    its current address: a statement's ``ca_state = 'GA'`` reads the customers of the ranges holding GA.
    The sender is read whole (``JoinedKeys``), and its key must be unique, so each row joins one value."""
    stats = sample.rows
    sender = _sender_table(lead, stats)
    check_column(lead, stats, keys.loader.table_stats)
    rows = keys.sender(sender, tuple(sorted({lead.key, lead.column})))
    if rows is None:
        raise LayoutError(f"--lead-ranges {lead}: {sender} could not be read whole (the log says why), so the "
                          f"values its rows join are not known")
    key, value = rows.rows.columns[lead.key], rows.rows.columns[lead.column]
    with_key = key.null_count == 0
    keys_sorted = np.asarray(key.lo[with_key], dtype=np.int64)
    order = np.argsort(keys_sorted, kind="stable")
    keys_sorted = keys_sorted[order]
    if (keys_sorted[1:] == keys_sorted[:-1]).any():
        raise LayoutError(f"--lead-ranges {lead}: {sender}.{lead.key} is not unique, so a row could join several "
                          f"values of {lead.column}")
    joined_values = value.lo[with_key][order]
    joined_known = ((value.null_count == 0) & value.known)[with_key][order]
    foreign = stats.columns[lead.foreign]
    present = foreign.known & (foreign.null_count == 0)
    wanted = np.asarray(foreign.lo[present], dtype=np.int64)
    at = np.minimum(np.searchsorted(keys_sorted, wanted), max(len(keys_sorted) - 1, 0))
    found = (keys_sorted[at] == wanted) & joined_known[at] if len(keys_sorted) else np.zeros(len(wanted), dtype=bool)
    # rows that join no value (a NULL or dangling foreign key, a NULL column) fail every "<" cut
    nodes = _range_nodes(lead, joined_values[at[found]], value.kind.name, int(found.sum()) < len(foreign.lo),
                         f"no sampled row of {stats.table} joins a row of {sender} with a {lead.column}")
    translator = translator_for(keys.loader.table_stats(sender), _ALIAS, session)
    cuts = []
    for node in nodes:
        j = Joined(lead.foreign, sender, lead.key, And((translator.translate(node),)), (unqualified(node),), (),
                   Or((translator.translate(node, negate=True),)))
        cuts.append(Cut(j.sql(), joined=j))
    return cuts


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


def _literal(value: int | str, kind: str) -> exp.Expression:
    if kind == "string":
        return exp.Literal.string(str(value))
    if kind == "date":
        try:
            day = EPOCH_DATE + datetime.timedelta(days=value)
        except OverflowError:
            raise LayoutError(f"a date of the sample lies outside 0001-01-01..9999-12-31 ({value} days from "
                              f"1970): no DATE literal can cut there") from None
        return exp.cast(exp.Literal.string(day.isoformat()), exp.DataType.build("date"))
    return sqlglot.parse_one(str(value), read="spark")  # a negative number as Spark reads it: -(literal)
