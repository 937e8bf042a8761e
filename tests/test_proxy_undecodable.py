"""A statement that is not valid UTF-8 (issue 62), against the real Spark Thrift Server: Spark decodes it with
replacement characters and answers, so the proxy relays the client's own bytes (no rewrite) and the client gets
Spark's answer, on both transports, its session going on; the decision record says why, as valid JSON. Other
calls the proxy must read (OpenSession) get an error status on the same connection, which stays usable."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from TCLIService import ttypes as t
from thrift.protocol.TBinaryProtocol import TBinaryProtocol

from proxy.server import ProxyServer
from tests.conftest import Stack, hive_cursor
from tests.proxy_support import decisions, free_port, nosasl_client, open_session, proxy_config, start_proxy

pytestmark = pytest.mark.spark

# The bytes ff fe, which are not UTF-8, sent as they are by writing strings with surrogateescape.
STATEMENT = "SELECT 'a\udcff\udcfeb' AS s, length('a\udcff\udcfeb') AS n"
AFTER = "SELECT count(*) FROM nation"


@pytest.fixture(scope="module")
def proxied(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyServer]:
    stack.database("tpch", "tuned")
    config = proxy_config(stack.config, tmp_path_factory.mktemp("proxy_undecodable"), http_port=free_port())
    server = start_proxy(config, stack.stats_store("tpch", "tuned"))
    yield server
    server.shutdown(drain_seconds=2)


@pytest.fixture
def raw_strings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clients write their strings' surrogate escapes as the raw bytes they stand for (valid text is unchanged)."""
    monkeypatch.setattr(TBinaryProtocol, "writeString",
                        lambda self, s: self.writeBinary(s.encode("utf-8", "surrogateescape")))


def spark_answer(stack: Stack, database: str) -> list[tuple]:
    with hive_cursor(stack.port, database) as cursor:
        cursor.execute(STATEMENT)
        return cursor.fetchall()


def check_record(server: ProxyServer, user: str) -> None:
    [record] = [r for r in decisions(server.config) if r["user"] == user and r["statement"].startswith("SELECT 'a")]
    assert record["statement"] == "SELECT 'a\ufffd\ufffdb' AS s, length('a\ufffd\ufffdb') AS n"
    assert record["outcome"] == "passed through unchanged: the statement is not valid UTF-8"
    assert "sent" not in record
    server.config.proxy.decision_log.read_text(encoding="utf-8")  # the whole log is still valid UTF-8


@pytest.mark.differential
@pytest.mark.parametrize("transport", ["binary", "http"])
def test_a_statement_not_utf8_gets_sparks_answer_and_the_session_goes_on(
        stack: Stack, proxied: ProxyServer, raw_strings: None, transport: str) -> None:
    database = stack.database("tpch", "tuned")
    direct = spark_answer(stack, database)
    assert direct and "\ufffd" in direct[0][0]  # Spark decodes the bytes with replacement characters
    user = f"undecodable-{transport}"
    options: dict[str, Any] = {"scheme": "http"} if transport == "http" else {}
    port = proxied.http.port if transport == "http" else proxied.port
    with hive_cursor(port, database, user=user, **options) as cursor:
        cursor.execute(STATEMENT)
        assert cursor.fetchall() == direct
        cursor.execute(AFTER)  # the same session, on the same connection
        assert cursor.fetchall() == [(25,)]
    check_record(proxied, user)


def test_an_open_session_not_utf8_gets_an_error_and_the_connection_goes_on(proxied: ProxyServer,
                                                                          raw_strings: None) -> None:
    """OpenSession is read by the proxy (a NOSASL client's credentials, the session's settings): one it cannot
    read gets an error status saying why, and the next OpenSession on the connection works."""
    client, transport = nosasl_client(proxied.port)
    try:
        refused = client.OpenSession(t.TOpenSessionReq(client_protocol=t.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V6,
                                                       username="probe", configuration={"use:database": "x\udcff"}))
        assert refused.status.statusCode == t.TStatusCode.ERROR_STATUS
        assert "the OpenSession request holds text that is not valid UTF-8" in refused.status.errorMessage
        assert "send text in UTF-8" in refused.status.errorMessage
        assert refused.status.sqlState == "22021"
        opened = open_session(client)
        assert opened.status.statusCode == t.TStatusCode.SUCCESS_STATUS
        client.CloseSession(t.TCloseSessionReq(sessionHandle=opened.sessionHandle))
    finally:
        transport.close()
