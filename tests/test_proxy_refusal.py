"""A client refused by ``proxy.max_connections`` (issue 62) is told why, through pyhive, on both transports: the
limit and the setting reach the user's exception, instead of "TSocket read 0 bytes" or a garbled 503; once a
connection closes, clients are served again, by the real Spark Thrift Server."""

from __future__ import annotations

import base64
import socket
from collections.abc import Iterator

import pytest
from TCLIService import ttypes as t

from proxy.server import ProxyServer
from tests.conftest import Stack, hive_cursor
from tests.proxy_support import free_port, proxy_config, start_proxy, wait_for
from tests.test_proxy_http import _call, _post, _reply

pytestmark = pytest.mark.spark

LIMIT = "the proxy is serving its limit of 1"
SETTING = "proxy.max_connections = 1"


@pytest.fixture
def capped(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyServer]:
    config = proxy_config(stack.config, tmp_path_factory.mktemp("proxy_refusal"), max_connections=1,
                          http_port=free_port())
    server = start_proxy(config, stack.stats_store("tpch", "tuned"))
    yield server
    server.shutdown(drain_seconds=1)


def refusal(port: int, **options: object) -> str:
    """The text of the exception pyhive raises when connecting to ``port``."""
    from pyhive import hive

    with pytest.raises(Exception) as caught:  # noqa: PT011 - each client raises its own type; the text matters
        hive.connect(host="127.0.0.1", port=port, username="refused", **options).close()
    return str(caught.value)


@pytest.mark.parametrize("auth", ["NONE", "NOSASL"])
def test_a_binary_client_over_the_limit_is_told_why(stack: Stack, capped: ProxyServer, auth: str) -> None:
    held = socket.create_connection(("127.0.0.1", capped.port), timeout=10)  # served: waits in its handshake
    try:
        wait_for(lambda: capped.connections == 1, "the held connection to be served", timeout=10)
        text = refusal(capped.port, auth=auth)
        assert LIMIT in text and SETTING in text and "try again" in text, text
    finally:
        held.close()
    wait_for(lambda: capped.connections == 0, "the held connection to be released", timeout=10)
    with hive_cursor(capped.port, stack.database("tpch", "tuned"), user="after", auth=auth) as cursor:
        cursor.execute("SELECT count(*) FROM nation")
        assert cursor.fetchall() == [(25,)]


@pytest.fixture
def capped_http(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyServer]:
    config = proxy_config(stack.config, tmp_path_factory.mktemp("proxy_refusal_http"), max_connections=2,
                          http_port=free_port())
    server = start_proxy(config, stack.stats_store("tpch", "tuned"))
    yield server
    server.shutdown(drain_seconds=1)


def http_connections_closed(server: ProxyServer) -> None:
    assert server.http is not None
    wait_for(lambda: server.http.slots._value == 2, "the HTTP connections to close", timeout=10)  # noqa: SLF001


def test_an_http_client_over_the_limit_of_clients_is_told_why(stack: Stack, capped_http: ProxyServer) -> None:
    """Two clients with a session each, as the Hive JDBC driver holds them (a cookie; its TCP connections come
    and go): a third is refused, and told why. pyhive keeps its last TCP connection open between calls, so
    with pyhive clients the limit of TCP connections (the next test) comes first."""
    database = stack.database("tpch", "tuned")
    assert capped_http.http is not None
    port = capped_http.http.port
    cookies, sessions = [], []
    for user in ("first", "second"):
        basic = {"Authorization": "Basic " + base64.b64encode(f"{user}:pw".encode()).decode()}
        opened = _post(port, _call("OpenSession", t.TOpenSessionReq(
            client_protocol=t.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V8,
            configuration={"use:database": database})), basic)
        cookies.append({"Cookie": opened.getheader("Set-Cookie").split(";")[0]})
        sessions.append(_reply("OpenSession", opened.body).sessionHandle)  # type: ignore[attr-defined]
    assert capped_http.http.open_clients == 2
    http_connections_closed(capped_http)
    text = refusal(port, scheme="http")
    assert "the proxy is serving its limit of 2 HTTP clients (proxy.max_connections = 2)" in text, text
    assert "try again when one has closed its session" in text
    for cookie, session in zip(cookies, sessions):
        closed = _post(port, _call("CloseSession", t.TCloseSessionReq(sessionHandle=session)), cookie)
        assert _reply("CloseSession", closed.body).status.statusCode == 0  # type: ignore[attr-defined]
    http_connections_closed(capped_http)
    basic = {"Authorization": "Basic " + base64.b64encode(b"after:pw").decode()}
    opened = _reply("OpenSession", _post(port, _call("OpenSession", t.TOpenSessionReq(  # type: ignore[attr-defined]
        client_protocol=t.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V8)), basic).body)
    assert opened.status.statusCode == 0  # served again
    _post(port, _call("CloseSession", t.TCloseSessionReq(sessionHandle=opened.sessionHandle)), basic)


def test_an_http_connection_over_the_limit_is_told_why(stack: Stack, capped_http: ProxyServer) -> None:
    assert capped_http.http is not None
    held = [socket.create_connection(("127.0.0.1", capped_http.http.port), timeout=10) for _ in range(2)]
    try:
        wait_for(lambda: capped_http.http.slots._value == 0, "both connections to be served", timeout=10)  # noqa: SLF001
        text = refusal(capped_http.http.port, scheme="http")
        assert "the proxy is serving its limit of 2 connections (proxy.max_connections = 2" in text, text
    finally:
        for s in held:
            s.close()
