"""Simple layouts: one order per table, written by one PySpark job (``write``). The benchmarks run on them,
and the what-if compares a qd-tree against them (``layout/whatif.py``).

- ``tuned`` (diP paper, 000_*.txt §13.1-13.2): fact tables clustered on their date key and ordered by their
  key within each cluster; all other tables sorted on their primary key. The paper (on SCOPE) says
  *hash*-clustered; we range-cluster, because in a file-per-cluster store a hash cluster spreads every date
  over the whole year and no per-file statistic could tell clusters apart, while the issue this implements
  asks for files with narrow, mostly disjoint date ranges - what a Spark user gets from ``CLUSTER BY`` /
  ``repartitionByRange`` and what Delta's and Iceberg's sort orders produce.
- ``random:<seed>``: each table ordered by one column chosen at random (seeded, so reproducible), its
  primary key breaking ties.
- ``partitioned``: TPC-DS fact tables Hive-partitioned by their date key, as in the Trino dynamic partition
  pruning post (004_*.txt); other tables as in ``tuned``. Defined for TPC-DS only.
- ``keyed``: every table, facts included, range-clustered and sorted on its primary key (``TableSpec.key``),
  as a table written in key order or by a ``CLUSTER BY`` on its key would be. A date predicate then prunes
  little, but a key range does, and diPs across key joins (orders -> lineitem on the order key, part ->
  partsupp) remove files that the date-clustered ``tuned`` layout keeps (the random query test runs both).
"""

from __future__ import annotations

import dataclasses
import math
import random
import re
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from dipper.errors import DatasetError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

LAYOUT_HELP = "tuned | keyed | random:<seed> | partitioned (tpcds only)"

# Spark caps a range exchange's sample at this many keys (RangePartitioner).
SPARK_RANGE_SAMPLE_CAP = 1_000_000
RANGE_SAMPLE_CONF = "spark.sql.execution.rangeExchange.sampleSizePerPartition"


class Table(Protocol):
    """What a simple layout needs to know of a table (a benchmark's ``TableSpec`` is one)."""

    name: str
    key: tuple[str, ...]  # primary key, in sort order
    date_key: str | None  # the date key a fact table is clustered or partitioned on


@dataclasses.dataclass(frozen=True)
class TablePlan:
    """How one table is written: range-clustered into files on ``cluster_by`` (or Hive-partitioned on
    ``partition_by``), each file ordered by ``sort_by``."""

    cluster_by: tuple[str, ...] = ()
    sort_by: tuple[str, ...] = ()
    partition_by: tuple[str, ...] = ()

    def describe(self) -> str:
        parts = []
        if self.partition_by:
            parts.append(f"partitioned by {', '.join(self.partition_by)}")
        if self.cluster_by:
            parts.append(f"clustered by {', '.join(self.cluster_by)}")
        if self.sort_by:
            parts.append(f"sorted by {', '.join(self.sort_by)}")
        return "; ".join(parts)


@dataclasses.dataclass(frozen=True)
class Layout:
    kind: str
    seed: int | None = None

    @property
    def name(self) -> str:
        return f"random:{self.seed}" if self.kind == "random" else self.kind

    def check_suite(self, suite: str) -> None:
        if self.kind == "partitioned" and suite != "tpcds":
            raise DatasetError("layout 'partitioned' is defined for tpcds only (its fact tables are partitioned by date key)")

    def plan(self, suite: str, table: Table, columns: list[str]) -> TablePlan:
        """How ``table`` of benchmark ``suite`` (its name seeds ``random``) with these ``columns`` is written."""
        self.check_suite(suite)
        if self.kind == "random":
            column = random.Random(f"{self.seed}/{suite}/{table.name}").choice(sorted(columns))
            # The key breaks ties: a range partitioning on a column of few values (ss_quantity: 100, inventory's
            # warehouse: 10) cannot make more files than it has values, so the table would not reach its file
            # count (TPC-DS SF 10 store_sales came out as 101 files of 18 MB instead of about 700).
            tie = tuple(k for k in table.key if k != column)
            return TablePlan(cluster_by=(column, *tie), sort_by=(column, *tie))
        if self.kind == "partitioned" and table.date_key:
            return TablePlan(partition_by=(table.date_key,), sort_by=table.key)
        if table.date_key and self.kind != "keyed":
            return TablePlan(cluster_by=(table.date_key,), sort_by=table.key)
        return TablePlan(cluster_by=table.key, sort_by=table.key)


def parse_layout(text: str) -> Layout:
    if text in ("tuned", "keyed", "partitioned"):
        return Layout(text)
    match = re.fullmatch(r"random:(\d{1,9})", text)
    if match:
        return Layout("random", int(match.group(1)))
    raise DatasetError(f"unknown layout {text!r}; choose one of: {LAYOUT_HELP}")


def write(spark: SparkSession, df: DataFrame, plan: TablePlan, n: int, rows: int, path: Path) -> None:
    """Write ``df`` (``rows`` rows) to ``path`` as Parquet in ``plan``: ``n`` files, range-clustered, each sorted;
    or Hive-partitioned, one file per partition."""
    if plan.partition_by:
        # One task per date value (hash-partitioned on it), so each Hive partition folder gets one file.
        out = df.repartition(*plan.partition_by).sortWithinPartitions(*plan.partition_by, *plan.sort_by)
        out.write.partitionBy(*plan.partition_by).parquet(str(path))
        return
    # Range partitioning gives each file a contiguous slice of cluster_by; a sort inside each file then
    # keeps its row groups tight on sort_by.
    hint = full_sample_hint(rows, n, df.rdd.getNumPartitions())
    previous = spark.conf.get(RANGE_SAMPLE_CONF, None)
    if hint is not None:
        spark.conf.set(RANGE_SAMPLE_CONF, str(hint))
    try:
        df.repartitionByRange(n, *plan.cluster_by).sortWithinPartitions(*plan.sort_by).write.parquet(str(path))
    finally:
        if previous is None:
            spark.conf.unset(RANGE_SAMPLE_CONF)
        else:
            spark.conf.set(RANGE_SAMPLE_CONF, previous)


def full_sample_hint(rows: int, files: int, input_partitions: int) -> int | None:
    """The per-partition sample hint that makes Spark's range partitioning sample every row, or None when
    the table is too large for that.

    Spark draws the range bounds from a reservoir sample seeded by the RDD's id (RangePartitioner.sketch),
    which depends on how many RDDs the session made before, so the same table laid out twice gets other
    file boundaries and the same query skips other files. A reservoir at least as large as its input keeps
    every row and draws nothing: each input partition gets ceil(3 * min(hint * files, cap) / partitions)
    places, so with ``hint * files >= rows * partitions / 3`` every partition fits whatever its share of the
    rows. Possible (and then the layout is reproducible) while ``rows * partitions <= 3 * cap``; above,
    Spark's default sample is kept (bounds vary between runs, the layout's quality does not)."""
    partitions = max(1, input_partitions)
    if rows * partitions > 3 * SPARK_RANGE_SAMPLE_CAP:
        return None
    return max(100, math.ceil(rows * partitions / (3 * files)) + 1)
