"""``python -m bench measure-datasets``: how long generating and laying out each benchmark takes, and how big it is."""

from __future__ import annotations

import datetime
import logging
import os
import platform
import shutil
import time
from collections.abc import Mapping
from pathlib import Path

from backend.warehouse import Dataset
from bench.generate_raw import generate_raw, raw_dir
from bench.datasets import DEFAULT_TARGET_FILE_MB, check_request
from layout.simple import parse_layout
from bench.lay_out import lay_out
from bench.suites import SUITES, expected_rows, rows_match
from dipper.config import Config
from dipper.environment import ensure_writable_dir, java_executable

log = logging.getLogger("dipper.bench")


def measure(config: Config, environ: Mapping[str, str], sf: float, layouts: list[str], output: Path) -> int:
    for suite in SUITES:
        for layout in layouts:
            if layout != "partitioned" or suite == "tpcds":
                check_request(suite, sf, layout)
    java_executable(environ)
    ensure_writable_dir(config.paths.raw, "raw data")
    ensure_writable_dir(config.paths.warehouse, "warehouse")
    from backend.spark_session import spark_session

    rows: list[tuple[str, str, float, int, Dataset]] = []
    spark = spark_session(config, "dipper-measure-datasets")
    try:
        for suite in SUITES.values():
            shutil.rmtree(raw_dir(config.paths.raw, suite.name, sf), ignore_errors=True)
            t0 = time.monotonic()
            raw = generate_raw(config.paths.raw, suite.name, sf)
            gen_seconds = time.monotonic() - t0
            raw_bytes = sum(f.stat().st_size for f in raw.glob("*.parquet"))
            for layout in layouts:
                if layout == "partitioned" and suite.name != "tpcds":
                    continue
                ds = lay_out(spark, raw, config.paths.warehouse, suite, sf, parse_layout(layout), None,
                             int(DEFAULT_TARGET_FILE_MB * 1024 * 1024))
                rows.append((suite.name, layout, gen_seconds, raw_bytes, ds))
    finally:
        spark.stop()
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(_report(sf, rows, config))
    print(f"wrote {output}")
    return 0


def _report(sf: float, rows: list[tuple[str, str, float, int, Dataset]], config: Config) -> str:
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    lines = [
        f"# Benchmark datasets: generation time and size (SF {sf:g})",
        "",
        f"Measured {datetime.date.today().isoformat()} by `make bench SF={sf:g}` (`python -m bench measure-datasets`) "
        f"on {os.cpu_count()} cores, {mem_gb:.0f} GiB RAM, {platform.system()} {platform.machine()}, "
        f"Python {platform.python_version()}, Spark master `{config.backend.spark_master}`, "
        f"driver memory {config.backend.driver_memory}, target file size {DEFAULT_TARGET_FILE_MB:g} MB.",
        "Generation: TPC-H by `tpchgen-cli`, TPC-DS by duckdb 1.5.5 `dsdgen`, to one Parquet file per table. "
        "Layout: the PySpark job of `layout/simple.py` (`write`), called by `bench/lay_out.py`, writing catalog tables.",
        "",
        "| suite | layout | generate (s) | generated size (MB) | lay out (s) | laid-out size (MB) | tables | files | rows |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for suite, layout, gen_s, raw_bytes, ds in rows:
        lines.append(f"| {suite} | {layout} | {gen_s:.1f} | {raw_bytes / 1e6:.1f} | {ds.seconds_to_build:.1f} | "
                     f"{sum(t.bytes for t in ds.tables) / 1e6:.1f} | {len(ds.tables)} | "
                     f"{sum(t.files for t in ds.tables)} | {sum(t.rows for t in ds.tables):,} |")
    for suite, layout, _, _, ds in rows:
        lines += ["", f"## {ds.database}", "", "| table | rows | rows as the spec says | files | MB | ordering |",
                  "|---|---:|---|---:|---:|---|"]
        for t in ds.tables:
            match = rows_match(SUITES[suite].table(t.name), suite, sf, t.rows)
            verdict = {True: "yes", False: f"**no** (spec: {expected_rows(SUITES[suite].table(t.name), suite, sf):,})",
                       None: "no number in the spec"}[match]
            lines.append(f"| {t.name} | {t.rows:,} | {verdict} | {t.files} | {t.bytes / 1e6:.1f} | {t.ordering} |")
    return "\n".join(lines) + "\n"
