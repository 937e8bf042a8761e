"""A client's HiveServer2 session as the proxy keeps it, and what every module handling client calls shares:
the errors of statements the proxy runs itself, Spark's operation states, status replies and handle ids."""

from __future__ import annotations

import dataclasses
from typing import Any

from TCLIService import ttypes as t

from proxy.operations import Watched
from proxy.results import ResultSet
from proxy.session_state import SessionState
from proxy.stats_answers import TimedCache

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
    # The catalog's column types of tables without statistics (``Decision.untyped``), None where it has no table.
    types: TimedCache[dict[str, str] | None] = dataclasses.field(default_factory=lambda: TimedCache(0))
    state: SessionState = dataclasses.field(default_factory=SessionState)  # database, settings, temporary views
    # Table -> the digest of the listing (``rewriter.stats_answer.Answer.listing``) this session's Spark was last
    # made to list by the proxy (REFRESH TABLE before an answer from statistics).
    listed: dict[str, str] = dataclasses.field(default_factory=dict)
    # A session's operations live in it, so closing the session forgets them too (Spark closes a session's
    # operations with it): no stale handle keeps a draining connection open, no virtual result lingers.
    operations: dict[bytes, t.TOperationHandle] = dataclasses.field(default_factory=dict)  # open on the backend
    virtual: dict[bytes, ResultSet] = dataclasses.field(default_factory=dict)  # answered by the proxy itself
    watched: dict[bytes, Watched] = dataclasses.field(default_factory=dict)  # by the client's handle's guid

    @property
    def key(self) -> bytes:
        return self.handle.sessionId.guid

    def forget_catalog_answers(self) -> None:
        """Forget what Spark and the catalog told of statements and tables (analyses, locations, partitions,
        column types): after a statement that may change names, settings, access or a table's definition."""
        for cache in (self.analysed, self.located, self.partitions, self.types):
            cache.clear()


def error_status(message: str, sql_state: str | None = None) -> t.TStatus:
    return t.TStatus(statusCode=t.TStatusCode.ERROR_STATUS, errorMessage=message, sqlState=sql_state, errorCode=0)


OK = t.TStatus(statusCode=t.TStatusCode.SUCCESS_STATUS)



def short_id(guid: bytes) -> str:
    return guid.hex()[:12]


def operation_guid(req: Any) -> bytes | None:
    """The operation a request names; None when the client sent none (e.g. pyhive's cancel() before any execute)."""
    handle = getattr(req, "operationHandle", None)
    return handle.operationId.guid if handle is not None and handle.operationId is not None else None


def session_guid(req: Any) -> bytes | None:
    handle = getattr(req, "sessionHandle", None)
    return handle.sessionId.guid if handle is not None and handle.sessionId is not None else None
