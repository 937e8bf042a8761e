"""Statistics that keep up with new files without a Spark job (issue 14, part 4).

Files appear under a table's location all the time: INSERT INTO, an external writer, a new partition, a
compaction that replaces old files with new ones. The store does not describe them, so the freshness check
reads them (never skips them) and the table, no longer fully covered, stops originating diPs until the
statistics job runs again. That is correct, but it makes a table that receives data every few minutes
useless as a diP origin.

:class:`FooterCoverage` closes that gap within seconds: the loader tells it when a listing shows files the
store does not describe (``StatsLoader(on_unknown=...)``), and a background thread reads those files'
Parquet footers (``stats.footers.footer_row``: exact row counts, min/max/null counts where the footer
proves them) and adds them to the table's statistics, marked ``footer`` so that the next refresh re-reads
them for range-sets and value lists (and leaves every other file alone). :class:`ScheduledRefresh` runs that
refresh (``python -m stats refresh`` of just those tables) every ``proxy.statistics_refresh_seconds`` on the
backend, for the tables with footer rows or with files a listing showed the store does not describe. Rows of files
that are gone or changed are dropped at the same time. ORC tables and files a footer cannot vouch for
(``footer_row`` says which) stay unknown until the job runs.

Why a footer row is safe to pin: the file's identity (path, size, mtime) comes from a listing taken
*before* its footer is read; a file rewritten since no longer matches it, so its row is never used (the same
argument as the collector's, ``stats/collect.py``). The merge happens inside the store's lock against the
version current then (``StatsStore.update``): a table whose statistics were dropped or re-collected
meanwhile at another location is left as it is.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterable

import pyarrow as pa

from dipper.errors import StatsError
from stats.collect import arrow_schema, collect
from stats.footers import footer_row
from stats.freshness import FileInfo, list_files, open_listed, stored_file
from stats.scan import SqlRunner
from stats.store import Snapshot, StatsStore

log = logging.getLogger("dipper.stats")


@dataclasses.dataclass(frozen=True)
class Covered:
    table: str
    added: int  # files described from their footers
    dropped: int  # rows of files gone or changed, removed
    failed: tuple[FileInfo, ...]  # files no footer row could be made for (not Parquet, unreadable, read otherwise)


def cover_from_footers(store: StatsStore, table: str, skip: Iterable[FileInfo] = ()) -> Covered:
    """Describe every file of ``table`` the store does not (except ``skip``, known not to be coverable) from its
    footer, drop the rows of files no longer there, and commit; nothing changes for a table without
    statistics or stored as ORC."""
    name = table.lower()
    snapshot = store.snapshot()
    entry = snapshot.entry(name)
    if entry is None or entry.format != "parquet":
        return Covered(name, 0, 0, ())
    listing = list_files(entry.location)  # identities first, footers after (see the module's docstring)
    described = {stored_file(r) for r in snapshot.read(name, columns=["path", "size", "mtime"]).to_pylist()}
    unwanted = set(skip)
    todo = [f for f in listing if f not in described and f not in unwanted]
    rows, failed = {}, []
    outcome = {"dropped": 0}
    for f in todo:
        try:
            with open_listed(entry.location, f.path) as source:
                row = footer_row(f, source, entry.schema, entry.kinds, entry.partition_columns)
        except Exception as e:  # noqa: BLE001 - gone since the listing, or unreadable: this file stays unknown
            log.debug("%s: no footer row: %s", f.path, e)
            row = None
        if row is None:
            failed.append(f)
        else:
            rows[f.path] = row
    gone = described - set(listing)  # rows of files the listing showed gone or changed

    def merge(base: Snapshot) -> tuple[dict, tuple[str, ...]]:
        now = base.entry(name)
        same = (entry.location, entry.kinds, entry.schema, entry.partition_columns)
        if now is None or (now.location, now.kinds, now.schema, now.partition_columns) != same:
            return {}, ()  # dropped or re-collected differently meanwhile: not ours to extend
        old = base.read(name).to_pylist()
        # Rows committed since this pass began (a collector's) are kept; only rows this pass saw gone go.
        kept = [r for r in old if stored_file(r) not in gone]
        have = {r["path"] for r in kept}
        new = [r for path, r in rows.items() if path not in have]
        outcome["dropped"] = len(old) - len(kept)
        if not new and len(kept) == len(old):
            return {}, ()
        merged = sorted(kept + new, key=lambda r: r["path"])
        updated = dataclasses.replace(now, files=len(merged), bytes=sum(r["size"] for r in merged))
        return {name: (updated, pa.Table.from_pylist(merged, schema=arrow_schema(now.kinds, now.indexes)))}, ()

    store.update(merge)
    result = Covered(name, len(rows), outcome["dropped"], tuple(failed))
    if rows or outcome["dropped"] or failed:
        log.info("%s: %d new files described from their footers, %d rows of files gone or changed dropped%s", name,
                 len(rows), outcome["dropped"], f", {len(failed)} files left unknown (no footer row)" if failed else "")
    return result


class FooterCoverage:
    """A background thread covering the tables it is told about (:meth:`notice`), one pass per table at a time
    and at most one per ``min_interval`` seconds; files it could not cover are not tried again. ``runs`` and
    ``failures`` count its passes (the proxy's metrics read them)."""

    name = "footer_coverage"

    def __init__(self, store: StatsStore, min_interval: float = 1.0) -> None:
        self.store = store
        self.min_interval = min_interval
        self.runs = 0  # passes over a table, failed or not
        self.failures = 0  # passes that failed
        self._pending: dict[str, float] = {}  # table -> when it may run
        self._last: dict[str, float] = {}
        self._uncoverable: dict[str, set[FileInfo]] = {}
        self._busy = False
        self._stopped = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="dipper-footer-coverage", daemon=True)
        self._thread.start()

    def notice(self, table: str) -> None:
        """``table`` has files the store does not describe (cheap; called on the rewriter's path)."""
        name = table.lower()
        with self._cond:
            if name not in self._pending:
                self._pending[name] = self._last.get(name, 0.0) + self.min_interval
                self._cond.notify()

    def idle(self, timeout: float) -> bool:
        """Wait until nothing is pending or running; whether that happened within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.1))
        return True

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and not self._due():
                    self._cond.wait(self._wait())
                if self._stopped:
                    return
                table = self._due()
                assert table is not None
                del self._pending[table]
                self._busy = True
            self.runs += 1
            try:
                failed = cover_from_footers(self.store, table, self._uncoverable.get(table, ())).failed
                self._uncoverable.setdefault(table, set()).update(failed)
            except Exception as e:  # noqa: BLE001 - a table that cannot be covered now stays unknown: still correct
                self.failures += 1
                log.warning("could not describe new files of %s from their footers: %s", table, e)
            finally:
                with self._cond:
                    self._last[table] = time.monotonic()
                    self._busy = False
                    self._cond.notify_all()

    def _due(self) -> str | None:
        now = time.monotonic()
        return next((t for t, at in self._pending.items() if at <= now), None)

    def _wait(self) -> float | None:
        if not self._pending:
            return None
        return max(0.01, min(self._pending.values()) - time.monotonic())


class ScheduledRefresh:
    """Every ``interval`` seconds, an incremental refresh (``stats.collect.collect(..., refresh=True)``: only
    files that are new, changed or described from footers are read) of the tables that need one: those with
    footer rows, and those a listing showed unknown files of (:meth:`notice`). It runs through ``connect()``,
    the backend's Thrift Server, so on the cluster and catalog the queries use; a failure is logged and tried
    again next time (the files stay read, never skipped wrongly). ``failures`` counts the passes that failed,
    wholly or for a table (the proxy's metrics read it with ``runs``)."""

    name = "scheduled_refresh"

    def __init__(self, store: StatsStore, connect: Callable[[], contextlib.AbstractContextManager[SqlRunner]],
                 interval: float) -> None:
        self.store = store
        self.connect = connect
        self.interval = interval
        self.runs = 0  # refreshes completed (for tests, logs and metrics)
        self.failures = 0
        self._noticed: set[str] = set()
        self._wanted: set[str] = set()  # tables to collect whether the store has statistics of them or not
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="dipper-statistics-refresh", daemon=True)
        self._thread.start()

    def notice(self, table: str) -> None:
        with self._lock:
            self._noticed.add(table.lower())

    def recollect(self, tables: Iterable[str]) -> None:
        """Collect ``tables`` on the next run although the store has no statistics of them (a statement changed
        them through the proxy, which dropped their statistics)."""
        with self._lock:
            self._wanted |= {table.lower() for table in tables}

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def due(self) -> list[str]:
        """The tables the next refresh covers (only the store's ``footer`` column is read)."""
        for _ in range(3):  # a version is removed two commits after it was current: read the newest again
            snapshot = self.store.snapshot()
            try:
                footer = {name for name in snapshot.tables if snapshot.footer_rows(name)}
            except OSError:  # the version was removed meanwhile
                continue
            with self._lock:
                noticed = {t for t in self._noticed if snapshot.entry(t) is not None}
                self._noticed &= set(snapshot.tables)  # a table without statistics has nothing to refresh
                wanted = set(self._wanted)
            return sorted(noticed | footer | wanted)
        raise StatsError("the statistics store changed under every read; tried again next time")

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            tables: list[str] = []
            wanted: set[str] = set()
            try:
                tables = self.due()
                if not tables:
                    continue
                with self._lock:
                    wanted = self._wanted & set(tables)
                    self._noticed -= set(tables)
                    self._wanted -= set(tables)
                done, failed = [], []
                with self.connect() as run:
                    for table in tables:  # one at a time: a table that fails does not hold the others back
                        try:
                            done += collect(run, self.store, [table], None, None, refresh=True, passed_over=lambda t, e:
                                            log.info("scheduled refresh passes over %s: %s", t, e))
                        except Exception as e:  # noqa: BLE001 - this table again next time
                            failed.append(table)
                            log.warning("scheduled refresh of %s failed (tried again in %.0fs): %s", table,
                                        self.interval, e)
                with self._lock:
                    self._noticed |= set(failed)
                    self._wanted |= wanted & set(failed)
                self.failures += bool(failed)
                self.runs += 1
                log.info("scheduled refresh of %d tables done: %s", len(done), ", ".join(done))
            except Exception as e:  # noqa: BLE001 - tried again next time; meanwhile such files are read
                self.failures += 1
                with self._lock:
                    self._noticed |= set(tables)
                    self._wanted |= wanted
                log.warning("scheduled statistics refresh failed (tried again in %.0fs): %s", self.interval, e)

