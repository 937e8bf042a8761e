"""``python -m bench metadata``: answers from statistics for a BI-like workload (issue 17, Measure).

Against the Spark Thrift Server of a running ``make demo`` (``backend.port``), through a proxy in its own process
(``server.py --mode remote``, as ``python -m bench proxy-overhead`` does). The workload is what a BI tool sends to browse
a database, built for every table of the given databases:

- ``SHOW TABLES`` (relayed to Spark; counted, never answered from statistics);
- ``SELECT COUNT(*) FROM t``;
- ``SELECT MIN(c), MAX(c) FROM t`` for each date and timestamp column;
- ``SELECT DISTINCT c FROM t ORDER BY c`` for each string column with at most ``--max-distinct`` values (counted
  once on Spark while the workload is built, not timed).

Each statement runs on Spark directly and through the proxy, one pyhive connection each way, after a warm-up pass
of the whole workload on both (Spark's caches and the proxy's loaded statistics are warm). Through the proxy it
runs twice in a new session: first as a session first asks it (Spark's analysis of it is not yet cached, so the
check costs a round trip to Spark), then again at once (cached). Results must be identical (sorted where there is
no ORDER BY); the decision log says which were answered from statistics. The report goes to ``docs/results/metadata.md``
with a plot.

The floor of the first answer in a session is Spark's analysis of the statement (the access check): measured on
Spark directly, for the answered statements, in the form the proxy sends (``SELECT * FROM (...) LIMIT 0``) and the
two other forms that analyse a statement (``DESCRIBE QUERY``, ``EXPLAIN``), each run asynchronously (as the proxy
runs every statement of its own) and synchronously.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import platform
import statistics
import tempfile
from collections.abc import Iterable
import time
from pathlib import Path

import psutil

from backend.server_process import start_server, stop_server
from bench.proxy_bench import connect, proxy_only_config
from dipper.config import Config
from dipper.environment import port_open
from dipper.errors import BackendError
from proxy.stats_answers import analysis_statement

_DATES = ("date", "timestamp", "timestamp_ltz", "timestamp_ntz")


@dataclasses.dataclass
class Timed:
    statement: str
    database: str
    spark_ms: float = 0.0
    first_ms: float = 0.0  # through the proxy, the first time the session asks
    again_ms: float = 0.0  # through the proxy, asked again at once
    answered: bool = False
    identical: bool = False
    why_not: str = ""


def measure(config: Config, databases: list[str], max_distinct: int, output: Path) -> int:
    b = config.backend
    if not port_open(b.host, b.port):
        raise BackendError(f"no Spark Thrift Server on {b.host}:{b.port}; start one with `make demo` first")
    workload = [Timed(sql, db) for db in databases for sql in _workload(b.host, b.port, db, max_distinct)]
    print(f"{len(workload)} statements over {', '.join(databases)}", flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        proxy_config, config_path = proxy_only_config(config, Path(scratch))
        proc = start_server(proxy_config, config_path, args=("--mode", "remote"), timeout=60)
        try:
            port = proxy_config.proxy.port
            for db in databases:
                mine = [w for w in workload if w.database == db]
                _pass(b.host, b.port, db, mine, None)  # warm-up, both ways
                _pass(b.host, port, db, mine, None)
                _pass(b.host, b.port, db, mine, "spark_ms")
                _pass(b.host, port, db, mine, "first_ms", again="again_ms")
            records = [json.loads(line) for line in proxy_config.proxy.decision_log.read_text().splitlines()]
        finally:
            stop_server(proc.pid)
    last = {r["statement"]: r for r in records}
    for w in workload:
        record = last.get(w.statement, {})
        w.answered = record.get("outcome") == "answered from statistics"
        w.why_not = record.get("not_answered_from_statistics", "") if not w.answered else ""
    floor = _analysis_floor(b.host, b.port, [w for w in workload if w.answered])
    _report(output, databases, max_distinct, workload, floor)
    print(output.read_text())
    return 0 if all(w.identical for w in workload) else 1


def _workload(host: str, port: int, database: str, max_distinct: int) -> list[str]:
    out = ["SHOW TABLES"]
    with connect(host, port, database) as conn:
        cursor = conn.cursor()
        cursor.execute("SHOW TABLES")
        tables = sorted(row[1] for row in cursor.fetchall() if not row[2])
        for table in tables:
            out.append(f"SELECT COUNT(*) FROM {table}")
            cursor.execute(f"DESCRIBE {table}")
            columns = []
            for name, kind, _ in cursor.fetchall():
                if not name or name.startswith("#"):
                    break  # partition and detail sections follow
                columns.append((name, kind.lower()))
            out += [f"SELECT MIN({c}), MAX({c}) FROM {table}" for c, kind in columns if kind in _DATES]
            strings = [c for c, kind in columns if kind == "string"]
            if strings:
                cursor.execute(f"SELECT {', '.join(f'count(DISTINCT {c})' for c in strings)} FROM {table}")
                counts = cursor.fetchall()[0]
                out += [f"SELECT DISTINCT {c} FROM {table} ORDER BY {c}" for c, n in zip(strings, counts)
                        if n <= max_distinct]
    return out


def _pass(host: str, port: int, database: str, workload: list[Timed], field: str | None,
          again: str | None = None) -> None:
    """Run every statement of ``workload`` in one new session; record its time in ``field``, and with ``again`` run
    it a second time at once and record that too. Through the proxy, compare with Spark's rows (``spark``)."""
    with connect(host, port, database) as conn:
        cursor = conn.cursor()
        for w in workload:
            started = time.perf_counter()
            cursor.execute(w.statement)
            rows = cursor.fetchall()
            elapsed = (time.perf_counter() - started) * 1000
            if field is not None:
                setattr(w, field, elapsed)
            if field == "spark_ms":
                w.spark_rows = _canonical(w.statement, rows)  # type: ignore[attr-defined]
            if again is not None:
                w.identical = _canonical(w.statement, rows) == getattr(w, "spark_rows", None)
                started = time.perf_counter()
                cursor.execute(w.statement)
                cursor.fetchall()
                setattr(w, again, (time.perf_counter() - started) * 1000)


