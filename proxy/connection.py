"""One client connection: authenticate, then relay calls to its own backend connection, interpreting only
``ExecuteStatement`` and the calls on operations the proxy answers itself (ARCHITECTURE.md §6).

How a statement is handled, and why:

- Virtual statements (``proxy/statements.py``) are answered here as operations with handles of their own;
  nothing reaches Spark.
- Every other statement is rewritten (failing open), checked against the session's byte budget, logged,
  and sent to Spark **asynchronously** whatever the client asked. A client that asked for a synchronous
  call gets its reply when the operation has finished, as from Spark; meanwhile the proxy watches the
  client's socket, so a client that disconnects mid-query gets its backend operation cancelled (Spark
  would otherwise run a synchronous statement to its end).
- Statements that change what names mean (``USE``, temporary views) are run to completion before the
  reply, so the session state the rewriter relies on is never ahead of, or behind, Spark's.
- Every other call is relayed as raw bytes, results included: nothing is decoded on the fetch path.

What a client can hold is bounded: ``proxy.read_timeout_seconds`` to authenticate and to send the rest of a
request once started (:class:`proxy.wire.Channel` enforces it as a deadline), ``proxy.idle_timeout_seconds``
between the end of one reply and the next request, and ``backend.request_timeout_seconds`` for each call the
proxy makes on its behalf (:class:`proxy.backend_link.BackendLink`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
import socket
import ssl
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from TCLIService import ttypes as t
from thrift.Thrift import TMessageType

from dipper.errors import BackendError
from proxy.backend_link import BackendAuthError, BackendLink
from proxy.results import ResultSet, empty_row_set
from proxy.statements import Explain, SetSkipping, ShowLog, TempView, UseDatabase, session_change, virtual
from proxy.wire import (SASL_BAD, SASL_COMPLETE, SASL_OK, SASL_START, STRICT_VERSION_BYTE, Channel, ProtocolError,
                        decode_call, decode_reply, encode_call, encode_exception, encode_reply, message_header,
                        response_class, sasl_plain_credentials)
from rewriter.decision import Decision
from rewriter.rewrite import RewriteContext, rewrite

if TYPE_CHECKING:
    from proxy.server import ProxyServer

log = logging.getLogger("dipper.proxy")

TICK = 0.5  # how often an idle connection checks for shutdown and idle timeout
OK_STATUS = (t.TStatusCode.SUCCESS_STATUS, t.TStatusCode.SUCCESS_WITH_INFO_STATUS)
S = t.TOperationState
TERMINAL = {S.FINISHED_STATE, S.CANCELED_STATE, S.CLOSED_STATE, S.ERROR_STATE, S.UKNOWN_STATE, S.TIMEDOUT_STATE}
LIMIT_EXCEEDED = "54000"  # SQLSTATE: program limit exceeded
SYNTAX_ERROR = "42000"


class ClientGone(Exception):
    """The client closed its connection."""


class VirtualError(Exception):
    """A virtual statement that cannot be answered (bad value, unknown key)."""


@dataclasses.dataclass
class Session:
    handle: t.TSessionHandle
    user: str
    protocol: int
    skipping_enabled: bool
    max_scan_bytes: int
    database: str | None = "default"  # None: the session left spark_catalog; names are not what stats know
    temp_views: set[str] = dataclasses.field(default_factory=set)
    temp_views_unknown: bool = False
    # A session's operations live in it, so closing the session forgets them too (Spark closes a session's
    # operations with it): no stale handle keeps a draining connection open, no virtual result lingers.
    operations: dict[bytes, t.TOperationHandle] = dataclasses.field(default_factory=dict)  # open on the backend
    virtual: dict[bytes, ResultSet] = dataclasses.field(default_factory=dict)  # answered by the proxy itself

    @property
    def key(self) -> bytes:
        return self.handle.sessionId.guid


def error_status(message: str, sql_state: str | None = None) -> t.TStatus:
    return t.TStatus(statusCode=t.TStatusCode.ERROR_STATUS, errorMessage=message, sqlState=sql_state, errorCode=0)


OK = t.TStatus(statusCode=t.TStatusCode.SUCCESS_STATUS)


class ClientConnection:
    def __init__(self, sock: socket.socket, peer: str, server: ProxyServer) -> None:
        self.sock = sock
        self.peer = peer
        self.server = server
        self.config = server.config
        self.client: Channel | None = None
        self.backend: BackendLink | None = None
        self.backend_problem: str | None = None  # why the backend could not be reached at authentication
        self.credentials: tuple[str, str] | None = None
        self.sessions: dict[bytes, Session] = {}
        self.last_activity = time.monotonic()
        self._handlers: dict[str, Callable[[Any, bytes], Any]] = {
            "OpenSession": self._open_session, "CloseSession": self._close_session,
            "ExecuteStatement": self._execute_statement, "GetOperationStatus": self._operation_status,
            "GetResultSetMetadata": self._result_set_metadata, "FetchResults": self._fetch_results,
            "CancelOperation": self._cancel_operation, "CloseOperation": self._close_operation,
        }

    # -- lifecycle ---------------------------------------------------------------------------------------
    def run(self) -> None:
        try:
            self._handshake()
            self._serve()
        except ClientGone:
            log.debug("client %s disconnected", self.peer)
        except ProtocolError as e:
            log.warning("closing the connection from %s: %s", self.peer, e)
        except (OSError, ssl.SSLError) as e:
            log.info("connection from %s ended: %s", self.peer, e)
        except Exception:  # noqa: BLE001 - one connection's bug must not take the server down
            log.exception("unexpected error on the connection from %s; closing it", self.peer)
        finally:
            self.close()

    def close(self) -> None:
        """Cancel what this client left running and close its backend sessions, then both sockets."""
        backend, self.backend = self.backend, None
        if backend is not None and backend.alive:
            for session in list(self.sessions.values()):
                for handle in list(session.operations.values()):
                    self._quietly(backend, "CancelOperation", t.TCancelOperationReq(operationHandle=handle))
                self._quietly(backend, "CloseSession", t.TCloseSessionReq(sessionHandle=session.handle))
            backend.close()
        self.sessions.clear()
        try:
            self.sock.close()
        except OSError:
            pass
        self.server.forget(self)

    @staticmethod
    def _quietly(backend: BackendLink, name: str, request: Any) -> None:
        try:
            backend.call(name, request)
        except BackendError as e:
            log.debug("%s during clean-up failed: %s", name, e)

    def _handshake(self) -> None:
        timeout = self.config.proxy.read_timeout_seconds
        # The socket's timeout bounds the TLS handshake as a whole (ssl applies it as a deadline) and, from
        # then on, each send of a reply: a client that stops reading its replies is gone. The HiveServer2
        # handshake after TLS has a deadline of its own.
        self.sock.settimeout(timeout)
        if self.server.tls is not None:
            self.sock = self.server.tls.wrap_socket(self.sock, server_side=True)
        self.client = Channel(self.sock, framed=True, max_frame=self.config.proxy.max_frame_bytes,
                              message_timeout=timeout)
        self.client.set_deadline(timeout, "the handshake")
        mode = self.config.proxy.client_auth
        first = self.client.peek_byte()
        if first is None:
            raise ClientGone
        if first == SASL_START and mode in ("any", "plain"):
            self._sasl_plain()
        elif first == STRICT_VERSION_BYTE and mode in ("any", "nosasl"):
            self.client.framed = False
        else:
            expected = {"any": "SASL or NOSASL", "plain": "SASL PLAIN", "nosasl": "NOSASL"}[mode]
            raise ProtocolError(f"not a HiveServer2 client handshake (first byte 0x{first:02x}; "
                                f"proxy.client_auth = {mode} expects {expected})")
        self.client.set_deadline(None)

    def _sasl_plain(self) -> None:
        assert self.client is not None
        status, mechanism = self.client.read_sasl()
        if status != SASL_START or mechanism.upper() != b"PLAIN":
            self.client.write_sasl(SASL_BAD, b"Dipper accepts SASL PLAIN (or NOSASL) only")
            raise ProtocolError(f"SASL mechanism {mechanism[:40]!r} is not supported")
        status, payload = self.client.read_sasl()
        if status not in (SASL_OK, SASL_COMPLETE):
            raise ProtocolError(f"unexpected SASL status {status}")
        self.credentials = sasl_plain_credentials(payload)
        # The backend decides whether these credentials are good, so connect now: a refusal is then the
        # client's authentication failure, exactly as it would be without the proxy.
        try:
            self._connect_backend(*self.credentials)
        except BackendAuthError as e:
            self.client.write_sasl(SASL_BAD, str(e).encode())
            raise ClientGone from None
        except BackendError as e:
            self.backend_problem = str(e)  # answered with a clear status at OpenSession
        self.client.write_sasl(SASL_COMPLETE, b"")

    def _connect_backend(self, user: str, password: str) -> None:
        b = self.config.backend
        self.backend = BackendLink(b.host, b.port, b.auth, user, password, b.connect_timeout_seconds,
                                   b.request_timeout_seconds)
        self.backend_problem = None

    def _serve(self) -> None:
        assert self.client is not None
        self.last_activity = time.monotonic()
        while self._wait_for_request():
            message = self.client.read_message()
            if message is None:
                return
            reply = self._dispatch(message)
            self.client.write_message(reply)
            # Idleness is counted from the reply, not the request: a statement that ran longer than the idle
            # timeout has kept the client waiting, not idle.
            self.last_activity = time.monotonic()

    def _wait_for_request(self) -> bool:
        """Block until a request arrives; False when the connection should end (idle, shutdown)."""
        assert self.client is not None
        idle = self.config.proxy.idle_timeout_seconds
        while not self.client.readable(TICK):
            now = time.monotonic()
            if now - self.last_activity > idle:
                log.info("closing the idle connection from %s (no request for %ds)", self.peer, idle)
                return False
            if self.server.stopping.is_set() and (not self._operations_open() or now > self.server.drain_deadline):
                return False
        return True

    def _operations_open(self) -> bool:
        return any(session.operations for session in self.sessions.values())

    # -- dispatch ----------------------------------------------------------------------------------------
    def _dispatch(self, message: bytes) -> bytes:
        name, mtype, seqid = message_header(message)
        if mtype != TMessageType.CALL:
            raise ProtocolError(f"message type {mtype} where a call was expected")
        handler = self._handlers.get(name)
        request = decode_call(message) if handler is not None else None
        try:
            if handler is None:
                return self._relay(message)
            out = handler(request, message)
        except BackendError as e:
            if self.backend is None or not self.backend.alive:
                self.sessions.clear()  # they lived on the lost backend connection, and their operations with them
            return self._error_reply(name, seqid, str(e), request)
        return out if isinstance(out, bytes) else encode_reply(name, out, seqid)

    def _relay(self, message: bytes) -> bytes:
        return self._backend().roundtrip(message)

    def _backend(self) -> BackendLink:
        if self.backend is None or not self.backend.alive:
            raise BackendError(self.backend_problem or "the connection to the Spark Thrift Server was lost; "
                                                       "reconnect to open a new session")
        return self.backend

    def _error_reply(self, name: str, seqid: int, message: str, request: Any) -> bytes:
        message = f"Dipper: {message}"
        cls = response_class(name)
        if cls is None:
            return encode_exception(name, message, seqid)
        response = cls(status=error_status(message, "08S01"))  # SQLSTATE 08S01: communication link failure
        if name == "OpenSession":  # a required field: Java clients refuse the reply without it
            response.serverProtocolVersion = request.client_protocol
        return encode_reply(name, response, seqid)

    # -- sessions ----------------------------------------------------------------------------------------
    def _open_session(self, req: t.TOpenSessionReq, message: bytes) -> Any:
        if self.server.stopping.is_set():
            return t.TOpenSessionResp(status=error_status("Dipper: the proxy is shutting down", "08004"),
                                      serverProtocolVersion=req.client_protocol)
        # A NOSASL client's credentials travel in OpenSession. Hive's PLAIN server refuses an empty password
        # even when it checks none, so an absent one is sent as "x", as pyhive and beeline do.
        user, password = self.credentials or (req.username or "anonymous", req.password or "x")
        if self.backend is None or not self.backend.alive:
            self._connect_backend(user, password)
        reply = self._relay(message)
        response = decode_reply("OpenSession", reply)
        if response.status.statusCode in OK_STATUS and response.sessionHandle is not None:
            p = self.config.proxy
            session = Session(response.sessionHandle, user, response.serverProtocolVersion, p.skipping_enabled,
                              p.max_scan_bytes)
            database = (req.configuration or {}).get("use:database")
            if database:
                session.database = database.strip("`").lower()
            self.sessions[session.key] = session
            log.info("session %s opened for %s from %s (protocol V%d)", _short(session.key), user, self.peer,
                     session.protocol + 1)
        return reply

    def _close_session(self, req: t.TCloseSessionReq, message: bytes) -> Any:
        self.sessions.pop(req.sessionHandle.sessionId.guid, None)  # its operations with it, as on Spark
        return self._relay(message)

    # -- statements --------------------------------------------------------------------------------------
    def _execute_statement(self, req: t.TExecuteStatementReq, message: bytes) -> Any:
        session = self.sessions.get(req.sessionHandle.sessionId.guid)
        if session is None:  # not opened through this connection: nothing to interpret
            return self._relay(message)
        statement = req.statement or ""
        v = virtual(statement)
        if v is not None:
            return self._virtual(session, v)
        if self.server.stopping.is_set():
            return t.TExecuteStatementResp(status=error_status("Dipper: the proxy is shutting down", "08004"))
        change = session_change(statement)
        record = self._record(session, statement)
        sent, decision = statement, None
        if change is None:
            if session.database is None:
                record["outcome"] = "passed through: the session switched catalogs"
            else:
                result = rewrite(statement, self._context(session))
                decision = result.decision
                record["decision"] = decision.to_dict()
                refusal = over_budget(session, decision)
                if refusal is not None:
                    record["outcome"] = "refused: " + refusal
                    self.server.decision_log.write(record)
                    return t.TExecuteStatementResp(status=error_status(f"Dipper: {refusal}", LIMIT_EXCEEDED))
                if session.skipping_enabled:
                    sent = result.sql
                else:
                    record["outcome"] = "passed through: skipping disabled in this session"
        if sent != statement:
            record["sent"] = sent
        record.setdefault("outcome", "rewritten" if sent != statement else "forwarded unchanged")
        # Every statement leaves its record (ARCHITECTURE.md §3.6), also one whose client went away or whose
        # backend failed before it ended.
        try:
            return self._run(session, req, sent, change, record)
        except (ClientGone, OSError):
            record["outcome"] = "cancelled: the client disconnected before the statement finished"
            raise
        except Exception as e:  # noqa: BLE001 - re-raised; the record only says the statement did not complete
            record["outcome"] = f"failed: {e}"
            raise
        finally:
            self.server.decision_log.write(record)

    def _run(self, session: Session, req: t.TExecuteStatementReq, sent: str, change: UseDatabase | TempView | None,
             record: dict[str, Any]) -> t.TExecuteStatementResp:
        """Submit ``sent`` asynchronously, and wait for its end if the client asked for a synchronous call or the
        statement changes the session."""
        rewritten = sent != (req.statement or "")
        response = self._submit(session, req, sent)
        if rewritten and response.status.statusCode not in OK_STATUS:
            response = self._fall_back(session, req, record, response)
        wait = response.status.statusCode in OK_STATUS and (not req.runAsync or change is not None)
        if wait:
            state = self._run_to_end(response.operationHandle)
            if rewritten and state.operationState == S.ERROR_STATE:
                self._close_backend_operation(session, response.operationHandle)
                response = self._fall_back(session, req, record, None, state.errorMessage)
                state = self._run_to_end(response.operationHandle) if response.status.statusCode in OK_STATUS else state
            if state.operationState == S.FINISHED_STATE and change is not None:
                apply_change(session, change)
            if not req.runAsync and state.operationState != S.FINISHED_STATE:
                if response.operationHandle is not None:
                    self._close_backend_operation(session, response.operationHandle)
                response = t.TExecuteStatementResp(status=failed_status(state))
        return response

    def _submit(self, session: Session, req: t.TExecuteStatementReq, statement: str) -> t.TExecuteStatementResp:
        forwarded = t.TExecuteStatementReq(sessionHandle=req.sessionHandle, statement=statement,
                                           confOverlay=req.confOverlay, runAsync=True, queryTimeout=req.queryTimeout)
        response = self._backend().call("ExecuteStatement", forwarded)
        if response.status.statusCode in OK_STATUS and response.operationHandle is not None:
            session.operations[response.operationHandle.operationId.guid] = response.operationHandle
        return response

    def _fall_back(self, session: Session, req: t.TExecuteStatementReq, record: dict[str, Any], response: Any,
                   error: str | None = None) -> t.TExecuteStatementResp:
        """The rewritten statement failed on Spark: send the original instead (fail open), and say so."""
        reason = error or (response.status.errorMessage if response is not None else "")
        log.warning("the rewritten statement failed on Spark, sending the original instead: %s", (reason or "")[:300])
        record["outcome"] = "fell back to the original: the rewritten statement failed on Spark"
        record["rewrite_failed_on_spark"] = reason
        return self._submit(session, req, req.statement)

    def _run_to_end(self, handle: t.TOperationHandle) -> t.TGetOperationStatusResp:
        """Poll the backend until the operation ends; cancel it if the client goes away meanwhile."""
        delay = 0.0005
        while True:
            started = time.monotonic()
            state = self._backend().call("GetOperationStatus", t.TGetOperationStatusReq(operationHandle=handle))
            if state.status.statusCode not in OK_STATUS or state.operationState in TERMINAL:
                return state
            if self._client_gone():
                log.info("client %s disconnected during a statement; cancelling it", self.peer)
                raise ClientGone  # close() cancels every open operation and closes the sessions
            if time.monotonic() - started < 0.05:  # the backend answered at once: back off a little
                time.sleep(delay)
                delay = min(delay * 2, 0.05)

    def _client_gone(self) -> bool:
        assert self.client is not None
        return self.client.readable(0) and self.client.at_eof()

    def _close_backend_operation(self, session: Session, handle: t.TOperationHandle) -> None:
        session.operations.pop(handle.operationId.guid, None)
        self._backend().call("CloseOperation", t.TCloseOperationReq(operationHandle=handle))

    def _context(self, session: Session) -> RewriteContext:
        assert session.database is not None
        r = self.config.rewriter
        return RewriteContext(self.server.stats, database=session.database, shadowed=frozenset(session.temp_views),
                              shadow_all_unqualified=session.temp_views_unknown, dips=r.dips,
                              dip_max_ranges=r.dip_max_ranges, kappa=r.kappa)

    def _record(self, session: Session, statement: str) -> dict[str, Any]:
        return {"time": dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"), "user": session.user,
                "client": self.peer, "session": _short(session.key), "database": session.database,
                "statement": statement}

    # -- virtual operations ------------------------------------------------------------------------------
    def _virtual(self, session: Session, v: Any) -> t.TExecuteStatementResp:
        try:
            result = self._answer(session, v)
        except VirtualError as e:
            return t.TExecuteStatementResp(status=error_status(f"Dipper: {e}", SYNTAX_ERROR))
        handle = t.TOperationHandle(operationId=t.THandleIdentifier(guid=os.urandom(16), secret=os.urandom(16)),
                                    operationType=t.TOperationType.EXECUTE_STATEMENT, hasResultSet=True)
        result.protocol = session.protocol
        session.virtual[handle.operationId.guid] = result
        return t.TExecuteStatementResp(status=OK, operationHandle=handle)

    def _answer(self, session: Session, v: Any) -> ResultSet:
        if isinstance(v, Explain):
            return self._explain(session, v.query)
        if isinstance(v, ShowLog):
            return show_log(self.server.decision_log.recent(session.user, v.limit if v.limit is not None else 20))
        return set_skipping(session, v)

    def _explain(self, session: Session, query: str) -> ResultSet:
        if not query:
            raise VirtualError("EXPLAIN SKIPPING needs a query, e.g. EXPLAIN SKIPPING SELECT count(*) FROM t WHERE ...")
        if session.database is None:
            raise VirtualError("the session switched to another catalog; Dipper only knows spark_catalog's tables")
        result = rewrite(query, self._context(session))
        record = self._record(session, query)
        record.update(outcome="explained (dry run, nothing executed)", decision=result.decision.to_dict())
        if result.changed:
            record["sent"] = result.sql
        self.server.decision_log.write(record)
        return explain_result(result.decision, result.sql if result.changed else None)

    def _virtual_result(self, req: Any) -> ResultSet | None:
        guid = req.operationHandle.operationId.guid
        for session in self.sessions.values():  # a connection has one session, rarely a few
            if guid in session.virtual:
                return session.virtual[guid]
        return None

    def _operation_status(self, req: t.TGetOperationStatusReq, message: bytes) -> Any:
        if self._virtual_result(req) is None:
            return self._relay(message)
        return t.TGetOperationStatusResp(status=OK, operationState=S.FINISHED_STATE, hasResultSet=True)

    def _result_set_metadata(self, req: t.TGetResultSetMetadataReq, message: bytes) -> Any:
        result = self._virtual_result(req)
        if result is None:
            return self._relay(message)
        return t.TGetResultSetMetadataResp(status=OK, schema=result.schema())

    def _fetch_results(self, req: t.TFetchResultsReq, message: bytes) -> Any:
        result = self._virtual_result(req)
        if result is None:
            return self._relay(message)
        if req.fetchType == 1:  # operation logs: the proxy's answers have none
            return t.TFetchResultsResp(status=OK, hasMoreRows=False, results=empty_row_set(result.protocol))
        rows = result.fetch(req.maxRows, from_start=req.orientation == t.TFetchOrientation.FETCH_FIRST)
        return t.TFetchResultsResp(status=OK, hasMoreRows=result.offset < len(result.rows), results=rows)

    def _cancel_operation(self, req: t.TCancelOperationReq, message: bytes) -> Any:
        if self._virtual_result(req) is not None:
            return t.TCancelOperationResp(status=OK)
        return self._relay(message)

    def _close_operation(self, req: t.TCloseOperationReq, message: bytes) -> Any:
        guid = req.operationHandle.operationId.guid
        for session in self.sessions.values():
            if session.virtual.pop(guid, None) is not None:
                return t.TCloseOperationResp(status=OK)
            session.operations.pop(guid, None)
        return self._relay(message)


# -- pure helpers (tested on their own) --------------------------------------------------------------------
def over_budget(session: Session, decision: Decision) -> str | None:
    """Why the statement must be refused under the session's byte budget, or None."""
    limit = session.max_scan_bytes
    if not limit:
        return None
    if decision.passthrough and decision.passthrough.startswith("not a query"):
        return None  # DDL, SET, SHOW ...: nothing is scanned by a query of ours to measure
    if decision.passthrough or decision.error:
        return (f"cannot tell how many bytes this statement would scan ({decision.passthrough or decision.error}), "
                f"and skipping.max_scan_bytes = {limit} is set")
    unknown = sorted({td.table for td in decision.tables if not td.has_stats})
    if unknown:
        return (f"cannot tell how many bytes this statement would scan: no statistics for {', '.join(unknown)} "
                f"(collect them with: python -m stats collect {' '.join(unknown)}), and skipping.max_scan_bytes = "
                f"{limit} is set")
    scanned = sum(td.bytes_kept if session.skipping_enabled else td.bytes_total for td in decision.tables)
    if scanned <= limit:
        return None
    per_table = ", ".join(f"{td.table} {td.bytes_kept if session.skipping_enabled else td.bytes_total:,}"
                          for td in decision.tables)
    return (f"this query would scan {scanned:,} bytes ({per_table}), more than skipping.max_scan_bytes = {limit:,}; "
            "add predicates that skip more files, or raise the limit with SET skipping.max_scan_bytes = N "
            "(0 lifts it)")


