"""Fail open for every client, against the real Thrift Server: a rewritten statement that fails on Spark gives
synchronous and asynchronous clients (pyhive with async_=True, beeline over JDBC) the original's answer; a
data error the original raises too is returned once, without a second run; failures read as Spark writes them
for a direct client; a call without an operation is answered as Spark answers it."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from TCLIService.ttypes import TOperationState

from backend.beeline import beeline_rows, run_beeline
from proxy.server import ProxyServer
from tests.conftest import Stack, hive_cursor
from tests.proxy_support import decisions, executions_since, last_execution_id, proxy_config, start_proxy

pytestmark = pytest.mark.spark

REPLACED_DB = "proxy_fail_open"
QUERY = "SELECT count(*), sum(v) FROM items WHERE k < 500"
RUNNING = (TOperationState.INITIALIZED_STATE, TOperationState.RUNNING_STATE, TOperationState.PENDING_STATE)


@pytest.fixture(scope="module")
def replaced(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyServer]:
    """A table with statistics, then replaced by a Hive-format table of the same name over the same location (a
    real way for a rewrite to fail: Spark resolves no _metadata column on a Hive-format table, while the
    catalog still reads the name at the location the statistics describe, whose files are unchanged). The
    proxy prunes ``items`` by ``k``; Spark refuses the rewritten statement; the original runs fine."""
    from stats.collect import collect
    from stats.store import StatsStore

    base = tmp_path_factory.mktemp("replaced")
    location = base / "items"
    spark = stack.spark
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {REPLACED_DB} LOCATION '{base}'")
    spark.range(0, 4000).selectExpr("id AS k", "id % 7 AS v").repartitionByRange(4, "k").write.parquet(str(location))
    spark.sql(f"CREATE TABLE {REPLACED_DB}.items USING parquet LOCATION '{location}'")
    store = StatsStore(base / "stats")
    collect(spark, store, [f"{REPLACED_DB}.items"], range_set_size=8)
    spark.sql(f"DROP TABLE {REPLACED_DB}.items")  # an external table: its files stay
    spark.sql(f"CREATE EXTERNAL TABLE {REPLACED_DB}.items (k BIGINT, v BIGINT) STORED AS PARQUET LOCATION '{location}'")
    server = start_proxy(proxy_config(stack.config, base), store)
    yield server
    server.shutdown(drain_seconds=2)
    spark.sql(f"DROP TABLE IF EXISTS {REPLACED_DB}.items")


@pytest.fixture(scope="module")
def tpch(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ProxyServer, str]]:
    database = stack.database("tpch", "tuned")
    server = start_proxy(proxy_config(stack.config, tmp_path_factory.mktemp("fail-open-tpch")),
                         stack.stats_store("tpch", "tuned"))
    yield server, database
    server.shutdown(drain_seconds=2)


def records(server: ProxyServer, user: str) -> list[dict[str, Any]]:
    return [r for r in decisions(server.config) if r["user"] == user]


def direct_rows(stack: Stack, database: str, sql: str) -> list[tuple]:
    with stack.cursor(database) as cursor:
        cursor.execute(sql)
        return cursor.fetchall()


def wait_until_done(cursor: Any) -> Any:
    deadline = time.monotonic() + 120
    while (state := cursor.poll()).operationState in RUNNING:
        assert time.monotonic() < deadline, "the statement did not end"
        time.sleep(0.05)
    return state


def test_the_rewrite_really_fails_on_spark(stack: Stack, replaced: ProxyServer) -> None:
    """The set-up: the rewritten statement (from the decision log) fails on Spark where the original answers."""
    from pyhive.exc import OperationalError

    with hive_cursor(replaced.port, REPLACED_DB, user="setup") as cursor:
        cursor.execute("EXPLAIN SKIPPING " + QUERY)
        cursor.fetchall()
    [record] = [r for r in records(replaced, "setup") if r["outcome"].startswith("explained")]
    assert "_metadata" in record["sent"]
    with pytest.raises(OperationalError, match="_metadata"):
        direct_rows(stack, REPLACED_DB, record["sent"])
    assert direct_rows(stack, REPLACED_DB, QUERY) == [(500, sum(k % 7 for k in range(500)))]


@pytest.mark.differential
def test_a_synchronous_client_gets_the_originals_answer(stack: Stack, replaced: ProxyServer) -> None:
    with hive_cursor(replaced.port, REPLACED_DB, user="sync") as cursor:
        cursor.execute(QUERY)
        assert cursor.fetchall() == direct_rows(stack, REPLACED_DB, QUERY)
    [record] = [r for r in records(replaced, "sync") if r["statement"] == QUERY]
    assert record["outcome"] == "fell back to the original: the rewritten statement failed on Spark"
    assert "_metadata" in record["rewrite_failed_on_spark"] and "\tat " not in record["rewrite_failed_on_spark"]


@pytest.mark.differential
def test_an_asynchronous_pyhive_client_gets_the_originals_answer(stack: Stack, replaced: ProxyServer) -> None:
    """The client keeps its handle; once it polls and the rewritten operation has failed, the handle stands for
    the original's operation: status, metadata, rows and closing all reach that one."""
    with hive_cursor(replaced.port, REPLACED_DB, user="async") as cursor:
        cursor.execute(QUERY, async_=True)
        handle = cursor._operationHandle  # noqa: SLF001
        state = wait_until_done(cursor)
        assert state.operationState == TOperationState.FINISHED_STATE, state.errorMessage
        assert cursor._operationHandle is handle  # noqa: SLF001 - the client's handle never changes
        assert cursor.fetchall() == direct_rows(stack, REPLACED_DB, QUERY)
        assert [d[0] for d in cursor.description] == ["count(1)", "sum(v)"]
        cursor.execute("SELECT 1")  # closes the previous operation, then runs another
        assert cursor.fetchall() == [(1,)]
    submitted, followed = [r for r in records(replaced, "async") if r["statement"] == QUERY]
    assert submitted["outcome"] == "rewritten" and submitted["operation"] == followed["operation"]
    assert followed["outcome"] == "fell back to the original: the rewritten statement failed on Spark"
    assert followed["client_call"].startswith("asynchronous")


