"""The embedded backend closes operations their clients leave open (issue 62, the soak's finding): Spark keeps
an open operation's whole query, broadcast relations included, in the driver's memory, and clients that never
close their cursors filled 2.4 GB in ten minutes (docs/results/proxy.md). A real ``server.py`` with a timeout of a
few seconds, through a real client."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from backend.server_process import start_server, stop_server
from backend.spark_session import idle_operation_settings
from dipper.config import load
from tests.conftest import hive_cursor, own_env
from tests.test_jvm_death import write_embedded_config

pytestmark = pytest.mark.spark


def test_the_checker_settings() -> None:
    assert idle_operation_settings(0) == {}
    assert idle_operation_settings(3600) == {"spark.hive.server2.idle.operation.timeout": "3600s",
                                             "spark.hive.server2.session.check.interval": "60s"}
    assert idle_operation_settings(4)["spark.hive.server2.session.check.interval"] == "3s"  # Hive's minimum


@pytest.mark.deployment
def test_a_finished_operation_left_idle_is_closed(tmp_path: Path) -> None:
    config_path = write_embedded_config(tmp_path)
    config_path.write_text(config_path.read_text().replace('shuffle_partitions = 2',
                                                           'shuffle_partitions = 2\nidle_operation_timeout_seconds = 4'))
    config = load(config_path, environ={})
    assert config.backend.idle_operation_timeout_seconds == 4
    proc = start_server(config, config_path, env=own_env())
    try:
        from pyhive import hive

        with hive_cursor(config.proxy.port) as fetched_at_once:
            conn = hive.connect(host="127.0.0.1", port=config.proxy.port, auth="NONE", username="alice")
            left_open = conn.cursor()
            left_open.execute("SELECT id FROM range(5)")
            fetched_at_once.execute("SELECT 1")
            assert fetched_at_once.fetchall() == [(1,)]
            time.sleep(12)  # the timeout (4 s) and Hive's check interval (3 s), with room
            with pytest.raises(Exception, match="Invalid OperationHandle"):
                left_open.fetchall()  # Spark closed it: its query no longer holds the driver's memory
            # The fetched one was idle too, and closed: pyhive closes it before the cursor's next statement, and the
            # proxy answers that close as done (Spark's "Invalid OperationHandle" would fail the statement).
            fetched_at_once.execute("SELECT 2")
            assert fetched_at_once.fetchall() == [(2,)]
            conn.close()
    finally:
        stop_server(proc.pid)
