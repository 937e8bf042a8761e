"""The decision log: one JSON line per statement the proxy handled, rotated by size.

Each record says who asked (user, client address, session), what was asked, what went to Spark (the
rewritten SQL in full when it differs, so nothing is lost), the outcome, and the rewriter's decision
record (ARCHITECTURE.md §3.6). The most recent records are also kept in memory (seeded from the file on
start) for ``SHOW SKIPPING LOG``.

One exception to "in full": a string literal longer than :data:`LONG_LITERAL` characters is stored as its
first characters and its length (``'abc…' /* 5,000,000 characters, truncated in the decision log */``), wherever
SQL text appears in the record. A client may send megabytes of literal text; the log is for decisions, and a
5 MB literal made one 15.7 MB line (issue 62, item 3).
"""

from __future__ import annotations

import collections
import json
import logging
import logging.handlers
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

RECENT = 2000  # records kept in memory for SHOW SKIPPING LOG
LONG_LITERAL = 1000  # characters of a string literal stored in full
_KEPT = 64  # characters kept of a longer one
# An unterminated literal runs to the end of the text (else: time growing with the square of its length).
_STRING = re.compile(r"'(?:[^'\\]|\\.)*(?:'|\Z)|\"(?:[^\"\\]|\\.)*(?:\"|\Z)", re.S)


class DecisionLog:
    def __init__(self, path: Path, max_bytes: int, backups: int,
                 on_write: Callable[[dict[str, Any]], None] | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.on_write = on_write  # told of every record written (the proxy's metrics)
        self._recent: collections.deque[dict[str, Any]] = collections.deque(_tail(path, RECENT), maxlen=RECENT)
        self._lock = threading.Lock()
        # A logger of its own (not propagated) gives thread-safe writes and rotation from the standard library.
        self._logger = logging.Logger(f"dipper.decisions.{path}")
        handler = logging.handlers.RotatingFileHandler(path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(message)s"))
        self._logger.addHandler(handler)
        self._handler = handler

    def write(self, record: dict[str, Any]) -> None:
        record = bounded(record)
        line = json.dumps(record, sort_keys=True, default=str)
        with self._lock:
            self._recent.append(record)
        self._logger.info(line)
        if self.on_write is not None:
            try:
                self.on_write(record)
            except Exception:  # noqa: BLE001 - counting a statement must never fail it
                logging.getLogger("dipper.proxy").exception("could not count a statement in the metrics")

    def recent(self, user: str, limit: int) -> list[dict[str, Any]]:
        """The ``limit`` newest records of ``user``, newest first (a user sees only their own statements)."""
        with self._lock:
            records = list(self._recent)
        out = [r for r in reversed(records) if r.get("user") == user]
        return out[:limit]

    def close(self) -> None:
        self._handler.close()


def bounded(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with long string literals truncated wherever SQL text appears in it (the statement, what was
    sent, the decision's predicates and reasons): a copy of each part that changes, the record itself if none."""
    return _bounded(record)


def _bounded(value: Any) -> Any:
    if isinstance(value, str):
        return _STRING.sub(_shorten, value) if len(value) > LONG_LITERAL else value
    if isinstance(value, dict):
        out = {key: _bounded(v) for key, v in value.items()}
        return value if all(out[key] is value[key] for key in value) else out
    if isinstance(value, list):
        items = [_bounded(v) for v in value]
        return value if all(a is b for a, b in zip(items, value)) else items
    return value


def _shorten(m: re.Match[str]) -> str:
    literal = m.group()
    if len(literal) - 2 <= LONG_LITERAL:
        return literal
    return f"{literal[:_KEPT + 1]}…{literal[-1]} /* {len(literal) - 2:,} characters, truncated in the decision log */"


def _tail(path: Path, n: int) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in collections.deque(f, maxlen=n):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut by a crash is not worth failing the start for
    return out
