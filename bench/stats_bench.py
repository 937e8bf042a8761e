"""``python -m bench stats``: cost of the statistics (issue "Statistics store", Measure).

- collection time and store size (as a share of the data) for one dataset at range-set sizes K, beside the
  time of a plain one-pass zone-map scan of the same tables in the same session (min, max and count of every
  column grouped by file: the least any statistics job must read and compute), as a throughput ratio;
- load time and resident memory of a synthetic table of 100,000 files x 20 columns (no Spark).

Writes ``docs/results/stats.md``.
"""

from __future__ import annotations

import datetime
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
import pyarrow as pa

from backend.warehouse import read_dataset
from dipper.config import Config
from dipper.environment import java_executable
from stats.collect import DEFAULT_RANGE_SET_SIZE, arrow_schema, collect, describe_table
from stats.sql_text import quote_name
from stats.loader import to_table_stats
from stats.model import Kind
from stats.store import COLUMN_PREFIX, StatsStore, TableEntry

SYNTHETIC_FILES = 100_000
SYNTHETIC_COLUMNS = 20


def synthetic_store(root: Path, files: int, columns: int, k: int = 8) -> str:
    """A store holding one int64 table of ``files`` rows (files) and ``columns`` columns with range-sets."""
    rng = np.random.default_rng(1)
    kinds = {f"c{i}": Kind("int") for i in range(columns)}
    data = {"path": [f"file:/synthetic/part-{i:06d}.parquet" for i in range(files)],
            "size": np.full(files, 64 << 20), "mtime": np.full(files, 1_700_000_000_000_000), "rows": np.full(files, 10**5),
            "footer": np.zeros(files, dtype=bool)}
    for name in kinds:
        lo = np.sort(rng.integers(0, 10**12, files))
        starts = lo[:, None] + np.sort(rng.integers(0, 10**6, (files, k)), axis=1)
        values = pa.ListArray.from_arrays(np.arange(0, files * k + 1, k), pa.array(starts.ravel()))
        data[COLUMN_PREFIX + name] = pa.StructArray.from_arrays(
            [pa.array(starts[:, 0]), pa.array(starts[:, -1]), pa.array(np.zeros(files, dtype=np.int64)),
             pa.array(np.ones(files, dtype=bool)), values, values, pa.nulls(files, pa.list_(pa.string()))],
            names=["min", "max", "nulls", "known", "rs_lo", "rs_hi", "values"])
    table = pa.Table.from_pydict(data, schema=arrow_schema(kinds))
    entry = TableEntry("synthetic.t", "file:/synthetic", "parquet", (), {c: "bigint" for c in kinds}, kinds, {}, k, 0,
                       "now", files, files * (64 << 20))
    StatsStore(root).commit({"synthetic.t": (entry, table)})
    return "synthetic.t"


def plain_scan(spark, tables: list[str]) -> None:
    """The baseline: one aggregation per table grouped by file, min, max and count of every column."""
    for table in tables:
        columns = describe_table(spark, table).schema
        aggs = ", ".join(f"min({quote_name(c)}), max({quote_name(c)}), count({quote_name(c)})" for c in columns)
        spark.sql(f"SELECT _metadata.file_path, count(1), {aggs} FROM {quote_name(table)} "
                  "GROUP BY _metadata.file_path").collect()


def measure(config: Config, environ, database: str, sizes: list[int], output: Path) -> int:
    lines = ["# Statistics: cost to collect, store and load",
             "",
             f"Measured {datetime.date.today().isoformat()} by `python -m bench stats --database {database}` on "
             f"{platform.machine()}, 2 cores, Spark master `{config.backend.spark_master}`.",
             ""]
    folder = config.paths.warehouse / database
    dataset = read_dataset(folder)
    data_bytes = sum(t.bytes for t in dataset.tables)
    java_executable(environ)
    from backend.catalog import register_warehouse
    from backend.spark_session import spark_session

    spark = spark_session(config, "dipper-stats-bench")
    rows = []
    try:
        register_warehouse(spark, config.paths.warehouse)
        tables = [f"{database}.{t.name}" for t in dataset.tables]
        plain_scan(spark, tables)  # warms the JVM and the file system cache, as for every run after it
        plain = []
        for _ in range(3):
            started = time.monotonic()
            plain_scan(spark, tables)
            plain.append(time.monotonic() - started)
        plain_seconds = sorted(plain)[1]
        print(f"plain zone-map scan: {plain_seconds:.1f}s (median of 3)")
        # Each setting as the plain scan is measured: median of 3 (the machine is shared, single runs vary).
        for k, footers in [(k, True) for k in sizes] + [(DEFAULT_RANGE_SET_SIZE, False)]:
            runs = []
            for _ in range(3):
                root = Path(tempfile.mkdtemp(prefix="dipper-stats-bench-"))
                started = time.monotonic()
                collect(spark, StatsStore(root), tables, range_set_size=k, use_footers=footers)
                runs.append(time.monotonic() - started)
                size = sum(f.stat().st_size for f in root.rglob("*.parquet"))
                shutil.rmtree(root)
            seconds = sorted(runs)[1]
            rows.append((k, footers, seconds, size))
            print(f"K={k}{'' if footers else ' (no footers)'}: {seconds:.1f}s, store {size / 1e6:.2f} MB")
    finally:
        spark.stop()
    lines += [f"## Collection of {database} ({len(dataset.tables)} tables, {sum(t.files for t in dataset.tables)} files, "
              f"{data_bytes / 1e6:.1f} MB of Parquet)", "",
              f"A plain one-pass zone-map scan of the same tables (min, max, count of every column grouped by file), "
              f"same session, median of 3 after a warm-up: **{plain_seconds:.1f} s**. Throughput is the plain scan's "
              "time over the collector's (1.0 = as fast as the plain scan).", "",
              "String bounds come from Parquet footers where they prove them (`stats/scan.py`); the last row trusts no "
              "footer (`stats collect --no-footers`), so Spark computes every bound, as for ORC tables or files written "
              "without statistics.", "",
              "| range-set size K | footers | collection time (s, median of 3) | throughput vs plain scan | store size (MB) "
              "| store / data |",
              "|---:|:--|---:|---:|---:|---:|"]
    lines += [f"| {k} | {'yes' if footers else 'no'} | {s:.1f} | {plain_seconds / s:.2f}x | {b / 1e6:.2f} | "
              f"{100 * b / data_bytes:.2f}% |" for k, footers, s, b in rows]

    root = Path(tempfile.mkdtemp(prefix="dipper-stats-synthetic-"))
    name = synthetic_store(root, SYNTHETIC_FILES, SYNTHETIC_COLUMNS)
    store = StatsStore(root)
    process = psutil.Process(os.getpid())
    before = process.memory_info().rss
    started = time.perf_counter()
    snap = store.snapshot()
    entry = snap.entry(name)
    stats = to_table_stats(name, snap.read(name), entry.kinds, ())
    seconds = time.perf_counter() - started
    grown = process.memory_info().rss - before
    shutil.rmtree(root)
    lines += ["", f"## Loading {SYNTHETIC_FILES:,} files x {SYNTHETIC_COLUMNS} int columns (range-sets of 8)", "",
              "| load time (s) | resident memory added (MB) | per file and column (bytes) |", "|---:|---:|---:|",
              f"| {seconds:.2f} | {grown / 1e6:.0f} | {grown / (SYNTHETIC_FILES * SYNTHETIC_COLUMNS):.0f} |"]
    assert stats.n_files == SYNTHETIC_FILES
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text("\n".join(lines) + "\n")
    print(f"wrote {output}")
    return 0
