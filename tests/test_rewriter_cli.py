"""``python -m rewriter explain`` end to end, as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import own_env

pytestmark = pytest.mark.deployment


def explain(tmp_path: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = own_env(DIPPER_PATHS_STATS=str(tmp_path / "stats"))
    return subprocess.run([sys.executable, "-m", "rewriter", "explain", *args], capture_output=True, text=True,
                          env=env, input=stdin, timeout=120)


def test_explain_without_statistics_sends_the_original(tmp_path: Path) -> None:
    sql = "SELECT count(*) FROM lineitem WHERE l_shipdate = DATE '1995-03-01'"
    proc = explain(tmp_path, "--database", "tpch", sql)
    assert proc.returncode == 0, proc.stderr
    assert "unchanged" in proc.stdout and sql in proc.stdout
    assert "tpch.lineitem: read whole (no statistics)" in proc.stdout
    as_json = explain(tmp_path, "--json", "-", stdin="SET x = 1")
    record = json.loads(as_json.stdout)
    assert record["changed"] is False and record["passthrough"] == "not a query (Set)"
