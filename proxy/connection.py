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
- Statements that change what the rewriter relies on (``USE``, temporary views, settings; see
  ``proxy/statements.py``) are run to completion before the reply, so the session state it keeps
  (``proxy/session_state.py``) is never ahead of, or behind, Spark's.
- When a rewritten statement fails on Spark, the original is run instead unless the error is one the
  original would raise too (``proxy/spark_errors.py``): at once for a synchronous client, and when an
  asynchronous client polls its handle, which then stands for the original's operation
  (``proxy/operations.py``). Failures reach a synchronous client in the shape Spark gives it directly.
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
from proxy.operations import Watched, substitute_handle
from proxy.results import ResultSet, empty_row_set, row_tuples
from proxy.session_state import LIST_SETTINGS, SessionState
from proxy.spark_errors import OK_STATUS, rerun_reason, spark_message, sync_status
from proxy.statements import (SPARK_CATALOG, Explain, NamesUnknown, SessionChange, ShowLog, session_change,
                              tables_redefined, virtual)
from proxy.virtual import VirtualError, explain_result, over_budget, set_skipping, show_log
from proxy.wire import (SASL_BAD, SASL_COMPLETE, SASL_OK, SASL_START, STRICT_VERSION_BYTE, Channel, ProtocolError,
                        decode_call, decode_reply, encode_exception, encode_reply, message_header,
                        response_class, sasl_plain_credentials)
from proxy.catalog_check import catalog_partitions, check_locations
from proxy.stats_answers import TimedCache, analysis_statement, answer_result, schema_disagreement
from rewriter.stats_answer import stats_answer
from rewriter.rewrite import Rewrite, RewriteContext, rewrite

if TYPE_CHECKING:
    from proxy.server import ProxyServer

log = logging.getLogger("dipper.proxy")

TICK = 0.5  # how often an idle connection checks for shutdown and idle timeout
S = t.TOperationState
TERMINAL = {S.FINISHED_STATE, S.CANCELED_STATE, S.CLOSED_STATE, S.ERROR_STATE, S.UKNOWN_STATE, S.TIMEDOUT_STATE}
LIMIT_EXCEEDED = "54000"  # SQLSTATE: program limit exceeded
SYNTAX_ERROR = "42000"


class ClientGone(Exception):
    """The client closed its connection."""


class StatementFailed(Exception):
    """A statement the proxy ran on its own behalf failed on Spark: ``message`` and ``sql_state`` are Spark's."""

    def __init__(self, sql: str, message: str, sql_state: str | None = None) -> None:
        super().__init__(f"{sql}: {message}")
        self.message = message
        self.sql_state = sql_state


