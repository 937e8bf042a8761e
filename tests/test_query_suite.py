"""The committed benchmark queries: complete, parseable, and exactly what the translator produces."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlglot

from bench.query_suite import load_queries, select_queries, unsupported
from bench.translate_queries import generate
from dipper.errors import DatasetError


def test_every_query_is_there_and_parses() -> None:
    assert len(load_queries("tpch")) == 22 and len(load_queries("tpcds")) == 99
    for suite in ("tpch", "tpcds"):
        for name, sql in load_queries(suite).items():
            assert sqlglot.parse_one(sql, read="spark") is not None, name
        assert set(unsupported(suite)) <= set(load_queries(suite))


def test_committed_files_equal_the_translators_output(tmp_path: Path) -> None:
    fresh = generate(tmp_path)
    for suite, queries in fresh.items():
        assert queries == load_queries(suite), f"{suite}: regenerate with python -m bench.translate_queries"


def test_query_names() -> None:
    assert list(select_queries("tpch", ["q1", "02", "3", "Q22"])) == ["q01", "q02", "q03", "q22"]
    with pytest.raises(DatasetError, match="no runnable query 'q23'"):
        select_queries("tpch", ["q23"])
    with pytest.raises(DatasetError, match="unknown benchmark 'tpcx'"):
        load_queries("tpcx")
