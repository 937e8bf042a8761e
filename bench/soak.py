"""``python -m bench soak --minutes N``: mixed load through Dipper for a set time, with readings of the stack.

Why: after about two hours of mixed load the embedded backend degraded (TPC-DS SF 1 queries took 30-110 s on
Spark directly, a dozen failed with "Not enough memory to build and broadcast" on both paths; after a restart
the same texts ran in 6-10 s). The hypotheses, and the reading of each:

- backend sessions or operations the proxy leaves open: live ``HiveSessionImpl`` and operation objects in
  Spark's JVM, beside the proxy's own gauges (``dipper_client_sessions``, ``dipper_backend_connections``);
- cached plans or records of long prune filters: live Thrift Server and SQL status-store records of past
  statements (``ExecutionInfo``, ``SQLExecutionUIData``), ``QueryExecution`` objects and the live heap;
- the proxy's statistics queries (catalog checks, analyses): the statement counts of its metrics;
- Spark alone: the same readings move on the direct path too (the probe runs directly and through the proxy).

Load: ``--in-flight`` clients through the proxy, each drawing at random from Spark's TPC-DS query texts (the
99 the benchmark runs), queries of the random query generator (``bench/fuzz``, sized for SF 1) over TPC-H and
TPC-DS, and TPC-H skipping statements. A reading (at the start, every ``--every`` minutes, and at the end)
first lets the statements in flight finish and pauses the load, so the probe's latency is the stack's, not
the load's: ``SELECT 1`` and a fixed TPC-DS query (``--probe``), directly and through the proxy; Spark's
heap (``jstat``) and live objects (``jcmd GC.class_histogram``, after a full collection); the proxy's
gauges and resident set. Readings go to ``docs/results/soak/<time>.csv`` as they are taken (a run stopped early
keeps them), every statement to ``<time>-statements.csv``, and a section to ``docs/results/proxy.md`` at the end.
"""

from __future__ import annotations

import csv
import dataclasses
import logging
import math
import os
import random
import statistics
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.latency import Summary
from bench.load_stack import LoadStack, load_stack
from bench.proxy_load import skip_statements
from bench.run_record import append_section, commit, load_average, machine, stamp, utc_now
from bench.stack_readings import CLASS_COUNTS, class_histogram, jvm_heap, proxy_metrics, rss_mb
from dipper.config import Config
from dipper.errors import DipperError

log = logging.getLogger("dipper.bench")

MIX = (("tpcds", 6), ("fuzz", 3), ("skip", 1))  # kind, weight


@dataclasses.dataclass(frozen=True)
class SoakOptions:
    minutes: float = 15.0
    every: float = 5.0
    in_flight: int = 2
    probe: str = "q03"
    tpcds: str = "tpcds_sf1_tuned"
    tpch: str = "tpch_sf1_tuned"
    seed: int = 1
    statement_timeout: float = 300.0
    output: Path = Path("docs/results/proxy.md")
    proxy_port: int | None = None
    backend_port: int | None = None
    metrics_port: int | None = None

    def __post_init__(self) -> None:
        if not (self.minutes > 0 and math.isfinite(self.minutes)):
            raise DipperError(f"--minutes must be a number of minutes above 0, not {self.minutes}")
        if not self.every > 0:
            raise DipperError(f"--every must be above 0 minutes, not {self.every}")
        if self.in_flight < 1:
            raise DipperError(f"--in-flight must be at least 1, not {self.in_flight}")
        if not self.statement_timeout > 0:
            raise DipperError("--statement-timeout must be above 0 seconds")


@dataclasses.dataclass(frozen=True)
class Reading:
    minute: float
    load1: float
    statements: int
    errors: int
    select1_direct_ms: float
    select1_proxy_ms: float
    probe_direct_ms: float
    probe_proxy_ms: float
    heap_used_mb: float
    heap_capacity_mb: float
    heap_live_mb: float
    full_gcs: int
    jvm_rss_mb: float
    proxy_rss_mb: float
    client_sessions: float
    backend_connections: float
    counts: dict[str, int]
    top: str
    histogram_s: float

    def row(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "counts"}
        return {**out, **{f"live_{k}": v for k, v in self.counts.items()}}


