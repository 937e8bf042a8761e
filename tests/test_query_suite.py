"""The committed benchmark queries: complete, parseable, and exactly what the translator produces."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from bench.query_suite import load_queries, select_queries, unsupported
from bench.translate_queries import generate
from dipper.errors import DatasetError


@pytest.mark.parametrize("suite, count", [("tpch", 22), ("tpcds", 99)])
def test_every_query_is_there(suite: str, count: int) -> None:
    assert len(load_queries(suite)) == count
    assert set(unsupported(suite)) <= set(load_queries(suite))


COMMITTED = {suite: load_queries(suite) for suite in ("tpch", "tpcds")}


@pytest.mark.parametrize("suite, name", [(suite, name) for suite, queries in COMMITTED.items() for name in queries],
                         ids=lambda v: v)
def test_every_query_parses(suite: str, name: str) -> None:
    assert isinstance(sqlglot.parse_one(COMMITTED[suite][name], read="spark"), exp.Query), name


@pytest.fixture(scope="module")
def translated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    """The translator's output, written afresh once for the module."""
    return generate(tmp_path_factory.mktemp("translated"))


@pytest.mark.parametrize("suite", ["tpch", "tpcds"])
def test_committed_files_equal_the_translators_output(translated: dict[str, dict[str, str]], suite: str) -> None:
    assert set(translated) == {"tpch", "tpcds"}
    assert translated[suite] == load_queries(suite), f"{suite}: regenerate with python -m bench.translate_queries"


def test_query_names() -> None:
    assert list(select_queries("tpch", ["q1", "02", "3", "Q22"])) == ["q01", "q02", "q03", "q22"]
    with pytest.raises(DatasetError, match="no runnable query 'q23'"):
        select_queries("tpch", ["q23"])
    with pytest.raises(DatasetError, match="unknown benchmark 'tpcx'"):
        load_queries("tpcx")
