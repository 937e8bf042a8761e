"""What a soak reads from the running stack, cheaply and from outside it (``bench soak``).

- Spark's JVM (the embedded backend): heap in use from ``jstat -gc``; live heap and counts of the objects the
  hypotheses name from ``jcmd GC.class_histogram``, which runs a full collection first, so what it counts is
  what the JVM keeps, not garbage not yet collected: Thrift Server sessions and operations (does the proxy
  leave any open?), the Thrift Server's and the SQL status store's records of past statements (with their
  plan text: long prune filters make them large), broadcast relations. Both tools ship with the JDK; Spark's
  UI, which would have the same from a REST API, is off in the embedded backend (``backend/spark_session.py``).
- The proxy: its Prometheus gauges (``dipper_client_sessions``, ``dipper_backend_connections``) and statement
  counts when ``proxy.metrics_port`` is served, and its process's resident set.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import time
import urllib.request

import psutil

# Classes whose live instances the soak counts: (column name, regex over the class name).
CLASS_COUNTS: tuple[tuple[str, str], ...] = (
    ("hive_sessions", r"^org\.apache\.hive\.service\.cli\.session\.HiveSessionImpl(WithUGI)?$"),
    ("operations", r"^org\.apache\.(spark\.sql\.hive\.thriftserver\.SparkExecuteStatementOperation|"
                   r"spark\.sql\.hive\.thriftserver\.SparkGet\w+Operation|hive\.service\.cli\.operation\.\w+Operation)$"),
    ("thrift_ui_executions", r"^org\.apache\.spark\.sql\.hive\.thriftserver\.ui\.ExecutionInfo$"),
    ("thrift_ui_sessions", r"^org\.apache\.spark\.sql\.hive\.thriftserver\.ui\.SessionInfo$"),
    ("sql_ui_executions", r"^org\.apache\.spark\.sql\.execution\.ui\.SQLExecutionUIData$"),
    ("query_executions", r"^org\.apache\.spark\.sql\.execution\.QueryExecution$"),
    ("broadcasts", r"^org\.apache\.spark\.broadcast\.TorrentBroadcast$"),
)


@dataclasses.dataclass(frozen=True)
class JvmHeap:
    used_mb: float
    capacity_mb: float
    full_gcs: int


def jvm_heap(pid: int) -> JvmHeap | None:
    """Heap in use and committed (young + old generation) of JVM ``pid``, by ``jstat -gc``; None if unreadable."""
    out = _run(["jstat", "-gc", str(pid)])
    if out is None:
        return None
    lines = out.split("\n")
    if len(lines) < 2:
        return None
    row = dict(zip(lines[0].split(), lines[1].split()))
    try:
        used = sum(float(row[k]) for k in ("S0U", "S1U", "EU", "OU"))
        capacity = sum(float(row[k]) for k in ("S0C", "S1C", "EC", "OC"))
        return JvmHeap(used / 1024, capacity / 1024, int(float(row.get("FGC", "0"))))
    except (KeyError, ValueError):
        return None


@dataclasses.dataclass(frozen=True)
class Histogram:
    live_mb: float  # bytes of every live object after the full collection the histogram runs
    counts: dict[str, int]  # CLASS_COUNTS' names -> live instances
    top: list[tuple[str, float]]  # the largest classes: (name, MB)
    seconds: float  # how long the JVM was busy with it (the full collection)


def class_histogram(pid: int, top: int = 6) -> Histogram | None:
    """Live objects of JVM ``pid`` by class (``jcmd GC.class_histogram``, after a full collection)."""
    started = time.monotonic()
    out = _run(["jcmd", str(pid), "GC.class_histogram"], timeout=300)
    if out is None:
        return None
    return parse_histogram(out, time.monotonic() - started, top)


def parse_histogram(text: str, seconds: float = 0.0, top: int = 6) -> Histogram:
    """``jcmd GC.class_histogram``'s table (`` num: instances bytes class``, then ``Total``) as a Histogram."""
    counts = {name: 0 for name, _ in CLASS_COUNTS}
    patterns = [(name, re.compile(rx)) for name, rx in CLASS_COUNTS]
    rows: list[tuple[str, int]] = []
    total = 0
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] == "Total":
            total = int(parts[2])
        if len(parts) < 4 or not parts[0].endswith(":"):
            continue
        instances, size, name = int(parts[1]), int(parts[2]), parts[3]
        rows.append((name, size))
        for key, rx in patterns:
            if rx.match(name):
                counts[key] += instances
    rows.sort(key=lambda r: -r[1])
    return Histogram(total / 2**20, counts, [(n, b / 2**20) for n, b in rows[:top]], seconds)


def proxy_metrics(host: str, port: int) -> dict[str, float]:
    """The proxy's Prometheus samples, ``name{labels}`` -> value; empty if the endpoint does not answer."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
    except OSError:
        return {}
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        key, _, value = line.rpartition(" ")
        try:
            out[key] = float(value)
        except ValueError:
            continue
    return out


def rss_mb(pid: int | None) -> float:
    """Resident set of ``pid`` in MB; NaN if there is no such process."""
    try:
        return psutil.Process(pid).memory_info().rss / 2**20 if pid else float("nan")
    except psutil.Error:
        return float("nan")


def _run(argv: list[str], timeout: float = 60) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return None
    return done.stdout.strip() if done.returncode == 0 else None