_ANALYSIS_FORMS = {
    "`SELECT * FROM (...) LIMIT 0` (the proxy's)": analysis_statement,
    "`DESCRIBE QUERY ...`": lambda sql: f"DESCRIBE QUERY {sql}",
    "`EXPLAIN ...`": lambda sql: f"EXPLAIN {sql}",
}


def _analysis_floor(host: str, port: int, answered: Iterable[Timed], repeats: int = 3) -> dict[tuple[str, bool], float]:
    """(form, asynchronously) -> median ms on Spark directly of each answered statement's analysis in that form."""
    from TCLIService.ttypes import TOperationState as S

    running = (S.INITIALIZED_STATE, S.PENDING_STATE, S.RUNNING_STATE)
    times: dict[tuple[str, bool], list[float]] = {}
    by_database: dict[str, list[Timed]] = {}
    for w in answered:
        by_database.setdefault(w.database, []).append(w)
    for database, statements in by_database.items():
        with connect(host, port, database) as conn:
            cursor = conn.cursor()
            for w in statements:
                for form, text in _ANALYSIS_FORMS.items():
                    for asynchronous in (True, False):
                        for _ in range(repeats):
                            started = time.perf_counter()
                            cursor.execute(text(w.statement), async_=asynchronous)
                            while asynchronous and cursor.poll().operationState in running:
                                time.sleep(0.0005)
                            cursor.fetchall()
                            times.setdefault((form, asynchronous), []).append((time.perf_counter() - started) * 1000)
    return {key: statistics.median(values) for key, values in times.items()}


def _canonical(statement: str, rows: list[tuple]) -> list[str]:
    shown = [repr(r) for r in rows]
    return shown if "ORDER BY" in statement else sorted(shown)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, int(round(q * len(ordered))) - 1)] if ordered else float("nan")


