"""Lay the test values out into small Parquet files, register the table with Spark, collect its statistics.

The layout is a pure function of a seed, and chosen so that the rewriter has something to prune and
every statistics edge is present: most files hold, per column, a narrow band of consecutive universe
values (``bench/fuzz_predicates/values.py``), so files have distinct ranges; some columns of a file are all NULL,
some single-valued, some mix a band with NULLs; double columns sometimes hold NaN (statistics then
unknown). Beside them, fixed files: an empty one, one of NULLs only, one of each column's extremes (with
a NULL), two where each column holds its least or its greatest value in every row, and whole-file
constants where every column holds one value (the same-value rule of ``rewriter/spark/evaluate.py`` decides those).

Statistics are collected by the real collector twice: with the defaults (range-sets of 8, value lists
of up to 16) and with tiny ones (2 and 2), so that range-sets merge gaps and value lists go missing.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
from sqlglot import exp

from bench.fuzz_predicates.values import COLUMNS, NAN, Column, arrow_schema, spark_schema
from dipper.errors import DatasetError
from stats.collect import collect
from stats.store import StatsStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DATABASE = "fuzz_predicates"
TABLE = "t"
DEFAULT_FILES = 18
DEFAULT_ROWS = 6
# Statistics variants: name -> (range_set_size, value_list_max, Bloom filters on every column they cover). The
# coarse variant has the filters: with little else to go on, they decide more files.
STATS = {"k8n16": (8, 16, False), "k2n2": (2, 2, True)}
_FIXED_FILES = ("empty", "nulls", "edges", "constant-min", "constant-max", "constant", "constant", "constant-with-nulls")


@dataclasses.dataclass(frozen=True)
class FuzzTable:
    """The table the predicates run over, and its statistics stores."""

    name: str  # db.table
    location: Path
    files: tuple[str, ...]  # as Spark spells _metadata.file_path
    stores: dict[str, StatsStore]  # statistics variant (``STATS``) -> store
    layout: tuple[str, ...]  # what kind of file each of ``files`` is (for reports)

    @property
    def database(self) -> str:
        return self.name.split(".")[0]


def lay_out(seed: int, files: int = DEFAULT_FILES, rows: int = DEFAULT_ROWS) -> list[tuple[str, dict[str, list[Any]]]]:
    """Per file: (its kind, ``{column: values}``), deterministic in ``seed``.

    The band files tile each column's universe: its sorted values are cut into as many consecutive chunks
    as there are band files, dealt to the files in a random order, so every edge value is in some file
    (unless that file's column was drawn all-NULL or single-valued instead)."""
    if files < len(_FIXED_FILES) + 2:
        raise DatasetError(f"the property test needs at least {len(_FIXED_FILES) + 2} files")
    rng = random.Random(f"fuzz-layout/{seed}")
    kinds = list(_FIXED_FILES) + ["band"] * (files - len(_FIXED_FILES))
    bands = files - len(_FIXED_FILES)
    chunks: dict[str, list[tuple[Any, ...]]] = {}
    for c in COLUMNS:
        cuts = [round(j * len(c.universe) / bands) for j in range(bands + 1)]
        parts = [c.universe[cuts[j]:max(cuts[j + 1], cuts[j] + 1)] for j in range(bands)]
        rng.shuffle(parts)
        chunks[c.name] = parts
    out = []
    band = 0
    for kind in kinds:
        n = 0 if kind == "empty" else rows
        out.append((kind, {c.name: _column_values(rng, c, kind, n, chunks[c.name][band] if kind == "band" else ())
                           for c in COLUMNS}))
        band += kind == "band"
    return out


def _column_values(rng: random.Random, column: Column, kind: str, n: int, chunk: tuple[Any, ...]) -> list[Any]:
    u = column.universe
    if n == 0:
        return []
    if kind == "nulls":
        return [None] * n
    if kind == "edges":
        picks = [u[0], u[-1], u[1], u[-2]]
        return [picks[i % 4] for i in range(n - 1)] + [None]
    if kind == "constant":
        return [rng.choice(u)] * n
    if kind == "constant-min":  # the type's least value in every row: -x, abs(x), x - 1 overflow
        return [u[0]] * n
    if kind == "constant-max":  # its greatest: x + 1, x * 2 overflow
        return [u[-1]] * n
    if kind == "constant-with-nulls":
        return [None] * n if rng.random() < 0.4 else [rng.choice(u)] * n
    mode = rng.random()
    if mode < 0.10:
        return [None] * n
    if mode < 0.22:
        return [rng.choice(chunk)] * n
    band = list(chunk[:n])
    values = band + [rng.choice(band) for _ in range(n - len(band))]
    rng.shuffle(values)
    if mode < 0.40:  # a band with NULLs
        for i in rng.sample(range(n), rng.randint(1, max(1, n // 2))):
            values[i] = None
    if column.family == "double" and rng.random() < 0.25:
        values[rng.randrange(n)] = NAN
    return values


def write_files(folder: Path, layout: list[tuple[str, dict[str, list[Any]]]]) -> None:
    """One Parquet file per layout entry, with the explicit Arrow schema (``bench/fuzz_predicates/values.py``)."""
    folder.mkdir(parents=True, exist_ok=True)
    schema = arrow_schema()
    for i, (_, columns) in enumerate(layout):
        table = pa.table({c.name: pa.array(columns[c.name], type=c.arrow_type) for c in COLUMNS}, schema=schema)
        pq.write_table(table, folder / f"part-{i:02d}.parquet")


def _quoted(path: Path) -> str:
    return exp.Literal.string(str(path)).sql("spark")


def register(spark: SparkSession, name: str, folder: Path) -> None:
    """``CREATE TABLE name USING parquet LOCATION folder``, and check Spark reads every column as intended.
    A new database is placed beside ``folder``, not in the configured warehouse."""
    database = name.split(".")[0]
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {database} LOCATION {_quoted(folder.parent / 'database')}")
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE {name} USING parquet LOCATION {_quoted(folder)}")
    read = {f.name: f.dataType.simpleString() for f in spark.table(name).schema}
    if read != spark_schema():
        wrong = {k: (v, read.get(k)) for k, v in spark_schema().items() if read.get(k) != v}
        raise DatasetError(f"Spark reads {name} with other types than written (wanted, got): {wrong}")


def hand_layout(files: list[dict[str, list[Any]]]) -> list[tuple[str, dict[str, list[Any]]]]:
    """A layout written by hand: per file, some columns' values; every other column is NULL."""
    out = []
    for given in files:
        n = max((len(v) for v in given.values()), default=0)
        out.append(("hand", {c.name: list(given.get(c.name, [None] * n)) for c in COLUMNS}))
    return out


def build(spark: SparkSession, workdir: Path, seed: int = 0, files: int = DEFAULT_FILES, rows: int = DEFAULT_ROWS,
          name: str = f"{DATABASE}.{TABLE}") -> FuzzTable:
    """Write, register and collect statistics of the property test's table under ``workdir``."""
    return build_layout(spark, workdir, lay_out(seed, files, rows), name)


def build_layout(spark: SparkSession, workdir: Path, layout: list[tuple[str, dict[str, list[Any]]]],
                 name: str) -> FuzzTable:
    """Write ``layout`` as Parquet files under ``workdir``, register it as ``name``, collect its statistics."""
    folder = workdir / "data"
    write_files(folder, layout)
    register(spark, name, folder)
    stores = {}
    for variant, (k, n, bloom) in STATS.items():
        store = StatsStore(workdir / f"stats-{variant}")
        collect(spark, store, [name], range_set_size=k, value_list_max=n,
                indexes={"bloom": [c.name for c in COLUMNS]} if bloom else {})
        stores[variant] = store
    paths = tuple(f"file:{(folder / f'part-{i:02d}.parquet').resolve()}" for i in range(len(layout)))
    known = set(stores["k8n16"].snapshot().read(name).column("path").to_pylist())
    if known != set(paths):
        raise DatasetError(f"the statistics describe other files than written: {sorted(known ^ set(paths))}")
    return FuzzTable(name=name, location=folder, files=paths, stores=stores, layout=tuple(k for k, _ in layout))
