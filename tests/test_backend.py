"""The embedded backend: the Thrift Server answers pyhive and beeline (JDBC), and server.py registers the
warehouse on start."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.beeline import beeline_rows, run_beeline
from backend.server_process import log_file, running_pid, start_server, stop_server
from bench.suites import TPCH
from dipper.environment import free_port
from tests.conftest import Stack, own_env

pytestmark = pytest.mark.spark

QUERY = "SELECT n_name, r_name FROM nation JOIN region ON n_regionkey = r_regionkey WHERE r_name = 'ASIA' ORDER BY n_name"


def test_pyhive_queries_the_backend(stack: Stack) -> None:
    db = stack.database("tpch", "tuned")
    with stack.cursor(db) as cursor:
        cursor.execute(QUERY)
        rows = cursor.fetchall()
        assert [d[0] for d in cursor.description] == ["n_name", "r_name"]
    assert rows == [(n, "ASIA") for n in ("CHINA", "INDIA", "INDONESIA", "JAPAN", "VIETNAM")]
    with stack.cursor(db) as cursor:
        cursor.execute("SHOW TABLES")
        assert {r[1] for r in cursor.fetchall()} >= {t.name for t in TPCH.tables}


def test_beeline_queries_the_backend(stack: Stack) -> None:
    db = stack.database("tpch", "tuned")
    result = run_beeline(stack.java, stack.host, stack.port, QUERY, db)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = beeline_rows(result.stdout)
    assert rows[0] == ["n_name", "r_name"]
    assert rows[1:] == [[n, "ASIA"] for n in ("CHINA", "INDIA", "INDONESIA", "JAPAN", "VIETNAM")]


def write_config(stack: Stack, folder: Path, port: int, proxy_port: int, mode: str = "embedded",
                 own_data: bool = False) -> Path:
    """A configuration file for a second server over the test run's warehouse and statistics, or with
    ``own_data`` over empty ones of its own in ``folder`` (keys not given keep their defaults)."""
    p = stack.config.paths
    raw, warehouse, stats = (folder / "raw", folder / "warehouse", folder / "stats") if own_data else \
        (p.raw, p.warehouse, p.stats)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "dipper.toml"
    path.write_text(f"""
[paths]
raw = "{raw}"
warehouse = "{warehouse}"
stats = "{stats}"
logs = "{folder / 'logs'}"
metastore = "{folder / 'metastore'}"

[backend]
mode = "{mode}"
host = "127.0.0.1"
port = {port}
spark_master = "local[1]"
driver_memory = "1g"
shuffle_partitions = 2

[proxy]
port = {proxy_port}
metrics_port = 0
decision_log = "{folder / 'logs' / 'decisions.jsonl'}"
""")
    return path


def beeline_ok(stack: Stack, port: int, sql: str) -> list[list[str]]:
    """Rows of one statement run with beeline (JDBC) on ``port``, which must succeed."""
    result = run_beeline(stack.java, "127.0.0.1", port, sql)
    assert result.returncode == 0, result.stderr[-3000:]
    return beeline_rows(result.stdout)


@pytest.mark.deployment
def test_server_registers_the_warehouse_on_start(stack: Stack, tmp_path: Path) -> None:
    """A new server.py process, with an empty in-memory catalog, serves every table of the warehouse
    through its proxy; a second server.py in remote mode serves a proxy in front of it; SIGTERM stops both
    cleanly."""
    from dipper.config import load
    from pyhive import hive

    db = stack.database("tpch", "tuned")
    port, proxy_port, remote_proxy_port = free_port(), free_port(), free_port()
    config_path = write_config(stack, tmp_path / "embedded", port, proxy_port)
    config = load(config_path, environ={})
    remote_path = write_config(stack, tmp_path / "remote", port, remote_proxy_port, mode="remote")
    remote_config = load(remote_path, environ={})
    env = own_env()
    proc = start_server(config, config_path, env=env)
    remote = None
    try:
        assert running_pid(config) == proc.pid
        remote = start_server(remote_config, remote_path, env=env, timeout=60)
        for p in (proxy_port, remote_proxy_port, port):  # the proxies, and the backend itself
            with hive.connect(host="127.0.0.1", port=p, auth="NONE", username="t", database=db) as conn:
                cursor = conn.cursor()
                cursor.execute("SHOW TABLES")
                assert {r[1] for r in cursor.fetchall()} >= {t.name for t in TPCH.tables}
                cursor.execute("SELECT count(*) FROM orders")
                assert cursor.fetchall() == [(15000,)]
    finally:
        if remote is not None:
            stop_server(remote.pid)
        stop_server(proc.pid)
    assert remote is not None and remote.wait(timeout=60) == 0
    assert proc.wait(timeout=60) == 0
    assert running_pid(config) is None
    assert db in log_file(remote_config).read_text()  # remote mode checked the backend before serving