class _Load:
    """The clients of the mixed load; ``pause`` lets the statements in flight end and starts no new ones."""

    def __init__(self, stack: LoadStack, opts: SoakOptions, statements_csv: Path) -> None:
        from bench.query_suite import runnable_queries

        self.stack, self.opts = stack, opts
        self.tpcds = sorted(runnable_queries("tpcds").items())
        self.running = threading.Event()
        self.stop = threading.Event()
        self.busy = 0
        self.lock = threading.Lock()
        self.done = 0
        self.errors: Counter[str] = Counter()
        self.results: list[tuple[str, str, float, str]] = []  # kind, name, ms, error
        self._csv = statements_csv.open("w", newline="")
        self._writer = csv.writer(self._csv)
        self._writer.writerow(["at_s", "client", "kind", "name", "latency_ms", "error"])
        self.started = time.monotonic()
        self.threads = [threading.Thread(target=self._client, args=(i,), daemon=True) for i in range(opts.in_flight)]

    def start(self) -> None:
        self.running.set()
        for t in self.threads:
            t.start()

    def pause(self, wait: float = 600.0) -> None:
        self.running.clear()
        deadline = time.monotonic() + wait
        while self.busy and time.monotonic() < deadline:
            time.sleep(0.5)

    def finish(self) -> None:
        self.stop.set()
        self.running.set()
        for t in self.threads:
            t.join(timeout=self.opts.statement_timeout + 30)
        self._csv.close()

    def _draw(self, rng: random.Random, n: int) -> tuple[str, str, str, str]:
        """(kind, name, database, sql) of the next statement."""
        from bench.fuzz.generate import generate

        kind = rng.choices([k for k, _ in MIX], [w for _, w in MIX])[0]
        if kind == "tpcds":
            name, sql = rng.choice(self.tpcds)
            return kind, name, self.opts.tpcds, sql
        if kind == "fuzz":
            suite = rng.choice(("tpcds", "tpch"))
            q = generate(suite, self.opts.seed, n, sf=1.0)
            return kind, q.name, self.opts.tpcds if suite == "tpcds" else self.opts.tpch, q.sql
        (_, sql), = skip_statements(rng, 1)
        return kind, "lineitem-week", self.opts.tpch, sql

    def _client(self, index: int) -> None:
        from bench.proxy_bench import connect

        rng = random.Random(f"{self.opts.seed}/{index}")
        conns: dict[str, Any] = {}
        n = index
        try:
            while not self.stop.is_set():
                self.running.wait()
                if self.stop.is_set():
                    break
                with self.lock:
                    self.busy += 1
                try:
                    kind, name, database, sql = self._draw(rng, n)
                    n += self.opts.in_flight
                    started = time.perf_counter()
                    error = ""
                    try:
                        if database not in conns:
                            conns[database] = connect(self.stack.host, self.stack.proxy_port, database,
                                                      user=f"soak-{index}")
                        cursor = conns[database].cursor()
                        try:
                            timed(cursor, sql, self.opts.statement_timeout)
                        finally:
                            _close(cursor)  # CloseOperation: an operation left open holds its results in Spark
                    except Exception as e:  # noqa: BLE001 - every failure is counted and the load goes on
                        error = (str(e).strip() or type(e).__name__).splitlines()[0][:200]
                        old = conns.pop(database, None)
                        if old is not None:  # a new connection next time; this one closed, not left open
                            _close(old)
                    ms = (time.perf_counter() - started) * 1000
                    with self.lock:
                        self.done += 1
                        if error:
                            self.errors[error[:120]] += 1
                        self.results.append((kind, name, ms, error))
                        self._writer.writerow([f"{time.monotonic() - self.started:.1f}", index, kind, name,
                                               f"{ms:.1f}", error])
                        self._csv.flush()
                finally:
                    with self.lock:
                        self.busy -= 1
        finally:
            for c in conns.values():
                _close(c)


def timed(cursor: Any, sql: str, timeout: float) -> int:
    """Run ``sql`` asynchronously and fetch its rows; cancel it after ``timeout`` seconds (a soak must not hang
    on one statement). Returns the row count."""
    from TCLIService.ttypes import TOperationState

    cursor.execute(sql, async_=True)
    deadline = time.monotonic() + timeout
    pending = (TOperationState.INITIALIZED_STATE, TOperationState.PENDING_STATE, TOperationState.RUNNING_STATE)
    while True:
        status = cursor.poll()
        if status.operationState not in pending:
            break
        if time.monotonic() > deadline:
            cursor.cancel()
            raise TimeoutError(f"timed out after {timeout:.0f} s, cancelled")
        time.sleep(0.1)
    if status.operationState != TOperationState.FINISHED_STATE:
        raise DipperError(status.errorMessage or f"operation ended in state {status.operationState}")
    return len(cursor.fetchall())


