"""The embedded server when its Spark JVM dies (issue 62): it says so in its log, stops the proxy, removes its pid
file and exits non-zero, so that a supervisor sees it and a restart is not refused, instead of serving on with
every client told the backend is not reachable."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from backend.server_process import log_file, pid_file, start_server
from dipper.config import load
from dipper.environment import free_port, port_open
from tests.conftest import hive_cursor, own_env

pytestmark = [pytest.mark.spark, pytest.mark.deployment]


def write_embedded_config(folder: Path) -> Path:
    """An embedded server over an empty warehouse of its own, on free ports."""
    path = folder / "dipper.toml"
    path.write_text(f"""
[paths]
raw = "{folder / 'raw'}"
warehouse = "{folder / 'warehouse'}"
stats = "{folder / 'stats'}"
logs = "{folder / 'logs'}"
metastore = "{folder / 'metastore'}"

[backend]
port = {free_port()}
spark_master = "local[1]"
driver_memory = "1g"
shuffle_partitions = 2

[proxy]
port = {free_port()}
decision_log = "{folder / 'logs' / 'decisions.jsonl'}"
""")
    return path


def child_jvm(pid: int) -> int:
    """The pid of the java process ``pid`` started (PySpark's gateway)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm, fields = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        if comm == "java" and int(fields[1]) == pid:
            return int(entry.name)
    raise AssertionError(f"no java child process of {pid}")


def test_the_server_exits_when_its_jvm_is_killed(tmp_path: Path) -> None:
    config_path = write_embedded_config(tmp_path)
    config = load(config_path, environ={})
    proc = start_server(config, config_path, env=own_env())
    jvm = None
    try:
        with hive_cursor(config.proxy.port) as cursor:
            cursor.execute("SELECT 1")
            assert cursor.fetchall() == [(1,)]
        jvm = child_jvm(proc.pid)
        os.kill(jvm, signal.SIGKILL)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"server.py still runs 30 s after its JVM was killed; log: "
                        f"{log_file(config).read_text()[-2000:]}")
        assert code != 0
        assert not pid_file(config).exists()
        assert not port_open("127.0.0.1", config.proxy.port)
        text = log_file(config).read_text()
        assert f"the embedded Spark JVM (pid {jvm}) was killed by SIGKILL" in text
        assert "Stopping Dipper so that it can be started again" in text
        assert "Dipper stopped" in text.splitlines()[-1]  # the one-line error the process exits with
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if jvm is not None:
            try:
                os.kill(jvm, signal.SIGKILL)
            except ProcessLookupError:
                pass
