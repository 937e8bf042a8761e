"""``make demo``: bring the stack up (or reuse it), query it through pyhive and beeline, say how to connect."""

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


def demo(config: Config, config_path: Path, sf: float) -> int:
    java = java_executable(os.environ)
    database = database_name("tpch", sf, "tuned")
    if not (config.paths.warehouse / database / MANIFEST).is_file():
        raise DatasetError(f"{database} is not in {config.paths.warehouse}; "
                           f"create it with: python -m bench generate --suite tpch --sf {sf:g} --layout tuned")
    host, port = config.backend.host, config.backend.port
    pid = running_pid(config)
    if pid is not None and not _serves(config, database):
        log.info("restarting the running server (pid %d) so that it registers %s", pid, database)
        stop_server(pid)
        pid = None
    if pid is None:
        log.info("starting server.py (log: %s) ...", log_file(config))
        started = time.monotonic()
        pid = start_server(config, config_path).pid
        log.info("server ready in %.0fs (pid %d)", time.monotonic() - started, pid)
    else:
        log.info("reusing the running server (pid %d)", pid)

    print(f"\n== pyhive: {database}\n{SAMPLE_QUERY}\n")
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

    print(f"\n== beeline (Hive JDBC from the pyspark wheel): {jdbc_url(host, port, database)}\n")
    result = run_beeline(java, host, port, SAMPLE_QUERY, database)
    if result.returncode != 0:
        raise BackendError(f"beeline failed ({result.returncode}): {result.stderr.strip().splitlines()[-1:]}")
    print("\n".join("\t".join(row) for row in beeline_rows(result.stdout)))

    _explain(config, database)

    print(f"""
== Dipper's backend is running (pid {pid}); stop it with `make stop`.
Connect with any HiveServer2 client:
  JDBC URL:  {jdbc_url(host, port, database)}
  beeline:   {shlex.join(beeline_command('java', host, port, 'SHOW TABLES', database)[:-2])}
  pyhive:    from pyhive import hive; hive.connect(host='{host}', port={port}, auth='NONE', username='you', database='{database}')
  Server log: {log_file(config)}
""")
    return 0


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

    if not port_open(config.backend.host, config.backend.port):
        return False
    with hive.connect(host=config.backend.host, port=config.backend.port, auth="NONE", username="demo") as conn:
        cursor = conn.cursor()
        cursor.execute("SHOW DATABASES")
        return database in {r[0] for r in cursor.fetchall()}


def _explain(config: Config, database: str) -> None:
    """What the rewriter would send for the sample query (the proxy that applies it is not built yet)."""
    from rewriter.decision import render
    from rewriter.rewrite import RewriteContext, rewrite
    from stats.freshness import Lister
    from stats.loader import StatsLoader
    from stats.store import StatsStore

    context = RewriteContext(StatsLoader(StatsStore(config.paths.stats), Lister(0)), database=database)
    result = rewrite(SAMPLE_QUERY, context)
    print("\n== what Dipper's rewriter does with it (python -m rewriter explain)\n")
    print(render(result.decision))
