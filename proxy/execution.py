"""A client's statement: answered from statistics, or rewritten (failing open), checked against the byte
budget, logged and sent to Spark asynchronously; run again unchanged when the rewritten form fails on Spark (at
once for a synchronous client, when an asynchronous client polls its handle: ``proxy/operations.py``); and a
statement that changes the session run to its end before the reply, so the state the proxy keeps of it is never
ahead of, or behind, Spark's."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import time
from typing import Any

from TCLIService import ttypes as t

from dipper.errors import BackendError
from proxy.catalog_check import UNREADABLE, catalog_fingerprints, catalog_partitions, check_locations, unchanged
from proxy.operations import Watched, substitute_handle
from proxy.session import (LIMIT_EXCEEDED, OK, TERMINAL, ClientGone, S, Session, StatementFailed, error_status,
                           operation_guid, session_guid, short_id)
from proxy.spark_errors import OK_STATUS, note_failure, rerun_reason, spark_message, sync_status
from proxy.statements import SPARK_CATALOG, NamesUnknown, SessionChange, session_change, tables_redefined, virtual
from proxy.stats_answers import answer_result, schema_disagreement
from proxy.virtual import over_budget
from stats.collect import describe_sections
from stats.sql_text import quote_name
from rewriter.rewrite import Rewrite, RewriteContext, rewrite
from rewriter.stats_answer import stats_answer

log = logging.getLogger("dipper.proxy")


class Execution:
    """Part of :class:`proxy.calls.Calls`."""

    def _execute_statement(self, req: t.TExecuteStatementReq, message: bytes) -> Any:
        session = self.sessions.get(session_guid(req))
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
        sent = statement
        state = session.state
        redefined = self._redefined(statement, state.database)
        if change is not None or redefined:  # names, settings, access or a table's definition may differ now
            session.forget_catalog_answers()
        if redefined and not any(table in self.server.stats.schemas() for table in redefined):
            redefined = []  # no statistics to keep or drop: the statement runs as any other (asynchronously)
        before = self._fingerprints(session, redefined) if redefined else {}
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
            with self.server.redefining(redefined):
                try:
                    return self._run(session, req, sent, change, record, wait=bool(redefined))
                finally:  # whatever the end (refused, failed after a partial commit, cancelled, client gone)
                    if redefined:
                        self._after_redefinition(session, redefined, before, record)
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
            self._same_listing(session, answer.table, answer.listing, record)
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

    def _same_listing(self, session: Session, table: str, listing: str, record: dict[str, Any]) -> None:
        """Make the session's Spark read ``table``'s files as the answer from statistics counted them.

        Spark keeps a table's file listing per session, from the first statement that read it until something
        invalidates it: a session that read the table before another application added files still reads the
        old files, while the statistics count the new ones. Unless the proxy made this session list exactly these
        files already, it runs ``REFRESH TABLE`` in it (before Spark analyses the statement): the session's next
        statements then read the files the answer counted, or newer ones, never older (a cached table's rows
        are re-read too, as ``REFRESH TABLE`` does). Spark's refusal raises :class:`StatementFailed` (no answer)."""
        if session.listed.get(table) == listing:
            return
        self._backend_rows(session, f"REFRESH TABLE {quote_name(table)}")
        session.listed[table] = listing
        record["session_listing"] = f"refreshed: REFRESH TABLE {table} ran in the session first, so that it reads " \
                                    "the files the answer counts"

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

    @staticmethod
    def _redefined(statement: str, database: str | None) -> list[str]:
        """The catalog tables (``db.table``) ``statement`` may point at other files or another schema
        (``proxy/statements.tables_redefined``)."""
        tables = []
        for name in tables_redefined(statement):
            if len(name) == 3 and name[0] != SPARK_CATALOG:
                continue  # another catalog's table: never the store's
            if len(name) == 1 and database is None:
                continue  # the session switched to another catalog: not a table of ours
            tables.append(".".join(name[-2:]) if len(name) > 1 else f"{database}.{name[0]}")
        return list(dict.fromkeys(tables))

    def _fingerprints(self, session: Session, tables: list[str]) -> dict[str, str | None]:
        """What the catalog says of ``tables`` now, in the client's session (``UNREADABLE`` for each if it
        cannot be asked: the statement then counts as having changed them, if it succeeds)."""
        try:
            return catalog_fingerprints(lambda sql: self._backend_rows(session, sql), tables)
        except Exception as e:  # noqa: BLE001 - unreadable: the tables count as changed (their statistics go)
            log.info("the catalog could not describe %s around a statement redefining them: %s",
                     ", ".join(tables), e.message[:200] if isinstance(e, StatementFailed) else e)
            return dict.fromkeys(tables, UNREADABLE)

    def _after_redefinition(self, session: Session, tables: list[str], before: dict[str, str | None],
                            record: dict[str, Any]) -> None:
        """A statement that may have redefined ``tables`` ended, however it ended: the statistics of each table the
        catalog now describes otherwise than before go (and the tables are collected again by the scheduled
        refresh if they exist), those of a table it left as Spark reads it stay. So a statement Spark refuses
        changes nothing, and one that failed after changing the table (or whose end was not seen) counts as a
        change. Nothing here fails the statement: a store that cannot be written is logged.

        A statement Spark refused with an error of SQLSTATE class 42 (syntax, analysis, a missing object or
        partition) was refused before it ran, so it changed nothing, and its tables keep their statistics
        without asking the catalog (which cannot show that of a partitioned table)."""
        failure = record.get("failed_on_spark") or {}
        if str(failure.get("sql_state") or "").startswith("42"):
            record["statistics_kept"] = tables
            return
        after = self._fingerprints(session, tables)
        kept = [table for table in tables if unchanged(before.get(table), after.get(table))]
        if kept:
            record["statistics_kept"] = kept
        changed = [table for table in tables if table not in kept]
        if not changed:
            return
        try:
            self._drop_statistics(changed, record, "after: " + " ".join(str(record["statement"]).split())[:200])
            again = [table for table in changed if after.get(table) is not None]
            if again and self.server.recollect(again):
                record["statistics_recollected"] = "by the scheduled refresh"
        except Exception as e:  # noqa: BLE001 - the statement's own outcome stands; the failure is said
            log.error("the statistics of %s could not be dropped after a statement changed them: %s",
                      ", ".join(changed), e)
            record["statistics_not_dropped"] = f"{type(e).__name__}: {e}"

    def _drop_statistics(self, tables: list[str], record: dict[str, Any], why: str,
                         collected_at: dict[str, str] | None = None) -> None:
        """Drop the statistics of ``tables`` (only those still of ``collected_at``'s location, if given) and
        say so in the statement's record."""
        dropped = self.server.forget_statistics(tables, collected_at)
        if dropped:
            record["statistics_dropped"] = dropped
            log.info("statistics of %s dropped: %s", ", ".join(dropped), why)

    def _run(self, session: Session, req: t.TExecuteStatementReq, sent: str, change: SessionChange | None,
             record: dict[str, Any], wait: bool = False) -> t.TExecuteStatementResp:
        """Submit ``sent`` asynchronously, and wait for its end if the client asked for a synchronous call, the
        statement changes the session or ``wait`` says so (a statement redefining tables with statistics, whose
        end decides what becomes of them). A rewritten statement of an asynchronous client is watched instead."""
        rewritten = sent != (req.statement or "")
        response = self._submit(session, req, sent)
        if rewritten and response.status.statusCode not in OK_STATUS:
            again = self._after_rewrite_failed(session, req, record, None, response.status.sqlState,
                                               response.status.errorMessage)
            if again is not None:
                response, rewritten = again, False  # the original runs now: nothing more to fall back to
        if response.status.statusCode not in OK_STATUS:
            note_failure(record, response.status.sqlState, response.status.errorMessage)
            return response
        if req.runAsync and change is None and not wait:
            handle = response.operationHandle
            if rewritten:
                session.watched[handle.operationId.guid] = Watched(client=handle, backend=handle, request=req)
            # Its end is learnt when the client polls the handle (the metrics count it then).
            record.update(operation=short_id(handle.operationId.guid), asynchronous=True)
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
        if state.operationState == S.ERROR_STATE:
            note_failure(record, state.sqlState, state.errorMessage)
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
        for the poll at 63 ms (SHOW TABLES through the proxy took 73 ms against 35 ms directly, docs/results/metadata.md)."""
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
        if result.decision.untyped:  # declined for a filter over columns of unknown types: ask the catalog
            types = self._catalog_types(session, result.decision.untyped, record)
            if types:
                context = dataclasses.replace(context, catalog_types=types)
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
        context = dataclasses.replace(context, unusable={**context.unusable, **unusable})
        return context, rewrite(statement, context)

    def _catalog_types(self, session: Session, tables: list[str], record: dict[str, Any]) -> dict[str, dict[str, str]]:
        """The column types the catalog gives ``tables`` (tables without statistics), asked in the client's
        session and kept as long as its analyses; a table the catalog does not hold, or that the client may not
        describe, is left out (its types stay unknown)."""
        out: dict[str, dict[str, str]] = {}
        for table in tables:
            def ask(table: str = table) -> dict[str, str] | None:
                try:
                    columns, _, _ = describe_sections(self._backend_rows(session, f"DESCRIBE TABLE {quote_name(table)}"))
                except StatementFailed as e:
                    record.setdefault("types_not_described", {})[table] = e.message[:200]
                    return None
                return columns
            columns = session.types.get(table, ask)
            if columns:
                out[table] = columns
        return out

    def _context(self, session: Session, overlay: dict[str, str] | None = None) -> RewriteContext:
        state = session.state
        assert state.database is not None
        r = self.config.rewriter
        self._verify_zone(session)
        return RewriteContext(self.server.stats, database=state.database,
                              session=state.settings_for(overlay, self.server.zone_rules),
                              shadowed=frozenset(state.temp_views), shadow_all_unqualified=state.temp_views_stale,
                              key_cache=self.server.key_cache, cache=self.server.rewrite_cache,
                              unusable=self.server.being_redefined(),
                              **r.context_options())

    # -- asynchronous clients' rewritten statements (proxy/operations.py) --------------------------------
    def _watched(self, req: Any) -> tuple[Session, Watched] | None:
        guid = operation_guid(req)
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
            record["operation"] = short_id(w.client.operationId.guid)
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
                "client": self.peer, "session": short_id(session.key), "database": session.state.database,
                "statement": statement}