@pytest.mark.differential
def test_beeline_gets_the_originals_answer(stack: Stack, replaced: ProxyServer) -> None:
    """JDBC submits asynchronously and polls: it gets the original's rows, not the rewritten one's error."""
    result = run_beeline(stack.java, "127.0.0.1", replaced.port, QUERY, REPLACED_DB)
    assert result.returncode == 0, result.stderr
    assert beeline_rows(result.stdout)[1:] == [[str(v) for v in row] for row in direct_rows(stack, REPLACED_DB, QUERY)]
    assert [r["outcome"] for r in decisions(replaced.config) if r["user"] == "dipper" and r["statement"] == QUERY][-1] \
        == "fell back to the original: the rewritten statement failed on Spark"


DATA_ERROR = "SELECT max(CAST(l_comment AS INT)) FROM lineitem WHERE l_shipdate < DATE '1992-03-01'"


def runs_of(stack: Stack, statement: str, run: Any) -> int:
    """How many SQL executions Spark records for ``statement`` (or its rewritten form) while ``run`` runs."""
    before = last_execution_id(stack.spark)
    run()
    return len([d for d in executions_since(stack.spark, before) if "CAST(l_comment AS INT)" in d])


@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
def test_a_data_error_is_returned_once(stack: Stack, tpch: tuple[ProxyServer, str], run_async: bool) -> None:
    """The rewritten statement casts comments to INT on fewer rows than the original: it fails with
    CAST_INVALID_INPUT (SQLSTATE 22018), which the original raises too. The error is returned as it is,
    with as many executions on Spark as a direct client causes (no second run)."""
    from pyhive.exc import OperationalError

    server, database = tpch
    user = f"data-error-{'async' if run_async else 'sync'}"
    errors: list[str] = []

    def through() -> None:
        with hive_cursor(server.port, database, user=user) as cursor:
            if run_async:
                cursor.execute(DATA_ERROR, async_=True)
                state = wait_until_done(cursor)
                assert state.operationState == TOperationState.ERROR_STATE
                errors.append(state.errorMessage)
            else:
                with pytest.raises(OperationalError) as e:
                    cursor.execute(DATA_ERROR)
                errors.append(e.value.args[0].status.errorMessage)

    def direct() -> None:
        with stack.cursor(database) as cursor, pytest.raises(OperationalError, match="CAST_INVALID_INPUT"):
            cursor.execute(DATA_ERROR)

    assert runs_of(stack, DATA_ERROR, through) == runs_of(stack, DATA_ERROR, direct) == 1
    assert "[CAST_INVALID_INPUT]" in errors[0]
    outcomes = [r["outcome"] for r in records(server, user) if r["statement"] == DATA_ERROR]
    expected = ("the rewritten statement raised a data error (SQLSTATE 22018), which the original raises on the same "
                "rows: returned without running the original")
    assert outcomes == (["rewritten", expected] if run_async else [expected])
    assert "sent" in [r for r in records(server, user) if r["statement"] == DATA_ERROR][0]


