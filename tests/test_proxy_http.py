"""HiveServer2's HTTP transport through the proxy (issue 18), against the real Spark Thrift Server: pyhive's HTTP
mode, beeline's ``transportMode=http`` URL and SQLAlchemy's ``hive+http`` get what Spark gives, with the same
rewriting (files skipped), virtual statements and decision log as the binary transport; the cookie names the
client, Basic credentials reach the backend; a client that disconnects mid-query has its backend operation
cancelled; a client of the wrong transport on either port is told at once."""

from __future__ import annotations

import base64
import http.client
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from TCLIService import TCLIService
from TCLIService import ttypes as t
from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.transport.TTransport import TMemoryBuffer

from backend.beeline import beeline_rows, run_beeline
from backend.thrift_server import open_sessions
from proxy.server import ProxyServer
from tests.conftest import Stack, hive_cursor
from tests.proxy_support import (assert_abandoned_query_cancelled, decisions, nosasl_client, files_read_since, free_port, last_execution_id, proxy_config,
                                 start_proxy)
from tests.test_proxy import PRUNING, QUERIES

pytestmark = pytest.mark.spark

HTTP_URL = "transportMode=http;httpPath=cliservice"


@pytest.fixture(scope="module")
def proxied(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ProxyServer, str]]:
    database = stack.database("tpch", "tuned")
    config = proxy_config(stack.config, tmp_path_factory.mktemp("proxy_http"), http_port=free_port())
    server = start_proxy(config, stack.stats_store("tpch", "tuned"))
    yield server, database
    server.shutdown(drain_seconds=2)


def http_connection(server: ProxyServer, database: str, user: str = "httpuser") -> Any:
    from pyhive import hive

    assert server.http is not None
    return hive.connect(host="127.0.0.1", port=server.http.port, scheme="http", username=user, database=database)


def http_rows(server: ProxyServer, database: str, sql: str, user: str = "httpuser") -> tuple[list[tuple], list[tuple]]:
    conn = http_connection(server, database, user)
    try:
        cursor = conn.cursor()
        cursor.execute(sql)
        return cursor.fetchall(), cursor.description
    finally:
        conn.close()


@pytest.mark.differential
@pytest.mark.parametrize("sql", QUERIES)
def test_pyhive_over_http_matches_spark(stack: Stack, proxied: tuple[ProxyServer, str], sql: str) -> None:
    server, database = proxied
    with hive_cursor(stack.port, database) as cursor:
        cursor.execute(sql)
        direct = cursor.fetchall(), cursor.description
    assert http_rows(server, database, sql) == direct


def test_http_statements_are_rewritten_and_logged(stack: Stack, proxied: tuple[ProxyServer, str]) -> None:
    server, database = proxied
    before = last_execution_id(stack.spark)
    rows, _ = http_rows(server, database, PRUNING, user="rewritten")
    read = files_read_since(stack.spark, before)
    with hive_cursor(stack.port, database) as cursor:
        cursor.execute(PRUNING)
        assert rows == cursor.fetchall()
    [record] = [r for r in decisions(server.config) if r["user"] == "rewritten" and r["statement"] == PRUNING]
    assert record["outcome"] == "rewritten"
    lineitem = [td for td in record["decision"]["tables"] if td["table"].endswith(".lineitem")][0]
    assert lineitem["files_skipped"] > 0 and read < lineitem["files_total"]
    conn = http_connection(server, database, "virtual")
    try:
        cursor = conn.cursor()
        cursor.execute(f"EXPLAIN SKIPPING {PRUNING}")
        assert cursor.fetchall()[0][0] == f"{database}.lineitem"
        cursor.execute("SET skipping.enabled = false")
        cursor.execute(PRUNING)
        assert cursor.fetchall() == rows
    finally:
        conn.close()
    outcomes = [r["outcome"] for r in decisions(server.config) if r["user"] == "virtual" and r["statement"] == PRUNING]
    assert outcomes == ["explained (dry run, nothing executed)", "passed through: skipping disabled in this session"]


