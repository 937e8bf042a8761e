"""What Spark actually read: per file-source scan of an executed query, the files and bytes it listed.

Read from the physical plan's SQL metrics after execution (``numFiles`` and ``filesSize`` of every
``FileSourceScanExec``), walking through adaptive query execution's stages. This is the ground truth that
tests and benchmarks compare the rewriter's decision records against.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclasses.dataclass(frozen=True)
class ScanMetric:
    table: str  # as Spark names it, e.g. spark_catalog.tpch.lineitem
    files: int
    bytes: int
    # Rows the scan produced: after Parquet row-group skipping by pushed filters, before any Filter node.
    rows: int = 0


def collect_with_metrics(df: DataFrame) -> tuple[list[Any], list[ScanMetric]]:
    """Run ``df`` and return its rows with the scans' metrics."""
    rows = df.collect()
    return rows, scan_metrics(df)


def scan_metrics(df: DataFrame) -> list[ScanMetric]:
    """Metrics of every file scan in the executed plan of ``df`` (call after an action ran). A reused
    exchange or subquery is not descended into: its scan ran once and is counted where it first appears."""
    out: list[ScanMetric] = []
    _walk(df._jdf.queryExecution().executedPlan(), out)  # noqa: SLF001 - metrics live in the JVM plan
    return out


def _walk(plan: Any, out: list[ScanMetric]) -> None:
    cls = plan.getClass().getSimpleName()
    if cls in ("ReusedExchangeExec", "ReusedSubqueryExec"):
        return
    if cls == "AdaptiveSparkPlanExec":
        _walk(plan.executedPlan(), out)
    elif cls.endswith("QueryStageExec"):
        _walk(plan.plan(), out)
    elif cls == "FileSourceScanExec":
        metrics = plan.metrics()
        files = metrics.apply("numFiles").value() if metrics.contains("numFiles") else 0
        size = metrics.apply("filesSize").value() if metrics.contains("filesSize") else 0
        rows = metrics.apply("numOutputRows").value() if metrics.contains("numOutputRows") else 0
        ident = plan.tableIdentifier()
        name = ident.get().unquotedString() if ident.isDefined() else plan.nodeName()
        out.append(ScanMetric(name, int(files), int(size), int(rows)))
    for children in (plan.children(), plan.subqueries()):
        it = children.iterator()
        while it.hasNext():
            _walk(it.next(), out)
