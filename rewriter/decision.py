"""The decision record: what the rewriter did to one statement and why (ARCHITECTURE.md §3.6)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any


# How the effect of a table's block descriptions (rewriter/blocks.py) is listed among its predicates.
BLOCK_DESCRIPTIONS = "block descriptions: "


@dataclasses.dataclass
class PredicateEffect:
    sql: str  # the local predicate as written (normalised by sqlglot), or BLOCK_DESCRIPTIONS + the cuts used
    files_removed: int  # files this predicate alone rules out
    untranslated: str | None = None  # why (part of) it could not be used

    @property
    def by_block_descriptions(self) -> bool:
        return self.sql.startswith(BLOCK_DESCRIPTIONS)


@dataclasses.dataclass
class DipEffect:
    source: str  # alias (db.table) the diP was built from
    columns: str  # "src_column -> dst_column"
    via: str  # the join or subquery that carried it
    ranges: int  # intervals in the diP
    files_removed: int  # files of this reference it ruled out (beyond what was already ruled out)
    target: str = ""  # alias.column (db.table) that received it: the TableDecision it is listed under
    values: list[str] = dataclasses.field(default_factory=list)  # its first intervals, readable
    compacted: bool = False  # compaction bridged gaps (seed 000 §6): it admits values no sender file holds
    from_rows: bool = False  # built from the keys of the origin's rows that pass (rewriter/exact_keys.py)


@dataclasses.dataclass
class TableDecision:
    table: str  # db.table
    alias: str
    files_total: int = 0
    bytes_total: int = 0
    files_kept: int = 0
    bytes_kept: int = 0
    unknown_files: int = 0  # on storage but not (or no longer) described by the statistics: always read
    has_stats: bool = False  # whether files and bytes above describe what this reference reads
    stats_location: str | None = None  # where the table was when the statistics used were collected
    predicates: list[PredicateEffect] = dataclasses.field(default_factory=list)
    dips: list[DipEffect] = dataclasses.field(default_factory=list)
    refused: str | None = None  # why this reference is read whole
    not_worth: bool = False  # read whole because its skips would not pay for the filter (rewriter.min_skip_fraction)
    # Files read only because a predicate Spark evaluates on their rows may raise an error there (ANSI
    # overflow, division by zero, an invalid cast): an error is a result too. With the predicates.
    kept_for_errors: int = 0
    raising: list[str] = dataclasses.field(default_factory=list)
    # As a diP's origin: what exact keys were read from its rows, or why its statistics were used instead.
    exact_keys: str | None = None
    exact_keys_ms: float = 0.0
    # diPs written as predicates on join columns (rewriter/dip_column.py), as sent to Spark.
    column_predicates: list[str] = dataclasses.field(default_factory=list)
    # Skipped files the filter names by ranges of block file names rather than one key each
    # (rewriter/name_ranges.py), and how many ranges.
    files_by_name_range: int = 0
    name_ranges: int = 0
    # The paths of the files skipped, for tests and tools; not in the JSON record (it can be 10^5 paths).
    skipped_paths: list[str] = dataclasses.field(default_factory=list, repr=False)

    @property
    def files_skipped(self) -> int:
        return self.files_total - self.files_kept

    @property
    def files_removed_by_blocks(self) -> int:
        """Files the block descriptions removed beyond the reference's own predicates."""
        return sum(e.files_removed for e in self.predicates if e.by_block_descriptions)


@dataclasses.dataclass
class Decision:
    database: str
    tables: list[TableDecision] = dataclasses.field(default_factory=list)
    changed: bool = False
    error: str | None = None  # set when the rewriter failed open
    passthrough: str | None = None  # why the statement was not analysed (DDL, several statements, ...)
    # Tables the statement names whose column types the rewriter did not know (no statistics) when it declined
    # it for a filter that may raise: their types, from the catalog, may show the filter cannot.
    untyped: list[str] = dataclasses.field(default_factory=list)
    dips_built: int = 0  # data-induced predicates constructed (each exchange along a channel builds one)
    elapsed_ms: float = 0.0
    cached: bool = False  # the rewrite of the same statement under the same settings and statistics, kept

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for t, d in zip(self.tables, out["tables"]):
            d["files_skipped"] = t.files_skipped
            del d["skipped_paths"]
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


def render(decision: Decision) -> str:
    """A readable table per table reference: files and bytes before and after, and why."""
    lines = []
    if decision.passthrough:
        lines.append(f"passed through unchanged: {decision.passthrough}")
    if decision.error:
        lines.append(f"rewriter failed open (original SQL sent): {decision.error}")
    for t in decision.tables:
        head = f"{t.table} AS {t.alias}" if t.alias != t.table.split(".")[-1] else t.table
        rows = [f"    rows filtered by  {p}" for p in t.column_predicates]
        if t.refused:
            lines += [f"{head}: read whole ({t.refused})"] + rows
            continue
        lines.append(f"{head}: files {t.files_kept}/{t.files_total} kept, bytes {_mb(t.bytes_kept)}/{_mb(t.bytes_total)} kept"
                     + (f", {t.unknown_files} files without statistics read" if t.unknown_files else ""))
        for p in t.predicates:
            note = f"  [{p.untranslated}]" if p.untranslated else ""
            lines.append(f"    {p.files_removed:>6} files ruled out by  {p.sql}{note}")
        if t.kept_for_errors:
            lines.append(f"    {t.kept_for_errors:>6} files read because these may raise an error on them: "
                         + "; ".join(t.raising))
        for d in t.dips:
            if d.files_removed:
                shown = ": " + ", ".join(d.values[:3]) + (", ..." if d.ranges > 3 else "") if d.ranges else ""
                lines.append(f"    {d.files_removed:>6} files ruled out by  diP from {d.source} on {d.columns} "
                             f"({'keys of its rows, ' if d.from_rows else ''}{d.ranges} ranges"
                             f"{' compacted' if d.compacted else ''}{shown}; {d.via})")
        if t.name_ranges:
            lines.append(f"    {t.files_by_name_range:>6} of the skipped files named by {t.name_ranges} ranges of "
                         f"block file names")
        lines += rows
        if t.exact_keys:
            took = "" if t.exact_keys.startswith("not used") else f" ({t.exact_keys_ms:.1f} ms)"
            lines.append(f"    exact keys as a diP origin: {t.exact_keys}{took}")
    dips = f"{decision.dips_built} diPs built, " if decision.dips_built else ""
    lines.append(f"({dips}{decision.elapsed_ms:.1f} ms)")
    return "\n".join(lines)


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n} B"
