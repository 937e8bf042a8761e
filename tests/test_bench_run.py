"""The benchmark harness (``python -m bench run``): its quick mode on the shared Spark session, so the
harness cannot rot; its refusals of bad input; and the coarser statistics views it measures with."""

from __future__ import annotations

import csv
import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench.execute import VARIANTS, normalised
from bench.report import load_run
from backend.cpu_time import CpuMeter
from bench.run import QUICK, check_inputs, finish, parse_options, rerender, resumed, run_suite
from dipper.errors import DatasetError, DipperError, StatsError
from stats.coarsen import CoarseStats, limit_intervals, parse_stats_spec
from stats.footers import collect_footers
from stats.freshness import Lister
from stats.loader import StatsLoader
from stats.model import RangeSets
from stats.range_set import optimal_range_set
from stats.store import StatsStore
from tests.conftest import TEST_SF, Stack

ROOT = Path(__file__).resolve().parent.parent


def quick_options(output: Path, **overrides: object):  # noqa: ANN201
    args = {"suite": QUICK["suite"], "sf": TEST_SF, "layout": QUICK["layout"], "stats": "rangeset:8",
            "queries": ",".join(QUICK["queries"]), "variants": ",".join(VARIANTS), "repeat": 1, "warmup": False,
            "output": output} | overrides
    return parse_options(**args)


