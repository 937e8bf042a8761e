"""The one shared Spark session and Thrift Server of a test run (ARCHITECTURE.md §7).

``stack`` starts Spark with the Thrift Server in-process once per run, over a warehouse in a temporary
directory. Datasets are built on first use by the same code ``make demo`` uses (``bench.datasets``) and
then registered with the running server, so a test that needs only TPC-H pays only for TPC-H.

Every dataset is small (SF 0.01) with the big tables split into ``TEST_FILES`` files, enough for file
skipping to be visible in scan metrics. Layouts used across the suite: ``tuned`` and ``random:3`` (seed 3
orders lineitem by l_partkey and orders by o_totalprice: neither correlates with dates, unlike e.g. seed 4).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from dipper.config import Config, load
from dipper.environment import free_port, java_executable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from backend.warehouse import Dataset

TEST_SF = 0.01
TEST_FILES = 8
# The partitioned layout is built for the store_sales star only (every partitioned fact costs a file per
# date): enough for the layout's own test and the star queries of the rewriter's differential test.
PARTITIONED_TABLES = ("store_sales", "date_dim", "item", "customer_demographics", "promotion", "customer",
                      "customer_address", "store")


@dataclasses.dataclass
class Stack:
    config: Config
    spark: SparkSession
    java: str
    thrift_server: Any
    _stats: dict[tuple[str, str], Any] = dataclasses.field(default_factory=dict)
    _datasets: dict[tuple[str, str, tuple[str, ...]], Dataset] = dataclasses.field(default_factory=dict)
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    @property
    def host(self) -> str:
        return self.config.backend.host

    @property
    def port(self) -> int:
        return self.config.backend.port

    def dataset(self, suite: str, layout: str, tables: tuple[str, ...] = ()) -> Dataset:
        """The SF 0.01 dataset of ``suite`` in ``layout`` (all tables, or at least ``tables``), built and
        registered on first use. Asking for a subset first and everything later rebuilds the database."""
        from bench.datasets import build_dataset

        with self._lock:
            key = (suite, layout, tables)
            if key not in self._datasets:
                self._datasets[key] = build_dataset(self.spark, self.config, suite, TEST_SF, layout,
                                                    files=TEST_FILES, tables=tables)
            return self._datasets[key]

    def stats_store(self, suite: str, layout: str) -> Any:
        """The statistics store of a whole dataset (range-sets of 8, the suite's Bloom filters), collected once
        per run."""
        from bench.suites import indexes
        from stats.collect import collect
        from stats.store import StatsStore

        ds = self.dataset(suite, layout, PARTITIONED_TABLES if layout == "partitioned" else ())
        with self._lock:
            if (suite, layout) not in self._stats:
                store = StatsStore(self.config.paths.stats / ds.database)
                collect(self.spark, store, [f"{ds.database}.{t.name}" for t in ds.tables], range_set_size=8,
                        indexes=indexes(suite, [t.name for t in ds.tables]))
                self._stats[(suite, layout)] = store
            return self._stats[(suite, layout)]

    def database(self, suite: str, layout: str, tables: tuple[str, ...] = ()) -> str:
        return self.dataset(suite, layout, tables).database

    @contextlib.contextmanager
    def cursor(self, database: str = "default", **kwargs: Any) -> Iterator[Any]:
        """A pyhive cursor on the Thrift Server (SASL PLAIN, as pyhive's auth='NONE' means)."""
        with hive_cursor(self.port, database, user="dipper-test", **kwargs) as cursor:
            yield cursor


@contextlib.contextmanager
def hive_cursor(port: int, database: str = "default", user: str = "alice", **kwargs: Any) -> Iterator[Any]:
    """A pyhive cursor on 127.0.0.1:``port`` (the Thrift Server, or a proxy in front of it)."""
    from pyhive import hive

    conn = hive.connect(host="127.0.0.1", port=port, auth=kwargs.pop("auth", "NONE"), username=user,
                        database=database, **kwargs)
    try:
        cursor = conn.cursor()
        yield cursor
        cursor.close()
    finally:
        conn.close()


def own_env(**extra: str) -> dict[str, str]:
    """The environment for a command or server a test starts: this process's, without any ``DIPPER_*`` setting
    of the test run (which would point it at the run's own paths), plus ``extra``."""
    return {k: v for k, v in os.environ.items() if not k.startswith("DIPPER_")} | extra


@pytest.fixture()
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts ``sqlglot.parse_one`` is called with during the test, in order (to count how often a statement
    is parsed)."""
    import sqlglot

    calls: list[str] = []
    parse_one = sqlglot.parse_one

    def counted(sql: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(sql)
        return parse_one(sql, *args, **kwargs)

    monkeypatch.setattr(sqlglot, "parse_one", counted)
    return calls


def make_test_config(base: Path) -> Config:
    config = load(environ={}, base_dir=base)
    config = config.replace("paths", raw=base / "raw", warehouse=base / "warehouse", stats=base / "stats", logs=base / "logs",
                            metastore=base / "metastore")
    config = config.replace("proxy", metrics_port=0)  # conf/dipper.toml's port would collide between test proxies
    return config.replace("backend", port=free_port(), shuffle_partitions=4, driver_memory="3g")


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    from backend.spark_session import spark_session
    from backend.thrift_server import start_thrift_server

    java = java_executable(os.environ)
    config = make_test_config(tmp_path_factory.mktemp("stack"))
    spark = spark_session(config, "dipper-tests", thrift_port=config.backend.port, persistent_catalog=True)
    try:
        server = start_thrift_server(spark, config.backend.host, config.backend.port)
        yield Stack(config=config, spark=spark, java=java, thrift_server=server)
    finally:
        spark.stop()


def spark_rows(stack: Stack, sql: str) -> list[tuple]:
    """The rows of ``sql`` on the shared session as a sorted list: a multiset, to compare two answers."""
    return sorted((tuple(r) for r in stack.spark.sql(sql).collect()), key=repr)


def catalog_tables(stack: Stack, root: Path, database: str, names: list[str]) -> Any:
    """Register the Parquet folders ``root/<name>`` as tables ``database.<name>`` (replacing earlier ones) and
    collect their statistics into a new store at ``root/store``; returns the store."""
    from stats.collect import collect
    from stats.store import StatsStore

    spark = stack.spark
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {database}")
    for name in names:
        spark.sql(f"DROP TABLE IF EXISTS {database}.{name}")
        spark.sql(f"CREATE TABLE {database}.{name} USING parquet LOCATION '{root / name}'")
    store = StatsStore(root / "store")
    collect(spark, store, [f"{database}.{name}" for name in names])
    return store
