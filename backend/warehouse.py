"""The warehouse directory: one folder per database, one folder per table, and a manifest per database.

Layout on disk::

    <warehouse>/<database>/_dataset.json      manifest: suite, scale factor, layout, tables
    <warehouse>/<database>/<table>/*.parquet  (or Hive-style <col>=<value>/ folders when partitioned)

The manifest is what makes the warehouse self-describing: the embedded backend registers every table
listed in it on each start (the catalog itself is in memory, so it never goes stale), and later tools
(statistics, benchmarks) learn the suite, scale and layout from it instead of guessing from names.
A database folder without a manifest is ignored, so a half-written dataset can never be registered.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path
from typing import Any

from dipper.errors import DatasetError

MANIFEST = "_dataset.json"
MANIFEST_VERSION = 1


@dataclasses.dataclass(frozen=True)
class TableInfo:
    name: str
    rows: int
    files: int
    bytes: int
    partition_columns: tuple[str, ...] = ()
    # How the layout ordered this table, e.g. "cluster by l_shipdate, sort by l_orderkey".
    ordering: str = ""


@dataclasses.dataclass(frozen=True)
class Dataset:
    database: str
    suite: str
    scale_factor: float
    layout: str
    tables: tuple[TableInfo, ...]
    created_at: str
    seconds_to_build: float

    def table(self, name: str) -> TableInfo:
        for t in self.tables:
            if t.name == name:
                return t
        raise DatasetError(f"database {self.database} has no table {name}")

    def to_json(self) -> str:
        body: dict[str, Any] = dataclasses.asdict(self)
        body["version"] = MANIFEST_VERSION
        return json.dumps(body, indent=2, sort_keys=True)

    @staticmethod
    def from_json(text: str, where: Path) -> Dataset:
        try:
            body = json.loads(text)
            if body.pop("version") != MANIFEST_VERSION:
                raise DatasetError(f"{where}: manifest version is not {MANIFEST_VERSION}; regenerate the dataset")
            tables = tuple(TableInfo(**{**t, "partition_columns": tuple(t["partition_columns"])}) for t in body.pop("tables"))
            return Dataset(tables=tables, **body)
        except (KeyError, TypeError, ValueError) as e:
            raise DatasetError(f"{where}: damaged dataset manifest ({e}); regenerate the dataset") from None


def database_name(suite: str, scale_factor: float, layout: str) -> str:
    """``tpch`` + SF 0.01 + ``random:7`` -> ``tpch_sf0_01_random_7``: a valid unquoted Spark identifier."""
    sf = f"{scale_factor:g}".replace(".", "_").replace("-", "_")
    return re.sub(r"[^a-z0-9_]", "_", f"{suite}_sf{sf}_{layout}".lower())


def read_dataset(database_dir: Path) -> Dataset:
    path = database_dir / MANIFEST
    return Dataset.from_json(path.read_text(), path)


def write_dataset(database_dir: Path, dataset: Dataset) -> None:
    """Write the manifest atomically (temp file + rename): readers see the old one or the new one."""
    tmp = database_dir / (MANIFEST + ".tmp")
    tmp.write_text(dataset.to_json())
    os.replace(tmp, database_dir / MANIFEST)


def list_datasets(warehouse: Path) -> list[Dataset]:
    """Every complete dataset in the warehouse (folders with a manifest), sorted by database name."""
    if not warehouse.is_dir():
        return []
    return [read_dataset(d) for d in sorted(warehouse.iterdir()) if (d / MANIFEST).is_file()]


def table_location(warehouse: Path, database: str, table: str) -> Path:
    return warehouse / database / table
