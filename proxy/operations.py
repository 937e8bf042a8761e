"""Rewritten statements of asynchronous clients, followed until their outcome is known, and the operation
handles that then stand for another backend operation.

A synchronous client's statement is run to its end by the proxy, which re-runs the original itself when the
rewritten form fails (``proxy/execution.py``). An asynchronous client (JDBC and beeline always, pyhive with
``async_=True``) holds an operation handle and polls it. For a rewritten statement the proxy therefore keeps
a :class:`Watched` entry under the handle it gave the client: while the outcome is open, the client's
``GetOperationStatus`` (and a fetch before it) is answered from the backend operation's status, and if that
operation ended in an error the original may be submitted instead (``proxy/spark_errors.py`` decides). From
then on the client's handle stands for the new backend operation: its calls on that handle
(``GetOperationStatus``, ``GetResultSetMetadata``, ``FetchResults``, ``CancelOperation``, ``CloseOperation``)
are relayed as raw frames with the handle's bytes replaced (:func:`substitute_handle`). Every other operation,
and a watched one once its outcome is known and nothing was re-run, is relayed untouched.

Why the client cannot tell: the handle it holds is never replaced, an operation it cancels or closes is the one
that runs for it, and the result it fetches is the original statement's own, or the original's own error.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

from TCLIService import ttypes as t

from proxy.wire import decode_call, encode_call, message_header


@dataclasses.dataclass
class Watched:
    """A rewritten statement an asynchronous client submitted."""

    client: t.TOperationHandle  # the handle the client holds (that of the rewritten statement's operation)
    backend: t.TOperationHandle  # the backend operation that answers for it now
    request: t.TExecuteStatementReq  # the client's request, to submit the original
    settled: bool = False  # the outcome is known (finished, cancelled, re-run or its error returned)

    @property
    def mapped(self) -> bool:
        return self.backend.operationId.guid != self.client.operationId.guid


def _identifier_bytes(handle: t.THandleIdentifier) -> bytes:
    """A THandleIdentifier's fields in the binary protocol: guid (field 1) and secret (field 2), both binary."""
    guid, secret = handle.guid or b"", handle.secret or b""
    return (b"\x0b\x00\x01" + struct.pack(">i", len(guid)) + guid
            + b"\x0b\x00\x02" + struct.pack(">i", len(secret)) + secret)


def substitute_handle(message: bytes, old: t.TOperationHandle, new: t.TOperationHandle) -> bytes:
    """The call ``message`` with operation handle ``old`` replaced by ``new``. The handle's identifier is
    replaced in the raw bytes when it occurs exactly once (the rest of the frame stays as the client sent it);
    otherwise the call is decoded, its handle replaced, and encoded again."""
    before, after = _identifier_bytes(old.operationId), _identifier_bytes(new.operationId)
    if message.count(before) == 1:
        return message.replace(before, after)
    name, _, seqid = message_header(message)
    request: Any = decode_call(message)
    request.operationHandle = new
    return encode_call(name, request, seqid)
