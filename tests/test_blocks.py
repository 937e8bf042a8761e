"""Block layouts (``stats/blocks.py``) and what the rewriter concludes from them (``rewriter/blocks.py``),
without Spark: which files a cut rules out, and every condition under which nothing is concluded."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import sqlglot

from dipper.errors import StatsError
from rewriter.blocks import Restriction, ruled_out
from rewriter.falsify import Translator
from rewriter.joined_filter import Joined, translator_for, unqualified
from rewriter.predicate import And
from rewriter.session import SessionSettings
from stats.blocks import BlockLayout, RecordedCut, pinning, read_layout, record_path, write_layout
from stats.model import ColumnStats, Kind, TableStats

UTC = SessionSettings(time_zone="UTC")
JOINED = "`l_orderkey` IN (SELECT `o_orderkey` FROM `db`.`orders` WHERE `o_orderkey` IS NOT NULL AND (o_orderdate < x))"
# The joined filter of a statement that spells the cut's conjunct as the cut does.
J = Joined("l_orderkey", "db.orders", "o_orderkey", And(()), ("o_orderdate < x",))
assert J.sql() == JOINED
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


def _r(local: set[str], joined: set[str]) -> Restriction:
    """A statement restricting lineitem by ``local`` conjuncts and ``joined`` filters (as text), none translated."""
    return Restriction(frozenset(local), And(()), tuple(J for text in joined if text == JOINED))


def _orders(files: frozenset = ORDERS, unknown: int = 0):  # noqa: ANN202
    def fresh(table: str) -> TableStats | None:
        if table != "db.orders":
            return None
        s = _stats("db.orders", sorted(files), "file:/o")
        return TableStats(s.table, s.paths, s.sizes, s.mtimes, s.rows, {}, unknown_files=unknown, location="file:/o")
    return fresh


def test_a_cut_that_fails_on_a_block_rules_its_file_out() -> None:
    stats = _stats("db.lineitem", FILES)
    out, used = ruled_out(LAYOUT, stats, _r({"l_commitdate < l_receiptdate"}, set()), UTC, _orders())
    assert out.tolist() == [False, False, True] and used == ["l_commitdate < l_receiptdate"]
    out, used = ruled_out(LAYOUT, stats, _r(set(), {JOINED}), UTC, _orders())
    assert out.tolist() == [False, True, False] and used == [JOINED]
    out, _ = ruled_out(LAYOUT, stats, _r({"l_commitdate < l_receiptdate"}, {JOINED}), UTC, _orders())
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
    out, used = ruled_out(LAYOUT, stats, _r(local, joined), session, fresh)
    assert not out.any() and used == [], why


def test_a_file_whose_identity_changed_is_judged_by_its_statistics_alone() -> None:
    changed = [FILES[0], FILES[1], (FILES[2][0], 300, 10)]  # rewritten since: same name, other mtime
    out, _ = ruled_out(LAYOUT, _stats("db.lineitem", changed), _r({"l_commitdate < l_receiptdate"}, set()), UTC, _orders())
    assert not out.any()
    extra = FILES + [("file:/t/part-new.parquet", 50, 11)]  # appended later: not described
    out, _ = ruled_out(LAYOUT, _stats("db.lineitem", extra), _r({"l_commitdate < l_receiptdate"}, set()), UTC, _orders())
    assert out.tolist() == [False, False, True, False]


def test_records_round_trip_and_a_broken_one_is_a_clear_error(tmp_path: Path) -> None:
    path = write_layout(tmp_path, LAYOUT, {"blocks": [{"id": 0, "description": "..."}]})
    assert path == record_path(tmp_path, "db.lineitem")
    assert read_layout(tmp_path, "DB.LINEITEM") == LAYOUT
    assert read_layout(tmp_path, "db.other") is None
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(StatsError, match="remove it, or apply the layout again"):
        read_layout(tmp_path, "db.lineitem")


def test_the_tables_whose_records_pin_a_table_are_named(tmp_path: Path) -> None:
    """``layout apply`` of a dimension names the tables laid out with joined cuts on its old files (their
    cuts no longer apply); a table's own record and an unrelated one are not named."""
    write_layout(tmp_path, LAYOUT)  # db.lineitem pins db.orders
    write_layout(tmp_path, dataclasses.replace(LAYOUT, table="db.part", pinned={}))
    write_layout(tmp_path, dataclasses.replace(LAYOUT, table="db.orders", pinned={"db.orders": frozenset()}))
    (tmp_path / "layouts" / "db.broken.json").write_text("{not json", encoding="utf-8")
    assert pinning(tmp_path, "DB.Orders") == ["db.lineitem"]
    assert pinning(tmp_path, "db.part") == [] and pinning(tmp_path / "nowhere", "db.orders") == []


