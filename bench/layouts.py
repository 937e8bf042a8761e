"""The data layouts the benchmarks run on, and how each orders every table.

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
import random
import re

from bench.suites import Suite, TableSpec
from dipper.errors import DatasetError

LAYOUT_HELP = "tuned | keyed | random:<seed> | partitioned (tpcds only)"


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

    def check_suite(self, suite: Suite) -> None:
        if self.kind == "partitioned" and suite.name != "tpcds":
            raise DatasetError("layout 'partitioned' is defined for tpcds only (its fact tables are partitioned by date key)")

    def plan(self, suite: Suite, table: TableSpec, columns: list[str]) -> TablePlan:
        self.check_suite(suite)
        if self.kind == "random":
            column = random.Random(f"{self.seed}/{suite.name}/{table.name}").choice(sorted(columns))
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
