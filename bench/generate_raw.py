"""Generate a benchmark's tables as Parquet, one file per table, before any layout is applied.

TPC-H comes from ``tpchgen-cli`` (installed with the ``bench`` extra); TPC-DS from the ``dsdgen`` of
duckdb's tpcds extension (``duckdb-extension-tpcds==1.5.5``). Output goes to ``<raw>/<suite>_sf<sf>/``,
written into a temporary folder first and renamed into place when complete, so a crash or Ctrl-C never
leaves a half-generated dataset that a later run would take for a finished one.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.suites import suite as get_suite
from dipper.errors import DatasetError

log = logging.getLogger("dipper.bench")


def raw_dir(raw_root: Path, suite_name: str, sf: float) -> Path:
    return raw_root / f"{suite_name}_sf{sf:g}"


def generate_raw(raw_root: Path, suite_name: str, sf: float) -> Path:
    """Return the folder holding ``<table>.parquet`` for every table of the suite, generating it if missing."""
    suite = get_suite(suite_name)
    target = raw_dir(raw_root, suite.name, sf)
    if target.is_dir() and all((target / f"{t.name}.parquet").is_file() for t in suite.tables):
        log.info("reusing generated %s SF %g in %s", suite.name, sf, target)
        return target
    raw_root.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f".{target.name}-", dir=raw_root) as tmp:
        out = Path(tmp) / "out"
        out.mkdir()
        log.info("generating %s SF %g ...", suite.name, sf)
        if suite.name == "tpch":
            _tpch(out, sf)
        else:
            _tpcds(out, sf, [t.name for t in suite.tables])
        missing = [t.name for t in suite.tables if not (out / f"{t.name}.parquet").is_file()]
        if missing:
            raise DatasetError(f"the {suite.name} generator did not produce: {', '.join(missing)}")
        if target.exists():
            shutil.rmtree(target)  # an incomplete earlier folder (complete ones returned above)
        out.rename(target)
    log.info("generated %s SF %g in %.1fs (%s)", suite.name, sf, time.monotonic() - started, target)
    return target


def _tpch(out: Path, sf: float) -> None:
    exe = shutil.which("tpchgen-cli") or str(Path(sys.executable).parent / "tpchgen-cli")
    if not Path(exe).exists():
        raise DatasetError("tpchgen-cli is not installed; run `make install` (it comes with the bench extra)")
    proc = subprocess.run([exe, "parquet", "-s", f"{sf:g}", "-o", str(out)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise DatasetError(f"tpchgen-cli failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}")


def duckdb_with_extension(name: str):  # -> duckdb.DuckDBPyConnection
    """An in-memory duckdb connection with the tpch or tpcds extension loaded from its pip package."""
    import importlib

    import duckdb

    try:
        package = importlib.import_module(f"duckdb_extension_{name}")
    except ImportError:
        raise DatasetError(f"duckdb-extension-{name} is not installed; run `make install`") from None
    files = sorted(Path(package.__file__).parent.rglob(f"{name}.duckdb_extension"))
    if not files:
        raise DatasetError(f"no {name}.duckdb_extension file inside {Path(package.__file__).parent}")
    con = duckdb.connect()
    con.execute(f"LOAD '{files[0]}'")
    return con


def _tpcds(out: Path, sf: float, tables: list[str]) -> None:
    con = duckdb_with_extension("tpcds")
    con.execute(f"CALL dsdgen(sf={sf:g})")
    for table in tables:
        # Table names come from our own suite definition, paths from tempfile: nothing user-supplied is spliced.
        con.execute(f"COPY {table} TO '{out / (table + '.parquet')}' (FORMAT parquet, COMPRESSION snappy)")
    con.close()