def _status_of(port: int, database: str, sql: str, run_async: bool) -> Any:
    """The TStatus of a failed synchronous statement, or the final TGetOperationStatusResp of an asynchronous one."""
    from pyhive.exc import OperationalError

    with hive_cursor(port, database, user="shapes") as cursor:
        if run_async:
            cursor.execute(sql, async_=True)
            return wait_until_done(cursor)
        with pytest.raises(OperationalError) as e:
            cursor.execute(sql)
        return e.value.args[0].status


@pytest.mark.differential
@pytest.mark.parametrize("sql", ["SELECT * FROM no_such_table", "SELEC 1",
                                 # every row raises the same error (a rewrite reads fewer rows, so not always the same row)
                                 "SELECT CAST(substr(l_comment, 1, 0) || 'x' AS INT) FROM lineitem "
                                 "WHERE l_shipdate < DATE '1992-02-01'"],
                         ids=["analysis", "parse", "data"])
def test_errors_read_as_spark_writes_them(stack: Stack, tpch: tuple[ProxyServer, str], sql: str) -> None:
    """A synchronous client gets Spark's message alone (the trace in infoMessages), as from Spark directly; an
    asynchronous one gets Spark's status with its trace, as directly too. (A data error of a rewritten
    statement is returned without a second run, so the statement text Spark quotes after "== SQL" is the one
    it ran: the rewritten one.)"""
    server, database = tpch

    def own(message: str) -> str:
        return message.split("\n\tat ")[0].split("\n== SQL")[0]

    direct, through = _status_of(stack.port, database, sql, False), _status_of(server.port, database, sql, False)
    assert (through.statusCode, through.sqlState, own(through.errorMessage)) == \
        (direct.statusCode, direct.sqlState, own(direct.errorMessage))
    assert "\tat " not in through.errorMessage
    if "lineitem" not in sql:  # nothing was rewritten: the whole message is Spark's to the letter
        assert through.errorMessage == direct.errorMessage
    # The trace is the thread's that ran the statement (the proxy's are always the asynchronous worker's): the
    # exception and its message match, the frame counts at the end of the entry need not.
    assert own(through.infoMessages[0]).rsplit(":", 2)[0] == own(direct.infoMessages[0]).rsplit(":", 2)[0]
    direct, through = _status_of(stack.port, database, sql, True), _status_of(server.port, database, sql, True)
    assert through.operationState == direct.operationState == TOperationState.ERROR_STATE
    assert (own(through.errorMessage), through.sqlState) == (own(direct.errorMessage), direct.sqlState)
    if "lineitem" not in sql:
        assert through.errorMessage.split("\n\tat ")[0] == direct.errorMessage.split("\n\tat ")[0]


def test_cancel_without_an_operation_is_answered_as_spark_answers(stack: Stack, tpch: tuple[ProxyServer, str],
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    """pyhive's cancel() before any execute sends a request without an operation handle: Spark answers with a
    Thrift exception (and then drops the connection); the proxy relays that answer instead of failing itself."""
    from pyhive import hive
    from thrift.Thrift import TApplicationException

    caplog.set_level(logging.WARNING, logger="dipper.proxy")
    server, database = tpch

    def cancel_answer(port: int) -> str:
        conn = hive.connect(host="127.0.0.1", port=port, auth="NONE", username="canceller", database=database)
        try:
            with pytest.raises(TApplicationException) as e:
                conn.cursor().cancel()
            return str(e.value)
        finally:
            with contextlib.suppress(Exception):
                conn.close()  # Spark has dropped the connection

    assert cancel_answer(server.port) == cancel_answer(stack.port) == \
        "Required field 'operationHandle' is unset! Struct:TCancelOperationReq(operationHandle:null)"
    assert not [r for r in caplog.records if "unexpected error" in r.getMessage()]
    with hive_cursor(server.port, database, user="after-cancel") as cursor:  # the proxy serves on
        cursor.execute("SELECT 1")
        assert cursor.fetchall() == [(1,)]


def test_the_original_failing_too_gives_its_own_error(stack: Stack, replaced: ProxyServer) -> None:
    """When the original fails as well, an asynchronous client gets the original's error, not the rewrite's."""
    query = "SELECT count(*), max(CAST(concat('x', v) AS INT)) FROM items WHERE k < 500"
    with hive_cursor(replaced.port, REPLACED_DB, user="both-fail") as cursor:
        cursor.execute(query, async_=True)
        state = wait_until_done(cursor)
    assert state.operationState == TOperationState.ERROR_STATE
    assert "[CAST_INVALID_INPUT]" in state.errorMessage and "_metadata" not in state.errorMessage
    submitted, followed = [r for r in records(replaced, "both-fail") if r["statement"] == query]
    assert submitted["outcome"] == "rewritten"
    assert followed["outcome"] == "fell back to the original: the rewritten statement failed on Spark"
