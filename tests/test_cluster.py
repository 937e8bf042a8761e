"""Dipper in an existing deployment (issue 14): a Spark standalone cluster (master and one worker, started from
the pyspark wheel) and a metastore database in a real PostgreSQL server, shared by everything. The Thrift
Server runs on the cluster with that metastore, the statistics job runs through it, and a second Spark
application with the same metastore sees the tables users created through Dipper.

The cluster and the database start once for this module and keep everything tiny; PostgreSQL and its JDBC
driver come from Debian's packages (``make test-deps``)."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.server_process import start_server, stop_server
from dipper.config import REPO_ROOT, load
from dipper.environment import free_port, port_open
from tests.conftest import Stack, hive_cursor, own_env
from tests.test_backend import beeline_ok, write_config

pytestmark = [pytest.mark.spark, pytest.mark.deployment]

PG_JAR = Path("/usr/share/java/postgresql.jar")


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        pytest.fail(f"PostgreSQL's {name} is missing: run `make test-deps` (apt-get install postgresql)")
    return found[-1]


def _as_postgres(cmd: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run it as Debian's postgres user."""
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


@pytest.fixture(scope="module")
def postgres() -> Iterator[str]:
    """A PostgreSQL server of its own on a free port with an empty database ``metastore``: its JDBC URL."""
    if not PG_JAR.is_file():
        pytest.fail(f"the PostgreSQL JDBC driver is missing ({PG_JAR}): run `make test-deps`")
    home = Path(tempfile.mkdtemp(prefix="dipper-pg-"))  # not under pytest's 0700 folders: postgres must enter
    home.chmod(0o755)
    if os.geteuid() == 0:
        shutil.chown(home, "postgres", "postgres")
    port = free_port()
    data, socket_dir = home / "data", home
    subprocess.run(_as_postgres([_pg_bin("initdb"), "-D", str(data), "-A", "trust", "-U", "dipper"]),
                   check=True, capture_output=True, timeout=120)
    subprocess.run(_as_postgres([_pg_bin("pg_ctl"), "-D", str(data), "-l", str(home / "log"), "-w", "-o",
                                 f"-p {port} -k {socket_dir} -c listen_addresses=127.0.0.1", "start"]),
                   check=True, capture_output=True, timeout=120)
    try:
        subprocess.run(_as_postgres([_pg_bin("createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "dipper",
                                     "metastore"]), check=True, capture_output=True, timeout=60)
        yield f"jdbc:postgresql://127.0.0.1:{port}/metastore"
    finally:
        subprocess.run(_as_postgres([_pg_bin("pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
                       capture_output=True, timeout=120)
        shutil.rmtree(home, ignore_errors=True)


def _spark_class(*args: str, log: Path) -> subprocess.Popen[bytes]:
    import pyspark

    home = Path(pyspark.__file__).parent
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"}
    with open(log, "wb") as out:
        return subprocess.Popen([str(home / "bin" / "spark-class"), *args], stdout=out, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A standalone master and one worker (1 core, 2 GB) on this machine: the master URL."""
    folder = tmp_path_factory.mktemp("cluster")
    port, ui = free_port(), free_port()
    master = _spark_class("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                          "--webui-port", str(ui), log=folder / "master.log")
    worker = None
    try:
        _wait(lambda: port_open("127.0.0.1", port), 120, "the Spark master", folder / "master.log")
        worker = _spark_class("org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}", "--host", "127.0.0.1",
                              "--cores", "1", "--memory", "2g", "--webui-port", str(free_port()),
                              "--work-dir", str(folder / "work"), log=folder / "worker.log")
        _wait(lambda: _alive_workers(ui) >= 1, 120, "a Spark worker", folder / "worker.log")
        yield f"spark://127.0.0.1:{port}"
    finally:
        for proc in (worker, master):
            if proc is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, 15)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=30)


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as r:
            return int(json.load(r).get("aliveworkers", 0))
    except OSError:
        return 0


def _wait(ready, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not start within {timeout:.0f}s: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.5)


def test_a_cluster_with_a_shared_metastore(stack: Stack, postgres: str, spark_cluster: str, tmp_path: Path) -> None:
    folder = tmp_path / "deployment"
    backend_port, proxy_port = free_port(), free_port()
    config_path = write_config(stack, folder, backend_port, proxy_port, own_data=True)
    text = config_path.read_text().replace('spark_master = "local[1]"',
                                           f'spark_master = "{spark_cluster}"\nmetastore = "{postgres}"\n'
                                           f'metastore_user = "dipper"')
    config_path.write_text(text)
    config = load(config_path, environ={})
    env = own_env(SPARK_LOCAL_IP="127.0.0.1")
    table = "shared.events"
    query = f"SELECT count(*) FROM {table} WHERE id BETWEEN 20 AND 30"
    late = f"SELECT count(*) FROM {table} WHERE id BETWEEN 1000 AND 1005"

    def explain(sql: str) -> tuple:
        with hive_cursor(proxy_port) as cursor:
            cursor.execute(f"EXPLAIN SKIPPING {sql}")
            return {r[0]: r for r in cursor.fetchall()}[table]

    def beeline(sql: str) -> list[list[str]]:
        return beeline_ok(stack, proxy_port, sql)

    proc = start_server(config, config_path, env=env)
    try:
        beeline("CREATE DATABASE shared")
        beeline(f"CREATE TABLE {table} (id BIGINT, v STRING) USING parquet LOCATION '{folder / 'events'}'")
        for batch in range(3):
            beeline(f"INSERT INTO {table} SELECT id, 'x' FROM range({batch * 100}, {batch * 100 + 100})")
        with hive_cursor(backend_port) as cursor:  # the Thrift Server runs on the cluster, not locally
            cursor.execute("SET spark.master")
            assert cursor.fetchall()[0][1] == spark_cluster
        collected = subprocess.run([sys.executable, "-m", "stats", "--config", str(config_path), "collect",
                                    "--database", "shared"], capture_output=True, text=True, env=env, cwd=REPO_ROOT,
                                   timeout=300)
        assert collected.returncode == 0, collected.stderr[-3000:]
        with hive_cursor(proxy_port) as cursor:
            cursor.execute(f"EXPLAIN SKIPPING {query}")
            row = {r[0]: r for r in cursor.fetchall()}[table]
        assert row[2] >= 3 and 1 <= row[3] <= row[2] // 3, row  # ids 20-30: files of the first batch only
        assert beeline(query)[1] == ["11"]

        # More data: read at once, right, and described from footers within seconds without a refresh.
        beeline(f"INSERT INTO {table} SELECT id, 'y' FROM range(1000, 1010)")
        assert beeline(late)[1] == ["6"]
        deadline = time.monotonic() + 30
        while "without fresh statistics" in (covered := explain(late))[6]:
            assert time.monotonic() < deadline, covered
            time.sleep(0.5)
        new_files = covered[2] - row[2]
        assert new_files >= 1 and 1 <= covered[3] <= new_files, covered  # only the new batch's files hold 1000-1005
    finally:
        stop_server(proc.pid)
    assert proc.wait(timeout=60) == 0

    # A restart on the cluster: table, data and statistics (the footers' rows too) are all still there.
    proc = start_server(config, config_path, env=env)
    try:
        assert beeline(late)[1] == ["6"] and beeline(query)[1] == ["11"]
        again = explain(late)
        assert again[2:4] == covered[2:4] and "without fresh statistics" not in again[6], again
    finally:
        stop_server(proc.pid)
    assert proc.wait(timeout=60) == 0

    # Another Spark application with the same metastore database sees what users created through Dipper.
    probe = subprocess.run([sys.executable, "-c", (
        "import sys; from dipper.config import load; from backend.spark_session import spark_session; "
        f"s = spark_session(load({str(config_path)!r}, environ={{}}), 'probe', persistent_catalog=True); "
        f"print('ROWS', s.sql('SELECT count(*) FROM {table}').first()[0]); s.stop()")],
        capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300)
    assert "ROWS 310" in probe.stdout, probe.stderr[-3000:]
