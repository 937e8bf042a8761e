"""The proxy's limits on what a peer can make it hold, without Spark: a declared size beyond the message limit,
a request trickling in, a backend that accepts and never answers, a process out of file descriptors.

Each test ends by checking that the proxy still serves: a fresh client's OpenSession is answered (here with
the error for an unreachable or hung backend, which is what serving means without one).
"""

from __future__ import annotations

import logging
import select
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from TCLIService import ttypes as t

from dipper.config import REPO_ROOT
from proxy.server import ProxyServer
from tests.proxy_support import (nosasl_client, open_session, read_until_closed, sasl_plain_handshake,
                                 standalone_proxy, wait_for)

STRING, STRUCT, MAP, LIST, I64 = 11, 12, 13, 15, 10  # Thrift type ids


def _call(name: bytes = b"OpenSession") -> bytes:
    """The start of a strict binary-protocol call message, up to its first field."""
    return struct.pack(">Ii", 0x80010001, len(name)) + name + struct.pack(">i", 1)


def _field(ttype: int, fid: int = 1) -> bytes:
    return bytes([ttype]) + struct.pack(">h", fid)


def _answers(proxy: ProxyServer) -> bool:
    """Whether a new client's OpenSession is answered (the backend being absent, with an error saying so)."""
    client, transport = nosasl_client(proxy.port)
    try:
        response = open_session(client)
    finally:
        transport.close()
    return response.status.statusCode == t.TStatusCode.ERROR_STATUS and "Dipper: " in response.status.errorMessage


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[ProxyServer]:
    server = standalone_proxy(tmp_path, max_frame_bytes=65536, read_timeout_seconds=1)
    yield server
    server.shutdown(drain_seconds=0)


@pytest.mark.parametrize("prefix", [
    _call() + _field(STRING) + struct.pack(">i", 1 << 20),  # a string over the limit (under thrift's own)
    _call() + _field(STRING) + struct.pack(">i", 2**31 - 1),  # a string of 2 GB
    struct.pack(">Ii", 0x80010001, 1 << 20) + b"Open",  # the method name
    _call() + _field(LIST) + bytes([I64]) + struct.pack(">i", 1 << 28),  # 2 GB of i64s
    _call() + _field(STRUCT) + _field(MAP, 3) + bytes([STRING, STRING]) + struct.pack(">i", 1 << 27),
], ids=["string", "2GB-string", "method-name", "list", "map-in-struct"])
def test_a_declared_size_over_the_limit_closes_the_connection_at_once(proxy: ProxyServer, prefix: bytes) -> None:
    """A NOSASL message is walked to find its end; a length field claiming more than proxy.max_frame_bytes
    ends the connection before the proxy waits for (or buffers) the bytes it claims."""
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
        s.sendall(prefix)  # and never what it announces
        assert read_until_closed(s) is not None
    assert _answers(proxy)


def _trickle(s: socket.socket, data: bytes, pause: float) -> int:
    """Send ``data`` a byte every ``pause`` seconds; how many bytes went out before the server closed."""
    for i in range(len(data)):
        readable, _, _ = select.select([s], [], [], pause)
        try:
            if readable and not s.recv(4096):
                return i
            s.sendall(data[i:i + 1])
        except (BrokenPipeError, ConnectionResetError):
            return i
    return len(data)


@pytest.mark.parametrize("stage", ["authentication", "SASL frame", "NOSASL message"])
def test_a_request_trickling_in_is_cut_at_the_deadline(proxy: ProxyServer, stage: str,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    """proxy.read_timeout_seconds (1 s here) bounds a whole message, not each read: a client sending a byte
    every 0.2 s, each well within the timeout, is disconnected long before its 100 bytes are through."""
    caplog.set_level(logging.WARNING, logger="dipper.proxy")
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
        if stage == "authentication":
            s.sendall(b"\x01" + struct.pack(">i", 100))  # SASL START, a 100-byte mechanism name to come
        elif stage == "SASL frame":
            sasl_plain_handshake(s)
            s.sendall(struct.pack(">i", 100))
        else:
            s.sendall(_call() + _field(STRING) + struct.pack(">i", 100))
        assert _trickle(s, b"x" * 100, pause=0.2) < 100
    doing = "the handshake" if stage == "authentication" else "sending a message"
    assert any(f"{doing} took longer than 1 s" in r.getMessage() for r in caplog.records)
    assert _answers(proxy)


def test_a_hung_backend_gives_a_clear_error_and_is_dropped(tmp_path: Path) -> None:
    """A backend that accepts and never answers (hung, not dead) costs a client backend.request_timeout_seconds,
    then an error naming the cause; the proxy drops that backend connection and keeps serving."""
    hung = socket.create_server(("127.0.0.1", 0))
    hung.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                held.append(hung.accept()[0])
            except TimeoutError:
                continue

    acceptor = threading.Thread(target=accept)
    acceptor.start()
    proxy = standalone_proxy(tmp_path, backend_port=hung.getsockname()[1],
                             backend={"auth": "nosasl", "request_timeout_seconds": 1})
    client, transport = nosasl_client(proxy.port)
    try:
        first = open_session(client)
        assert first.status.statusCode == t.TStatusCode.ERROR_STATUS
        assert "did not answer within 1 s (backend.request_timeout_seconds)" in first.status.errorMessage
        wait_for(lambda: held, "the proxy's backend connection", timeout=10)
        assert read_until_closed(held[0]) is not None  # the proxy hung up on the hung backend
        again = open_session(client)  # the same client connection is still served, on a new backend link
        assert "did not answer within" in again.status.errorMessage
        assert proxy.connections == 1
    finally:
        transport.close()
        proxy.shutdown(drain_seconds=0)
        stop.set()
        acceptor.join()
        for s in held:
            s.close()
        hung.close()


_OUT_OF_FILES = """
import logging, os, resource, sys
from pathlib import Path
from tests.proxy_support import standalone_proxy

base = Path(sys.argv[1])
logging.basicConfig(filename=base / "proxy.log", level=logging.INFO, format="%(levelname)s %(message)s")
proxy = standalone_proxy(base)
# Leave room for three more descriptors: the proxy runs out of them after accepting a few connections.
highest = max(int(fd) for fd in os.listdir("/proc/self/fd"))
resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 4, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
print(proxy.port, flush=True)
sys.stdin.read()
proxy.shutdown(drain_seconds=0)
"""


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to count file descriptors")
def test_the_accept_loop_survives_running_out_of_file_descriptors(tmp_path: Path) -> None:
    """With the process out of file descriptors every accept fails (EMFILE): the proxy logs why, backs off,
    and accepts again once connections are released. (The proxy runs in a process of its own, whose limit is
    lowered; lowering this one's would starve the test run.)"""
    child = subprocess.Popen([sys.executable, "-c", _OUT_OF_FILES, str(tmp_path)], cwd=REPO_ROOT,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    log = tmp_path / "proxy.log"
    clients: list[socket.socket] = []
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        clients = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(8)]
        wait_for(lambda: "ERROR cannot accept connections: Too many open files" in log.read_text(),
                 "the proxy to run out of file descriptors", timeout=30)
        for s in clients:
            s.close()
        client, transport = nosasl_client(port)
        try:
            response = open_session(client)
        finally:
            transport.close()
        assert response.status.statusCode == t.TStatusCode.ERROR_STATUS
        assert "is not reachable" in response.status.errorMessage  # answered: the backend is absent on purpose
    finally:
        for s in clients:
            s.close()
        child.communicate(timeout=30)
