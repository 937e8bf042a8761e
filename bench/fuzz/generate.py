"""The seeded random query generator: Spark SQL over TPC-H or TPC-DS whose result is deterministic.

``generate(suite, seed, index)`` always returns the same text for the same arguments (no Spark, no data:
only ``bench/fuzz/schema.py``), so a failure is reproduced from its seed and index alone.

What it produces (each feature drawn at random, recorded in ``GeneratedQuery.features``):

- join trees of every kind: [INNER] JOIN, LEFT/RIGHT/FULL [OUTER] JOIN, LEFT SEMI, LEFT ANTI, CROSS JOIN
  and comma joins linked in WHERE; nested right sides ``a LEFT JOIN (b JOIN c ON ..) ON ..`` and
  parenthesised left sides ``(a JOIN b ON ..) RIGHT JOIN c ON ..``; USING; self joins;
- ON clauses with equalities across key domains (sometimes of expressions, ``a.k + 1 = b.k``), with
  single-table conjuncts on either side, IS NULL on tables an earlier outer join pads with NULLs, and
  non-equi conjuncts; the same kinds of conjuncts in WHERE, and disjunctions across tables (of one predicate
  per table, or of conjunctions with a part on each table);
- local predicates on dates and keys with ranges selective enough to prune files in the ``tuned`` (date
  clustered) and ``keyed`` layouts, and on other columns (IN lists, LIKE, functions, OR, NOT, IS NULL);
  sometimes arithmetic that overflows (``x * 1000000000`` on an INT column), which raises under ANSI;
- [NOT] IN and [NOT] EXISTS subqueries, correlated or not (the correlation sometimes inside each disjunct of
  the inner filter, as TPC-DS q41), scalar subqueries, under OR sometimes;
- derived tables and CTEs (a CTE read twice too) projecting expressions of keys (``k + 1``, ``k * 2``,
  CAST, ``year(d)``, ``date_add(d, 1)``), with GROUP BY / HAVING, global aggregates, window functions,
  ORDER BY .. LIMIT, UNION [ALL] / INTERSECT [ALL] / EXCEPT [ALL];
- at the top: global aggregates, GROUP BY [HAVING], rows (ORDER BY every output column when a LIMIT
  applies), windows, set operations.

Determinism of results (every result is compared exactly): no rand(), no row_number() or other
order-sensitive window over ties (rank, dense_rank, and sums or counts over a partition are fixed by the
data), every LIMIT under an ORDER BY that is total (a table's unique key, or every output column), and
only exact aggregates (count, sum and min/max of integers, decimals, dates and strings).

Size: every join is estimated from row counts and distinct counts at SF 0.01 and a join that would
produce more than ``MAX_ROWS`` rows is not generated, so each query runs in about a second at SF 0.01.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import random
from collections.abc import Callable, Sequence
from decimal import Decimal

from bench.fuzz.schema import REFERENCE_SF, SUITES, ColumnInfo, SuiteInfo, TableInfo, Value

MAX_ROWS = 400_000  # estimated rows of any intermediate result at SF 0.01
MAX_DEPTH = 2  # derived tables, CTEs and subqueries nest at most this deep
OVERFLOW_RATE = 0.015  # share of predicates that may overflow an integer (ANSI: raises)


@dataclasses.dataclass(frozen=True)
class Profile:
    """How often each construct is drawn. Two profiles: ``FULL`` nests everything; ``SIMPLE`` joins base
    tables only, with few predicates and many NULL tests on outer-join-padded tables. The rewriter models
    simple queries completely, so their outer joins and NULL tests decide its answer (a complex query is
    often declined as a whole, e.g. for a parenthesised join over a derived table); most wrong answers
    found so far needed only a few tables around an outer join."""

    share: float  # of all queries
    top: tuple[float, ...]  # aggregate, group, rows, window, setop
    leaves: tuple[float, ...]  # 1, 2, 3, 4 FROM items at the top level
    joins: tuple[float, ...]  # inner, left, right, full, semi, anti, cross
    joins_after_outer: tuple[float, ...]  # the same, once an outer join has padded a table
    derived: float  # a FROM item is a derived table or CTE read
    nested: float  # the right side of a join is a parenthesised join
    using: float
    on_right: float  # an ON clause has a conjunct on the joined (right) side alone
    on_left: float  # ... on the left side alone
    on_more: float  # ... a second equality, or a comparison across the sides
    on_is_null: float  # ... a NULL test on a column of a table an earlier outer join pads
    where_is_null: float
    where_predicates: tuple[float, ...]  # 0, 1, 2, 3 local predicates
    subquery: float  # a WHERE clause at the top has a subquery predicate


FULL = Profile(0.6, top=(30, 25, 18, 10, 12), leaves=(25, 35, 28, 12), joins=(32, 24, 10, 8, 9, 9, 8),
               joins_after_outer=(32, 24, 10, 8, 9, 9, 8), derived=0.3, nested=0.18, using=0.1, on_right=0.45,
               on_left=0.2, on_more=0.1, on_is_null=0.35, where_is_null=0.4, where_predicates=(22, 45, 25, 8),
               subquery=0.35)
SIMPLE = Profile(0.4, top=(50, 30, 20, 0, 0), leaves=(0, 40, 45, 15), joins=(25, 35, 15, 8, 7, 7, 3),
                 joins_after_outer=(50, 18, 7, 4, 8, 8, 5), derived=0.0, nested=0.3, using=0.0, on_right=0.25,
                 on_left=0.1, on_more=0.03, on_is_null=0.6, where_is_null=0.5, where_predicates=(20, 55, 25, 0),
                 subquery=0.1)


@dataclasses.dataclass(frozen=True)
class GeneratedQuery:
    suite: str
    seed: int
    index: int
    sql: str
    ordered: bool  # the top level has an ORDER BY that is total: compare as lists
    features: frozenset[str]

    @property
    def name(self) -> str:
        return f"{self.suite}/{self.seed}/{self.index}"


def generate(suite: str, seed: int, index: int, sf: float = REFERENCE_SF) -> GeneratedQuery:
    """Query ``index`` of ``seed`` over ``suite``."""
    gen = _Generator(SUITES[suite], random.Random(f"{seed}/{suite}/{index}"), sf)
    sql, ordered = gen.query()
    return GeneratedQuery(suite, seed, index, sql, ordered, frozenset(gen.features))


# Monotone functions a derived table may apply to a column, and how to write them on any expression.
_FNS: dict[str, Callable[[str], str]] = {
    "+1": lambda e: f"{e} + 1",
    "*2": lambda e: f"{e} * 2",
    "-3": lambda e: f"{e} - 3",
    "year": lambda e: f"year({e})",
    "day+1": lambda e: f"date_add({e}, 1)",
}

_SUFFIX = {"+1": "p1", "*2": "x2", "-3": "m3", "year": "y", "day+1": "d1"}  # output names of such columns


@dataclasses.dataclass(frozen=True)
class Col:
    """A column as a scope sees it."""

    expr: str  # how the scope refers to it: "l1.l_orderkey"
    name: str  # its name in that scope (a USING join needs it)
    info: ColumnInfo
    owner: str  # the FROM item (alias) it belongs to
    fn: str = ""  # a function of _FNS applied since the base table
    nullable: bool = False  # may be NULL here: the data holds NULLs, or an outer join pads it
    outer: bool = False  # an outer join pads it with NULLs
    table: bool = False  # a column of a base table read directly (not through a derived table or CTE)
    nested: bool = False  # it comes from a parenthesised join that is the right side of another join

    @property
    def kind(self) -> str:
        return "int" if self.fn == "year" else self.info.kind

    @property
    def ndv(self) -> int:
        return 8 if self.fn == "year" else max(1, self.info.ndv)

    @property
    def joinable(self) -> bool:
        return bool(self.info.domain)

    def padded(self) -> Col:
        return dataclasses.replace(self, nullable=True, outer=True)

    def seen_as(self, alias: str, name: str) -> Col:
        """This column as the output ``name`` of a derived table or CTE read as ``alias``."""
        return dataclasses.replace(self, expr=f"{alias}.{name}", name=name, owner=alias, outer=False, table=False,
                                   nested=False)


@dataclasses.dataclass
class Rel:
    """A FROM item or a join tree: its text, the columns it exposes, an estimate of its rows."""

    sql: str
    cols: list[Col]
    rows: float
    aliases: list[str]
    single_table: TableInfo | None = None  # a base table read on its own (its key orders LIMITs)
    nested: bool = False  # a join tree (may be parenthesised as a join operand)


@dataclasses.dataclass
class _Cte:
    name: str
    sql: str
    cols: list[Col]  # as seen inside the CTE body's scope, renamed to the CTE's output names
    rows: float
    reads: int = 0


class _Generator:
    def __init__(self, suite: SuiteInfo, rng: random.Random, sf: float) -> None:
        self.suite = suite
        self.rng = rng
        self.scale = sf / REFERENCE_SF
        self.counter = 0
        self.ctes: list[_Cte] = []
        self.features: set[str] = set()
        self.profile = SIMPLE if rng.random() < SIMPLE.share else FULL
        self.last_pair: tuple[Col, Col] | None = None  # the columns of the last equality equi_pair wrote
        self.null_tests = 0  # NULL tests on padded columns written so far

    # -- helpers ---------------------------------------------------------------------------------------
    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def pick(self, options: Sequence, weights: Sequence[float] | None = None):  # noqa: ANN201 - generic
        return self.rng.choices(list(options), weights=weights, k=1)[0]

    def alias(self, base: str) -> str:
        self.counter += 1
        return f"{base}{self.counter}"

    def note(self, *features: str) -> None:
        self.features.update(features)

    # -- the top level ---------------------------------------------------------------------------------
    def query(self) -> tuple[str, bool]:
        shape = self.pick(["aggregate", "group", "rows", "window", "setop"], self.profile.top)
        self.note(f"top:{shape}")
        if self.profile is SIMPLE:
            self.note("simple")
        body, ordered = getattr(self, f"_top_{shape}")()
        if self.ctes:
            ctes = ", ".join(f"{c.name} AS ({c.sql})" for c in self.ctes)
            self.note("cte")
            if any(c.reads > 1 for c in self.ctes):
                self.note("cte read twice")
            body = f"WITH {ctes} {body}"
        return body, ordered

    def _top_aggregate(self) -> tuple[str, bool]:
        rel, where = self.from_where(0)
        aggs = self.aggregates(rel, self.rng.randint(1, 4))
        return f"SELECT {', '.join(aggs)} FROM {rel.sql}{where}", False

    def _top_group(self) -> tuple[str, bool]:
        rel, where = self.from_where(0)
        keys = self.group_keys(rel)
        aggs = self.aggregates(rel, self.rng.randint(1, 3))
        sql = f"SELECT {', '.join(keys + aggs)} FROM {rel.sql}{where} GROUP BY {', '.join(keys)}"
        if self.chance(0.3):
            self.note("having")
            sql += f" HAVING count(*) > {self.rng.choice([1, 2, 5, 10])}"
        return sql, False

    def _top_rows(self) -> tuple[str, bool]:
        rel, where = self.from_where(0)
        cols = self.rng.sample(rel.cols, min(len(rel.cols), self.rng.randint(1, 4)))
        distinct = "DISTINCT " if self.chance(0.2) else ""
        sql = f"SELECT {distinct}{', '.join(c.expr for c in cols)} FROM {rel.sql}{where}"
        if rel.rows > 500 or self.chance(0.3):
            self.note("order by limit")
            positions = ", ".join(str(i + 1) for i in range(len(cols)))
            desc = " DESC" if self.chance(0.3) else ""
            return f"{sql} ORDER BY {positions}{desc} LIMIT {self.rng.choice([1, 10, 50, 200])}", True
        return sql, False

    def _top_window(self) -> tuple[str, bool]:
        rel, where = self.from_where(0)
        part = self.pick(rel.cols)
        order = self.pick([c for c in rel.cols if c.info.ordered] or rel.cols)
        value = self.pick(rel.cols)
        window = self.window(part, order, rel)
        self.note("window")
        inner = (f"SELECT {part.expr} AS wp, {order.expr} AS wo, {value.expr} AS wv, {window} AS w "
                 f"FROM {rel.sql}{where}")
        alias = self.alias("w")
        if self.chance(0.5):
            return (f"SELECT count(*), count(DISTINCT {alias}.wp), max({alias}.w), min({alias}.wv) "
                    f"FROM ({inner}) {alias} WHERE {alias}.w <= {self.rng.choice([1, 2, 3, 10, 100])}"), False
        return f"SELECT {alias}.wp, {alias}.wo, {alias}.wv, {alias}.w FROM ({inner}) {alias} " \
               f"ORDER BY 1, 2, 3, 4 LIMIT {self.rng.choice([5, 20, 100])}", True

    def _top_setop(self) -> tuple[str, bool]:
        op = self.set_operator()
        left, right, _ = self.set_branches(1)
        body = f"{left} {op} {right}"
        alias = self.alias("u")
        if self.chance(0.6):
            return f"SELECT count(*), count(DISTINCT {alias}.k), min({alias}.k), max({alias}.k) FROM ({body}) {alias}", False
        return f"SELECT {alias}.k, count(*) FROM ({body}) {alias} GROUP BY {alias}.k ORDER BY 1, 2 LIMIT 50", True

    # -- projections -----------------------------------------------------------------------------------
    def aggregates(self, rel: Rel, n: int) -> list[str]:
        out = ["count(*)"]
        for _ in range(n - 1):
            c = self.pick(rel.cols)
            form = self.pick(["min", "max", "count", "sum", "count distinct", "case"], [3, 3, 2, 3, 1, 1])
            if form == "sum" and c.kind in ("int", "bigint", "decimal"):
                out.append(f"sum({c.expr})")
            elif form == "count distinct":
                out.append(f"count(DISTINCT {c.expr})")
            elif form == "count":
                out.append(f"count({c.expr})")
            elif form == "case":
                out.append(f"sum(CASE WHEN {c.expr} IS NULL THEN 1 ELSE 0 END)")
            else:
                out.append(f"{'min' if form == 'min' else 'max'}({c.expr})")
        return out

    def group_keys(self, rel: Rel) -> list[str]:
        """One or two grouping expressions with few distinct values, so the result stays small."""
        small = [c for c in rel.cols if c.ndv <= 50 or c.info.kind == "string"]
        dates = [c for c in rel.cols if c.kind == "date"]
        keys = []
        if dates and self.chance(0.3):
            keys.append(f"year({self.pick(dates).expr})")
        elif small:
            keys.append(self.pick(small).expr)
        else:
            keys.append(self.pick(rel.cols).expr)
        if small and self.chance(0.3):
            extra = self.pick(small).expr
            if extra not in keys:
                keys.append(extra)
        return keys

    def window(self, part: Col, order: Col, rel: Rel) -> str:
        form = self.pick(["rank", "dense_rank", "count", "sum", "max"])
        if form in ("rank", "dense_rank"):
            return f"{form}() OVER (PARTITION BY {part.expr} ORDER BY {order.expr})"
        if form == "sum":
            nums = [c for c in rel.cols if c.kind in ("int", "bigint", "decimal")]
            target = self.pick(nums).expr if nums else "1"
            return f"sum({target}) OVER (PARTITION BY {part.expr})"
        if form == "max":
            return f"max({order.expr}) OVER (PARTITION BY {part.expr})"
        return f"count(*) OVER (PARTITION BY {part.expr} ORDER BY {order.expr})"

    # -- FROM and WHERE --------------------------------------------------------------------------------
    def from_where(self, depth: int, leaves: int | None = None, near: Rel | None = None) -> tuple[Rel, str]:
        """A FROM clause (a join tree, or comma-separated ones) and its WHERE clause (or "")."""
        if leaves is None:
            leaves = self.pick([1, 2, 3, 4], self.profile.leaves if depth == 0 else [55, 35, 10, 0])
        conjuncts: list[str] = []
        if leaves >= 2 and self.chance(0.12):
            rel = self.comma_join(depth, leaves, conjuncts)
        else:
            rel = self.join_tree(depth, leaves, near)
        conjuncts += self.where_conjuncts(rel, depth)
        self.rng.shuffle(conjuncts)
        return rel, (" WHERE " + " AND ".join(conjuncts) if conjuncts else "")

    def join_tree(self, depth: int, leaves: int, near: Rel | None = None) -> Rel:
        rel = self.leaf(depth, near)
        for _ in range(leaves - 1):
            rel = self.join(rel, depth)
        return rel

    def comma_join(self, depth: int, leaves: int, conjuncts: list[str]) -> Rel:
        """``FROM a, b [JOIN c ..]`` with the link in WHERE (comma binds loosest: each item is its own tree)."""
        first = self.join_tree(depth, max(1, leaves - 1))
        second = self.leaf(depth, first)
        pair = self.equi_pair(first, second, "inner")
        if pair is None:
            if first.rows * second.rows > MAX_ROWS:
                return first
            rows = first.rows * second.rows
        else:
            cond, rows = pair
            conjuncts.append(cond)
        self.note("comma join")
        return Rel(f"{first.sql}, {second.sql}", first.cols + second.cols, rows, first.aliases + second.aliases,
                   nested=True)

    def leaf(self, depth: int, near: Rel | None = None) -> Rel:
        """A base table, derived table or CTE read; mostly one sharing a join domain with ``near``."""
        derived = self.profile.derived if depth < MAX_DEPTH else 0.0
        kind = self.pick(["table", "derived", "cte"], [1 - derived, derived * 0.6, derived * 0.4])
        if kind == "derived":
            return self.derived(depth, near)
        if kind == "cte":
            return self.cte_read(depth, near)
        return self.table(near=near)

    def table(self, info: TableInfo | None = None, near: Rel | None = None) -> Rel:
        if info is None:
            tables = list(self.suite.tables)
            if near is not None and self.chance(0.85):
                domains = {c.info.domain for c in near.cols if c.joinable}
                tables = [t for t in tables if any(c.domain in domains for c in t.columns)] or tables
            info = self.pick(tables, [t.weight for t in tables])
        alias = self.alias(info.name[0] if info.name not in ("customer_address", "customer_demographics") else
                           "ca" if info.name == "customer_address" else "cd")
        cols = [Col(f"{alias}.{c.name}", c.name, c, alias, nullable=c.nulls, table=True) for c in info.columns]
        return Rel(f"{info.name} {alias}", cols, float(info.rows), [alias], single_table=info)

    # -- joins -----------------------------------------------------------------------------------------
    def join(self, left: Rel, depth: int) -> Rel:
        padded = any(c.outer for c in left.cols)
        kind = self.pick(["inner", "left", "right", "full", "semi", "anti", "cross"],
                         self.profile.joins_after_outer if padded else self.profile.joins)
        for _ in range(4):  # a few tries at a right side that joins without blowing up
            if self.chance(self.profile.nested) and depth < MAX_DEPTH:
                right = self.join_tree(depth, 2, left)
                if right.nested:
                    cols = [dataclasses.replace(c, nested=True) for c in right.cols]
                    right = dataclasses.replace(right, sql=f"({right.sql})", cols=cols)
                    self.note("nested join (right)")
            else:
                right = self.leaf(depth, left)
            joined = self.join_with(left, right, kind, depth)
            if joined is not None:
                return joined
        return left

    def join_with(self, left: Rel, right: Rel, kind: str, depth: int) -> Rel | None:
        if kind == "cross" or (kind == "inner" and self.chance(0.05)):
            if left.rows * right.rows > MAX_ROWS / 4:
                return None
            self.note("cross join")
            return Rel(f"{left.sql} CROSS JOIN {right.sql}", left.cols + right.cols, left.rows * right.rows,
                       left.aliases + right.aliases, nested=True)
        using = self.using(left, right, kind) if self.chance(self.profile.using) and kind not in ("semi", "anti") \
            else None
        if using is not None:
            right, cond, est = using
        else:
            pair = self.equi_pair(left, right, kind)
            if pair is None:
                return None
            cond, est = pair
        equated = self.last_pair[0] if using is None and self.last_pair is not None else None
        conds = [] if using is not None else [cond]
        conds += self.on_extras(left, right, kind, equated) if using is None else []
        left_sql = left.sql
        if left.nested and kind in ("right", "full", "inner", "left") and self.chance(0.25):
            left_sql = f"({left.sql})"
            self.note("nested join (left)")
        keyword = {
            "inner": self.pick(["JOIN", "INNER JOIN"]),
            "left": self.pick(["LEFT JOIN", "LEFT OUTER JOIN"]),
            "right": self.pick(["RIGHT JOIN", "RIGHT OUTER JOIN"]),
            "full": self.pick(["FULL JOIN", "FULL OUTER JOIN"]),
            "semi": "LEFT SEMI JOIN",
            "anti": "LEFT ANTI JOIN",
        }[kind]
        self.note(f"{kind} join")
        on = f" USING ({cond})" if using is not None else f" ON {' AND '.join(conds)}"
        sql = f"{left_sql} {keyword} {right.sql}{on}"
        aliases = left.aliases + right.aliases
        if kind == "inner":
            return Rel(sql, left.cols + right.cols, est, aliases, nested=True)
        if kind == "left":
            return Rel(sql, left.cols + [c.padded() for c in right.cols], max(est, left.rows), aliases, nested=True)
        if kind == "right":
            return Rel(sql, [c.padded() for c in left.cols] + right.cols, max(est, right.rows), aliases, nested=True)
        if kind == "full":
            return Rel(sql, [c.padded() for c in left.cols + right.cols], est + left.rows + right.rows, aliases,
                       nested=True)
        return Rel(sql, left.cols, left.rows, left.aliases, nested=True)  # semi, anti: the right side is gone

    def equi_pair(self, left: Rel, right: Rel, kind: str, cross_domain: bool = True) -> tuple[str, float] | None:
        """An equality between a column of ``left`` and one of ``right`` and the join's estimated rows
        (``self.last_pair`` keeps the two columns)."""
        same, other = [], []
        for a in left.cols:
            for b in right.cols:
                if not (a.joinable and b.joinable):
                    continue
                if a.info.domain == b.info.domain and _compatible(a, b):
                    same.append((a, b))
                elif cross_domain and a.info.integral and b.info.integral and not a.fn and not b.fn:
                    other.append((a, b))  # keys of different domains: few matches, odd diPs
        choices = same if same and (not other or self.chance(0.9)) else other
        # A random order, keys that files are clustered on first more often: diPs over them remove files.
        weight = {id(p): 1.0 + 2.0 * (p[0].info.clustered + p[1].info.clustered) for p in choices}
        choices.sort(key=lambda p: self.rng.random() ** (1.0 / weight[id(p)]), reverse=True)
        if self.chance(0.7):  # mostly on a column no outer join pads: the padded side stays for other conjuncts
            choices.sort(key=lambda pair: pair[0].outer)
        for a, b in choices:
            est = left.rows * right.rows / max(min(a.ndv, left.rows), min(b.ndv, right.rows), 1)
            if kind in ("semi", "anti") or est <= MAX_ROWS:
                if a.info.domain != b.info.domain:
                    self.note("cross-domain join")
                self.last_pair = (a, b)
                return _equality(a, b, self), est
        return None

    def using(self, left: Rel, right: Rel, kind: str) -> tuple[Rel, str, float] | None:
        """``left JOIN (SELECT x AS name ..) d USING (name)``: a derived table renaming a column of the
        same domain to the name of a column of ``left`` that no other left column shares."""
        names = [c.name for c in left.cols]
        candidates = [c for c in left.cols if c.joinable and not c.fn and names.count(c.name) == 1]
        self.rng.shuffle(candidates)
        for target in candidates:
            tables = [t for t in self.suite.tables if any(c.domain == target.info.domain for c in t.columns)]
            if not tables:
                continue
            info = self.pick(tables)
            inner = self.table(info)
            col = self.pick([c for c in inner.cols if c.info.domain == target.info.domain])
            others = [c for c in inner.cols if c is not col and c.name != target.name]
            extra = self.rng.sample(others, min(len(others), self.rng.randint(0, 2)))
            where = self.local_predicate(self.pick(inner.cols)) if self.chance(0.6) else None
            alias = self.alias("d")
            sql = (f"(SELECT {col.expr} AS {target.name}" + "".join(f", {c.expr}" for c in extra) +
                   f" FROM {inner.sql}{' WHERE ' + where if where else ''}) {alias}")
            cols = [col.seen_as(alias, target.name)] + [c.seen_as(alias, c.name) for c in extra]
            rows = inner.rows * (0.3 if where else 1.0)
            est = left.rows * rows / max(min(target.ndv, left.rows), min(col.ndv, rows), 1)
            if est > MAX_ROWS:
                continue
            self.note("using")
            return Rel(sql, cols, rows, [alias]), target.name, est
        return None

    def on_extras(self, left: Rel, right: Rel, kind: str, equated: Col | None) -> list[str]:
        """More ON conjuncts: local to either side, IS NULL on a padded left column (mostly of another
        table than ``equated``, the left column of the join's equality), non-equi, a second key."""
        out = []
        if self.chance(self.profile.on_right):
            out.append(self.local_predicate(self.pick(right.cols)))
            self.note("on: right-side conjunct")
        padded = [c for c in left.cols if c.outer]
        if self.chance(self.profile.on_left):
            # On a padded table: not a local predicate of it (a NULL-rejecting one changes nothing, but the
            # rewriter must not use it); SIMPLE leaves padded tables to the NULL tests, which it would contradict.
            favour_padded = padded and self.profile is FULL and self.chance(0.5)
            out.append(self.local_predicate(self.pick(padded if favour_padded else left.cols)))
            self.note("on: left-side conjunct")
        if padded and self.chance(self.profile.on_is_null):
            elsewhere = [c for c in padded if equated is None or c.owner != equated.owner]
            c = self.pick(elsewhere if elsewhere and self.chance(0.8) else padded)
            test = self.pick(["IS NULL", "IS NOT NULL"], [65, 35])
            out.append(f"{c.expr} {test}")
            self.null_tests += 1
            self.note("on: IS NULL on padded side")
            if kind == "inner" and c.table and test == "IS NULL" and equated is not None and not equated.outer:
                self.note("shape of bug 1: inner join ON tests a padded table for NULL")
        if self.chance(self.profile.on_more):
            pair = self.equi_pair(left, right, "semi", cross_domain=False)
            if pair is not None:
                out.append(pair[0])
                self.note("on: second equality")
        if self.chance(self.profile.on_more * 0.8):
            ordered = [(a, b) for a in left.cols for b in right.cols
                       if a.info.domain and a.info.domain == b.info.domain and _compatible(a, b)]
            if ordered:
                a, b = self.pick(ordered)
                out.append(f"{a.expr} {self.pick(['<', '<=', '>', '>='])} {b.expr}")
                self.note("on: non-equi")
        return out

    # -- derived tables and CTEs -----------------------------------------------------------------------
    def derived(self, depth: int, near: Rel | None = None) -> Rel:
        body, cols, rows = self.subselect(depth + 1, near)
        alias = self.alias("d")
        self.note("derived table")
        return Rel(f"({body}) {alias}", [c.seen_as(alias, c.name) for c in cols], rows, [alias])

    def cte_read(self, depth: int, near: Rel | None = None) -> Rel:
        if self.ctes and self.chance(0.5):
            cte = self.pick(self.ctes)
        else:
            body, cols, rows = self.subselect(depth + 1, near)
            cte = _Cte(f"cte{len(self.ctes) + 1}", body, cols, rows)
            self.ctes.append(cte)
        cte.reads += 1
        alias = self.alias("c")
        return Rel(f"{cte.name} {alias}", [c.seen_as(alias, c.name) for c in cte.cols], cte.rows, [alias])

    def subselect(self, depth: int, near: Rel | None = None) -> tuple[str, list[Col], float]:
        """A SELECT for a derived table or CTE: its text, its output columns (named), its estimated rows."""
        shape = self.pick(["plain", "group", "global", "window", "limit", "setop"], [40, 22, 6, 10, 10, 12])
        if shape == "setop":
            op = self.set_operator()
            left, right, k = self.set_branches(depth)
            self.note("setop in derived table")
            return f"{left} {op} {right}", [k], 1000.0
        rel, where = self.from_where(depth, leaves=self.pick([1, 2, 3], [60, 32, 8]), near=near)
        if shape == "limit" and rel.single_table is not None:
            cols = self.projections(rel, 3)
            order = ", ".join(f"{rel.aliases[0]}.{k}" for k in rel.single_table.key)
            n = self.rng.choice([10, 100, 1000])
            self.note("limit in derived table")
            return (f"SELECT {_select_list(cols)} FROM {rel.sql}{where} ORDER BY {order}"
                    f"{' DESC' if self.chance(0.3) else ''} LIMIT {n}"), [c for c, _ in cols], float(min(n, rel.rows))
        if shape == "group":
            keys = self.projections(rel, 2, keys_only=True)
            aggs = self.aggregate_columns(rel)
            sql = f"SELECT {_select_list(keys + aggs)} FROM {rel.sql}{where} GROUP BY {', '.join(e for _, e in keys)}"
            if self.chance(0.3):
                sql += f" HAVING count(*) > {self.rng.choice([1, 2, 3])}"
                self.note("having")
            self.note("group by in derived table")
            rows = min(rel.rows, math.prod(c.ndv for c, _ in keys))
            return sql, [c for c, _ in keys + aggs], rows
        if shape == "global":
            aggs = self.aggregate_columns(rel)
            self.note("global aggregate in derived table")
            return f"SELECT {_select_list(aggs)} FROM {rel.sql}{where}", [c for c, _ in aggs], 1.0
        cols = self.projections(rel, 4)
        if shape == "window":
            part, order = self.pick(rel.cols), self.pick([c for c in rel.cols if c.info.ordered] or rel.cols)
            name = f"w{self.counter}"
            info = ColumnInfo(name, "bigint", "", 1, 100, 100)
            cols.append((Col(name, name, info, ""), self.window(part, order, rel)))
            self.note("window in derived table")
        distinct = "DISTINCT " if self.chance(0.1) else ""
        return f"SELECT {distinct}{_select_list(cols)} FROM {rel.sql}{where}", [c for c, _ in cols], rel.rows

    def projections(self, rel: Rel, most: int, keys_only: bool = False) -> list[tuple[Col, str]]:
        """Columns to project (at least one join key), some as monotone expressions, with unique names."""
        keys = [c for c in rel.cols if c.joinable]
        pool = keys if keys_only and keys else rel.cols
        chosen = [self.pick(keys or rel.cols)]
        extra = self.rng.sample(pool, min(len(pool), self.rng.randint(0, most - 1)))
        chosen += [c for c in extra if c not in chosen]
        out: list[tuple[Col, str]] = []
        used: set[str] = set()
        for c in chosen:
            name, expr, col = c.name, c.expr, c
            if c.joinable and not c.fn and self.chance(0.3):
                fn = self.pick(["+1", "*2", "-3", "cast"] if c.info.integral else ["year", "day+1"]
                               if c.kind == "date" else ["cast"])
                if fn == "cast":
                    expr = f"CAST({c.expr} AS BIGINT)" if c.info.integral else c.expr
                    self.note("cast of key")
                else:
                    expr = _FNS[fn](c.expr)
                    col = dataclasses.replace(c, fn=fn)
                    name = f"{c.name}_{_SUFFIX[fn]}"
                    self.note(f"key expression {fn}")
            while name in used:
                name = f"{name}_{len(used)}"
            used.add(name)
            out.append((dataclasses.replace(col, name=name), expr))
        return out

    def aggregate_columns(self, rel: Rel) -> list[tuple[Col, str]]:
        n = self.counter
        self.counter += 1
        count = ColumnInfo(f"cnt{n}", "bigint", "", 1, 100, 100)
        out = [(Col(count.name, count.name, count, ""), "count(*)")]
        for c in self.rng.sample(rel.cols, min(2, len(rel.cols))):
            if c.info.ordered and self.chance(0.7):
                fn = self.pick(["min", "max"])
                name = f"{fn}_{c.name}"
                if name not in {col.name for col, _ in out}:
                    out.append((dataclasses.replace(c, name=name, nullable=True), f"{fn}({c.expr})"))
            elif c.kind in ("int", "bigint", "decimal"):
                info = ColumnInfo(f"sum_{c.name}", "decimal" if c.kind == "decimal" else "bigint", "", 0, 10**6)
                if info.name not in {col.name for col, _ in out}:
                    out.append((Col(info.name, info.name, info, "", nullable=True), f"sum({c.expr})"))
        return out

    # -- set operations --------------------------------------------------------------------------------
    def set_operator(self) -> str:
        op = self.pick(["UNION ALL", "UNION", "INTERSECT", "INTERSECT ALL", "EXCEPT", "EXCEPT ALL"],
                       [30, 20, 15, 5, 20, 5])
        self.note(f"set op {op.split()[0].lower()}")
        return op

    def set_branches(self, depth: int) -> tuple[str, str, Col]:
        """Two SELECTs of one column ``k`` from the same join domain (different tables, usually), and
        that output column."""
        domains = sorted({c.domain for t in self.suite.tables for c in t.columns if c.domain})
        domain = self.pick(domains)
        branches = []
        for _ in range(2):
            tables = [t for t in self.suite.tables if any(c.domain == domain for c in t.columns)]
            first = self.table(self.pick(tables))
            rel = first
            if self.chance(0.3) and depth < MAX_DEPTH:
                rel = self.join(first, depth)
            col = self.pick([c for c in first.cols if c.info.domain == domain])
            conjuncts = self.where_conjuncts(rel, depth, subqueries=False)
            where = " WHERE " + " AND ".join(conjuncts) if conjuncts else ""
            branches.append(f"SELECT {col.expr} AS k FROM {rel.sql}{where}")
        info = next(c for t in self.suite.tables for c in t.columns if c.domain == domain)
        return branches[0], branches[1], Col("k", "k", info, "", nullable=True)

    # -- predicates ------------------------------------------------------------------------------------
    def where_conjuncts(self, rel: Rel, depth: int, subqueries: bool = True) -> list[str]:
        """WHERE conjuncts over ``rel``: local predicates, a NULL test on a padded column, an OR across two
        tables, a comparison across tables, a subquery predicate."""
        out = []
        for _ in range(self.pick([0, 1, 2, 3], self.profile.where_predicates)):
            out.append(self.local_predicate(self.predicate_column(rel)))
        padded = [c for c in rel.cols if c.outer] or [c for c in rel.cols if c.nullable]
        if padded and self.chance(self.profile.where_is_null / (1 + self.null_tests)):
            c, test = self.pick(padded), self.pick(["IS NULL", "IS NOT NULL"], [65, 35])
            out.append(f"{c.expr} {test}")
            self.note("where: IS [NOT] NULL")
            if c.nested and c.outer and c.table and test == "IS NULL":
                self.note("shape of bug 2: WHERE tests a padded nested join's table for NULL")
        owners = sorted({c.owner for c in rel.cols})
        if len(owners) > 1 and self.chance(0.12):
            a, b = self.rng.sample(owners, 2)

            def on(owner: str) -> str:
                return self.local_predicate(self.pick([c for c in rel.cols if c.owner == owner]))
            if self.chance(0.5):
                out.append(f"({on(a)} OR {on(b)})")
                self.note("where: OR across tables")
            else:  # each table's disjunction of parts prunes it (rewriter/join_tree.py implied_part)
                pairs = [(x, y) for x in rel.cols for y in rel.cols if x.owner == a and y.owner == b and
                         x.info.domain and x.info.domain == y.info.domain and _compatible(x, y)]
                if pairs and self.chance(0.5):  # TPC-DS q85: an equality in every disjunct (common_factors)
                    x, y = self.pick(pairs)
                    out.append(f"(({x.expr} = {y.expr} AND {on(a)} AND {on(b)}) OR "
                               f"({y.expr} = {x.expr} AND {on(a)} AND {on(b)}))")
                    self.note("where: an equality inside each disjunct")
                else:
                    out.append(f"(({on(a)} AND {on(b)}) OR ({on(a)} AND {on(b)}))")
                self.note("where: OR of conjunctions across tables")
        if len(owners) > 1 and self.chance(0.1):
            pairs = [(a, b) for a in rel.cols for b in rel.cols
                     if a.owner != b.owner and a.info.domain and a.info.domain == b.info.domain and _compatible(a, b)]
            if pairs:
                a, b = self.pick(pairs)
                out.append(f"{a.expr} {self.pick(['=', '<', '>=', '<>'])} {b.expr}")
                self.note("where: comparison across tables")
        if subqueries and depth < MAX_DEPTH and self.chance(self.profile.subquery if depth == 0 else 0.15):
            out.append(self.subquery_predicate(rel, depth))
        return out

    def predicate_column(self, rel: Rel) -> Col:
        """Mostly the columns files are ordered on (dates, keys), of big tables most: those predicates prune."""
        weights = [(6.0 if c.ndv >= 1000 else 3.0) if c.info.clustered or c.kind == "date" else 1.0 for c in rel.cols]
        return self.pick(rel.cols, weights)

    def local_predicate(self, col: Col) -> str:
        """A predicate on one column, selective enough to prune in a layout ordered on it."""
        e = col.expr
        if col.nullable and self.chance(0.1):
            self.note("is null")
            return f"{e} IS {self.pick(['', 'NOT '])}NULL"
        if col.info.integral and not col.fn and self.chance(OVERFLOW_RATE):
            self.note("overflow")
            factor = "1000000000" if col.info.kind == "int" else "1000000000000000"
            return f"{e} * {factor} {self.pick(['<', '>'])} 0"
        if col.kind == "string" and col.info.values:
            return self._string_predicate(col)
        if not col.info.ordered or col.info.lo is None:
            return f"{e} IS NOT NULL"
        a, b = self._range(col)
        form = self.pick(["between", "lt", "ge", "eq", "in", "ne", "not", "shift", "fn", "or", "coalesce"],
                         [25, 12, 12, 3 if col.ndv > 100 else 8, 3 if col.ndv > 100 else 8, 3, 4, 4, 6, 5, 3])
        lit = lambda v: self._literal(col, v)  # noqa: E731
        if form == "between":
            return f"{e} BETWEEN {lit(a)} AND {lit(b)}"
        if form == "lt":
            return f"{e} {self.pick(['<', '<='])} {lit(b)}"
        if form == "ge":
            return f"{e} {self.pick(['>', '>='])} {lit(a)}"
        if form == "eq":
            return f"{e} = {lit(a)}"
        if form == "in":
            values = sorted({self._value(col) for _ in range(self.rng.randint(1, 4))})
            return f"{e} IN ({', '.join(lit(v) for v in values)})"
        if form == "ne":
            return f"{e} <> {lit(a)}"
        if form == "not":
            return f"NOT ({e} > {lit(b)})"
        if form == "or":
            return f"({e} < {lit(a)} OR {e} > {lit(b)})"
        if form == "coalesce":
            return f"coalesce({e}, {lit(a)}) {self.pick(['<', '>='])} {lit(b)}"
        if form == "shift":
            if col.kind == "date":
                return f"date_add({e}, 30) BETWEEN {lit(_shift(a, 30))} AND {lit(_shift(b, 30))}"
            if col.kind in ("int", "bigint"):
                return f"{e} + 10 BETWEEN {lit(a + 10)} AND {lit(b + 10)}"
            return f"{e} * 2 < {lit(b * 2)}"
        self.note("function predicate")
        if col.kind == "date":
            f = self.pick(["year", "month", "trunc"])
            if f == "year":
                return f"year({e}) {self.pick(['=', '<=', '>='])} {a.year}"
            if f == "month":
                return f"month({e}) = {self.rng.randint(1, 12)}"
            return f"{e} >= trunc({lit(a)}, 'MM') AND {e} < {lit(b)}"
        if col.kind in ("int", "bigint"):
            f = self.pick(["mod", "abs", "cast"])
            if f == "mod":
                return f"{e} % 7 = {self.rng.randint(0, 6)}"
            if f == "abs":
                return f"abs({e} - {(a + b) // 2}) < {max(1, (b - a) // 2)}"
            return f"CAST({e} AS STRING) LIKE '{self.rng.randint(1, 9)}%'"
        return f"abs({e}) < {lit(b)}"

    def _string_predicate(self, col: Col) -> str:
        e, values = col.expr, col.info.values
        v = self.pick(values)
        form = self.pick(["eq", "in", "ne", "like", "substr", "upper", "range"], [30, 20, 8, 15, 8, 5, 8])
        if form == "eq":
            return f"{e} = {_quote(v)}"
        if form == "in":
            chosen = sorted(set(self.rng.sample(values, min(len(values), self.rng.randint(1, 3)))))
            return f"{e} IN ({', '.join(_quote(x) for x in chosen)})"
        if form == "ne":
            return f"{e} <> {_quote(v)}"
        if form == "like":
            return f"{e} LIKE {_quote(v[: max(1, len(v) // 2)] + '%')}"
        if form == "substr":
            return f"substr({e}, 1, 2) = {_quote(v[:2])}"
        if form == "upper":
            return f"upper({e}) = {_quote(v.upper())}"
        return f"{e} {self.pick(['<', '>='])} {_quote(v)}"

    def subquery_predicate(self, outer: Rel, depth: int) -> str:
        """[NOT] IN / [NOT] EXISTS / scalar subquery over a table sharing a join domain with ``outer``."""
        keys = [c for c in outer.cols if c.joinable]
        if not keys:
            return "1 = 1"
        oc = self.pick(keys)
        tables = [t for t in self.suite.tables if any(c.domain == oc.info.domain for c in t.columns)]
        inner = self.table(self.pick(tables))
        if self.chance(0.25) and depth + 1 < MAX_DEPTH:
            inner = self.join(inner, depth + 1)
        matches = [c for c in inner.cols if c.info.domain == oc.info.domain and _compatible(oc, c)]
        if not matches:
            return "1 = 1"
        ic = self.pick(matches)
        conjuncts = [self.local_predicate(self.predicate_column(inner)) for _ in range(self.rng.randint(0, 2))]
        form = self.pick(["in", "not in", "exists", "not exists", "scalar", "uncorrelated exists"],
                         [25, 18, 22, 18, 10, 7])
        correlate = form in ("exists", "not exists") or (form in ("in", "not in") and self.chance(0.15))
        if correlate:
            other = [(a, b) for a in outer.cols for b in inner.cols
                     if a.info.domain and a.info.domain == b.info.domain and _compatible(a, b)]
            if form in ("exists", "not exists"):
                other = [(oc, ic)]
            a, b = self.pick(other)
            if conjuncts and self.chance(0.4):  # TPC-DS q41: the correlation inside each disjunct
                p, q = conjuncts.pop(), self.local_predicate(self.predicate_column(inner))
                conjuncts.append(f"(({_equality(b, a, self)} AND {p}) OR ({_equality(b, a, self)} AND {q}))")
                self.note("correlation inside each disjunct")
            else:
                conjuncts.append(_equality(b, a, self))
            self.note("correlated subquery")
        where = f" WHERE {' AND '.join(conjuncts)}" if conjuncts else ""
        self.note(f"subquery {form}")
        if form == "in":
            sql = f"{oc.expr} IN (SELECT {ic.expr} FROM {inner.sql}{where})"
        elif form == "not in":
            sql = f"{oc.expr} NOT IN (SELECT {ic.expr} FROM {inner.sql}{where})"
        elif form == "exists":
            what = self.pick(["1", "*", "count(*)"], [6, 2, 1])
            tail = f" GROUP BY {ic.expr} HAVING count(*) > 1" if what == "1" and self.chance(0.15) else ""
            sql = f"EXISTS (SELECT {what} FROM {inner.sql}{where}{tail})"
        elif form == "not exists":
            sql = f"NOT EXISTS (SELECT 1 FROM {inner.sql}{where})"
        elif form == "uncorrelated exists":
            sql = f"{self.pick(['', 'NOT '])}EXISTS (SELECT 1 FROM {inner.sql}{where})"
        else:
            agg = self.pick(["max", "min"])
            if self.chance(0.4):  # correlated scalar: one value per outer row
                others = [a for a in outer.cols if a.info.domain == ic.info.domain and _compatible(a, ic)]
                a = self.pick(others)
                where = f" WHERE {' AND '.join(conjuncts + [_equality(ic, a, self)])}"
                self.note("correlated subquery")
            sql = f"{oc.expr} {self.pick(['<', '>=', '='])} (SELECT {agg}({ic.expr}) FROM {inner.sql}{where})"
        if self.chance(0.12):
            sql = f"({self.local_predicate(self.predicate_column(outer))} OR {sql})"
            self.note("subquery under OR")
        return sql

    # -- literals --------------------------------------------------------------------------------------
    def _bounds(self, col: Col) -> tuple[Value, Value]:
        lo, hi = col.info.lo, col.info.hi
        assert lo is not None and hi is not None
        if col.info.scaled and isinstance(hi, int):
            hi = max(lo, int(hi * self.scale))
        if col.fn == "year":
            return lo.year, hi.year  # type: ignore[union-attr]
        return _apply(col.fn, lo), _apply(col.fn, hi)

    def _value(self, col: Col) -> Value:
        lo, hi = self._bounds(col)
        return _between(self.rng, lo, hi, self.rng.random())

    def _range(self, col: Col) -> tuple[Value, Value]:
        """A sub-range covering 3% to 50% of the column's values: selective for a layout ordered on it."""
        lo, hi = self._bounds(col)
        width = self.pick([0.03, 0.1, 0.25, 0.5])
        start = self.rng.random() * (1 - width)
        return _between(self.rng, lo, hi, start), _between(self.rng, lo, hi, start + width)

    def _literal(self, col: Col, v: Value) -> str:
        if isinstance(v, datetime.date):
            return f"DATE '{v.isoformat()}'"
        if isinstance(v, Decimal):
            return f"{v:.2f}"
        return str(v)


def _between(rng: random.Random, lo: Value, hi: Value, t: float) -> Value:
    t = min(max(t, 0.0), 1.0)
    if isinstance(lo, datetime.date):
        return lo + datetime.timedelta(days=int(((hi - lo).days) * t))  # type: ignore[operator]
    if isinstance(lo, Decimal):
        return (lo + (hi - lo) * Decimal(str(round(t, 4)))).quantize(Decimal("0.01"))  # type: ignore[operator]
    return int(lo + (hi - lo) * t)  # type: ignore[operator]


def _shift(v: Value, days: int) -> Value:
    return v + datetime.timedelta(days=days) if isinstance(v, datetime.date) else v


def _apply(fn: str, v: Value) -> Value:
    if fn == "+1":
        return v + 1  # type: ignore[operator]
    if fn == "*2":
        return v * 2  # type: ignore[operator]
    if fn == "-3":
        return v - 3  # type: ignore[operator]
    if fn == "day+1":
        return v + datetime.timedelta(days=1)  # type: ignore[operator]
    return v


def _compatible(a: Col, b: Col) -> bool:
    """Whether ``a`` and ``b`` can be equated: the same function, or one of them plain."""
    return a.fn == b.fn or not a.fn or not b.fn


def _equality(a: Col, b: Col, gen: _Generator) -> str:
    """``a = b`` with the function of one applied to the other when only one carries a function."""
    if a.fn == b.fn:
        return f"{a.expr} = {b.expr}"
    if not a.fn:
        gen.note("join on expression")
        return f"{_FNS[b.fn](a.expr)} = {b.expr}"
    gen.note("join on expression")
    return f"{a.expr} = {_FNS[a.fn](b.expr)}"


def _select_list(cols: list[tuple[Col, str]]) -> str:
    return ", ".join(expr if expr == c.expr and expr.split(".")[-1] == c.name else f"{expr} AS {c.name}"
                     for c, expr in cols)


def _quote(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"
