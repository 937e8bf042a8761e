"""Notice that the embedded backend's JVM has died.

PySpark runs Spark in a child process (``spark-submit``, which ``exec``s the JVM, so the child *is* the JVM) and
talks to it over py4j. When that JVM dies (the kernel's OOM killer, ``kill -9``, a JVM crash), nothing in the
Python process notices: the proxy keeps accepting clients and tells each one the backend is not reachable, for
ever, and the pid file makes a restart refuse to start. ``server.py`` asks :meth:`JvmWatch.death` every second
and, once the JVM is gone, stops the proxy, removes its pid file and exits non-zero, so a supervisor (systemd,
Docker's restart policy, ``make demo`` run again) sees the failure and can start a new server.

The signal is the child's exit status (``Popen.poll``): a ``waitpid`` with ``WNOHANG``, which costs nothing and
cannot be fooled by a JVM that is merely busy. Only when PySpark attached to a gateway it did not start (no
child to wait for) is the gateway asked for the time instead, over py4j.
"""

from __future__ import annotations

import logging
import signal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("dipper.backend")


class JvmWatch:
    def __init__(self, spark: SparkSession) -> None:
        self._gateway: Any = spark.sparkContext._gateway  # noqa: SLF001 - the only handle on the JVM process
        self._proc: Any = getattr(self._gateway, "proc", None)
        self.pid: int | None = self._proc.pid if self._proc is not None else None

    def death(self) -> str | None:
        """None while the JVM lives; once it has died, one sentence saying how."""
        if self._proc is not None:
            status = self._proc.poll()
            return None if status is None else f"the embedded Spark JVM (pid {self.pid}) {describe_exit(status)}"
        try:
            self._gateway.jvm.java.lang.System.currentTimeMillis()
        except Exception as e:  # noqa: BLE001 - py4j raises several types for a gateway that is gone
            return f"the embedded Spark JVM no longer answers over py4j ({type(e).__name__}: {e})"
        return None


def describe_exit(status: int) -> str:
    """``Popen.returncode`` in words, with the usual cause of each kind of death."""
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        cause = (" (by someone, or by the kernel's out-of-memory killer when the machine ran out of memory: "
                 "see dmesg, and lower backend.driver_memory or give the machine more memory)"
                 if -status == signal.SIGKILL else "")
        return f"was killed by {name}{cause}"
    cause = " (Spark's own log above says why; an OutOfMemoryError calls for more backend.driver_memory)"
    return f"exited with status {status}{cause}"
