"""Start Dipper: the one place that wires configuration, the Spark backend and (later) the proxy together.

Embedded mode (default) starts a local Spark session in this process, registers every table of the
warehouse with its catalog, and starts Spark's Thrift Server on ``backend.port``. Remote mode uses an
existing Spark Thrift Server at ``backend.host:backend.port`` and starts nothing.

The proxy (issue "Proxy") is not built yet: today this serves the backend alone, and remote mode only
checks that the remote server answers.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from pathlib import Path

from dipper import cli
from dipper.config import DEFAULT_CONFIG, Config, load
from dipper.environment import ensure_port_free, ensure_writable_dir, java_executable
from dipper.errors import BackendError

log = logging.getLogger("dipper.server")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="server.py",
        description="Start Dipper's Spark backend (embedded Spark + Thrift Server, or a check of a remote one).",
        epilog="Every configuration key can also be set as DIPPER_<SECTION>_<KEY>, e.g. DIPPER_BACKEND_PORT=10011. "
               "Connect with: beeline -u jdbc:hive2://HOST:PORT/default, or pyhive hive.connect(host, port, auth='NONE').")
    p.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="configuration file (default: %(default)s)")
    p.add_argument("--port", type=int, help="override backend.port")
    p.add_argument("--mode", choices=("embedded", "remote"), help="override backend.mode")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cli.setup_logging(args.verbose)
    config = load(args.config, environ=os.environ)
    if args.port is not None:
        config = config.replace("backend", port=args.port)
    if args.mode is not None:
        config = config.replace("backend", mode=args.mode)
    if config.backend.mode == "remote":
        return check_remote(config)
    return serve_embedded(config)


def check_remote(config: Config) -> int:
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
    log.info("the proxy is not built yet, so there is nothing to serve in remote mode; exiting")
    return 0


def serve_embedded(config: Config) -> int:
    """Start Spark + Thrift Server and serve until SIGINT/SIGTERM."""
    b = config.backend
    java_executable(os.environ)
    ensure_writable_dir(config.paths.warehouse, "warehouse")
    logs = ensure_writable_dir(config.paths.logs, "logs")
    ensure_port_free(b.host, b.port, "backend")

    from backend.catalog import register_warehouse
    from backend.spark_session import spark_session
    from backend.thrift_server import start_thrift_server

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    spark = spark_session(config, "dipper-backend", thrift_port=b.port)
    pid_file = logs / "server.pid"
    try:
        datasets = register_warehouse(spark, config.paths.warehouse)
        start_thrift_server(spark, b.host, b.port)
        pid_file.write_text(f"{os.getpid()}\n")
        names = ", ".join(d.database for d in datasets) or "none yet (python -m bench generate ...)"
        log.info("ready: jdbc:hive2://%s:%d/default  (databases: %s)", b.host, b.port, names)
        while not stop.wait(1.0):
            pass
        log.info("shutting down")
    finally:
        pid_file.unlink(missing_ok=True)
        spark.stop()
    return 0


if __name__ == "__main__":
    cli.run(main)
