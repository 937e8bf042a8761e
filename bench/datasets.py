"""Build a benchmark dataset end to end: generate, lay out, register. Used by ``python -m bench generate``,
``make demo`` and the test fixture, so all three get the same data by the same code."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from backend.catalog import register_dataset
from backend.warehouse import MANIFEST, Dataset, database_name, read_dataset
from bench.generate_raw import generate_raw
from layout.simple import parse_layout
from bench.lay_out import lay_out
from bench.suites import check_scale_factor, indexes as suite_indexes, suite as get_suite
from dipper.config import Config
from dipper.environment import ensure_writable_dir, java_executable
from dipper.errors import DatasetError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("dipper.bench")

DEFAULT_TARGET_FILE_MB = 4.0


def check_request(suite_name: str, sf: float, layout_text: str, files: int | None = None,
                  target_file_mb: float = DEFAULT_TARGET_FILE_MB, tables: Sequence[str] = ()) -> None:
    """Validate a dataset request before anything expensive starts (no Spark, no generator)."""
    suite = get_suite(suite_name)
    for t in tables:
        if t not in {s.name for s in suite.tables}:
            raise DatasetError(f"{suite.name} has no table {t!r}; its tables: {', '.join(s.name for s in suite.tables)}")
    check_scale_factor(sf)
    parse_layout(layout_text).check_suite(suite.name)
    if files is not None and files < 1:
        raise DatasetError(f"--files must be at least 1, not {files}")
    if not target_file_mb > 0:
        raise DatasetError(f"--target-file-mb must be positive, not {target_file_mb}")


def existing_dataset(config: Config, suite_name: str, sf: float, layout_text: str,
                     tables: Sequence[str] = ()) -> Dataset | None:
    """The dataset already in the warehouse, if it holds every requested table (all of the suite's by default)."""
    folder = config.paths.warehouse / database_name(suite_name, sf, parse_layout(layout_text).name)
    if not (folder / MANIFEST).is_file():
        return None
    dataset = read_dataset(folder)
    wanted = set(tables) or {t.name for t in get_suite(suite_name).tables}
    return dataset if wanted <= {t.name for t in dataset.tables} else None


def build_dataset(spark: SparkSession, config: Config, suite_name: str, sf: float, layout_text: str,
                  files: int | None = None, target_file_mb: float = DEFAULT_TARGET_FILE_MB,
                  tables: Sequence[str] = (), force: bool = False) -> Dataset:
    check_request(suite_name, sf, layout_text, files, target_file_mb, tables)
    existing = existing_dataset(config, suite_name, sf, layout_text, tables)
    if existing is not None and not force:
        log.info("reusing %s (pass --force to rebuild)", existing.database)
        register_dataset(spark, config.paths.warehouse, existing)
        return existing
    suite, layout = get_suite(suite_name), parse_layout(layout_text)
    ensure_writable_dir(config.paths.raw, "raw data")
    ensure_writable_dir(config.paths.warehouse, "warehouse")
    raw = generate_raw(config.paths.raw, suite.name, sf)
    dataset = lay_out(spark, raw, config.paths.warehouse, suite, sf, layout, files,
                      int(target_file_mb * 1024 * 1024), tables=tables)
    register_dataset(spark, config.paths.warehouse, dataset)
    return dataset


def generate(config: Config, environ: Mapping[str, str], suite_name: str, sf: float, layout_text: str,
             files: int | None, target_file_mb: float, tables: Sequence[str], force: bool,
             collect_stats: int | None = None) -> int:
    """``python -m bench generate``: checks first (cheap to expensive), then one Spark session for the job.
    With ``collect_stats`` (a range-set size K), the dataset's statistics are then collected or refreshed
    in the same session (unchanged files collected with K already are not read again)."""
    check_request(suite_name, sf, layout_text, files, target_file_mb, tables)
    if collect_stats is not None and collect_stats < 1:
        raise DatasetError(f"--collect-stats must be a range-set size of at least 1, not {collect_stats}")
    existing = existing_dataset(config, suite_name, sf, layout_text, tables)
    if existing is not None and not force and collect_stats is None:
        log.info("%s already exists in %s (built %s); pass --force to rebuild", existing.database,
                 config.paths.warehouse, existing.created_at)
        _summary(existing)
        return 0
    java_executable(environ)
    ensure_writable_dir(config.paths.raw, "raw data")
    ensure_writable_dir(config.paths.warehouse, "warehouse")
    from backend.spark_session import spark_session

    spark = spark_session(config, "dipper-generate")
    try:
        dataset = build_dataset(spark, config, suite_name, sf, layout_text, files, target_file_mb, tables, force)
        if collect_stats is not None:
            from stats.collect import collect
            from stats.store import StatsStore

            ensure_writable_dir(config.paths.stats, "statistics")
            collect(spark, StatsStore(config.paths.stats), [f"{dataset.database}.{t.name}" for t in dataset.tables],
                    range_set_size=collect_stats, value_list_max=None, refresh=True,
                    indexes=suite_indexes(suite_name, [t.name for t in dataset.tables]))
    finally:
        spark.stop()
    _summary(dataset)
    return 0


def _summary(ds: Dataset) -> None:
    print(f"{ds.database}: {ds.suite} SF {ds.scale_factor:g}, layout {ds.layout}, "
          f"{sum(t.rows for t in ds.tables):,} rows in {sum(t.files for t in ds.tables)} files, "
          f"{sum(t.bytes for t in ds.tables) / 1e6:.1f} MB")
    for t in ds.tables:
        print(f"  {t.name:<24} {t.rows:>12,} rows {t.files:>6} files {t.bytes / 1e6:>9.1f} MB  {t.ordering}")
