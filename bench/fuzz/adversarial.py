"""Random differential queries over an adversarial schema: what the TPC schemas never show the rewriter.

TPC tables join a BIGINT key with a BIGINT key, name columns in lower-case ASCII, and are always read
under their own column names. Users' tables do not. This module is a dataset and a query generator made
to break the rewriter where those assumptions hide:

- **Mixed-type joins.** The same number is held as INT, BIGINT, SMALLINT, TINYINT, DECIMAL(7,2),
  DECIMAL(12,3), DOUBLE, FLOAT and STRING (`'05'`, `' 5'`, `'5.0'`, and `'x5'`, which no cast turns into a
  number: under ANSI a numeric comparison with it raises), and the same day as DATE, TIMESTAMP (at
  midnight or not) and STRING. Joins and comparisons pair any two of them, so Spark's implicit casts
  (string to number, date to timestamp, decimal widening) decide which rows match, and a diP or exact
  key set computed in the wrong type skips a file that holds a match.
- **Identifiers.** Tables and columns named by keywords (`select`, `Group`, `table`, `from`, `Order`,
  `value`), with a space (`a b`), starting with a digit (`1st`), and referred to in any letter case
  (Spark resolves names case-insensitively).
- **Renaming.** A table read through an alias list (`` `select` AS s(c0, c1, ...) ``), derived tables and
  CTEs that swap two columns' names (`` SELECT `from` AS `Order`, `Order` AS `from` ``), USING joins over
  renamed columns of different types.
- **Values.** NULLs in every column, NaN and -0.0 in the floating columns, BIGINTs past 2^31 in the last
  file (an INT cast of them raises under ANSI), TINYINTs near their limits (``t + t`` overflows).

Every column of a table is a function of one row value that grows with the row's position, and files
hold consecutive rows, so every column is clustered: a predicate on any of them prunes files, and a join
on any pair of them sends a diP that prunes. The data is a pure function of nothing (always the same);
query ``i`` of seed ``s`` is ``generate(s, i)``, always the same text.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import random
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.fuzz.generate import GeneratedQuery

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SUITE = "adversarial"
DATABASE = "fuzz_adversarial"
EPOCH = datetime.date(2020, 1, 1)

# Column families: which columns it makes sense to compare. "number" columns hold the row value in some
# numeric or string form; "day" columns a day (the row value counted from EPOCH); "label" a short text.
NUMBER, DAY, LABEL = "number", "day", "label"


@dataclasses.dataclass(frozen=True)
class Column:
    name: str
    type: str  # Spark's type name, as in CREATE TABLE
    family: str
    value: Callable[[int, int], Any]  # (row value v, row index i) -> the stored value (None: NULL)


@dataclasses.dataclass(frozen=True)
class Table:
    name: str
    files: int
    rows_per_file: int
    start: int  # row i holds the row value start + step * i
    step: int
    columns: tuple[Column, ...]

    @property
    def rows(self) -> int:
        return self.files * self.rows_per_file

    def values(self) -> range:
        return range(self.start, self.start + self.step * self.rows, self.step)

    def column(self, name: str) -> Column:
        return next(c for c in self.columns if c.name == name)


def _nulls(every: int, at: int, f: Callable[[int, int], Any]) -> Callable[[int, int], Any]:
    return lambda v, i: None if i % every == at else f(v, i)


def _text_number(v: int, i: int) -> str:
    """The number as text, in forms Spark casts to the same number ('05', ' 5', '5.0') and one it cannot."""
    return {1: f"0{v}", 2: f" {v}", 3: f"{v}.0", 4: f"x{v}"}.get(i % 9, str(v))


def _double(v: int, i: int) -> float:
    if i % 19 == 7:
        return math.nan
    return -0.0 if v == 0 else float(v) + (0.5 if i % 4 == 1 else 0.0)


def _day(v: int) -> datetime.date:
    return EPOCH + datetime.timedelta(days=v)


def _timestamp(v: int, i: int) -> datetime.datetime:
    return datetime.datetime.combine(_day(v), datetime.time(hour=(i % 3) * 8))


_BIG = 2**31  # the last file of `select` holds `Order` values past INT's range

TABLES: tuple[Table, ...] = (
    Table("select", files=6, rows_per_file=30, start=0, step=2, columns=(
        Column("from", "INT", NUMBER, _nulls(17, 5, lambda v, i: v)),
        Column("Order", "BIGINT", NUMBER, _nulls(23, 8, lambda v, i: v + _BIG if i >= 150 else v)),
        Column("a b", "STRING", NUMBER, _nulls(13, 6, _text_number)),
        Column("dec", "DECIMAL(7,2)", NUMBER, _nulls(29, 3, lambda v, i: Decimal(v) + Decimal("0.25") * (i % 2))),
        Column("f", "DOUBLE", NUMBER, _nulls(31, 11, _double)),
        Column("tiny", "TINYINT", NUMBER, lambda v, i: max(-128, min(127, v - 120))),
        Column("when", "DATE", DAY, _nulls(11, 2, lambda v, i: _day(v))),
        Column("ts", "TIMESTAMP", DAY, _nulls(14, 9, _timestamp)),
    )),
    Table("Group", files=5, rows_per_file=30, start=0, step=3, columns=(
        Column("k", "BIGINT", NUMBER, _nulls(16, 4, lambda v, i: v)),
        Column("ks", "STRING", NUMBER, _nulls(12, 7, lambda v, i: _text_number(v, i + 4))),
        Column("kd", "DECIMAL(12,3)", NUMBER, _nulls(21, 1, lambda v, i: Decimal(v))),
        Column("kf", "FLOAT", NUMBER, _nulls(25, 10, _double)),
        Column("kdate", "DATE", DAY, _nulls(18, 0, lambda v, i: _day(v))),
        Column("kts", "TIMESTAMP", DAY, _nulls(15, 2, _timestamp)),
        Column("label", "STRING", LABEL, _nulls(10, 9, lambda v, i: ("a", "B", "c d", "")[i // 40])),
    )),
    Table("table", files=3, rows_per_file=8, start=5, step=7, columns=(
        Column("id", "SMALLINT", NUMBER, lambda v, i: v),
        Column("sid", "STRING", NUMBER, _nulls(7, 3, lambda v, i: str(v))),
        Column("value", "INT", NUMBER, _nulls(9, 5, lambda v, i: v)),
        Column("1st", "DOUBLE", NUMBER, lambda v, i: float(v)),
        Column("d", "DATE", DAY, _nulls(6, 1, lambda v, i: _day(v))),
    )),
)

_TABLES = {t.name: t for t in TABLES}
# Every column gets a Bloom filter (stats/bloom.py) where its kind has one, so that the random queries search
# the filters' use in equality, IN and diPs across these types too.
BLOOM_COLUMNS = tuple(dict.fromkeys(c.name.lower() for t in TABLES for c in t.columns))


# -- the dataset ---------------------------------------------------------------------------------------
def rows_of(table: Table, file: int) -> dict[str, list[Any]]:
    """File ``file`` of ``table``: ``{column: values}``."""
    rows = range(file * table.rows_per_file, (file + 1) * table.rows_per_file)
    return {c.name: [c.value(table.start + table.step * i, i) for i in rows] for c in table.columns}


def _arrow_type(spark_type: str) -> Any:
    import pyarrow as pa

    if spark_type.startswith("DECIMAL"):
        p, s = (int(x) for x in spark_type[8:-1].split(","))
        return pa.decimal128(p, s)
    return {"INT": pa.int32(), "BIGINT": pa.int64(), "SMALLINT": pa.int16(), "TINYINT": pa.int8(),
            "STRING": pa.string(), "DOUBLE": pa.float64(), "FLOAT": pa.float32(), "DATE": pa.date32(),
            "TIMESTAMP": pa.timestamp("us", tz="UTC")}[spark_type]


def write_tables(root: Path) -> dict[str, Path]:
    """Every table's Parquet files under ``root``; returns table name -> folder."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = {}
    for table in TABLES:
        folder = root / table.name.lower()
        folder.mkdir(parents=True, exist_ok=True)
        schema = pa.schema([(c.name, _arrow_type(c.type)) for c in table.columns])
        for f in range(table.files):
            columns = rows_of(table, f)
            for c in table.columns:
                if c.type == "TIMESTAMP":
                    columns[c.name] = [None if x is None else x.replace(tzinfo=datetime.timezone.utc)
                                       for x in columns[c.name]]
            pq.write_table(pa.table(columns, schema=schema), folder / f"part-{f:02d}.parquet")
        out[table.name] = folder
    return out


