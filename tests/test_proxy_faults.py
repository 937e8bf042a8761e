"""The proxy when things go wrong or change under it: a backend that dies and comes back, idle clients,
more clients than it serves at once, sessions closed with operations open, shutdown with work in flight, TLS,
temporary views that shadow catalog tables."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from TCLIService import ttypes as t

from backend.server_process import start_server, stop_server
from dipper.config import load
from dipper.environment import free_port
from proxy.server import ProxyServer
from tests.conftest import Stack, hive_cursor, own_env
from tests.proxy_support import decisions, proxy_config, read_until_closed, start_proxy, wait_for
from tests.test_backend import write_config

pytestmark = pytest.mark.spark


@pytest.mark.deployment
def test_backend_killed_and_restarted_mid_run(stack: Stack, tmp_path: Path) -> None:
    """Clients keep querying while the backend is SIGKILLed and restarted: while it is down they get a
    clear error, the proxy stays up, and new sessions work once it is back."""
    from pyhive.exc import OperationalError

    db = stack.database("tpch", "tuned")
    backend_port = free_port()
    config_path = write_config(stack, tmp_path / "backend", backend_port, free_port())
    backend_config = load(config_path, environ={})
    env = own_env()
    backend = start_server(backend_config, config_path, env=env, args=("--no-proxy",))
    config = proxy_config(stack.config, tmp_path).replace("backend", port=backend_port)
    proxy = start_proxy(config, stack.stats_store("tpch", "tuned"))
    outcomes: list[str] = []
    stop = threading.Event()

    def client() -> None:
        while not stop.is_set():
            try:
                with hive_cursor(proxy.port, db, user="steady") as cursor:
                    cursor.execute("SELECT count(*) FROM nation")
                    outcomes.append("ok" if cursor.fetchall() == [(25,)] else "wrong")
            except OperationalError as e:
                outcomes.append("error: " + str(e))
            except Exception as e:  # noqa: BLE001 - thrift transport errors while the backend dies mid-call
                outcomes.append(f"transport: {type(e).__name__}: {e}")
            time.sleep(0.05)

    worker = threading.Thread(target=client)
    worker.start()
    try:
        wait_for(lambda: outcomes.count("ok") >= 3, "queries through the proxy before the kill")
        os.kill(backend.pid, signal.SIGKILL)
        backend.wait(timeout=30)
        killed_at = len(outcomes)
        wait_for(lambda: any("not reachable" in o for o in outcomes[killed_at:]), "a clear error while down")
        backend = start_server(backend_config, config_path, env=env, args=("--no-proxy",))
        restarted_at = len(outcomes)
        wait_for(lambda: "ok" in outcomes[restarted_at:], "queries through the proxy after the restart")
    finally:
        stop.set()
        worker.join(timeout=60)
        proxy.shutdown(drain_seconds=1)
        stop_server(backend.pid)
    down = outcomes[killed_at:restarted_at]
    assert "wrong" not in outcomes
    assert any("Dipper: the Spark Thrift Server at 127.0.0.1" in o and "is not reachable" in o for o in down)


def test_idle_connection_is_closed(stack: Stack, tmp_path: Path) -> None:
    from pyhive import hive

    db = stack.database("tpch", "tuned")
    config = proxy_config(stack.config, tmp_path, idle_timeout_seconds=1)
    proxy = start_proxy(config, stack.stats_store("tpch", "tuned"))
    try:
        conn = hive.connect(host="127.0.0.1", port=proxy.port, auth="NONE", username="idle", database=db)
        assert proxy.connections == 1
        # The connection counts until its backend session is closed, and the first CloseSession of a Spark
        # JVM sets up Hive's metastore client (seconds, more on a busy machine).
        wait_for(lambda: proxy.connections == 0, "the idle connection to be closed", timeout=60)
        with pytest.raises(Exception):  # noqa: B017 - any transport error: the connection is gone
            conn.cursor().execute("SELECT 1")
    finally:
        proxy.shutdown(drain_seconds=1)


def test_a_statement_longer_than_the_idle_timeout_keeps_its_connection(stack: Stack, tmp_path: Path) -> None:
    """Idleness is counted from the last reply: a client waiting on a synchronous statement longer than the
    idle timeout was not idle, and fetches its result afterwards."""
    db = stack.database("tpch", "tuned")
    config = proxy_config(stack.config, tmp_path, idle_timeout_seconds=2)
    proxy = start_proxy(config, stack.stats_store("tpch", "tuned"))
    try:
        with hive_cursor(proxy.port, db, user="patient") as cursor:
            cursor.execute("SELECT reflect('java.lang.Thread', 'sleep', 4000L) AS slept")  # 4 s, synchronously
            time.sleep(1)  # a pause before fetching: the proxy checks idleness meanwhile (shorter than the timeout)
            assert len(cursor.fetchall()) == 1
    finally:
        proxy.shutdown(drain_seconds=1)


def test_connections_over_the_cap_are_refused(stack: Stack, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """With proxy.max_connections being served, one more connection is closed as soon as it is accepted; once
    a connection ends, clients are served again."""
    caplog.set_level(logging.WARNING, logger="dipper.proxy")
    db = stack.database("tpch", "tuned")
    proxy = start_proxy(proxy_config(stack.config, tmp_path, max_connections=2), stack.stats_store("tpch", "tuned"))
    held: list[socket.socket] = []
    try:
        held = [socket.create_connection(("127.0.0.1", proxy.port), timeout=10) for _ in range(2)]
        wait_for(lambda: proxy.connections == 2, "both connections to be served", timeout=10)
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as extra:
            assert read_until_closed(extra) == b""
        assert proxy.connections == 2
        assert any("refusing the connection" in r.getMessage() and "proxy.max_connections = 2" in r.getMessage()
                   for r in caplog.records)
        held.pop().close()
        wait_for(lambda: proxy.connections == 1, "the closed connection to be released", timeout=10)
        with hive_cursor(proxy.port, db, user="capped") as cursor:
            cursor.execute("SELECT count(*) FROM nation")
            assert cursor.fetchall() == [(25,)]
    finally:
        for s in held:
            s.close()
        proxy.shutdown(drain_seconds=1)


def test_close_session_forgets_its_operations(stack: Stack, tmp_path: Path) -> None:
    """Spark closes a session's operations with the session; the proxy forgets them too: a virtual result
    cannot be fetched once its session is closed, and a draining shutdown does not wait for the session's
    operations (the client keeps its connection open, as connection pools do)."""
    from pyhive import hive

    db = stack.database("tpch", "tuned")
    proxy = start_proxy(proxy_config(stack.config, tmp_path), stack.stats_store("tpch", "tuned"))
    conn = hive.connect(host="127.0.0.1", port=proxy.port, auth="NONE", username="closer", database=db)
    try:
        virtual, real = conn.cursor(), conn.cursor()
        virtual.execute("SHOW SKIPPING LOG")  # answered by the proxy; left open
        real.execute("SELECT sum(n_regionkey) FROM nation", async_=True)  # open on Spark; left open
        closed = conn.client.CloseSession(t.TCloseSessionReq(sessionHandle=conn.sessionHandle))
        assert closed.status.statusCode == t.TStatusCode.SUCCESS_STATUS
        fetch = conn.client.FetchResults(t.TFetchResultsReq(operationHandle=virtual._operationHandle,  # noqa: SLF001
                                                            orientation=t.TFetchOrientation.FETCH_NEXT, maxRows=10))
        assert fetch.status.statusCode == t.TStatusCode.ERROR_STATUS  # relayed: Spark knows no such operation
        stopper = threading.Thread(target=proxy.shutdown, kwargs={"drain_seconds": 600}, daemon=True)
        stopper.start()
        wait_for(lambda: proxy.connections == 0, "the connection to end with nothing left to drain", timeout=30)
        stopper.join(timeout=30)
        assert not stopper.is_alive()
    finally:
        with contextlib.suppress(Exception):
            conn.close()  # the proxy closed the connection already


def test_shutdown_drains_then_closes_backend_sessions(stack: Stack, tmp_path: Path) -> None:
    from backend.thrift_server import open_sessions

    db = stack.database("tpch", "tuned")
    proxy = start_proxy(proxy_config(stack.config, tmp_path), stack.stats_store("tpch", "tuned"))
    baseline = open_sessions(stack.thrift_server)
    from pyhive import hive

    conn = hive.connect(host="127.0.0.1", port=proxy.port, auth="NONE", username="drain", database=db)
    cursor = conn.cursor()
    cursor.execute("SELECT sum(l_quantity) FROM lineitem", async_=True)  # an open operation (COUNT(*) is answered
    # from statistics, by the proxy itself)
    assert open_sessions(stack.thrift_server) == baseline + 1
    started = time.monotonic()
    stopper = threading.Thread(target=proxy.shutdown, kwargs={"drain_seconds": 20})
    stopper.start()
    time.sleep(0.5)
    with pytest.raises(Exception):  # noqa: B017 - no new connections while stopping
        hive.connect(host="127.0.0.1", port=proxy.port, auth="NONE", username="late")
    while cursor.poll().operationState != 2:  # FINISHED: the running work is not cut off
        time.sleep(0.05)
    assert cursor.fetchall()[0][0] > 0
    cursor.close()  # closes the operation: with none open, the proxy ends the connection
    stopper.join(timeout=30)
    with contextlib.suppress(Exception):
        conn.close()  # the proxy closed the session already
    assert time.monotonic() - started < 20
    assert open_sessions(stack.thrift_server) == baseline


@pytest.fixture(scope="module")
def tls_proxy(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ProxyServer, Path]]:
    """A proxy serving TLS on its binary port and HTTPS on its HTTP port, with a certificate made for it."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    proxy = start_proxy(proxy_config(stack.config, folder, tls_cert=str(cert), tls_key=str(key), http_port=free_port()),
                        stack.stats_store("tpch", "tuned"))
    yield proxy, cert
    proxy.shutdown(drain_seconds=1)


