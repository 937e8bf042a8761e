"""``python -m stats show``: a readable summary of one table's statistics."""

from __future__ import annotations

import numpy as np

from dipper.errors import StatsError
from stats.loader import to_table_stats
from stats.store import StatsStore


def show(store: StatsStore, table: str) -> str:
    snap = store.snapshot()
    if "." not in table:
        holders = snap.databases_holding(table)
        if len(holders) > 1:
            raise StatsError(f"the statistics hold a table {table} in databases {', '.join(holders)}: name one, "
                             f"e.g. {holders[0]}.{table}")
        table = f"{holders[0]}.{table}" if holders else table
    entry = snap.entry(table)
    if entry is None:
        known = ", ".join(sorted(snap.tables)) or "none"
        raise StatsError(f"no statistics for {table}; tables with statistics: {known}")
    stats = to_table_stats(entry.name, snap.read(entry.name), entry.kinds, entry.partition_columns)
    from_footers = snap.footer_rows(entry.name)
    footnote = (f"   ({from_footers:,} described from Parquet footers only: zone maps until "
                f"`python -m stats refresh {entry.name}`)" if from_footers else "")
    lines = [f"{entry.name}  ({entry.format} at {entry.location}; collected {entry.collected_at}, "
             f"range-set size {entry.range_set_size}, value lists up to {entry.value_list_max})",
             f"files {stats.n_files:,}   rows {int(stats.rows.sum()):,}   bytes {int(stats.sizes.sum()):,}{footnote}",
             "", f"{'column':<28}{'kind':<14}{'nulls':>12}{'zone-map width':>18}{'range-set width':>18}{'ratio':>8}"]
    for name, c in stats.columns.items():
        kind = c.kind.name + (f"({c.kind.precision},{c.kind.scale})" if c.kind.name == "decimal" else "")
        nulls = int(c.null_count[c.null_count >= 0].sum())
        if c.kind.name == "string":
            lists = int(c.values.present.sum()) if c.values is not None else 0
            lines.append(f"{name:<28}{kind:<14}{nulls:>12,}{'':>18}{f'{lists} value lists':>18}")
            continue
        known = c.known & (c.null_count < stats.rows)
        zone = float(np.sum((c.hi[known] - c.lo[known]).astype(np.float64)))
        ranged = zone
        if c.ranges is not None:
            per_interval = (c.ranges.hi - c.ranges.lo).astype(np.float64)
            ranged = float(np.sum(per_interval[known[c.ranges.file]]))
        ratio = f"{ranged / zone:.2f}" if zone else "-"
        lines.append(f"{name:<28}{kind:<14}{nulls:>12,}{zone:>18,.0f}{ranged:>18,.0f}{ratio:>8}")
    for kind, columns in sorted(entry.indexes.items()):
        for name in columns:
            loaded = stats.columns[name].indexes.get(kind) if name in stats.columns else None
            size = f"{loaded.nbytes:,} bytes over {int(loaded.present.sum()):,} files" if loaded is not None else "no file"
            lines.append(f"{name:<28}{kind}: {size}")
    for name, why in entry.skipped_columns.items():
        lines.append(f"{name:<28}(no statistics: {why})")
    return "\n".join(lines)
