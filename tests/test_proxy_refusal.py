"""A client refused by ``proxy.max_connections`` (issue 62) is told why, through pyhive, on both transports: the
limit and the setting reach the user's exception, instead of "TSocket read 0 bytes" or a garbled 503; once a
connection closes, clients are served again, by the real Spark Thrift Server."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from proxy.server import ProxyServer
from tests.conftest import Stack, hive_cursor
from tests.proxy_support import free_port, proxy_config, start_proxy, wait_for

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
def capped_http(stack: Stack, tmp_path_factory: pytest.TempPathFactory,
                request: pytest.FixtureRequest) -> Iterator[ProxyServer]:
    """Two places, as pyhive opens a TCP connection per call, and the proxy may not have seen the last one close
    when the next one comes: one place would refuse a lone client's second call now and then. pyhive keeps its
    last connection open between calls, so the limit of clients is reached only once the proxy has closed
    idle connections: after ``proxy.read_timeout_seconds`` (the test's parameter)."""
    config = proxy_config(stack.config, tmp_path_factory.mktemp("proxy_refusal_http"), max_connections=2,
                          http_port=free_port(), read_timeout_seconds=request.param)
    server = start_proxy(config, stack.stats_store("tpch", "tuned"))
    yield server
    server.shutdown(drain_seconds=1)


def all_http_connections_closed(server: ProxyServer) -> None:
    assert server.http is not None
    wait_for(lambda: server.http.slots._value == 2, "the HTTP connections to close", timeout=10)  # noqa: SLF001


@pytest.mark.parametrize("capped_http", [2], indirect=True)
def test_an_http_client_over_the_limit_of_clients_is_told_why(stack: Stack, capped_http: ProxyServer) -> None:
    database = stack.database("tpch", "tuned")
    assert capped_http.http is not None
    port = capped_http.http.port
    with hive_cursor(port, database, user="first", scheme="http") as first, \
            hive_cursor(port, database, user="second", scheme="http") as second:
        first.execute("SELECT 1")  # each client holds a place while its session is open
        second.execute("SELECT 2")
        all_http_connections_closed(capped_http)
        text = refusal(port, scheme="http")
        assert "the proxy is serving its limit of 2 HTTP clients (proxy.max_connections = 2)" in text, text
        all_http_connections_closed(capped_http)
        assert first.fetchall() == [(1,)] and second.fetchall() == [(2,)]
    all_http_connections_closed(capped_http)
    with hive_cursor(port, database, user="after", scheme="http") as cursor:
        cursor.execute("SELECT count(*) FROM nation")
        assert cursor.fetchall() == [(25,)]


@pytest.mark.parametrize("capped_http", [60], indirect=True)
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
