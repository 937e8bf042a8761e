"""One client's HiveServer2 calls, whatever carries them (``proxy/binary_transport.py``, ``proxy/http_transport.py``):
its own backend connection, its sessions, and the dispatch of each call (ARCHITECTURE.md §6). Only
``ExecuteStatement`` and the calls on operations the proxy answers itself are interpreted:

- Virtual statements (``proxy/statements.py``) are answered as operations with handles of their own
  (``proxy/operation_calls.py``); nothing reaches Spark.
- Every other statement is rewritten, checked and run as ``proxy/execution.py`` says.
- A call whose text is not valid UTF-8 is relayed as it is, or answered with an error (``proxy/undecodable.py``).
- Every other call is relayed as raw bytes, results included: nothing is decoded on the fetch path.

Each call the proxy makes on the client's behalf is bounded by ``backend.request_timeout_seconds``
(:class:`proxy.backend_link.BackendLink`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from TCLIService import ttypes as t
from thrift.Thrift import TMessageType

from dipper.errors import BackendError
from proxy.backend_link import BackendAuthError, BackendLink, open_backend_link
from proxy.execution import Execution
from proxy.host import ProxyHost
from proxy.operation_calls import OperationCalls
from proxy.own_statements import OwnStatements
from proxy.session import Session, error_status, operation_guid, session_guid, short_id
from proxy.spark_errors import OK_STATUS
from proxy.stats_answers import TimedCache
from proxy.undecodable import Undecodable
from proxy.wire import NotUtf8, ProtocolError, decode_call, decode_reply, encode_exception, encode_reply, message_header, response_class

log = logging.getLogger("dipper.proxy")


class Calls(Execution, OperationCalls, OwnStatements, Undecodable):
    """A client's calls: ``dispatch`` takes a Thrift call message and returns the reply message.
    ``client_gone`` says whether the client has gone away (a statement it waits for is then cancelled)."""

    def __init__(self, server: ProxyHost, peer: str, client_gone: Callable[[], bool]) -> None:
        self.server = server
        self.config = server.config
        self.peer = peer
        self.client_gone = client_gone
        self.backend: BackendLink | None = None
        self.backend_problem: str | None = None  # why the backend could not be reached at authentication
        self.credentials: tuple[str, str] | None = None
        self.sessions: dict[bytes, Session] = {}
        self._handlers: dict[str, Callable[[Any, bytes], Any]] = {
            "OpenSession": self._open_session, "CloseSession": self._close_session,
            "ExecuteStatement": self._execute_statement, "GetOperationStatus": self._operation_status,
            "GetResultSetMetadata": self._result_set_metadata, "FetchResults": self._fetch_results,
            "CancelOperation": self._cancel_operation, "CloseOperation": self._close_operation,
        }

    def close(self) -> None:
        """Cancel what this client left running and close its backend sessions and connection."""
        backend, self.backend = self.backend, None
        self.server.metrics.abandoned(guid for s in self.sessions.values() for guid in [*s.operations, *s.watched])
        if backend is not None and backend.alive:
            for session in list(self.sessions.values()):
                for handle in list(session.operations.values()):
                    self._quietly(backend, "CancelOperation", t.TCancelOperationReq(operationHandle=handle))
                self._quietly(backend, "CloseSession", t.TCloseSessionReq(sessionHandle=session.handle))
            backend.close()
        self.sessions.clear()

    def operations_open(self) -> bool:
        return any(session.operations for session in self.sessions.values())

    @staticmethod
    def _quietly(backend: BackendLink, name: str, request: Any) -> None:
        try:
            backend.call(name, request)
        except BackendError as e:
            log.debug("%s during clean-up failed: %s", name, e)

    def connect_backend(self, user: str, password: str) -> None:
        """Open this client's backend connection with its credentials (:class:`BackendAuthError` if refused)."""
        if self.backend is not None:  # its earlier connection was lost
            self.server.metrics.backend_reconnects.inc()
        try:
            self.backend = open_backend_link(self.config.backend, user, password)
        except BackendAuthError:
            raise  # Spark answered: it is up
        except BackendError:
            self.server.metrics.backend_up.set(0)
            raise
        self.server.metrics.backend_up.set(1)
        self.backend_problem = None

    def _client_gone(self) -> bool:
        return self.client_gone()

    # -- dispatch ----------------------------------------------------------------------------------------
    def dispatch(self, message: bytes) -> bytes:
        started = time.perf_counter()
        name, mtype, seqid = message_header(message)
        if mtype != TMessageType.CALL:
            raise ProtocolError(f"message type {mtype} where a call was expected")
        handler = self._handlers.get(name)
        request = problem = None
        if handler is not None:
            try:
                request = decode_call(message)
            except NotUtf8 as e:  # well formed, but its text is not UTF-8: relayed as it is, or refused
                problem = e
                request = decode_call(message, errors="surrogateescape")
        out: Any = None
        try:
            if handler is None:
                out = self._relay(message)
                return out
            if problem is not None:
                out = self._undecodable(name, seqid, request, message, problem)
            else:
                out = handler(request, message)
        except BackendError as e:
            self.server.metrics.backend_error()
            if self.backend is None or not self.backend.alive:
                self.sessions.clear()  # they lived on the lost backend connection, and their operations with them
            return error_reply(name, seqid, str(e), request)
        finally:  # the call's latency, and the end of an asynchronous statement its reply shows
            self.server.metrics.called(name, request, out, started, self.backend is not None and self.backend.alive)
        return out if isinstance(out, bytes) else encode_reply(name, out, seqid)

    def _relay(self, message: bytes) -> bytes:
        return self._backend().roundtrip(message)

    def _backend(self) -> BackendLink:
        if self.backend is None or not self.backend.alive:
            raise BackendError(self.backend_problem or "the connection to the Spark Thrift Server was lost; "
                                                       "reconnect to open a new session")
        return self.backend

    def owns(self, request: Any) -> bool:
        """Whether the session or operation a decoded request names is one of this client's."""
        session, operation = session_guid(request), operation_guid(request)
        return any(key == session or operation is not None and (operation in s.operations or operation in s.virtual
                                                                or operation in s.watched)
                   for key, s in self.sessions.items())

    # -- sessions ----------------------------------------------------------------------------------------
    def _open_session(self, req: t.TOpenSessionReq, message: bytes) -> Any:
        if self.server.stopping.is_set():
            return t.TOpenSessionResp(status=error_status("Dipper: the proxy is shutting down", "08004"),
                                      serverProtocolVersion=req.client_protocol)
        # A NOSASL client's credentials travel in OpenSession. Hive's PLAIN server refuses an empty password
        # even when it checks none, so an absent one is sent as "x", as pyhive and beeline do.
        user, password = self.credentials or (req.username or "anonymous", req.password or "x")
        if self.backend is None or not self.backend.alive:
            self.connect_backend(user, password)
        reply = self._relay(message)
        response = decode_reply("OpenSession", reply)
        if response.status.statusCode in OK_STATUS and response.sessionHandle is not None:
            p = self.config.proxy
            session = Session(response.sessionHandle, user, response.serverProtocolVersion, p.skipping_enabled,
                              p.max_scan_bytes, p.metadata_answers, TimedCache(p.analysis_cache_seconds),
                              TimedCache(p.analysis_cache_seconds), TimedCache(p.analysis_cache_seconds),
                              TimedCache(p.analysis_cache_seconds))
            database = (req.configuration or {}).get("use:database")
            if database:
                session.state.database = database.strip("`").lower()
            self.sessions[session.key] = session
            self._learn_settings(session, req.configuration)
            log.info("session %s opened for %s from %s (protocol V%d)", short_id(session.key), user, self.peer,
                     session.protocol + 1)
        return reply

    def _close_session(self, req: t.TCloseSessionReq, message: bytes) -> Any:
        if req.sessionHandle is not None and req.sessionHandle.sessionId is not None:
            self.sessions.pop(req.sessionHandle.sessionId.guid, None)  # its operations with it, as on Spark
        return self._relay(message)



def error_reply(name: str, seqid: int, message: str, request: Any, sql_state: str = "08S01") -> bytes:
    """The reply to call ``name`` that fails with ``message`` (SQLSTATE 08S01: communication link failure)."""
    message = f"Dipper: {message}"
    cls = response_class(name)
    if cls is None:
        return encode_exception(name, message, seqid)
    response = cls(status=error_status(message, sql_state))
    if name == "OpenSession":  # a required field: Java clients refuse the reply without it
        response.serverProtocolVersion = request.client_protocol
    return encode_reply(name, response, seqid)
