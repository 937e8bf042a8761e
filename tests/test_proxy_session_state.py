"""The proxy's session tracking and error handling, without a server: which statements change what
(``proxy/statements.py``), what the session state makes of them (``proxy/session_state.py``), Spark's errors
(``proxy/spark_errors.py``) and handle substitution (``proxy/operations.py``). What Spark itself does with
each form was checked on Spark 4 (tests/test_proxy_session.py runs the important ones through the proxy)."""

from __future__ import annotations

import pytest
from TCLIService import ttypes as t

from proxy.operations import substitute_handle
from proxy.results import ResultSet, row_tuples
from proxy.session_state import SessionState, setting_key, temp_views_from_rows
from proxy.spark_errors import rerun_reason, split_trace, sync_status
from proxy.statements import (DropView, NamesUnknown, Relearn, RenameView, SetConf, TempView, UseDatabase,
                              tables_redefined,
                              session_change)
from proxy.wire import decode_call, encode_call
from rewriter.session import SessionSettings


@pytest.mark.parametrize("sql, expected", [
    # USE and catalogs
    ("USE tpch", UseDatabase("tpch")),
    ("use `My``Db`;", UseDatabase("my`db")),
    ("USE DATABASE sales", UseDatabase("sales")),
    ("USE spark_catalog.sales", UseDatabase("sales")),
    ("USE other_catalog.sales", UseDatabase(None)),
    ("USE CATALOG other", UseDatabase(None)),
    ("USE CATALOG spark_catalog", UseDatabase(None, keep=True)),
    ("SET CATALOG other", UseDatabase(None)),
    ("USE /* c */ tpch -- the one", UseDatabase("tpch")),
    ("USE IDENTIFIER('tpch')", UseDatabase(None)),  # not read: no pruning until the next USE, never a wrong name
    # temporary views, by what they do
    ("CREATE TEMPORARY VIEW orders AS SELECT 1", TempView("orders")),
    ("create or replace temp view `Line` as select 1", TempView("line")),
    ("CREATE /* x */ OR REPLACE TEMPORARY VIEW v (a, b) AS SELECT 1, 2", TempView("v")),
    ("CREATE TEMPORARY TABLE t USING parquet OPTIONS (path '/x')", TempView("t")),
    ("CREATE GLOBAL TEMPORARY VIEW g AS SELECT 1", None),  # reached as global_temp.g only
    ("CREATE TEMPORARY FUNCTION f AS 'x'", None),  # cannot shadow a built-in function
    ("CREATE TEMP VIEW IDENTIFIER('v' || '1') AS SELECT 1", NamesUnknown("a temporary view whose name the proxy cannot read")),
    ("CACHE LAZY TABLE c AS SELECT 1", TempView("c")),
    ("CACHE TABLE c SELECT 1", TempView("c")),
    ("CACHE TABLE c OPTIONS ('storageLevel' 'DISK_ONLY') AS SELECT 1", TempView("c")),
    ("CACHE TABLE lineitem", None),  # caches the table: no new name
    ("CACHE TABLE db.c;", None),
    ("CACHE TABLE c OPTIONS ('storageLevel' 'DISK_ONLY')", None),
    ("UNCACHE TABLE c", None),  # the view stays (checked on Spark)
    ("DROP VIEW IF EXISTS v", DropView("v")),
    ("DROP TABLE `V`", DropView("v")),
    ("DROP VIEW db.v", None),
    ("DROP TEMPORARY FUNCTION f", None),
    ("ALTER VIEW v RENAME TO w", RenameView("v", "w")),
    ("ALTER TABLE v RENAME TO w", RenameView("v", "w")),
    ("ALTER VIEW v AS SELECT 2", None),
    ("ALTER TABLE db.t RENAME TO db.u", None),
    ("EXECUTE IMMEDIATE 'CREATE TEMP VIEW ' || 'x' || ' AS SELECT 1'",
     NamesUnknown("EXECUTE IMMEDIATE runs SQL text the proxy cannot read")),
    ("BEGIN CREATE TEMP VIEW v AS SELECT 1; END", NamesUnknown("a 'BEGIN' statement may create or drop temporary views")),
    # statements that mention temporary things but change nothing
    ("SHOW TABLES LIKE 'temp'", None),
    ("SHOW VIEWS", None),
    ("DESCRIBE temp", None),
    ("SELECT temp FROM t", None),
    ("EXPLAIN CREATE TEMP VIEW v AS SELECT 1", None),
    ("WITH temp AS (SELECT 1) SELECT * FROM temp", None),
    ("(SELECT 1)", None),
    ("CREATE TABLE t (a INT)", None),
    ("DECLARE VARIABLE temp INT DEFAULT 1", None),
    ("SELECT 1", None),
    ("-- only a comment", None),
    # settings, read the way Spark's parser reads them
    ("SET spark.sql.ansi.enabled=false", SetConf("spark.sql.ansi.enabled", "false")),
    ("set spark.sql.ansi.enabled = false ;;", SetConf("spark.sql.ansi.enabled", "false")),
    ("-- lead\nSET\tspark.sql.session.timeZone\t=\tAmerica/New_York", SetConf("spark.sql.session.timeZone", "America/New_York")),
    ("SET `spark.sql.ansi.enabled` = `false`", SetConf("spark.sql.ansi.enabled", "false")),
    ("SET `spark.sql.ansi.enabled`=false;", SetConf("spark.sql.ansi.enabled", "false")),
    ("SET spark.sql.session.timeZone=`Asia/Tokyo`", SetConf("spark.sql.session.timeZone", "Asia/Tokyo")),
    ("SET my.key = 'q' -- kept", SetConf("my.key", "'q' -- kept")),  # Spark keeps quotes and comments in values
    ("SET x.y = a=b", SetConf("x.y", "a=b")),
    ("SET `weird key`=1", SetConf("weird key", "1")),
    ("SET var = 1", SetConf("var", "1")),
    ("SET spark.sql.ansi.enabled", None),
    ("SET `spark.sql.ansi.enabled`", None),
    ("SET", None),
    ("SET -v", None),
    ("SET VAR x = 1", None),
    ("SET VARIABLE x = 1", None),
    ("SET TIME ZONE LOCAL", Relearn("SET TIME ZONE (LOCAL and intervals name a zone the text does not)")),
    ("SET my.k=${hivevar:v}", Relearn("variable substitution in SET")),
    ("SET k=a;b", Relearn("a SET the proxy does not read")),
    ("RESET", Relearn("RESET restores values the proxy was not told")),
    ("RESET spark.sql.ansi.enabled", Relearn("RESET restores values the proxy was not told")),
])
def test_session_changes(sql: str, expected: object) -> None:
    assert session_change(sql) == expected


