"""``python -m bench proxy``: the proxy under concurrent load, against Spark directly, in one run (issue 62).

Two phases, each run on both paths (``direct``: the Spark Thrift Server; ``proxy``: Dipper in front of it),
one path after the other, each after an untimed warm-up on that path:

1. **Skipping load.** ``--clients`` pyhive clients, each in its own session, run ``--queries`` statements each,
   all starting together: a week of TPC-H ``lineitem`` by ``l_shipdate`` (clustered on the ``tuned`` layout,
   so through the proxy each reads 1-2 of its 57 files at SF 1; Spark alone opens them all). The same texts
   on both paths. Reported: p50 / p95 / max latency, errors, statements per second, and the proxy's rewrite
   time as a share of its clients' latency (from its decision log).
2. **A light statement while heavy rewrites run.** One client runs ``SELECT 1`` back to back for
   ``--probe-seconds`` alone, then again while ``--heavy-clients`` clients send statements that are expensive
   to rewrite and cheap for Spark (``partsupp`` by an IN list of ``--heavy-literals`` keys, from a narrow key
   range so that the rewrite prunes files and emits a filter). The proxy serves each client on a thread of
   one Python process; if one client's rewrite made the others wait, ``SELECT 1`` through the proxy slows
   under heavy rewrites by more than it does directly (where Spark parses the same long texts).

Clients are threads of this process by default: they spend their time waiting on sockets, and the report
gives the client process's CPU share of a core for every phase, so a reader can see whether the clients'
own interpreter lock could have shaped the latencies; ``--workers processes`` runs each client in a process
of its own to check. Timings are never asserted anywhere; the machine is shared, so the load average at the
start is part of the report.

Writes a section in ``docs/results/proxy.md`` (Markdown table, and a PNG if matplotlib is there) and the run's raw
results, one row per statement, in ``docs/results/proxy-load/<time>.csv``.
"""

from __future__ import annotations

import concurrent.futures
import csv
import dataclasses
import datetime
import json
import logging
import math
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psutil

from bench.latency import Summary, percentile
from bench.load_stack import LoadStack, load_stack
from bench.run_record import append_section, commit, load_average, machine, stamp, utc_now
from dipper.config import Config
from dipper.errors import DipperError

log = logging.getLogger("dipper.bench")

PATHS = ("direct", "proxy")
WORKERS = ("threads", "processes")
FIRST_SHIPDATE = datetime.date(1992, 1, 2)
SHIPDATE_DAYS = 2520  # up to late 1998, the last ship dates TPC-H generates
PARTSUPP_KEYS = 200_000  # ps_partkey runs 1..200,000 * SF; the heavy keys come from the first SF 1's worth
SKIP_SQL = ("SELECT count(*), sum(l_extendedprice * (1 - l_discount)) FROM lineitem "
            "WHERE l_shipdate BETWEEN DATE '{lo}' AND DATE '{hi}'")


@dataclasses.dataclass(frozen=True)
class LoadOptions:
    clients: int = 32
    queries: int = 20
    database: str = "tpch_sf1_tuned"
    heavy_clients: int = 4
    heavy_literals: int = 3000
    probe_seconds: float = 20.0
    warmup: int = 8
    workers: str = "threads"
    seed: int = 1
    output: Path = Path("docs/results/proxy.md")
    proxy_port: int | None = None
    backend_port: int | None = None
    decision_log: Path | None = None

    def __post_init__(self) -> None:
        for name in ("clients", "queries", "heavy_literals"):
            if getattr(self, name) < 1:
                raise DipperError(f"--{name.replace('_', '-')} must be at least 1, not {getattr(self, name)}")
        if self.heavy_clients < 0 or self.warmup < 0:
            raise DipperError("--heavy-clients and --warmup must be 0 or more")
        if not (self.probe_seconds > 0 and math.isfinite(self.probe_seconds)):
            raise DipperError(f"--probe-seconds must be a finite number above 0, not {self.probe_seconds}")
        if self.workers not in WORKERS:
            raise DipperError(f"--workers is one of {', '.join(WORKERS)}, not {self.workers!r}")

    def command(self) -> str:
        """The command line that repeats this run (defaults left out)."""
        default = LoadOptions()
        parts = ["python -m bench proxy"]
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value != getattr(default, f.name) and f.name not in ("proxy_port", "backend_port", "decision_log"):
                parts.append(f"--{f.name.replace('_', '-')} {value}")
        return " ".join(parts)