def _report(output: Path, databases: list[str], max_distinct: int, workload: list[Timed],
            floor: dict[tuple[str, bool], float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    machine = f"{platform.machine()}, {psutil.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB"
    answered = [w for w in workload if w.answered]
    share = len(answered) / len(workload)
    lines = []
    for w in workload:
        lines.append(f"| `{w.statement}` | {'yes' if w.answered else 'no: ' + (w.why_not or 'relayed')[:70]} | "
                     f"{w.spark_ms:.1f} | {w.first_ms:.1f} | {w.again_ms:.1f} | {'yes' if w.identical else '**NO**'} |")

    def stats(values: list[float]) -> str:
        return f"{statistics.median(values):.1f} / {_percentile(values, 0.95):.1f}" if values else "-"

    output.parent.mkdir(parents=True, exist_ok=True)
    plot = output.with_suffix(".png")
    fig, ax = plt.subplots(figsize=(9, 4))
    xs = range(len(answered))
    ax.bar([x - 0.27 for x in xs], [w.spark_ms for w in answered], width=0.27, label="Spark directly")
    ax.bar(list(xs), [w.first_ms for w in answered], width=0.27, label="through Dipper, first in session")
    ax.bar([x + 0.27 for x in xs], [w.again_ms for w in answered], width=0.27, label="through Dipper, again")
    ax.set_yscale("log")
    ax.set_ylabel("ms (log scale)")
    ax.set_xlabel("statements answered from statistics")
    ax.set_title(f"Answers from statistics: {', '.join(databases)}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(plot, dpi=110)
    plt.close(fig)
    output.write_text(f"""# Answers from statistics (issue 17)

Measured {when} on {machine} by `python -m bench metadata --database {' --database '.join(databases)}
--max-distinct {max_distinct}` against the Spark Thrift Server of `make demo`, through a proxy in its own process
(`server.py --mode remote`); pyhive clients in the benchmark process; Spark, the proxy and the clients share the
machine. The workload is what a BI tool sends to browse the databases: `SHOW TABLES`, a row count per table,
`MIN`/`MAX` of each date column, the distinct values of each string column with at most {max_distinct} values. Each
statement ran after a warm-up pass of the whole workload both ways; through the proxy first as a new session first
asks it (the proxy has Spark analyse it in the user's session before answering: a round trip to Spark) and then
again at once (that analysis cached for `proxy.analysis_cache_seconds`).

## Summary

| | |
|---|---:|
| statements | {len(workload)} |
| answered from statistics | **{len(answered)} ({share:.0%})** |
| answers identical to Spark's | {sum(w.identical for w in workload)} of {len(workload)} |
| answered statements, Spark directly: p50 / p95 ms | {stats([w.spark_ms for w in answered])} |
| answered statements through Dipper, first in session: p50 / p95 ms | **{stats([w.first_ms for w in answered])}** |
| answered statements through Dipper, again: p50 / p95 ms | {stats([w.again_ms for w in answered])} |

Target: at most 20 ms p95 per answered statement, every answer identical.

![latency]({plot.name})

Where the time goes through Dipper: asked again within a session, the answer is computed from the loaded
statistics (a listing of the table's folder, the evaluators over every file at once) and nothing reaches Spark.
The first time a session asks a statement, the answer waits for Spark's analysis of it in the user's own session
(the access check of issue 17 part 3, one `SELECT * FROM (...) LIMIT 0`) and, for the session's first statement on
a table, for the catalog's word on where the table lives (asked while Spark analyses). Spark's Thrift Server takes
longer for the analysis statement run asynchronously, as the proxy runs every statement, than synchronously; the
proxy keeps the asynchronous path, which a PostgreSQL metastore needs (`_backend_statement` in
`proxy/own_statements.py`). Statements not answered from statistics cost what they cost before.

The floor of a first answer is that analysis. Spark's median time to analyse the answered statements, on Spark
directly, in each form that analyses a statement without running it:

| form | asynchronous (the proxy's way) ms | synchronous ms |
|---|---:|---:|
""" + "\n".join(f"| {form} | {floor.get((form, True), float('nan')):.1f} | {floor.get((form, False), float('nan')):.1f} |"
                for form in _ANALYSIS_FORMS) + """

""" + (f"""The fastest form and mode takes {min(floor.values()):.1f} ms: the 20 ms target can hold for a statement asked
again in a session, and cannot hold the first time a session asks it while Spark checks access first (issue 17
part 3). Dipper keeps the check, cached per session and statement for `proxy.analysis_cache_seconds`.
""" if floor and min(floor.values()) > 20 else "") + """
## Every statement

| statement | answered from statistics | Spark ms | Dipper ms, first | Dipper ms, again | identical |
|---|---|---:|---:|---:|---|
""" + "\n".join(lines) + "\n")
