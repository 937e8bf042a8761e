"""Spark's errors as the proxy passes them on: in the shape a client would get them from Spark directly, and
whether a failure of a rewritten statement may be the rewrite's doing.

**Shapes.** The proxy runs every statement asynchronously and polls, whatever the client asked. For an
asynchronous operation Spark's ``GetOperationStatus`` reports a failure as the whole Java stack trace
(``HiveSQLException: Error running query: ...`` followed by ``\\tat ...`` lines and ``Caused by:`` sections);
to a synchronous ``ExecuteStatement`` it answers with the exception's message alone and the trace, one frame
per entry, in ``infoMessages`` (Hive's ``HiveSQLException.toTStatus``). :func:`sync_status` turns the first
into the second, so a synchronous client through the proxy reads the message Spark would have given it.

**Re-running the original.** :func:`rerun_reason` says whether the original statement should be run after
its rewritten form failed (ARCHITECTURE.md §3.3, fail open). It should, unless the failure is a data exception
(SQLSTATE class 22: ARITHMETIC_OVERFLOW, DIVIDE_BY_ZERO, CAST_INVALID_INPUT, ...) that does not concern
``_metadata``: the rewritten statement evaluates the original's expressions over a subset of the original's
rows, so a value that raises there raises in the original too, and running it again would only repeat the
error at the cost of a second scan. Anything else (analysis and parse errors, anything about ``_metadata``,
resource errors) may come from the rewritten text, so the original gets its own run.
"""

from __future__ import annotations

import re

from TCLIService import ttypes as t

OK_STATUS = (t.TStatusCode.SUCCESS_STATUS, t.TStatusCode.SUCCESS_WITH_INFO_STATUS)
S = t.TOperationState
DATA_EXCEPTION = "22"  # SQLSTATE class: data exception
_CLASS_NAME = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+")  # a qualified Java class name
_FRAME = re.compile(r"\tat (?:\S+/)?(?P<cls>[^/\s(]+)\.(?P<method>[^.\s(]+)\((?P<where>[^)]*)\)")
_MORE = re.compile(r"\t\.\.\. (\d+) more")
_SQL_CONTEXT = "\n== SQL"  # where Spark's message quotes the statement text (the rewritten one, here)
# Spark's error class, where its message begins ("[TABLE_OR_VIEW_NOT_FOUND] The table or view ..."), after the
# Thrift Server's "Error running query: " and an exception's class name, if any: text the message quotes from the
# statement comes later, so it cannot pass for a class.
_ERROR_CLASS = re.compile(r"(?:Error running query: )?(?:[\w.$]+: )?\[(?P<cls>[A-Z][A-Z0-9_]{0,79})(?:\.[A-Z0-9_]+)*\]")


def sync_status(state: t.TGetOperationStatusResp) -> t.TStatus:
    """The status a synchronous ``ExecuteStatement`` gets from Spark for an operation that ended in ``state``."""
    if state.status.statusCode not in OK_STATUS:
        return state.status
    if state.operationState == S.ERROR_STATE and state.errorMessage:
        message, info = split_trace(state.errorMessage)
        return t.TStatus(statusCode=t.TStatusCode.ERROR_STATUS, infoMessages=info or None, sqlState=state.sqlState,
                         errorCode=state.errorCode or 0, errorMessage=message)
    name = S._VALUES_TO_NAMES.get(state.operationState, str(state.operationState))
    return t.TStatus(statusCode=t.TStatusCode.ERROR_STATUS, sqlState=state.sqlState, errorCode=state.errorCode or 0,
                     errorMessage=state.errorMessage or f"the statement ended in state {name}")


def spark_message(text: str) -> str:
    """The top exception's message of a Java stack trace (the text itself if it is no stack trace)."""
    return split_trace(text)[0]


def split_trace(text: str) -> tuple[str, list[str]]:
    """(the top exception's message, the trace in Hive's ``infoMessages`` form) of ``Throwable.printStackTrace``
    output: ``*class:message:frames:last`` per exception, then ``class:method:file:line`` per frame printed."""
    sections: list[tuple[list[str], list[str], int]] = []  # (header lines, frames, frames in common with the enclosing)
    header: list[str] = []
    frames: list[str] = []
    more = 0
    for line in text.split("\n"):
        if line.startswith("\tat "):
            frames.append(line)
        elif m := _MORE.fullmatch(line):
            more = int(m.group(1))
        elif line.startswith("Caused by: "):
            sections.append((header, frames, more))
            header, frames, more = [line[len("Caused by: "):]], [], 0
        elif line.startswith("\t"):
            continue  # "Suppressed:" sections and their frames
        elif not frames:
            header.append(line)
    sections.append((header, frames, more))
    if not sections[0][1]:  # no frame at all: not a stack trace
        return text, []
    info: list[str] = []
    message = ""
    for i, (lines, section_frames, common) in enumerate(sections):
        cls, msg = _header("\n".join(lines))
        if i == 0:
            message = msg
        info.append(f"*{cls}:{msg}:{len(section_frames) + common}:{len(section_frames) - 1}")
        info.extend(_frame(f) for f in section_frames)
    return message, info


def _header(text: str) -> tuple[str, str]:
    """(class, message) of ``Throwable.toString()``: ``class: message``, or the class alone (message null)."""
    head, sep, rest = text.partition(": ")
    if sep and _CLASS_NAME.fullmatch(head):
        return head, rest
    if _CLASS_NAME.fullmatch(text.strip()):
        return text.strip(), "null"
    return "java.lang.Throwable", text


def _frame(line: str) -> str:
    m = _FRAME.match(line)
    if m is None:
        return line.removeprefix("\tat ")
    where = m.group("where")
    file, _, number = where.rpartition(":")
    if where == "Native Method":
        file, number = "", "-2"
    elif not number.lstrip("-").isdigit():
        file, number = ("" if where == "Unknown Source" else where), "-1"
    return f"{m.group('cls')}:{m.group('method')}:{file}:{number}"


def rerun_reason(sql_state: str | None, message: str | None) -> str | None:
    """Why the original must be run after its rewritten form failed with this error, or None when the error
    is the original's own (see the module docstring)."""
    text = spark_message(message or "")
    own = text.split(_SQL_CONTEXT, 1)[0]  # not the quoted statement: that is the rewritten text, _metadata and all
    if "_metadata" in own.lower():
        return "the error concerns _metadata, which only the rewritten text reads"
    if (sql_state or "").startswith(DATA_EXCEPTION):
        return None
    return f"the rewritten text may be the cause (SQLSTATE {sql_state or 'unknown'})"


def error_class(message: str | None) -> str | None:
    """Spark's error class of an error message or stack trace (``TABLE_OR_VIEW_NOT_FOUND``; of
    ``[UNRESOLVED_COLUMN.WITH_SUGGESTION]`` the class alone, ``UNRESOLVED_COLUMN``), or None when the message
    names none (an error from outside Spark SQL, a Java exception)."""
    m = _ERROR_CLASS.match(spark_message(message or "").lstrip())
    return m.group("cls") if m else None


def note_failure(record: dict, sql_state: str | None, message: str | None) -> None:
    """Say in a statement's decision record that Spark ended it with an error: its class and SQLSTATE, and the
    start of Spark's message (the proxy's metrics count the statement as ``failed_on_spark`` by that class)."""
    record["failed_on_spark"] = {"error_class": error_class(message), "sql_state": sql_state,
                                 "message": spark_message(message or "")[:300]}