@dataclasses.dataclass(frozen=True)
class Result:
    """One statement as a client saw it: a row of the run's CSV."""

    phase: str  # warmup | skip | probe-idle | probe-heavy | heavy
    path: str  # direct | proxy
    client: str  # the pyhive user name, which the decision log records
    kind: str  # skip | select1 | heavy
    started_s: float  # since the phase began
    latency_ms: float
    rows: int
    error: str


@dataclasses.dataclass(frozen=True)
class ClientSpec:
    """What one client does; picklable, so a client can run in a process of its own."""

    host: str
    port: int
    database: str
    user: str
    phase: str
    path: str
    statements: tuple[tuple[str, str], ...]  # (kind, sql), run in order, once each unless ``until`` is set
    start_at: float  # wall clock (time.time()): every client of a phase starts together
    until: float | None = None  # wall clock: repeat the statements until then


def skip_statements(rng: random.Random, count: int) -> list[tuple[str, str]]:
    """``count`` one-week ranges of ``lineitem`` by ship date."""
    out = []
    for _ in range(count):
        lo = FIRST_SHIPDATE + datetime.timedelta(days=rng.randrange(SHIPDATE_DAYS))
        out.append(("skip", SKIP_SQL.format(lo=lo, hi=lo + datetime.timedelta(days=6))))
    return out


