"""The answers of the statements the proxy answers itself (ARCHITECTURE.md §6): ``EXPLAIN SKIPPING``,
``SHOW SKIPPING LOG``, ``SET skipping.*``, and the session's byte budget that ``skipping.max_scan_bytes`` sets.
Pure functions of a session and a decision record, tested on their own; ``proxy/operation_calls.py`` serves them as
operations with handles of their own."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from proxy.results import ResultSet
from proxy.statements import SetSkipping
from rewriter.decision import Decision

if TYPE_CHECKING:
    from proxy.session import Session


class VirtualError(Exception):
    """A virtual statement that cannot be answered (bad value, unknown key)."""


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


def set_skipping(session: Session, v: SetSkipping) -> ResultSet:
    keys = ("enabled", "max_scan_bytes", "metadata_answers")
    switches = {"enabled": "skipping_enabled", "metadata_answers": "metadata_answers"}
    if v.key not in keys:
        raise VirtualError(f"unknown setting skipping.{v.key}; the settings are "
                           + ", ".join(f"skipping.{k}" for k in keys))
    if v.value is not None:
        if v.key in switches:
            if v.value.lower() not in ("true", "false"):
                raise VirtualError(f"skipping.{v.key} must be true or false, not {v.value!r}")
            setattr(session, switches[v.key], v.value.lower() == "true")
        else:
            try:
                limit = int(v.value.replace("_", ""))
            except ValueError:
                raise VirtualError(f"skipping.max_scan_bytes must be a whole number of bytes (0 for no limit), "
                                   f"not {v.value!r}") from None
            if limit < 0:
                raise VirtualError("skipping.max_scan_bytes must not be negative (0 means no limit)")
            session.max_scan_bytes = limit
    value = str(getattr(session, switches[v.key])).lower() if v.key in switches else str(session.max_scan_bytes)
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
