"""A failing predicate reduced to a minimal one, and the reproducer printed for it.

Shrinking is greedy: of the smaller predicates :func:`bench.fuzz_predicates.predicates.shrinks` proposes (a
sub-predicate, a function peeled off its argument, a shorter IN list, a plainer literal), the first that
still fails the same way (same failure kind, same setting, same rewriter variant) replaces the current
one, until none does or the budget of Spark checks is spent. A candidate must be strictly smaller
(fewer nodes, or as many and shorter text), so shrinking ends.
"""

from __future__ import annotations

import dataclasses

from bench.fuzz_predicates.check import Checker, Failure, Setting, path_in, session
from bench.fuzz_predicates.predicates import Expr, shrinks
from bench.fuzz_predicates.tables import STATS
from stats.store import COLUMN_PREFIX

DEFAULT_BUDGET = 120


def _measure(e: Expr) -> tuple[int, int]:
    return e.size(), len(e.sql())


def reproduces(checker: Checker, failure: Failure, predicate: Expr) -> Failure | None:
    """The same failure for ``predicate`` in place of the failing one, if it still happens."""
    case = dataclasses.replace(failure.case, predicate=predicate)
    outcome = checker.check([case], failure.setting)[0]
    return next((f for f in outcome.failures if f.kind == failure.kind and f.variant == failure.variant), None)


def shrink(checker: Checker, failure: Failure, budget: int = DEFAULT_BUDGET) -> Failure:
    """The smallest predicate found that fails as ``failure`` does (``failure`` itself if none is smaller)."""
    only = checker.only(failure.variant)
    current, attempts = failure, 0
    progress = True
    while progress and attempts < budget:
        progress = False
        size = _measure(current.case.predicate)
        for candidate in shrinks(current.case.predicate):
            if _measure(candidate) >= size:
                continue
            attempts += 1
            found = reproduces(only, current, candidate)
            if found is not None:
                current, progress = found, True
                break
            if attempts >= budget:
                break
    return current


def reproducer(checker: Checker, failure: Failure, original: Failure | None = None) -> str:
    """A report of ``failure`` someone can act on: the predicate, the setting, the files, their values and
    statistics, the SQL that shows it on Spark, and the command that replays the case."""
    table = checker.table
    variant = next(v for v in checker.variants if v.name == failure.variant)
    k, n, bloom = STATS[variant.stats]
    s = failure.setting
    lines = [
        f"FAILURE: {failure.kind}",
        f"  predicate:  {failure.case.sql}",
    ]
    if original is not None and original.case.sql != failure.case.sql:
        lines.append(f"  shrunk from: {original.case.sql}")
    lines += [
        f"  detail:     {failure.detail}",
        f"  table:      {table.name} (Parquet files under {table.location})",
        f"  setting:    spark.sql.ansi.enabled={str(s.ansi).lower()}, spark.sql.session.timeZone={s.time_zone}"
        + ("" if s.pushdown else ", spark.sql.parquet.filterPushdown=false"),
        f"  rewriter:   statistics with range-sets of {k} and value lists of {n}{' and Bloom filters' if bloom else ''}; session time zone "
        + (f"told ({s.time_zone})" if variant.knows_zone else "not told (None)"),
    ]
    if failure.case.seed >= 0:  # a generated case (regression cases carry seed -1)
        lines.append(f"  replay:     python -m bench fuzz-predicates --seed {failure.case.seed} --case {failure.case.index}")
    columns = failure.case.predicate.columns()
    for path in failure.files[:3]:
        kind = table.layout[table.files.index(path)] if path in table.files else "?"
        lines.append(f"  file {path} ({kind} file)")
        for name, value in file_values(checker, path, columns).items():
            lines.append(f"    {name:6} values (UTC): {value}")
        for name, stats in file_stats(checker, variant.stats, path, columns).items():
            lines.append(f"    {name:6} statistics:   {stats}")
    probe = failure.files[0] if failure.files else None
    lines.append("  on Spark:")
    lines.append(f"    SET spark.sql.ansi.enabled={str(s.ansi).lower()};")
    lines.append(f"    SET spark.sql.session.timeZone={s.time_zone};")
    if not s.pushdown:
        lines.append("    SET spark.sql.parquet.filterPushdown=false;")
    if probe is not None:
        lines.append(f"    SELECT count(*) FROM {table.name} WHERE {path_in([probe])} AND ({failure.case.sql});")
    else:
        lines.append(f"    SELECT count(*) FROM {table.name} WHERE {failure.case.sql};")
    return "\n".join(lines)


def file_values(checker: Checker, path: str, columns: list[str]) -> dict[str, list[str]]:
    """Each column's values in one file, as Spark prints them in UTC (strings shown with repr)."""
    if not columns:
        return {}
    select = ", ".join(f"CAST({c} AS STRING)" for c in columns)
    with session(checker.spark, Setting(ansi=False, time_zone="UTC")):
        rows = checker.spark.sql(f"SELECT {select} FROM {checker.table.name} WHERE {path_in([path])}").collect()
    return {c: [repr(r[i]) if r[i] is not None else "NULL" for r in rows] for i, c in enumerate(columns)}


def file_stats(checker: Checker, stats: str, path: str, columns: list[str]) -> dict[str, str]:
    """The statistics the rewriter had for each column of one file (domain values, ``stats/model.py``)."""
    data = checker.table.stores[stats].snapshot().read(checker.table.name).to_pylist()
    row = next((r for r in data if r["path"] == path), None)
    if row is None:
        return {}
    out = {}
    for c in columns:
        col = row.get(COLUMN_PREFIX + c)
        if col is None:
            out[c] = "none (column not covered)"
            continue
        parts = [f"min={col['min']!r}", f"max={col['max']!r}", f"nulls={col['nulls']}", f"known={col['known']}"]
        if col.get("rs_lo") is not None:
            parts.append(f"ranges={list(zip(col['rs_lo'], col['rs_hi']))}")
        if col.get("values") is not None:
            parts.append(f"values={col['values']!r}")
        out[c] = ", ".join(parts) + f" (rows={row['rows']})"
    return out
