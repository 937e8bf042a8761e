"""The embedded backend: the Thrift Server answers pyhive and beeline (JDBC), and server.py registers the
warehouse on start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from backend.beeline import beeline_rows, run_beeline
from backend.server_process import running_pid, start_server, stop_server
from bench.suites import TPCH
from dipper.config import REPO_ROOT
from dipper.environment import free_port
from tests.conftest import Stack

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


def write_config(stack: Stack, folder: Path, port: int, mode: str = "embedded") -> Path:
    """A configuration file for a second server over the test run's warehouse."""
    p = stack.config.paths
    path = folder / "dipper.toml"
    path.write_text(f"""
[paths]
raw = "{p.raw}"
warehouse = "{p.warehouse}"
stats = "{p.stats}"
logs = "{folder / 'logs'}"

[backend]
mode = "{mode}"
host = "127.0.0.1"
port = {port}
spark_master = "local[1]"
driver_memory = "1g"
shuffle_partitions = 2
""")
    return path


def test_server_registers_the_warehouse_on_start(stack: Stack, tmp_path: Path) -> None:
    """A new server.py process, with an empty in-memory catalog, serves every table of the warehouse; its
    remote mode reaches it; SIGTERM stops it cleanly."""
    from dipper.config import load
    from pyhive import hive

    db = stack.database("tpch", "tuned")
    port = free_port()
    config_path = write_config(stack, tmp_path, port)
    config = load(config_path, environ={})
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIPPER_")}
    proc = start_server(config, config_path, env=env)
    try:
        assert running_pid(config) == proc.pid
        with hive.connect(host="127.0.0.1", port=port, auth="NONE", username="t", database=db) as conn:
            cursor = conn.cursor()
            cursor.execute("SHOW TABLES")
            assert {r[1] for r in cursor.fetchall()} >= {t.name for t in TPCH.tables}
            cursor.execute("SELECT count(*) FROM orders")
            assert cursor.fetchall() == [(15000,)]
        remote = subprocess.run([sys.executable, str(REPO_ROOT / "server.py"), "--config", str(config_path),
                                 "--mode", "remote"], capture_output=True, text=True, env=env, timeout=120)
        assert remote.returncode == 0, remote.stderr
        assert db in remote.stderr
    finally:
        stop_server(proc.pid)
    assert proc.wait(timeout=60) == 0
    assert running_pid(config) is None
