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
                  extra: Mapping[str, str] | None = None) -> SparkSession:
    """A local Spark session over the configured warehouse.

    The catalog is in memory on purpose: the warehouse manifests are the source of truth and are
    registered on every start (``backend.catalog.register_warehouse``), so there is no Derby metastore
    to lock, corrupt or drift from the files. The session time zone is UTC so that timestamps mean the
    same thing to Spark, the statistics collector and the rewriter.
    """
    from pyspark.sql import SparkSession

    b = config.backend
    builder = (
        SparkSession.builder.master(b.spark_master)
        .appName(app_name)
        .config("spark.driver.memory", b.driver_memory)
        .config("spark.sql.catalogImplementation", "in-memory")
        .config("spark.sql.warehouse.dir", str(config.paths.warehouse))
        .config("spark.sql.shuffle.partitions", str(b.shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        # The Thrift Server's Hive session layer starts an in-memory Derby; keep its log out of the cwd.
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{SPARK_LOG_CONFIG} "
                                                 f"-Dderby.stream.error.file={config.paths.logs / 'derby.log'}")
    )
    if thrift_port is not None:
        builder = builder.config("spark.hive.server2.thrift.port", str(thrift_port)).config(
            "spark.hive.server2.thrift.bind.host", b.host)
    for key, value in (extra or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    log.info("Spark %s session %r started (master %s)", spark.version, app_name, b.spark_master)
    return spark