def failed_status(state: t.TGetOperationStatusResp) -> t.TStatus:
    if state.status.statusCode not in OK_STATUS:
        return state.status
    name = S._VALUES_TO_NAMES.get(state.operationState, str(state.operationState))
    return t.TStatus(statusCode=t.TStatusCode.ERROR_STATUS, sqlState=state.sqlState, errorCode=state.errorCode or 0,
                     errorMessage=state.errorMessage or f"the statement ended in state {name}")


def apply_change(session: Session, change: UseDatabase | TempView) -> None:
    if isinstance(change, UseDatabase):
        session.database = change.database
    elif change.name is None:
        session.temp_views_unknown = True
    else:
        session.temp_views.add(change.name)


def set_skipping(session: Session, v: SetSkipping) -> ResultSet:
    keys = ("enabled", "max_scan_bytes")
    if v.key not in keys:
        raise VirtualError(f"unknown setting skipping.{v.key}; the settings are "
                           + ", ".join(f"skipping.{k}" for k in keys))
    if v.value is not None:
        if v.key == "enabled":
            if v.value.lower() not in ("true", "false"):
                raise VirtualError(f"skipping.enabled must be true or false, not {v.value!r}")
            session.skipping_enabled = v.value.lower() == "true"
        else:
            try:
                limit = int(v.value.replace("_", ""))
            except ValueError:
                raise VirtualError(f"skipping.max_scan_bytes must be a whole number of bytes (0 for no limit), "
                                   f"not {v.value!r}") from None
            if limit < 0:
                raise VirtualError("skipping.max_scan_bytes must not be negative (0 means no limit)")
            session.max_scan_bytes = limit
    value = str(session.skipping_enabled).lower() if v.key == "enabled" else str(session.max_scan_bytes)
    return ResultSet([("key", "string"), ("value", "string")], [(f"skipping.{v.key}", value)])


