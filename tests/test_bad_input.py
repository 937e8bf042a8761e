"""Bad input to the command-line entry points: one clear line on stderr, a non-zero exit, nothing written."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from dipper.config import REPO_ROOT
from tests.conftest import own_env

pytestmark = pytest.mark.deployment


def run(args: list[str], tmp_path: Path, **env_changes: str) -> subprocess.CompletedProcess[str]:
    env = own_env(DIPPER_PATHS_RAW=str(tmp_path / "raw"), DIPPER_PATHS_WAREHOUSE=str(tmp_path / "warehouse"),
                  DIPPER_PATHS_STATS=str(tmp_path / "stats"), DIPPER_PATHS_LOGS=str(tmp_path / "logs"),
                  DIPPER_PATHS_METASTORE=str(tmp_path / "metastore"))
    env.update(env_changes)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.parametrize("args, message", [
    (["--suite", "tpcx"], "unknown benchmark 'tpcx'; choose one of: tpch, tpcds"),
    (["--suite", "tpch", "--layout", "sorted"], "unknown layout 'sorted'"),
    (["--suite", "tpch", "--layout", "random:x"], "unknown layout 'random:x'"),
    (["--suite", "tpch", "--layout", "partitioned"], "layout 'partitioned' is defined for tpcds only"),
    (["--suite", "tpch", "--sf", "0"], "scale factor must be a positive number"),
    (["--suite", "tpch", "--sf", "-1"], "scale factor must be a positive number"),
    (["--suite", "tpch", "--sf", "nan"], "scale factor must be a positive number"),
    (["--suite", "tpch", "--files", "0"], "--files must be at least 1"),
    (["--suite", "tpch", "--tables", "lineitem,widgets"], "tpch has no table 'widgets'"),
])
def test_generate_rejects_bad_requests(args: list[str], message: str, tmp_path: Path) -> None:
    line = one_error_line(run(["-m", "bench", "generate", *args], tmp_path))
    assert message in line
    assert not (tmp_path / "warehouse").exists() and not (tmp_path / "raw").exists()


# The two entry points that start Spark; each checks Java and the warehouse before it does.
GENERATE = ["-m", "bench", "generate", "--suite", "tpch", "--sf", "0.01"]
SERVER = [str(REPO_ROOT / "server.py")]
STARTING = [pytest.param(GENERATE, id="bench-generate"), pytest.param(SERVER, id="server.py")]


@pytest.mark.parametrize("args", STARTING)
def test_java_missing(args: list[str], tmp_path: Path) -> None:
    line = one_error_line(run(args, tmp_path, PATH=str(tmp_path / "empty-bin"), JAVA_HOME=""))
    assert "Java 17+ is required" in line and "apt-get install" in line


def test_make_says_java_is_missing() -> None:
    make = subprocess.run(["make", "--no-print-directory", "-C", str(REPO_ROOT), "java-check", "JAVA_HOME=/nonexistent"],
                          capture_output=True, text=True)
    assert make.returncode != 0
    assert "Java 17+ is required" in make.stderr


@pytest.mark.spark
def test_port_already_in_use(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        line = one_error_line(run([str(REPO_ROOT / "server.py"), "--port", str(port)], tmp_path))
    assert f"127.0.0.1:{port} is already in use" in line


@pytest.mark.spark
@pytest.mark.parametrize("args", STARTING)
def test_warehouse_not_writable(args: list[str], tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    line = one_error_line(run(args, tmp_path, DIPPER_PATHS_WAREHOUSE=str(blocker / "warehouse")))
    assert "warehouse directory" in line and "is not writable" in line


def test_bad_configuration(tmp_path: Path) -> None:
    line = one_error_line(run([str(REPO_ROOT / "server.py")], tmp_path, DIPPER_BACKEND_PORT="many"))
    assert "backend.port must be an integer" in line


@pytest.mark.spark
def test_demo_without_data_says_how_to_make_it(tmp_path: Path) -> None:
    line = one_error_line(run(["-m", "bench", "demo", "--sf", "0.01"], tmp_path))
    assert "python -m bench generate --suite tpch --sf 0.01 --layout tuned" in line


@pytest.mark.parametrize("args", [pytest.param(["-m", "bench", "generate", "--help"], id="bench-generate"),
                                  pytest.param([*SERVER, "--help"], id="server.py")])
def test_help_is_helpful(args: list[str], tmp_path: Path) -> None:
    proc = run(args, tmp_path)
    assert proc.returncode == 0
    assert "DIPPER_" in proc.stdout or "--layout" in proc.stdout


@pytest.mark.parametrize("value, message", [
    ("0", "a minimum block must be a finite number of MB above 0, not 0"),
    ("customer=-1", "a minimum block must be a finite number of MB above 0, not -1"),
    ("inf", "a minimum block must be a finite number of MB above 0, not inf"),
    ("customer=big", "'customer=big' is not [TABLE=]MB, such as 0.25 or customer=0.25"),
    ("nan", "a minimum block must be a finite number of MB above 0, not nan"),
])
def test_layout_effect_rejects_bad_block_sizes(value: str, message: str, tmp_path: Path) -> None:
    proc = run(["-m", "bench", "layout-effect", "--source", "tpcds_sf1_tuned", "--table", "customer",
                "--min-block-mb", value], tmp_path)
    assert proc.returncode == 2 and message in proc.stderr.splitlines()[-1]


@pytest.mark.parametrize("value, message", [
    ("ss_sold_date_sk:8", "is not TABLE=COLUMN:N"),
    ("store_sales=ss_sold_date_sk", "takes COLUMN:N (ss_sold_date_sk:16), or SENDER.COLUMN:N@FOREIGN=KEY"),
    ("store_sales=ss_sold_date_sk:1", "takes COLUMN:N (ss_sold_date_sk:16), or SENDER.COLUMN:N@FOREIGN=KEY"),
    ("store_sales=ss_sold_date_sk:5000", "takes COLUMN:N (ss_sold_date_sk:16), or SENDER.COLUMN:N@FOREIGN=KEY"),
])
def test_layout_effect_rejects_bad_lead_ranges(value: str, message: str, tmp_path: Path) -> None:
    proc = run(["-m", "bench", "layout-effect", "--source", "tpcds_sf1_tuned", "--table", "store_sales",
                "--lead-ranges", value], tmp_path)
    assert proc.returncode == 2 and message in proc.stderr.splitlines()[-1]


@pytest.mark.parametrize("command", [["-m", "bench", "layout-effect", "--source", "tpcds_sf1_tuned", "--table",
                                      "store_sales"], ["-m", "layout", "plan", "db.t", "--workload", "w.sql"]])
def test_an_unknown_weighing_is_a_usage_error(command: list[str], tmp_path: Path) -> None:
    proc = run([*command, "--weigh", "rows"], tmp_path)
    assert proc.returncode == 2 and "--weigh: invalid choice: 'rows'" in \
        proc.stderr.splitlines()[-1], proc.stderr


@pytest.mark.parametrize("value, message", [
    ("-1", "a file's cost in rows must be 0 (keep every block) or a positive number, not -1"),
    ("inf", "a file's cost in rows must be 0 (keep every block) or a positive number, not inf"),
    ("nan", "a file's cost in rows must be 0 (keep every block) or a positive number, not nan"),
    ("many", "'many' is not a number of rows"),
])
@pytest.mark.parametrize("command", [["-m", "bench", "layout-effect", "--source", "tpcds_sf1_tuned", "--table",
                                      "store_sales"], ["-m", "layout", "what-if", "db.t", "--workload", "w.sql"]])
def test_a_bad_file_cost_is_a_usage_error(command: list[str], value: str, message: str, tmp_path: Path) -> None:
    proc = run([*command, f"--file-cost-rows={value}"], tmp_path)
    assert proc.returncode == 2 and f"--file-cost-rows: {message}" in proc.stderr.splitlines()[-1], proc.stderr


def test_layout_effect_lays_out_no_copy_over_its_source(tmp_path: Path) -> None:
    line = one_error_line(run(["-m", "bench", "layout-effect", "--source", "tpcds_sf1_tuned", "--table", "item",
                               "--target", "TPCDS_sf1_tuned"], tmp_path))
    assert "--target tpcds_sf1_tuned is the source dataset" in line
    assert not (tmp_path / "warehouse").exists()


def test_layout_effect_lead_ranges_of_a_table_it_does_not_lay_out(tmp_path: Path) -> None:
    line = one_error_line(run(["-m", "bench", "layout-effect", "--source", "tpcds_sf1_tuned", "--table", "item",
                               "--lead-ranges", "store_sales=ss_sold_date_sk:8"], tmp_path))
    assert "--lead-ranges names store_sales, which no --table lays out" in line
    assert not (tmp_path / "warehouse").exists()


def test_layout_effect_refuses_a_column_as_two_levels_of_one_table(tmp_path: Path) -> None:
    line = one_error_line(run(["-m", "bench", "layout-effect", "--source", "tpcds_sf1_tuned", "--table", "web_sales",
                               "--lead-ranges", "web_sales=ws_sold_date_sk:13", "--lead-ranges",
                               "web_sales=ws_sold_date_sk:4"], tmp_path))
    assert "--lead-ranges names ws_sold_date_sk twice" in line
    assert not (tmp_path / "warehouse").exists()


def test_layout_effect_block_size_of_a_table_it_does_not_lay_out(tmp_path: Path) -> None:
    line = one_error_line(run(["-m", "bench", "layout-effect", "--source", "tpcds_sf1_tuned", "--table", "item",
                               "--min-block-mb", "0.5", "--min-block-mb", "customer=0.25"], tmp_path))
    assert "--min-block-mb names customer, which no --table lays out" in line
    assert not (tmp_path / "warehouse").exists()


@pytest.mark.parametrize("args, message", [
    (["--merge-seed", "1"], "--merge-seed 1 is the training or the test seed: held-out instances need a seed of"),
    (["--merge-seed", "5", "--test-seed", "5"], "--merge-seed 5 is the training or the test seed"),
    (["--merge-seed", "3", "--file-cost-rows", "0"], "--merge-seed judges the merge, and --file-cost-rows 0 merges "
                                                     "nothing"),
])
def test_layout_effect_held_out_instances_need_their_own_seed_and_a_merge(args: list[str], message: str,
                                                                          tmp_path: Path) -> None:
    line = one_error_line(run(["-m", "bench", "layout-effect", "--source", "tpcds_sf1_tuned", "--table", "item",
                               *args], tmp_path))
    assert message in line, line
    assert not (tmp_path / "warehouse").exists()
