"""The statistics job's commit and the scheduled refresh under faults that real Spark does not produce on
demand: a scan that fails for one table, and a DROP TABLE through the proxy (its statistics forgotten) while a
job runs. Real Parquet files and a real store; Spark's part (describe and scan) is replaced by a stand-in that
can fail. The refresh against the real Thrift Server is in test_statistics_upkeep.py."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import stats.collect as collector
from dipper.errors import BackendError, StatsError
from stats.collect import TableDescription, _empty_row, collect
from stats.freshness import Lister, list_files
from stats.loader import StatsLoader
from stats.store import StatsStore
from stats.upkeep import ScheduledRefresh
from tests.proxy_support import wait_for


@pytest.fixture
def backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """Tables db.a and db.b with one file each; ``failing`` names tables whose scan fails, ``during`` runs a
    callable in the middle of a table's scan."""
    state: dict = {"locations": {}, "failing": set(), "during": {}}
    for name in ("a", "b"):
        folder = tmp_path / "warehouse" / name
        folder.mkdir(parents=True)
        pq.write_table(pa.table({"id": [1]}), folder / "f0.parquet")
        state["locations"][f"db.{name}"] = f"file:{folder}"

    def describe(run, table):
        if table not in state["locations"]:
            raise StatsError(f"unknown table {table}")
        return TableDescription(table, state["locations"][table], "parquet", (), {"id": "bigint"})

    def scan(run, req):
        if req.table in state["failing"]:
            raise BackendError(f"the scan of {req.table} failed")
        if req.table in state["during"]:
            state["during"].pop(req.table)()
        wanted = {f.path for f in req.files}
        return [_empty_row(f, req.kinds) | {"rows": 1} for f in list_files(state["locations"][req.table])
                if req.whole_table or f.path in wanted]

    monkeypatch.setattr(collector, "describe_table", describe)
    monkeypatch.setattr(collector, "_check_files_inside", lambda run, table, location: None)
    monkeypatch.setattr(collector, "scan", scan)
    return state


def add_file(backend: dict, table: str, name: str) -> None:
    pq.write_table(pa.table({"id": [2]}), backend["locations"][table].removeprefix("file:") + f"/{name}.parquet")


def test_statistics_dropped_during_a_job_stay_dropped(backend: dict, tmp_path: Path) -> None:
    store = StatsStore(tmp_path / "stats")
    collect(lambda sql: [], store, ["db.a", "db.b"])
    loader = StatsLoader(store, Lister(0))
    add_file(backend, "db.a", "f1")
    add_file(backend, "db.b", "f1")
    backend["during"]["db.b"] = lambda: loader.forget(["db.a"])  # DROP TABLE db.a through the proxy
    done = collect(lambda sql: [], store, ["db.a", "db.b"], None, None, refresh=True)
    assert done == ["db.b"]
    assert store.snapshot().entry("db.a") is None and store.snapshot().entry("db.b").files == 2


def test_a_table_whose_refresh_fails_holds_no_other_back(backend: dict, tmp_path: Path) -> None:
    store = StatsStore(tmp_path / "stats")
    collect(lambda sql: [], store, ["db.a", "db.b"])
    add_file(backend, "db.a", "f1")
    add_file(backend, "db.b", "f1")
    backend["failing"].add("db.a")
    refresh = ScheduledRefresh(store, lambda: contextlib.nullcontext(lambda sql: []), interval=0.2)
    try:
        refresh.notice("db.a")
        refresh.notice("db.b")
        refresh.notice("db.gone")  # no statistics: nothing to refresh, and not kept
        wait_for(lambda: refresh.runs >= 1, "a refresh")
        assert store.snapshot().entry("db.b").files == 2
        assert store.snapshot().entry("db.a").files == 1
        assert refresh.due() == ["db.a"]  # failed: tried again next time
        backend["failing"].clear()
        wait_for(lambda: store.snapshot().entry("db.a").files == 2, "the failed table refreshed next time")
    finally:
        refresh.stop()
