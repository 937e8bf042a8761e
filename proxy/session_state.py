"""What the proxy knows about one client session that the rewriter depends on: the current database, the
settings in force, and the session's temporary views (ARCHITECTURE.md §3.6: the session is part of the query).

Where each piece comes from, and why it can be trusted:

- **Settings.** When the session opens, the proxy runs ``SET`` on the backend session (one short statement,
  :func:`settings_from_rows`): Spark lists every value set in that session, the server's own configuration
  and what the client's OpenSession ``configuration`` applied (``set:hiveconf:k``, ``set:hivevar:k`` and
  ``set:k`` become setting ``k``). A value not listed is at Spark's default, which is what
  :func:`rewriter.session.session_settings` assumes for a missing key. Then every ``SET key=value`` is applied
  once it succeeded on Spark; forms whose effect the text does not give (``RESET``, ``SET TIME ZONE LOCAL``,
  ``${...}``) make the proxy run ``SET`` again.
- **Values the client asked for that Spark did not confirm.** An OpenSession entry Spark did not apply (a plain
  key: Spark's Thrift Server keeps it in its Hive configuration only) and an ``ExecuteStatement.confOverlay``
  entry (Spark's Thrift Server ignores the overlay) are not in force on Spark 4. Another server might apply
  them, though, so one that would change what the rewriter computes is treated as an unmodelled setting:
  pruning is declined, which is never wrong, rather than computed under a value that may not hold.
- **Temporary views.** Created and dropped names are tracked from the statements themselves
  (``proxy/statements.py``). After a statement whose effect cannot be read (``EXECUTE IMMEDIATE`` of a computed
  string, a SQL script), the set is *stale*: before the next statement is rewritten the proxy asks Spark which
  temporary views the session has (:func:`temp_views_from_rows`), and keeps that answer until the next such
  statement. While stale and unanswered, every unqualified name counts as a possible temporary view.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from proxy.statements import (DropView, NamesUnknown, Relearn, RenameView, SessionChange, SetConf, TempView,
                              UseDatabase)
from rewriter.session import SessionSettings, session_settings
from rewriter.spark import zones
from rewriter.spark.zones import ZoneRules

# The statement that lists the session's values (key, value); and the one that lists its temporary views:
# SHOW VIEWS in the global temporary database answers from memory alone (no metastore call), and lists the
# session's local temporary views with an empty namespace beside the global ones.
LIST_SETTINGS = "SET"
GLOBAL_TEMP_DATABASE_KEY = "spark.sql.globalTempDatabase"
# OpenSession entries that are not settings: the database to use, and Hive's system/environment variables.
_NOT_SETTINGS = ("use:", "set:system:", "set:env:", "set:metaconf:")


@dataclasses.dataclass
class SessionState:
    database: str | None = "default"  # None: the session left spark_catalog; names are not what stats know
    settings: dict[str, str] = dataclasses.field(default_factory=dict)  # key -> value in force (from Spark)
    settings_problem: str | None = "not read yet"  # why the settings are not known; None once read
    # key -> value the client asked for at OpenSession that Spark does not report, where it would matter
    doubtful: dict[str, str] = dataclasses.field(default_factory=dict)
    temp_views: set[str] = dataclasses.field(default_factory=set)  # lower-case names of local temporary views
    temp_views_stale: bool = False  # a statement since the last look may have created or dropped some

    def learned_settings(self, rows: Iterable[tuple[Any, ...]], configuration: Mapping[str, str] | None = None) -> None:
        """Take the backend's answer to ``SET``; check the OpenSession ``configuration`` against it."""
        self.settings = settings_from_rows(rows)
        self.settings_problem = None
        base = session_settings(self.settings)
        for entry, value in (configuration or {}).items():
            key = setting_key(entry)
            if key is None or self.settings.get(key) == value:
                continue
            if session_settings({**self.settings, key: value}) != base:
                self.doubtful[key] = value

    def settings_unreadable(self, why: str) -> None:
        self.settings_problem = why

    def settings_for(self, overlay: Mapping[str, str] | None = None, zone_rules: ZoneRules | None = None
                     ) -> SessionSettings:
        """What the rewriter may assume for a statement run with ``overlay`` (its confOverlay). With
        ``zone_rules``, a session time zone is kept only where the backend confirmed Python's rules of it
        (``rewriter/spark/zones.py``); elsewhere the zone counts as unknown, which is always sound."""
        settings = session_settings(self.settings)
        if zone_rules is not None and zones.needs_probe(settings.time_zone) and \
                zone_rules.verdict(settings.time_zone) is not True:  # type: ignore[arg-type]
            settings = dataclasses.replace(settings, time_zone=None)
        doubts = [f"{k}={v} (asked for when the session opened; Spark reports "
                  f"{self.settings.get(k, 'no value')})" for k, v in sorted(self.doubtful.items())]
        if self.settings_problem is not None:
            doubts.append(f"(the session's settings could not be read from Spark: {self.settings_problem})")
        for entry, value in sorted((overlay or {}).items()):
            key = setting_key(entry)
            if key is not None and session_settings({**self.settings, key: value}) != settings:
                doubts.append(f"{key}={value} (in the statement's confOverlay, which Spark's Thrift Server does "
                              "not apply)")
        if not doubts:
            return settings
        return dataclasses.replace(settings, unmodelled=tuple(sorted((*settings.unmodelled, *doubts))))

    def apply(self, change: SessionChange) -> bool:
        """Apply a change that succeeded on Spark; True when the settings must be read from Spark again."""
        if isinstance(change, UseDatabase):
            if not change.keep:
                self.database = change.database
        elif isinstance(change, TempView):
            self.temp_views.add(change.name)
        elif isinstance(change, DropView):
            self.temp_views.discard(change.name)  # Spark drops the temporary view of that name, if any
        elif isinstance(change, RenameView):
            if change.old in self.temp_views:
                self.temp_views.discard(change.old)
                self.temp_views.add(change.new)
            elif self.temp_views_stale:  # old may have been one, so new may be one now
                self.temp_views.add(change.new)
            # otherwise the set is exact and old is no temporary view: a catalog table was renamed
        elif isinstance(change, NamesUnknown):
            self.temp_views_stale = True
            return True  # it may have run SET or USE too: the settings and the database are read again
        elif isinstance(change, SetConf):
            self.settings[change.key] = change.value
            self.doubtful.pop(change.key, None)  # Spark has it now, whatever was asked before
        elif isinstance(change, Relearn):
            return True
        return False

    def learned_temp_views(self, rows: Iterable[tuple[Any, ...]]) -> None:
        self.temp_views = temp_views_from_rows(rows)
        self.temp_views_stale = False

    @property
    def list_temp_views(self) -> str:
        """The statement that lists the session's temporary views (see LIST_SETTINGS)."""
        database = self.settings.get(GLOBAL_TEMP_DATABASE_KEY, "global_temp")
        return f"SHOW VIEWS IN `{database.replace('`', '``')}`"


def setting_key(entry: str) -> str | None:
    """The setting an OpenSession or confOverlay entry names, or None when it names none. Spark's Thrift Server
    copies Hive configuration (``set:hiveconf:k``, ``set:k``) and Hive variables (``set:hivevar:k``) into
    the session's settings under the bare key."""
    lower = entry.lower()
    if lower.startswith(_NOT_SETTINGS):
        return None
    for prefix in ("set:hiveconf:", "set:hivevar:", "set:"):
        if lower.startswith(prefix):
            return entry[len(prefix):]
    return entry


def settings_from_rows(rows: Iterable[tuple[Any, ...]]) -> dict[str, str]:
    """``SET``'s answer as ``{key: value}`` (Spark redacts secrets; none of those is a semantic setting)."""
    return {str(r[0]): "" if r[1] is None else str(r[1]) for r in rows if r and r[0] is not None}


def temp_views_from_rows(rows: Iterable[tuple[Any, ...]]) -> set[str]:
    """The local temporary views in ``SHOW VIEWS IN <global temp database>``'s answer (namespace, viewName,
    isTemporary): those with an empty namespace (the global ones carry their database's name)."""
    return {str(r[1]).lower() for r in rows if len(r) >= 2 and not r[0] and r[1] is not None}
