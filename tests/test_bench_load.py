"""``bench proxy`` and ``bench soak`` (issue 62): their command lines, summaries and report plumbing without
Spark, and one tiny ``bench proxy`` run against the shared test stack. Timings are reported, never asserted."""

from __future__ import annotations

import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

from bench.__main__ import load_options, parse_args
from bench.latency import Summary, percentile
from bench.proxy_load import LoadOptions, Result, heavy_statement, read_csv, skip_statements, summaries, write_csv
from bench.run_record import append_section
from bench.soak import SoakOptions
from bench.stack_readings import parse_histogram
from dipper.errors import DipperError
from tests.conftest import Stack

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(("values", "q", "expected"), [
    ([5.0], 0.5, 5.0),
    ([1.0, 2.0, 3.0, 4.0], 0.5, 2.0),  # nearest rank: the 2nd of 4, never an interpolated 2.5
    ([float(i) for i in range(1, 21)], 0.95, 19.0),
    ([float(i) for i in range(1, 101)], 0.95, 95.0),
    ([3.0, 1.0, 2.0], 1.0, 3.0),
])
def test_percentile_is_the_nearest_rank(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == expected


def test_percentile_of_nothing_is_nan_and_a_bad_quantile_is_refused() -> None:
    assert math.isnan(percentile([], 0.5))
    with pytest.raises(ValueError, match="a quantile is in"):
        percentile([1.0], 0.0)


def test_a_summary_counts_errors_apart_from_latencies() -> None:
    s = Summary.of([10.0, 30.0, 20.0], errors=2)
    assert (s.count, s.errors, s.p50, s.p95, s.max, s.mean) == (5, 2, 20.0, 30.0, 30.0, 20.0)
    assert s.cells() == "5 | 2 | 20.0 | 30.0 | 30.0"
    assert Summary.of([], errors=1).cells() == "1 | 1 | - | - | -"


def test_the_command_with_no_arguments_is_the_issue_owners_run() -> None:
    opts = load_options(parse_args(["proxy"]))
    assert (opts.clients, opts.queries, opts.database, opts.workers) == (32, 20, "tpch_sf1_tuned", "threads")
    assert opts.proxy_port is None and opts.output == Path("docs/results/proxy.md")
    assert opts.command() == "python -m bench proxy"
    small = load_options(parse_args(["proxy", "--clients", "2", "--queries", "2", "--workers", "processes",
                                     "--proxy-port", "1", "--backend-port", "2"]))
    assert (small.clients, small.queries, small.workers, small.proxy_port, small.backend_port) == (2, 2, "processes", 1, 2)
    assert small.command() == "python -m bench proxy --clients 2 --queries 2 --workers processes"
    soak = parse_args(["soak", "--minutes", "10"])
    assert (soak.minutes, soak.every, soak.in_flight, soak.probe) == (10.0, 5.0, 2, "q03")
    assert parse_args(["proxy-overhead"]).rows == 1_000_000  # the one-client measurement keeps its own name


@pytest.mark.parametrize(("changes", "message"), [
    ({"clients": 0}, "--clients must be at least 1"),
    ({"queries": 0}, "--queries must be at least 1"),
    ({"heavy_clients": -1}, "--heavy-clients and --warmup must be 0 or more"),
    ({"probe_seconds": math.inf}, "--probe-seconds must be a finite number"),
    ({"workers": "fibers"}, "--workers is one of threads, processes"),
])
def test_bad_load_options_are_one_clear_error(changes: dict, message: str) -> None:
    with pytest.raises(DipperError, match=message):
        LoadOptions(**changes)


@pytest.mark.parametrize(("changes", "message"), [
    ({"minutes": 0}, "--minutes must be"), ({"in_flight": 0}, "--in-flight must be at least 1"),
    ({"every": -1}, "--every must be above 0"),
])
def test_bad_soak_options_are_one_clear_error(changes: dict, message: str) -> None:
    with pytest.raises(DipperError, match=message):
        SoakOptions(**changes)


def test_statements_are_seeded_and_heavy_ones_are_long() -> None:
    assert skip_statements(random.Random(3), 4) == skip_statements(random.Random(3), 4)
    kind, sql = skip_statements(random.Random(3), 1)[0]
    assert kind == "skip" and "l_shipdate BETWEEN DATE '" in sql
    heavy = heavy_statement(random.Random(3), 3000)
    assert heavy.count(",") == 2999 and heavy.startswith("SELECT count(*) FROM partsupp WHERE ps_partkey IN (")


def test_results_round_trip_through_the_csv_and_summarise_per_phase_and_path(tmp_path: Path) -> None:
    results = [Result("skip", "direct", "c0", "skip", 0.0, 100.0, 1, ""),
               Result("skip", "direct", "c0", "skip", 0.1, 300.0, 1, ""),
               Result("skip", "proxy", "c1", "skip", 0.0, 120.0, 1, ""),
               Result("skip", "proxy", "c1", "skip", 0.2, 0.0, 0, "connect: refused")]
    write_csv(tmp_path / "r.csv", results)
    assert read_csv(tmp_path / "r.csv") == results
    s = summaries(results)
    assert (s["skip", "direct"].count, s["skip", "direct"].p50, s["skip", "direct"].max) == (2, 100.0, 300.0)
    assert (s["skip", "proxy"].count, s["skip", "proxy"].errors, s["skip", "proxy"].p95) == (2, 1, 120.0)


def test_a_section_is_added_once_and_replaced_when_written_again(tmp_path: Path) -> None:
    doc = tmp_path / "proxy.md"
    doc.write_text("# Proxy measurements\n\n## Latency\n\nold numbers\n")
    append_section(doc, "Under load, 2026-12-07 19:00 UTC", "first")
    append_section(doc, "Soak, 2026-12-07 19:30 UTC", "soaked")
    append_section(doc, "Under load, 2026-12-07 19:00 UTC", "second")
    text = doc.read_text()
    assert "old numbers" in text and "soaked" in text and "second" in text and "first" not in text
    assert text.index("## Latency") < text.index("## Under load") < text.index("## Soak")


HISTOGRAM = """ num     #instances         #bytes  class name (module)
-------------------------------------------------------
   1:        120000       52428800  [B (java.base@17.0.15)
   2:            12            960  org.apache.hive.service.cli.session.HiveSessionImpl
   3:             3            240  org.apache.hive.service.cli.session.HiveSessionImplwithUGI
   4:             7            560  org.apache.spark.sql.hive.thriftserver.SparkExecuteStatementOperation
   5:           200          16000  org.apache.spark.sql.execution.ui.SQLExecutionUIData
Total        120222      52446560
"""


def test_the_class_histogram_counts_what_the_hypotheses_name() -> None:
    h = parse_histogram(HISTOGRAM, 1.5)
    assert h.counts["hive_sessions"] == 12  # HiveSessionImplwithUGI's lower-case w: not the class the regex names
    assert h.counts["operations"] == 7 and h.counts["sql_ui_executions"] == 200
    assert h.top[0][0] == "[B" and h.live_mb == pytest.approx(52446560 / 2**20) and h.seconds == 1.5


@pytest.mark.deployment
def test_help_names_what_each_command_needs() -> None:
    out = subprocess.run([sys.executable, "-m", "bench", "proxy", "--help"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert "tpch_sf1_tuned" in out and "--proxy-port" in out and "--workers" in out
    soak = subprocess.run([sys.executable, "-m", "bench", "soak", "--help"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout
    assert "--minutes" in soak and "jcmd" in soak


@pytest.mark.deployment
@pytest.mark.spark
def test_a_tiny_load_run_against_the_shared_stack(stack: Stack, tmp_path: Path) -> None:
    """2 clients x 2 statements against the test stack's Thrift Server, through a proxy in front of it: the
    command's plumbing end to end (CSV, report section), never its timings."""
    from backend.server_process import start_server, stop_server
    from bench.proxy_bench import proxy_only_config
    from bench.proxy_load import measure

    database = stack.database("tpch", "tuned")
    stack.stats_store("tpch", "tuned")
    proxy_config, path = proxy_only_config(stack.config, tmp_path)
    proc = start_server(proxy_config, path, args=("--mode", "remote"), timeout=60)
    try:
        opts = LoadOptions(clients=2, queries=2, database=database, heavy_clients=1, heavy_literals=50,
                           probe_seconds=1.0, warmup=1, output=tmp_path / "docs" / "proxy.md",
                           proxy_port=proxy_config.proxy.port, backend_port=stack.port,
                           decision_log=proxy_config.proxy.decision_log)
        assert measure(stack.config, opts) == 0
    finally:
        stop_server(proc.pid)
    text = opts.output.read_text()
    assert "## Under load, " in text and "| skipping statements" in text
    (csv_path,) = (tmp_path / "docs" / "proxy-load").glob("*.csv")
    rows = read_csv(csv_path)
    assert {(r.phase, r.path) for r in rows} >= {("skip", "direct"), ("skip", "proxy"), ("probe-idle", "proxy")}
    assert not [r for r in rows if r.phase == "skip" and r.error]
