"""Query instances of any workload by redrawing the literals of its predicates from the data (issue 15's
TPC-DS instances; ``bench/workloads.py`` draws TPC-H's as its specification does).

A *parameter* is a literal a predicate compares a bare column of the dataset with, in a WHERE, HAVING or JOIN
ON clause: ``col = v``, ``col < v`` (and the other orders), ``col BETWEEN v AND w``, ``col IN (v, ...)``, where
``v`` may be ``-n``, ``CAST('...' AS DATE)`` or ``v + n`` (only ``v`` is a parameter: ``d_month_seq BETWEEN
1200 AND 1200 + 11`` keeps its width). Literals elsewhere (the SELECT list, CASE labels, LIMIT) and ``<>`` are
not parameters. Each query instance redraws them with its own random generator:

- **Time** moves as one: every year literal of a ``year`` column, every month-sequence literal, and every ISO
  date literal of the predicates shift by the same number of years, drawn among the shifts that keep each inside
  the ``Time`` window (the years the fact rows cover), so ``d_year = 2000 OR d_year = 2001`` stays two
  consecutive years and a date window keeps its width.
- **Other numbers** shift by one whole number per column and query, drawn among the shifts that keep every
  literal of that column between the column's minimum and maximum (from its statistics) and on its side of
  zero: ``d_moy BETWEEN 4 AND 10`` keeps its width, ``i_manufact_id = 128`` becomes any id that exists.
- **Strings** compared by ``=`` or ``IN`` map, per column and query, each distinct literal to a distinct value
  drawn from the column's values (a sample of its rows): ``i_category IN ('Sports', 'Books', 'Home')`` becomes
  three other categories, and the same literal in two subqueries becomes the same new value.

A column counts only if its name belongs to exactly one table of the dataset (TPC-DS names do), so a site whose
column is ambiguous, a string column without values, or a shift without room stays as written. The query text
is edited at the literals' own positions, so everything else (formatting, casts) is unchanged. This is a
perturbation of the workload's own literals, not TPC-DS's ``dsqgen`` with its templates' distributions.
"""

from __future__ import annotations

import dataclasses
import datetime
import random
import re
from collections.abc import Iterator
from decimal import Decimal

import numpy as np
import sqlglot
from sqlglot import exp

from stats.loader import StatsLoader
from stats.model import kind_of

ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
STRING_SAMPLE_ROWS = 20_000


@dataclasses.dataclass(frozen=True)
class Time:
    """The window the fact rows fall in, and the columns that count years and months."""

    first: datetime.date
    last: datetime.date
    year_columns: frozenset[str] = frozenset()
    month_seq_columns: frozenset[str] = frozenset()  # months since January of ``month_seq_base`` (0)
    month_seq_base: int = 1900

    def month_seq(self, d: datetime.date) -> int:
        return (d.year - self.month_seq_base) * 12 + d.month - 1


# TPC-DS sales fall between 1998-01-02 and 2003-01-02 (dsdgen); d_month_seq 1200 is January 2000.
TPCDS_TIME = Time(datetime.date(1998, 1, 1), datetime.date(2002, 12, 31), frozenset({"d_year"}),
                  frozenset({"d_month_seq"}))


def domains_of(config, dataset: str) -> Domains:  # noqa: ANN001 - dipper.config.Config
    """The domains of a dataset whose statistics are in the configured store (TPC-DS's time window)."""
    from dipper.errors import DatasetError
    from stats.freshness import Lister
    from stats.store import StatsStore

    loader = StatsLoader(StatsStore(config.paths.stats), Lister(0))
    if not any(t.startswith(dataset + ".") for t in loader.schemas()):
        raise DatasetError(f"no statistics for a dataset {dataset!r}; generate it first "
                           f"(make dataset SUITE=tpcds SF=1 LAYOUT=tuned)")
    return Domains(loader, dataset, TPCDS_TIME)


