"""A user's own data through Dipper, in the embedded default (issue 14), with real clients and a real restart:
beeline creates a database and a partitioned external table through the proxy and fills it in batches, the
statistics job (``python -m stats collect``, run while the server is up, so through its Thrift Server) covers
it, ``EXPLAIN SKIPPING`` shows files pruned, a later batch's new files are read (and the answer is right)
and, without a refresh, described from their footers within seconds so the table prunes again, after a restart of the server the table, its data and its statistics are all still there, and a DROP TABLE
through Dipper takes the table's statistics with it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from backend.server_process import start_server, stop_server
from dipper.config import REPO_ROOT, load
from dipper.environment import free_port
from tests.conftest import Stack, hive_cursor, own_env
from tests.test_backend import beeline_ok, write_config

pytestmark = [pytest.mark.spark, pytest.mark.deployment]


def stats_cli(config_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stats", "--config", str(config_path), *args], capture_output=True,
                          text=True, env=own_env(), cwd=REPO_ROOT, timeout=300)


def explain(port: int, sql: str) -> dict[str, list]:
    with hive_cursor(port) as cursor:
        cursor.execute(f"EXPLAIN SKIPPING {sql}")
        return {r[0]: list(r) for r in cursor.fetchall()}


def test_own_table_is_skipped_and_survives_a_restart(stack: Stack, tmp_path: Path) -> None:
    folder = tmp_path / "dipper home"
    folder.mkdir()
    backend_port, proxy_port = free_port(), free_port()
    config_path = write_config(stack, folder, backend_port, proxy_port, own_data=True)
    config = load(config_path, environ={})
    env = own_env()
    location = folder / "external data" / "events"
    table = "sales.events"
    query = f"SELECT count(*), sum(amount) FROM {table} WHERE id BETWEEN 120 AND 180"

    def beeline(sql: str) -> list[list[str]]:
        return beeline_ok(stack, proxy_port, sql)

    proc = start_server(config, config_path, env=env)
    try:
        beeline("CREATE DATABASE sales")
        beeline(f"CREATE TABLE {table} (id BIGINT, amount DOUBLE, region STRING, day DATE) USING parquet "
                f"PARTITIONED BY (day) LOCATION '{location}'")
        for batch in range(4):  # ids 0-99, 100-199, ...: each batch's files hold one range of ids
            beeline(f"INSERT INTO {table} SELECT id, id * 0.5, concat('r', id % 3), DATE'2025-01-01' + CAST(id % 2 AS INT) "
                    f"FROM range({batch * 100}, {batch * 100 + 100})")
        collected = stats_cli(config_path, "collect", "events")  # unqualified: one database holds it
        assert collected.returncode == 0, collected.stderr[-3000:]
        assert "statistics of 1 tables" in collected.stdout
        assert "[1/1] sales.events:" in collected.stderr and "MB done at" in collected.stderr  # progress
        before = explain(proxy_port, query)[table]
        files_total, files_kept = before[2], before[3]
        assert files_total >= 8 and files_kept <= 4, before[6]  # two batches' files can hold ids 120-180
        assert beeline(query)[1] == ["61", str(sum(i * 0.5 for i in range(120, 181)))]

        # A new batch holding matching ids: its files are unknown to the statistics, so they are read.
        beeline(f"INSERT INTO {table} SELECT id, 1.0, 'r9', DATE'2025-01-05' FROM range(150, 160)")
        time.sleep(config.proxy.listing_ttl_seconds + 0.5)  # EXPLAIN may show a listing this old (the query not)
        after = explain(proxy_port, query)[table]
        assert after[2] > files_total and "files without fresh statistics are read" in after[6], after
        assert beeline(query)[1] == ["71", str(sum(i * 0.5 for i in range(120, 181)) + 10.0)]

        # Without any refresh, the server describes the new files from their footers within seconds: the
        # table prunes again, the new batch's file among those kept.
        deadline = time.monotonic() + 30
        while "without fresh statistics" in (covered := explain(proxy_port, query)[table])[6]:
            assert time.monotonic() < deadline, covered
            time.sleep(0.5)
        assert covered[2] == after[2] and covered[3] == files_kept + 1, covered
        assert beeline(query)[1] == ["71", str(sum(i * 0.5 for i in range(120, 181)) + 10.0)]
    finally:
        stop_server(proc.pid)
    assert proc.wait(timeout=60) == 0

    proc = start_server(config, config_path, env=env)
    try:
        assert ["events"] in [row[1:2] for row in beeline("SHOW TABLES IN sales")]
        assert beeline(query)[1] == ["71", str(sum(i * 0.5 for i in range(120, 181)) + 10.0)]
        again = explain(proxy_port, query)[table]
        assert again[3] < again[2], again  # the statistics are still there and still prune
        shown = stats_cli(config_path, "show", "events")
        assert shown.returncode == 0 and shown.stdout.startswith(table), shown.stderr[-2000:]

        # The table dropped and made again elsewhere through Dipper: the old statistics (of files that are no
        # longer the table's, and still on disk) go with the DROP, so they can never speak for the new table.
        beeline(f"DROP TABLE {table}")
        beeline(f"CREATE TABLE {table} (id BIGINT, amount DOUBLE, region STRING, day DATE) USING parquet "
                f"PARTITIONED BY (day) LOCATION '{folder / 'moved'}'")
        beeline(f"INSERT INTO {table} SELECT id, 2.0, 'r1', DATE'2025-02-01' FROM range(150, 170)")
        gone = stats_cli(config_path, "show", table)
        assert gone.returncode != 0 and f"no statistics for {table}" in gone.stderr, gone.stderr[-2000:]
        assert not explain(proxy_port, query)["(all)"][6].startswith("rewritten")  # nothing speaks for it
        assert beeline(query)[1] == ["20", "40.0"]
    finally:
        stop_server(proc.pid)
    assert proc.wait(timeout=60) == 0