# -- a statement with other literals than the cuts' (rewriter/implication.py) --------------------------------

ORDERDATE = "o_orderdate < DATE '1995-01-01'"


def _typed(stats: TableStats, kinds: dict[str, Kind]) -> TableStats:
    """``stats`` with columns of ``kinds`` (bounds unknown: only the kinds matter to the decisions here)."""
    n = stats.n_files
    columns = {name: ColumnStats(kind, np.zeros(n, dtype=object if kind.name == "string" else np.int64),
                                 np.zeros(n, dtype=object if kind.name == "string" else np.int64),
                                 np.zeros(n, dtype=bool), np.full(n, -1, dtype=np.int64)) for name, kind in kinds.items()}
    return dataclasses.replace(stats, columns=columns)


LINEITEM_KINDS = {"l_quantity": Kind("decimal", 2, 15), "l_orderkey": Kind("int"), "l_discount": Kind("float"),
                  "l_shipmode": Kind("string"), "l_ts": Kind("timestamp")}
ORDERS_KINDS = {"o_orderkey": Kind("int"), "o_orderdate": Kind("date"), "o_orderpriority": Kind("string")}


def _layout(cuts: tuple[RecordedCut, ...], ansi: bool = True) -> BlockLayout:
    """Three blocks: cut 0 holds; cut 0 fails and cut 1 holds; both fail."""
    return BlockLayout("db.lineitem", "file:/t", ansi, "UTC", cuts, {"db.orders": ORDERS},
                       {FILES[0][0]: (100, 7, ((0, True),)), FILES[1][0]: (200, 8, ((0, False), (1, True))),
                        FILES[2][0]: (300, 9, ((0, False), (1, False)))})


def _local(*conjuncts: str, session: SessionSettings = UTC) -> Restriction:
    stats = _typed(_stats("db.lineitem", FILES), LINEITEM_KINDS)
    nodes = [sqlglot.parse_one(c, read="spark") for c in conjuncts]
    t = translator_for(stats, "", session)
    return Restriction(frozenset(unqualified(n) for n in nodes), And(tuple(t.translate(n) for n in nodes)))


def _joined(*conjuncts: str, session: SessionSettings = UTC) -> Restriction:
    stats = _typed(_stats("db.orders", sorted(ORDERS), "file:/o"), ORDERS_KINDS)
    nodes = [sqlglot.parse_one(c, read="spark") for c in conjuncts]
    t = translator_for(stats, "", session)
    j = Joined("l_orderkey", "db.orders", "o_orderkey", And(tuple(t.translate(n) for n in nodes)),
               tuple(unqualified(n) for n in nodes))
    return Restriction(frozenset(), And(()), (j,))


def _typed_orders(table: str) -> TableStats | None:
    s = _orders()(table)
    return None if s is None else _typed(s, ORDERS_KINDS)


def _joined_cut(conjuncts: tuple[str, ...] = (ORDERDATE,), unique: bool = True, nested: bool = False) -> RecordedCut:
    j = Joined("l_orderkey", "db.orders", "o_orderkey", And(()), conjuncts)
    return RecordedCut(j.sql(), True, ("db.orders",), conjuncts, "l_orderkey", "db.orders", "o_orderkey", nested, unique)


QUANTITY = RecordedCut("l_quantity < 24", False, (), ("l_quantity < 24",))


@pytest.mark.parametrize("conjuncts, expected", [
    (["l_quantity < 10"], [False, True, True]),  # the cut holds wherever the statement keeps a row
    (["l_quantity <= 23.99"], [False, True, True]),
    (["l_quantity BETWEEN 2 AND 5"], [False, True, True]),
    (["l_quantity IN (1, 7, 23)"], [False, True, True]),
    (["l_quantity >= 24"], [True, False, False]),  # the cut holds nowhere the statement keeps a row
    (["l_quantity > 30", "l_shipmode = 'AIR'"], [True, False, False]),
    (["l_quantity IS NULL"], [True, False, False]),  # NULL fails the cut: only blocks where it fails hold them
    (["l_quantity < 10", "l_quantity > 20"], [True, True, True]),  # nothing passes
    (["l_quantity BETWEEN 10 AND 30"], [False, False, False]),
    (["l_quantity < 24.5"], [False, False, False]),
    (["l_quantity <> 30"], [False, False, False]),
    (["l_quantity < 10 OR l_quantity > 30"], [False, False, False]),  # a disjunction bounds nothing
    (["l_shipmode = 'AIR'"], [False, False, False]),  # another column
    (["l_quantity + 1 < 10"], [False, False, False]),  # a function of the column
])
def test_a_local_cut_decided_for_other_literals(conjuncts: list[str], expected: list[bool]) -> None:
    stats = _typed(_stats("db.lineitem", FILES), LINEITEM_KINDS)
    out, used = ruled_out(_layout((QUANTITY, _joined_cut())), stats, _local(*conjuncts), UTC, _typed_orders)
    assert out.tolist() == expected, conjuncts
    assert bool(used) == any(expected)