def build(spark: SparkSession, root: Path, database: str = DATABASE) -> list[str]:
    """Write the tables under ``root`` and register them in ``database`` (replacing what was there);
    returns their names as ``db.table`` (the statistics collector quotes them itself)."""
    folders = write_tables(root)
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {database}")
    names = []
    for table in TABLES:
        quoted = f"{database}.{_quote_id(table.name)}"
        columns = ", ".join(f"{_quote_id(c.name)} {c.type}" for c in table.columns)
        spark.sql(f"DROP TABLE IF EXISTS {quoted}")
        spark.sql(f"CREATE TABLE {quoted} ({columns}) USING parquet LOCATION '{folders[table.name]}'")
        names.append(f"{database}.{table.name}")
    return names


# -- the query generator -------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _Col:
    qualifier: str
    name: str  # as visible in the relation (after renaming)
    source: Column  # the stored column whose values it holds
    table: Table

    @property
    def ref(self) -> str:
        return f"{self.qualifier}.{_quote_id(self.name)}"


@dataclasses.dataclass
class _Rel:
    sql: str  # a FROM item
    alias: str
    cols: list[_Col]


def generate(seed: int, index: int) -> GeneratedQuery:
    """Query ``index`` of ``seed`` over the adversarial tables."""
    gen = _Generator(random.Random(f"{seed}/{SUITE}/{index}"))
    sql = gen.query()
    return GeneratedQuery(SUITE, seed, index, sql, False, frozenset(gen.features))


