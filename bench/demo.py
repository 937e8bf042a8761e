"""``make demo``: bring the stack up (or reuse it), query it through the proxy with pyhive and beeline, show
what the proxy skipped, and say how to connect."""

from __future__ import annotations

import logging
import os
import shlex
import time
from pathlib import Path

from backend.beeline import beeline_command, beeline_rows, jdbc_url, run_beeline
from backend.server_process import log_file, running_pid, start_server, stop_server
from backend.warehouse import MANIFEST, database_name
from dipper.config import Config
from dipper.environment import java_executable, port_open
from dipper.errors import BackendError, DatasetError

log = logging.getLogger("dipper.bench")

SAMPLE_QUERY = """SELECT l_returnflag, l_linestatus, count(*) AS line_items, sum(l_extendedprice) AS revenue
FROM lineitem
WHERE l_shipdate BETWEEN DATE '1995-03-01' AND DATE '1995-03-31'
GROUP BY l_returnflag, l_linestatus
ORDER BY l_returnflag, l_linestatus"""


# A small dashboard's queries: TPC-H instances with the specification's substitution parameters, so that the
# decision log holds a workload with varied literals for the layout what-if to learn from.
WORKLOAD_QUERIES = ["q06", "q12", "q14"]
WORKLOAD_INSTANCES = 2  # of each
WHAT_IF_SAMPLE_ROWS = 50_000  # enough for lineitem's blocks at SF 1; keeps the demo's what-if to seconds

DEMO_HTTP_PORT = 10002  # the HTTP transport's port when the configuration serves none


def demo(config: Config, config_path: Path, sf: float) -> int:
    java = java_executable(os.environ)
    database = database_name("tpch", sf, "tuned")
    if not (config.paths.warehouse / database / MANIFEST).is_file():
        raise DatasetError(f"{database} is not in {config.paths.warehouse}; "
                           f"create it with: python -m bench generate --suite tpch --sf {sf:g} --layout tuned")
    host, port = config.proxy.host, config.proxy.port
    http_port = config.proxy.http_port or DEMO_HTTP_PORT
    pid = running_pid(config)
    if pid is not None and not _serves(config, database):
        log.info("restarting the running server (pid %d) so that it registers %s", pid, database)
        stop_server(pid)
        pid = None
    if pid is None:
        log.info("starting server.py (log: %s) ...", log_file(config))
        started = time.monotonic()
        # HiveServer2's HTTP transport too (off by default in conf/dipper.toml), as BI tools often connect
        pid = start_server(config, config_path, env={**os.environ, "DIPPER_PROXY_HTTP_PORT": str(http_port)}).pid
        log.info("server ready in %.0fs (pid %d)", time.monotonic() - started, pid)
    else:
        log.info("reusing the running server (pid %d)", pid)

    log_start = _size(config.proxy.decision_log)  # the what-if learns from what this demo runs from here on
    print(f"\n== pyhive, through Dipper's proxy on port {port}: {database}\n{SAMPLE_QUERY}\n")
    from pyhive import hive

    with hive.connect(host=host, port=port, auth="NONE", username="demo", database=database) as conn:
        cursor = conn.cursor()
        t0 = time.monotonic()
        cursor.execute(SAMPLE_QUERY)
        rows = cursor.fetchall()
        names = [d[0] for d in cursor.description]
    print("\t".join(names))
    for row in rows:
        print("\t".join(str(v) for v in row))
    print(f"({len(rows)} rows in {time.monotonic() - t0:.2f}s)")

    print(f"\n== beeline (Hive JDBC from the pyspark wheel), through the proxy: {jdbc_url(host, port, database)}\n")
    result = run_beeline(java, host, port, SAMPLE_QUERY, database)
    if result.returncode != 0:
        raise BackendError(f"beeline failed ({result.returncode}): {result.stderr.strip().splitlines()[-1:]}")
    print("\n".join("\t".join(row) for row in beeline_rows(result.stdout)))

    http_url = jdbc_url(host, http_port, database, "transportMode=http;httpPath=" + config.proxy.http_path)
    if port_open(host, http_port):
        print(f"\n== beeline over HiveServer2's HTTP transport, through the proxy: {http_url}\n")
        result = run_beeline(java, host, http_port, SAMPLE_QUERY, database,
                             options="transportMode=http;httpPath=" + config.proxy.http_path)
        if result.returncode != 0:
            raise BackendError(f"beeline over HTTP failed ({result.returncode}): "
                               f"{result.stderr.strip().splitlines()[-1:]}")
        print("\n".join("\t".join(row) for row in beeline_rows(result.stdout)))
    else:
        http_url = f"(not served by the running server: `make stop`, then `make demo` again, to serve it on {http_port})"

    _skipped(host, port, database)
    _what_if(config, config_path, host, port, database, log_start)

    print(f"""
== Dipper is running (pid {pid}): the proxy on {host}:{port}, Spark's Thrift Server behind it on
{config.backend.host}:{config.backend.port}. Stop both with `make stop`.
Connect with any HiveServer2 client:
  JDBC URL:  {jdbc_url(host, port, database)}
  over HTTP: {http_url}
  beeline:   {shlex.join(beeline_command('java', host, port, 'SHOW TABLES', database)[:-2])}
  pyhive:    from pyhive import hive; hive.connect(host='{host}', port={port}, auth='NONE', username='you', database='{database}')
  Dry run:   EXPLAIN SKIPPING <query>        Decisions: SHOW SKIPPING LOG [LIMIT n]
  Switches:  SET skipping.enabled = false   SET skipping.max_scan_bytes = <bytes>
  Metrics:   {metrics_url(config)}
  Server log: {log_file(config)}   Decision log: {config.proxy.decision_log}
""")
    return 0


