"""Write a generated benchmark into the warehouse as Parquet catalog tables in one simple layout (each table
written by ``layout/simple.py``).

Everything is written under ``<warehouse>/.tmp-<database>-<random>/`` and renamed to
``<warehouse>/<database>`` only once every table and the manifest are complete, so the warehouse never
holds a half-written database (the backend only registers folders with a manifest).
"""

from __future__ import annotations

import datetime
import logging
import math
import shutil
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from backend.warehouse import Dataset, TableInfo, database_name, write_dataset
from layout.simple import Layout, write
from bench.suites import Suite

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("dipper.bench")

# With --files N, a table still gets at least this many rows per file: splitting nation's 25 rows into
# 8 files would only measure file-opening overhead.
MIN_ROWS_PER_FILE = 1000


def file_count(rows: int, raw_bytes: int, files: int | None, target_file_bytes: int) -> int:
    """Files to write for one table: ``files`` if given (capped so each file has MIN_ROWS_PER_FILE rows),
    else enough files that each is about ``target_file_bytes`` (estimated from the generated Parquet size)."""
    if files is not None:
        return max(1, min(files, math.ceil(rows / MIN_ROWS_PER_FILE)))
    return max(1, math.ceil(raw_bytes / target_file_bytes))


def lay_out(spark: SparkSession, raw: Path, warehouse: Path, suite: Suite, sf: float, layout: Layout,
            files: int | None, target_file_bytes: int, tables: Sequence[str] = ()) -> Dataset:
    """Write the tables of ``suite`` (all, or just ``tables``) from ``raw`` into the warehouse in ``layout``,
    replacing the database if it exists."""
    layout.check_suite(suite.name)
    specs = [suite.table(t) for t in tables] if tables else list(suite.tables)
    database = database_name(suite.name, sf, layout.name)
    final = warehouse / database
    started = time.monotonic()
    for leftover in warehouse.glob(f".tmp-{database}-*"):  # from a run that was killed outright (SIGKILL)
        shutil.rmtree(leftover, ignore_errors=True)
    tmp = warehouse / f".tmp-{database}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir(parents=True)
    try:
        infos = []
        for i, spec in enumerate(specs, 1):
            t0 = time.monotonic()
            source = raw / f"{spec.name}.parquet"
            df = spark.read.parquet(str(source))
            rows = df.count()
            plan = layout.plan(suite.name, spec, df.columns)
            n = file_count(rows, source.stat().st_size, files, target_file_bytes)
            write(spark, df, plan, n, rows, tmp / spec.name)
            written = sorted((tmp / spec.name).rglob("*.parquet"))
            infos.append(TableInfo(spec.name, rows=rows, files=len(written), bytes=sum(f.stat().st_size for f in written),
                                   partition_columns=plan.partition_by, ordering=plan.describe()))
            log.info("[%d/%d] %s.%s: %d rows, %d files, %.1f MB (%s) in %.1fs", i, len(specs), database,
                     spec.name, rows, len(written), infos[-1].bytes / 1e6, plan.describe(), time.monotonic() - t0)
        dataset = Dataset(database=database, suite=suite.name, scale_factor=sf, layout=layout.name, tables=tuple(infos),
                          created_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                          seconds_to_build=round(time.monotonic() - started, 1))
        write_dataset(tmp, dataset)
        if final.exists():
            trash = warehouse / f".trash-{database}-{uuid.uuid4().hex[:8]}"
            final.rename(trash)
            shutil.rmtree(trash)
        tmp.rename(final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("laid out %s in %.1fs: %d files, %.1f MB", database, dataset.seconds_to_build,
             sum(t.files for t in dataset.tables), sum(t.bytes for t in dataset.tables) / 1e6)
    return dataset
