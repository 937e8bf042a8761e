"""Start Dipper: the one place that wires configuration, the Spark backend and the proxy together.

Embedded mode (default) starts a local Spark session in this process, registers every table of the
warehouse with its catalog, starts Spark's Thrift Server on the private ``backend.port``, and the proxy on
``proxy.port`` in front of it. Remote mode starts the proxy alone, in front of an existing Spark Thrift
Server at ``backend.host:backend.port``. ``--no-proxy`` serves the embedded backend alone.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from dipper import cli
from dipper.config import Config, load
from dipper.environment import ensure_port_free, ensure_writable_dir, java_executable
from dipper.errors import BackendError, ConfigError, EnvironmentProblem

if TYPE_CHECKING:
    from proxy.server import ProxyServer

log = logging.getLogger("dipper.server")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = cli.parser(
        "server.py",
        "Start Dipper: the proxy clients connect to, in front of an embedded Spark Thrift Server "
                    "(default) or a remote one.",
        epilog="Every configuration key can also be set as DIPPER_<SECTION>_<KEY>, e.g. DIPPER_PROXY_PORT=10000. "
               "Connect with: beeline -u jdbc:hive2://HOST:PROXY_PORT/default, or pyhive "
               "hive.connect(host, PROXY_PORT, auth='NONE', username='you').")
    p.add_argument("--port", type=int, help="override proxy.port (where clients connect)")
    p.add_argument("--backend-port", type=int, help="override backend.port")
    p.add_argument("--mode", choices=("embedded", "remote"), help="override backend.mode")
    p.add_argument("--no-proxy", action="store_true", help="embedded mode only: serve the Spark Thrift Server alone")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cli.setup_logging(args.verbose)
    config = load(args.config, environ=os.environ)
    if args.port is not None:
        config = config.replace("proxy", port=args.port)
    if args.backend_port is not None:
        config = config.replace("backend", port=args.backend_port)
    if args.mode is not None:
        config = config.replace("backend", mode=args.mode)
    if config.backend.mode == "remote":
        if args.no_proxy:
            raise ConfigError("--no-proxy only makes sense in embedded mode (remote mode serves the proxy alone)")
        check_remote(config)
        return serve_remote(config)
    return serve_embedded(config, with_proxy=not args.no_proxy)


def check_remote(config: Config) -> None:
    from pyhive import hive

    b = config.backend
    try:
        with hive.connect(host=b.host, port=b.port, auth="NONE", username="dipper") as conn:
            cursor = conn.cursor()
            cursor.execute("SHOW DATABASES")
            databases = [r[0] for r in cursor.fetchall()]
    except Exception as e:  # noqa: BLE001 - any failure to reach the backend is reported the same way
        raise BackendError(f"the remote Spark Thrift Server at {b.host}:{b.port} does not answer: {e}") from None
    log.info("remote Spark Thrift Server %s:%d answers; databases: %s", b.host, b.port, ", ".join(databases))


def _stop_event() -> threading.Event:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    return stop


def start_proxy(config: Config) -> ProxyServer:
    from backend.sql_client import thrift_sql
    from proxy.server import ProxyServer
    from stats.freshness import Lister
    from stats.loader import StatsLoader
    from stats.store import StatsStore
    from stats.upkeep import FooterCoverage, ScheduledRefresh

    store = StatsStore(config.paths.stats)
    workers: list[FooterCoverage | ScheduledRefresh] = []
    if config.proxy.footer_coverage:
        workers.append(FooterCoverage(store))
    if config.proxy.statistics_refresh_seconds:
        workers.append(ScheduledRefresh(store, lambda: thrift_sql(config, "dipper-refresh"),
                                        config.proxy.statistics_refresh_seconds))

    def unknown_files_seen(table: str) -> None:
        for worker in workers:
            worker.notice(table)

    stats = StatsLoader(store, Lister(config.proxy.listing_ttl_seconds), on_unknown=unknown_files_seen)
    refreshes = [worker for worker in workers if isinstance(worker, ScheduledRefresh)]

    def recollect(tables: list[str]) -> bool:
        for worker in refreshes:
            worker.recollect(tables)
        return bool(refreshes)

    return ProxyServer(config, stats, forget_statistics=stats.forget, background=workers,
                       recollect=recollect).start()


def check_not_running(config: Config) -> Path:
    """The pid file this server will write once it serves, after making sure no other server of the same
    checkout (the same ``paths.logs``) is running: a second one would overwrite the first one's pid file, and
    remove it when it stops, so ``make stop`` would no longer find the server that is still running."""
    from backend.server_process import pid_file, running_pid

    path = pid_file(config)
    pid = running_pid(config)  # None when there is no pid file, or it names a process that is gone
    if pid is not None and pid != os.getpid() and _is_server(pid):
        raise EnvironmentProblem(f"a Dipper server is already running from this checkout (pid {pid}, recorded in "
                                 f"{path}); stop it first (make stop, or kill {pid}), or give this one other "
                                 "paths.logs")
    return path


def _is_server(pid: int) -> bool:
    """Whether ``pid`` runs server.py (a pid recorded long ago may have been reused by another program)."""
    try:
        return b"server.py" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc to ask: assume it is, and refuse rather than take over a live server's file


def write_pid_file(config: Config, path: Path) -> None:
    check_not_running(config)  # again: another server may have become ready while this one started
    path.write_text(f"{os.getpid()}\n")


def remove_pid_file(path: Path) -> None:
    """Remove the pid file if it is this process's own (never another server's)."""
    try:
        if int(path.read_text().strip()) == os.getpid():
            path.unlink()
    except (OSError, ValueError):
        pass


def _ensure_proxy_ports_free(config: Config) -> None:
    """Before Spark starts: the ports the proxy will listen on are free (a clear error now, not after a minute)."""
    p = config.proxy
    ensure_port_free(p.host, p.port, "proxy")
    if p.http_port:
        ensure_port_free(p.host, p.http_port, "proxy HTTP transport")
    if p.metrics_port:
        ensure_port_free(p.host, p.metrics_port, "proxy metrics")


def serve_remote(config: Config) -> int:
    """The proxy alone, in front of a remote Spark Thrift Server, until SIGINT/SIGTERM."""
    ensure_writable_dir(config.paths.logs, "logs")
    pid_file = check_not_running(config)
    _ensure_proxy_ports_free(config)
    stop = _stop_event()
    proxy = start_proxy(config)
    try:
        write_pid_file(config, pid_file)
        log.info("ready: jdbc:hive2://%s:%d/default (proxy) -> %s:%d (remote Spark Thrift Server)%s",
                 config.proxy.host, proxy.port, config.backend.host, config.backend.port,
                 f"; over HTTP: jdbc:hive2://{config.proxy.host}:{proxy.http.port}/default;transportMode=http;"
                 f"httpPath={config.proxy.http_path}" if proxy.http is not None else "")
        while not stop.wait(1.0):
            pass
        log.info("shutting down")
    finally:
        proxy.shutdown()
        remove_pid_file(pid_file)
    return 0


def serve_embedded(config: Config, with_proxy: bool = True) -> int:
    """Start Spark + Thrift Server (and the proxy) and serve until SIGINT/SIGTERM, or until the Spark JVM dies
    (:mod:`backend.jvm_watch`): then the proxy stops, the pid file goes, and :class:`BackendError` says why, so
    the process exits non-zero."""
    b = config.backend
    java_executable(os.environ)
    ensure_writable_dir(config.paths.warehouse, "warehouse")
    ensure_writable_dir(config.paths.logs, "logs")
    pid_file = check_not_running(config)
    ensure_port_free(b.host, b.port, "backend")
    if with_proxy:
        _ensure_proxy_ports_free(config)

    from backend.catalog import register_warehouse
    from backend.jvm_watch import JvmWatch
    from backend.spark_session import spark_session
    from backend.thrift_server import start_thrift_server

    stop = _stop_event()
    spark = spark_session(config, "dipper-backend", thrift_port=b.port, persistent_catalog=True)
    jvm = JvmWatch(spark)
    death: str | None = None
    proxy = None
    try:
        datasets = register_warehouse(spark, config.paths.warehouse)
        start_thrift_server(spark, b.host, b.port)
        if with_proxy:
            proxy = start_proxy(config)
        write_pid_file(config, pid_file)
        names = ", ".join(d.database for d in datasets) or "none yet (python -m bench generate ...)"
        host, port = (config.proxy.host, proxy.port) if proxy else (b.host, b.port)
        log.info("ready: jdbc:hive2://%s:%d/default%s  (databases: %s)", host, port,
                 "" if proxy else " (backend alone, no proxy)", names)
        while not stop.wait(1.0):
            death = jvm.death()
            if death is not None:
                break
        if death is None:
            log.info("shutting down")
    finally:
        if death is None and not stop.is_set():
            death = jvm.death()  # starting failed: because the JVM died?
        if death is not None:
            # Serving on would tell every client "not reachable" for ever; exiting lets a supervisor start anew.
            log.error("%s; every client session on it is lost. Stopping Dipper so that it can be started again "
                      "(server.py, make demo, or your supervisor's restart policy)", death)
        if proxy is not None:
            proxy.shutdown(drain_seconds=0 if death is not None else None)  # nothing left to drain
        remove_pid_file(pid_file)
        if death is None:
            spark.stop()  # with the JVM gone, stopping it would only wait on a dead gateway
    if death is not None:
        raise BackendError(f"{death}; Dipper stopped")
    return 0


if __name__ == "__main__":
    cli.run(main)
