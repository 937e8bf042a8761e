"""What the proxy must recognise in a statement before it goes anywhere.

Two kinds of statement matter:

- **Virtual statements**, answered by the proxy itself: ``EXPLAIN SKIPPING <query>``,
  ``SHOW SKIPPING LOG [LIMIT n]``, ``SET skipping.<key> [= value]``.
- **Session-changing statements**, which the rewriter must know about to stay correct: ``USE db`` (what
  unqualified names mean), temporary views (``CREATE TEMP VIEW``, ``CACHE TABLE``), which can shadow a
  catalog table of the same name, and catalog switches. Recognising one too many only costs pruning;
  missing one could cost rows, so anything that mentions TEMP/TEMPORARY or CACHE and is not understood
  marks the session's unqualified names as unknown.

Regular expressions rather than a parser: these statements are short and fixed in form, and recognising
them must not depend on sqlglot understanding the rest of the dialect.
"""

from __future__ import annotations

import dataclasses
import re

_COMMENTS = re.compile(r"\A(?:\s+|--[^\n]*(?:\n|\Z)|/\*.*?\*/)*", re.S)
_NAME = r"(`(?:[^`]|``)+`|[\w$]+)"
_QUALIFIED = rf"{_NAME}(?:\s*\.\s*{_NAME})?(?:\s*\.\s*{_NAME})?"

_EXPLAIN = re.compile(r"EXPLAIN\s+SKIPPING\b\s*(.*)", re.S | re.I)
_SHOW_LOG = re.compile(r"SHOW\s+SKIPPING\s+LOG(?:\s+LIMIT\s+(\d+))?\s*;?\s*\Z", re.S | re.I)
_SET = re.compile(r"SET\s+skipping\.([\w.]*)\s*(?:=\s*(.*?))?\s*;?\s*\Z", re.S | re.I)
_USE = re.compile(rf"USE\s+(?:(DATABASE|SCHEMA|NAMESPACE|CATALOG)\s+)?{_QUALIFIED}\s*;?\s*\Z", re.S | re.I)
_SET_CATALOG = re.compile(r"SET\s+CATALOG\b", re.I)
_TEMP_VIEW = re.compile(rf"(?:CREATE\s+(?:OR\s+REPLACE\s+)?(?:GLOBAL\s+)?TEMP(?:ORARY)?\s+(?:VIEW|TABLE)"
                        rf"|CACHE\s+(?:LAZY\s+)?TABLE)\s+(?:IF\s+NOT\s+EXISTS\s+)?{_QUALIFIED}", re.S | re.I)
_MENTIONS_TEMP = re.compile(r"\b(?:TEMP|TEMPORARY|CACHE)\b", re.I)
SPARK_CATALOG = "spark_catalog"


@dataclasses.dataclass(frozen=True)
class Explain:
    query: str


@dataclasses.dataclass(frozen=True)
class ShowLog:
    limit: int | None


@dataclasses.dataclass(frozen=True)
class SetSkipping:
    key: str  # lower case, without the "skipping." prefix
    value: str | None  # None: show the current value


@dataclasses.dataclass(frozen=True)
class UseDatabase:
    database: str | None  # None: a catalog other than spark_catalog (names no longer mean what stats know)


@dataclasses.dataclass(frozen=True)
class TempView:
    name: str | None  # None: some temporary view whose name could not be read


Virtual = Explain | ShowLog | SetSkipping
SessionChange = UseDatabase | TempView


def strip_leading_comments(sql: str) -> str:
    return sql[_COMMENTS.match(sql).end():]


def virtual(sql: str) -> Virtual | None:
    text = strip_leading_comments(sql)
    if m := _EXPLAIN.match(text):
        return Explain(m.group(1).strip())
    if m := _SHOW_LOG.match(text):
        return ShowLog(int(m.group(1)) if m.group(1) else None)
    if m := _SET.match(text):
        value = m.group(2)
        return SetSkipping(m.group(1).lower(), value.strip().strip("'\"") if value is not None else None)
    return None


def session_change(sql: str) -> SessionChange | None:
    text = strip_leading_comments(sql)
    if m := _USE.match(text):
        parts = [_unquote(p) for p in m.groups()[1:] if p]
        if (m.group(1) or "").upper() == "CATALOG":
            return UseDatabase(None if parts != [SPARK_CATALOG] else "default")
        if len(parts) == 1:
            return UseDatabase(parts[0].lower())
        return UseDatabase(parts[-1].lower() if parts[0].lower() == SPARK_CATALOG and len(parts) == 2 else None)
    if _SET_CATALOG.match(text):
        return UseDatabase(None)
    if m := _TEMP_VIEW.match(text):
        parts = [p for p in m.groups() if p]
        return TempView(_unquote(parts[-1]).lower())
    if _MENTIONS_TEMP.search(text) and not text.lstrip().upper().startswith(("SELECT", "WITH", "(")):
        return TempView(None)
    return None


def _unquote(name: str) -> str:
    return name[1:-1].replace("``", "`") if name.startswith("`") else name
