"""Block layouts (``stats/blocks.py``) and what the rewriter concludes from them (``rewriter/blocks.py``),
without Spark: which files a cut rules out, and every condition under which nothing is concluded."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dipper.errors import StatsError
from rewriter.blocks import ruled_out
from rewriter.session import SessionSettings
from stats.blocks import BlockLayout, RecordedCut, read_layout, record_path, write_layout
from stats.model import TableStats

UTC = SessionSettings(time_zone="UTC")
JOINED = "`l_orderkey` IN (SELECT `o_orderkey` FROM `db`.`orders` WHERE `o_orderkey` IS NOT NULL AND (o_orderdate < x))"
ORDERS = frozenset({("file:/o/1.parquet", 10, 1), ("file:/o/2.parquet", 20, 2)})


def _stats(table: str, files: list[tuple[str, int, int]], location: str = "file:/t") -> TableStats:
    n = len(files)
    return TableStats(table, np.array([f[0] for f in files], dtype=object), np.array([f[1] for f in files]),
                      np.array([f[2] for f in files]), np.ones(n, dtype=np.int64), {}, location=location)


FILES = [("file:/t/block-00000-000.parquet", 100, 7), ("file:/t/block-00001-000.parquet", 200, 8),
         ("file:/t/block-00002-000.parquet", 300, 9)]
LAYOUT = BlockLayout(
    "db.lineitem", "file:/t", True, "UTC",
    (RecordedCut("l_commitdate < l_receiptdate", False), RecordedCut(JOINED, True, ("db.orders",))),
    {"db.orders": ORDERS},
    {FILES[0][0]: (100, 7, ((0, True), (1, True))), FILES[1][0]: (200, 8, ((0, True), (1, False))),
     FILES[2][0]: (300, 9, ((0, False),))})


def _orders(files: frozenset = ORDERS, unknown: int = 0):  # noqa: ANN202
    def fresh(table: str) -> TableStats | None:
        if table != "db.orders":
            return None
        s = _stats("db.orders", sorted(files), "file:/o")
        return TableStats(s.table, s.paths, s.sizes, s.mtimes, s.rows, {}, unknown_files=unknown, location="file:/o")
    return fresh


def test_a_cut_that_fails_on_a_block_rules_its_file_out() -> None:
    stats = _stats("db.lineitem", FILES)
    out, used = ruled_out(LAYOUT, stats, {"l_commitdate < l_receiptdate"}, set(), UTC, _orders())
    assert out.tolist() == [False, False, True] and used == ["l_commitdate < l_receiptdate"]
    out, used = ruled_out(LAYOUT, stats, set(), {JOINED}, UTC, _orders())
    assert out.tolist() == [False, True, False] and used == [JOINED]
    out, _ = ruled_out(LAYOUT, stats, {"l_commitdate < l_receiptdate"}, {JOINED}, UTC, _orders())
    assert out.tolist() == [False, True, True]


@pytest.mark.parametrize("why, stats, local, joined, session, fresh", [
    ("another spelling of the cut", _stats("db.lineitem", FILES), {"l_receiptdate > l_commitdate"}, set(), UTC, _orders()),
    ("another session time zone", _stats("db.lineitem", FILES), {"l_commitdate < l_receiptdate"}, set(),
     SessionSettings(time_zone="Europe/Paris"), _orders()),
    ("an unknown time zone", _stats("db.lineitem", FILES), {"l_commitdate < l_receiptdate"}, set(), SessionSettings(), _orders()),
    ("ANSI off", _stats("db.lineitem", FILES), {"l_commitdate < l_receiptdate"}, set(),
     SessionSettings(ansi=False, time_zone="UTC"), _orders()),
    ("the table moved", _stats("db.lineitem", FILES, "file:/elsewhere"), {"l_commitdate < l_receiptdate"}, set(), UTC, _orders()),
    ("a dimension file added", _stats("db.lineitem", FILES), set(), {JOINED}, UTC,
     _orders(ORDERS | {("file:/o/3.parquet", 5, 3)})),
    ("a dimension file replaced", _stats("db.lineitem", FILES), set(), {JOINED}, UTC,
     _orders(frozenset({("file:/o/1.parquet", 10, 1), ("file:/o/2.parquet", 20, 99)}))),
    ("a dimension file the statistics do not describe", _stats("db.lineitem", FILES), set(), {JOINED}, UTC,
     _orders(unknown=1)),
    ("a dimension without statistics", _stats("db.lineitem", FILES), set(), {JOINED}, UTC, lambda table: None),
])
def test_nothing_is_concluded(why: str, stats: TableStats, local: set, joined: set, session: SessionSettings,
                              fresh) -> None:  # noqa: ANN001
    out, used = ruled_out(LAYOUT, stats, local, joined, session, fresh)
    assert not out.any() and used == [], why


def test_a_file_whose_identity_changed_is_judged_by_its_statistics_alone() -> None:
    changed = [FILES[0], FILES[1], (FILES[2][0], 300, 10)]  # rewritten since: same name, other mtime
    out, _ = ruled_out(LAYOUT, _stats("db.lineitem", changed), {"l_commitdate < l_receiptdate"}, set(), UTC, _orders())
    assert not out.any()
    extra = FILES + [("file:/t/part-new.parquet", 50, 11)]  # appended later: not described
    out, _ = ruled_out(LAYOUT, _stats("db.lineitem", extra), {"l_commitdate < l_receiptdate"}, set(), UTC, _orders())
    assert out.tolist() == [False, False, True, False]


def test_records_round_trip_and_a_broken_one_is_a_clear_error(tmp_path: Path) -> None:
    path = write_layout(tmp_path, LAYOUT, {"blocks": [{"id": 0, "description": "..."}]})
    assert path == record_path(tmp_path, "db.lineitem")
    assert read_layout(tmp_path, "DB.LINEITEM") == LAYOUT
    assert read_layout(tmp_path, "db.other") is None
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(StatsError, match="remove it, or apply the layout again"):
        read_layout(tmp_path, "db.lineitem")
