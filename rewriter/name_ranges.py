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
  mtime they were written with, docs/layout.md).
- **A block file replaced in place.** Its mtime is when it was written again, later than every file ``apply``
  wrote; the filter skips only files whose mtime is at most the newest recorded mtime among the ranged files
  (the key list pins the same by the key's mtime).

Short runs stay in the key list: a range costs more text than one key, and every range is another test on
every row Spark reads (it evaluates the filter again on each row of the kept files).
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from stats.blocks import BlockLayout
from stats.model import TableStats

# The names ``layout apply`` gives block files (layout/apply.py, ``_block_files``).
BLOCK_NAME = re.compile(r"block-\d+-\d+\.parquet")
# Files: a range costs about 160 bytes of SQL with its node in the binary search (rewriter/emit.py), a key
# about 60; shorter runs stay keys.
MIN_RUN = 3
# Ranges in one filter: the longest runs become ranges, the others keys. Past about 32 ranges the test on every
# row cost a scan of TPC-H SF 1 lineitem 2.6x the CPU time of the key list (64 ranges; 32 cost 0.7x of it),
# likely the generated method growing past what the JIT compiles (docs/name-ranges.md); 16 leaves room for
# the rest of a query's filter in the same method. Ranges naming less than half of the skipped files are not
# used: 16 of 256 runs left 94% of the key list's text and cost the scan 15% more CPU time than keys alone.
MAX_RUNS = 16


@dataclasses.dataclass(frozen=True)
class NameRanges:
    folder: str  # the layout's folder as Spark spells file paths, ending in "/"
    runs: tuple[tuple[str, str], ...]  # (first, last) file names of each run, in name order
    newest: int  # the latest recorded mtime (microseconds) of the files the runs cover
    covered: np.ndarray  # bool per file of the statistics: named by a run


def name_ranges(stats: TableStats, skip: np.ndarray, layout: BlockLayout | None,
                max_runs: int = MAX_RUNS) -> NameRanges | None:
    """The ``max_runs`` longest runs of at least MIN_RUN skipped block files of ``stats`` that name ranges can
    skip, or None."""
    if layout is None or stats.unknown_files:
        return None
    described = layout.described(stats)
    if not (described & skip).any():
        return None
    folders = {str(p).rpartition("/")[0] for p in stats.paths[described]}
    if len(folders) != 1:
        return None
    folder = folders.pop() + "/"
    # Every file of the listing that a test on this folder and a file name could cover, grouped by name (a file
    # in a subfolder has a base name too): a group is rangeable when all its files are skipped block files.
    groups: dict[str, list[int]] = {}
    for k, path in enumerate(stats.paths):
        if str(path).startswith(folder):
            groups.setdefault(str(path).rpartition("/")[2], []).append(k)
    if any("%" in name for name in groups):
        return None  # Spark's file_name is the decoded name: the order of an escaped one is not its order here
    runs: list[list[str]] = []
    current: list[str] = []
    for name in sorted(groups):
        members = groups[name]
        if all(skip[k] and described[k] and str(stats.paths[k]) == folder + name for k in members) \
                and BLOCK_NAME.fullmatch(name):
            current.append(name)
            continue
        runs.append(current)
        current = []
    runs.append(current)
    runs = [r for r in runs if len(r) >= MIN_RUN]
    if len(runs) > max_runs:
        longest = sorted(range(len(runs)), key=lambda i: -sum(len(groups[name]) for name in runs[i]))[:max_runs]
        runs = [runs[i] for i in sorted(longest)]
    covered = np.zeros(stats.n_files, dtype=bool)
    for run in runs:
        for name in run:
            covered[groups[name]] = True
    if not runs or 2 * covered.sum() < skip.sum():
        return None  # the keys would stay most of the text, and the ranges add a test to every row read
    return NameRanges(folder, tuple((r[0], r[-1]) for r in runs), int(stats.mtimes[covered].max()), covered)
