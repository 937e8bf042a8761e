"""What the proxy asks a client's backend session itself: its settings, database and temporary views after a
statement that changed them, short statements of its own, and Spark's analysis of a statement (the access
check before any statistic reaches a user, ``proxy/stats_answers.py``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from TCLIService import ttypes as t

from proxy.catalog_check import check_locations
from proxy.results import row_tuples
from proxy.session import S, Session, StatementFailed, short_id
from proxy.session_state import LIST_SETTINGS
from proxy.spark_errors import OK_STATUS, spark_message
from proxy.statements import SPARK_CATALOG
from proxy.stats_answers import analysis_statement
from rewriter.spark import zones

log = logging.getLogger("dipper.proxy")


class OwnStatements:
    """Part of :class:`proxy.calls.Calls`."""

    def _learn_settings(self, session: Session, configuration: dict[str, str] | None = None) -> None:
        """Read the session's settings from Spark (see proxy/session_state.py); if that fails, the session's
        settings are unknown and nothing is pruned in it until they are read."""
        try:
            session.state.learned_settings(self._backend_rows(session, LIST_SETTINGS), configuration)
        except StatementFailed as e:
            log.warning("cannot read the settings of session %s from Spark (nothing is pruned in it): %s",
                        short_id(session.key), e)
            session.state.settings_unreadable(str(e))

    def _verify_zone(self, session: Session) -> None:
        """Ask the backend, once per zone for the process, whether its rules of the session's time zone are
        Python's (``rewriter/spark/zones.py``); until it has answered yes, the session counts as one of unknown
        zone. A failed probe is asked again at the next statement."""
        zone = session.state.settings_for().time_zone
        rules = self.server.zone_rules
        if not zones.needs_probe(zone) or rules.verdict(zone) is not None:  # type: ignore[arg-type]
            return
        try:
            agrees = zones.agrees(zone, self._backend_rows(session, zones.probe_sql(zone)))  # type: ignore[arg-type]
        except StatementFailed as e:
            log.warning("cannot compare the backend's rules of time zone %s with Python's (timestamps in it are "
                        "read as in any zone): %s", zone, e)
            return
        rules.record(zone, agrees)  # type: ignore[arg-type]
        if not agrees:
            log.warning("the backend's rules of time zone %s differ from Python's (tzdata): timestamps in sessions "
                        "of that zone are read as in any zone, and none is answered from statistics", zone)

    def _learn_database(self, session: Session) -> None:
        """Ask Spark which database the session is in, after a statement that may have switched it without
        saying so (``EXECUTE IMMEDIATE 'USE db'``); unknown (nothing pruned or answered) if that fails or the
        session is in another catalog."""
        try:
            [(catalog, database)] = self._backend_rows(session, "SELECT current_catalog(), current_database()")
        except (StatementFailed, ValueError) as e:
            log.warning("cannot read the database of session %s (nothing is pruned in it until USE): %s",
                        short_id(session.key), e)
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
                        short_id(session.key), e)

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
            refused = e  # ``e`` itself is unbound when the except clause ends, before the function is called
            session.analysed.put(key, refused)
            return lambda: refused

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