class Domains:
    """What the dataset's columns hold: which table owns a column name, the bounds of a numeric column (its
    statistics), the values of a string column (a sample of its rows). Computed once per column."""

    def __init__(self, loader: StatsLoader, database: str, time: Time) -> None:
        self.loader, self.database, self.time = loader, database, time
        owners: dict[str, list[tuple[str, str]]] = {}
        for table, columns in loader.schemas().items():
            if table.startswith(database + "."):
                for column, spark_type in columns.items():
                    owners.setdefault(column.lower(), []).append((table, spark_type))
        self._owner = {c: found[0] for c, found in owners.items() if len(found) == 1}
        self._bounds: dict[str, tuple[Decimal, Decimal] | None] = {}
        self._strings: dict[str, list[str]] = {}

    def kind(self, column: str) -> str | None:
        """``number``, ``string`` or None (not a column of exactly one table, or another type)."""
        found = self._owner.get(column)
        k = kind_of(found[1]) if found else None
        if k is None:
            return None
        return {"int": "number", "decimal": "number", "string": "string"}.get(k.name)

    def bounds(self, column: str) -> tuple[Decimal, Decimal] | None:
        """The least and greatest value of a numeric column over its files with known bounds."""
        if column not in self._bounds:
            table, _ = self._owner[column]
            stats = self.loader.table_stats(table)
            col = stats.columns.get(column) if stats else None
            if col is None or not col.known.any():
                self._bounds[column] = None
            else:
                scale = Decimal(10) ** -col.kind.scale if col.kind.name == "decimal" else Decimal(1)
                self._bounds[column] = (Decimal(int(col.lo[col.known].min())) * scale,
                                        Decimal(int(col.hi[col.known].max())) * scale)
        return self._bounds[column]

    def strings(self, column: str) -> list[str]:
        """The distinct non-NULL values of a sample of the column's rows, sorted."""
        if column not in self._strings:
            from layout.sample import sample_rows

            table, _ = self._owner[column]
            stats = self.loader.table_stats(table, fresh_listing=True)
            values: list[str] = []
            if stats is not None and stats.n_files:
                col = sample_rows(stats, [column], STRING_SAMPLE_ROWS, seed=0).rows.columns[column]
                values = sorted({str(v) for v, nulls in zip(col.lo, col.null_count) if nulls == 0})
            self._strings[column] = values
        return self._strings[column]


@dataclasses.dataclass(frozen=True)
class Site:
    literal: exp.Literal  # carries its position in the query text (meta start/end)
    column: str  # lower-case name; "" for a date literal that is only time
    negative: bool = False  # written as -literal
    offset: Decimal = Decimal(0)  # of ``literal + n - m``: the value compared is number + offset

    @property
    def number(self) -> Decimal:
        value = Decimal(self.literal.this)
        return -value if self.negative else value

    @property
    def values(self) -> tuple[Decimal, Decimal]:
        """The literal and the value compared, which must both stay in bounds."""
        return self.number, self.number + self.offset


def redraw(sql: str, domains: Domains, rng: random.Random) -> str:
    """``sql`` with its parameters redrawn (module docstring); the text is otherwise unchanged."""
    tree = sqlglot.parse_one(sql, read="spark")
    sites = list(_sites(tree, domains))
    edits: dict[int, tuple[int, str]] = {}  # start -> (end, new text)

    def edit(site: Site, text: str) -> None:
        meta = site.literal.meta
        edits[meta["start"]] = (meta["end"], text)

    years = _time_shift(sites, domains.time, rng)
    numbers: dict[str, list[Site]] = {}
    strings: dict[str, list[Site]] = {}
    for s in sites:
        if not s.column:  # a date literal
            if years:
                edit(s, f"'{_plus_years(datetime.date.fromisoformat(s.literal.this), years).isoformat()}'")
        elif s.column in domains.time.year_columns:
            if years and not s.literal.is_string:
                edit(s, _number(s.number + years, s.negative))
        elif s.column in domains.time.month_seq_columns:
            if years and not s.literal.is_string:
                edit(s, _number(s.number + 12 * years, s.negative))
        elif s.literal.is_string:
            strings.setdefault(s.column, []).append(s)
        else:
            numbers.setdefault(s.column, []).append(s)
    for column, group in sorted(numbers.items()):
        delta = _shift(group, domains.bounds(column), rng)
        for s in group:
            if delta:
                edit(s, _number(s.number + delta, s.negative))
    for column, group in sorted(strings.items()):
        old = sorted({s.literal.this for s in group})
        pool = domains.strings(column)
        if len(pool) < len(old):
            continue
        new = dict(zip(old, rng.sample(pool, len(old))))
        for s in group:
            edit(s, "'" + new[s.literal.this].replace("\\", "\\\\").replace("'", "\\'") + "'")
    out, at = [], 0
    for start in sorted(edits):
        end, text = edits[start]
        out.append(sql[at:start])
        out.append(text)
        at = end + 1
    out.append(sql[at:])
    return "".join(out)