@pytest.mark.differential
def test_beeline_over_http_matches_spark(stack: Stack, proxied: tuple[ProxyServer, str]) -> None:
    server, database = proxied
    assert server.http is not None
    outputs = []
    for port, options in ((server.http.port, HTTP_URL), (stack.port, "")):
        result = run_beeline(stack.java, "127.0.0.1", port, PRUNING, database, options=options)
        assert result.returncode == 0, result.stderr[-2000:]
        outputs.append(beeline_rows(result.stdout))
    assert outputs[0] == outputs[1] and len(outputs[0]) > 2
    [record] = [r for r in decisions(server.config) if r["user"] == "dipper" and r["statement"] == PRUNING]
    assert record["outcome"] == "rewritten"  # the JDBC driver's cookie led its calls to the one client
    assert server.http.open_clients == 0  # and beeline's CloseSession closed it


@pytest.mark.differential
def test_sqlalchemy_over_http_matches_spark(stack: Stack, proxied: tuple[ProxyServer, str]) -> None:
    import sqlalchemy

    server, database = proxied
    assert server.http is not None
    fetched = []
    for url in (f"hive+http://sqla@127.0.0.1:{server.http.port}/{database}?database={database}",
                f"hive://sqla@127.0.0.1:{stack.port}/{database}"):
        engine = sqlalchemy.create_engine(url)
        try:
            with engine.connect() as conn:
                fetched.append((conn.execute(sqlalchemy.text(PRUNING)).fetchall(),
                                sqlalchemy.inspect(conn).get_table_names()))  # as pyhive's dialect reads Spark's
        finally:
            engine.dispose()
    assert fetched[0] == fetched[1] and fetched[0][0]


def test_large_fetch_over_http(stack: Stack, proxied: tuple[ProxyServer, str]) -> None:
    """Many result batches, relayed without decoding: every row arrives, in order."""
    server, database = proxied
    sql = "SELECT id, concat('row ', id) AS s FROM range(200000) ORDER BY id"
    rows, _ = http_rows(server, database, sql)
    assert len(rows) == 200000 and rows[0] == (0, "row 0") and rows[-1] == (199999, "row 199999")


def _call(name: str, request: Any) -> bytes:
    buffer = TMemoryBuffer()
    client = TCLIService.Client(TBinaryProtocol(buffer))
    getattr(client, f"send_{name}")(request)
    return buffer.getvalue()


def _reply(name: str, body: bytes) -> Any:
    client = TCLIService.Client(TBinaryProtocol(TMemoryBuffer(body)))
    return getattr(client, f"recv_{name}")()


def _post(port: int, body: bytes, headers: dict[str, str]) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", "/cliservice", body, {"Content-Type": "application/x-thrift", **headers})
    response = conn.getresponse()
    response.body = response.read()  # type: ignore[attr-defined]
    conn.close()
    return response


