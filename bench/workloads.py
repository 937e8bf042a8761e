"""Workloads of query instances: the 22 TPC-H queries with their substitution parameters drawn as the TPC-H
specification (rev. 3, §2.4) draws them (TPC-DS's 99 by redrawing their literals from the data,
``bench/redraw.py``), so that a layout can be learned on one set of instances and judged on
another of unseen literals (seed 003's robustness experiment; issue 15).

The query texts are the suite's own (``bench/queries/tpch``, the specification's validation parameters,
translated to Spark SQL). Each query lists the literals its parameters appear as and how to draw new ones;
they are replaced in one pass (so ``'FRANCE'`` and ``'GERMANY'`` can swap), and a literal that is not found
is an error, so a change of the query texts cannot silently leave a parameter fixed.

    python -m bench workload --suite tpch --seed 1 --per-query 10 --output train.sql
"""

from __future__ import annotations

import datetime
import random
import re
from collections.abc import Callable
from pathlib import Path

from bench.query_suite import runnable_queries
from bench.redraw import Domains, redraw
from dipper.errors import DatasetError

D = datetime.date

REGIONS = ("AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST")
NATIONS = {  # nation -> region (TPC-H §4.2.3)
    "ALGERIA": "AFRICA", "ARGENTINA": "AMERICA", "BRAZIL": "AMERICA", "CANADA": "AMERICA", "EGYPT": "MIDDLE EAST",
    "ETHIOPIA": "AFRICA", "FRANCE": "EUROPE", "GERMANY": "EUROPE", "INDIA": "ASIA", "INDONESIA": "ASIA",
    "IRAN": "MIDDLE EAST", "IRAQ": "MIDDLE EAST", "JAPAN": "ASIA", "JORDAN": "MIDDLE EAST", "KENYA": "AFRICA",
    "MOROCCO": "AFRICA", "MOZAMBIQUE": "AFRICA", "PERU": "AMERICA", "CHINA": "ASIA", "ROMANIA": "EUROPE",
    "SAUDI ARABIA": "MIDDLE EAST", "VIETNAM": "ASIA", "RUSSIA": "EUROPE", "UNITED KINGDOM": "EUROPE",
    "UNITED STATES": "AMERICA"}
SEGMENTS = ("AUTOMOBILE", "BUILDING", "FURNITURE", "MACHINERY", "HOUSEHOLD")
TYPE_1 = ("STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO")
TYPE_2 = ("ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED")
TYPE_3 = ("TIN", "NICKEL", "BRASS", "STEEL", "COPPER")
CONTAINER_1 = ("SM", "LG", "MED", "JUMBO", "WRAP")
CONTAINER_2 = ("CASE", "BOX", "BAG", "JAR", "PKG", "PACK", "CAN", "DRUM")
SHIPMODES = ("REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB")
COLORS = tuple("""almond antique aquamarine azure beige bisque black blanched blue blush brown burlywood burnished
    chartreuse chiffon chocolate coral cornflower cornsilk cream cyan dark deep dim dodger drab firebrick floral
    forest frosted gainsboro ghost goldenrod green grey honeydew hot indian ivory khaki lace lavender lawn lemon
    light lime linen magenta maroon medium metallic midnight mint misty moccasin navajo navy olive orange orchid
    pale papaya peach peru pink plum powder puff purple red rose rosy royal saddle salmon sandy seashell sienna
    sky slate smoke snow spring steel tan thistle tomato turquoise violet wheat white yellow""".split())
WORDS_1 = ("special", "pending", "unusual", "express")
WORDS_2 = ("packages", "requests", "accounts", "deposits")

Replacements = list[tuple[str, str]]


def _date(d: datetime.date) -> str:
    return f"'{d.isoformat()}'"


