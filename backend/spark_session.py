"""Build the local Spark session that the embedded backend, the layout job and the tests share."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from dipper.config import SPARK_LOG_CONFIG, Config

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("dipper.backend")


def spark_session(config: Config, app_name: str, thrift_port: int | None = None,
                  extra: Mapping[str, str] | None = None, persistent_catalog: bool = False) -> SparkSession:
    """A Spark session over the configured warehouse.

    With ``persistent_catalog`` (the embedded backend, and the statistics job when no server is running)
    the catalog is the Hive metastore of :func:`catalog_settings`, so what users create through Dipper
    survives a restart. Otherwise (the benchmark and layout jobs, which only need the warehouse's own
    datasets) it is in memory: those jobs may run beside a server, and an embedded Derby metastore admits
    one process at a time. The session time zone is UTC so that timestamps mean the same thing to Spark,
    the statistics collector and the rewriter.
    """
    from pyspark.sql import SparkSession

    b = config.backend
    catalog = catalog_settings(config) if persistent_catalog else {"spark.sql.catalogImplementation": "in-memory"}
    builder = (
        SparkSession.builder.master(b.spark_master)
        .appName(app_name)
        .config("spark.driver.memory", b.driver_memory)
        .config("spark.sql.warehouse.dir", str(config.paths.warehouse))
        .config("spark.sql.shuffle.partitions", str(b.shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        # The Thrift Server's Hive session layer starts an in-memory Derby; keep its log out of the cwd.
        .config("spark.driver.extraJavaOptions", " ".join([
            java_option("log4j2.configurationFile", f"file:{SPARK_LOG_CONFIG}"),
            java_option("derby.stream.error.file", str(config.paths.logs / "derby.log"))]))
    )
    if thrift_port is not None:
        builder = builder.config("spark.hive.server2.thrift.port", str(thrift_port)).config(
            "spark.hive.server2.thrift.bind.host", b.host)
        for key, value in idle_operation_settings(b.idle_operation_timeout_seconds).items():
            builder = builder.config(key, value)
    for key, value in {**catalog, **(extra or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    log.info("Spark %s session %r started (master %s, driver memory %s)", spark.version, app_name, b.spark_master,
             b.driver_memory)
    return spark


def idle_operation_settings(timeout_seconds: int) -> dict[str, str]:
    """The Thrift Server settings that close a finished operation left idle ``timeout_seconds`` (0: Hive's own
    default, 5 days). Hive's session manager looks for them every ``hive.server2.session.check.interval``
    (at least 3 s; here a tenth of the timeout, at most a minute), and closes only operations that ended: a
    running query, or one whose client is fetching, is never touched."""
    if timeout_seconds <= 0:
        return {}
    check = max(3, min(60, timeout_seconds // 10))
    return {"spark.hive.server2.idle.operation.timeout": f"{timeout_seconds}s",
            "spark.hive.server2.session.check.interval": f"{check}s"}


def catalog_settings(config: Config) -> dict[str, str]:
    """Spark settings for the backend's persistent catalog (a Hive metastore).

    ``backend.metastore`` empty: Dipper's own metastore, an embedded Derby database in ``paths.metastore``
    (created on first use; Derby lets one process open it at a time, so while the server runs, other
    Dipper commands reach the catalog through its Thrift Server). Otherwise a catalog other Spark
    applications share: a Hive metastore service (``thrift://``) or a metastore database
    (``jdbc:postgresql:``). The Derby database lives beside the warehouse, not in the current directory
    (Hive's default), so starting Dipper from another directory finds the same tables.
    """
    b = config.backend
    settings = {"spark.sql.catalogImplementation": "hive"}
    if b.metastore.startswith("jdbc:"):
        # A metastore database shared with other Spark applications; DataNucleus creates Hive's tables in it on
        # first use, without foreign keys: it adds those lazily, from a second connection, and on PostgreSQL
        # `ALTER TABLE TBL_PRIVS ADD CONSTRAINT ... REFERENCES TBLS` then waits for the first connection's open
        # insert into TBLS, which waits for it (the first CREATE TABLE hung for good). The driver goes on the
        # driver's class path, which Hive's client shares for org.postgresql (spark.sql.hive.metastore.sharedPrefixes).
        settings.update({
            "spark.hadoop.javax.jdo.option.ConnectionURL": b.metastore,
            "spark.hadoop.javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
            "spark.hadoop.javax.jdo.option.ConnectionUserName": b.metastore_user,
            "spark.hadoop.javax.jdo.option.ConnectionPassword": b.metastore_password,
            "spark.hadoop.datanucleus.schema.autoCreateTables": "true",
            "spark.hadoop.datanucleus.schema.autoCreateColumns": "true",
            "spark.hadoop.datanucleus.schema.autoCreateConstraints": "false",
            "spark.hadoop.hive.metastore.schema.verification": "false",
            "spark.driver.extraClassPath": b.metastore_driver_jar,
        })
    elif b.metastore:
        settings["spark.hadoop.hive.metastore.uris"] = b.metastore
    else:
        database = config.paths.metastore / "metastore_db"
        settings["spark.hadoop.javax.jdo.option.ConnectionURL"] = f"jdbc:derby:;databaseName={database};create=true"
    return settings


def java_option(key: str, value: str) -> str:
    """``-Dkey=value`` for ``spark.driver.extraJavaOptions``, quoted: Spark splits that setting at blanks outside
    quotes (``Utils.splitCommandString``), so a path with a space would become a stray argument."""
    quoted = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"-D{key}={quoted}"'