def test_the_cookie_names_the_client(stack: Stack, proxied: tuple[ProxyServer, str]) -> None:
    """As the Hive JDBC driver does: credentials on the first request, then only the cookie the proxy set."""
    server, database = proxied
    assert server.http is not None
    port = server.http.port
    basic = {"Authorization": "Basic " + base64.b64encode(b"cookie:secret").decode()}
    opened = _post(port, _call("OpenSession", t.TOpenSessionReq(client_protocol=t.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V8,
                                                                configuration={"use:database": database})), basic)
    assert opened.status == 200
    cookie = opened.getheader("Set-Cookie").split(";")[0]
    assert cookie.startswith("hive.server2.auth=")
    session = _reply("OpenSession", opened.body).sessionHandle  # type: ignore[attr-defined]
    statement = _call("ExecuteStatement", t.TExecuteStatementReq(sessionHandle=session, statement="SELECT 41 + 1"))
    executed = _post(port, statement, {"Cookie": cookie})  # no credentials: the cookie is the client
    assert executed.status == 200
    handle = _reply("ExecuteStatement", executed.body).operationHandle  # type: ignore[attr-defined]
    fetched = _post(port, _call("FetchResults", t.TFetchResultsReq(operationHandle=handle, orientation=0, maxRows=10)),
                    {"Cookie": cookie})
    assert _reply("FetchResults", fetched.body).results.columns[0].i32Val.values == [42]  # type: ignore[attr-defined]
    assert _post(port, statement, {"Cookie": "hive.server2.auth=forged"}).status == 401  # neither cookie nor credentials
    assert _post(port, statement, {}).status == 401
    # Without the cookie (a client that keeps none), the session the call names finds its client, with that
    # client's credentials only; nothing else is opened on the backend for it.
    clients = server.http.open_clients
    routed = _post(port, _call("ExecuteStatement", t.TExecuteStatementReq(
        sessionHandle=session, statement=PRUNING)), basic)
    assert routed.status == 200 and _reply("ExecuteStatement", routed.body).status.statusCode == 0  # type: ignore[attr-defined]
    stranger = {"Authorization": "Basic " + base64.b64encode(b"other:secret").decode()}
    refused = _reply("ExecuteStatement", _post(port, statement, stranger).body)  # type: ignore[attr-defined]
    assert refused.status.statusCode == t.TStatusCode.ERROR_STATUS and "no such session" in refused.status.errorMessage
    assert server.http.open_clients == clients
    [record] = [r for r in decisions(server.config) if r["user"] == "cookie" and r["statement"] == PRUNING]
    assert record["outcome"] == "rewritten"
    before = server.http.open_clients
    closed = _post(port, _call("CloseSession", t.TCloseSessionReq(sessionHandle=session)), {"Cookie": cookie})
    assert closed.status == 200
    assert server.http.open_clients == before - 1  # the client's last session closed: the client with it
    assert _post(port, statement, {"Cookie": cookie}).status == 401


def test_bad_requests_are_refused_and_leave_no_client(stack: Stack, proxied: tuple[ProxyServer, str]) -> None:
    server, _ = proxied
    assert server.http is not None
    port = server.http.port
    clients = server.http.open_clients
    basic = {"Authorization": "Basic " + base64.b64encode(b"u:p").decode()}
    opening = _call("OpenSession", t.TOpenSessionReq(client_protocol=t.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V8))
    assert _post(port, opening, {"Authorization": "Basic !!!not-base64"}).status == 401
    response = _post(port, b"not thrift", basic)
    assert response.status == 400 and b"Thrift" in response.body  # type: ignore[attr-defined]
    assert _post(port, opening, {**basic, "Transfer-Encoding": "chunked"}).status == 411
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", "/elsewhere", b"", {"Content-Length": "0"})
    response = conn.getresponse()
    assert response.status == 404 and b"httpPath=cliservice" in response.read()
    conn.close()
    failed = _post(port, _call("OpenSession", t.TOpenSessionReq(  # Spark refuses it: the client goes with it
        client_protocol=t.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V8, configuration={"use:database": "nosuchdb"})),
        basic)
    assert _reply("OpenSession", failed.body).status.statusCode == t.TStatusCode.ERROR_STATUS  # type: ignore[attr-defined]
    assert server.http.open_clients == clients


def test_a_backend_that_is_down_is_named_at_open_session(tmp_path: Any) -> None:
    from tests.proxy_support import standalone_proxy

    proxy = standalone_proxy(tmp_path, http_port=free_port())
    try:
        assert proxy.http is not None
        basic = {"Authorization": "Basic " + base64.b64encode(b"u:p").decode()}
        opened = _post(proxy.http.port, _call("OpenSession", t.TOpenSessionReq(
            client_protocol=t.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V8)), basic)
        status = _reply("OpenSession", opened.body).status  # type: ignore[attr-defined]
        assert status.statusCode == t.TStatusCode.ERROR_STATUS and "not reachable" in status.errorMessage
        assert proxy.http.open_clients == 0
    finally:
        proxy.shutdown(drain_seconds=1)


