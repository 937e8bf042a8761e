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
from bench.run import QUICK, check_inputs, check_locations, finish, parse_options, rerender, resumed, run_suite
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
def test_a_catalog_database_is_measured_as_it_is(stack: Stack, tmp_path: Path) -> None:
    """``--database``: the suite's tables read from a catalog database (here a second database over the
    dataset's folders, as `bench layout-effect`'s copy is), described by its own statistics; a table the
    catalog keeps elsewhere than its statistics say is refused before anything runs."""
    dataset = stack.dataset("tpch", "tuned")
    copy = "bench_catalog_copy"
    store = StatsStore(tmp_path / "stats")
    config = stack.config.replace("paths", stats=tmp_path / "stats")
    opts = quick_options(tmp_path, layout=None, database=copy, stats="zonemap", variants="spark,dipper")
    with pytest.raises(StatsError, match=rf"no statistics for 8 of the tpch tables in database {copy} .*"
                                         rf"python -m stats collect {copy}\.lineitem"):
        check_inputs(config, opts, StatsLoader(store, Lister(0)))
    stack.spark.sql(f"CREATE DATABASE IF NOT EXISTS {copy}")
    try:
        for t in dataset.tables:
            folder = stack.config.paths.warehouse / dataset.database / t.name
            stack.spark.sql(f"CREATE TABLE IF NOT EXISTS {copy}.{t.name} USING parquet LOCATION 'file:{folder}'")
            collect_footers(store, f"{copy}.{t.name}", f"file:{folder}")
        loader = StatsLoader(store, Lister(0))
        got = check_inputs(config, opts, loader)
        assert got.database == copy and {(t.name, t.files, t.bytes, t.rows) for t in got.tables} == \
            {(t.name, t.files, t.bytes, t.rows) for t in dataset.tables}
        check_locations(stack.spark, got, loader)
        ms = run_suite(stack.spark, config, got, loader, opts, [])
        assert finish(opts, got, ms) == 0
        assert all(m.identical and not m.rewrite_error for m in ms)
        by = {(m.query, m.variant): m for m in ms}
        assert by["q06", "dipper"].files_read < by["q06", "spark"].files_read  # the copy's own statistics prune
        assert opts.out_dir == tmp_path / "sf0.01" / f"tpch-{copy}-zonemap"
        readme = (opts.out_dir / "README.md").read_text()
        assert f"# TPCH SF 0.01, database `{copy}`, statistics `zonemap`" in readme
        assert f"python -m bench run --suite tpch --sf 0.01 --database {copy} --stats zonemap" in readme
        assert [m.query for m in resumed(dataclasses.replace(opts, resume=True), got)] == [m.query for m in ms]

        elsewhere = tmp_path / "elsewhere"
        shutil.copytree(stack.config.paths.warehouse / dataset.database / "nation", elsewhere)
        stack.spark.sql(f"ALTER TABLE {copy}.nation SET LOCATION 'file:{elsewhere}'")
        with pytest.raises(StatsError, match=rf"the catalog keeps {copy}.nation in file:{elsewhere} but its "
                                             rf"statistics describe .*python -m stats collect {copy}.nation"):
            check_locations(stack.spark, got, loader)
    finally:
        stack.spark.sql(f"DROP DATABASE IF EXISTS {copy} CASCADE")


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


# (arguments of bench run, the one error line it must print); {tmp} is the test's own folder.
BAD_COMMAND_LINES = [
    (("--suite", "tpcx"), "unknown benchmark 'tpcx'"),
    (("--layout", "zigzag"), "unknown layout 'zigzag'"),
    (("--stats", "histogram"), "unknown statistics 'histogram'"),
    (("--queries", "q23"), "tpch has no runnable query 'q23'; valid: q01..q22"),
    (("--variants", "spark,fast"), "unknown variant fast"),
    (("--sf", "3", "--output", "{tmp}"), "no dataset tpch_sf3_tuned in .*; create it .* with: "
                                         "make dataset SUITE=tpch SF=3 LAYOUT=tuned"),
    (("--layout", "tuned", "--database", "x"), "--layout tuned names a generated dataset and --database x a "
                                               "catalog database: give one of them"),
    (("--database", "a.b"), "--database 'a.b' is not a database name"),
    (("--database", "nowhere"), r"no statistics for 8 of the tpch tables in database nowhere \(nowhere.lineitem, "
                                r".*python -m stats collect nowhere.lineitem nowhere.orders"),
]


