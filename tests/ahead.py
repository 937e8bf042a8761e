"""The Spark work of a parametrized test's cases, run ahead of them on a few threads (issue 64).

A differential case on the SF 0.01 test data spends most of its time waiting: Spark plans on the driver, then
runs a few tiny tasks on ``local[2]``; one case after the other leaves the two cores half idle. The cases are
independent, so the first case a run reaches submits the Spark work of every case of its test *that this run
selected* (whatever ``-k``, ``--lf`` or the order chose) to a small thread pool, and each case then waits for
its own result and asserts on it, so a failure is still reported by the case it belongs to.

Each worker thread has a Spark session of its own (``SparkSession.newSession``: its own current database and
SQL settings, the shared catalog, cache and executors), so a case may ``USE`` a database or change a setting
without touching another's. What is not Spark (datasets built, statistics collected, rewrites) stays on the
test's own thread, in the cases' order, so decisions do not depend on the threads' timing.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import threading
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Threads sharing the 2 cores. Measured on the adversarial cases (after their tables were built): 34.4 s on one
# thread, 26.3 s on three; the JVM then runs at about 190% CPU. DIPPER_TEST_WORKERS overrides it.
WORKERS = max(1, int(os.environ.get("DIPPER_TEST_WORKERS", "3")))


def selected(request: pytest.FixtureRequest, test: Callable[..., Any]) -> list[dict[str, Any]]:
    """The parameters of each case of ``test`` (a parametrized test function of the requesting module) that this
    run selected, in run order."""
    return [item.callspec.params for item in request.session.items
            if getattr(item, "originalname", None) == test.__name__ and getattr(item, "module", None) is request.module]


class Ahead:
    """A thread pool whose jobs each get the calling thread's own Spark session."""

    def __init__(self, spark: SparkSession, workers: int = WORKERS) -> None:
        self._spark = spark
        self._local = threading.local()
        self._pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="ahead")
        self._futures: dict[Hashable, concurrent.futures.Future[Any]] = {}
        self._made: dict[Hashable, Any] = {}

    def _session(self) -> SparkSession:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = self._spark.newSession()
        return session

    def prepare(self, key: Hashable, make: Callable[[], Any]) -> Any | None:
        """``make()`` on the test's own thread (a dataset, a rewrite); None if it raised, and then the case's
        ``made`` and ``result`` raise it: a setup that fails fails the cases that need it, not the module."""
        try:
            value = make()
        except Exception as e:  # noqa: BLE001 - kept for the case it belongs to
            self._made[key] = _Failed(e)
            return None
        self._made[key] = value
        return value

    def made(self, key: Hashable) -> Any:
        """What ``prepare`` made for the case; raises what it raised."""
        value = self._made[key]
        if isinstance(value, _Failed):
            raise value.error
        return value

    def submit(self, key: Hashable, job: Callable[..., Any], *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        """Run ``job(session, *args, **kwargs)`` on a worker; its result (or exception) is ``result(key)``."""
        future = self._futures[key] = self._pool.submit(lambda: job(self._session(), *args, **kwargs))
        return future

    def result(self, key: Hashable) -> Any:
        """The job's result; raises what the job raised."""
        if isinstance(self._made.get(key), _Failed):
            raise self._made[key].error
        if key not in self._futures:
            raise KeyError(f"no job was submitted for {key!r}: was the case selected after the run began?")
        return self._futures[key].result()

    def close(self) -> None:
        """Drop the jobs no case waited for (a run stopped by -x) and wait for the running ones."""
        for future in self._futures.values():
            future.cancel()
        self._pool.shutdown(wait=True)


@dataclasses.dataclass
class _Failed:
    error: Exception
