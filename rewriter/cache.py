"""Rewrites of repeated statements, kept (issue 62, item 3): a dashboard sends the same statements again and
again, and each costs the rewriter parsing, name resolution and file evaluation anew.

A rewrite is a function of the statement, the context's settings and what the statistics source returned while
it ran (the store's schemas, each table's freshness-checked statistics, each block layout). So an entry keeps
what every call returned, and serves a later rewrite of the same statement under the same settings only if the
same calls return the very same objects now: :class:`stats.loader.StatsLoader` hands out one object per store
version and table listing, so a new store version, a file added, changed or removed, or a new layout record
gives another object, and the statement is rewritten again. The listings themselves are taken as the rewrite
would take them (a diP origin's storage is listed anew), so a hit is never staler than a rewrite. The key cache
of exact keys is keyed by file identity, so it changes nothing the identities do not.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import threading
from collections.abc import Callable, Mapping
from typing import Any

from rewriter.decision import Decision

MAX_STATEMENT_CHARS = 100_000  # longer statements are not kept (their decisions hold more, and repeat less)


@dataclasses.dataclass(frozen=True)
class Entry:
    sql: str
    decision: Decision
    calls: tuple[tuple[str, tuple[Any, ...], Any], ...]  # (method, arguments, what it returned)


class Recording:
    """A statistics source that notes every call and what it returned (the entry's proof of validity)."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.calls: list[tuple[str, tuple[Any, ...], Any]] = []

    def schemas(self) -> Mapping[str, Mapping[str, str]]:
        return self._note("schemas")

    def table_stats(self, table: str, fresh_listing: bool = False) -> Any:
        return self._note("table_stats", table, fresh_listing)

    def _note(self, method: str, *args: Any) -> Any:
        out = getattr(self.source, method)(*args)
        self.calls.append((method, args, out))
        return out

    def __getattr__(self, name: str) -> Any:
        if name == "block_layout":  # only if the source has one (rewriter/rewrite.py asks with getattr)
            getattr(self.source, name)
            return lambda table: self._note("block_layout", table)
        return getattr(self.source, name)


class RewriteCache:
    """The last ``size`` rewrites, shared by every session (thread-safe)."""

    def __init__(self, size: int = 512) -> None:
        self.size = size
        self._entries: collections.OrderedDict[tuple[Any, ...], Entry] = collections.OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: tuple[Any, ...], source: Any) -> Entry | None:
        """The entry of ``key`` if ``source`` returns what it returned then, call for call."""
        with self._lock:
            entry = self._entries.get(key)
        if entry is not None and all(getattr(source, method)(*args) is out for method, args, out in entry.calls):
            with self._lock:
                self.hits += 1
                if key in self._entries:
                    self._entries.move_to_end(key)
            return Entry(entry.sql, copy_decision(entry.decision), entry.calls)
        with self._lock:
            self.misses += 1
        return None

    def put(self, key: tuple[Any, ...], entry: Entry) -> None:
        if self.size <= 0:
            return
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)


def copy_decision(decision: Decision) -> Decision:
    """A copy the caller may change (the proxy marks a decision failed open), tables included."""
    out = copy.copy(decision)
    out.tables = [copy.copy(t) for t in decision.tables]
    return out


def key_of(sql: str, context: Any, skip: Callable[[str], bool]) -> tuple[Any, ...] | None:
    """The cache key of rewriting ``sql`` in ``context``: the statement and every setting (the fields ``skip``
    does not name), or None for a statement too long to keep."""
    if len(sql) > MAX_STATEMENT_CHARS:
        return None
    settings = tuple((f.name, _frozen(getattr(context, f.name))) for f in dataclasses.fields(context)
                     if not skip(f.name))
    try:
        hash(settings)
    except TypeError:  # a setting of a type that cannot be compared this way: not kept
        return None
    return (sql, settings)


def _frozen(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, (set, frozenset)):
        return tuple(sorted(value))
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value
