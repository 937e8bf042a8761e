"""Executor CPU time of the Spark jobs a piece of work ran: the cluster cost a user pays for a query.

Read from Spark's own status store (the data behind its UI and REST API, kept whether or not the UI is
on): the jobs started after a mark, their stages, and each stage's ``executorCpuTime`` -- the sum over its
tasks of the CPU time their threads used, as Spark's task metrics record it. Driver-side planning is not in
it; the wall time is where that shows. A stage counts once even when several jobs list it (a reused
shuffle), and a skipped stage ran no task, so it adds nothing.

Task metrics reach the store through Spark's listener bus, after the action that ran them has returned:
:meth:`CpuMeter.since` waits for the bus to drain before it reads. One meter assumes one thread runs
queries on its session at a time, as the benchmark does: jobs of another thread started after the mark
would be counted too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from py4j.protocol import Py4JJavaError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class CpuMeter:
    def __init__(self, spark: SparkSession) -> None:
        context = spark.sparkContext
        self._jvm = context._jvm  # noqa: SLF001 - the status store lives in the JVM
        self._sc = context._jsc.sc()  # noqa: SLF001

    def _jobs(self) -> list:
        self._sc.listenerBus().waitUntilEmpty()
        it = self._sc.statusStore().jobsList(self._jvm.java.util.ArrayList()).iterator()
        out = []
        while it.hasNext():
            out.append(it.next())
        return out

    def mark(self) -> int:
        """The newest job id so far (-1 before the first job)."""
        return max((int(j.jobId()) for j in self._jobs()), default=-1)

    def since(self, mark: int) -> float:
        """Executor CPU seconds of every job started after ``mark``."""
        store = self._sc.statusStore()
        stages: set[int] = set()
        for job in self._jobs():
            if int(job.jobId()) > mark:
                it = job.stageIds().iterator()
                while it.hasNext():
                    stages.add(int(it.next()))
        total = 0
        for s in stages:
            try:
                total += int(store.lastStageAttempt(s).executorCpuTime())
            except Py4JJavaError:
                # Not in the store: once it holds spark.ui.retainedStages stages, Spark evicts the oldest by
                # completion time, skipped stages (no completion time) first. A skipped stage ran no task.
                continue
        return total / 1e9
