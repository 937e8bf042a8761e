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


def start_thrift_server(spark: SparkSession, host: str, port: int, timeout: float = 120.0,
                        http_path: str | None = None, beside: Any = None) -> Any:
    """Start the Thrift Server on the session (its port was fixed when the session was built) and wait
    until it accepts connections. Clients authenticate with SASL PLAIN (pyhive ``auth='NONE'``).
    With ``http_path``, a second Thrift Server, of HiveServer2's HTTP transport, on ``port`` ``beside`` the one the
    session started (with its settings, so the same metastore; its events go to the first one's listener).
    Returns the JVM server object (see :func:`open_sessions`)."""
    jvm = spark._jvm  # noqa: SLF001 - py4j is the only door to HiveThriftServer2
    thriftserver = jvm.org.apache.spark.sql.hive.thriftserver
    if http_path is None:
        server = thriftserver.HiveThriftServer2.startWithContext(spark._jsparkSession.sqlContext())
    else:
        hive_conf = jvm.org.apache.hadoop.hive.conf.HiveConf(beside.getHiveConf())
        for key, value in (("hive.server2.transport.mode", "http"), ("hive.server2.thrift.http.port", str(port)),
                           ("hive.server2.thrift.http.path", http_path), ("hive.server2.thrift.bind.host", host)):
            hive_conf.set(key, value)
        server = thriftserver.HiveThriftServer2(spark._jsparkSession)
        server.init(hive_conf)
        server.start()
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
