"""Dipper's own SQL connection to the backend, for its jobs (the statistics collector): the statements run on
the Spark the users' queries go to, with its catalog, on its cluster.

``backend_sql`` picks the way in. A remote backend, or an embedded one whose server is running, is reached
through its Thrift Server (an embedded Derby metastore admits one process, and the server holds it). An
embedded backend that is not running is opened here, with the same persistent catalog the server would use.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from typing import Any

from dipper.config import Config
from dipper.errors import BackendError

log = logging.getLogger("dipper.backend")

SqlRunner = Callable[[str], list[tuple]]  # the shape stats.collect asks for (it does not import backend/)


@contextlib.contextmanager
def backend_sql(config: Config, app_name: str) -> Iterator[SqlRunner]:
    """A function running one statement on the backend and returning its rows, open for the ``with`` block."""
    from backend.server_process import running_pid

    if config.backend.mode == "remote" or running_pid(config) is not None:
        with thrift_sql(config, user=app_name) as run:
            yield run
        return
    from backend.catalog import register_warehouse
    from backend.spark_session import spark_session
    from dipper.environment import java_executable
    from stats.collect import session_runner

    java_executable(os.environ)
    spark = spark_session(config, app_name, persistent_catalog=True)
    try:
        check_catalog(spark, config)
        register_warehouse(spark, config.paths.warehouse)
        yield session_runner(spark)
    finally:
        spark.stop()


def check_catalog(spark: Any, config: Config) -> None:
    """Open the persistent catalog now, so that a metastore another process holds is one clear error."""
    try:
        spark.sql("SHOW DATABASES").collect()
    except Exception as e:  # noqa: BLE001 - py4j wraps the metastore's own failure
        text = str(e)
        if "XSDB6" in text or "another instance of Derby" in text.lower():
            raise BackendError(f"the catalog in {config.paths.metastore} is open in another process (Derby admits "
                               "one): a Dipper server started with another configuration? Stop it, or run this "
                               "command with that server's configuration so it goes through its Thrift Server") from None
        if config.backend.metastore:
            raise BackendError(f"cannot reach the Hive metastore at {config.backend.metastore}: "
                               f"{_first_line(text)}") from None
        raise BackendError(f"cannot open the catalog in {config.paths.metastore}: {_first_line(text)}") from None


def http_transport(host: str, port: int, path: str, user: str, password: str = "x") -> Any:
    """A Thrift client transport over HiveServer2's HTTP transport, for ``hive.connect(thrift_transport=...)``: each
    call POSTed to ``path`` with the user and password as Basic authentication (pyhive's own ``scheme='http'``
    fixes the path to ``cliservice``)."""
    from thrift.transport.THttpClient import THttpClient

    transport = THttpClient(f"http://{host}:{port}/{path.strip('/')}")
    transport.setCustomHeaders({"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()})
    return transport


@contextlib.contextmanager
def thrift_sql(config: Config, user: str) -> Iterator[SqlRunner]:
    """Statements through the backend's Thrift Server (one session for the block)."""
    from pyhive import exc, hive
    from thrift.transport.TTransport import TTransportException

    b = config.backend
    try:
        if b.transport == "http":
            conn = hive.connect(thrift_transport=http_transport(b.host, b.port, b.http_path, user), username=user)
        else:
            conn = hive.connect(host=b.host, port=b.port, username=user, auth="NONE" if b.auth == "plain" else "NOSASL")
    except (OSError, TTransportException) as e:
        raise BackendError(f"cannot reach the Spark Thrift Server at {b.host}:{b.port} ({e}); start Dipper's "
                           "(python server.py) or check backend.host and backend.port") from None
    cursor = conn.cursor()
    log.info("running on the Spark Thrift Server at %s:%d", b.host, b.port)

    def run(sql: str) -> list[tuple]:
        try:
            cursor.execute(sql)
            return cursor.fetchall() if cursor.description else []
        except exc.OperationalError as e:
            raise BackendError(_first_line(_server_message(e))) from None
        except (OSError, TTransportException) as e:
            raise BackendError(f"lost the Spark Thrift Server at {b.host}:{b.port}: {e}") from None

    try:
        yield run
    finally:
        with contextlib.suppress(Exception):
            cursor.close()
            conn.close()


def _server_message(error: Exception) -> str:
    """The message the server gave (pyhive passes its response object as the exception's argument)."""
    response = error.args[0] if error.args else None
    status = getattr(response, "status", None)
    return getattr(status, "errorMessage", None) or getattr(response, "errorMessage", None) or str(error)


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or ["(no message)"])[0]
