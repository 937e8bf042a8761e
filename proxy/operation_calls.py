"""Calls on operations: the proxy's own (virtual statements and answers from statistics, whose rows it holds),
asynchronous clients' rewritten statements (followed until their outcome is settled), and every other
operation's, relayed to Spark as raw bytes."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from TCLIService import ttypes as t

from proxy.results import ResultSet, empty_row_set
from proxy.session import OK, S, SYNTAX_ERROR, Session, StatementFailed, error_status, operation_guid
from proxy.spark_errors import OK_STATUS
from proxy.statements import Explain, ShowLog
from proxy.virtual import VirtualError, explain_result, set_skipping, show_log
from proxy.wire import decode_reply


class OperationCalls:
    """Part of :class:`proxy.calls.Calls`."""

    # -- virtual operations ------------------------------------------------------------------------------
    def _virtual(self, session: Session, v: Any) -> t.TExecuteStatementResp:
        self.server.metrics.virtual(session.user)
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
        guid = operation_guid(req)
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
        guid = operation_guid(req)
        known = False
        for session in self.sessions.values():
            if guid is None:
                break
            if session.virtual.pop(guid, None) is not None:
                return t.TCloseOperationResp(status=OK)
            known |= session.operations.pop(guid, None) is not None
            w = session.watched.pop(guid, None)
            if w is not None:
                session.operations.pop(w.backend.operationId.guid, None)
                return self._closed(self._relay_watched(w, message), True)
        return self._closed(self._relay(message), known)

    @staticmethod
    def _closed(reply: bytes, known: bool) -> Any:
        """Spark's reply to closing one of this client's operations, or success where Spark had closed it
        already: the embedded backend closes a finished operation left idle (``backend.idle_operation_timeout_
        seconds``), and a client closing it later (pyhive does, before its cursor's next statement) must not
        fail for that."""
        if not known:
            return reply
        response = decode_reply("CloseOperation", reply)
        if response.status.statusCode not in OK_STATUS and \
                (response.status.errorMessage or "").startswith("Invalid OperationHandle"):
            return t.TCloseOperationResp(status=OK)
        return reply

