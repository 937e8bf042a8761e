"""Block layouts beside the statistics: which file of a table holds which block of a qd-tree, and what every
row of the block satisfies (issue 15, parts 4-5).

``python -m layout apply`` writes one record per table, ``<store>/layouts/<db.table>.json``; the rewriter
reads it through the statistics loader (``rewriter/blocks.py`` decides what it proves). A record holds:

- ``session``: the ANSI mode and session time zone the rows were routed under (a cut's value depends on them);
- ``cuts``: each cut's SQL text, whether it is a joined filter (``rewriter/joined_filter.py``), and for a
  joined one the tables whose rows decide it; its parts, for deciding a statement's own literals against it
  (``rewriter/blocks.py``): the conjuncts it tests (a local cut's own text; a joined cut's sender conjuncts), a
  joined cut's receiving column, sender and key, whether it nests other joined filters, and whether the key was
  unique among the sender's rows it was routed by;
- ``pinned``: for each such table, the identity (path, size, mtime) of every file it had when the rows were
  routed: a joined cut says something only while the dimension is what it was;
- ``files``: per file of the new version, its identity and its block's path of (cut, holds) steps;
- ``joined_bounds``: per (sender, key, receiving column) the workload joins the table through, and per file,
  what the sender's rows that join the file's rows hold: how many there are and, per sender column the
  workload tests, their min, max and NULL count (``JoinedBounds``; the sender is pinned like a joined cut's).

Nothing here is trusted beyond identities: a file whose size or mtime differ from the record's is not
described, and a record whose table moved since (another location) describes nothing.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from dipper.errors import StatsError
from stats.model import TableStats

Identity = tuple[str, int, int]  # path as Spark spells it, size, mtime (microseconds)
Step = tuple[int, bool]  # cut index, holds (the cut is TRUE on every row) or not (FALSE or NULL on every row)


def identities(stats: TableStats) -> frozenset[Identity]:
    """The identity of every file ``stats`` describes: what a record pins, and what a listing is compared to."""
    return frozenset((str(p), int(s), int(m)) for p, s, m in zip(stats.paths, stats.sizes, stats.mtimes))


@dataclasses.dataclass(frozen=True)
class RecordedCut:
    sql: str
    joined: bool
    sources: tuple[str, ...] = ()  # tables a joined cut is decided by (its sender and nested senders)
    conjuncts: tuple[str, ...] = ()  # a local cut: its text; a joined cut: its sender's conjuncts
    column: str = ""  # a joined cut: the column of the table it filters
    source: str = ""  # its sender (db.table) and the sender's key column
    key: str = ""
    nested: bool = False  # it also restricts the sender by the sender's own joined filters
    unique_key: bool = False  # no two of the sender's rows (as pinned) hold one non-NULL key


# Kinds whose bounds travel exactly as JSON numbers or strings (``stats/model.py``'s domains): decimals and
# floats are left out of joined bounds.
BOUNDED_KINDS = ("int", "date", "timestamp", "timestamp_ntz", "string")
Bound = tuple[Any, Any, int]  # min and max of the non-NULL values (None, None: there is none), NULL count


@dataclasses.dataclass(frozen=True)
class JoinedBounds:
    """For the rows of each file: the rows of ``source`` whose ``key`` equals the file's ``column`` (the rows
    an inner join on ``column = key`` pairs with the file's rows), summarised per sender attribute. Computed
    by ``apply`` over every row of each file and the sender's files as pinned; ``rewriter/joined_bounds.py``
    says what they prove."""

    source: str  # db.table
    key: str  # its column
    column: str  # of the table laid out
    attributes: tuple[tuple[str, str], ...]  # (sender column, its kind's name), one of BOUNDED_KINDS
    files: Mapping[str, tuple[int, tuple[Bound, ...]]]  # path -> (joining sender rows, a Bound per attribute)

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "key": self.key, "column": self.column,
                "attributes": [list(a) for a in self.attributes],
                "files": {p: [n, [list(b) for b in bounds]] for p, (n, bounds) in self.files.items()}}

    @staticmethod
    def from_json(body: Mapping[str, Any]) -> JoinedBounds:
        attributes = tuple((str(name), str(kind)) for name, kind in body["attributes"])
        if any(kind not in BOUNDED_KINDS for _, kind in attributes):
            raise ValueError("an attribute of a kind joined bounds do not hold")
        files = {}
        for path, (n, bounds) in body["files"].items():
            if len(bounds) != len(attributes):
                raise ValueError(f"{path}: {len(bounds)} bounds for {len(attributes)} attributes")
            files[path] = (int(n), tuple((lo, hi, int(nulls)) for lo, hi, nulls in bounds))
        return JoinedBounds(body["source"], body["key"], body["column"], attributes, files)


@dataclasses.dataclass(frozen=True)
class BlockLayout:
    table: str
    location: str
    ansi: bool
    time_zone: str | None
    cuts: tuple[RecordedCut, ...]
    pinned: Mapping[str, frozenset[Identity]]
    files: Mapping[str, tuple[int, int, tuple[Step, ...]]]  # path -> (size, mtime, steps)
    joined_bounds: tuple[JoinedBounds, ...] = ()

    def described(self, stats: TableStats) -> np.ndarray:
        """Per file of ``stats``: the record describes it (this table at this location, and the file's path,
        size and mtime are the record's). Nothing else is judged by the record."""
        out = np.zeros(stats.n_files, dtype=bool)
        if self.table != stats.table or self.location != stats.location:
            return out
        for k in range(stats.n_files):
            f = self.files.get(stats.paths[k])
            out[k] = f is not None and (f[0], f[1]) == (int(stats.sizes[k]), int(stats.mtimes[k]))
        return out

    def to_json(self) -> dict[str, Any]:
        return {"table": self.table, "location": self.location,
                "session": {"ansi": self.ansi, "time_zone": self.time_zone},
                "cuts": [dataclasses.asdict(c) for c in self.cuts],
                "pinned": {t: sorted(list(i) for i in ids) for t, ids in self.pinned.items()},
                "files": {p: {"size": s, "mtime": m, "path": [list(step) for step in steps]}
                          for p, (s, m, steps) in self.files.items()},
                "joined_bounds": [b.to_json() for b in self.joined_bounds]}


def record_path(root: Path, table: str) -> Path:
    return Path(root) / "layouts" / f"{table.lower()}.json"


def write_layout(root: Path, layout: BlockLayout, extra: Mapping[str, Any] | None = None) -> Path:
    """Write ``layout`` (and ``extra`` fields for people: descriptions, times) atomically."""
    path = record_path(root, layout.table)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({**(extra or {}), **layout.to_json()}, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def pinning(root: Path, table: str) -> list[str]:
    """The tables whose block layout records pin ``table``'s files (their joined cuts or joined bounds were
    computed from its rows): once its files change, what those cuts say of their blocks no longer holds and
    the rewriter stops using it (``rewriter/blocks.py``) until they are laid out again."""
    out = []
    for path in sorted((Path(root) / "layouts").glob("*.json")):
        try:
            body = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # read_layout names an unreadable record when the table's is asked for
        pinned = body.get("pinned") if isinstance(body, dict) else None
        if isinstance(pinned, dict) and table.lower() in {str(t).lower() for t in pinned} and \
                str(body.get("table", "")).lower() != table.lower():
            out.append(str(body.get("table")))
    return out


def read_layout(root: Path, table: str) -> BlockLayout | None:
    """The record of ``table``, or None if there is none."""
    path = record_path(root, table)
    if not path.exists():
        return None
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
        session = body["session"]
        return BlockLayout(
            table=body["table"], location=body["location"], ansi=bool(session["ansi"]), time_zone=session["time_zone"],
            cuts=tuple(RecordedCut(c["sql"], bool(c["joined"]), tuple(c.get("sources", ())), tuple(c.get("conjuncts", ())),
                                   c.get("column", ""), c.get("source", ""), c.get("key", ""), bool(c.get("nested", False)),
                                   bool(c.get("unique_key", False))) for c in body["cuts"]),
            pinned={t: frozenset((p, int(s), int(m)) for p, s, m in ids) for t, ids in body["pinned"].items()},
            files={p: (int(f["size"]), int(f["mtime"]), tuple((int(c), bool(h)) for c, h in f["path"]))
                   for p, f in body["files"].items()},
            joined_bounds=tuple(JoinedBounds.from_json(b) for b in body.get("joined_bounds", ())))
    except (ValueError, KeyError, TypeError) as e:
        raise StatsError(f"the block layout record {path} cannot be read ({e}); remove it, or apply the layout again") from None