class _Generator:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.features: set[str] = set()
        self.aliases = 0
        self.ctes: list[str] = []

    def note(self, *features: str) -> None:
        self.features.update(features)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def alias(self) -> str:
        self.aliases += 1
        return f"t{self.aliases}"

    # The query ------------------------------------------------------------------------------------
    def query(self) -> str:
        rels = [self.relation()]
        joins = []
        for _ in range(self.rng.choice((1, 1, 1, 2))):
            joins.append(self.join(rels))
        readable = [r for r in rels if r.cols]  # USING can leave a side with only the shared column, not its own
        where = [self.predicate(self.rng.choice(self.rng.choice(readable).cols))
                 for _ in range(self.rng.choice((0, 1, 1, 2)))]
        select, grouped = self.select_list([c for r in rels for c in r.cols])
        body = f"SELECT {select} FROM {rels[0].sql}" + "".join(joins)
        if where:
            body += " WHERE " + " AND ".join(where)
        if grouped:
            body += " GROUP BY 1"
        if self.ctes:
            body = "WITH " + ", ".join(self.ctes) + " " + body
        return body

    def select_list(self, cols: list[_Col]) -> tuple[str, bool]:
        """The select list, and whether it groups by its first item."""
        shape = self.rng.random()
        if shape < 0.4:
            return "count(*)", False
        if shape < 0.7:
            picked = self.rng.sample(cols, min(len(cols), self.rng.choice((1, 2, 3))))
            self.note("select columns")
            return ", ".join(c.ref for c in picked), False
        key = self.rng.choice(cols)
        other = self.rng.choice(cols)
        self.note("group by")
        return f"{key.ref} AS `grp`, count(*), count({other.ref}), max({other.ref})", True

    # FROM items -------------------------------------------------------------------------------------
    def relation(self) -> _Rel:
        table = self.rng.choice(TABLES)
        alias = self.alias()
        kind = self.rng.random()
        if kind < 0.62:
            self.note("table")
            return _Rel(f"{self.table_name(table)} {alias}", alias, [self.col(alias, c.name, c, table) for c in table.columns])
        if kind < 0.7:  # the rewriter declines a statement with one (rewriter/modelled.py): rarely
            self.note("alias list")
            names = [f"c{j}" if self.chance(0.7) else c.name.upper() for j, c in enumerate(table.columns)]
            names = _unique(names)
            cols = [self.col(alias, n, c, table) for n, c in zip(names, table.columns)]
            listed = ", ".join(_quote_id(n) for n in names)
            return _Rel(f"{self.table_name(table)} AS {alias}({listed})", alias, cols)
        inner = f"{self.table_name(table)}"
        picked = self.rng.sample(table.columns, min(len(table.columns), self.rng.choice((2, 3, 4))))
        names = [c.name for c in picked]
        if len(picked) >= 2 and self.chance(0.6):
            self.note("swapped names")
            names[0], names[1] = names[1], names[0]
        projections = ", ".join(f"{_quote_id(c.name)} AS {_quote_id(n)}" for c, n in zip(picked, names))
        where = ""
        if self.chance(0.5):
            where = " WHERE " + self.predicate(_Col("", picked[-1].name, picked[-1], table), qualified=False)
        body = f"SELECT {projections} FROM {inner}{where}"
        cols = [self.col(alias, n, c, table) for n, c in zip(names, picked)]
        if kind < 0.85:
            self.note("derived table")
            return _Rel(f"({body}) {alias}", alias, cols)
        self.note("cte")
        name = f"cte{len(self.ctes)}"
        self.ctes.append(f"{_quote_id(name)} AS ({body})")
        return _Rel(f"{_quote_id(name)} {alias}", alias, cols)

    def table_name(self, table: Table) -> str:
        name = table.name
        if self.chance(0.3):
            self.note("identifier case")
            name = name.swapcase()
        return _quote_id(name)

    def col(self, alias: str, name: str, source: Column, table: Table) -> _Col:
        return _Col(alias, name, source, table)

    # Joins ------------------------------------------------------------------------------------------
    def join(self, rels: list[_Rel]) -> str:
        right = self.relation()
        left_col = self.rng.choice([c for r in rels for c in r.cols])
        right_col = self.partner(left_col, right.cols)
        kind = self.rng.choices(("JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN", "LEFT SEMI JOIN", "LEFT ANTI JOIN",
                                 "USING"), (35, 15, 10, 8, 10, 8, 14))[0]
        if kind == "USING":
            return self.using(rels, right, left_col, right_col)
        self.note(kind.lower())
        on = [self.equality(left_col, right_col)]
        if self.chance(0.3):
            on.append(self.predicate(self.rng.choice(right.cols)))
            self.note("on: right-side conjunct")
        if self.chance(0.15):
            on.append(self.predicate(self.rng.choice([c for r in rels for c in r.cols])))
            self.note("on: left-side conjunct")
        if kind not in ("LEFT SEMI JOIN", "LEFT ANTI JOIN"):
            rels.append(right)
        return f" {kind} {right.sql} ON " + " AND ".join(on)

    def partner(self, col: _Col, options: Sequence[_Col]) -> _Col:
        """A column to equate with ``col``: mostly of its family, of any type; sometimes any column."""
        same = [c for c in options if c.source.family == col.source.family]
        if same and self.chance(0.9):
            return self.rng.choice(same)
        self.note("join across families")
        return self.rng.choice(list(options))

    def equality(self, a: _Col, b: _Col) -> str:
        if a.source.type != b.source.type:
            self.note(f"join {_kind(a)}={_kind(b)}")
        roll = self.rng.random()
        if roll < 0.7:
            return f"{a.ref} = {b.ref}"
        if roll < 0.8:
            self.note("join <=>")
            return f"{a.ref} <=> {b.ref}"
        if roll < 0.9:
            target = self.rng.choice(("STRING", "BIGINT", "INT", "DOUBLE", "DECIMAL(10,1)", "DATE"))
            self.note("join on cast")
            return f"CAST({a.ref} AS {target}) = {b.ref}"
        self.note("join on expression")
        return f"{a.ref} + 1 = {b.ref}" if a.source.family == NUMBER else f"date_add({a.ref}, 1) = {b.ref}"

    def using(self, rels: list[_Rel], right: _Rel, left_col: _Col, right_col: _Col) -> str:
        """``USING (name)``: the right side read through a derived table that renames ``right_col`` to the
        left column's name, so the two sides meet on columns of (often) different types."""
        name = left_col.name
        if sum(1 for r in rels for c in r.cols if c.name.lower() == name.lower()) > 1:
            return f" JOIN {right.sql} ON {self.equality(left_col, right_col)}"  # USING would be ambiguous
        self.note("using")
        if left_col.source.type != right_col.source.type:
            self.note(f"join {_kind(left_col)}={_kind(right_col)}")
        others = [c for c in right.cols if c is not right_col and c.name.lower() != name.lower()]
        projections = [f"{right_col.ref} AS {_quote_id(name)}"] + [c.ref for c in others]
        alias = self.alias()
        sql = f"(SELECT {', '.join(projections)} FROM {right.sql}) {alias}"
        rels.append(_Rel(sql, alias, [_Col(alias, c.name, c.source, c.table) for c in others]))
        kind = self.rng.choice(("JOIN", "JOIN", "LEFT JOIN", "FULL JOIN"))
        return f" {kind} {sql} USING ({_quote_id(name)})"

    # Predicates -------------------------------------------------------------------------------------
    def predicate(self, col: _Col, qualified: bool = True) -> str:
        ref = col.ref if qualified else _quote_id(col.name)
        if self.chance(0.1):
            self.note("identifier case")
            ref = ref[:-len(_quote_id(col.name))] + _quote_id(col.name.swapcase())
        expr = self.expression(ref, col.source)
        roll = self.rng.random()
        table = col.table
        if roll < 0.1:
            self.note("is null")
            return f"{expr} IS {'NOT ' if self.chance(0.5) else ''}NULL"
        if roll < 0.55:
            op = self.rng.choice(("=", "<>", "<", "<=", ">", ">=", "<=>"))
            return f"{expr} {op} {self.literal(col.source, table)}"
        if roll < 0.7:
            lo, hi = sorted((self.value(table), self.value(table)))
            self.note("between")
            return (f"{expr} {'NOT ' if self.chance(0.2) else ''}BETWEEN {self.literal(col.source, table, lo)} "
                    f"AND {self.literal(col.source, table, hi)}")
        if roll < 0.85:
            values = ", ".join(self.literal(col.source, table) for _ in range(self.rng.choice((1, 2, 4))))
            self.note("in list")
            return f"{expr} {'NOT ' if self.chance(0.2) else ''}IN ({values})"
        self.note("or")
        return f"({expr} {self.rng.choice(('<', '>='))} {self.literal(col.source, table)} OR {expr} IS NULL)"

    def expression(self, ref: str, col: Column) -> str:
        roll = self.rng.random()
        if roll < 0.85:
            return ref
        self.note("function")
        if col.family == NUMBER:
            if col.type == "TINYINT" and self.chance(0.5):
                self.note("overflow")
                return f"{ref} + {ref}"
            return self.rng.choice((f"{ref} + 1", f"-{ref}", f"CAST({ref} AS INT)", f"CAST({ref} AS STRING)",
                                    f"coalesce({ref}, 0)", f"abs({ref})", f"{ref} * 1000000000"))
        if col.family == DAY:
            return self.rng.choice((f"date_add({ref}, 1)", f"CAST({ref} AS DATE)", f"CAST({ref} AS STRING)",
                                    f"year({ref})", f"CAST({ref} AS TIMESTAMP)"))
        return self.rng.choice((f"upper({ref})", f"length({ref})", f"concat({ref}, 'x')"))

    def value(self, table: Table) -> int:
        values = table.values()
        v = self.rng.choice(values)
        return v + self.rng.choice((0, 0, 0, 1, -1))

    def literal(self, col: Column, table: Table, v: int | None = None) -> str:
        """A literal near the table's values, written in the column's type or another one Spark coerces."""
        if v is None:
            v = self.value(table)
        roll = self.rng.random()
        if col.family == DAY:
            day = _day(v)
            if roll < 0.4:
                return f"DATE '{day}'"
            if roll < 0.6:
                return f"'{day}'"
            if roll < 0.8:
                self.note("timestamp literal")
                return f"TIMESTAMP '{day} {self.rng.choice(('00:00:00', '08:00:00', '23:59:59'))}'"
            self.note("literal of another type")
            return self.rng.choice((f"'{day} 08:00:00'", f"{v}", f"'{day}x'"))
        if col.family == LABEL:
            return self.rng.choice(("'a'", "'B'", "'b'", "'c d'", "''", "'a '", "1"))
        if roll < 0.6:
            return str(v)
        self.note("literal of another type")
        return self.rng.choice((f"'{v}'", f"'0{v}'", f"' {v}'", f"{v}.5", f"{v}.0", f"{v}e0", f"'x{v}'",
                                f"CAST({v} AS BIGINT)", f"{v + _BIG}", f"CAST({v} AS DECIMAL(5,1))", "'NaN'",
                                "CAST('NaN' AS DOUBLE)", "-0.0"))


def _kind(c: _Col) -> str:
    return c.source.type.split("(")[0].lower()


def _unique(names: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for n in names:
        while n.lower() in seen:
            n += "_"
        seen.add(n.lower())
        out.append(n)
    return out


def _quote_id(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
