"""Which skipped files the prune filter can name by a range of file names instead of one key each (issue 15,
part 6): runs of the block files ``layout apply`` wrote.

A key (path, size, mtime) costs about 60 bytes of SQL per skipped file (``rewriter/emit.py``); a table of
10^5 files turns into megabytes. ``layout apply`` numbers a qd-tree's blocks depth first (``layout/qdtree.py``),
so the blocks a statement rules out through a cut are a subtree and one run of ids, and it names files
``block-<id>-<n>.parquet``: the skipped files of a layout are a few runs in name order, and
``_metadata.file_name BETWEEN '<first>' AND '<last>'`` names a run in about 80 bytes.

**Why a range skips only what the statistics rule out.** At the rewrite, the range covers exactly the files of
the run: every file of the table's listing whose name falls in it (the table has no file the statistics do not
describe, or no range is used) is skipped, recorded in the layout with the identity the statistics hold, and
in the layout's folder; a run stops at any other file. What the range also covers is a file that appears
later, or one rewritten in place:

- **A file added with a name inside the range.** Only ``apply`` writes ``block-*`` names, and each time into a
  new folder (``<location>.layout-<time>``) that the table points to only once the files are in it; Spark's
  own writers name files ``part-*``, which sort outside every range. The filter also tests that the file is
  in that folder (``startswith``), so a later ``apply``'s blocks in its own folder are not covered either.
  This is why ranges are used over block files only: over a run of ``part-*`` files a concurrent ``INSERT``
  could commit a file with an old mtime inside the run (its committer renames task files, which keeps the
  mtime they were written with, docs/results/layout.md).
- **A block file replaced in place.** Its mtime is when it was written again, later than every file ``apply``
  wrote; the filter skips only files whose mtime lies between the oldest and the newest recorded mtime of the
  ranged files. A block file of another layout copied in with its mtime kept (``cp -p``, ``rsync -a``) has the
  mtime of another ``apply`` run, outside that window, and is read too.

What a range does not pin, where a key does, is the file's size: a file copied over a ranged one with an mtime
kept from within the window of this ``apply``'s own writes (seconds to minutes) would be skipped if the copy
happens after the listing the rewrite used and before Spark lists the table. Only a hand-made copy into the
layout's folder can do that; the size list that would close it costs about 9 bytes per ranged file, which is
what the ranges are for saving.

Short runs stay in the key list: a range costs more text than one key, and every range is another test on
every row Spark reads (it evaluates the filter again on each row of the kept files).
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from rewriter.per_object import PerObject
from stats.blocks import BlockLayout
from stats.model import TableStats

# The names ``layout apply`` gives block files (layout/apply.py, ``_block_files``).
BLOCK_NAME = re.compile(r"block-\d+-\d+\.parquet")
# Files: a range costs about 160 bytes of SQL with its node in the binary search (rewriter/emit.py), a key
# about 60; shorter runs stay keys.
MIN_RUN = 3
# Ranges in one filter: the longest runs become ranges, the others keys. Past about 32 ranges the test on every
# row cost a scan of TPC-H SF 1 lineitem 2.6x the CPU time of the key list (64 ranges; 32 cost 0.7x of it),
# likely the generated method growing past what the JIT compiles (docs/results/name-ranges.md); 16 leaves room for
# the rest of a query's filter in the same method. Ranges naming less than half of the skipped files are not
# used: 16 of 256 runs left 94% of the key list's text and cost the scan 15% more CPU time than keys alone.
MAX_RUNS = 16


@dataclasses.dataclass(frozen=True)
class NameRanges:
    folder: str  # the layout's folder as Spark spells file paths, ending in "/"
    runs: tuple[tuple[str, str], ...]  # (first, last) file names of each run, in name order
    oldest: int  # the earliest and latest recorded mtime (microseconds) of the files the runs cover
    newest: int
    covered: np.ndarray  # bool per file of the statistics: named by a run


@dataclasses.dataclass(frozen=True)
class _Order:
    """What the ranges of one listing do not owe to the statement: the names of the files a test on the layout's
    folder and a file name could cover, in name order (a file in a subfolder has a base name too), and for each
    whether it can be in a run at all (the only file of that name, directly in the folder, a block file's name,
    described by the record)."""

    folder: str
    file: np.ndarray  # int64 per name: the statistics' index of its file (any one of them if several)
    names: np.ndarray  # object
    eligible: np.ndarray  # bool per name


_ORDERS = PerObject[tuple[BlockLayout, _Order | None]](64)


def _order(stats: TableStats, layout: BlockLayout) -> _Order | None:
    described = layout.described(stats)
    folders = {str(p).rpartition("/")[0] for p in stats.paths[described]}
    if len(folders) != 1:
        return None
    folder = folders.pop() + "/"
    groups: dict[str, list[int]] = {}
    for k, path in enumerate(stats.paths):
        if str(path).startswith(folder):
            groups.setdefault(str(path).rpartition("/")[2], []).append(k)
    if any("%" in name for name in groups):
        return None  # Spark's file_name is the decoded name: the order of an escaped one is not its order here
    names = sorted(groups)
    file = np.array([groups[n][0] for n in names], dtype=np.int64)
    eligible = np.array([len(groups[n]) == 1 and described[groups[n][0]] and str(stats.paths[groups[n][0]]) == folder + n
                         and BLOCK_NAME.fullmatch(n) is not None for n in names], dtype=bool)
    return _Order(folder, file, np.array(names, dtype=object), eligible)


def name_ranges(stats: TableStats, skip: np.ndarray, layout: BlockLayout | None,
                max_runs: int = MAX_RUNS) -> NameRanges | None:
    """The ``max_runs`` longest runs of at least MIN_RUN skipped block files of ``stats`` that name ranges can
    skip, or None. What depends on the listing alone is kept per statistics object (:class:`_Order`)."""
    if layout is None or stats.unknown_files:
        return None
    # The entry holds the layout it was built from, so no other layout object can take its id meanwhile.
    _, order = _ORDERS.get(stats, lambda: (layout, _order(stats, layout)), tag=id(layout))
    if order is None:
        return None
    good = order.eligible & skip[order.file]
    edges = np.diff(np.concatenate(([0], good.astype(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)  # [start, end) in name order
    long = ends - starts >= MIN_RUN
    starts, ends = starts[long], ends[long]
    if len(starts) > max_runs:
        longest = np.sort(np.argsort(-(ends - starts), kind="stable")[:max_runs])
        starts, ends = starts[longest], ends[longest]
    covered = np.zeros(stats.n_files, dtype=bool)
    for a, b in zip(starts, ends):
        covered[order.file[a:b]] = True
    if not len(starts) or 2 * covered.sum() < skip.sum():
        return None  # the keys would stay most of the text, and the ranges add a test to every row read
    runs = tuple((str(order.names[a]), str(order.names[b - 1])) for a, b in zip(starts, ends))
    return NameRanges(order.folder, runs, int(stats.mtimes[covered].min()), int(stats.mtimes[covered].max()), covered)
