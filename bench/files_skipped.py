"""``python -m bench files-skipped``: the files every benchmark query would skip, from the rewriter's
decisions alone (no query runs), to compare two versions of the rewriter query by query.

``measure`` writes one CSV row per query: files and bytes of the tables it reads, files kept with local
predicates only and with diPs, files read only because a predicate may raise on them, and why the
statement or a reference was declined. ``compare`` renders two such CSVs (before and after a change) as a
markdown section: totals, and every query whose kept files changed, with the reasons. A change that
keeps *more* files must be explained by a soundness fix; one that keeps fewer by new pruning.
"""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

from bench.query_suite import runnable_queries
from dipper.config import Config
from dipper.errors import DatasetError
from rewriter.rewrite import RewriteContext, rewrite
from stats.freshness import Lister
from stats.loader import StatsLoader
from stats.store import StatsStore

FIELDS = ("query", "files_total", "bytes_total", "files_local", "files_dips", "bytes_dips", "kept_for_errors", "why")


@dataclasses.dataclass(frozen=True)
class Row:
    query: str
    files_total: int
    bytes_total: int
    files_local: int  # kept with local predicates only
    files_dips: int  # kept with diPs
    bytes_dips: int
    kept_for_errors: int
    why: str  # passthrough, error, refusals: what made the rewriter keep files it might have skipped


def measure(config: Config, database: str, output: Path) -> int:
    suite = database.split("_", 1)[0]
    source = StatsLoader(StatsStore(config.paths.stats), Lister(60))
    if not any(name.startswith(database + ".") for name in source.schemas()):
        raise DatasetError(f"no statistics for {database}; create them with: make dataset SUITE={suite} ...")
    r = config.rewriter
    rows = []
    for name, sql in sorted(runnable_queries(suite).items()):
        kept = {}
        for dips in (False, True):
            ctx = RewriteContext(source, database=database, **{**r.context_options(), "dips": dips})
            kept[dips] = rewrite(sql, ctx).decision
        decision = kept[True]
        tables = [t for t in decision.tables if t.has_stats]
        reasons = [decision.passthrough, decision.error] + sorted({t.refused for t in decision.tables
                                                                   if t.refused and not t.refused.startswith("no local")})
        rows.append(Row(name, sum(t.files_total for t in tables), sum(t.bytes_total for t in tables),
                        sum(t.files_kept for t in kept[False].tables if t.has_stats),
                        sum(t.files_kept for t in tables), sum(t.bytes_kept for t in tables),
                        sum(getattr(t, "kept_for_errors", 0) for t in tables), "; ".join(x for x in reasons if x)))
        print(f"{name}: {rows[-1].files_dips}/{rows[-1].files_total} files kept")
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(dataclasses.asdict(row) for row in rows)
    print(f"wrote {output}")
    return 0


def read(path: Path) -> dict[str, Row]:
    with path.open() as f:
        return {r["query"]: Row(r["query"], *(int(r[k]) for k in FIELDS[1:-1]), r["why"]) for r in csv.DictReader(f)}


def compare(before: Path, after: Path, title: str) -> str:
    """A markdown section: totals before and after, and every query whose kept files changed."""
    old, new = read(before), read(after)
    common = sorted(set(old) & set(new))
    total = sum(new[q].files_total for q in common)
    lines = [f"## {title}", "",
             f"{len(common)} queries, {total:,} files referenced in all (`{before.name}` → `{after.name}`).", "",
             "| | before | after |", "|---|---:|---:|",
             f"| files skipped, local predicates only | {sum(old[q].files_total - old[q].files_local for q in common):,} | "
             f"{sum(new[q].files_total - new[q].files_local for q in common):,} |",
             f"| files skipped, with diPs | {sum(old[q].files_total - old[q].files_dips for q in common):,} | "
             f"{sum(new[q].files_total - new[q].files_dips for q in common):,} |",
             f"| MB kept, with diPs | {sum(old[q].bytes_dips for q in common) / 1e6:,.1f} | "
             f"{sum(new[q].bytes_dips for q in common) / 1e6:,.1f} |",
             f"| files read because a predicate may raise | {sum(old[q].kept_for_errors for q in common)} | "
             f"{sum(new[q].kept_for_errors for q in common)} |",
             f"| queries keeping the same files | {sum(old[q].files_dips == new[q].files_dips for q in common)} | |", ""]
    changed = [q for q in common if old[q].files_dips != new[q].files_dips or old[q].files_local != new[q].files_local]
    if changed:
        lines += ["| query | files | kept before (local / diPs) | kept after (local / diPs) | why, after |",
                  "|---|---:|---:|---:|---|"]
        for q in changed:
            a, b = old[q], new[q]
            lines.append(f"| {q} | {b.files_total} | {a.files_local} / {a.files_dips} | {b.files_local} / {b.files_dips} "
                         f"| {b.why or ('read because a predicate may raise: ' + str(b.kept_for_errors) if b.kept_for_errors else '')} |")
    return "\n".join(lines) + "\n"
