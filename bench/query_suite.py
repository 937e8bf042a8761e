"""The benchmark queries as the rest of Dipper reads them: ``bench/queries/<suite>/qNN.sql``."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from dipper.errors import DatasetError

QUERY_DIR = Path(__file__).resolve().parent / "queries"
SUITES = ("tpch", "tpcds")


def _check(suite: str) -> None:
    if suite not in SUITES:
        raise DatasetError(f"unknown benchmark {suite!r}; choose one of: {', '.join(SUITES)}")


def load_queries(suite: str) -> dict[str, str]:
    """``qNN`` -> Spark SQL text, sorted by name."""
    _check(suite)
    return {p.stem: p.read_text() for p in sorted((QUERY_DIR / suite).glob("q*.sql"))}


def unsupported(suite: str) -> dict[str, str]:
    """``qNN`` -> why Spark cannot run it."""
    _check(suite)
    return dict(tomllib.loads((QUERY_DIR / "unsupported.toml").read_text()).get(suite, {}))


def runnable_queries(suite: str) -> dict[str, str]:
    skip = unsupported(suite)
    return {name: sql for name, sql in load_queries(suite).items() if name not in skip}


def select_queries(suite: str, names: list[str] | None) -> dict[str, str]:
    """The named queries ("q1", "q01" and "1" all mean q01); all runnable ones when ``names`` is None."""
    queries = runnable_queries(suite)
    if names is None:
        return queries
    out = {}
    for raw in names:
        m = re.fullmatch(r"[qQ]?0*(\d+)", raw.strip())
        name = f"q{int(m.group(1)):02d}" if m else raw
        if name not in queries:
            why = unsupported(suite).get(name)
            raise DatasetError(f"{suite} has no runnable query {raw!r}" + (f" ({why})" if why else "") +
                               f"; valid: q01..q{len(load_queries(suite)):02d}")
        out[name] = queries[name]
    return out
