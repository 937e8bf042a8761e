"""Random predicates over the property test's table: a seeded generator, and the tree it builds, which
knows how to make itself smaller.

Case ``i`` of seed ``s`` is generated from ``random.Random("fuzz-predicates/s/i")`` alone, so any case
replays without the ones before it. The generator covers every operator and function the rewriter
understands (``rewriter/falsify.py``, ``rewriter/monotone.py``, ``rewriter/spark/evaluate.py``) and a good
many it does not:

- comparisons (``=``, ``==``, ``<>``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``<=>``, IS [NOT] DISTINCT
  FROM), [NOT] BETWEEN, [NOT] IN lists (with NULL sometimes), IS [NOT] NULL, [NOT] LIKE, ILIKE,
  startswith, NOT, AND, OR, and comparisons of two columns;
- monotone functions (year, month, quarter, date_trunc, trunc, date_add, date_sub, add_months, date +
  INTERVAL, x + c, x - c, x * c, casts) and others (abs, %, substr, upper, lower, length, concat, two-column
  arithmetic), nested up to two deep;
- literals of every type in every spelling Spark accepts: typed integers (``5Y``, ``5S``, ``5L``),
  decimals, doubles, NaN and infinities, dates, timestamps with and without a zone, strings compared with
  dates, timestamps and numbers;
- conjuncts that may raise under ANSI (overflowing arithmetic, narrowing casts, a string column compared
  with a number) beside conjuncts that may prune, the pattern that decides whether skipping hides an error.

Literals are drawn mostly from the values the term takes (``bench/fuzz_predicates/values.py``), so that
predicates are true in some files and false in others.

A predicate is an :class:`Expr` tree. :func:`shrinks` yields smaller trees (a sub-predicate, a function
peeled off its argument, a shorter IN list, a plainer literal), which ``bench/fuzz_predicates/shrink.py``
tries in order until none still fails.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import math
import random
import zoneinfo
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from sqlglot import exp

from bench.fuzz_predicates import values as V
from bench.fuzz_predicates.values import BY_NAME, COLUMNS, Column

MAX_DEPTH = 3
# Zones literals are spelled in (wall-clock times, offsets and region names).
LITERAL_ZONES = ("UTC", "America/New_York", "America/Los_Angeles", "Europe/Berlin")
_OPS = ("=", "=", "==", "<>", "!=", "<", "<=", ">", ">=", "<", ">")
_SWAP = {"=": "=", "==": "==", "<>": "<>", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


@dataclasses.dataclass(frozen=True)
class Expr:
    """A node of a generated predicate: ``template`` with ``{0}``, ``{1}``, ... standing for its arguments
    (a leaf's template is its SQL text as is)."""

    template: str
    args: tuple[Expr, ...] = ()
    family: str = "boolean"  # "boolean", "list", or a value family of bench/fuzz_predicates/values.py
    simpler: tuple[Expr, ...] = ()  # plainer leaves to try in this one's place when shrinking
    joiner: str | None = None  # a list node: its arguments joined with this
    column: str | None = None  # a column leaf: the column's name

    def sql(self) -> str:
        if self.joiner is not None:
            return self.joiner.join(a.sql() for a in self.args)
        if not self.args:
            return self.template
        return self.template.format(*(a.sql() for a in self.args))

    def columns(self) -> list[str]:
        """The columns the expression reads, in order of first appearance."""
        out: list[str] = []
        for node in self.walk():
            if node.column is not None and node.column not in out:
                out.append(node.column)
        return out

    def walk(self) -> Iterator[Expr]:
        yield self
        for a in self.args:
            yield from a.walk()

    def size(self) -> int:
        return sum(1 for _ in self.walk())


@dataclasses.dataclass(frozen=True)
class Case:
    seed: int
    index: int
    predicate: Expr

    @property
    def sql(self) -> str:
        return self.predicate.sql()


def written(sql: str, index: int = 0) -> Case:
    """A predicate written by hand (a regression case): a leaf, so it is not shrunk; seed -1."""
    return Case(-1, index, leaf(sql, "boolean"))


def generate(seed: int, count: int, start: int = 0) -> list[Case]:
    """Cases ``start .. start + count - 1`` of ``seed``."""
    return [case(seed, i) for i in range(start, start + count)]


def case(seed: int, index: int) -> Case:
    rng = random.Random(f"fuzz-predicates/{seed}/{index}")
    return Case(seed, index, Generator(rng).predicate())


def shrinks(e: Expr) -> Iterator[Expr]:
    """Smaller expressions to try in place of ``e``, biggest reductions first."""
    if e.family == "boolean":
        for a in e.args:
            if a.family == "boolean":
                yield a
    else:
        for a in e.args:  # peel a function: f(x) -> x, when x has the same family and reads a column
            if a.family == e.family and a.columns():
                yield a
    yield from e.simpler
    if e.joiner is not None and len(e.args) > 1:
        for i in range(len(e.args)):
            yield dataclasses.replace(e, args=e.args[:i] + e.args[i + 1:])
    for i, a in enumerate(e.args):
        for smaller in shrinks(a):
            yield dataclasses.replace(e, args=e.args[:i] + (smaller,) + e.args[i + 1:])


# -- leaves ----------------------------------------------------------------------------------------------

def leaf(text: str, family: str, simpler: Sequence[Expr] = ()) -> Expr:
    return Expr(text, family=family, simpler=tuple(s for s in simpler if s.template != text))


def column(c: Column) -> Expr:
    return Expr(c.name, family=c.family, column=c.name)


def string_literal(text: str) -> str:
    """A Spark string literal, quoted and escaped by sqlglot."""
    return exp.Literal.string(text).sql("spark")


def _plain_decimal(d: decimal.Decimal) -> str:
    return format(d, "f")


def _wall(t: datetime.datetime) -> str:
    text = t.strftime("%Y-%m-%d %H:%M:%S")
    return text + (f".{t.microsecond:06d}" if t.microsecond else "")


def _offset(delta: datetime.timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


# Value pools per family, for literals compared with a term whose values are not known more closely.
_YEARS = (1900, 1969, 1970, 1995, 1999, 2000, 2020, 2021, 2022, 9999)
POOLS: dict[str, tuple[Any, ...]] = {
    "int": tuple(sorted(set(V.INT8 + V.INT16 + V.INT32 + V.INT64 + _YEARS + tuple(range(13))))),
    "decimal": tuple(sorted(set(V.DEC_5_2 + V.DEC_18_4 + V.DEC_38_10))),
    "double": V.DOUBLE,
    "date": V.DATES + (datetime.date(2021, 2, 28), datetime.date(2021, 3, 16), datetime.date(2021, 11, 8)),
    "timestamp": V.TIMESTAMPS + V.TIMESTAMPS_NTZ,  # naive ones: wall-clock times read in the session zone
    "timestamp_ntz": V.TIMESTAMPS_NTZ,
    "string": V.STRINGS + ("a%", "%", "_", "a_", "abc\\", "it's", "日"),
}


class Generator:
    """Builds one random predicate from ``rng``; every choice is drawn from it, in order."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def pick(self, options: Sequence[Any], weights: Sequence[float] | None = None) -> Any:
        return self.rng.choices(options, weights=weights)[0] if weights else self.rng.choice(options)

    # -- predicates ------------------------------------------------------------------------------------

    def predicate(self, depth: int = 0) -> Expr:
        if depth == 0 and self.chance(0.15):
            return self._guarded()
        if depth < MAX_DEPTH and self.chance(0.3 if depth == 0 else 0.18):
            kind = self.pick(("not", "and", "or"), (1, 2, 2))
            if kind == "not":
                return Expr("NOT ({0})", (self.predicate(depth + 1),))
            return Expr("({0} " + kind.upper() + " {1})", (self.predicate(depth + 1), self.predicate(depth + 1)))
        kinds = ("cmp", "null_safe", "between", "in", "is_null", "like", "columns", "constant")
        return getattr(self, "_" + self.pick(kinds, (34, 5, 10, 12, 8, 8, 9, 1)))()

    def _cmp(self) -> Expr:
        term, hint = self.term()
        op = self.pick(_OPS)
        lit = self.literal(term.family, hint)
        if self.chance(0.2):
            return Expr("{0} " + _SWAP[op] + " {1}", (lit, term))
        return Expr("{0} " + op + " {1}", (term, lit))

    def _null_safe(self) -> Expr:
        term, hint = self.term()
        right = leaf("NULL", term.family) if self.chance(0.3) else self.literal(term.family, hint)
        op = self.pick(("<=>", "IS NOT DISTINCT FROM", "IS DISTINCT FROM"), (4, 1, 1))
        return Expr("{0} " + op + " {1}", (term, right))

    def _between(self) -> Expr:
        term, hint = self.term()
        a, b = self.value(term.family, hint), self.value(term.family, hint)
        if self.chance(0.85):
            a, b = sorted((a, b), key=_sort_key)
        negated = "NOT " if self.chance(0.3) else ""
        return Expr("{0} " + negated + "BETWEEN {1} AND {2}",
                    (term, self.render(term.family, a), self.render(term.family, b)))

    def _in(self) -> Expr:
        term, hint = self.term()
        items = [self.literal(term.family, hint) for _ in range(self.rng.randint(1, 5))]
        if self.chance(0.2):
            items.insert(self.rng.randrange(len(items) + 1), leaf("NULL", term.family))
        negated = "NOT " if self.chance(0.35) else ""
        return Expr("{0} " + negated + "IN ({1})", (term, Expr("", tuple(items), family="list", joiner=", ")))

    def _is_null(self) -> Expr:
        term = column(self.pick(COLUMNS)) if self.chance(0.7) else self.term()[0]
        return Expr("{0} IS " + ("NOT " if self.chance(0.5) else "") + "NULL", (term,))

    def _like(self) -> Expr:
        c = BY_NAME[self.pick(("s", "s2"))]
        term = column(c) if self.chance(0.75) else self.apply(column(c), c.universe, ("upper", "lower", "substr", "concat"))[0]
        base = self.pick(c.universe)
        prefix = base[: self.rng.randint(0, len(base))]
        form = self.pick(("prefix", "exact", "contains", "underscore", "startswith", "not", "ilike"), (6, 2, 1, 1, 3, 3, 1))
        if form == "startswith":
            return Expr("startswith({0}, {1})", (term, leaf(string_literal(prefix), "string")))
        pattern = {"prefix": prefix + "%", "exact": base, "contains": "%" + prefix + "%", "underscore": prefix + "_%",
                   "not": prefix + "%", "ilike": prefix + "%"}[form]
        op = {"not": "NOT LIKE", "ilike": "ILIKE"}.get(form, "LIKE")
        return Expr("{0} " + op + " {1}", (term, leaf(string_literal(pattern), "string")))

    def _columns(self) -> Expr:
        """Two columns of the table compared, usually of one family, sometimes across families."""
        first = self.pick(COLUMNS)
        same = [c for c in COLUMNS if c.family == first.family and c is not first]
        if same and self.chance(0.8):
            second = self.pick(same)
        else:
            second = self.pick(COLUMNS)
        left: Expr = column(first)
        if self.chance(0.25):
            left = self.apply(left, first.universe)[0]
        op = self.pick(_OPS + ("<=>",))
        return Expr("{0} " + op + " {1}", (left, column(second)))

    def _guarded(self) -> Expr:
        """A conjunct that may raise beside one that may prune: a file the second rules out still has its
        rows evaluated by the first, unless Spark's own row-group pruning skips them."""
        raiser = self._raiser()
        other = self.predicate(1)
        pair = (raiser, other) if self.chance(0.7) else (other, raiser)
        return Expr("({0} AND {1})", pair)

    def _raiser(self) -> Expr:
        """A comparison Spark may fail to evaluate under ANSI: an implicit or explicit cast of a column that
        may not fit or parse, or arithmetic that may overflow its type."""
        form = self.pick(("implicit", "function"), (2, 3))
        if form == "implicit":  # a string column compared with a number or a date: Spark casts the column
            c = BY_NAME[self.pick(("s", "s2"))]
            family = self.pick(("int", "decimal", "double", "date", "timestamp"))
            return Expr("{0} " + self.pick(_OPS) + " {1}", (column(c), self.render(family, self.value(family, POOLS[family]))))
        c = self.pick([c for c in COLUMNS if c.family in _RAISING])
        term, hint = self.apply(column(c), c.universe, _RAISING[c.family])
        return Expr("{0} " + self.pick(_OPS) + " {1}", (term, self.literal(term.family, hint)))

    def _constant(self) -> Expr:
        return leaf(self.pick(("TRUE", "FALSE", "NULL", "1 = 1", "NULL = NULL")), "boolean")

    # -- terms: a column, possibly under functions -------------------------------------------------------

    def term(self) -> tuple[Expr, tuple[Any, ...]]:
        """A value expression over one column (sometimes two), and values it is likely to take."""
        c = self.pick(COLUMNS)
        e, hint = column(c), c.universe
        for _ in range(self.pick((0, 1, 2), (55, 35, 10))):
            e, hint = self.apply(e, hint)
        return e, hint

    def apply(self, inner: Expr, hint: tuple[Any, ...], only: Sequence[str] = ()) -> tuple[Expr, tuple[Any, ...]]:
        """``inner`` under one function that takes its family; the result's likely values."""
        menu = _FUNCTIONS[inner.family]
        if only:
            menu = [f for f in menu if f[0] in only] or menu
        name, template, family, args, mapping = self.pick(menu)
        extra = tuple(a(self, inner) if callable(a) else a for a in args)
        node = Expr(template, (inner,) + extra, family=family)
        try:
            mapped = tuple(v for v in (mapping(x, extra) for x in hint) if v is not None) if mapping else ()
        except (ArithmeticError, ValueError, OverflowError, TypeError):
            mapped = ()
        return node, mapped or POOLS[family]

    # -- literals ------------------------------------------------------------------------------------------

    def value(self, family: str, hint: tuple[Any, ...]) -> Any:
        """A value of ``family``: mostly one the term takes, sometimes one next to it or anywhere."""
        pool = hint if hint and self.chance(0.8) else POOLS[family]
        v = self.pick(pool)
        if self.chance(0.2):
            v = _neighbour(self, family, v)
        return v

    def literal(self, family: str, hint: tuple[Any, ...]) -> Expr:
        if self.chance(0.04):
            return leaf("NULL", family)
        if self.chance(0.06):  # a literal of another family: Spark coerces, or refuses
            other = self.pick(V.FAMILIES)
            return self.render(other, self.value(other, POOLS[other]))
        return self.render(family, self.value(family, hint))

    def render(self, family: str, v: Any) -> Expr:
        """``v`` spelled as a Spark literal of one of the forms Spark accepts for ``family``."""
        forms = _spellings(family, v)
        texts, weights = zip(*forms)
        text = self.pick(texts, weights)
        return leaf(text, family, simpler=(leaf(texts[0], family),))


def _sort_key(v: Any) -> tuple:
    if isinstance(v, float) and math.isnan(v):
        return (1, 0)
    if isinstance(v, datetime.datetime) and v.tzinfo is not None:
        return (0, v.astimezone(V.UTC).replace(tzinfo=None))
    return (0, v)


def _neighbour(g: Generator, family: str, v: Any) -> Any:
    step = g.pick((-1, 1))
    try:
        if family == "int":
            return v + step
        if family == "decimal":
            return v + decimal.Decimal(step) / 100
        if family == "double":
            return v + step * 0.25 if math.isfinite(v) else v
        if family == "date":
            return v + datetime.timedelta(days=step)
        if family in ("timestamp", "timestamp_ntz"):
            return v + datetime.timedelta(seconds=step * g.pick((1, 1800, 3600)))
        if family == "string":
            return v + g.pick((" ", "a", "😀")) if step > 0 else v[:-1]
    except (OverflowError, ValueError):
        return v
    return v


def _spellings(family: str, v: Any) -> list[tuple[str, float]]:
    """(SQL text, weight) for each way of writing ``v``; the first is the plainest."""
    if family == "int":
        out: list[tuple[str, float]] = [(str(v), 6)]
        if -2**63 <= v < 2**63:
            out.append((f"{v}L", 1))
        if -128 <= v < 128:
            out.append((f"{v}Y", 1))
        if -32768 <= v < 32768:
            out.append((f"{v}S", 1))
        out += [(f"{v}BD", 0.5), (f"{v}.0", 0.5), (f"{v}.5", 0.5), (f"{v}D", 0.5), (f"{v}e0", 0.3),
                (string_literal(str(v)), 0.7), (f"CAST({v} AS BIGINT)", 0.3)]
        return out
    if family == "decimal":
        text = _plain_decimal(v)
        out = [(text, 6), (f"{text}BD", 1), (string_literal(text), 0.5), (f"CAST({text} AS DOUBLE)", 0.5)]
        if v == v.to_integral_value() and abs(v) < 2**63:
            out.append((str(int(v)), 1))
        if abs(v) < 1e15:
            out.append((f"{float(v)!r}D", 0.5))
        return out
    if family == "double":
        if math.isnan(v):
            return [("CAST('NaN' AS DOUBLE)", 1)]
        if math.isinf(v):
            return [(f"CAST('{'-' if v < 0 else ''}Infinity' AS DOUBLE)", 1)]
        r = repr(v)
        out = [(f"{r}D", 5), (r if ("e" in r or "." in r) else r + ".0", 2)]
        if v == int(v) and abs(v) < 2**63:
            out.append((str(int(v)), 1))
        out.append((string_literal(r), 0.3))
        return out
    if family == "date":
        d = v.isoformat()
        return [(f"DATE'{d}'", 6), (string_literal(d), 3), (string_literal(d + " 12:00:00"), 1),
                (f"TIMESTAMP'{d} 00:00:00'", 1), (f"TIMESTAMP_NTZ'{d} 12:00:00'", 0.5),
                (string_literal(d[:7]), 0.3), (f"CAST({string_literal(d)} AS DATE)", 0.5),
                (f"date_add(DATE'{d}', 1)", 0.3), (f"DATE'{d}' + INTERVAL 1 DAY", 0.3),
                (f"TIMESTAMP'{d} 00:00:00+05:30'", 0.3), (string_literal(f" {d} "), 0.2), (string_literal("2021-02-30"), 0.1)]
    if family == "timestamp":
        return _timestamp_spellings(v)
    if family == "timestamp_ntz":
        w = _wall(v)
        return [(f"TIMESTAMP_NTZ'{w}'", 5), (string_literal(w), 2), (f"TIMESTAMP'{w}'", 1),
                (f"DATE'{v.date().isoformat()}'", 0.5), (f"TIMESTAMP'{w}+01:00'", 0.5),
                (f"CAST({string_literal(w)} AS TIMESTAMP_NTZ)", 0.5)]
    if family == "string":
        return [(string_literal(v), 10), (f"CAST({string_literal(v)} AS STRING)", 0.2)]
    raise ValueError(family)


def _timestamp_spellings(v: datetime.datetime) -> list[tuple[str, float]]:
    """A UTC instant (or a naive wall-clock time read in the session zone) as a timestamp literal."""
    if v.tzinfo is None:  # a wall-clock time, e.g. one that does not exist in some zone
        w = _wall(v)
        return [(f"TIMESTAMP'{w}'", 5), (string_literal(w), 2), (f"TIMESTAMP_NTZ'{w}'", 1), (f"TIMESTAMP_LTZ'{w}'", 1)]
    out: list[tuple[str, float]] = [(f"TIMESTAMP'{_wall(v.replace(tzinfo=None))}Z'", 3)]
    for zone in LITERAL_ZONES[1:]:
        try:
            local = v.astimezone(zoneinfo.ZoneInfo(zone))
        except (OverflowError, ValueError):
            continue
        w = _wall(local.replace(tzinfo=None))
        out += [(f"TIMESTAMP'{w}'", 2), (f"TIMESTAMP'{w}{_offset(local.utcoffset())}'", 1),
                (f"TIMESTAMP'{w} {zone}'", 0.5), (string_literal(w), 1)]
    u = _wall(v.replace(tzinfo=None))
    out += [(f"TIMESTAMP_NTZ'{u}'", 0.5), (f"DATE'{v.date().isoformat()}'", 0.5), (string_literal(v.date().isoformat()), 0.3),
            (f"TIMESTAMP'{u}+00:00' + INTERVAL 1 HOUR", 0.3), (f"CAST({string_literal(u)} AS TIMESTAMP)", 0.3)]
    return out


# -- the function menu --------------------------------------------------------------------------------
# Per input family: (name, template, result family, extra arguments, value mapping). An extra argument is
# a fixed Expr or a callable drawing one from the generator; the mapping turns a likely input value (and
# the extra arguments) into a likely result value, or is None when the result family's pool will do.

ValueMap = Callable[[Any, tuple[Expr, ...]], Any] | None


def _int_arg(*values: str) -> Callable[[Generator, Expr], Expr]:
    return lambda g, _: leaf(g.pick(values), "int", simpler=(leaf("1", "int"),))


# Typed constants of a narrow column's own width: TINYINT + TINYINT is computed (and overflows) in TINYINT.
_NARROW = {8: ("1Y", "2Y", "100Y", "127Y", "-128Y"), 16: ("1S", "300S", "32767S", "-32768S"),
           32: ("1", "2147483647", "1000000000"), 64: ("1L", "9223372036854775807L", "3037000500L")}


def _width_arg(*values: str) -> Callable[[Generator, Expr], Expr]:
    """An integer constant, half the time one of the same width as the column it is applied to."""
    def pick(g: Generator, inner: Expr) -> Expr:
        bits = BY_NAME[inner.column].bits if inner.column is not None else None
        options = _NARROW[bits] if bits and g.chance(0.5) else values
        return leaf(g.pick(options), "int", simpler=(leaf("1", "int"),))
    return pick


def _num(e: Expr) -> int:
    return int(e.template.rstrip("YSL"))


def _dec(e: Expr) -> decimal.Decimal:
    return decimal.Decimal(e.template.rstrip("BD"))


def _int_column(g: Generator, _: Expr) -> Expr:
    return column(g.pick([c for c in COLUMNS if c.family == "int"]))


def _unit(*units: str) -> Callable[[Generator, Expr], Expr]:
    return lambda g, _: leaf(string_literal(g.pick(units)), "string")


# Functions that may raise under ANSI, per input family (names in _FUNCTIONS).
_RAISING = {"int": ("add", "mul", "int", "smallint", "tinyint", "neg", "abs"), "decimal": ("mul", "int", "narrow"),
            "double": ("bigint", "int", "decimal"), "date": ("date_add", "add_months", "plus_days"),
            "string": ("int", "date", "double")}
_SMALL = ("1", "2", "10", "100", "-1", "1Y", "1S", "1L", "127Y", "32767S", "2147483647", "9223372036854775807L",
          "1000000000")
_FACTORS = ("2", "10", "1000", "1000000000", "3037000500L", "-1", "0", "2Y", "300S", "100L")
_DAYS = ("1", "7", "30", "-1", "-365", "3000000", "2147483647")
_MONTHS = ("1", "3", "12", "-1", "-13", "1200000")


def _year(v: Any, _: tuple) -> Any:
    return v.year


def _month(v: Any, _: tuple) -> Any:
    return v.month


def _quarter(v: Any, _: tuple) -> Any:
    return (v.month - 1) // 3 + 1


_FUNCTIONS: dict[str, list[tuple[str, str, str, tuple, ValueMap]]] = {
    "int": [
        ("add", "({0} + {1})", "int", (_width_arg(*_SMALL),), lambda v, a: v + _num(a[0])),
        ("sub", "({0} - {1})", "int", (_width_arg(*_SMALL),), lambda v, a: v - _num(a[0])),
        ("mul", "({0} * {1})", "int", (_width_arg(*_FACTORS),), lambda v, a: v * _num(a[0])),
        ("bigint", "CAST({0} AS BIGINT)", "int", (), lambda v, a: v),
        ("int", "CAST({0} AS INT)", "int", (), lambda v, a: v),
        ("smallint", "CAST({0} AS SMALLINT)", "int", (), lambda v, a: v),
        ("tinyint", "CAST({0} AS TINYINT)", "int", (), lambda v, a: v),
        ("double", "CAST({0} AS DOUBLE)", "double", (), lambda v, a: float(v)),
        ("decimal", "CAST({0} AS DECIMAL(10,2))", "decimal", (), lambda v, a: decimal.Decimal(v)),
        ("string", "CAST({0} AS STRING)", "string", (), lambda v, a: str(v)),
        ("neg", "(- {0})", "int", (), lambda v, a: -v),
        ("abs", "abs({0})", "int", (), lambda v, a: abs(v)),
        ("mod", "({0} % {1})", "int", (_int_arg("3", "7", "10", "-3"),), lambda v, a: int(math.fmod(v, _num(a[0])))),
        ("plus_column", "({0} + {1})", "int", (_int_column,), None),
        ("times_column", "({0} * {1})", "int", (_int_column,), None),
    ],
    "decimal": [
        ("add", "({0} + {1})", "decimal", (lambda g, _: leaf(g.pick(("1", "0.5", "1.25BD", "-2")), "decimal"),),
         lambda v, a: v + _dec(a[0])),
        ("sub", "({0} - {1})", "decimal", (lambda g, _: leaf(g.pick(("1", "0.01", "100")), "decimal"),),
         lambda v, a: v - _dec(a[0])),
        ("mul", "({0} * {1})", "decimal", (lambda g, _: leaf(g.pick(("2", "10", "1000000000000", "-1")), "decimal"),),
         lambda v, a: v * _dec(a[0])),
        ("bigint", "CAST({0} AS BIGINT)", "int", (), lambda v, a: int(v)),
        ("int", "CAST({0} AS INT)", "int", (), lambda v, a: int(v)),
        ("double", "CAST({0} AS DOUBLE)", "double", (), lambda v, a: float(v)),
        ("narrow", "CAST({0} AS DECIMAL(5,1))", "decimal", (), lambda v, a: round(v, 1)),
        ("string", "CAST({0} AS STRING)", "string", (), lambda v, a: _plain_decimal(v)),
        ("floor", "floor({0})", "decimal", (), lambda v, a: decimal.Decimal(math.floor(v))),
    ],
    "double": [
        ("add", "({0} + {1})", "double", (lambda g, _: leaf(g.pick(("1.5D", "1", "-0.5D")), "double"),), None),
        ("mul", "({0} * {1})", "double", (lambda g, _: leaf(g.pick(("2", "2.0D", "-1", "1e300D")), "double"),), None),
        ("bigint", "CAST({0} AS BIGINT)", "int", (), lambda v, a: int(v)),
        ("int", "CAST({0} AS INT)", "int", (), lambda v, a: int(v)),
        ("decimal", "CAST({0} AS DECIMAL(10,2))", "decimal", (), lambda v, a: decimal.Decimal(v).quantize(decimal.Decimal("0.01"))),
        ("string", "CAST({0} AS STRING)", "string", (), None),
        ("floor", "floor({0})", "int", (), lambda v, a: math.floor(v)),
    ],
    "date": [
        ("year", "year({0})", "int", (), _year),
        ("month", "month({0})", "int", (), _month),
        ("quarter", "quarter({0})", "int", (), _quarter),
        ("day", "dayofmonth({0})", "int", (), lambda v, a: v.day),
        ("date_trunc", "date_trunc({1}, {0})", "timestamp",
         (_unit("YEAR", "YYYY", "QUARTER", "MONTH", "MM", "WEEK", "DAY", "DD", "HOUR"),), None),
        ("trunc", "trunc({0}, {1})", "date", (_unit("YEAR", "YYYY", "YY", "QUARTER", "MONTH", "MM", "MON", "WEEK"),),
         lambda v, a: v.replace(day=1)),
        ("date_add", "date_add({0}, {1})", "date", (_int_arg(*_DAYS),),
         lambda v, a: v + datetime.timedelta(days=_num(a[0]))),
        ("date_sub", "date_sub({0}, {1})", "date", (_int_arg(*_DAYS),),
         lambda v, a: v - datetime.timedelta(days=_num(a[0]))),
        ("add_months", "add_months({0}, {1})", "date", (_int_arg(*_MONTHS),), None),
        ("plus_days", "({0} + INTERVAL {1} DAY)", "date", (_int_arg("1", "3", "-2", "400"),),
         lambda v, a: v + datetime.timedelta(days=_num(a[0]))),
        ("plus_months", "({0} + INTERVAL {1} MONTH)", "date", (_int_arg("1", "-1", "14"),), None),
        ("minus_day", "({0} - INTERVAL '1' DAY)", "date", (), lambda v, a: v - datetime.timedelta(days=1)),
        ("plus_hours", "({0} + INTERVAL {1} HOUR)", "timestamp", (_int_arg("1", "-3", "26"),), None),
        ("plus_int", "({0} + {1})", "date", (_int_arg("1", "-1", "31"),),
         lambda v, a: v + datetime.timedelta(days=_num(a[0]))),
        ("timestamp", "CAST({0} AS TIMESTAMP)", "timestamp", (), None),
        ("timestamp_ntz", "CAST({0} AS TIMESTAMP_NTZ)", "timestamp_ntz",
         (), lambda v, a: datetime.datetime(v.year, v.month, v.day)),
        ("string", "CAST({0} AS STRING)", "string", (), lambda v, a: v.isoformat()),
        ("to_date", "to_date({0})", "date", (), lambda v, a: v),
        ("datediff", "datediff({0}, DATE'2021-01-01')", "int", (), lambda v, a: (v - datetime.date(2021, 1, 1)).days),
        ("last_day", "last_day({0})", "date", (), None),
    ],
    "timestamp": [
        ("year", "year({0})", "int", (), _year),
        ("month", "month({0})", "int", (), _month),
        ("quarter", "quarter({0})", "int", (), _quarter),
        ("hour", "hour({0})", "int", (), lambda v, a: v.hour),
        ("date_trunc", "date_trunc({1}, {0})", "timestamp", (_unit("YEAR", "MONTH", "DAY", "HOUR", "WEEK", "QUARTER"),), None),
        ("date", "CAST({0} AS DATE)", "date", (), lambda v, a: v.date()),
        ("to_date", "to_date({0})", "date", (), lambda v, a: v.date()),
        ("plus_hours", "({0} + INTERVAL {1} HOUR)", "timestamp", (_int_arg("1", "-1", "24"),),
         lambda v, a: v + datetime.timedelta(hours=_num(a[0]))),
        ("plus_days", "({0} + INTERVAL {1} DAY)", "timestamp", (_int_arg("1", "-1", "30"),),
         lambda v, a: v + datetime.timedelta(days=_num(a[0]))),
        ("minus_minutes", "({0} - INTERVAL 30 MINUTES)", "timestamp", (), lambda v, a: v - datetime.timedelta(minutes=30)),
        ("ntz", "CAST({0} AS TIMESTAMP_NTZ)", "timestamp_ntz", (), None),
        ("string", "CAST({0} AS STRING)", "string", (), None),
        ("seconds", "CAST({0} AS BIGINT)", "int", (), lambda v, a: int(v.timestamp())),
        ("unix_micros", "unix_micros({0})", "int", (), None),
        ("trunc", "trunc({0}, 'MM')", "date", (), lambda v, a: v.date().replace(day=1)),
    ],
    "timestamp_ntz": [
        ("year", "year({0})", "int", (), _year),
        ("month", "month({0})", "int", (), _month),
        ("hour", "hour({0})", "int", (), lambda v, a: v.hour),
        ("date_trunc", "date_trunc({1}, {0})", "timestamp", (_unit("YEAR", "MONTH", "DAY", "HOUR"),), None),
        ("date", "CAST({0} AS DATE)", "date", (), lambda v, a: v.date()),
        ("timestamp", "CAST({0} AS TIMESTAMP)", "timestamp", (), None),
        ("plus_hours", "({0} + INTERVAL {1} HOUR)", "timestamp_ntz", (_int_arg("1", "-1", "24"),),
         lambda v, a: v + datetime.timedelta(hours=_num(a[0]))),
        ("string", "CAST({0} AS STRING)", "string", (), lambda v, a: _wall(v)),
    ],
    "string": [
        ("upper", "upper({0})", "string", (), lambda v, a: v.upper()),
        ("lower", "lower({0})", "string", (), lambda v, a: v.lower()),
        ("length", "length({0})", "int", (), lambda v, a: len(v)),
        ("substr", "substr({0}, {1}, {2})", "string", (_int_arg("1", "2", "0", "-1"), _int_arg("1", "2", "3")),
         lambda v, a: v[max(_num(a[0]) - 1, 0):][: _num(a[1])]),
        ("substr_from", "substr({0}, {1})", "string", (_int_arg("1", "2", "-2"),), None),
        ("concat", "concat({0}, {1})", "string", (lambda g, _: leaf(string_literal(g.pick(("!", " ", "a", "😀"))), "string"),),
         None),
        ("concat_column", "concat({0}, {1})", "string", (lambda g, _: column(BY_NAME[g.pick(("s", "s2"))]),), None),
        ("int", "CAST({0} AS INT)", "int", (), None),
        ("date", "CAST({0} AS DATE)", "date", (), None),
        ("double", "CAST({0} AS DOUBLE)", "double", (), None),
        ("trim", "trim({0})", "string", (), lambda v, a: v.strip(" ")),
        ("pipe", "({0} || {1})", "string", (lambda g, _: leaf(string_literal("x"), "string"),), lambda v, a: v + "x"),
    ],
}
