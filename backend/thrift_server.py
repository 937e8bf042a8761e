"""Start Spark's HiveServer2-compatible Thrift Server inside the Python process's own JVM (ARCHITECTURE.md §2)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from dipper.environment import port_open
from dipper.errors import BackendError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("dipper.backend")


def start_thrift_server(spark: SparkSession, host: str, port: int, timeout: float = 120.0) -> Any:
    """Start the Thrift Server on the session (its port was fixed when the session was built) and wait
    until it accepts connections. Clients authenticate with SASL PLAIN (pyhive ``auth='NONE'``).
    Returns the JVM server object (see :func:`open_sessions`)."""
    jvm = spark._jvm  # noqa: SLF001 - py4j is the only door to HiveThriftServer2
    server = jvm.org.apache.spark.sql.hive.thriftserver.HiveThriftServer2.startWithContext(
        spark._jsparkSession.sqlContext())
    deadline = time.monotonic() + timeout
    while not port_open(host, port):
        if time.monotonic() > deadline:
            raise BackendError(f"the Spark Thrift Server did not start listening on {host}:{port} within {timeout:.0f}s")
        time.sleep(0.2)
    log.info("Spark Thrift Server listening on %s:%d", host, port)
    return server


def open_sessions(server: Any) -> int:
    """How many client sessions the Thrift Server has open now (its CLI service's session manager)."""
    services = server.getServices()
    for i in range(services.size()):
        service = services.get(i)
        if service.getClass().getSimpleName() == "SparkSQLCLIService":
            return int(service.getSessionManager().getOpenSessionCount())
    raise RuntimeError("the Thrift Server has no SparkSQLCLIService")