@pytest.mark.parametrize("cut, conjuncts", [
    ("l_discount < 0.05", ["l_discount < 0.01"]),  # floats: NaN compares above every number
    ("l_quantity < CAST('abc' AS DECIMAL(15,2))", ["l_quantity < 10"]),  # a literal Spark reads as NULL (ANSI off)
    ("l_quantity < NULL", ["l_quantity < 10"]),
    ("l_quantity IN (1, NULL)", ["l_quantity = 1"]),
    ("l_quantity + 0 < 24", ["l_quantity < 10"]),  # NULL on a non-NULL value past the type's range
    ("coalesce(l_quantity, 0) < 24", ["l_quantity < 10"]),
    ("l_shipmode LIKE 'A%'", ["l_shipmode = 'AIR'"]),  # translated as a range: a superset
])
def test_a_cut_that_may_be_null_or_is_only_bounded_is_never_implied(cut: str, conjuncts: list[str]) -> None:
    stats = _typed(_stats("db.lineitem", FILES), LINEITEM_KINDS)
    session = SessionSettings(ansi=False, time_zone="UTC")
    layout = _layout((RecordedCut(cut, False, (), (cut,)), _joined_cut()), ansi=False)
    out, _ = ruled_out(layout, stats, _local(*conjuncts, session=session), session, _typed_orders)
    assert not out[1:].any(), cut


@pytest.mark.parametrize("cut, conjuncts, expected", [
    ((ORDERDATE,), ["o_orderdate < DATE '1994-06-01'"], [False, False, True]),  # keys admitted are the cut's
    ((ORDERDATE,), ["o_orderdate >= '1995-01-01'"], [False, True, False]),  # no key the cut admitted
    ((ORDERDATE,), ["o_orderdate >= DATE '1993-01-01'", "o_orderdate < DATE '1994-01-01'"], [False, False, True]),
    ((ORDERDATE, "o_orderpriority = '1-URGENT'"), ["o_orderdate < DATE '1994-06-01'", "o_orderpriority = '1-URGENT'"],
     [False, False, True]),  # one conjunct spelled as the cut's, one implied
    ((ORDERDATE, "o_orderpriority = '1-URGENT'"), ["o_orderdate < DATE '1994-06-01'"], [False, False, False]),
    ((ORDERDATE, "o_orderpriority = '1-URGENT'"), ["o_orderpriority = '2-HIGH'"], [False, True, False]),
    ((ORDERDATE,), ["o_orderdate BETWEEN DATE '1994-06-01' AND DATE '1995-06-01'"], [False, False, False]),
])
def test_a_joined_cut_decided_for_other_literals(cut: tuple[str, ...], conjuncts: list[str], expected: list[bool]) -> None:
    stats = _typed(_stats("db.lineitem", FILES), LINEITEM_KINDS)
    out, _ = ruled_out(_layout((QUANTITY, _joined_cut(cut))), stats, _joined(*conjuncts), UTC, _typed_orders)
    assert out.tolist() == expected


def test_a_joined_cut_is_refuted_only_over_unique_keys_and_implied_only_without_nesting() -> None:
    stats = _typed(_stats("db.lineitem", FILES), LINEITEM_KINDS)
    later, earlier = _joined("o_orderdate >= DATE '1996-01-01'"), _joined("o_orderdate < DATE '1994-06-01'")
    out, _ = ruled_out(_layout((QUANTITY, _joined_cut(unique=False))), stats, later, UTC, _typed_orders)
    assert not out.any()  # two orders rows could share a key: one passing the cut, one the statement
    out, _ = ruled_out(_layout((QUANTITY, _joined_cut(unique=False))), stats, earlier, UTC, _typed_orders)
    assert out.tolist() == [False, False, True]
    out, _ = ruled_out(_layout((QUANTITY, _joined_cut(nested=True))), stats, earlier, UTC, _typed_orders)
    assert not out.any()  # the cut admitted fewer keys than its conjuncts do
    out, _ = ruled_out(_layout((QUANTITY, _joined_cut(nested=True))), stats, later, UTC, _typed_orders)
    assert out.tolist() == [False, True, False]
    changed = lambda table: _typed(_orders(ORDERS | {("file:/o/3.parquet", 5, 3)})(table), ORDERS_KINDS)  # noqa: E731
    out, _ = ruled_out(_layout((QUANTITY, _joined_cut())), stats, later, UTC, changed)
    assert not out.any()  # the dimension changed since the rows were routed