@pytest.mark.spark
def test_quick_mode_measures_every_variant_and_writes_the_report(stack: Stack, tmp_path: Path) -> None:
    dataset = stack.dataset("tpch", "tuned")
    loader = StatsLoader(stack.stats_store("tpch", "tuned"), Lister(60))
    opts = quick_options(tmp_path)
    assert check_inputs(stack.config, opts, loader).database == dataset.database
    ms = run_suite(stack.spark, stack.config, dataset, loader, opts, [])
    assert finish(opts, dataset, ms) == 0

    assert {(m.query, m.variant) for m in ms} == {(q, v) for q in QUICK["queries"] for v in VARIANTS}
    assert all(m.identical and not m.rewrite_error for m in ms)
    assert all(m.cpu_seconds > 0 for m in ms)  # every variant read a table: its tasks used CPU
    table = {(m.query, m.variant): m for m in ms}
    for q in QUICK["queries"]:
        spark, preds, dipper = table[q, "spark-nodpp"], table[q, "preds"], table[q, "dipper"]
        assert spark.bytes_read == spark.bytes_input > 0  # nothing skips without Spark's runtime features
        assert dipper.bytes_read <= preds.bytes_read <= spark.bytes_read
        assert preds.rewrite_ms > 0 and preds.dips_built == 0
    # q06 has only local predicates on lineitem (clustered by l_shipdate): Preds skips files.
    assert table["q06", "preds"].files_read < table["q06", "spark-nodpp"].files_read
    # q17: part's predicate reaches lineitem through the join and the correlated aggregate (Fig. 2 left).
    assert table["q17", "dipper"].dips_built > 0
    assert table["q17", "dipper"].dips_naive >= table["q17", "dipper"].dips_built and table["q17", "dipper"].naive_same
    assert table["q17", "dipper"].files_read < table["q17", "preds"].files_read or \
        table["q17", "preds"].files_read == 0

    folder = opts.out_dir
    assert folder == tmp_path / "sf0.01" / "tpch-tuned-rangeset8"
    with (folder / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(ms) and {r["identical"] for r in rows} == {"True"}
    for png in ("inputcut_cdf.png", "per_query.png", "rewrite_latency_cdf.png", "cpu_vs_bytes.png"):
        assert (folder / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    readme = (folder / "README.md").read_text()
    assert "| rows identical to Spark | 3/3 | 3/3 | 3/3 | 3/3 |" in readme
    assert all(f"| {q} |" in readme for q in QUICK["queries"])
    info, loaded = load_run(folder)  # the run renders again from its files alone
    assert info.database == dataset.database and [(m.query, m.variant, m.bytes_read, m.identical) for m in loaded] == \
        [(m.query, m.variant, m.bytes_read, m.identical) for m in ms]
    (folder / "README.md").unlink()
    assert rerender(stack.config, folder, notes=False) == 0 and (folder / "README.md").read_text() == readme

    # --resume keeps what the folder holds and runs nothing again; other options are refused, not mixed in.
    again = dataclasses.replace(opts, resume=True)
    done = resumed(again, dataset)
    assert sorted((m.query, m.variant) for m in done) == sorted((m.query, m.variant) for m in ms)
    meter = CpuMeter(stack.spark)
    mark = meter.mark()
    assert run_suite(stack.spark, stack.config, dataset, loader, again, done) == done
    assert meter.mark() == mark  # no Spark job ran
    with pytest.raises(DatasetError, match=r"holds a run with other options or data \(repeat: .*drop --resume"):
        resumed(dataclasses.replace(again, repeat=2), dataset)
    regenerated = dataclasses.replace(dataset, tables=tuple(dataclasses.replace(t, bytes=t.bytes + 1) if i == 0 else t
                                                            for i, t in enumerate(dataset.tables)))
    with pytest.raises(DatasetError, match=r"holds a run with other options or data \(bytes: "):
        resumed(again, regenerated)

    # A second statistics spec beside it: the comparison of statistics (Fig. 16) is drawn from both.
    zone = quick_options(tmp_path, stats="zonemap", queries="q06,q17", variants="preds,dipper")
    zone_ms = run_suite(stack.spark, stack.config, dataset, loader, zone, [])
    finish(zone, dataset, zone_ms)
    assert (tmp_path / "sf0.01" / "tpch-tuned-statistics.png").is_file()
    assert "| zonemap | Dipper |" in (tmp_path / "sf0.01" / "tpch-tuned-statistics.md").read_text()
    assert "--variants preds,dipper" in (zone.out_dir / "README.md").read_text()  # the command reproduces the run

    # A result that differs from plain Spark's: the report is still written, then the run fails naming it.
    wrong = [dataclasses.replace(m, identical=False) if (m.query, m.variant) == ("q17", "dipper") else m for m in zone_ms]
    with pytest.raises(DipperError, match=r"results differ from plain Spark in 1 case\(s\): q17 \(dipper\)"):
        finish(zone, dataset, wrong)
    with (zone.out_dir / "results.csv").open() as f:
        assert {(r["query"], r["variant"]) for r in csv.DictReader(f) if r["identical"] == "False"} == {("q17", "dipper")}


@pytest.mark.spark
def test_statistics_that_do_not_fit_the_dataset_are_refused(stack: Stack, tmp_path: Path) -> None:
    dataset = stack.dataset("tpch", "tuned")
    warehouse = tmp_path / "warehouse"
    shutil.copytree(stack.config.paths.warehouse / dataset.database, warehouse / dataset.database)
    config = stack.config.replace("paths", warehouse=warehouse, stats=tmp_path / "stats")
    store = StatsStore(config.paths.stats)
    opts = quick_options(tmp_path, sf=TEST_SF)
    with pytest.raises(StatsError, match=r"no statistics for .* collect them with: make dataset SUITE=tpch SF=0.01"):
        check_inputs(config, opts, StatsLoader(store, Lister(0)))

    for t in dataset.tables:  # zone maps from footers: range-sets of 1 interval
        collect_footers(store, f"{dataset.database}.{t.name}", f"file:{warehouse / dataset.database / t.name}")
    check_inputs(config, quick_options(tmp_path, stats="zonemap"), StatsLoader(store, Lister(0)))
    with pytest.raises(StatsError, match="rangeset:8 needs range-sets of at least 8 intervals.*--range-set-size 8"):
        check_inputs(config, opts, StatsLoader(store, Lister(0)))

    victim = sorted((warehouse / dataset.database / "lineitem").glob("*.parquet"))[0]
    victim.unlink()
    with pytest.raises(StatsError, match=r"lineitem do not match the dataset: 0 of its files are not described "
                                         r"and 1 described files are gone.*python -m stats refresh"):
        check_inputs(config, quick_options(tmp_path, stats="zonemap"), StatsLoader(store, Lister(0)))


@pytest.mark.spark
def test_cpu_meter_counts_the_jobs_after_its_mark(stack: Stack) -> None:
    meter = CpuMeter(stack.spark)
    mark = meter.mark()
    assert meter.since(mark) == 0  # nothing ran
    stack.spark.range(3_000_000).selectExpr("sum(id % 7)").collect()
    small = meter.since(mark)
    mark2 = meter.mark()
    stack.spark.range(30_000_000).selectExpr("sum(id % 7)", "count(distinct id % 1000)").collect()
    large = meter.since(mark2)
    assert 0 < small < large
    assert meter.since(mark) == pytest.approx(small + large)  # jobs after the first mark: both queries


def test_bad_command_lines_are_one_clear_error(tmp_path: Path) -> None:
    cases = {
        ("--suite", "tpcx"): "unknown benchmark 'tpcx'",
        ("--layout", "zigzag"): "unknown layout 'zigzag'",
        ("--stats", "histogram"): "unknown statistics 'histogram'",
        ("--queries", "q23"): "tpch has no runnable query 'q23'; valid: q01..q22",
        ("--variants", "spark,fast"): "unknown variant fast",
        ("--sf", "3", "--output", str(tmp_path)): "no dataset tpch_sf3_tuned in .*; create it .* with: "
                                                   "make dataset SUITE=tpch SF=3 LAYOUT=tuned",
    }
    env = {"PATH": "/usr/bin:/bin", "DIPPER_PATHS_WAREHOUSE": str(tmp_path / "wh"), "DIPPER_PATHS_STATS": str(tmp_path / "st")}
    for args, message in cases.items():
        out = subprocess.run([sys.executable, "-m", "bench", "run", *args], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 1, (args, out.stderr)
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
        assert __import__("re").search(message, lines[0]), (message, lines[0])


def test_statistics_specs() -> None:
    assert parse_stats_spec("zonemap").label == "zonemap"
    assert parse_stats_spec("RangeSet:20").slug == "rangeset20"
    for bad in ("rangeset", "rangeset:0", "rangeset:x", "minmax"):
        with pytest.raises(StatsError):
            parse_stats_spec(bad)
    with pytest.raises(DatasetError, match="--repeat must be at least 1"):
        quick_options(Path("x"), repeat=0)


def test_fewer_intervals_are_exactly_the_optimal_range_set_of_that_size() -> None:
    rng = np.random.default_rng(7)
    files = [rng.choice(rng.integers(0, 10_000, size=rng.integers(1, 60)), size=80) for _ in range(25)]
    files.append(np.array([5, 5, 5]))  # one distinct value
    def flat(k: int) -> RangeSets:
        parts = [optimal_range_set(v, k) for v in files]
        lo = np.concatenate([p[0] for p in parts])
        hi = np.concatenate([p[1] for p in parts])
        file = np.concatenate([np.full(len(p[0]), i) for i, p in enumerate(parts)])
        return RangeSets(lo, hi, file, np.ones(len(files), dtype=bool))
    full = flat(20)
    for k in (1, 2, 4, 8, 20):
        got, want = limit_intervals(full, k), flat(k)
        # Equal total width per file is what optimality means; with distinct gaps the sets are identical.
        for i in range(len(files)):
            g, w = got.file == i, want.file == i
            assert g.sum() == w.sum() <= k
            assert (got.hi[g] - got.lo[g]).sum() == (want.hi[w] - want.lo[w]).sum()
            assert got.lo[g].min() == want.lo[w].min() and got.hi[g].max() == want.hi[w].max()


@pytest.mark.spark
def test_zone_map_view_drops_range_sets_and_value_lists(stack: Stack) -> None:
    loader = StatsLoader(stack.stats_store("tpch", "tuned"), Lister(60))
    table = f"{stack.database('tpch', 'tuned')}.lineitem"
    full = loader.table_stats(table)
    zone = CoarseStats(loader, parse_stats_spec("zonemap")).table_stats(table)
    four = CoarseStats(loader, parse_stats_spec("rangeset:4")).table_stats(table)
    assert any(c.ranges is not None for c in full.columns.values())
    assert all(c.ranges is None and c.values is None for c in zone.columns.values())
    for name, c in four.columns.items():
        assert np.array_equal(c.lo, full.columns[name].lo) and np.array_equal(c.hi, full.columns[name].hi)
        if c.ranges is not None:
            assert np.bincount(c.ranges.file).max() <= 4


def test_rows_compare_as_multisets_with_doubles_to_ten_digits() -> None:
    assert normalised([(1, 0.1 + 0.2), (0, "a")]) == normalised([(0, "a"), (1, 0.3)])
    assert normalised([(1, 0.3)]) != normalised([(1, 0.3001)])
    assert normalised([(1,), (1,)]) != normalised([(1,)])


def test_the_synthetic_store_of_the_load_benchmark_loads(tmp_path: Path) -> None:
    """``python -m bench stats`` builds its 100,000-file store with the store's own schema; a small one here."""
    from bench.stats_bench import synthetic_store
    from stats.loader import to_table_stats
    from stats.store import StatsStore

    name = synthetic_store(tmp_path, files=50, columns=3)
    snap = StatsStore(tmp_path).snapshot()
    stats = to_table_stats(name, snap.read(name), snap.entry(name).kinds, ())
    assert stats.n_files == 50 and set(stats.columns) == {"c0", "c1", "c2"}
    assert stats.columns["c0"].ranges is not None and len(stats.columns["c0"].ranges.lo) == 50 * 8


def test_layout_effect_compares_answers_as_the_benchmark_does() -> None:
    """bench layout-effect's Spark check (q39 on a laid-out inventory: the same rows, a stddev differing in its
    last digit because other files change the order Spark adds them in) compares as ``normalised`` does."""
    from bench.layout_effect import _answer

    def answer(rows: list) -> object:
        return _answer(lambda sql: rows, "SELECT ...", False)[0]

    assert answer([(2, 6104, 1.2468892662861601), (1, None, "a")]) == answer([(1, None, "a"), (2, 6104, 1.24688926628616)])
    assert answer([(2, 6104, 1.2468892662861601)]) != answer([(2, 6104, 1.2468892)])
    assert answer([(1,), (1,)]) != answer([(1,)])

    def fails(sql: str) -> list:
        raise ValueError("division by zero\nat ...")

    assert _answer(fails, "SELECT ...", False)[0] == "error: ValueError: division by zero"