def _https(proxy: ProxyServer, cert: Path) -> Any:
    """HTTPS with the proxy's certificate, verified by the client."""
    from thrift.transport.THttpClient import THttpClient

    assert proxy.http is not None
    https = THttpClient(f"https://127.0.0.1:{proxy.http.port}/cliservice",
                        ssl_context=ssl.create_default_context(cafile=str(cert)))
    https.setCustomHeaders({"Authorization": "Basic dGxzOng="})  # tls:x
    return https


def _binary_tls(proxy: ProxyServer, cert: Path) -> Any:
    """SASL PLAIN over a TLS socket, verifying the proxy's certificate."""
    import thrift_sasl
    from pyhive.hive import get_installed_sasl
    from thrift.transport.TSSLSocket import TSSLSocket

    sock = TSSLSocket("127.0.0.1", proxy.port, cert_reqs=ssl.CERT_REQUIRED, ca_certs=str(cert))
    return thrift_sasl.TSaslClientTransport(
        lambda: get_installed_sasl(host="127.0.0.1", sasl_auth="PLAIN", username="tls", password="x"), "PLAIN", sock)


@pytest.mark.parametrize("transport", [_https, _binary_tls], ids=["https", "binary"])
def test_tls_client(stack: Stack, tls_proxy: tuple[ProxyServer, Path],
                    transport: Callable[[ProxyServer, Path], Any]) -> None:
    from pyhive import hive

    conn = hive.connect(thrift_transport=transport(*tls_proxy), database=stack.database("tpch", "tuned"))
    try:
        cursor = conn.cursor()
        cursor.execute("SELECT count(*) FROM nation")
        assert cursor.fetchall() == [(25,)]
    finally:
        conn.close()


