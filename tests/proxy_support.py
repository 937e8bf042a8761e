"""What the proxy tests share: a proxy in front of the shared Thrift Server, its decision log, and a reader of
the files the backend actually read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dipper.config import Config
from dipper.environment import free_port
from proxy.server import ProxyServer
from stats.freshness import Lister
from stats.loader import StatsLoader


def proxy_config(base: Config, log_dir: Path, **proxy: Any) -> Config:
    return base.replace("proxy", port=free_port(), decision_log=log_dir / "decisions.jsonl", **proxy)


def start_proxy(config: Config, store: Any) -> ProxyServer:
    return ProxyServer(config, StatsLoader(store, Lister(0))).start()


def decisions(config: Config) -> list[dict[str, Any]]:
    path = config.proxy.decision_log
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def files_read_since(spark: Any, execution_id: int) -> int:
    """Files the backend's file scans read in SQL executions newer than ``execution_id`` (from Spark's
    SQL status store, where executions run for Thrift Server clients are recorded too)."""
    store = spark._jsparkSession.sharedState().statusStore()  # noqa: SLF001
    total = 0
    seen: set[int] = set()  # adaptive execution re-lists a plan's metrics each time it re-plans
    for execution in _executions(spark, store):
        if execution.executionId() <= execution_id:
            continue
        values = store.executionMetrics(execution.executionId())
        metrics = spark._jvm.scala.jdk.javaapi.CollectionConverters.asJava(execution.metrics())  # noqa: SLF001
        for i in range(metrics.size()):
            m = metrics.get(i)
            if m.name() == "number of files read" and values.contains(m.accumulatorId()) \
                    and m.accumulatorId() not in seen:
                seen.add(m.accumulatorId())
                total += int(str(values.apply(m.accumulatorId())).replace(",", ""))
    return total


def last_execution_id(spark: Any) -> int:
    store = spark._jsparkSession.sharedState().statusStore()  # noqa: SLF001
    return max((e.executionId() for e in _executions(spark, store)), default=-1)


def _executions(spark: Any, store: Any) -> list[Any]:
    seq = spark._jvm.scala.jdk.javaapi.CollectionConverters.asJava(store.executionsList())  # noqa: SLF001
    return [seq.get(i) for i in range(seq.size())]