@pytest.mark.deployment
@pytest.mark.parametrize("args, message", BAD_COMMAND_LINES, ids=[" ".join(a) for a, _ in BAD_COMMAND_LINES])
def test_bad_command_lines_are_one_clear_error(args: tuple[str, ...], message: str, tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "DIPPER_PATHS_WAREHOUSE": str(tmp_path / "wh"), "DIPPER_PATHS_STATS": str(tmp_path / "st")}
    args = tuple(a.replace("{tmp}", str(tmp_path)) for a in args)
    out = subprocess.run([sys.executable, "-m", "bench", "run", *args], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 1, (args, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    assert __import__("re").search(message, lines[0]), (message, lines[0])


def test_statistics_specs() -> None:
    assert parse_stats_spec("zonemap").label == "zonemap"
    assert parse_stats_spec("RangeSet:20").slug == "rangeset20"
    with pytest.raises(DatasetError, match="--repeat must be at least 1"):
        quick_options(Path("x"), repeat=0)


@pytest.mark.parametrize("bad", ["rangeset", "rangeset:0", "rangeset:x", "minmax"])
def test_bad_statistics_specs_are_refused(bad: str) -> None:
    with pytest.raises(StatsError):
        parse_stats_spec(bad)


def _intervals_of(files: list[np.ndarray], k: int) -> RangeSets:
    """Each file's optimal range-set of ``k`` intervals, as one table's range-sets."""
    parts = [optimal_range_set(v, k) for v in files]
    lo = np.concatenate([p[0] for p in parts])
    hi = np.concatenate([p[1] for p in parts])
    file = np.concatenate([np.full(len(p[0]), i) for i, p in enumerate(parts)])
    return RangeSets(lo, hi, file, np.ones(len(files), dtype=bool))


@pytest.mark.parametrize("k", [1, 2, 4, 8, 20])
def test_fewer_intervals_are_exactly_the_optimal_range_set_of_that_size(k: int) -> None:
    rng = np.random.default_rng(7)
    files = [rng.choice(rng.integers(0, 10_000, size=rng.integers(1, 60)), size=80) for _ in range(25)]
    files.append(np.array([5, 5, 5]))  # one distinct value
    got, want = limit_intervals(_intervals_of(files, 20), k), _intervals_of(files, k)
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


def test_runs_compare_against_the_first_runs_spark_and_bytes(tmp_path: Path) -> None:
    """``bench compare-runs``: speed-ups over the baseline's plain Spark and INPUTCUT against the baseline's
    bytes, so a laid-out copy that grew is charged for it; runs of another suite are refused."""
    from bench.compare_runs import compare
    from bench.execute import Measurement
    from bench.report import CATALOG, RunInfo, write_report

    def info(layout: str, database: str, suite: str = "tpch", when: str = "now") -> RunInfo:
        return RunInfo(suite=suite, sf=1.0, layout=layout, stats="rangeset:8", database=database, files=10,
                       bytes=1000, repeat=3, warmup=True, spark_version="4", when=when, peak_rss_mb=1.0,
                       variants=["spark", "dipper"])

    def m(query: str, variant: str, read: int, total: int, seconds: float, identical: bool = True) -> Measurement:
        rewrite_ms = 1.0 if variant == "dipper" else 0.0
        return Measurement(query, variant, 1, read, total, 1, seconds, 3, rewrite_ms, 0, 0, True, identical, cpu_seconds=1.0)

    base = write_report(tmp_path / "tpch-tuned-rangeset8", info("tuned", "tpch_sf1_tuned"),
                        [m("q01", "spark", 100, 100, 4.0), m("q01", "dipper", 50, 100, 2.0),
                         m("q02", "spark", 300, 300, 1.0), m("q02", "dipper", 300, 300, 1.0)])
    # The copy grew (120 and 360 bytes): its own INPUTCUT would be 12x for q01; against the baseline's 100 it is 10x.
    copy = write_report(tmp_path / "tpch-copy-rangeset8", info(CATALOG, "copy"),
                        [m("q01", "spark", 120, 120, 8.0), m("q01", "dipper", 10, 120, 0.5),
                         m("q02", "spark", 360, 360, 2.0), m("q02", "dipper", 30, 360, 2.0, identical=False),
                         m("q03", "spark", 1, 1, 1.0), m("q03", "dipper", 1, 1, 1.0)])
    out = compare([base, copy], tmp_path / "out" / "cmp.md")
    text = out.read_text()
    assert (tmp_path / "out" / "cmp.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "2 queries every run measured" in text  # q03 is in one run only
    assert "| q01 | 4.00 | 2.00, 2.00x, 2.0x | 8.00, 0.50x, 0.8x | 0.50, 8.00x, 10.0x |" in text
    assert "| q02 | 1.00 | 1.00, 1.00x, 1.0x | 2.00, 0.50x, 0.8x | 2.00, 0.50x, 10.0x **DIFFERENT** |" in text
    assert "| queries with INPUTCUT >= 10x | 0 | 0 | 0 | 2 |" in text
    assert "| sum of wall times | 5.0 s | 3.0 s | 10.0 s | 2.5 s |" in text
    assert "| rows identical to plain Spark on the same layout | 2/2 | 2/2 | 2/2 | 1/2 |" in text
    assert "Dipper on `copy`" in text and "--database copy" in text
    # The baseline timed again later (drift between hours): the two runs of one label named by their time.
    again = write_report(tmp_path / "again" / "tpch-tuned-rangeset8", info("tuned", "tpch_sf1_tuned", when="later"),
                         [m("q01", "dipper", 50, 100, 3.0), m("q02", "dipper", 300, 300, 1.0)])
    text = compare([base, again, copy], tmp_path / "out" / "again.md").read_text()
    assert "| | Spark on `tuned` (now) | Dipper on `tuned` (now) | Dipper on `tuned` (later) | Spark on `copy` | " \
           "Dipper on `copy` |" in text, text
    assert "| q01 | 4.00 | 2.00, 2.00x, 2.0x | 3.00, 1.33x, 2.0x | 8.00, 0.50x, 0.8x |" in text

    other = write_report(tmp_path / "tpcds-tuned-rangeset8", info("tuned", "tpcds_sf1_tuned", suite="tpcds"),
                         [m("q01", "spark", 1, 1, 1.0), m("q01", "dipper", 1, 1, 1.0)])
    with pytest.raises(DatasetError, match="compare runs of one suite and scale"):
        compare([base, other], tmp_path / "x.md")
    with pytest.raises(DatasetError, match="needs two run folders or more"):
        compare([base], tmp_path / "x.md")
    with pytest.raises(DatasetError, match="holds no benchmark run"):
        compare([base, tmp_path / "nothing"], tmp_path / "x.md")
