"""Register the warehouse's tables with a Spark session's catalog."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from backend.warehouse import Dataset, list_datasets, table_location
from sqlglot import exp

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("dipper.backend")


def register_warehouse(spark: SparkSession, warehouse: Path) -> list[Dataset]:
    """Create (or refresh) a catalog table for every table of every dataset in the warehouse.

    Safe to call again at any time: an existing table is refreshed so that Spark re-lists its files,
    which is what a regenerated dataset needs.
    """
    datasets = list_datasets(warehouse)
    for ds in datasets:
        register_dataset(spark, warehouse, ds)
    log.info("registered %d tables in %d databases from %s",
             sum(len(d.tables) for d in datasets), len(datasets), warehouse)
    return datasets


def register_dataset(spark: SparkSession, warehouse: Path, ds: Dataset) -> None:
    db = exp.to_identifier(ds.database).sql("spark")
    # The database's own folder is its location, so Spark does not create an empty `<db>.db` beside it.
    location = exp.Literal.string(str(warehouse / ds.database)).sql("spark")
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {db} LOCATION {location}")
    for t in ds.tables:
        name = exp.table_(t.name, db=ds.database).sql("spark")
        location = exp.Literal.string(str(table_location(warehouse, ds.database, t.name))).sql("spark")
        if spark.catalog.tableExists(f"{ds.database}.{t.name}"):
            spark.sql(f"REFRESH TABLE {name}")
        else:
            # Hive-style partition folders are discovered from the location (Spark refuses an explicit
            # PARTITIONED BY without a column list); schema and partition columns are inferred.
            spark.sql(f"CREATE TABLE {name} USING parquet LOCATION {location}")
        if t.partition_columns:
            spark.sql(f"ALTER TABLE {name} RECOVER PARTITIONS")