def test_plain_tcp_is_refused_on_a_tls_port(tls_proxy: tuple[ProxyServer, Path]) -> None:
    from pyhive import hive

    proxy, _ = tls_proxy
    with pytest.raises(Exception):  # noqa: B017 - plain TCP is refused on a TLS port
        hive.connect(host="127.0.0.1", port=proxy.port, auth="NONE", username="plain").cursor().execute("SELECT 1")


@pytest.mark.differential
def test_temporary_view_shadowing_a_table_is_not_pruned(stack: Stack, tmp_path: Path) -> None:
    """A temporary view named like a catalog table hides it for unqualified names: the proxy must not prune
    the view's reads with the table's statistics."""
    db = stack.database("tpch", "tuned")
    config = proxy_config(stack.config, tmp_path)
    proxy = start_proxy(config, stack.stats_store("tpch", "tuned"))
    query = "SELECT count(*) FROM orders WHERE o_orderdate < DATE '1993-01-01'"
    try:
        with hive_cursor(proxy.port, db, user="views") as cursor:
            cursor.execute(query)
            before = cursor.fetchall()
            cursor.execute("CREATE TEMPORARY VIEW orders AS SELECT l_orderkey AS o_orderkey, "
                           f"l_shipdate AS o_orderdate FROM {db}.lineitem")
            cursor.execute(query)
            through_view = cursor.fetchall()
        with hive_cursor(proxy.port, db, user="views-direct") as cursor:
            cursor.execute(f"SELECT count(*) FROM {db}.lineitem WHERE l_shipdate < DATE '1993-01-01'")
            expected = cursor.fetchall()
    finally:
        proxy.shutdown(drain_seconds=1)
    assert through_view == expected != before
    records = [r for r in decisions(config) if r["statement"] == query]
    assert records[0]["outcome"] == "rewritten"
    assert records[1]["outcome"] == "forwarded unchanged"
    assert records[1]["decision"]["tables"][0]["refused"] == "the name may be a temporary view of this session"