@dataclasses.dataclass
class Session:
    handle: t.TSessionHandle
    user: str
    protocol: int
    skipping_enabled: bool
    max_scan_bytes: int
    metadata_answers: bool = True
    # Spark's analysis of a statement (its schema, or the error it raised) and the catalog's word on a table's
    # location and partitions, reused briefly (proxy/stats_answers.py); forgotten at any statement that changes
    # the session.
    analysed: TimedCache[t.TTableSchema | StatementFailed] = dataclasses.field(default_factory=lambda: TimedCache(0))
    located: TimedCache[str | None] = dataclasses.field(default_factory=lambda: TimedCache(0))
    partitions: TimedCache[frozenset[str]] = dataclasses.field(default_factory=lambda: TimedCache(0))
    state: SessionState = dataclasses.field(default_factory=SessionState)  # database, settings, temporary views
    # A session's operations live in it, so closing the session forgets them too (Spark closes a session's
    # operations with it): no stale handle keeps a draining connection open, no virtual result lingers.
    operations: dict[bytes, t.TOperationHandle] = dataclasses.field(default_factory=dict)  # open on the backend
    virtual: dict[bytes, ResultSet] = dataclasses.field(default_factory=dict)  # answered by the proxy itself
    watched: dict[bytes, Watched] = dataclasses.field(default_factory=dict)  # by the client's handle's guid

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
                              p.max_scan_bytes, p.metadata_answers, TimedCache(p.analysis_cache_seconds),
                              TimedCache(p.analysis_cache_seconds), TimedCache(p.analysis_cache_seconds))
            database = (req.configuration or {}).get("use:database")
            if database:
                session.state.database = database.strip("`").lower()
            self.sessions[session.key] = session
            self._learn_settings(session, req.configuration)
            log.info("session %s opened for %s from %s (protocol V%d)", _short(session.key), user, self.peer,
                     session.protocol + 1)
        return reply

    def _close_session(self, req: t.TCloseSessionReq, message: bytes) -> Any:
        if req.sessionHandle is not None and req.sessionHandle.sessionId is not None:
            self.sessions.pop(req.sessionHandle.sessionId.guid, None)  # its operations with it, as on Spark
        return self._relay(message)

    # -- what the proxy asks the backend session itself --------------------------------------------------
    def _learn_settings(self, session: Session, configuration: dict[str, str] | None = None) -> None:
        """Read the session's settings from Spark (see proxy/session_state.py); if that fails, the session's
        settings are unknown and nothing is pruned in it until they are read."""
        try:
            session.state.learned_settings(self._backend_rows(session, LIST_SETTINGS), configuration)
        except StatementFailed as e:
            log.warning("cannot read the settings of session %s from Spark (nothing is pruned in it): %s",
                        _short(session.key), e)
            session.state.settings_unreadable(str(e))

    def _learn_database(self, session: Session) -> None:
        """Ask Spark which database the session is in, after a statement that may have switched it without
        saying so (``EXECUTE IMMEDIATE 'USE db'``); unknown (nothing pruned or answered) if that fails or the
        session is in another catalog."""
        try:
            [(catalog, database)] = self._backend_rows(session, "SELECT current_catalog(), current_database()")
        except (StatementFailed, ValueError) as e:
            log.warning("cannot read the database of session %s (nothing is pruned in it until USE): %s",
                        _short(session.key), e)
            session.state.database = None
            return
        session.state.database = str(database).lower() if str(catalog).lower() == SPARK_CATALOG else None

    def _look_up_temp_views(self, session: Session) -> None:
        """Ask Spark which temporary views the session has, after a statement whose effect on them could not be
        read. If that fails, the set stays stale and every unqualified name counts as a possible view."""
        try:
            session.state.learned_temp_views(self._backend_rows(session, session.state.list_temp_views))
        except StatementFailed as e:
            log.warning("cannot list the temporary views of session %s (unqualified names are not pruned): %s",
                        _short(session.key), e)

    def _backend_rows(self, session: Session, sql: str) -> list[tuple[Any, ...]]:
        """Run a short statement of the proxy's own in the client's backend session and return its rows."""
        return self._backend_statement(session, sql, rows=True)[1]

    def _backend_statement(self, session: Session, sql: str, rows: bool) -> tuple[t.TTableSchema | None,
                                                                                   list[tuple[Any, ...]]]:
        """Run a statement of the proxy's own in the client's backend session: its result's schema, and its rows
        if asked for. Spark's refusal raises :class:`StatementFailed` with Spark's message and SQLSTATE."""
        return self._own_result(sql, self._own_submit(session, sql), rows)

    def _own_submit(self, session: Session, sql: str) -> t.TOperationHandle:
        """Start a statement of the proxy's own in the client's backend session (``_own_result`` ends it)."""
        # Asynchronously, as clients' statements run: a synchronous statement runs on the Thrift Server's
        # connection thread, where a Hive metastore on PostgreSQL answered SHOW TABLES with no table at all
        # (DataNucleus could not map TBLS on a metastore client set up for that thread).
        response = self._backend().call("ExecuteStatement", t.TExecuteStatementReq(sessionHandle=session.handle,
                                                                                   statement=sql, runAsync=True))
        if response.status.statusCode not in OK_STATUS or response.operationHandle is None:
            raise StatementFailed(sql, spark_message(response.status.errorMessage or "no operation"),
                                  response.status.sqlState)
        return response.operationHandle

    def _own_result(self, sql: str, handle: t.TOperationHandle, rows: bool) -> tuple[t.TTableSchema | None,
                                                                                      list[tuple[Any, ...]]]:
        """Wait for a statement ``_own_submit`` started; its schema, or its rows; the operation is closed."""
        backend = self._backend()
        out: list[tuple[Any, ...]] = []
        batch_size = 10_000
        try:
            state = self._run_to_end(handle)
            if state.operationState != S.FINISHED_STATE:
                raise StatementFailed(sql, spark_message(state.errorMessage or state.status.errorMessage or ""),
                                      state.sqlState or state.status.sqlState)
            if not rows:
                meta = backend.call("GetResultSetMetadata", t.TGetResultSetMetadataReq(operationHandle=handle))
                if meta.status.statusCode not in OK_STATUS:
                    raise StatementFailed(sql, spark_message(meta.status.errorMessage or ""), meta.status.sqlState)
                return meta.schema, out
            while True:
                fetched = backend.call("FetchResults", t.TFetchResultsReq(
                    operationHandle=handle, orientation=t.TFetchOrientation.FETCH_NEXT, maxRows=batch_size))
                if fetched.status.statusCode not in OK_STATUS:
                    raise StatementFailed(sql, spark_message(fetched.status.errorMessage or ""),
                                          fetched.status.sqlState)
                batch = row_tuples(fetched.results)
                out.extend(batch)
                if len(batch) < batch_size:
                    return None, out
        finally:
            backend.call("CloseOperation", t.TCloseOperationReq(operationHandle=handle))

    def _analysis(self, session: Session, statement: str) -> t.TTableSchema:
        """Spark's analysis of ``statement`` in the client's own session (``proxy/stats_answers.py``): the schema of
        its result, or :class:`StatementFailed` with Spark's error. Asked before any statistic reaches the
        client, so that whatever access control Spark enforces applies to what the statistics tell."""
        found = self._start_analysis(session, statement)()
        if isinstance(found, StatementFailed):
            raise found
        return found

    def _start_analysis(self, session: Session, statement: str) -> Callable[[], t.TTableSchema | StatementFailed]:
        """Have Spark start analysing ``statement`` (unless the session has its analysis already); the function
        returned waits for the schema, or Spark's refusal, which is cached too (asked again within the window,
        the same refusal). Spark analyses while the proxy asks other things in the meantime."""
        key = (session.state.database, statement)
        hit = session.analysed.peek(key)
        if hit is not None:
            return lambda: hit
        sql = analysis_statement(statement)
        try:
            handle = self._own_submit(session, sql)
        except StatementFailed as e:
            session.analysed.put(key, e)
            return lambda: e

        def finish() -> t.TTableSchema | StatementFailed:
            try:
                result: t.TTableSchema | StatementFailed = self._own_result(sql, handle, rows=False)[0]
            except StatementFailed as e:
                result = e
            session.analysed.put(key, result)
            return result
        return finish

    def _catalog_reads(self, session: Session, table: str, location: str) -> bool:
        """Whether the catalog, asked in the client's session, still reads ``table`` at ``location`` (where its
        statistics were collected; ``proxy/catalog_check.py``)."""
        def ask() -> str | None:
            unusable, stale = check_locations(lambda sql: self._backend_rows(session, sql), {table: location})
            return None if unusable or stale else location
        return session.located.get((table, location), ask) == location

    # -- statements --------------------------------------------------------------------------------------
    def _execute_statement(self, req: t.TExecuteStatementReq, message: bytes) -> Any:
        session = self.sessions.get(_session_guid(req))
        if session is None:  # not opened through this connection: nothing to interpret
            return self._relay(message)
        statement = req.statement or ""
        v = virtual(statement)
        if v is not None:
            return self._virtual(session, v)
        if self.server.stopping.is_set():
            return t.TExecuteStatementResp(status=error_status("Dipper: the proxy is shutting down", "08004"))
        change = session_change(statement)
        if change is not None:  # names, settings or access may differ now
            session.analysed.clear()
            session.located.clear()
            session.partitions.clear()
        record = self._record(session, statement)
        sent = statement
        state = session.state
        self._forget_redefined(statement, state.database, record)
        if change is None:
            if state.database is None:
                record["outcome"] = "passed through: the session switched catalogs"
            else:
                if state.temp_views_stale:
                    self._look_up_temp_views(session)
                answered = self._answer_from_statistics(session, req, record)
                if answered is not None:
                    return answered
                context, result = self._rewrite(session, statement, record, req.confOverlay)
                decision = result.decision
                record["settings"] = dataclasses.asdict(context.session)
                record["decision"] = decision.to_dict()
                refusal = over_budget(session, decision)
                if refusal is not None and self._analysis_refusal(session, statement, decision, record) is not None:
                    refusal = None  # Spark refuses the statement itself: it gets the statement, and says why
                if refusal is not None:
                    record["outcome"] = "refused: " + refusal
                    self.server.decision_log.write(record)
                    return t.TExecuteStatementResp(status=error_status(f"Dipper: {refusal}", LIMIT_EXCEEDED))
                if session.skipping_enabled:
                    sent = result.sql
                else:
                    record["outcome"] = "passed through: skipping disabled in this session"
        elif isinstance(change, NamesUnknown):
            # Stale even if the statement fails: a script may have run part of its statements.
            state.temp_views_stale = True
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

    def _answer_from_statistics(self, session: Session, req: t.TExecuteStatementReq,
                                record: dict[str, Any]) -> t.TExecuteStatementResp | None:
        """Answer the statement from statistics as a virtual operation (``rewriter/stats_answer.py``), or None
        to send it on: not of a shape answered, statistics not exact for it, the catalog reads the table
        elsewhere, Spark refuses to analyse it (then Spark's own error reaches the client when it runs), or its
        types differ from Spark's."""
        if not (session.metadata_answers and session.skipping_enabled) or req.confOverlay:
            return None  # off; or settings for this statement alone, which Spark's analysis would not see
        statement = req.statement or ""
        attempt = stats_answer(statement, self._context(session))
        answer = attempt.answer
        if answer is None:
            if attempt.why_not and not attempt.why_not.startswith(("not one SELECT", "not parsed")):
                record["not_answered_from_statistics"] = attempt.why_not
            return None
        started = time.perf_counter()
        try:
            analysed = self._start_analysis(session, statement)  # Spark analyses while the catalog is asked
            try:
                located = self._catalog_reads(session, answer.table, answer.stats_location)
                unlisted = sorted(answer.folders - session.partitions.get(answer.table, lambda: catalog_partitions(
                    lambda sql: self._backend_rows(session, sql), answer.table))) if located and answer.folders else []
            finally:
                schema = analysed()
            if not located:
                record["not_answered_from_statistics"] = f"the catalog does not read {answer.table} where its " \
                                                         "statistics were collected"
                return None
            if unlisted:  # files Spark does not read (a dropped partition's, a folder never added)
                record["not_answered_from_statistics"] = f"the catalog lists no partition {unlisted[0]} of " \
                                                         f"{answer.table}, whose folder holds files"
                return None
            if isinstance(schema, StatementFailed):
                raise schema
            why = schema_disagreement(answer.types, schema)
            if why is not None:
                log.warning("not answered from statistics, the types differ: %s", why)
                record["not_answered_from_statistics"] = f"the types differ: {why}"
                return None
            result = answer_result(answer.types, answer.rows, schema)
        except StatementFailed as e:
            record["not_answered_from_statistics"] = f"Spark refused to analyse it: {e.message[:200]}"
            return None
        except (BackendError, ClientGone, OSError):
            raise
        except Exception as e:  # noqa: BLE001 - a check that fails sends the statement to Spark (fail open)
            log.warning("not answered from statistics: %s: %s", type(e).__name__, e)
            record["not_answered_from_statistics"] = f"failed: {type(e).__name__}: {e}"
            return None
        record.update(outcome="answered from statistics", answer={
            "table": answer.table, "files": answer.files, "files_ruled_out": answer.files_ruled_out,
            "rows": len(answer.rows), "answer_ms": round(attempt.elapsed_ms, 2),
            "checks_ms": round((time.perf_counter() - started) * 1000, 2)})
        self.server.decision_log.write(record)
        return self._virtual_operation(session, result)

    def _analysis_refusal(self, session: Session, statement: str, decision: Any,
                          record: dict[str, Any]) -> StatementFailed | None:
        """Spark's refusal to analyse, in the client's session, the statement whose statistics a message would
        show (a dry run, a byte-budget refusal); None if Spark analyses it, or the statement names no table. Asked
        for any table, with statistics or not: a table dropped since collection must get Spark's error, not a
        dry run that says whether the store knows it."""
        if not decision.tables:  # not analysed as a query: no table's statistics are shown
            return None
        try:
            self._analysis(session, statement)
        except StatementFailed as e:
            record["analysis_refused"] = e.message[:300]
            return e
        return None

    def _forget_redefined(self, statement: str, database: str | None, record: dict[str, Any]) -> None:
        """Before a statement that may point a catalog table's name at other files runs, that table's statistics
        go (whether it then succeeds or not: a failed statement costs a re-collection, never an answer)."""
        tables = []
        for name in tables_redefined(statement):
            if len(name) == 3 and name[0] != SPARK_CATALOG:
                continue  # another catalog's table: never the store's
            if len(name) == 1 and database is None:
                continue  # the session switched to another catalog: not a table of ours
            tables.append(".".join(name[-2:]) if len(name) > 1 else f"{database}.{name[0]}")
        if tables:
            self._drop_statistics(tables, record, "before: " + " ".join(statement.split())[:200])

    def _drop_statistics(self, tables: list[str], record: dict[str, Any], why: str,
                         collected_at: dict[str, str] | None = None) -> None:
        """Drop the statistics of ``tables`` (only those still of ``collected_at``'s location, if given) and
        say so in the statement's record."""
        dropped = self.server.forget_statistics(tables, collected_at)
        if dropped:
            record["statistics_dropped"] = dropped
            log.info("statistics of %s dropped: %s", ", ".join(dropped), why)

    def _run(self, session: Session, req: t.TExecuteStatementReq, sent: str, change: SessionChange | None,
             record: dict[str, Any]) -> t.TExecuteStatementResp:
        """Submit ``sent`` asynchronously, and wait for its end if the client asked for a synchronous call or the
        statement changes the session. A rewritten statement of an asynchronous client is watched instead."""
        rewritten = sent != (req.statement or "")
        response = self._submit(session, req, sent)
        if rewritten and response.status.statusCode not in OK_STATUS:
            again = self._after_rewrite_failed(session, req, record, None, response.status.sqlState,
                                               response.status.errorMessage)
            if again is not None:
                response, rewritten = again, False  # the original runs now: nothing more to fall back to
        if response.status.statusCode not in OK_STATUS:
            return response
        if req.runAsync and change is None:
            if rewritten:
                handle = response.operationHandle
                session.watched[handle.operationId.guid] = Watched(client=handle, backend=handle, request=req)
                record["operation"] = _short(handle.operationId.guid)
            return response
        state = self._run_to_end(response.operationHandle)
        if rewritten and state.operationState == S.ERROR_STATE:
            again = self._after_rewrite_failed(session, req, record, response.operationHandle, state.sqlState,
                                               state.errorMessage)
            if again is not None:
                response = again
                if response.status.statusCode not in OK_STATUS:
                    return response
                state = self._run_to_end(response.operationHandle)
        if state.operationState == S.FINISHED_STATE and change is not None and session.state.apply(change):
            self._learn_settings(session)
            if isinstance(change, NamesUnknown):
                self._learn_database(session)
        if not req.runAsync and state.operationState != S.FINISHED_STATE:
            self._close_backend_operation(session, response.operationHandle)
            response = t.TExecuteStatementResp(status=sync_status(state))
        return response

    def _submit(self, session: Session, req: t.TExecuteStatementReq, statement: str) -> t.TExecuteStatementResp:
        forwarded = t.TExecuteStatementReq(sessionHandle=req.sessionHandle, statement=statement,
                                           confOverlay=req.confOverlay, runAsync=True, queryTimeout=req.queryTimeout)
        response = self._backend().call("ExecuteStatement", forwarded)
        if response.status.statusCode in OK_STATUS and response.operationHandle is not None:
            session.operations[response.operationHandle.operationId.guid] = response.operationHandle
        return response

    def _after_rewrite_failed(self, session: Session, req: t.TExecuteStatementReq, record: dict[str, Any],
                              failed: t.TOperationHandle | None, sql_state: str | None,
                              error: str | None) -> t.TExecuteStatementResp | None:
        """The rewritten statement failed on Spark: submit the original instead (fail open) and return Spark's
        response, or None when the error is the original's own (a data error) and is to be returned as it is.
        Either way the record says which."""
        reason = rerun_reason(sql_state, error)
        message = spark_message(error or "")
        record["rewrite_failed_on_spark"] = message
        if reason is None:
            record["outcome"] = (f"the rewritten statement raised a data error (SQLSTATE {sql_state}), which the "
                                 "original raises on the same rows: returned without running the original")
            return None
        log.warning("the rewritten statement failed on Spark, sending the original instead (%s): %s", reason,
                    message[:300])
        record["outcome"] = "fell back to the original: the rewritten statement failed on Spark"
        record["fallback_reason"] = reason
        if failed is not None:
            self._close_backend_operation(session, failed)
        return self._submit(session, req, req.statement or "")

    def _run_to_end(self, handle: t.TOperationHandle) -> t.TGetOperationStatusResp:
        """Poll the backend until the operation ends; cancel it if the client goes away meanwhile.

        The next poll comes after a tenth of the time the statement has run so far (0.5 ms to 50 ms), so the wait
        adds at most about a tenth to a statement's time. Doubling the delay instead made a 35 ms statement wait
        for the poll at 63 ms (SHOW TABLES through the proxy took 73 ms against 35 ms directly, docs/metadata.md)."""
        first = time.monotonic()
        while True:
            started = time.monotonic()
            state = self._backend().call("GetOperationStatus", t.TGetOperationStatusReq(operationHandle=handle))
            if state.status.statusCode not in OK_STATUS or state.operationState in TERMINAL:
                return state
            if self._client_gone():
                log.info("client %s disconnected during a statement; cancelling it", self.peer)
                raise ClientGone  # close() cancels every open operation and closes the sessions
            if time.monotonic() - started < 0.05:  # the backend answered at once: wait a little
                time.sleep(min(max((time.monotonic() - first) / 10, 0.0005), 0.05))

    def _client_gone(self) -> bool:
        assert self.client is not None
        return self.client.readable(0) and self.client.at_eof()

    def _close_backend_operation(self, session: Session, handle: t.TOperationHandle) -> None:
        session.operations.pop(handle.operationId.guid, None)
        self._backend().call("CloseOperation", t.TCloseOperationReq(operationHandle=handle))

    def _rewrite(self, session: Session, statement: str, record: dict[str, Any],
                 overlay: dict[str, str] | None = None, sizes_shown: bool = False) -> tuple[RewriteContext, Rewrite]:
        """Rewrite ``statement``, with statistics the catalog still points at (``proxy/catalog_check.py``): checked
        when the statement was changed or its sizes are shown (a dry run, a byte budget). If the catalog
        cannot be read, the original is sent unchanged (failing open)."""
        context = self._context(session, overlay)
        result = rewrite(statement, context)
        if not (result.changed or sizes_shown or session.max_scan_bytes):
            return context, result
        used = {td.table: td.stats_location for td in result.decision.tables if td.has_stats and td.stats_location}
        if not used:  # no statistics spoke for this statement: nothing to check
            return context, result
        started = time.perf_counter()
        try:
            unusable, stale = check_locations(lambda sql: self._backend_rows(session, sql), used)
            if stale:
                self._drop_statistics(list(stale), record, "the catalog reads them elsewhere now", stale)
        except Exception as e:  # noqa: BLE001 - whatever fails here, the original is sent (fail open)
            result.decision.error = f"the catalog could not be asked where the tables are now: {e}"
            result.decision.changed = False
            return context, Rewrite(sql=statement, original=statement, decision=result.decision)
        finally:
            record["catalog_check_ms"] = round((time.perf_counter() - started) * 1000, 1)
        if not unusable:
            return context, result
        log.warning("statistics not used: %s", "; ".join(unusable.values()))
        context = dataclasses.replace(context, unusable=unusable)
        return context, rewrite(statement, context)

    def _context(self, session: Session, overlay: dict[str, str] | None = None) -> RewriteContext:
        state = session.state
        assert state.database is not None
        r = self.config.rewriter
        return RewriteContext(self.server.stats, database=state.database, session=state.settings_for(overlay),
                              shadowed=frozenset(state.temp_views), shadow_all_unqualified=state.temp_views_stale,
                              key_cache=self.server.key_cache, **r.context_options())

    # -- asynchronous clients' rewritten statements (proxy/operations.py) --------------------------------
    def _watched(self, req: Any) -> tuple[Session, Watched] | None:
        guid = _operation_guid(req)
        if guid is None:
            return None
        for session in self.sessions.values():
            if guid in session.watched:
                return session, session.watched[guid]
        return None

    def _follow(self, session: Session, w: Watched, wait: bool = False) -> t.TGetOperationStatusResp:
        """The status of a watched statement whose outcome is open; submits the original if the rewritten form
        failed in a way the original may not (and with ``wait``, waits for the original to end)."""
        state = self._backend().call("GetOperationStatus", t.TGetOperationStatusReq(operationHandle=w.backend))
        if state.status.statusCode not in OK_STATUS:
            return state
        if state.operationState == S.ERROR_STATE:
            record = self._record(session, w.request.statement or "")
            record["operation"] = _short(w.client.operationId.guid)
            record["client_call"] = "asynchronous: the client polled its handle"
            w.settled = True
            try:
                again = self._after_rewrite_failed(session, w.request, record, w.backend, state.sqlState,
                                                   state.errorMessage)
                if again is not None and again.status.statusCode in OK_STATUS:
                    w.backend = again.operationHandle
                    state = self._run_to_end(w.backend) if wait else self._backend().call(
                        "GetOperationStatus", t.TGetOperationStatusReq(operationHandle=w.backend))
                elif again is not None:  # the original could not even be submitted: that is its answer
                    status = again.status
                    state = t.TGetOperationStatusResp(status=OK, operationState=S.ERROR_STATE, sqlState=status.sqlState,
                                                      errorCode=status.errorCode, errorMessage=status.errorMessage)
            finally:
                self.server.decision_log.write(record)
        elif state.operationState in TERMINAL:
            w.settled = True
        return state

    def _relay_watched(self, w: Watched, message: bytes) -> bytes:
        return self._relay(substitute_handle(message, w.client, w.backend) if w.mapped else message)

    def _record(self, session: Session, statement: str) -> dict[str, Any]:
        return {"time": dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"), "user": session.user,
                "client": self.peer, "session": _short(session.key), "database": session.state.database,
                "statement": statement}

    # -- virtual operations ------------------------------------------------------------------------------
    def _virtual(self, session: Session, v: Any) -> t.TExecuteStatementResp:
        try:
            result = self._answer(session, v)
        except VirtualError as e:
            return t.TExecuteStatementResp(status=error_status(f"Dipper: {e}", SYNTAX_ERROR))
        except StatementFailed as e:  # Spark refused to analyse the statement: its error, and nothing else
            return t.TExecuteStatementResp(status=error_status(e.message, e.sql_state))
        return self._virtual_operation(session, result)

    def _virtual_operation(self, session: Session, result: ResultSet) -> t.TExecuteStatementResp:
        """A finished operation of the proxy's own whose rows are ``result``."""
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
        if session.state.database is None:
            raise VirtualError("the session switched to another catalog; Dipper only knows spark_catalog's tables")
        if session.state.temp_views_stale:
            self._look_up_temp_views(session)
        record = self._record(session, query)
        context, result = self._rewrite(session, query, record, sizes_shown=True)
        refused = self._analysis_refusal(session, query, result.decision, record)
        if refused is not None:
            record["outcome"] = "refused: Spark refused to analyse the statement"
            self.server.decision_log.write(record)
            raise refused
        record.update(outcome="explained (dry run, nothing executed)", decision=result.decision.to_dict(),
                      settings=dataclasses.asdict(context.session))
        if result.changed:
            record["sent"] = result.sql
        self.server.decision_log.write(record)
        return explain_result(result.decision, result.sql if result.changed else None)

    def _virtual_result(self, req: Any) -> ResultSet | None:
        guid = _operation_guid(req)
        if guid is None:
            return None
        for session in self.sessions.values():  # a connection has one session, rarely a few
            if guid in session.virtual:
                return session.virtual[guid]
        return None

    # A call without an operation handle is relayed: the client gets what Spark answers to it.
    def _operation_status(self, req: t.TGetOperationStatusReq, message: bytes) -> Any:
        if self._virtual_result(req) is not None:
            return t.TGetOperationStatusResp(status=OK, operationState=S.FINISHED_STATE, hasResultSet=True)
        if (found := self._watched(req)) is not None:
            session, w = found
            return self._relay_watched(w, message) if w.settled else self._follow(session, w)
        return self._relay(message)

    def _result_set_metadata(self, req: t.TGetResultSetMetadataReq, message: bytes) -> Any:
        result = self._virtual_result(req)
        if result is not None:
            return t.TGetResultSetMetadataResp(status=OK, schema=result.schema())
        return self._relay_operation_call(req, message)

    def _fetch_results(self, req: t.TFetchResultsReq, message: bytes) -> Any:
        result = self._virtual_result(req)
        if result is None:
            return self._relay_operation_call(req, message)
        if req.fetchType == 1:  # operation logs: the proxy's answers have none
            return t.TFetchResultsResp(status=OK, hasMoreRows=False, results=empty_row_set(result.protocol))
        rows = result.fetch(req.maxRows, from_start=req.orientation == t.TFetchOrientation.FETCH_FIRST)
        return t.TFetchResultsResp(status=OK, hasMoreRows=result.offset < len(result.rows), results=rows)

    def _relay_operation_call(self, req: Any, message: bytes) -> bytes:
        """Metadata and results of a backend operation: a watched one whose outcome is open is followed first
        (a client may fetch without polling), so the fetch reaches the operation that answers for it."""
        found = self._watched(req)
        if found is None:
            return self._relay(message)
        session, w = found
        if not w.settled:
            self._follow(session, w, wait=True)
        return self._relay_watched(w, message)

    def _cancel_operation(self, req: t.TCancelOperationReq, message: bytes) -> Any:
        if self._virtual_result(req) is not None:
            return t.TCancelOperationResp(status=OK)
        if (found := self._watched(req)) is not None:
            _, w = found
            w.settled = True  # cancelled: nothing is re-run for it
            return self._relay_watched(w, message)
        return self._relay(message)

    def _close_operation(self, req: t.TCloseOperationReq, message: bytes) -> Any:
        guid = _operation_guid(req)
        for session in self.sessions.values():
            if guid is None:
                break
            if session.virtual.pop(guid, None) is not None:
                return t.TCloseOperationResp(status=OK)
            session.operations.pop(guid, None)
            w = session.watched.pop(guid, None)
            if w is not None:
                session.operations.pop(w.backend.operationId.guid, None)
                return self._relay_watched(w, message)
        return self._relay(message)


def _short(guid: bytes) -> str:
    return guid.hex()[:12]


def _operation_guid(req: Any) -> bytes | None:
    """The operation a request names; None when the client sent none (e.g. pyhive's cancel() before any execute)."""
    handle = getattr(req, "operationHandle", None)
    return handle.operationId.guid if handle is not None and handle.operationId is not None else None


def _session_guid(req: Any) -> bytes | None:
    handle = getattr(req, "sessionHandle", None)
    return handle.sessionId.guid if handle is not None and handle.sessionId is not None else None
