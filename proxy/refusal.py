"""Telling a client the proxy will not serve now (``proxy.max_connections`` reached) why, in its own protocol.

A connection closed as soon as it is accepted reaches the user as "TSocket read 0 bytes" or "connection reset":
nothing says that a limit was hit, which one, or that trying later would work. So a refused connection is
answered at the first point its protocol can carry a message, then closed:

- SASL (Hive JDBC, pyhive ``auth='NONE'``): the negotiation fails with the message (pyhive shows
  ``Bad status: 3 (...)``, the JDBC driver ``Peer indicated failure: ...``).
- NOSASL: its first call (an OpenSession) gets an error status with the message.
- HTTP transport: its request gets a Thrift reply with an error status, with HTTP status 200: Thrift's HTTP
  clients (pyhive's included) do not look at the HTTP status and would report a 503 as a garbled message.

Answering means reading what the client sends first, so it is bounded like everything else: it runs on a
thread of its own, at most :data:`AT_ONCE` of them at a time (beyond that a refused connection is closed at
once, as before), each with :data:`SECONDS` to hear the client out.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable

from proxy.calls import error_reply
from proxy.wire import (SASL_BAD, SASL_START, STRICT_VERSION_BYTE, Channel, MessageTimeout, ProtocolError,
                        decode_call, message_header)

log = logging.getLogger("dipper.proxy")

AT_ONCE = 8  # refused connections answered at the same time; more are closed at once
SECONDS = 5.0  # how long a refused client has to send what it sends first
REQUEST_MAX = 1 << 20  # a refused client's first call is an OpenSession, a few hundred bytes


def limit_message(served: int, limit: int) -> str:
    return (f"the proxy is serving its limit of {limit} connections (proxy.max_connections = {limit}, {served} "
            "open now); try again when a connection has closed, or raise proxy.max_connections")


class Refusals:
    """Answers refused connections on threads of their own, :data:`AT_ONCE` at most."""

    def __init__(self, tls: ssl.SSLContext | None) -> None:
        self.tls = tls
        self._slots = threading.BoundedSemaphore(AT_ONCE)

    def refuse(self, sock: socket.socket, peer: str, message: str,
               answer: Callable[[socket.socket, str], None]) -> None:
        """Answer ``sock`` with ``message`` through ``answer`` (:func:`answer_binary` or :func:`answer_http`)
        on a thread, then close it; close it at once if :data:`AT_ONCE` are being answered already."""
        if not self._slots.acquire(blocking=False):
            _close(sock)
            return
        try:
            threading.Thread(target=self._answer, args=(sock, peer, message, answer), name=f"dipper-refuse-{peer}",
                             daemon=True).start()
        except Exception:  # noqa: BLE001 - RuntimeError "can't start new thread": close it as before
            self._slots.release()
            _close(sock)

    def _answer(self, sock: socket.socket, peer: str, message: str,
                answer: Callable[[socket.socket, str], None]) -> None:
        try:
            sock.settimeout(SECONDS)
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_side=True)
            answer(sock, message)
            _finish(sock)
        except (OSError, ProtocolError, ValueError) as e:
            log.debug("could not tell the refused client %s why: %s", peer, e)
        finally:
            _close(sock)
            self._slots.release()


def answer_binary(sock: socket.socket, message: str) -> None:
    """Fail a binary-transport client's SASL negotiation with ``message``, or answer its first NOSASL call."""
    channel = Channel(sock, framed=True, max_frame=REQUEST_MAX)
    channel.set_deadline(SECONDS, "a refused client's handshake")
    first = channel.peek_byte()
    if first == SASL_START:
        channel.read_sasl()  # the mechanism
        try:
            channel.read_sasl()  # the credentials, sent at once by PLAIN clients: read, so closing resets nothing
        except MessageTimeout:
            pass
        channel.write_sasl(SASL_BAD, f"Dipper: {message}".encode())
    elif first == STRICT_VERSION_BYTE:
        channel.framed = False
        call = channel.read_message()
        if call is not None:
            channel.write_message(_error_reply(call, message))


def answer_http(sock: socket.socket, message: str) -> None:
    """Answer an HTTP-transport client's request with a Thrift error reply carrying ``message``."""
    deadline = time.monotonic() + SECONDS
    data = b""
    while b"\r\n\r\n" not in data:
        data += _recv(sock, deadline, len(data))
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == b"content-length" and value.strip().isdigit():
            length = int(value.strip())
    if not 0 < length <= REQUEST_MAX:
        raise ProtocolError("not a Thrift call of a known length")
    while len(body) < length:
        body += _recv(sock, deadline, len(body))
    reply = _error_reply(body[:length], message)
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-thrift\r\nConnection: close\r\n"
                 b"Content-Length: " + str(len(reply)).encode() + b"\r\n\r\n" + reply)


def _error_reply(call: bytes, message: str) -> bytes:
    """The reply to ``call`` failing with ``message`` (SQLSTATE 08004: the server rejected the connection)."""
    name, _, seqid = message_header(call)
    return error_reply(name, seqid, message, decode_call(call, errors="surrogateescape"), sql_state="08004")


def _recv(sock: socket.socket, deadline: float, have: int) -> bytes:
    left = deadline - time.monotonic()
    if left <= 0 or have > REQUEST_MAX:
        raise ProtocolError("a refused client did not send its request in time")
    sock.settimeout(left)
    chunk = sock.recv(65536)
    if not chunk:
        raise ProtocolError("a refused client closed the connection")
    return chunk


def _finish(sock: socket.socket) -> None:
    """Close the sending side and wait briefly for the client to close: closing a socket with unread data
    resets the connection, and the reset can overtake the answer."""
    try:
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(1.0)
        while sock.recv(65536):
            pass
    except OSError:
        pass


def _close(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        pass
