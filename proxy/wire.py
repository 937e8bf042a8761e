"""HiveServer2's wire format: Thrift binary-protocol messages, carried either in SASL frames or raw.

- **SASL** (Hive JDBC's default, pyhive ``auth='NONE'``): a negotiation of ``[status:1][length:4][payload]``
  messages, then every Thrift message as ``[length:4][message]``. Dipper speaks PLAIN only (no QOP wrap).
- **NOSASL**: Thrift messages back to back with no framing; a message's end is found by walking it.

A :class:`Channel` turns either into whole messages as bytes, so the proxy can relay a message without
decoding it, and decodes only what it must look at (:func:`decode_call`, :func:`decode_reply`). That is
done with the pure-Python protocol: pyhive's generated code predates the accelerated codec's calling
convention, and the messages looked at are small.

A channel bounds what a peer can make the proxy hold, before any authentication: no message larger than
``max_frame`` is buffered (a declared length is checked before it is read), and a started message must
arrive whole within ``message_timeout`` seconds, however the bytes are paced.
"""

from __future__ import annotations

import select
import socket
import ssl
import struct
import time
from typing import Any

from TCLIService import TCLIService
from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.Thrift import TApplicationException, TMessageType, TType
from thrift.transport.TTransport import TMemoryBuffer, TTransportBase

from dipper.errors import DipperError

SASL_START, SASL_OK, SASL_BAD, SASL_ERROR, SASL_COMPLETE = 1, 2, 3, 4, 5
SASL_MAX = 65536  # a negotiation message is a mechanism name or credentials
STRICT_VERSION_BYTE = 0x80  # first byte of every strict binary-protocol message (version 0x8001)


class ProtocolError(DipperError):
    """The peer sent something that is not HiveServer2's wire format (or closed mid-message)."""


class MessageTimeout(ProtocolError):
    """The peer did not send a whole message (or handshake) before its deadline."""


class Channel:
    """Whole Thrift messages over a socket, SASL-framed (``framed=True``) or raw.

    ``message_timeout``: seconds a message has, once its first byte is here, to arrive whole. A socket
    timeout alone bounds each ``recv``, not the message: a peer sending a byte just before each timeout
    would hold the connection (and its thread) for ever.
    """

    def __init__(self, sock: socket.socket, framed: bool, max_frame: int, message_timeout: float | None = None) -> None:
        self.sock = sock
        self.framed = framed
        self.max_frame = max_frame
        self.message_timeout = message_timeout
        self._buf = bytearray()
        self._deadline: float | None = None  # monotonic time by which the current read must be done
        self._deadline_what = ""
        self._timeout_outside: float | None = None  # the socket's own timeout, restored when the deadline ends

    # -- reading -----------------------------------------------------------------------------------------
    def set_deadline(self, seconds: float | None, what: str = "sending a message") -> None:
        """Make reads fail with :class:`MessageTimeout` once ``seconds`` have passed (None: no deadline, and the
        socket's own timeout back). ``what`` names, in the error, what the peer was doing."""
        if seconds is None:
            if self._deadline is not None:
                self._deadline = None
                self.sock.settimeout(self._timeout_outside)
            return
        if self._deadline is None:
            self._timeout_outside = self.sock.gettimeout()
        self._deadline = time.monotonic() + seconds
        self._deadline_what = f"{what} took longer than {seconds:g} s"

    def _fill(self, n: int) -> bool:
        """Make at least ``n`` bytes available; False on EOF before that."""
        while len(self._buf) < n:
            if self._deadline is not None:
                left = self._deadline - time.monotonic()
                if left <= 0:
                    raise MessageTimeout(self._deadline_what)
                self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(max(65536, n - len(self._buf)))
            except TimeoutError:
                if self._deadline is None:
                    raise
                raise MessageTimeout(self._deadline_what) from None
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
        """The next whole message, or None if the peer closed the connection between messages. The wait for
        its first byte is the socket's timeout; from then on, ``message_timeout`` bounds the whole message
        (unless a deadline is running already, e.g. the handshake's)."""
        if self.at_eof():
            return None
        timed = self.message_timeout is not None and self._deadline is None
        if timed:
            self.set_deadline(self.message_timeout)
        try:
            if self.framed:
                (n,) = struct.unpack(">i", self.read_exact(4))
                if n < 0 or n > self.max_frame:
                    raise ProtocolError(f"frame of {n} bytes (the limit is {self.max_frame})")
                return self.read_exact(n)
            return self._read_raw_message()
        finally:
            if timed:
                self.set_deadline(None)

    def _read_raw_message(self) -> bytes:
        if self._buf[0] != STRICT_VERSION_BYTE:
            raise ProtocolError(f"not a Thrift binary-protocol message (first byte 0x{self._buf[0]:02x})")
        recorder = _Recorder(self)
        proto = _SkippingProtocol(recorder)
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


