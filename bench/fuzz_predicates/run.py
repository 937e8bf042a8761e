"""``python -m bench fuzz-predicates``: the predicate property test for as long as asked.

    python -m bench fuzz-predicates --seed 7 --count 2000
    python -m bench fuzz-predicates --seed 7 --case 123          # replay one case, every setting
    python -m bench fuzz-predicates --seed 7 --count 500 --zones UTC,Europe/Berlin,Asia/Kolkata

Starts a local Spark session, writes the test table into a temporary directory, collects its statistics,
then checks batches of cases under every setting (ANSI on and off, Parquet pushdown on and off, times
each zone), printing a line per batch. On the first failure it shrinks the predicate, prints a reproducer (table, predicate, setting,
file, the file's values and statistics, the SQL that shows it on Spark) and exits with 1; the table's
files are then kept for inspection.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from bench.fuzz_predicates.check import Checker, Outcome, Setting, quiet
from bench.fuzz_predicates.predicates import case as make_case, generate
from bench.fuzz_predicates.shrink import DEFAULT_BUDGET, reproducer, shrink
from bench.fuzz_predicates.tables import DEFAULT_FILES, build
from dipper.config import Config
from dipper.errors import DipperError

DEFAULT_ZONES = ("UTC", "America/Los_Angeles")


@dataclasses.dataclass(frozen=True)
class FuzzOptions:
    seed: int
    count: int = 500
    start: int = 0
    case: int | None = None  # replay this case only
    batch: int = 100
    zones: tuple[str, ...] = DEFAULT_ZONES
    ansi: tuple[bool, ...] = (True, False)
    pushdown: tuple[bool, ...] = (True, False)
    data_seed: int = 0
    files: int = DEFAULT_FILES
    workdir: Path | None = None  # default: a temporary directory, removed unless a failure was found
    shrink_budget: int = DEFAULT_BUDGET

    @property
    def settings(self) -> tuple[Setting, ...]:
        return tuple(Setting(a, z, p) for z in self.zones for a in self.ansi for p in self.pushdown)


@dataclasses.dataclass
class Tally:
    """Totals over a run, for progress lines and the summary."""

    checked: int = 0  # (case, setting) pairs
    pruned: int = 0  # ... where some variant skipped a file
    raised: int = 0  # ... where the original query raised
    fail_open: int = 0  # ... where the rewriter failed open

    def add(self, outcomes: Sequence[Outcome]) -> None:
        self.checked += len(outcomes)
        self.pruned += sum(o.pruned for o in outcomes)
        self.raised += sum(o.original_error is not None for o in outcomes)
        self.fail_open += sum(bool(o.rewrite_errors) for o in outcomes)

    @property
    def share(self) -> float:
        return self.pruned / self.checked if self.checked else 0.0

    def line(self) -> str:
        return (f"{self.pruned}/{self.checked} skipped files ({self.share:.0%}), {self.raised} originals raised, "
                f"{self.fail_open} rewrites failed open")


def parse_options(seed: int, count: int, start: int, case: int | None, batch: int, zones: str, ansi: str,
                  pushdown: str, data_seed: int, files: int, workdir: Path | None, shrink_budget: int) -> FuzzOptions:
    """Validate the command line before Spark starts."""
    from rewriter.session import time_zone

    zone_list = tuple(z.strip() for z in zones.split(",") if z.strip())
    for z in zone_list:
        if time_zone(z) is None:
            raise DipperError(f"--zones: {z!r} is not a time zone name (use IANA names such as Europe/Berlin, or UTC)")
    modes = {"on": True, "off": False, "true": True, "false": False}

    def switches(option: str, text: str) -> tuple[bool, ...]:
        words = [w.strip().lower() for w in text.split(",") if w.strip()]
        if not words or any(w not in modes for w in words):
            raise DipperError(f"{option} takes on, off or on,off (got {text!r})")
        return tuple(dict.fromkeys(modes[w] for w in words))

    ansi_list, pushdown_list = switches("--ansi", ansi), switches("--pushdown", pushdown)
    if not zone_list:
        raise DipperError("--zones needs at least one time zone (e.g. --zones UTC)")
    if count < 1 or batch < 1:
        raise DipperError("--count and --batch must be at least 1")
    return FuzzOptions(seed=seed, count=count, start=start, case=case, batch=batch, zones=zone_list, ansi=ansi_list,
                       pushdown=pushdown_list, data_seed=data_seed, files=files, workdir=workdir,
                       shrink_budget=shrink_budget)


def run(config: Config, opts: FuzzOptions, out: TextIO = sys.stdout) -> int:
    """Start Spark, build the table, check; 0 if every case passed, 1 on the first failure."""
    from backend.spark_session import spark_session

    workdir = opts.workdir or Path(tempfile.mkdtemp(prefix="dipper-fuzz-predicates-"))
    spark = spark_session(config, "dipper-fuzz-predicates")
    failed = True
    try:
        started = time.monotonic()
        table = build(spark, workdir, seed=opts.data_seed, files=opts.files)
        print(f"table {table.name}: {len(table.files)} files under {table.location}, statistics collected "
              f"({time.monotonic() - started:.0f}s)", file=out, flush=True)
        checker = Checker(spark, table)
        with quiet(spark):
            failed = (replay if opts.case is not None else loop)(checker, opts, out)
    finally:
        spark.stop()
        if not failed and opts.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
        elif failed:
            print(f"the table's files are kept under {workdir}", file=out)
    return 1 if failed else 0


def loop(checker: Checker, opts: FuzzOptions, out: TextIO) -> bool:
    """Check cases ``start .. start + count - 1`` batch by batch; True when one failed (reported, shrunk)."""
    tally = Tally()
    started = time.monotonic()
    for first in range(opts.start, opts.start + opts.count, opts.batch):
        cases = generate(opts.seed, min(opts.batch, opts.start + opts.count - first), first)
        for setting in opts.settings:
            outcomes = checker.check(cases, setting)
            tally.add(outcomes)
            failures = [f for o in outcomes for f in o.failures]
            if failures:
                print(f"{len(failures)} failures in cases {first}..{first + len(cases) - 1} under {setting}; "
                      f"the first, shrunk:", file=out, flush=True)
                for f in failures[:10]:
                    print("  " + f.brief(), file=out)
                small = shrink(checker, failures[0], opts.shrink_budget)
                print(reproducer(checker, small, failures[0]), file=out, flush=True)
                return True
        print(f"[seed {opts.seed}] cases {opts.start}..{first + len(cases) - 1}: {tally.line()}; "
              f"{checker.queries} Spark queries, {time.monotonic() - started:.0f}s", file=out, flush=True)
    print(f"passed: {tally.checked} predicate checks ({opts.count} cases x {len(opts.settings)} settings), "
          f"{tally.line()}", file=out)
    return False


def replay(checker: Checker, opts: FuzzOptions, out: TextIO) -> bool:
    """One case under every setting, with what each rewriter variant skipped; True if it fails anywhere."""
    assert opts.case is not None
    c = make_case(opts.seed, opts.case)
    print(f"case {opts.seed}/{opts.case}: WHERE {c.sql}", file=out)
    failed = False
    for setting in opts.settings:
        o = checker.check([c], setting)[0]
        state = f"original raises {o.original_error}" if o.original_error else (
            f"original matches {sum(o.matches.values())} rows" if o.matches is not None else "not run on Spark")
        print(f"  {setting}: {state}", file=out)
        for variant, skipped in o.skipped.items():
            names = ", ".join(p.rsplit("/", 1)[-1] for p in skipped) or "-"
            print(f"    {variant:20} skips {names}" + (f" (failed open: {o.rewrite_errors[variant]})"
                                                       if variant in o.rewrite_errors else ""), file=out)
        for f in o.failures:
            failed = True
            print(reproducer(checker, shrink(checker, f, opts.shrink_budget), f), file=out, flush=True)
    return failed