def test_settings_follow_set_and_reset() -> None:
    state = SessionState()
    assert not state.settings_for().prunable  # not read yet: nothing is pruned
    state.learned_settings([("spark.sql.session.timeZone", "UTC"), ("spark.app.name", "x")])
    assert state.settings_for() == SessionSettings(ansi=True, time_zone="UTC")
    assert not state.apply(SetConf("spark.sql.ansi.enabled", "false"))
    assert not state.apply(SetConf("spark.sql.session.timeZone", "America/New_York"))
    assert state.settings_for() == SessionSettings(ansi=False, time_zone="America/New_York")
    assert state.apply(Relearn("RESET"))  # the caller reads them again
    state.learned_settings([("spark.sql.session.timeZone", "UTC")])
    assert state.settings_for() == SessionSettings(ansi=True, time_zone="UTC")
    state.apply(SetConf("spark.sql.caseSensitive", "true"))
    assert state.settings_for().unmodelled == ("spark.sql.caseSensitive=true",)


def test_values_spark_did_not_confirm_decline_pruning_when_they_matter() -> None:
    state = SessionState()
    configuration = {"use:database": "tpch", "set:hiveconf:spark.sql.shuffle.partitions": "7",
                     "spark.sql.ansi.enabled": "false",  # a plain key: Spark does not apply it
                     "set:hivevar:spark.sql.session.timeZone": "UTC", "set:hiveconf:hive.fetch.size": "9"}
    state.learned_settings([("spark.sql.shuffle.partitions", "7"), ("spark.sql.session.timeZone", "UTC")], configuration)
    assert state.doubtful == {"spark.sql.ansi.enabled": "false"}  # the others are confirmed or harmless
    assert [u.split(" (")[0] for u in state.settings_for().unmodelled] == ["spark.sql.ansi.enabled=false"]
    state.apply(SetConf("spark.sql.ansi.enabled", "false"))  # now Spark has it
    assert state.settings_for() == SessionSettings(ansi=False, time_zone="UTC")
    overlaid = state.settings_for({"set:hiveconf:spark.sql.ansi.enabled": "true", "spark.sql.shuffle.partitions": "3"})
    assert len(overlaid.unmodelled) == 1 and "confOverlay" in overlaid.unmodelled[0]
    assert state.settings_for({"spark.sql.ansi.enabled": "false"}) == SessionSettings(ansi=False, time_zone="UTC")


