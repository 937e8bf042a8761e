"""HiveServer2's wire format: Thrift binary-protocol messages, carried either in SASL frames or raw.

- **SASL** (Hive JDBC's default, pyhive ``auth='NONE'``): a negotiation of ``[status:1][length:4][payload]``
  messages, then every Thrift message as ``[length:4][message]``. Dipper speaks PLAIN only (no QOP wrap).
- **NOSASL**: Thrift messages back to back with no framing; a message's end is found by walking it.

A :class:`Channel` turns either into whole messages as bytes, so the proxy can relay a message without
decoding it, and decodes only what it must look at (:func:`decode_call`, :func:`decode_reply`). That is
done with the pure-Python protocol: pyhive's generated code predates the accelerated codec's calling
convention, and the messages looked at are small.
"""

from __future__ import annotations

import select
import socket
import ssl
import struct
from typing import Any

from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.Thrift import TApplicationException, TMessageType, TType
from thrift.transport.TTransport import TMemoryBuffer, TTransportBase

from TCLIService import TCLIService

SASL_START, SASL_OK, SASL_BAD, SASL_ERROR, SASL_COMPLETE = 1, 2, 3, 4, 5
SASL_MAX = 65536  # a negotiation message is a mechanism name or credentials
STRICT_VERSION_BYTE = 0x80  # first byte of every strict binary-protocol message (version 0x8001)


class ProtocolError(Exception):
    """The peer sent something that is not HiveServer2's wire format (or closed mid-message)."""


class Channel:
    """Whole Thrift messages over a socket, SASL-framed (``framed=True``) or raw."""

    def __init__(self, sock: socket.socket, framed: bool, max_frame: int) -> None:
        self.sock = sock
        self.framed = framed
        self.max_frame = max_frame
        self._buf = bytearray()

    # -- reading -----------------------------------------------------------------------------------------
    def _fill(self, n: int) -> bool:
        """Make at least ``n`` bytes available; False on EOF before that."""
        while len(self._buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self._buf)))
            if not chunk:
                return False
            self._buf += chunk
        return True

    def read_exact(self, n: int) -> bytes:
        if not self._fill(n):
            raise ProtocolError(f"connection closed in the middle of a message ({len(self._buf)} of {n} bytes)")
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def at_eof(self) -> bool:
        """True if the peer closed the connection before sending anything more."""
        return not self._buf and not self._fill(1)

    def readable(self, timeout: float) -> bool:
        """Whether a read would not block (buffered or pending data, or EOF) within ``timeout`` seconds."""
        if self._buf or (isinstance(self.sock, ssl.SSLSocket) and self.sock.pending()):
            return True
        r, _, _ = select.select([self.sock], [], [], timeout)
        return bool(r)

    def read_message(self) -> bytes | None:
        """The next whole message, or None if the peer closed the connection between messages."""
        if self.at_eof():
            return None
        if self.framed:
            (n,) = struct.unpack(">i", self.read_exact(4))
            if n < 0 or n > self.max_frame:
                raise ProtocolError(f"frame of {n} bytes (the limit is {self.max_frame})")
            return self.read_exact(n)
        return self._read_raw_message()

    def _read_raw_message(self) -> bytes:
        if self._buf[0] != STRICT_VERSION_BYTE:
            raise ProtocolError(f"not a Thrift binary-protocol message (first byte 0x{self._buf[0]:02x})")
        recorder = _Recorder(self)
        proto = _SkippingProtocol(recorder, strictRead=True)
        try:
            proto.readMessageBegin()
            proto.skip(TType.STRUCT)
            proto.readMessageEnd()
        except ProtocolError:
            raise
        except Exception as e:  # noqa: BLE001 - thrift raises several types for malformed input
            raise ProtocolError(f"malformed Thrift message: {e}") from None
        return bytes(recorder.data)

    # -- writing -----------------------------------------------------------------------------------------
    def write_message(self, message: bytes) -> None:
        if not self.framed:
            self.sock.sendall(message)
            return
        header = struct.pack(">i", len(message))
        if len(message) < 65536:  # one segment for small messages; no copy of big ones
            self.sock.sendall(header + message)
        else:
            self.sock.sendall(header)
            self.sock.sendall(message)

    # -- SASL negotiation --------------------------------------------------------------------------------
    def read_sasl(self) -> tuple[int, bytes]:
        status = self.read_exact(1)[0]
        (n,) = struct.unpack(">i", self.read_exact(4))
        if not 0 <= n <= SASL_MAX:
            raise ProtocolError(f"SASL message of {n} bytes")
        return status, self.read_exact(n)

    def write_sasl(self, status: int, payload: bytes) -> None:
        self.sock.sendall(bytes([status]) + struct.pack(">i", len(payload)) + payload)

    def peek_byte(self) -> int | None:
        return None if not self._fill(1) else self._buf[0]