def _close(conn: Any) -> None:
    try:
        conn.close()
    except Exception:  # noqa: BLE001 - closing a broken connection may fail; nothing to do about it
        pass


def read_stack(stack: LoadStack, opts: SoakOptions, load: _Load, minute: float) -> Reading:
    """One reading, with the load paused."""
    from bench.proxy_bench import connect
    from bench.query_suite import select_queries

    probe_sql = next(iter(select_queries("tpcds", [opts.probe]).values()))
    timings: dict[str, float] = {}
    for path, port in (("direct", stack.backend_port), ("proxy", stack.proxy_port)):
        with connect(stack.host, port, opts.tpcds, user="soak-probe") as conn:
            cursor = conn.cursor()
            select1 = []
            for _ in range(5):
                t = time.perf_counter()
                timed(cursor, "SELECT 1", 60)
                select1.append((time.perf_counter() - t) * 1000)
            timings[f"select1_{path}_ms"] = statistics.median(select1)
            t = time.perf_counter()
            try:
                timed(cursor, probe_sql, opts.statement_timeout)
                timings[f"probe_{path}_ms"] = (time.perf_counter() - t) * 1000
            except Exception as e:  # noqa: BLE001 - a failing probe is a finding, recorded as NaN and logged
                log.warning("the probe %s failed on the %s path: %s", opts.probe, path, str(e).splitlines()[0][:200])
                timings[f"probe_{path}_ms"] = math.nan
    jvm = stack.backend_pid()
    before = jvm_heap(jvm) if jvm else None
    hist = class_histogram(jvm) if jvm else None
    after = jvm_heap(jvm) if jvm else None
    metrics = proxy_metrics(stack.host, stack.metrics_port) if stack.metrics_port else {}
    nan = math.nan
    return Reading(
        minute=round(minute, 1), load1=round(os.getloadavg()[0], 2), statements=load.done,
        errors=sum(load.errors.values()), **{k: round(v, 1) for k, v in timings.items()},
        heap_used_mb=round(before.used_mb, 1) if before else nan,
        heap_capacity_mb=round(before.capacity_mb, 1) if before else nan,
        heap_live_mb=round(hist.live_mb, 1) if hist else nan, full_gcs=after.full_gcs if after else -1,
        jvm_rss_mb=round(rss_mb(jvm), 1), proxy_rss_mb=round(rss_mb(stack.proxy_pid()), 1),
        client_sessions=metrics.get("dipper_client_sessions", nan),
        backend_connections=metrics.get("dipper_backend_connections", nan),
        counts=hist.counts if hist else {name: -1 for name, _ in CLASS_COUNTS},
        top="; ".join(f"{n.rsplit('.', 1)[-1]} {mb:.0f} MB" for n, mb in hist.top[:4]) if hist else "",
        histogram_s=round(hist.seconds, 1) if hist else nan)


def soak(config: Config, opts: SoakOptions) -> int:
    when = utc_now()
    load_at_start = load_average()
    folder = opts.output.parent / "soak"
    folder.mkdir(parents=True, exist_ok=True)
    readings_csv = folder / f"{stamp(when)}.csv"
    statements_csv = folder / f"{stamp(when)}-statements.csv"
    _say(f"soak for {opts.minutes:g} min, {opts.in_flight} in flight; load average {load_at_start}; "
         f"readings in {readings_csv}")
    readings: list[Reading] = []
    with load_stack(config, opts.tpcds, opts.proxy_port, opts.backend_port, None, opts.metrics_port,
                    keep_workdir=True) as stack:
        load = _Load(stack, opts, statements_csv)
        began = time.monotonic()

        def take() -> None:
            reading = read_stack(stack, opts, load, (time.monotonic() - began) / 60)
            readings.append(reading)
            _append_csv(readings_csv, reading)
            _say(_line(reading))

        take()
        load.start()
        end = began + opts.minutes * 60
        next_at = began + opts.every * 60
        try:
            while time.monotonic() < end:
                time.sleep(min(5.0, max(0.0, end - time.monotonic())))
                if time.monotonic() >= next_at and time.monotonic() < end:
                    load.pause()
                    take()
                    load.running.set()
                    next_at += opts.every * 60
            load.pause()
            take()
        finally:
            load.finish()
        workdir = stack.workdir
    body = report(readings, load, opts, when, load_at_start, readings_csv, statements_csv, workdir)
    append_section(opts.output, f"Soak, {when:%Y-%m-%d %H:%M} UTC", body)
    print(body)
    return 0