def test_unreadable_settings_decline_pruning() -> None:
    state = SessionState()
    state.settings_unreadable("SET: boom")
    assert "could not be read from Spark: SET: boom" in state.settings_for().unmodelled[0]


@pytest.mark.parametrize("entry, key", [("set:hiveconf:a.b", "a.b"), ("set:hivevar:v", "v"), ("set:a.b", "a.b"),
                                        ("a.b", "a.b"), ("use:database", None), ("set:system:x", None),
                                        ("set:env:HOME", None)])
def test_setting_key(entry: str, key: str | None) -> None:
    assert setting_key(entry) == key


def test_temp_views_follow_statements_and_spark() -> None:
    state = SessionState()
    state.apply(TempView("v"))
    state.apply(RenameView("v", "w"))
    state.apply(RenameView("lineitem", "items"))  # a catalog table: the set is exact, so no view
    assert state.temp_views == {"w"}
    state.apply(DropView("w"))
    assert state.temp_views == set() and not state.temp_views_stale
    state.apply(NamesUnknown("EXECUTE IMMEDIATE"))
    assert state.temp_views_stale
    state.apply(RenameView("x", "y"))  # x may have been a view
    assert "y" in state.temp_views
    state.learned_temp_views([("global_temp", "g", True), ("", "Lineitem", True)])
    assert (state.temp_views, state.temp_views_stale) == ({"lineitem"}, False)
    assert temp_views_from_rows([("", None, True), ("global_temp", "x", True)]) == set()
    assert state.list_temp_views == "SHOW VIEWS IN `global_temp`"
    state.apply(SetConf("spark.sql.globalTempDatabase", "gt"))
    assert state.list_temp_views == "SHOW VIEWS IN `gt`"


# An asynchronous operation's errorMessage from Spark 4.1's Thrift Server (frames shortened), and what Spark
# gives a synchronous client for the same statement.
ASYNC_PARSE_ERROR = (
    "org.apache.hive.service.cli.HiveSQLException: Error running query: [PARSE_SYNTAX_ERROR] "
    "org.apache.spark.sql.catalyst.parser.ParseException: \n[PARSE_SYNTAX_ERROR] Syntax error at or near 'SELEC'. "
    "SQLSTATE: 42601 (line 1, pos 0)\n\n== SQL ==\nSELEC 1\n^^^\n\n"
    "\tat org.apache.spark.sql.hive.thriftserver.HiveThriftServerErrors$.runningQueryError(HiveThriftServerErrors.scala:43)\n"
    "\tat java.base/java.util.concurrent.FutureTask.run(FutureTask.java:264)\n"
    "\tat jdk.proxy2/jdk.proxy2.$Proxy44.open(Unknown Source)\n"
    "\tat java.base/jdk.internal.reflect.NativeMethodAccessorImpl.invoke0(Native Method)\n"
    "Caused by: org.apache.spark.sql.catalyst.parser.ParseException: \n[PARSE_SYNTAX_ERROR] Syntax error at or near "
    "'SELEC'. SQLSTATE: 42601 (line 1, pos 0)\n\n== SQL ==\nSELEC 1\n^^^\n\n"
    "\tat org.apache.spark.sql.catalyst.parser.ParseException.withCommand(parsers.scala:267)\n"
    "\t... 22 more\n")