def _month(rng: random.Random, first: tuple[int, int], last: tuple[int, int]) -> datetime.date:
    """The first day of a month drawn uniformly from ``first`` to ``last`` (year, month), both included."""
    months = (last[0] - first[0]) * 12 + last[1] - first[1]
    k = rng.randint(0, months)
    return D(first[0] + (first[1] - 1 + k) // 12, (first[1] - 1 + k) % 12 + 1, 1)


def _plus_months(d: datetime.date, n: int) -> datetime.date:
    return D(d.year + (d.month - 1 + n) // 12, (d.month - 1 + n) % 12 + 1, d.day)


def _year(rng: random.Random) -> datetime.date:
    return D(rng.randint(1993, 1997), 1, 1)


def _brand(rng: random.Random) -> str:
    return f"Brand#{rng.randint(1, 5)}{rng.randint(1, 5)}"


def _q01(rng: random.Random) -> Replacements:
    return [("'1998-09-02'", _date(D(1998, 12, 1) - datetime.timedelta(days=rng.randint(60, 120))))]


def _q02(rng: random.Random) -> Replacements:
    return [("p_size = 15", f"p_size = {rng.randint(1, 50)}"), ("'%BRASS'", f"'%{rng.choice(TYPE_3)}'"),
            ("'EUROPE'", f"'{rng.choice(REGIONS)}'")]


def _q03(rng: random.Random) -> Replacements:
    return [("'BUILDING'", f"'{rng.choice(SEGMENTS)}'"), ("'1995-03-15'", _date(D(1995, 3, rng.randint(1, 31))))]


def _q04(rng: random.Random) -> Replacements:
    d = _month(rng, (1993, 1), (1997, 10))
    return [("'1993-07-01'", _date(d)), ("'1993-10-01'", _date(_plus_months(d, 3)))]


def _q05(rng: random.Random) -> Replacements:
    d = _year(rng)
    return [("'ASIA'", f"'{rng.choice(REGIONS)}'"), ("'1994-01-01'", _date(d)), ("'1995-01-01'", _date(_plus_months(d, 12)))]


def _q06(rng: random.Random) -> Replacements:
    d, discount = _year(rng), rng.randint(2, 9)
    return [("'1994-01-01'", _date(d)), ("'1995-01-01'", _date(_plus_months(d, 12))),
            ("BETWEEN 0.05 AND 0.07", f"BETWEEN 0.{discount - 1:02d} AND 0.{discount + 1:02d}"),
            ("l_quantity < 24", f"l_quantity < {rng.randint(24, 25)}")]


def _q07(rng: random.Random) -> Replacements:
    a, b = rng.sample(sorted(NATIONS), 2)
    return [("'FRANCE'", f"'{a}'"), ("'GERMANY'", f"'{b}'")]


def _q08(rng: random.Random) -> Replacements:
    nation = rng.choice(sorted(NATIONS))
    kind = f"{rng.choice(TYPE_1)} {rng.choice(TYPE_2)} {rng.choice(TYPE_3)}"
    return [("'BRAZIL'", f"'{nation}'"), ("'AMERICA'", f"'{NATIONS[nation]}'"), ("'ECONOMY ANODIZED STEEL'", f"'{kind}'")]


def _q09(rng: random.Random) -> Replacements:
    return [("'%green%'", f"'%{rng.choice(COLORS)}%'")]


def _q10(rng: random.Random) -> Replacements:
    d = _month(rng, (1993, 2), (1995, 1))
    return [("'1993-10-01'", _date(d)), ("'1994-01-01'", _date(_plus_months(d, 3)))]


def _q11(rng: random.Random) -> Replacements:
    return [("'GERMANY'", f"'{rng.choice(sorted(NATIONS))}'")]


def _q12(rng: random.Random) -> Replacements:
    a, b = rng.sample(SHIPMODES, 2)
    d = _year(rng)
    return [("('MAIL', 'SHIP')", f"('{a}', '{b}')"), ("'1994-01-01'", _date(d)),
            ("'1995-01-01'", _date(_plus_months(d, 12)))]


def _q13(rng: random.Random) -> Replacements:
    return [("'%special%requests%'", f"'%{rng.choice(WORDS_1)}%{rng.choice(WORDS_2)}%'")]


def _q14(rng: random.Random) -> Replacements:
    d = _month(rng, (1993, 1), (1997, 12))
    return [("'1995-09-01'", _date(d)), ("'1995-10-01'", _date(_plus_months(d, 1)))]


def _q15(rng: random.Random) -> Replacements:
    d = _month(rng, (1993, 1), (1997, 10))
    return [("'1996-01-01'", _date(d)), ("'1996-04-01'", _date(_plus_months(d, 3)))]


def _q16(rng: random.Random) -> Replacements:
    sizes = ", ".join(str(s) for s in rng.sample(range(1, 51), 8))
    return [("'Brand#45'", f"'{_brand(rng)}'"), ("'MEDIUM POLISHED%'", f"'{rng.choice(TYPE_1)} {rng.choice(TYPE_2)}%'"),
            ("(49, 14, 23, 45, 19, 3, 36, 9)", f"({sizes})")]


def _q17(rng: random.Random) -> Replacements:
    return [("'Brand#23'", f"'{_brand(rng)}'"), ("'MED BOX'", f"'{rng.choice(CONTAINER_1)} {rng.choice(CONTAINER_2)}'")]


def _q18(rng: random.Random) -> Replacements:
    return [("> 300", f"> {rng.randint(312, 315)}")]


def _q19(rng: random.Random) -> Replacements:
    q1, q2, q3 = rng.randint(1, 10), rng.randint(10, 20), rng.randint(20, 30)
    return [("'Brand#12'", f"'{_brand(rng)}'"), ("'Brand#23'", f"'{_brand(rng)}'"), ("'Brand#34'", f"'{_brand(rng)}'"),
            ("l_quantity >= 1\n", f"l_quantity >= {q1}\n"), ("l_quantity <= 1 + 10", f"l_quantity <= {q1} + 10"),
            ("l_quantity >= 10\n", f"l_quantity >= {q2}\n"), ("l_quantity <= 10 + 10", f"l_quantity <= {q2} + 10"),
            ("l_quantity >= 20\n", f"l_quantity >= {q3}\n"), ("l_quantity <= 20 + 10", f"l_quantity <= {q3} + 10")]


def _q20(rng: random.Random) -> Replacements:
    d = _year(rng)
    return [("'forest%'", f"'{rng.choice(COLORS)}%'"), ("'1994-01-01'", _date(d)),
            ("'1995-01-01'", _date(_plus_months(d, 12))), ("'CANADA'", f"'{rng.choice(sorted(NATIONS))}'")]


def _q21(rng: random.Random) -> Replacements:
    return [("'SAUDI ARABIA'", f"'{rng.choice(sorted(NATIONS))}'")]


def _q22(rng: random.Random) -> Replacements:
    codes = ", ".join(f"'{c}'" for c in rng.sample(range(10, 35), 7))
    return [("('13', '31', '23', '29', '30', '18', '17')", f"({codes})")]


TPCH: dict[str, Callable[[random.Random], Replacements]] = {
    f"q{i:02d}": f for i, f in enumerate((_q01, _q02, _q03, _q04, _q05, _q06, _q07, _q08, _q09, _q10, _q11, _q12, _q13,
                                          _q14, _q15, _q16, _q17, _q18, _q19, _q20, _q21, _q22), start=1)}


def substitute(sql: str, replacements: Replacements, name: str) -> str:
    """Every ``old`` of ``replacements`` replaced by its ``new`` in one pass; each must occur."""
    for old, _ in replacements:
        if old not in sql:
            raise DatasetError(f"{name}: the parameter {old!r} is not in the query text; update bench/workloads.py")
    table = dict(replacements)
    pattern = re.compile("|".join(re.escape(old) for old in sorted(table, key=len, reverse=True)))
    return pattern.sub(lambda m: table[m.group(0)], sql)


def instances(suite: str, seed: int, per_query: int, queries: list[str] | None = None,
              domains: Domains | None = None) -> list[tuple[str, str]]:
    """``per_query`` instances of each query (all, or ``queries``) as (name, SQL), drawn with ``seed``: TPC-H's
    by the specification's parameters, TPC-DS's by redrawing their literals from ``domains`` (the dataset's
    values, ``bench/redraw.py``)."""
    if suite not in ("tpch", "tpcds"):
        raise DatasetError(f"query instances are defined for tpch and tpcds, not {suite!r}")
    if suite == "tpcds" and domains is None:
        raise DatasetError("TPC-DS instances redraw literals from a dataset's values: name a dataset with "
                           "statistics (--dataset tpcds_sf1_tuned)")
    if per_query < 1:
        raise DatasetError(f"--per-query must be at least 1, not {per_query}")
    texts = runnable_queries(suite)
    names = queries or sorted(texts)
    unknown = [n for n in names if n not in texts or suite == "tpch" and n not in TPCH]
    if unknown:
        raise DatasetError(f"unknown query {unknown[0]!r}; choose from {', '.join(sorted(texts))}")
    out = []
    for name in names:
        for k in range(per_query):
            rng = random.Random(f"{seed}/{suite}/{name}/{k}")
            sql = substitute(texts[name], TPCH[name](rng), name) if suite == "tpch" else \
                redraw(texts[name], domains, rng)
            out.append((f"{name}#{k}", sql))
    return out


def training_and_unseen(suite: str, train_seed: int, test_seed: int, per_query: int, queries: list[str] | None = None,
                        domains: Domains | None = None) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The training instances (``train_seed``) and the unseen ones: those of ``test_seed`` that differ from
    every training instance (issue 15's measurements on literals a layout was not learned from)."""
    train = instances(suite, train_seed, per_query, queries, domains)
    return train, unlike(instances(suite, test_seed, per_query, queries, domains), train)


def unlike(items: list[tuple[str, str]], *others: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The instances of ``items`` whose text differs from every instance of ``others``: a set held out from
    the ones a layout was learned or judged on."""
    seen = {sql for other in others for _, sql in other}
    return [(name, sql) for name, sql in items if sql not in seen]


def write(path: Path, items: list[tuple[str, str]]) -> None:
    """A SQL file of the instances, each preceded by a comment naming it and ended by ``;``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"-- {name}\n{sql.strip().rstrip(';')};\n\n" for name, sql in items), encoding="utf-8")


def decisions(loader, items: list[tuple[str, str]], database: str, session, options) -> list:  # noqa: ANN001
    """Dipper's rewrite decision for each instance (``rewriter/rewrite.py``, no query run) in ``database`` under
    ``session`` with the rewriter configured by ``options``; an instance the rewriter fails on is an error (a
    benchmark that counted it as read whole would hide a defect)."""
    from rewriter.rewrite import RewriteContext, rewrite

    out = []
    for name, sql in items:
        d = rewrite(sql, RewriteContext(loader, database=database, session=session, **options)).decision
        if d.error:
            raise DatasetError(f"{name}: the rewriter failed on {database}: {d.error}")
        out.append(d)
    return out