def test_wrong_transport_is_told_at_once(stack: Stack, proxied: tuple[ProxyServer, str]) -> None:
    from pyhive import hive

    server, database = proxied
    assert server.http is not None
    started = time.monotonic()
    with pytest.raises(Exception) as binary_on_http:
        hive.connect(host="127.0.0.1", port=server.http.port, auth="NONE", username="lost", database=database)
    assert time.monotonic() - started < 3
    assert "HTTP transport" in str(binary_on_http.value) or "transportMode=http" in str(binary_on_http.value)
    client, transport = nosasl_client(server.http.port, timeout=5)  # NOSASL: told in reply to its first call
    try:
        with pytest.raises(Exception, match="HTTP transport"):
            client.OpenSession(t.TOpenSessionReq(client_protocol=t.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V8))
    finally:
        transport.close()
    started = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("POST", "/cliservice", b"\x80\x01", {"Content-Type": "application/x-thrift"})
    response = conn.getresponse()
    body = response.read().decode()
    conn.close()
    assert time.monotonic() - started < 3
    assert response.status == 400 and f"connect to port {server.http.port}" in body
    started = time.monotonic()  # beeline with an HTTP URL on the binary port fails fast, not after a timeout
    result = run_beeline(stack.java, "127.0.0.1", server.port, "SELECT 1", database, options=HTTP_URL, timeout=120)
    assert result.returncode != 0
    assert time.monotonic() - started < 60


def test_client_disconnect_mid_query_over_http_cancels_it(stack: Stack, proxied: tuple[ProxyServer, str]) -> None:
    server, database = proxied
    assert server.http is not None
    baseline = open_sessions(stack.thrift_server)
    clients = server.http.open_clients
    conn = http_connection(server, database, user="httpquitter")
    assert_abandoned_query_cancelled(  # noqa: SLF001 - the request's socket vanishes mid-query
        stack, server, "httpquitter", baseline, conn.cursor(),
        lambda: conn._transport._THttpClient__http.sock.shutdown(socket.SHUT_RDWR))
    assert server.http.open_clients == clients


@pytest.fixture(scope="module")
def http_backend(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ProxyServer, str, int]]:
    """A Thrift Server of the HTTP transport in the test JVM, and a proxy that reaches it over HTTP."""
    from backend.thrift_server import start_thrift_server

    database = stack.database("tpch", "tuned")
    port = free_port()
    server = start_thrift_server(stack.spark, "127.0.0.1", port, http_path="cliservice", beside=stack.thrift_server)
    config = proxy_config(stack.config.replace("backend", mode="remote", port=port, transport="http"),
                          tmp_path_factory.mktemp("proxy_http_backend"), http_port=free_port())
    proxy = start_proxy(config, stack.stats_store("tpch", "tuned"))
    yield proxy, database, port
    proxy.shutdown(drain_seconds=2)
    server.stop()


@pytest.mark.differential
@pytest.mark.deployment
@pytest.mark.parametrize("sql", [PRUNING, "SELECT * FROM nation ORDER BY n_nationkey", "SHOW TABLES"])
def test_a_backend_of_the_http_transport(stack: Stack, http_backend: tuple[ProxyServer, str, int], sql: str) -> None:
    """Clients of either transport through a proxy that reaches Spark over HTTP get what Spark's HTTP Thrift
    Server gives them directly, and statements are rewritten as over the binary transport."""
    from pyhive import hive

    proxy, database, port = http_backend
    direct = hive.connect(host="127.0.0.1", port=port, scheme="http", username="direct", database=database)
    try:
        cursor = direct.cursor()
        cursor.execute(sql)
        expected = cursor.fetchall(), cursor.description
    finally:
        direct.close()
    assert http_rows(proxy, database, sql, user="via-http") == expected
    with hive_cursor(proxy.port, database) as cursor:
        cursor.execute(sql)
        assert (cursor.fetchall(), cursor.description) == expected
    if sql == PRUNING:
        outcomes = {r["outcome"] for r in decisions(proxy.config) if r["statement"] == PRUNING}
        assert outcomes == {"rewritten"}
        result = run_beeline(stack.java, "127.0.0.1", port, sql, database, options=HTTP_URL)
        through = run_beeline(stack.java, "127.0.0.1", proxy.http.port, sql, database, options=HTTP_URL)  # type: ignore[union-attr]
        assert result.returncode == through.returncode == 0, through.stderr[-2000:]
        assert beeline_rows(result.stdout) == beeline_rows(through.stdout)