EXPLAIN_COLUMNS = [("table", "string"), ("alias", "string"), ("files_before", "bigint"), ("files_after", "bigint"),
                   ("bytes_before", "bigint"), ("bytes_after", "bigint"), ("detail", "string")]


def explain_result(decision: Decision, rewritten: str | None) -> ResultSet:
    rows: list[tuple[Any, ...]] = []
    for td in decision.tables:
        if not td.has_stats:
            rows.append((td.table, td.alias, None, None, None, None, f"read whole: {td.refused}"))
            continue
        if td.refused:
            detail = f"read whole: {td.refused}"
        else:
            detail = "; ".join([f"{p.sql} rules out {p.files_removed} files"
                                + (f" [{p.untranslated}]" if p.untranslated else "") for p in td.predicates]
                               + [f"diP from {d.source} on {d.columns} ({d.via}) rules out {d.files_removed} files"
                                  for d in td.dips if d.files_removed])
        if td.unknown_files:
            detail += f"; {td.unknown_files} files without fresh statistics are read"
        rows.append((td.table, td.alias, td.files_total, td.files_kept, td.bytes_total, td.bytes_kept, detail))
    known = [td for td in decision.tables if td.has_stats]
    summary = decision.passthrough and f"not analysed: {decision.passthrough}" or decision.error and \
        f"rewriter failed open: {decision.error}" or ("rewritten: " + rewritten if rewritten else "unchanged: nothing to skip")
    rows.append(("(all)", None, sum(td.files_total for td in known), sum(td.files_kept for td in known),
                 sum(td.bytes_total for td in known), sum(td.bytes_kept for td in known),
                 f"{summary} ({decision.elapsed_ms:.1f} ms)"))
    return ResultSet(EXPLAIN_COLUMNS, rows)


LOG_COLUMNS = [("time", "string"), ("session", "string"), ("statement", "string"), ("outcome", "string"),
               ("files_before", "bigint"), ("files_after", "bigint"), ("bytes_before", "bigint"),
               ("bytes_after", "bigint"), ("rewrite_ms", "double")]


def show_log(records: list[dict[str, Any]]) -> ResultSet:
    rows = []
    for r in records:
        tables = [td for td in (r.get("decision") or {}).get("tables", []) if td.get("has_stats")]
        elapsed = (r.get("decision") or {}).get("elapsed_ms")
        rows.append((r.get("time"), r.get("session"), r.get("statement"), r.get("outcome"),
                     sum(td["files_total"] for td in tables) if tables else None,
                     sum(td["files_kept"] for td in tables) if tables else None,
                     sum(td["bytes_total"] for td in tables) if tables else None,
                     sum(td["bytes_kept"] for td in tables) if tables else None,
                     round(elapsed, 3) if elapsed is not None else None))
    return ResultSet(LOG_COLUMNS, rows)


def _short(guid: bytes) -> str:
    return guid.hex()[:12]
