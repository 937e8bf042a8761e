"""Calls whose text is not valid UTF-8 (issue 62): never a reason to drop the client's connection.

Spark decodes such text with replacement characters and answers as usual; a proxy that cannot decode a call
must not do worse. So:

- An ``ExecuteStatement`` is relayed as the client's own bytes, unrewritten: Spark then decodes it exactly as it
  would without Dipper, so the answer is Spark's, whatever its decoder makes of the bytes (re-encoding the
  statement from Python could not promise that). Its decision record says why it was passed through, with the
  statement's undecodable bytes as replacement characters, so the log stays valid JSON. Its operation is
  tracked like any other, so a client that disconnects gets it cancelled.
- Any other call the proxy interprets (``OpenSession``: credentials and settings) gets an error status naming
  the problem, on the same connection. Calls the proxy only relays are never decoded, so they never get here.
"""

from __future__ import annotations

import logging
from typing import Any

from TCLIService import ttypes as t

from proxy.session import error_status, session_guid
from proxy.spark_errors import OK_STATUS
from proxy.wire import NotUtf8, ProtocolError, decode_reply, encode_reply, response_class

log = logging.getLogger("dipper.proxy")

NOT_UTF8_STATE = "22021"  # SQLSTATE: character not in repertoire


class Undecodable:
    """Part of :class:`proxy.calls.Calls`."""

    def _undecodable(self, name: str, seqid: int, request: Any, message: bytes, problem: NotUtf8) -> Any:
        """The reply to call ``name``, whose ``request`` was decoded with ``surrogateescape`` after ``problem``."""
        if name == "ExecuteStatement":
            return self._relay_undecodable_statement(request, message)
        log.warning("answering %s of %s with an error: %s", name, self.peer, problem)
        response = response_class(name)(status=error_status(
            f"Dipper: {problem}; send text in UTF-8 (the proxy could not read this request, so it was not sent on)",
            NOT_UTF8_STATE))
        if name == "OpenSession":  # a required field: Java clients refuse the reply without it
            response.serverProtocolVersion = request.client_protocol
        return encode_reply(name, response, seqid)

    def _relay_undecodable_statement(self, req: t.TExecuteStatementReq, message: bytes) -> Any:
        session = self.sessions.get(session_guid(req))
        if session is None:  # not opened through this connection: relayed like any such statement
            return self._relay(message)
        if self.server.stopping.is_set():
            return t.TExecuteStatementResp(status=error_status("Dipper: the proxy is shutting down", "08004"))
        statement = readable(req.statement or "")
        record = self._record(session, statement)
        record["outcome"] = ("passed through unchanged: the statement is not valid UTF-8" if statement != req.statement
                             else "passed through unchanged: its settings (confOverlay) are not valid UTF-8")
        try:
            reply = self._relay(message)
        except Exception as e:  # noqa: BLE001 - re-raised; the record only says the statement did not complete
            record["outcome"] = f"failed: {e}"
            raise
        finally:
            self.server.decision_log.write(record)
        try:
            response = decode_reply("ExecuteStatement", reply)
        except ProtocolError:  # the client gets Spark's reply as it is, whatever it holds
            return reply
        if response.status.statusCode in OK_STATUS and response.operationHandle is not None:
            handle = response.operationHandle
            session.operations[handle.operationId.guid] = handle  # cancelled if the client disconnects
        return reply


def readable(text: str) -> str:
    """``text`` decoded with ``surrogateescape``, with each undecodable byte as U+FFFD (valid UTF-8, for the log)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