SYNC_PARSE_MESSAGE = ("Error running query: [PARSE_SYNTAX_ERROR] org.apache.spark.sql.catalyst.parser.ParseException: "
                      "\n[PARSE_SYNTAX_ERROR] Syntax error at or near 'SELEC'. SQLSTATE: 42601 (line 1, pos 0)\n\n"
                      "== SQL ==\nSELEC 1\n^^^\n")


def test_sync_status_is_sparks_synchronous_answer() -> None:
    state = t.TGetOperationStatusResp(status=t.TStatus(statusCode=t.TStatusCode.SUCCESS_STATUS),
                                      operationState=t.TOperationState.ERROR_STATE, sqlState="42601", errorCode=0,
                                      errorMessage=ASYNC_PARSE_ERROR)
    status = sync_status(state)
    assert (status.statusCode, status.errorMessage, status.sqlState) == (t.TStatusCode.ERROR_STATUS, SYNC_PARSE_MESSAGE, "42601")
    assert status.infoMessages == [
        f"*org.apache.hive.service.cli.HiveSQLException:{SYNC_PARSE_MESSAGE}:4:3",
        "org.apache.spark.sql.hive.thriftserver.HiveThriftServerErrors$:runningQueryError:HiveThriftServerErrors.scala:43",
        "java.util.concurrent.FutureTask:run:FutureTask.java:264",
        "jdk.proxy2.$Proxy44:open::-1",
        "jdk.internal.reflect.NativeMethodAccessorImpl:invoke0::-2",
        "*org.apache.spark.sql.catalyst.parser.ParseException:\n[PARSE_SYNTAX_ERROR] Syntax error at or near 'SELEC'. "
        "SQLSTATE: 42601 (line 1, pos 0)\n\n== SQL ==\nSELEC 1\n^^^\n:23:0",
        "org.apache.spark.sql.catalyst.parser.ParseException:withCommand:parsers.scala:267",
    ]
    assert split_trace("one line, no trace") == ("one line, no trace", [])
    cancelled = sync_status(t.TGetOperationStatusResp(status=t.TStatus(statusCode=0), operationState=t.TOperationState.CANCELED_STATE))
    assert cancelled.errorMessage == "the statement ended in state CANCELED_STATE"


@pytest.mark.parametrize("sql_state, message, rerun", [
    ("22003", "org.x.HiveSQLException: Error running query: [ARITHMETIC_OVERFLOW] overflow. SQLSTATE: 22003\n"
              "== SQL (line 1, position 8) ==\nSELECT ... WHERE NOT _metadata.file_path IN ('x')\n\tat a.B.c(B.java:1)\n", False),
    ("22012", "[DIVIDE_BY_ZERO] Division by zero.", False),
    ("22018", "[CAST_INVALID_INPUT] The value 'x' cannot be cast", False),
    ("42703", "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column ... `_metadata`.`file_path` cannot be resolved", True),
    ("22000", "[SOMETHING] about _metadata.file_size", True),
    ("42P01", "[TABLE_OR_VIEW_NOT_FOUND]", True),
    (None, "java.lang.OutOfMemoryError: Java heap space", True),
])
def test_rerun_only_when_the_rewrite_may_be_the_cause(sql_state: str | None, message: str, rerun: bool) -> None:
    assert (rerun_reason(sql_state, message) is not None) == rerun


