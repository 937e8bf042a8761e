"""Which session settings the rewriter models, and which make it decline to prune (ARCHITECTURE.md §3.6).

Spark's answer to a query depends on the session: ANSI mode decides whether an integer overflow raises or
wraps, the session time zone what a zone-less timestamp literal means, ``spark.sql.caseSensitive`` and the
``spark.sql.legacy.*`` flags how names resolve and values compare. The proxy learns the backend's values
when a session opens and tracks every ``SET`` (``proxy/``); :func:`session_settings` turns what it knows
into :class:`SessionSettings`, the one object the rewriter reads.

The rule, and why it is sound: a setting is either

- **modelled** (``spark.sql.ansi.enabled``, ``spark.sql.session.timeZone``): the rewriter computes with it;
- **harmless**: it changes how Spark runs a query, never what it returns (shuffle partitions, adaptive
  execution, broadcast thresholds, codegen, file split sizes, settings outside ``spark.sql.*``);
- **known at its default**: a semantic setting whose Spark default we know and whose value equals it;
- anything else: **unmodelled**. While any unmodelled setting is in force the rewriter prunes nothing and
  the decision record names it. A new Spark release with a new semantic flag is therefore declined, not
  silently ignored.
"""

from __future__ import annotations

import dataclasses
import zoneinfo
from collections.abc import Mapping

ANSI = "spark.sql.ansi.enabled"
TIME_ZONE = "spark.sql.session.timeZone"

# Settings that change how a query runs, never its result. Prefixes end with a dot.
_HARMLESS = (
    "spark.sql.shuffle.partitions", "spark.sql.adaptive.", "spark.sql.autoBroadcastJoinThreshold",
    "spark.sql.broadcastTimeout", "spark.sql.optimizer.dynamicPartitionPruning.",
    "spark.sql.optimizer.runtime.bloomFilter.", "spark.sql.optimizer.runtimeFilter.", "spark.sql.files.maxPartitionBytes",
    "spark.sql.files.openCostInBytes", "spark.sql.files.minPartitionNum", "spark.sql.files.maxPartitionNum",
    "spark.sql.cbo.", "spark.sql.statistics.", "spark.sql.join.preferSortMergeJoin", "spark.sql.codegen.",
    "spark.sql.inMemoryColumnarStorage.", "spark.sql.parquet.filterPushdown", "spark.sql.parquet.enableVectorizedReader",
    "spark.sql.parquet.columnarReaderBatchSize", "spark.sql.orc.filterPushdown", "spark.sql.orc.enableVectorizedReader",
    "spark.sql.execution.arrow.", "spark.sql.thriftServer.", "spark.sql.thriftserver.", "spark.sql.ui.",
    "spark.sql.sources.parallelPartitionDiscovery.", "spark.sql.datetime.java8API.enabled",
    "spark.sql.leafNodeDefaultParallelism", "spark.sql.warehouse.dir", "spark.sql.catalogImplementation",
    "spark.sql.hive.thriftServer.", "spark.sql.hive.metastore.", "spark.sql.sources.bucketing.enabled",
    "spark.sql.execution.useObjectHashAggregateExec", "spark.sql.objectHashAggregate.", "spark.sql.sortMergeJoinExec.",
    "spark.sql.limit.", "spark.sql.subquery.maxThreadThreshold", "spark.sql.broadcastExchange.",
    "spark.sql.requireAllClusterKeysForCoPartition", "spark.sql.bucketing.", "spark.sql.scriptTransformation.",
    "spark.sql.streaming.", "spark.sql.debug.", "spark.sql.maxPlanStringLength", "spark.sql.maxMetadataStringLength",
    "spark.sql.planChangeLog.", "spark.sql.execution.sortBeforeRepartition", "spark.sql.execution.topKSortFallbackThreshold",
    "spark.sql.execution.reuseSubquery", "spark.sql.exchange.reuse", "spark.sql.cli.",
    # PySpark sets it in every session: how Spark Connect loads artifacts.
    "spark.sql.artifact.isolation.enabled",
    # The Thrift Server puts it in force: how result sets render BINARY values, the same for both queries.
    "spark.sql.binaryOutputStyle",
)
# Semantic settings whose Spark 4 default is known: at the default they change nothing we model.
_DEFAULTS = {
    "spark.sql.caseSensitive": "false",
    "spark.sql.timestampType": "TIMESTAMP_LTZ",
    "spark.sql.ansi.doubleQuotedIdentifiers": "false",
    "spark.sql.ansi.enforceReservedKeywords": "false",
    "spark.sql.ansi.relationPrecedence": "false",
    "spark.sql.variable.substitute": "true",  # the rewriter declines text with ${...} (rewriter/modelled.py)
    "spark.sql.parser.quotedRegexColumnNames": "false",
    "spark.sql.files.ignoreCorruptFiles": "false",
    "spark.sql.files.ignoreMissingFiles": "false",
    "spark.sql.decimalOperations.allowPrecisionLoss": "true",
    "spark.sql.storeAssignmentPolicy": "ANSI",
    "spark.sql.defaultCatalog": "spark_catalog",
    "spark.sql.crossJoin.enabled": "true",
}
_BOOLEAN = {"true": True, "false": False}


