"""The command lines around the proxy: ``server.py`` refusing to start over a running server of the same
checkout, and ``python -m rewriter explain`` naming the database a table was looked up in."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from backend.server_process import pid_file, start_server, stop_server
from dipper.config import REPO_ROOT, load
from dipper.environment import free_port
from tests.conftest import Stack, own_env
from tests.test_backend import write_config

pytestmark = pytest.mark.deployment

SQL = "SELECT count(*) FROM lineitem WHERE l_shipdate = DATE '1995-03-01'"


def explain(stats: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rewriter", "explain", *args], capture_output=True, text=True,
                          env=own_env(DIPPER_PATHS_STATS=str(stats)), cwd=REPO_ROOT, timeout=120)


@pytest.fixture
def store_with_lineitem(tmp_path: Path) -> Path:
    """A statistics store holding sales.lineitem (zone maps from Parquet footers: no Spark needed)."""
    from stats.footers import collect_footers
    from stats.store import StatsStore

    folder = tmp_path / "warehouse" / "sales" / "lineitem"
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"l_shipdate": pa.array([19000, 19001], pa.date32()), "l_quantity": [1, 2]}),
                   folder / "part-0.parquet")
    collect_footers(StatsStore(tmp_path / "stats"), "sales.lineitem", f"file:{folder}")
    return tmp_path / "stats"


def test_explain_without_database_uses_the_one_that_holds_the_table(store_with_lineitem: Path) -> None:
    """An unqualified name that only one database's statistics hold is explained there, and it says so; with
    two such databases it names both instead of picking one."""
    proc = explain(store_with_lineitem, SQL)
    assert proc.returncode == 0, proc.stderr
    assert "no statistics" not in proc.stdout and "1 files ruled out" in proc.stdout
    assert "unqualified names read in sales, the one database whose statistics hold lineitem" in proc.stderr
    found = explain(store_with_lineitem, "--database", "sales", SQL)
    assert found.returncode == 0 and "no statistics" not in found.stdout and not found.stderr.strip()

    from stats.footers import collect_footers
    from stats.store import StatsStore

    collect_footers(StatsStore(store_with_lineitem), "archive.lineitem",
                    f"file:{store_with_lineitem.parent / 'warehouse' / 'sales' / 'lineitem'}")
    both = explain(store_with_lineitem, SQL)
    assert both.returncode == 0, both.stderr
    assert ("no statistics for table lineitem in database default (no --database given: unqualified names are "
            "read in default); the statistics hold a table lineitem in: archive, sales (e.g. --database archive)") \
        in both.stdout


def test_explain_of_a_table_no_database_holds(store_with_lineitem: Path) -> None:
    proc = explain(store_with_lineitem, "--database", "tpch", "--json", "SELECT * FROM orders")
    assert proc.returncode == 0, proc.stderr
    assert '"refused": "no statistics"' in proc.stdout  # stdout stays JSON; the note goes to stderr
    assert "no statistics for table orders in database tpch, nor in any other database" in proc.stderr
    assert "python -m stats collect tpch.orders" in proc.stderr


@pytest.mark.spark
def test_a_second_server_refuses_to_start_and_leaves_the_pid_file(stack: Stack, tmp_path: Path) -> None:
    """Two servers of one checkout share paths.logs: the second one names the running pid and exits, and the
    first one's pid file is untouched (make stop still finds it)."""
    config_path = write_config(stack, tmp_path, stack.port, free_port(), mode="remote")
    config = load(config_path, environ={})
    first = start_server(config, config_path, env=own_env())
    try:
        assert pid_file(config).read_text().strip() == str(first.pid)
        second = subprocess.run([sys.executable, str(REPO_ROOT / "server.py"), "--config", str(config_path),
                                 "--port", str(free_port())], capture_output=True, text=True, env=own_env(),
                                stdin=subprocess.DEVNULL, timeout=120)
        assert second.returncode == 1
        assert f"a Dipper server is already running from this checkout (pid {first.pid}" in second.stderr
        assert pid_file(config).read_text().strip() == str(first.pid)
    finally:
        stop_server(first.pid)
    assert not pid_file(config).exists()  # the first one removes its own file when it stops