class _SkippingProtocol(TBinaryProtocol):
    """Walks a message without interpreting it: strings stay bytes (handles are binary, not UTF-8)."""

    def readString(self) -> bytes:  # noqa: N802 - thrift's name
        return self.readBinary()


class _Recorder(TTransportBase):
    """A read-only transport over a channel's buffer that keeps every byte it hands out."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.data = bytearray()

    def read(self, sz: int) -> bytes:
        chunk = self.channel.read_exact(sz)
        self.data += chunk
        if len(self.data) > self.channel.max_frame:
            raise ProtocolError(f"message larger than {self.channel.max_frame} bytes")
        return chunk

    def readAll(self, sz: int) -> bytes:  # noqa: N802 - thrift's name
        return self.read(sz)


def sasl_plain_credentials(payload: bytes) -> tuple[str, str]:
    """(user, password) from a PLAIN initial response ``authzid NUL authcid NUL passwd`` (RFC 4616)."""
    parts = payload.split(b"\0")
    if len(parts) != 3:
        raise ProtocolError("malformed SASL PLAIN credentials")
    return parts[1].decode("utf-8", "replace"), parts[2].decode("utf-8", "replace")


# -- message encoding ----------------------------------------------------------------------------------------
def message_header(message: bytes) -> tuple[str, int, int]:
    """(method name, message type, sequence id) of a strict binary-protocol message, without decoding it."""
    try:
        version_and_type, name_len = struct.unpack_from(">ii", message, 0)
        name = message[8:8 + name_len].decode("utf-8")
        (seqid,) = struct.unpack_from(">i", message, 8 + name_len)
    except (struct.error, UnicodeDecodeError):
        raise ProtocolError("not a Thrift binary-protocol message") from None
    if (version_and_type & 0xFFFF0000) != 0x80010000 or name_len < 0:
        raise ProtocolError("not a Thrift binary-protocol message (bad version)")
    return name, version_and_type & 0xFF, seqid


def decode_call(message: bytes) -> Any:
    """The request struct (e.g. ``TExecuteStatementReq``) of a TCLIService call message."""
    name, _, _ = message_header(message)
    args_cls = getattr(TCLIService, f"{name}_args", None)
    if args_cls is None:
        raise ProtocolError(f"unknown method {name!r}")
    proto = TBinaryProtocol(TMemoryBuffer(message))
    try:
        proto.readMessageBegin()
        args = args_cls()
        args.read(proto)
    except Exception as e:  # noqa: BLE001
        raise ProtocolError(f"malformed {name} request: {e}") from None
    return args.req


def _encode(name: str, mtype: int, seqid: int, body: Any) -> bytes:
    buf = TMemoryBuffer()
    proto = TBinaryProtocol(buf)
    proto.writeMessageBegin(name, mtype, seqid)
    body.write(proto)
    proto.writeMessageEnd()
    return buf.getvalue()


def encode_call(name: str, request: Any, seqid: int) -> bytes:
    return _encode(name, TMessageType.CALL, seqid, getattr(TCLIService, f"{name}_args")(req=request))


def encode_reply(name: str, response: Any, seqid: int) -> bytes:
    return _encode(name, TMessageType.REPLY, seqid, getattr(TCLIService, f"{name}_result")(success=response))


def encode_exception(name: str, message: str, seqid: int) -> bytes:
    exception = TApplicationException(TApplicationException.INTERNAL_ERROR, message)
    return _encode(name, TMessageType.EXCEPTION, seqid, exception)


def decode_reply(name: str, message: bytes) -> Any:
    """The response struct of a reply message; a Thrift exception reply raises :class:`ProtocolError`."""
    proto = TBinaryProtocol(TMemoryBuffer(message))
    try:
        _, mtype, _ = proto.readMessageBegin()
        if mtype == TMessageType.EXCEPTION:
            exc = TApplicationException()
            exc.read(proto)
            raise ProtocolError(f"{name} failed on the backend: {exc.message}")
        result = getattr(TCLIService, f"{name}_result")()
        result.read(proto)
    except ProtocolError:
        raise
    except Exception as e:  # noqa: BLE001
        raise ProtocolError(f"malformed {name} reply: {e}") from None
    return result.success


def response_class(name: str) -> type | None:
    """The ``T...Resp`` class a method returns, or None for a method this Thrift IDL does not know."""
    result = getattr(TCLIService, f"{name}_result", None)
    return None if result is None else result.thrift_spec[0][3][0]