def _handle(guid: bytes, secret: bytes) -> t.TOperationHandle:
    return t.TOperationHandle(operationId=t.THandleIdentifier(guid=guid, secret=secret),
                              operationType=t.TOperationType.EXECUTE_STATEMENT, hasResultSet=True)


def test_substitute_handle_in_raw_frames() -> None:
    old, new = _handle(b"a" * 16, b"b" * 16), _handle(b"c" * 16, b"d" * 16)
    fetch = encode_call("FetchResults", t.TFetchResultsReq(operationHandle=old, orientation=0, maxRows=100), 9)
    swapped = substitute_handle(fetch, old, new)
    assert len(swapped) == len(fetch) and swapped.replace(b"c" * 16 + b"\x0b\x00\x02\x00\x00\x00\x10" + b"d" * 16, b"") \
        == fetch.replace(b"a" * 16 + b"\x0b\x00\x02\x00\x00\x00\x10" + b"b" * 16, b"")
    assert decode_call(swapped) == t.TFetchResultsReq(operationHandle=new, orientation=0, maxRows=100)
    odd = _handle(b"x" * 20, b"y" * 4)  # another length: the frame is re-encoded
    assert decode_call(substitute_handle(swapped, new, odd)).operationHandle == odd


def test_row_tuples_reads_both_row_set_shapes() -> None:
    rs = ResultSet([("k", "string"), ("n", "bigint"), ("b", "boolean")], [("a", 1, True), (None, None, False)])
    assert row_tuples(rs.fetch(10)) == [("a", 1, True), (None, None, False)]
    rs.protocol = t.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V5
    assert row_tuples(rs.fetch(10, from_start=True)) == [("a", 1, True), (None, None, False)]
    assert row_tuples(None) == []


@pytest.mark.parametrize("sql, tables", [
    ("DROP TABLE IF EXISTS sales.events", [["sales", "events"]]),
    ("/* cleanup */ drop table t", [["t"]]),
    ("ALTER TABLE s.t RENAME TO u", [["s", "t"], ["s", "u"]]),  # RENAME TO keeps the database
    ("ALTER TABLE t RENAME TO other.u", [["t"], ["other", "u"]]),
    ("ALTER TABLE `a`.`b` SET LOCATION '/x'", [["a", "b"]]),
    ("ALTER TABLE t ADD PARTITION (p = 1) LOCATION '/elsewhere'", [["t"]]),
    ("CREATE OR REPLACE TABLE x USING parquet AS SELECT 1", [["x"]]),
    ("CREATE EXTERNAL TABLE IF NOT EXISTS e (a INT) LOCATION '/x'", [["e"]]),
    ("REPLACE TABLE spark_catalog.d.t (a INT) USING parquet", [["spark_catalog", "d", "t"]]),
    ("TRUNCATE TABLE t", [["t"]]),
    ("INSERT OVERWRITE TABLE t SELECT 1", []),  # new files: unknown, always read
    ("CREATE TEMPORARY VIEW v AS SELECT 1", []),
    ("CREATE VIEW v AS SELECT 1", []),
    ("DROP VIEW v", []),
    ("SELECT * FROM t", []),
])
def test_tables_a_statement_may_redefine(sql: str, tables: list[list[str]]) -> None:
    assert tables_redefined(sql) == tables


def test_use_catalog_spark_catalog_keeps_the_database() -> None:
    """Spark keeps the current namespace when USE CATALOG names the current catalog (review of issue 17)."""
    from proxy.session_state import SessionState

    state = SessionState()
    state.apply(UseDatabase("sales"))
    state.apply(session_change("USE CATALOG spark_catalog"))
    assert state.database == "sales"
    state.apply(session_change("USE CATALOG other"))
    state.apply(session_change("USE CATALOG spark_catalog"))
    assert state.database is None  # back from another catalog: Spark's namespace there is not known


def test_statements_that_may_use_or_set_anything_relearn() -> None:
    from proxy.session_state import SessionState

    assert SessionState().apply(session_change("EXECUTE IMMEDIATE 'USE other'")) is True