# The fewest bytes one value of each Thrift type takes on the wire (a struct can be a lone STOP byte).
_MIN_SIZE = {TType.BOOL: 1, TType.BYTE: 1, TType.DOUBLE: 8, TType.I16: 2, TType.I32: 4, TType.I64: 8,
             TType.STRING: 4, TType.STRUCT: 1, TType.MAP: 6, TType.SET: 5, TType.LIST: 5}


class _SkippingProtocol(TBinaryProtocol):
    """Walks a message without interpreting it: strings stay bytes (handles are binary, not UTF-8).

    Declared sizes are checked against what is left of the message's byte budget before anything is read:
    a string's length by :class:`_Recorder`, a container's element count here (each element takes at
    least its type's smallest encoding). So a length field claiming gigabytes ends the connection at once,
    instead of making the proxy wait for, and buffer, that much. thrift's own limits are switched off: the
    budget (``proxy.max_frame_bytes``) is the one limit, whatever thrift version is installed.
    """

    def __init__(self, recorder: _Recorder) -> None:
        super().__init__(recorder, strictRead=True, string_length_limit=None, container_length_limit=None)
        self.recorder = recorder

    def readString(self) -> bytes:  # noqa: N802 - thrift's name
        return self.readBinary()

    def readMapBegin(self) -> tuple[int, int, int]:  # noqa: N802
        ktype, vtype, size = super().readMapBegin()
        self._claim(size, _MIN_SIZE.get(ktype, 1) + _MIN_SIZE.get(vtype, 1), "map")
        return ktype, vtype, size

    def readListBegin(self) -> tuple[int, int]:  # noqa: N802
        etype, size = super().readListBegin()
        self._claim(size, _MIN_SIZE.get(etype, 1), "list")
        return etype, size

    def readSetBegin(self) -> tuple[int, int]:  # noqa: N802
        etype, size = super().readSetBegin()
        self._claim(size, _MIN_SIZE.get(etype, 1), "set")
        return etype, size

    def _claim(self, count: int, element_size: int, what: str) -> None:
        if count < 0 or count * element_size > self.recorder.left:
            raise ProtocolError(f"a {what} of {count} elements cannot fit in a message of at most "
                                f"{self.recorder.channel.max_frame} bytes")


class _Recorder(TTransportBase):
    """A read-only transport over a channel's buffer that keeps every byte it hands out, up to the channel's
    ``max_frame``: a read that would pass it fails before anything is read."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.data = bytearray()

    @property
    def left(self) -> int:
        """Bytes the message may still take."""
        return self.channel.max_frame - len(self.data)

    def read(self, sz: int) -> bytes:
        if sz < 0 or sz > self.left:
            raise ProtocolError(f"a field of {sz} bytes would make the message larger than "
                                f"{self.channel.max_frame} bytes")
        chunk = self.channel.read_exact(sz)
        self.data += chunk
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


class NotUtf8(ProtocolError):
    """A call whose text fields (a statement, a user name, a setting) are not valid UTF-8. The message itself is
    well formed, so the connection goes on: the call is relayed as it is, or answered with an error status
    (``proxy/undecodable.py``)."""


class _TextProtocol(TBinaryProtocol):
    """The binary protocol with its text fields decoded with ``errors`` (thrift's own decoding is strict)."""

    def __init__(self, trans: Any, errors: str) -> None:
        super().__init__(trans)
        self.errors = errors

    def readString(self) -> str:  # noqa: N802 - thrift's name
        return self.readBinary().decode("utf-8", self.errors)


def decode_call(message: bytes, errors: str = "strict") -> Any:
    """The request struct (e.g. ``TExecuteStatementReq``) of a TCLIService call message. Text that is not valid
    UTF-8 raises :class:`NotUtf8` (``errors="strict"``), or is decoded with ``errors`` (``"surrogateescape"``
    keeps the bytes: encoding the text the same way gives them back)."""
    name, _, _ = message_header(message)
    args_cls = getattr(TCLIService, f"{name}_args", None)
    if args_cls is None:
        raise ProtocolError(f"unknown method {name!r}")
    proto = _TextProtocol(TMemoryBuffer(message), errors)
    try:
        proto.readMessageBegin()
        args = args_cls()
        args.read(proto)
    except UnicodeDecodeError as e:
        raise NotUtf8(f"the {name} request holds text that is not valid UTF-8 ({e.reason} at byte "
                      f"0x{e.object[e.start]:02x})") from None
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
