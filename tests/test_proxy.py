"""The proxy in front of the real Spark Thrift Server, used by real clients: pyhive (SASL and NOSASL),
SQLAlchemy, beeline over JDBC, a raw socket."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from backend.beeline import beeline_rows, run_beeline
from backend.thrift_server import open_sessions
from proxy.server import ProxyServer
from tests.conftest import Stack, hive_cursor
from tests.proxy_support import (assert_abandoned_query_cancelled, decisions, executions_since, files_read_since, last_execution_id, proxy_config, read_until_closed,
                                 sasl_plain_handshake, start_proxy)

pytestmark = pytest.mark.spark

PRUNING = ("SELECT l_returnflag, count(*), sum(l_extendedprice) FROM lineitem "
           "WHERE l_shipdate BETWEEN DATE '1995-03-01' AND DATE '1995-03-31' GROUP BY l_returnflag ORDER BY 1")


@pytest.fixture(scope="module")
def proxied(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ProxyServer, str]]:
    database = stack.database("tpch", "tuned")
    config = proxy_config(stack.config, tmp_path_factory.mktemp("proxy"))
    server = start_proxy(config, stack.stats_store("tpch", "tuned"))
    yield server, database
    server.shutdown(drain_seconds=2)


def rows_and_description(port: int, database: str, sql: str, **kwargs: Any) -> tuple[list[tuple], list[tuple]]:
    with hive_cursor(port, database, **kwargs) as cursor:
        cursor.execute(sql)
        return cursor.fetchall(), cursor.description


QUERIES = [
    PRUNING,
    "SELECT * FROM nation ORDER BY n_nationkey",
    "SELECT o_orderkey, o_orderdate, o_totalprice, o_comment FROM orders WHERE o_orderkey < 40 ORDER BY 1",
    "SELECT CAST(NULL AS INT) AS n, 'it''s' AS s, DATE '2024-02-29' AS d, TIMESTAMP '2024-01-01 10:00:00' AS ts, "
    "1.5BD AS dec, true AS b, array(1, 2) AS arr",
    "SHOW TABLES",
    "DESCRIBE lineitem",
]


@pytest.mark.differential
@pytest.mark.parametrize("sql", QUERIES)
def test_pyhive_through_proxy_matches_direct(stack: Stack, proxied: tuple[ProxyServer, str], sql: str) -> None:
    server, database = proxied
    direct = rows_and_description(stack.port, database, sql)
    through = rows_and_description(server.port, database, sql)
    assert through == direct


@pytest.mark.differential
def test_nosasl_client_reaches_a_sasl_backend(stack: Stack, proxied: tuple[ProxyServer, str]) -> None:
    server, database = proxied
    assert rows_and_description(server.port, database, PRUNING, auth="NOSASL") == \
        rows_and_description(stack.port, database, PRUNING)


@pytest.mark.differential
def test_pruning_reads_fewer_files_and_says_so(stack: Stack, proxied: tuple[ProxyServer, str]) -> None:
    server, database = proxied
    before = last_execution_id(stack.spark)
    direct, _ = rows_and_description(stack.port, database, PRUNING)
    read_direct = files_read_since(stack.spark, before)
    before = last_execution_id(stack.spark)
    through, _ = rows_and_description(server.port, database, PRUNING)
    read_through = files_read_since(stack.spark, before)
    assert through == direct and direct
    assert read_through < read_direct
    record = [r for r in decisions(server.config) if r["statement"] == PRUNING][-1]
    assert record["outcome"] == "rewritten" and "_METADATA.FILE_SIZE & 2147483647" in record["sent"].upper()
    [table] = record["decision"]["tables"]
    assert table["files_kept"] == read_through < table["files_total"] == read_direct


def test_sync_errors_keep_spark_message(proxied: tuple[ProxyServer, str]) -> None:
    from pyhive.exc import OperationalError

    server, database = proxied
    with hive_cursor(server.port, database) as cursor, pytest.raises(OperationalError, match="no_such_table"):
        cursor.execute("SELECT * FROM no_such_table")
    with hive_cursor(server.port, database) as cursor:
        cursor.execute("SELECT 1")  # the session is still fine
        assert cursor.fetchall() == [(1,)]


def test_explain_skipping_is_a_dry_run(stack: Stack, proxied: tuple[ProxyServer, str]) -> None:
    server, database = proxied
    with hive_cursor(server.port, database) as cursor:
        before = last_execution_id(stack.spark)
        cursor.execute("EXPLAIN SKIPPING " + PRUNING)
        rows, description = cursor.fetchall(), cursor.description
        # Nothing ran but the catalog lookup that checks the statistics still describe the tables' locations, and
        # Spark's analysis of the statement in the client's session (which reads no file).
        ran = executions_since(stack.spark, before)
        assert ran and all(d.startswith("SHOW TABLE EXTENDED IN ") or d.endswith(") AS __dipper_analysis LIMIT 0")
                           for d in ran), ran
        assert any(d.endswith("__dipper_analysis LIMIT 0") for d in ran)
        assert files_read_since(stack.spark, before) == 0
    assert [d[0] for d in description] == ["table", "alias", "files_before", "files_after", "bytes_before",
                                          "bytes_after", "detail"]
    lineitem, total = rows
    assert lineitem[0] == f"{database}.lineitem" and lineitem[3] < lineitem[2] and lineitem[5] < lineitem[4]
    assert "l_shipdate" in lineitem[6]
    assert total[0] == "(all)" and total[6].startswith("rewritten: ")


def test_set_skipping_and_budget(proxied: tuple[ProxyServer, str]) -> None:
    from pyhive.exc import OperationalError

    server, database = proxied
    with hive_cursor(server.port, database, user="budget") as cursor:
        cursor.execute("SET skipping.enabled = false")
        assert cursor.fetchall() == [("skipping.enabled", "false")]
        cursor.execute(PRUNING)
        unpruned = cursor.fetchall()
        cursor.execute("SET skipping.enabled=true")
        cursor.execute(PRUNING)
        assert cursor.fetchall() == unpruned
        cursor.execute("SET skipping.max_scan_bytes = 1000")
        with pytest.raises(OperationalError, match="would scan .* bytes .* more than skipping.max_scan_bytes"):
            cursor.execute(PRUNING)
        cursor.execute("SET skipping.max_scan_bytes = 0")
        cursor.execute(PRUNING)
        assert cursor.fetchall() == unpruned
        with pytest.raises(OperationalError, match="must be true or false"):
            cursor.execute("SET skipping.enabled = maybe")
        with pytest.raises(OperationalError, match="unknown setting skipping.colour"):
            cursor.execute("SET skipping.colour = blue")
        cursor.execute("SET skipping.enabled")
        assert cursor.fetchall() == [("skipping.enabled", "true")]
        cursor.execute("SHOW SKIPPING LOG LIMIT 10")
        log = cursor.fetchall()
    outcomes = [r[3] for r in log]
    assert outcomes[0] == "rewritten"
    assert outcomes[1].startswith("refused: this query would scan")
    assert "passed through: skipping disabled in this session" in outcomes
    assert {r[2] for r in log} == {PRUNING, f"USE `{database}`"}  # only this user's statements, newest first


def test_show_skipping_log_is_per_user(proxied: tuple[ProxyServer, str]) -> None:
    server, database = proxied
    with hive_cursor(server.port, database, user="nobody-else") as cursor:
        cursor.execute("SHOW SKIPPING LOG")
        assert [r[2] for r in cursor.fetchall()] == [f"USE `{database}`"]  # none of the other users' statements


@pytest.mark.differential
def test_sqlalchemy_inspector(stack: Stack, proxied: tuple[ProxyServer, str]) -> None:
    """The inspector answers the same through the proxy as directly. (pyhive's dialect takes the first
    column of SHOW TABLES as the table name; Spark puts the database there, so get_table_names lists the
    database once per table on either path. That is pyhive's, not the proxy's, to fix.)"""
    import sqlalchemy

    server, database = proxied

    def inspect(port: int) -> tuple[Any, ...]:
        engine = sqlalchemy.create_engine(f"hive://sqla@127.0.0.1:{port}/{database}")
        try:
            inspector = sqlalchemy.inspect(engine)
            with engine.connect() as conn:
                count = conn.execute(sqlalchemy.text("SELECT count(*) FROM nation")).scalar()
            return (inspector.get_schema_names(), inspector.get_table_names(schema=database),
                    [(c["name"], str(c["type"])) for c in inspector.get_columns("orders", schema=database)], count)
        finally:
            engine.dispose()

    through = inspect(server.port)
    assert through == inspect(stack.port)
    schemas, tables, columns, count = through
    assert database in schemas and len(tables) == 8 and count == 25
    assert ("o_orderkey", "BIGINT") in columns and ("o_orderdate", "DATE") in columns


@pytest.mark.differential
def test_beeline_over_jdbc(stack: Stack, proxied: tuple[ProxyServer, str]) -> None:
    server, database = proxied
    result = run_beeline(stack.java, "127.0.0.1", server.port, f"{PRUNING}; EXPLAIN SKIPPING {PRUNING}", database)
    assert result.returncode == 0, result.stderr
    rows = beeline_rows(result.stdout)
    direct, _ = rows_and_description(stack.port, database, PRUNING)
    assert len([r for r in rows if r[0] in {d[0] for d in direct}]) == len(direct)
    assert any(r[0] == f"{database}.lineitem" for r in rows)


def test_async_execution_and_cancel(stack: Stack, proxied: tuple[ProxyServer, str]) -> None:
    from TCLIService.ttypes import TOperationState

    server, database = proxied
    with hive_cursor(server.port, database) as cursor:
        cursor.execute(PRUNING, async_=True)
        while cursor.poll().operationState in (TOperationState.INITIALIZED_STATE, TOperationState.RUNNING_STATE,
                                                TOperationState.PENDING_STATE):
            time.sleep(0.05)
        assert cursor.poll().operationState == TOperationState.FINISHED_STATE
        assert cursor.fetchall() == rows_and_description(stack.port, database, PRUNING)[0]
        slow = ("SELECT count(*) FROM lineitem a CROSS JOIN lineitem b "
                "WHERE a.l_comment < b.l_comment AND a.l_extendedprice * b.l_quantity > 0")
        cursor.execute(slow, async_=True)
        time.sleep(1.0)
        cursor.cancel()
        deadline = time.monotonic() + 60
        while cursor.poll().operationState not in (TOperationState.CANCELED_STATE, TOperationState.CLOSED_STATE):
            assert time.monotonic() < deadline, "the cancelled statement did not stop"
            time.sleep(0.1)


def test_many_clients_no_errors_no_leaked_sessions(stack: Stack, proxied: tuple[ProxyServer, str]) -> None:
    server, database = proxied
    baseline = open_sessions(stack.thrift_server)
    pruned = "SELECT count(*) FROM orders WHERE o_orderdate < DATE '1993-01-01'"
    expected = rows_and_description(stack.port, database, pruned)[0]
    errors: list[BaseException] = []

    def client(i: int) -> None:
        # Every fifth statement is rewritten and scans; the rest are cheap for Spark, so the run stays short
        # while 32 sessions still interleave their calls through the proxy.
        try:
            with hive_cursor(server.port, database, user=f"user{i}") as cursor:
                for j in range(20):
                    if j % 5 == 0:
                        cursor.execute(pruned)
                        assert cursor.fetchall() == expected
                    else:
                        cursor.execute(f"SELECT {i} * 100 + {j}")
                        assert cursor.fetchall() == [(i * 100 + j,)]
        except BaseException as e:  # noqa: BLE001 - collected and reported below
            errors.append(e)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(32)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=600)
    assert not errors, errors[:3]
    # A client's socket closes after its CloseSession returns; the proxy notices the EOF on its own thread, so
    # both counts settle shortly after the last client returns.
    deadline = time.monotonic() + 10
    while (open_sessions(stack.thrift_server) > baseline or server.connections) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert open_sessions(stack.thrift_server) == baseline
    assert server.connections == 0


def test_client_disconnect_mid_query_closes_its_backend_session(stack: Stack, proxied: tuple[ProxyServer, str]) -> None:
    from pyhive import hive

    server, database = proxied
    baseline = open_sessions(stack.thrift_server)
    conn = hive.connect(host="127.0.0.1", port=server.port, auth="NONE", username="quitter", database=database)
    assert_abandoned_query_cancelled(  # noqa: SLF001 - the client's socket vanishes mid-query
        stack, server, "quitter", baseline, conn.cursor(), lambda: conn._transport._trans.handle.shutdown(socket.SHUT_RDWR))


@pytest.mark.parametrize("garbage", [b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"\x01\x00\x00\x00\x05PLAIN\x02\xff\xff\xff\xff",
                                     b"\x80\x01\x00\x01" + b"\xff" * 64])
def test_garbage_on_the_socket_closes_only_that_connection(proxied: tuple[ProxyServer, str], garbage: bytes) -> None:
    server, database = proxied
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(garbage)
        s.shutdown(socket.SHUT_WR)
        assert read_until_closed(s) is not None
    assert rows_and_description(server.port, database, "SELECT 1")[0] == [(1,)]


def test_oversized_frame_closes_the_connection(proxied: tuple[ProxyServer, str]) -> None:
    server, database = proxied
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        sasl_plain_handshake(s)
        s.sendall(struct.pack(">i", 1 << 30))  # a frame far over max_frame_bytes
        assert read_until_closed(s) == b""
    assert rows_and_description(server.port, database, "SELECT 1")[0] == [(1,)]