@dataclasses.dataclass(frozen=True)
class SessionSettings:
    """What the rewriter knows of the session a statement runs in."""

    ansi: bool = True  # spark.sql.ansi.enabled: overflow and invalid casts raise (Spark 4's default)
    time_zone: str | None = None  # None: unknown, a zone-less timestamp then stands for every zone's reading
    unmodelled: tuple[str, ...] = ()  # "key=value" of settings in force the rewriter does not model

    @property
    def prunable(self) -> bool:
        return not self.unmodelled


def session_settings(values: Mapping[str, str]) -> SessionSettings:
    """The settings of a session from every ``key -> value`` known to be in force in it (the backend's
    values when the session opened, then each ``SET``). Keys are Spark's, case as Spark prints them."""
    ansi, zone, unmodelled = True, None, []
    for key, raw in values.items():
        value = (raw or "").strip()
        if key == ANSI:
            if value.lower() not in _BOOLEAN:
                unmodelled.append(f"{key}={value}")
            else:
                ansi = _BOOLEAN[value.lower()]
        elif key == TIME_ZONE:
            zone = time_zone(value)
        elif not _harmless(key) and not _at_default(key, value):
            unmodelled.append(f"{key}={value}")
    return SessionSettings(ansi=ansi, time_zone=zone, unmodelled=tuple(sorted(unmodelled)))


def time_zone(value: str) -> str | None:
    """A zone name the rewriter can compute with (an IANA region or UTC), or None to stand for every zone."""
    text = value.strip()
    if text.upper() in ("UTC", "Z", "GMT", "+00:00", "UTC+0", "GMT+0"):
        return "UTC"
    try:
        zoneinfo.ZoneInfo(text)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return None  # e.g. '+08:00': read as any zone, which is always sound
    return text


def _harmless(key: str) -> bool:
    if key.lower().startswith("skipping."):
        return True  # the proxy's own settings, answered by the proxy
    if key.lower() == "path":
        return False  # SET PATH: where Spark looks up unqualified names, which the rewriter does not follow
    if not key.lower().startswith("spark.sql."):
        # spark.driver.*, spark.executor.*, spark.app.*, hive.*: deployment and run-time, not semantics.
        # Hive variables (hivevar:) are substituted in the text; the rewriter declines text with ${...}.
        return True
    return any(key == h or (h.endswith(".") and key.startswith(h)) for h in _HARMLESS)


def _at_default(key: str, value: str) -> bool:
    default = _DEFAULTS.get(key)
    return default is not None and value.lower() == default.lower()
