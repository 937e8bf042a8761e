"""``python -m bench.translate_queries``: the 22 TPC-H and 99 TPC-DS queries, as Spark SQL.

The queries come from duckdb's tpch and tpcds extensions (``tpch_queries()``, ``tpcds_queries()``) and are
translated duckdb -> Spark by sqlglot into ``bench/queries/<suite>/qNN.sql``. The files are generated,
never edited by hand; ``tests/test_query_suite.py`` checks that they equal what this module produces.
Which queries Spark cannot run, and why, is kept in ``bench/queries/unsupported.toml`` (checked by the
tests against a real Spark session).
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import sqlglot

from bench.generate_raw import duckdb_with_extension
from dipper import cli

log = logging.getLogger("dipper.bench")

QUERY_DIR = Path(__file__).resolve().parent / "queries"
SOURCES = {"tpch": "tpch_queries()", "tpcds": "tpcds_queries()"}


def source_queries(suite: str) -> dict[str, str]:
    """``qNN`` -> duckdb SQL, straight from the extension."""
    con = duckdb_with_extension(suite)
    rows = con.execute(f"SELECT query_nr, query FROM {SOURCES[suite]} ORDER BY query_nr").fetchall()
    con.close()
    return {f"q{nr:02d}": text for nr, text in rows}


def translate(name: str, suite: str, duckdb_sql: str) -> str:
    """The Spark SQL text of one query, with a header naming its source."""
    statements = sqlglot.transpile(duckdb_sql.strip().rstrip(";"), read="duckdb", write="spark", pretty=True)
    if len(statements) != 1:
        raise ValueError(f"{suite} {name}: expected one statement, got {len(statements)}")
    label = "TPC-H" if suite == "tpch" else "TPC-DS"
    return (f"-- {label} {name.upper()}, from duckdb 1.5.5 {SOURCES[suite]}, translated duckdb -> spark by "
            f"sqlglot {sqlglot.__version__}\n{statements[0]}\n")


def generate(out_dir: Path = QUERY_DIR) -> dict[str, dict[str, str]]:
    result: dict[str, dict[str, str]] = {}
    for suite in SOURCES:
        folder = out_dir / suite
        folder.mkdir(parents=True, exist_ok=True)
        result[suite] = {}
        for name, text in source_queries(suite).items():
            spark_sql = translate(name, suite, text)
            (folder / f"{name}.sql").write_text(spark_sql)
            result[suite][name] = spark_sql
        log.info("%s: wrote %d queries to %s", suite, len(result[suite]), folder)
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.translate_queries",
                                description="Regenerate bench/queries/{tpch,tpcds}/qNN.sql from duckdb's TPC "
                                            "extensions, translated to Spark SQL by sqlglot.")
    p.add_argument("--out", type=Path, default=QUERY_DIR, help="output folder (default: %(default)s)")
    args = p.parse_args(argv)
    cli.setup_logging()
    generate(args.out)
    return 0


if __name__ == "__main__":
    cli.run(main)
