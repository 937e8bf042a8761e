"""The stack a load run (``bench proxy``, ``bench soak``) drives: started for the run, or one that runs already.

Started: ``server.py`` in embedded mode in its own process (``backend.server_process.start_server``, as ``make
demo`` starts it), so the proxy, Spark's JVM and the benchmark's clients are three processes whose CPU and
memory can be read apart, and the clients' interpreter lock is not the proxy's. It runs on private ports with
the configuration's warehouse, statistics and Spark settings, but its own logs, decision log and catalog
(a Derby metastore in the run's work folder: Derby admits one process at a time, so a run must not take the
checkout's catalog from a server someone else starts; the benchmark datasets are registered from their
manifests on every start anyway), and serves Prometheus metrics on a private port.

Attached (``--proxy-port`` and ``--backend-port``): nothing is started or stopped; the processes are found by
the ports they listen on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

from backend.server_process import log_file, start_server, stop_server
from backend.warehouse import MANIFEST
from dipper.config import Config, load
from dipper.environment import free_port, port_open
from dipper.errors import BackendError, DatasetError

log = logging.getLogger("dipper.bench")


@dataclasses.dataclass(frozen=True)
class LoadStack:
    host: str
    proxy_port: int
    backend_port: int
    decision_log: Path | None  # None: not known (attached without --decision-log)
    metrics_port: int | None  # the proxy's Prometheus endpoint, if served
    server_pid: int | None  # server.py started for this run (embedded: proxy and py4j driver of Spark's JVM)
    workdir: Path | None  # its configuration, logs and catalog

    def proxy_pid(self) -> int | None:
        """The process serving the proxy's port (server.py)."""
        return self.server_pid or listening_pid(self.proxy_port)

    def backend_pid(self) -> int | None:
        """Spark's JVM: the process serving the backend's port."""
        return listening_pid(self.backend_port)


@contextlib.contextmanager
def load_stack(config: Config, database: str, proxy_port: int | None = None, backend_port: int | None = None,
               decision_log: Path | None = None, metrics_port: int | None = None,
               keep_workdir: bool = False) -> Iterator[LoadStack]:
    """The stack to drive: attached to the given ports, or a new embedded one, stopped when the run ends."""
    host = config.proxy.host
    if proxy_port is not None or backend_port is not None:
        if proxy_port is None or backend_port is None:
            raise BackendError("give both --proxy-port and --backend-port of a running stack, or neither to start one")
        for name, port in (("proxy", proxy_port), ("backend", backend_port)):
            if not port_open(host, port):
                raise BackendError(f"nothing listens on {host}:{port} (--{name}-port); start the stack "
                                   f"(make demo, or server.py) or leave both ports out to let the run start one")
        yield LoadStack(host, proxy_port, backend_port, decision_log, metrics_port, None, None)
        return
    if not (config.paths.warehouse / database / MANIFEST).is_file():
        raise DatasetError(f"{database} is not in {config.paths.warehouse}; create it with: python -m bench generate "
                           f"--suite {database.split('_')[0]} --sf 1 --layout tuned --collect-stats 20 (or run from "
                           f"a checkout whose data/ holds it)")
    workdir = Path(tempfile.mkdtemp(prefix="dipper-load-"))
    run_config, path = embedded_config(config, workdir)
    log.info("starting server.py (embedded Spark + proxy; log %s) ...", log_file(run_config))
    started = time.monotonic()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIPPER_")}  # the run's file decides, not ours
    proc = start_server(run_config, path, env=env)
    log.info("stack ready in %.0f s: proxy %s:%d, Spark %s:%d, metrics :%d", time.monotonic() - started, host,
             run_config.proxy.port, host, run_config.backend.port, run_config.proxy.metrics_port)
    try:
        yield LoadStack(host, run_config.proxy.port, run_config.backend.port, run_config.proxy.decision_log,
                        run_config.proxy.metrics_port, proc.pid, workdir)
    finally:
        stop_server(proc.pid)
        if keep_workdir:
            log.info("the stack's logs stay in %s", workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def embedded_config(config: Config, workdir: Path) -> tuple[Config, Path]:
    """A configuration file for an embedded server.py over ``config``'s data, on free ports, logging to
    ``workdir``.

    The data paths are resolved (symbolic links followed): the catalog then places every table where its
    statistics say it lives. Otherwise (``data`` a link to another checkout's data) the proxy's catalog check
    finds each table "moved" and drops its statistics from the shared store, as it must for a table really
    moved behind its back.
    """
    p, b = config.paths, config.backend
    path = workdir / "dipper.toml"
    logs = workdir / "logs"
    path.write_text(f"""
[paths]
raw = "{p.raw.resolve()}"
warehouse = "{p.warehouse.resolve()}"
stats = "{p.stats.resolve()}"
logs = "{logs}"
metastore = "{workdir / 'metastore'}"
[backend]
mode = "embedded"
host = "{b.host}"
port = {free_port()}
spark_master = "{b.spark_master}"
driver_memory = "{b.driver_memory}"
shuffle_partitions = {b.shuffle_partitions}
[proxy]
host = "{config.proxy.host}"
port = {free_port()}
metrics_port = {free_port()}
decision_log = "{logs / 'decisions.jsonl'}"
""")
    return load(path, environ={}), path


def listening_pid(port: int) -> int | None:
    """The pid of the process listening on TCP ``port`` on this machine, or None."""
    try:
        for c in psutil.net_connections(kind="tcp"):
            if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid:
                return c.pid
    except psutil.AccessDenied:
        return None
    return None
