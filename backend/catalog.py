"""Register the warehouse's tables with a Spark session's catalog."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from backend.warehouse import Dataset, list_datasets, table_location
from dipper.errors import BackendError
from sqlglot import exp

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from stats.collect import TableDescription

log = logging.getLogger("dipper.backend")

# Table property naming the generated dataset (database@build time) a catalog table was registered from.
DATASET_PROPERTY = "dipper.dataset"


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
    """Create the catalog tables of ``ds``, or refresh them when the catalog already holds this very dataset.

    The catalog may be persistent (a Hive metastore), so a table found there may be from an earlier build of
    the dataset, with another schema or partitioning: each table carries the dataset's identity (database and
    build time) in a table property, and one with another identity is dropped and created again. Only an
    external table is ever dropped (its files stay); a managed table in the way is an error, not a loss."""
    db = exp.to_identifier(ds.database).sql("spark")
    # The database's own folder is its location, so Spark does not create an empty `<db>.db` beside it.
    location = exp.Literal.string(str(warehouse / ds.database)).sql("spark")
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {db} LOCATION {location}")
    identity = f"{ds.database}@{ds.created_at}"
    for t in ds.tables:
        name = exp.table_(t.name, db=ds.database).sql("spark")
        if spark.catalog.tableExists(f"{ds.database}.{t.name}"):
            if _property(spark, name, DATASET_PROPERTY) == identity:
                spark.sql(f"REFRESH TABLE {name}")
                continue
            kind = {r.col_name: r.data_type for r in spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()}.get("Type")
            if kind != "EXTERNAL":
                raise BackendError(f"the catalog holds a {str(kind).lower()} table {ds.database}.{t.name} that is not "
                                   f"part of the generated dataset in {warehouse / ds.database}; drop or rename it")
            spark.sql(f"DROP TABLE {name}")
        define_parquet_table(spark, ds.database, t.name, str(table_location(warehouse, ds.database, t.name)),
                             {DATASET_PROPERTY: identity})


def define_parquet_table(backend, database: str, table: str, location: str,  # noqa: ANN001 - session or SQL runner
                         properties: dict[str, str] | None = None) -> TableDescription:
    """``database.table`` defined over the Parquet files at ``location`` (a SparkSession or SQL runner), and
    described. Hive-style partition folders are discovered from the location (Spark refuses an explicit
    PARTITIONED BY without a column list); schema and partition columns are inferred. Spark registers none of
    the partitions it finds there, so a partitioned table would read no row until they are recovered."""
    from stats.collect import as_runner, describe_table

    run = as_runner(backend)
    name = exp.table_(table, db=database).sql("spark")
    props = ", ".join(f"{exp.Literal.string(k).sql('spark')} = {exp.Literal.string(v).sql('spark')}"
                      for k, v in (properties or {}).items())
    run(f"CREATE TABLE {name} USING parquet LOCATION {exp.Literal.string(location).sql('spark')}"
        + (f" TBLPROPERTIES ({props})" if props else ""))
    described = describe_table(run, f"{database}.{table}")
    if described.partition_columns:
        run(f"ALTER TABLE {name} RECOVER PARTITIONS")
    return described


def _property(spark: SparkSession, name: str, key: str) -> str | None:
    return {r.key: r.value for r in spark.sql(f"SHOW TBLPROPERTIES {name}").collect()}.get(key)