def metrics_url(config: Config) -> str:
    """Where the running server serves Prometheus metrics, or why it serves none."""
    p = config.proxy
    if not p.metrics_port:
        return "not served (proxy.metrics_port = 0)"
    url = f"http://{p.host}:{p.metrics_port}/metrics"
    return url if port_open(p.host, p.metrics_port) else \
        f"(not served by the running server: `make stop`, then `make demo` again, to serve {url})"


def stop(config: Config) -> int:
    pid = running_pid(config)
    if pid is None:
        print("no server is running")
        return 0
    stop_server(pid)
    print(f"stopped the server (pid {pid})")
    return 0


def _serves(config: Config, database: str) -> bool:
    from pyhive import hive

    if not port_open(config.proxy.host, config.proxy.port):
        return False
    with hive.connect(host=config.proxy.host, port=config.proxy.port, auth="NONE", username="demo") as conn:
        cursor = conn.cursor()
        cursor.execute("SHOW DATABASES")
        return database in {r[0] for r in cursor.fetchall()}


def _skipped(host: str, port: int, database: str) -> None:
    """What the proxy did with the sample query, as any client can ask it."""
    from pyhive import hive

    with hive.connect(host=host, port=port, auth="NONE", username="demo", database=database) as conn:
        cursor = conn.cursor()
        cursor.execute("SHOW SKIPPING LOG LIMIT 10")
        entry = [r for r in cursor.fetchall() if r[2] == SAMPLE_QUERY][:1]
        cursor.execute("EXPLAIN SKIPPING " + SAMPLE_QUERY)
        rows = cursor.fetchall()
    print("\n== what the proxy skipped (SHOW SKIPPING LOG, then EXPLAIN SKIPPING <the query>)\n")
    for _, _, _, outcome, files_before, files_after, bytes_before, bytes_after, ms in entry:
        print(f"the sample query: {outcome}; files {files_after}/{files_before}, "
              f"bytes {bytes_after / 1e6:.1f}/{bytes_before / 1e6:.1f} MB read; rewrite {ms:.1f} ms")
    for table, _, files_before, files_after, bytes_before, bytes_after, detail in rows:
        if table == "(all)":
            continue
        print(f"{table}: files {files_after}/{files_before}, bytes {(bytes_after or 0) / 1e6:.1f}/"
              f"{(bytes_before or 0) / 1e6:.1f} MB; {detail}")


def _what_if(config: Config, config_path: Path, host: str, port: int, database: str, log_start: int) -> None:
    """Run a few query instances through the proxy, then show what a qd-tree layout of lineitem learned from
    the decision log's records of this demo (from ``log_start``: the sample query and these) would make Dipper
    read: ``python -m layout what-if``, which writes nothing."""
    from pyhive import hive

    from bench.workloads import instances
    from layout.__main__ import main as layout_main
    from layout.sample import LayoutError

    workload = instances("tpch", 7, WORKLOAD_INSTANCES, WORKLOAD_QUERIES)
    print(f"\n== a small workload through the proxy: {len(workload)} instances of "
          f"{', '.join(WORKLOAD_QUERIES)} with varied literals\n")
    with hive.connect(host=host, port=port, auth="NONE", username="demo", database=database) as conn:
        cursor = conn.cursor()
        for name, sql in workload:
            t0 = time.monotonic()
            cursor.execute(sql)
            rows = cursor.fetchall()
            print(f"{name}: {len(rows)} rows in {time.monotonic() - t0:.2f}s")
    # This run's records only (earlier demos and other users' statements stay in the log); a log rotated
    # meanwhile starts anew, so all of it is this run's.
    decisions = config.proxy.decision_log
    text = decisions.read_bytes() if decisions.is_file() else b""
    ran = decisions.parent / "demo-decisions.jsonl"
    ran.write_bytes(text[log_start:] if len(text) >= log_start else text)
    plot = decisions.parent / "what-if-lineitem.png"
    options = ["--database", database, "--workload", str(ran), "--sample-rows", str(WHAT_IF_SAMPLE_ROWS)]
    args = ["--config", str(config_path), "what-if", "lineitem", *options, "--limit", "12", "--plot", str(plot)]
    print(f"\n== what-if: a qd-tree layout of lineitem learned from this demo's records of the decision log "
          f"({decisions}), nothing written\npython -m layout {shlex.join(args)}\n", flush=True)
    try:
        layout_main(args)
    except LayoutError as e:
        print(f"no what-if: {e}")
        return
    print(f"\nTo lay lineitem out so: python -m layout {shlex.join(['--config', str(config_path), 'apply', 'lineitem', *options])}")


def _size(path: Path) -> int:
    return path.stat().st_size if path.is_file() else 0
