"""The proxy's pure parts, without a server: virtual statements, result encoding, the budget, the log. (Session
changes and their state: tests/test_proxy_session_state.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from TCLIService import ttypes as t

from proxy.session import Session
from proxy.virtual import VirtualError, explain_result, over_budget, set_skipping
from proxy.decision_log import DecisionLog
from proxy.results import ResultSet, null_bitmap
from proxy.statements import Explain, SetSkipping, ShowLog, virtual
from proxy.wire import ProtocolError, decode_call, encode_call, message_header, sasl_plain_credentials
from rewriter.decision import Decision, TableDecision


@pytest.mark.parametrize("sql, expected", [
    ("EXPLAIN SKIPPING SELECT 1", Explain("SELECT 1")),
    ("  /* c */ -- x\n explain   skipping\nSELECT * FROM t;", Explain("SELECT * FROM t;")),
    ("EXPLAIN SKIPPING", Explain("")),
    ("SHOW SKIPPING LOG", ShowLog(None)),
    ("show skipping log limit 5;", ShowLog(5)),
    ("SET skipping.enabled = false", SetSkipping("enabled", "false")),
    ("SET skipping.max_scan_bytes=1000 ;", SetSkipping("max_scan_bytes", "1000")),
    ("SET skipping.Enabled", SetSkipping("enabled", None)),
    ("SET spark.sql.shuffle.partitions=4", None),
    ("EXPLAIN SELECT 1", None),
    ("SELECT 'EXPLAIN SKIPPING'", None),
    ("SHOW SKIPPING LOG LIMIT x", None),
])
def test_virtual_statements(sql: str, expected: object) -> None:
    assert virtual(sql) == expected


def _session(**kw: object) -> Session:
    handle = t.TSessionHandle(sessionId=t.THandleIdentifier(guid=b"g" * 16, secret=b"s" * 16))
    fields = {"skipping_enabled": True, "max_scan_bytes": 0, **kw}
    return Session(handle, "u", t.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V6, **fields)  # type: ignore[arg-type]


def test_set_skipping_validates() -> None:
    s = _session()
    assert set_skipping(s, SetSkipping("enabled", "FALSE")).rows == [("skipping.enabled", "false")]
    assert not s.skipping_enabled
    assert set_skipping(s, SetSkipping("max_scan_bytes", "1_000")).rows == [("skipping.max_scan_bytes", "1000")]


@pytest.mark.parametrize("bad, message", [
    (SetSkipping("enabled", "1"), "true or false"), (SetSkipping("max_scan_bytes", "10GB"), "whole number"),
    (SetSkipping("max_scan_bytes", "-5"), "negative"), (SetSkipping("colour", "red"), "unknown setting"),
], ids=["enabled-1", "max_scan_bytes-10GB", "max_scan_bytes-negative", "colour"])
def test_set_skipping_refuses_bad_values(bad: SetSkipping, message: str) -> None:
    with pytest.raises(VirtualError, match=message):
        set_skipping(_session(), bad)


def _decision(*tables: TableDecision, **kw: object) -> Decision:
    d = Decision(database="db", **kw)  # type: ignore[arg-type]
    d.tables.extend(tables)
    return d


def test_budget() -> None:
    big = TableDecision("db.t", "t", files_total=10, bytes_total=1000, files_kept=2, bytes_kept=200, has_stats=True)
    assert over_budget(_session(max_scan_bytes=0), _decision(big)) is None
    assert over_budget(_session(max_scan_bytes=200), _decision(big)) is None
    assert "would scan 200 bytes" in over_budget(_session(max_scan_bytes=199), _decision(big))
    off = _session(max_scan_bytes=500, skipping_enabled=False)
    assert "would scan 1,000 bytes" in over_budget(off, _decision(big))
    unknown = TableDecision("db.u", "u", refused="no statistics")
    assert "no statistics for db.u" in over_budget(_session(max_scan_bytes=10**9), _decision(big, unknown))
    assert over_budget(_session(max_scan_bytes=1), _decision(passthrough="not a query (Create)")) is None
    assert "cannot tell" in over_budget(_session(max_scan_bytes=1), _decision(passthrough="2 statements"))
    assert "cannot tell" in over_budget(_session(max_scan_bytes=1), _decision(error="KeyError: x"))


def test_explain_rows() -> None:
    kept = TableDecision("db.t", "t", files_total=10, bytes_total=1000, files_kept=2, bytes_kept=200, has_stats=True)
    whole = TableDecision("db.u", "u", refused="no statistics")
    rows = explain_result(_decision(kept, whole), "SELECT ...").rows
    assert rows[0][:6] == ("db.t", "t", 10, 2, 1000, 200)
    assert rows[1][2:] == (None, None, None, None, "read whole: no statistics")
    assert rows[2][:6] == ("(all)", None, 10, 2, 1000, 200) and rows[2][6].startswith("rewritten: SELECT ...")


def test_null_bitmap_and_row_sets() -> None:
    assert null_bitmap([True, False, False, False, False, False, False, False, True]) == b"\x01\x01"
    rs = ResultSet([("a", "string"), ("n", "bigint")], [("x", 1), (None, None), ("z", 3)])
    first = rs.fetch(2)
    assert first.columns[0].stringVal.values == ["x", ""] and first.columns[0].stringVal.nulls == b"\x02"
    assert first.columns[1].i64Val.values == [1, 0] and rs.offset == 2
    assert rs.fetch(10).columns[1].i64Val.values == [3]
    assert rs.fetch(10).columns[0].stringVal.values == []
    rs.protocol = t.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V5  # before V6: rows, not columns
    rows = rs.fetch(1, from_start=True)
    assert rows.rows[0].colVals[0].stringVal.value == "x" and rows.startRowOffset == 0


CALL = t.TExecuteStatementReq(sessionHandle=t.TSessionHandle(sessionId=t.THandleIdentifier(guid=b"\xff" * 16, secret=b"\0" * 16)),
                              statement="SELECT 'ü'", runAsync=True)
MESSAGE = encode_call("ExecuteStatement", CALL, 7)


def test_wire_round_trip_and_garbage() -> None:
    assert message_header(MESSAGE) == ("ExecuteStatement", 1, 7)
    assert decode_call(MESSAGE) == CALL
    assert sasl_plain_credentials(b"\0bob\0secret") == ("bob", "secret")
    with pytest.raises(ProtocolError):
        sasl_plain_credentials(b"bob")


@pytest.mark.parametrize("garbage", [b"", b"GET / HTTP/1.1", MESSAGE[:20]], ids=["empty", "http", "cut-short"])
def test_garbage_is_a_protocol_error(garbage: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_call(garbage)


def test_decision_log_rotates_and_filters_by_user(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    log = DecisionLog(path, max_bytes=2000, backups=2)
    for i in range(60):
        log.write({"user": "a" if i % 2 else "b", "statement": f"SELECT {i}"})
    log.close()
    assert path.is_file() and (tmp_path / "d.jsonl.1").is_file() and not (tmp_path / "d.jsonl.3").exists()
    assert [r["statement"] for r in log.recent("a", 2)] == ["SELECT 59", "SELECT 57"]
    again = DecisionLog(path, max_bytes=2000, backups=2)  # a restart keeps what the current file holds
    assert again.recent("a", 1) == [{"user": "a", "statement": "SELECT 59"}]
    again.close()