def heavy_statement(rng: random.Random, literals: int) -> str:
    """``partsupp`` by ``literals`` distinct part keys of one sixth of the key range: a long text for the
    rewriter to parse and evaluate, a prune filter to emit, little for Spark to read."""
    width = max(literals, PARTSUPP_KEYS // 6)
    lo = rng.randrange(1, max(2, PARTSUPP_KEYS - width))
    keys = sorted(rng.sample(range(lo, lo + width), literals))
    return f"SELECT count(*) FROM partsupp WHERE ps_partkey IN ({', '.join(map(str, keys))})"


def run_client(spec: ClientSpec) -> list[Result]:
    """Open a session, wait for the phase's start, run the statements; every failure is a result, not a raise."""
    from bench.proxy_bench import connect

    results: list[Result] = []
    try:
        conn = connect(spec.host, spec.port, spec.database, user=spec.user)
    except Exception as e:  # noqa: BLE001 - a client that cannot connect is an error of the run, counted
        return [Result(spec.phase, spec.path, spec.user, kind, 0.0, 0.0, 0, f"connect: {_first_line(e)}")
                for kind, _ in spec.statements]
    try:
        cursor = conn.cursor()
        time.sleep(max(0.0, spec.start_at - time.time()))
        i = 0
        while True:
            kind, sql = spec.statements[i % len(spec.statements)]
            started = time.perf_counter()
            error, rows = "", 0
            try:
                cursor.execute(sql)
                rows = len(cursor.fetchall())
            except Exception as e:  # noqa: BLE001 - Spark's or the proxy's error, counted per path
                error = _first_line(e)
            results.append(Result(spec.phase, spec.path, spec.user, kind, time.time() - spec.start_at,
                                  (time.perf_counter() - started) * 1000, rows, error))
            i += 1
            if spec.until is None and i >= len(spec.statements):
                break
            if spec.until is not None and time.time() >= spec.until:
                break
    finally:
        conn.close()
    return results


def run_clients(specs: Sequence[ClientSpec], workers: str) -> tuple[list[Result], float]:
    """Run every client at once; their results, and the CPU seconds the clients used (this process and its
    children), which says how much of a core the client side needed."""
    me = psutil.Process()
    before = _cpu(me)
    pool: concurrent.futures.Executor
    pool = concurrent.futures.ThreadPoolExecutor(len(specs)) if workers == "threads" else \
        concurrent.futures.ProcessPoolExecutor(len(specs))
    with pool:
        results = [r for batch in pool.map(run_client, specs) for r in batch]
    return results, _cpu(me) - before


def measure(config: Config, opts: LoadOptions) -> int:
    when = utc_now()
    load_at_start = load_average()
    log.info("load average at start: %s (%d cores; others' Spark tests may share them)", load_at_start,
             psutil.cpu_count())
    rng = random.Random(opts.seed)
    skip = [skip_statements(rng, opts.queries) for _ in range(opts.clients)]
    warm = skip_statements(rng, opts.warmup)
    heavy = [("heavy", heavy_statement(rng, opts.heavy_literals)) for _ in range(8)]
    results: list[Result] = []
    cpu: dict[tuple[str, str], float] = {}
    walls: dict[tuple[str, str], float] = {}
    with load_stack(config, opts.database, opts.proxy_port, opts.backend_port, opts.decision_log) as stack:
        log_start = _size(stack.decision_log)
        ports = {"direct": stack.backend_port, "proxy": stack.proxy_port}
        for path in PATHS:
            spec = ClientSpec(stack.host, ports[path], opts.database, f"bench-warmup-{path}", "warmup", path,
                              tuple(warm + heavy[:1] + [("select1", "SELECT 1")]), time.time())
            warmed, _ = run_clients([spec], "threads")
            results += warmed
            _say(f"{path}: warm-up, {len(warmed)} statements, {sum(1 for r in warmed if r.error)} errors")
        _check_rewrites(stack, log_start)
        for path in PATHS:
            phase = _phase(stack, ports[path], path, opts, skip)
            results += phase.results
            cpu[path, "skip"], walls[path, "skip"] = phase.cpu_s, phase.wall_s
            s = Summary.of([r.latency_ms for r in phase.results if not r.error],
                           sum(1 for r in phase.results if r.error))
            _say(f"{path}: {opts.clients} clients x {opts.queries} statements in {phase.wall_s:.1f} s: "
                 f"p50 {s.p50:.0f} ms, p95 {s.p95:.0f} ms, max {s.max:.0f} ms, {s.errors} errors")
        for path in PATHS:
            probe = _probe(stack, ports[path], path, opts, heavy)
            results += probe.results
            cpu[path, "probe"], walls[path, "probe"] = probe.cpu_s, probe.wall_s
        records = _records(stack.decision_log, log_start)
    csv_path = opts.output.parent / "proxy-load" / f"{stamp(when)}.csv"
    write_csv(csv_path, results)
    png = _plot(results, csv_path.with_suffix(".png"))
    body = report(results, records, opts, when, load_at_start, cpu, walls, csv_path, png)
    append_section(opts.output, f"Under load, {when:%Y-%m-%d %H:%M} UTC", body)
    print(body)
    print(f"\nwritten to {opts.output} (raw results: {csv_path})")
    return 0


@dataclasses.dataclass(frozen=True)
class _Phase:
    results: list[Result]
    cpu_s: float
    wall_s: float


def _phase(stack: LoadStack, port: int, path: str, opts: LoadOptions,
           skip: list[list[tuple[str, str]]]) -> _Phase:
    start_at = time.time() + (1.0 if opts.workers == "threads" else 3.0)
    specs = [ClientSpec(stack.host, port, opts.database, f"bench-skip-{path}-{i}", "skip", path, tuple(stmts), start_at)
             for i, stmts in enumerate(skip)]
    _say(f"{path}: {opts.clients} clients x {opts.queries} skipping statements ...")
    results, cpu_s = run_clients(specs, opts.workers)
    wall = max((r.started_s + r.latency_ms / 1000 for r in results), default=0.0)
    return _Phase(results, cpu_s, wall)


def _probe(stack: LoadStack, port: int, path: str, opts: LoadOptions, heavy: list[tuple[str, str]]) -> _Phase:
    """``SELECT 1`` back to back alone, then beside the heavy clients (which start a second before the probe
    and stop when it does)."""
    _say(f"{path}: SELECT 1 for {opts.probe_seconds:g} s alone, then beside {opts.heavy_clients} heavy clients ...")
    now = time.time()
    idle = ClientSpec(stack.host, port, opts.database, f"bench-probe-{path}", "probe-idle", path,
                      (("select1", "SELECT 1"),), now + 0.5, now + 0.5 + opts.probe_seconds)
    alone, cpu_idle = run_clients([idle], "threads")
    start_at = time.time() + (1.0 if opts.workers == "threads" else 3.0)
    until = start_at + 1.0 + opts.probe_seconds
    specs = [ClientSpec(stack.host, port, opts.database, f"bench-heavy-{path}-{i}", "heavy", path,
                        tuple(heavy[i % len(heavy):] + heavy[:i % len(heavy)]), start_at, until)
             for i in range(opts.heavy_clients)]
    specs.append(ClientSpec(stack.host, port, opts.database, f"bench-probe-{path}", "probe-heavy", path,
                            (("select1", "SELECT 1"),), start_at + 1.0, until))
    beside, cpu_s = run_clients(specs, opts.workers)
    for name, rs in (("alone", alone), ("beside heavy rewrites", [r for r in beside if r.phase == "probe-heavy"])):
        s = Summary.of([r.latency_ms for r in rs if not r.error], sum(1 for r in rs if r.error))
        _say(f"{path}: SELECT 1 {name}: {s.count} runs, p50 {s.p50:.1f} ms, p95 {s.p95:.1f} ms, max {s.max:.1f} ms")
    return _Phase(alone + beside, cpu_idle + cpu_s, opts.probe_seconds * 2 + 1.0)


def _check_rewrites(stack: LoadStack, log_start: int) -> None:
    """After the warm-up: the proxy must have rewritten the skipping statements, or the run measures a proxy
    that skips nothing (statistics missing or stale); say so loudly, and how to fix it."""
    records = _records(stack.decision_log, log_start)
    if records is None:
        return
    skips = [r for r in records if r.get("user") == "bench-warmup-proxy" and "l_shipdate" in r.get("statement", "")]
    if not any(r.get("decision", {}).get("changed") for r in skips):
        outcomes = sorted({r.get("outcome", "?") for r in skips})
        log.warning("the proxy rewrote none of the warm-up's lineitem statements (outcomes: %s): are the "
                    "statistics collected? python -m stats collect <database>.lineitem, or bench generate ... "
                    "--collect-stats 20", ", ".join(outcomes) or "no records")


def _records(decision_log: Path | None, start: int) -> list[dict[str, Any]] | None:
    """The decision log's records written since byte ``start``; None when the log is not known."""
    if decision_log is None or not decision_log.is_file():
        return None
    data = decision_log.read_bytes()
    data = data[start:] if len(data) >= start else data  # rotated meanwhile: all of it is this run's
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def write_csv(path: Path, results: Sequence[Result]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow([f.name for f in dataclasses.fields(Result)])
        for r in results:
            w.writerow([r.phase, r.path, r.client, r.kind, f"{r.started_s:.3f}", f"{r.latency_ms:.2f}", r.rows, r.error])


def read_csv(path: Path) -> list[Result]:
    with path.open() as f:
        return [Result(r["phase"], r["path"], r["client"], r["kind"], float(r["started_s"]), float(r["latency_ms"]),
                       int(r["rows"]), r["error"]) for r in csv.DictReader(f)]


def summaries(results: Sequence[Result]) -> dict[tuple[str, str], Summary]:
    """(phase, path) -> Summary of its statements (the heavy phase's probe and heavy statements apart)."""
    groups: dict[tuple[str, str], list[Result]] = {}
    for r in results:
        groups.setdefault((r.phase, r.path), []).append(r)
    return {key: Summary.of([r.latency_ms for r in rs if not r.error], sum(1 for r in rs if r.error))
            for key, rs in groups.items()}


def rewrite_share(results: Sequence[Result], records: Sequence[dict[str, Any]], phase: str) -> tuple[float, float, float]:
    """The proxy's time for the ``phase``'s statements through it, from its decision log: (rewrite ms summed over
    statements / client latency summed, rewrite p50 ms, catalog check p50 ms). The clients are known by user."""
    users = {r.client for r in results if r.phase == phase and r.path == "proxy"}
    mine = [r for r in records if r.get("user") in users]
    rewrite = [float(r["decision"]["elapsed_ms"]) for r in mine if r.get("decision")]
    catalog = [float(r.get("catalog_check_ms") or 0.0) for r in mine]
    latency = sum(r.latency_ms for r in results if r.phase == phase and r.path == "proxy" and not r.error)
    return (sum(rewrite) / latency if latency else math.nan, percentile(rewrite, 0.5), percentile(catalog, 0.5))


def report(results: Sequence[Result], records: Sequence[dict[str, Any]] | None, opts: LoadOptions,
           when: datetime.datetime, load_at_start: str, cpu: dict[tuple[str, str], float],
           walls: dict[tuple[str, str], float], csv_path: Path, png: Path | None) -> str:
    s = summaries(results)
    empty = Summary.of([])
    rows = []
    for phase, what in (("skip", "skipping statements (`lineitem`, one week of `l_shipdate`)"),
                        ("probe-idle", "`SELECT 1`, alone"),
                        ("probe-heavy", f"`SELECT 1`, beside {opts.heavy_clients} heavy clients"),
                        ("heavy", f"heavy: `partsupp` by an IN list of {opts.heavy_literals:,} keys")):
        for path in PATHS:
            rows.append(f"| {what} | {path} | {s.get((phase, path), empty).cells()} |")
    rate = {p: s.get(("skip", p), empty).count / walls[p, "skip"] if walls.get((p, "skip")) else math.nan for p in PATHS}
    cpu_share = {k: cpu[k] / walls[k] if walls.get(k) else math.nan for k in cpu}
    if records is not None:
        share, rw50, cc50 = rewrite_share(results, records, "skip")
        _, heavy_rw50, heavy_cc50 = rewrite_share(results, records, "heavy")
        _, probe_rw50, _ = rewrite_share(results, records, "probe-heavy")
        rewritten = sum(1 for r in records if str(r.get("user", "")).startswith("bench-skip-proxy")
                        and r.get("decision", {}).get("changed"))
        decisions = (f"From the proxy's decision log: its rewriter took **{share:.1%}** of its skipping clients' "
                     f"summed latency (p50 {rw50:.1f} ms a statement; the catalog check, a round trip to Spark "
                     f"before a rewritten statement is sent, p50 {cc50:.1f} ms); {rewritten} of "
                     f"{s.get(('skip', 'proxy'), empty).count} skipping statements were rewritten. A heavy "
                     f"statement's rewrite took p50 {heavy_rw50:.1f} ms (catalog check {heavy_cc50:.1f} ms), "
                     f"`SELECT 1`'s p50 {probe_rw50:.2f} ms.")
    else:
        decisions = "The proxy's decision log was not given (`--decision-log`), so its rewrite time is not reported."
    probe = {p: (s.get(("probe-idle", p), empty), s.get(("probe-heavy", p), empty)) for p in PATHS}
    slow = {p: probe[p][1].p50 / probe[p][0].p50 if probe[p][0].p50 else math.nan for p in PATHS}
    plot = f"\n![latency]({png.relative_to(opts.output.parent)})\n" if png else ""
    return f"""Measured {when:%Y-%m-%d %H:%M} UTC on {machine()}, commit {commit()}, by `{opts.command()}`
({opts.database}; clients as {opts.workers} of the benchmark's process; the stack {'attached at ports ' +
f'{opts.proxy_port}/{opts.backend_port}' if opts.proxy_port else 'started by the run: server.py, embedded Spark and the proxy in one process'}).
Load average at the start: **{load_at_start}** (1 / 5 / 15 min). The machine is shared with other engineers'
Spark tests, so absolute numbers are noisy; paths ran one after the other, each after a warm-up of
{opts.warmup} statements. Raw results: [{csv_path.name}]({csv_path.relative_to(opts.output.parent)}).

| statements | path | statements | errors | p50 ms | p95 ms | max ms |
|---|---|---:|---:|---:|---:|---:|
{chr(10).join(rows)}

Skipping load: {rate['direct']:.2f} statements/s directly, {rate['proxy']:.2f} through the proxy
({opts.clients} clients x {opts.queries} statements). {decisions}

`SELECT 1` beside heavy rewrites against alone, p50: {slow['direct']:.2f}x directly, {slow['proxy']:.2f}x through
the proxy. CPU the clients used, as a share of one core: skipping phase {cpu_share.get(('direct', 'skip'), math.nan):.0%}
directly, {cpu_share.get(('proxy', 'skip'), math.nan):.0%} through the proxy; probe phases
{cpu_share.get(('direct', 'probe'), math.nan):.0%} / {cpu_share.get(('proxy', 'probe'), math.nan):.0%}.
{plot}"""


def _plot(results: Sequence[Result], path: Path) -> Path | None:
    """Latency CDFs: the skipping statements per path, and SELECT 1 alone and beside heavy rewrites."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    panels: list[tuple[Any, str, list[tuple[str, Callable[[Result], bool]]]]] = [
        (axes[0], "skipping statements", [(p, lambda r, p=p: r.phase == "skip" and r.path == p) for p in PATHS]),
        (axes[1], "SELECT 1", [(f"{p}, {w}", lambda r, p=p, ph=ph: r.phase == ph and r.path == p)
                               for p in PATHS for w, ph in (("alone", "probe-idle"), ("beside heavy", "probe-heavy"))]),
    ]
    for ax, title, series in panels:
        for label, keep in series:
            values = sorted(r.latency_ms for r in results if keep(r) and not r.error)
            if values:
                ax.plot(values, [(i + 1) / len(values) for i in range(len(values))], label=label)
        ax.set_xscale("log")
        ax.set_xlabel("latency (ms)")
        ax.set_ylabel("share of statements")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _cpu(process: psutil.Process) -> float:
    t = process.cpu_times()
    return t.user + t.system + t.children_user + t.children_system


def _size(path: Path | None) -> int:
    return path.stat().st_size if path is not None and path.is_file() else 0


def _first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0][:300]


def _say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)