def _append_csv(path: Path, reading: Reading) -> None:
    row = reading.row()
    new = not path.is_file()
    with path.open("a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(row))
        if new:
            w.writeheader()
        w.writerow(row)


def _line(r: Reading) -> str:
    return (f"min {r.minute:5.1f}: {r.statements} statements ({r.errors} errors); probe {r.probe_direct_ms:,.0f} ms "
            f"direct / {r.probe_proxy_ms:,.0f} ms proxy; SELECT 1 {r.select1_direct_ms:.0f} / {r.select1_proxy_ms:.0f} "
            f"ms; heap {r.heap_used_mb:,.0f} MB used, {r.heap_live_mb:,.0f} MB live; sessions {r.counts}; proxy "
            f"{r.client_sessions:g} client sessions, {r.backend_connections:g} backend connections, RSS "
            f"{r.proxy_rss_mb:,.0f} MB; load {r.load1}")


def report(readings: list[Reading], load: _Load, opts: SoakOptions, when: Any, load_at_start: str,
           readings_csv: Path, statements_csv: Path, workdir: Path | None) -> str:
    base = opts.output.parent
    head = ("| minute | load | statements | errors | probe direct ms | probe proxy ms | SELECT 1 direct / proxy ms | "
            "heap used / live MB | JVM RSS MB | proxy RSS MB | client sessions / backend conns | "
            + " | ".join(name for name, _ in CLASS_COUNTS) + " |")
    rule = "|" + "---:|" * (11 + len(CLASS_COUNTS))
    rows = [f"| {r.minute:g} | {r.load1} | {r.statements} | {r.errors} | {r.probe_direct_ms:,.0f} | "
            f"{r.probe_proxy_ms:,.0f} | {r.select1_direct_ms:.0f} / {r.select1_proxy_ms:.0f} | "
            f"{r.heap_used_mb:,.0f} / {r.heap_live_mb:,.0f} | {r.jvm_rss_mb:,.0f} | {r.proxy_rss_mb:,.0f} | "
            f"{r.client_sessions:g} / {r.backend_connections:g} | "
            + " | ".join(str(r.counts[name]) for name, _ in CLASS_COUNTS) + " |" for r in readings]
    by_kind = {k: Summary.of([ms for kind, _, ms, e in load.results if kind == k and not e],
                             sum(1 for kind, _, _, e in load.results if kind == k and e)) for k, _ in MIX}
    kinds = "\n".join(f"| {k} | {s.cells()} |" for k, s in by_kind.items())
    errors = "\n".join(f"- {n} x `{e}`" for e, n in load.errors.most_common(8)) or "- none"
    tops = "\n".join(f"- minute {r.minute:g}: {r.top}" for r in (readings[0], readings[-1])) if readings else ""
    return f"""Measured {when:%Y-%m-%d %H:%M} UTC on {machine()}, commit {commit()}, by `python -m bench soak --minutes
{opts.minutes:g} --every {opts.every:g} --in-flight {opts.in_flight}` (load through the proxy: TPC-DS texts, fuzz
queries sized for SF 1, TPC-H skipping statements, weights {', '.join(f'{k} {w}' for k, w in MIX)}; probe: TPC-DS
{opts.probe}). Load average at the start: **{load_at_start}**; the machine is shared, so latencies are noisy.
Each reading pauses the load and lets the statements in flight finish first. Readings:
[{readings_csv.name}]({readings_csv.relative_to(base)}), statements: [{statements_csv.name}]({statements_csv.relative_to(base)}){f'; the stack kept its logs in `{workdir}`' if workdir else ''}.
Live object counts are from `jcmd GC.class_histogram` (after a full collection) of Spark's JVM.

{head}
{rule}
{chr(10).join(rows)}

| statements | ran | errors | p50 ms | p95 ms | max ms |
|---|---:|---:|---:|---:|---:|
{kinds}

Most frequent errors:
{errors}

Largest classes in Spark's heap (live):
{tops}
"""


def _say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)