def test_a_record_without_the_cuts_parts_concludes_only_from_their_spelling() -> None:
    stats = _typed(_stats("db.lineitem", FILES), LINEITEM_KINDS)
    old = (RecordedCut("l_quantity < 24", False), RecordedCut(_joined_cut().sql, True, ("db.orders",)))
    out, _ = ruled_out(_layout(old), stats, _local("l_quantity < 10"), UTC, _typed_orders)
    assert not out.any()
    out, _ = ruled_out(_layout(old), stats, _local("l_quantity < 24"), UTC, _typed_orders)
    assert out.tolist() == [False, True, True]


@pytest.mark.parametrize("session", [SessionSettings(), SessionSettings(time_zone="America/New_York"),
                                     SessionSettings(ansi=False)], ids=["unknown-zone", "new-york", "ansi-off"])
def test_implication_holds_across_sessions(session: SessionSettings) -> None:
    """The cuts were routed in UTC. A statement in a session whose zone is unknown, or another zone, is decided
    by values: a local and a joined cut are implied as in the routing session."""
    stats = _typed(_stats("db.lineitem", FILES), LINEITEM_KINDS)
    layout = _layout((QUANTITY, _joined_cut()))
    out, _ = ruled_out(layout, stats, _local("l_quantity < 10", session=session), session, _typed_orders)
    assert out.tolist() == [False, True, True], session
    out, _ = ruled_out(layout, stats, _joined("o_orderdate < DATE '1994-06-01'", session=session), session,
                       _typed_orders)
    assert out.tolist() == [False, False, True], session


def test_a_timestamp_cut_is_implied_by_its_spelling_only_in_the_routing_session() -> None:
    """The cuts were routed in UTC: a timestamp cut spelled exactly as the statement's conjunct is not implied in
    another zone, or an unknown one, where the statement's literal means a later instant (New York midnight is
    05:00 UTC)."""
    stats = _typed(_stats("db.lineitem", FILES), LINEITEM_KINDS)
    cut = "l_ts < TIMESTAMP '2000-01-01 00:00:00'"
    layout = _layout((RecordedCut(cut, False, (), (cut,)), _joined_cut()))
    new_york = SessionSettings(time_zone="America/New_York")
    out, _ = ruled_out(layout, stats, _local(cut, session=new_york), new_york, _typed_orders)
    assert not out.any()  # rows at 00:00-05:00 UTC pass the statement and failed the cut
    out, _ = ruled_out(layout, stats, _local(cut, session=SessionSettings()), SessionSettings(), _typed_orders)
    assert not out.any()  # an unknown zone: the literal may be any zone's midnight
    out, _ = ruled_out(layout, stats, _local(cut), UTC, _typed_orders)
    assert out.tolist() == [False, True, True]  # the routing session: the same instant
    earlier = "l_ts < TIMESTAMP '1999-12-31 00:00:00'"
    out, _ = ruled_out(layout, stats, _local(earlier, session=new_york), new_york, _typed_orders)
    assert out.tolist() == [False, True, True]  # a day earlier in any zone implies the cut


def test_bounds_past_bigint_and_year_9999_are_bounds_not_errors() -> None:
    """A literal between BIGINT's last value and 2^63 bounds the box past int64; a date past 9999-12-31 (which
    Spark stores) leaves the box non-empty: what a column holds is its storage type's range."""
    from rewriter.implication import region

    kinds = {"b": Kind("int"), "d": Kind("date")}
    t = Translator(lambda c: c.name.lower(), kinds, "UTC")
    r = region(t.translate(sqlglot.parse_one("b = 9223372036854775807.5", read="spark")), kinds)
    assert not r.empty and r.box.columns["b"].hi[0] == 2**63
    r = region(t.translate(sqlglot.parse_one("d > DATE '9999-12-31'", read="spark")), kinds)
    assert not r.empty