def _sites(tree: exp.Expression, domains: Domains) -> Iterator[Site]:
    """The parameters of the predicates of ``tree`` and every date literal in them."""
    clauses = [node.this for node in tree.find_all(exp.Where, exp.Having)]
    clauses += [j.args["on"] for j in tree.find_all(exp.Join) if j.args.get("on") is not None]
    seen: set[int] = set()
    for clause in clauses:
        for node in clause.find_all(exp.Literal):
            if node.is_string and ISO_DATE.fullmatch(node.this) and _valid_date(node.this) and id(node) not in seen:
                seen.add(id(node))
                yield Site(node, "")
        for node in clause.find_all(exp.EQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between, exp.In):
            if isinstance(node, exp.Between):
                column, values = node.this, [node.args["low"], node.args["high"]]
            elif isinstance(node, exp.In):
                column, values = node.this, list(node.expressions)
            elif isinstance(node.this, exp.Column):
                column, values = node.this, [node.expression]
            else:
                column, values = node.expression, [node.this]
            if not isinstance(column, exp.Column) or not values:
                continue
            name = column.name.lower()
            kind = domains.kind(name)
            if kind is None:
                continue
            for v in values:
                site = _parameter(v, name)
                if site is None or id(site.literal) in seen:
                    continue
                if kind == "string" and site.literal.is_string and not ISO_DATE.fullmatch(site.literal.this) or \
                        kind == "number" and not site.literal.is_string:
                    seen.add(id(site.literal))
                    yield site


def _parameter(value: exp.Expression, column: str) -> Site | None:
    """The literal that is the parameter of a compared value: ``n``, ``-n``, ``'s'``, ``CAST(... )``, or the
    left of ``v + n`` / ``v - n``, recursively; None for anything else."""
    offset = Decimal(0)
    while isinstance(value, (exp.Paren, exp.Add, exp.Sub)):
        if not isinstance(value, exp.Paren):
            term = value.expression
            if isinstance(term, exp.Literal) and not term.is_string:
                offset += Decimal(term.this) if isinstance(value, exp.Add) else -Decimal(term.this)
        value = value.this
    if isinstance(value, exp.Neg) and isinstance(value.this, exp.Literal) and not value.this.is_string:
        return Site(value.this, column, True, offset) if "start" in value.this.meta else None
    if isinstance(value, exp.Literal) and "start" in value.meta:
        return Site(value, column, False, offset)
    return None


def _valid_date(text: str) -> bool:
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _plus_years(d: datetime.date, years: int) -> datetime.date:
    try:
        return d.replace(year=d.year + years)
    except ValueError:  # 29 February into a year without one
        return d.replace(year=d.year + years, day=28)


def _time_shift(sites: list[Site], time: Time, rng: random.Random) -> int:
    """A shift in whole years that keeps every time literal inside the window (0 when none but 0 does)."""
    lo, hi = -100, 100
    any_time = False
    for s in sites:
        if not s.column:
            d = datetime.date.fromisoformat(s.literal.this)
            first, last = time.first.year - d.year, time.last.year - d.year
            if _plus_years(d, first) < time.first:
                first += 1
            if _plus_years(d, last) > time.last:
                last -= 1
        elif s.column in time.year_columns and not s.literal.is_string:
            first = time.first.year - int(min(s.values))
            last = time.last.year - int(max(s.values))
        elif s.column in time.month_seq_columns and not s.literal.is_string:
            first = -((int(min(s.values)) - time.month_seq(time.first)) // 12)
            last = (time.month_seq(time.last) - int(max(s.values))) // 12
        else:
            continue
        any_time = True
        lo, hi = max(lo, first), min(hi, last)
    if not any_time or lo > hi or lo > 0 or hi < 0:
        return 0  # no time literal, or the query already lies (partly) outside the window: leave it
    return rng.randint(lo, hi)


def _shift(group: list[Site], bounds: tuple[Decimal, Decimal] | None, rng: random.Random) -> int:
    """A whole-number shift that keeps every literal of ``group`` within ``bounds`` and on its side of 0."""
    if bounds is None:
        return 0
    values = [v for s in group for v in s.values]
    lo = max(bounds[0] - v for v in values)
    hi = min(bounds[1] - v for v in values)
    for v in values:
        if v > 0:
            lo = max(lo, min(v, 1) - v)  # stays at least 1 (or as small as it was)
        elif v < 0:
            hi = min(hi, max(v, -1) - v)
        else:
            return 0  # a zero is a sign test (cd_dep_count = 0, ss_quantity > 0): keep the column as written
    first, last = int(np.ceil(float(lo))), int(np.floor(float(hi)))
    if first > last:
        return 0
    return rng.randint(first, last)


def _number(value: Decimal, negative: bool) -> str:
    """The literal's new text; a literal written as ``-n`` keeps its minus sign outside the literal."""
    return str(-value if negative else value)
