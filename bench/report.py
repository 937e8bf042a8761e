"""Write a benchmark run to its folder: ``results.csv``, ``README.md`` (summary and per-query table) and
PNG plots (CDF of INPUTCUT as in seed 000 Fig. 14, per-query bars, CDF of rewrite latency). After each
run the statistics comparison of its suite and layout (seed 000 Fig. 16) is redrawn from every sibling
folder that measured another statistics spec: ``<suite>-<layout>-statistics.png`` and ``.md``.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import platform
from pathlib import Path

import numpy as np

from bench.execute import DEFAULT_VARIANTS, VARIANTS, Measurement

LABELS = {"spark": "Spark", "spark-nodpp": "Spark-noDPP", "preds": "Preds", "dipper": "Dipper",
          "dipper-cols": "Dipper+cols"}
COLORS = {"spark": "#4c72b0", "spark-nodpp": "#8c8c8c", "preds": "#dd8452", "dipper": "#55a868",
          "dipper-cols": "#c44e52"}
CUT_CAP = 1000.0  # an INPUTCUT of infinity (nothing read) is drawn here
RUN_FILE = "run.json"
# The layout of a run over a database taken from the catalog as it is (``bench run --database``), such as the
# copy ``bench layout-effect`` lays out, rather than over a dataset ``bench generate`` made.
CATALOG = "catalog"
NO_GAIN = 1.1  # below this INPUTCUT a query "gains nothing" and its note says why
FIELDS = ["query", "variant", "files_read", "bytes_read", "bytes_input", "rows_scanned", "inputcut", "seconds", "runs",
          "rewrite_ms", "dips_built", "dips_naive", "naive_same", "identical", "rewrite_error", "note", "cpu_seconds"]


@dataclasses.dataclass(frozen=True)
class RunInfo:
    suite: str
    sf: float
    layout: str
    stats: str
    database: str
    files: int
    bytes: int
    repeat: int
    warmup: bool
    spark_version: str
    when: str
    peak_rss_mb: float
    queries: list[str] | None = None
    variants: list[str] | None = None  # None: all four (runs recorded before this field existed ran all four)

    @property
    def command(self) -> str:
        q = f" --queries {','.join(self.queries)}" if self.queries else ""
        v = f" --variants {','.join(self.variants)}" if self.variants and tuple(self.variants) != DEFAULT_VARIANTS else ""
        where = f"--database {self.database}" if self.layout == CATALOG else f"--layout {self.layout}"
        return (f"python -m bench run --suite {self.suite} --sf {self.sf:g} {where} "
                f"--stats {self.stats}{q}{v} --repeat {self.repeat}{'' if self.warmup else ' --no-warmup'}")

    @property
    def label(self) -> str:
        return run_label(self.layout, self.database)


def run_label(layout: str, database: str) -> str:
    """What a run's folder (``<suite>-<label>-<stats>``) and its statistics comparison are named by: the
    layout of a generated dataset (``random:1`` -> ``random1``), or the name of a catalog database."""
    return database if layout == CATALOG else layout.replace(":", "")


def machine() -> str:
    import psutil

    cpu = platform.processor() or platform.machine()
    info = Path("/proc/cpuinfo")
    if info.is_file():
        cpu = next((line.split(":", 1)[1].strip() for line in info.read_text().splitlines()
                    if line.startswith("model name")), cpu)
    return (f"{platform.system()} {platform.machine()} ({cpu}), {os.cpu_count()} cores, "
            f"{psutil.virtual_memory().total / 2**30:.0f} GiB RAM")


def write_report(folder: Path, info: RunInfo, ms: list[Measurement]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / RUN_FILE).write_text(json.dumps(dataclasses.asdict(info), indent=2) + "\n")
    _write_csv(folder / "results.csv", ms)
    variants = [v for v in VARIANTS if any(m.variant == v for m in ms)]
    _plots(folder, ms, variants)
    (folder / "README.md").write_text(_markdown(info, ms, variants))
    compare_statistics(folder.parent, info.suite, info.label)
    return folder


def _write_csv(path: Path, ms: list[Measurement]) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, FIELDS)
        w.writeheader()
        for m in ms:
            # Floats are written in full (Python's repr round-trips exactly), so a run rendered again from its
            # CSV shows the very digits of the first rendering.
            w.writerow({k: getattr(m, k) for k in FIELDS})


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def load_run(folder: Path) -> tuple[RunInfo, list[Measurement]]:
    """A run as written by :func:`write_report`, to render it again without running it again."""
    from dipper.errors import DatasetError

    if not (folder / RUN_FILE).is_file() or not (folder / "results.csv").is_file():
        raise DatasetError(f"{folder} holds no benchmark run ({RUN_FILE} and results.csv); python -m bench run writes them")
    info = RunInfo(**json.loads((folder / RUN_FILE).read_text()))
    types = {f.name: f.type for f in dataclasses.fields(Measurement)}

    def value(name: str, text: str) -> object:
        kind = types[name]
        return text == "True" if kind in ("bool", bool) else int(text) if kind in ("int", int) else \
            float(text) if kind in ("float", float) else text

    ms = [Measurement(**{k: value(k, v) for k, v in row.items() if k in types}) for row in read_csv(folder / "results.csv")]
    return info, ms


def by_variant(ms: list[Measurement]) -> dict[str, dict[str, Measurement]]:
    out: dict[str, dict[str, Measurement]] = {}
    for m in ms:
        out.setdefault(m.variant, {})[m.query] = m
    return out


def summary(ms: list[Measurement], variants: list[str]) -> dict[str, dict[str, float]]:
    """Per variant: the fractions and medians the paper reports, and speed-up over plain Spark."""
    table = by_variant(ms)
    spark = table.get("spark", {})
    out = {}
    for v in variants:
        rows = table[v]
        cut = np.array([m.inputcut for m in rows.values()])
        timed = [q for q, m in rows.items() if q in spark and m.seconds > 0]
        speedup = np.array([spark[q].seconds / rows[q].seconds for q in timed])
        cut_of = {q: rows[q].inputcut for q in timed}
        cpu = np.array([spark[q].cpu_seconds / rows[q].cpu_seconds for q in timed if rows[q].cpu_seconds > 0])

        def median_speedup(keep) -> float:  # noqa: ANN001 - a predicate on INPUTCUT
            chosen = [s for q, s in zip(timed, speedup) if keep(cut_of[q])]
            return float(np.median(chosen)) if chosen else math.nan

        out[v] = {
            "speedup_ge2": median_speedup(lambda c: c >= 2),
            "speedup_none": median_speedup(lambda c: c < NO_GAIN),
            "n_ge2": float(sum(c >= 2 for c in cut_of.values())), "n_none": float(sum(c < NO_GAIN for c in cut_of.values())),
            "cpu": float(sum(m.cpu_seconds for m in rows.values())),
            "median_cpu_ratio": float(np.median(cpu)) if len(cpu) else math.nan,
            "median_cut": float(np.median(cut)),
            "ge2": float((cut >= 2).mean()), "ge8": float((cut >= 8).mean()), "ge10": float((cut >= 10).mean()),
            "skip33": float((cut >= 1.5).mean()),  # skipping >= 33% of input <=> INPUTCUT >= 1.5
            "median_speedup": float(np.median(speedup)) if len(speedup) else math.nan,
            "geomean_speedup": float(np.exp(np.log(speedup).mean())) if len(speedup) else math.nan,
            "seconds": float(sum(m.seconds for m in rows.values())),
            "rows": float(sum(m.rows_scanned for m in rows.values())),
            "identical": float(sum(m.identical for m in rows.values())), "queries": float(len(rows)),
        }
    return out


def _fmt_ratio(x: float) -> str:
    return "— (Spark not timed)" if math.isnan(x) else f"{x:.2f}x"


def _fmt_class(speedup: float, n: float) -> str:
    """A median speed-up over a class of queries, with its size; a class without a query says so."""
    return "— (no query)" if n == 0 else f"{_fmt_ratio(speedup)} ({n:.0f} queries)"


def _fmt_cut(x: float) -> str:
    return "all skipped" if math.isinf(x) else f"{x:.2f}x"


def _markdown(info: RunInfo, ms: list[Measurement], variants: list[str]) -> str:
    s = summary(ms, variants)
    table = by_variant(ms)
    head = "| | " + " | ".join(LABELS[v] for v in variants) + " |"
    sep = "|---|" + "---:|" * len(variants)

    def row(label: str, fmt) -> str:  # noqa: ANN001 - a small formatter
        return f"| {label} | " + " | ".join(fmt(s[v]) for v in variants) + " |"

    lines = [
        f"# {info.suite.upper()} SF {info.sf:g}, "
        f"{f'database `{info.database}`' if info.layout == CATALOG else f'layout `{info.layout}`'}, "
        f"statistics `{info.stats}`", "",
        f"Measured {info.when} with `{info.command}` on {machine()}; Spark {info.spark_version} in local "
        f"mode, one session for every variant. Dataset `{info.database}`: {info.files} files, "
        f"{info.bytes / 1e6:.1f} MB. Wall time is the median of {info.repeat} run(s)"
        f"{' after a warm-up run' if info.warmup else ''}, rewrite time included for Preds and Dipper. "
        "Bytes and files are what Spark's scans listed (their SQL metrics); inside the files it lists, Spark's "
        "Parquet reader also skips row groups by their footer statistics, which shows only in the rows its "
        "scans produce. INPUTCUT is the size of the "
        "tables a query's scans cover divided by the bytes they read (seed 000 §5). Spark-noDPP switches off "
        "dynamic partition pruning, runtime bloom filters and adaptive execution; Preds and Dipper run with "
        "Spark's defaults, as they do behind the proxy.", "",
        "## Summary", "", head, sep,
        row("median INPUTCUT", lambda x: _fmt_cut(x["median_cut"])),
        row("queries with INPUTCUT >= 2x", lambda x: f"{x['ge2']:.0%}"),
        row("queries with INPUTCUT >= 8x", lambda x: f"{x['ge8']:.0%}"),
        row("queries with INPUTCUT >= 10x", lambda x: f"{x['ge10']:.0%}"),
        row("queries skipping >= 33% of input", lambda x: f"{x['skip33']:.0%}"),
        row("median speed-up over Spark", lambda x: _fmt_ratio(x["median_speedup"])),
        row("geometric-mean speed-up over Spark", lambda x: _fmt_ratio(x["geomean_speedup"])),
        row("median speed-up, queries with INPUTCUT >= 2x", lambda x: _fmt_class(x["speedup_ge2"], x["n_ge2"])),
        row(f"median speed-up, queries with INPUTCUT < {NO_GAIN}x", lambda x: _fmt_class(x["speedup_none"], x["n_none"])),
        row("sum of wall times", lambda x: f"{x['seconds']:.1f} s"),
        row("sum of executor CPU times", lambda x: "—" if math.isnan(x["cpu"]) else f"{x['cpu']:.1f} s"),
        row("median executor CPU saving over Spark (Spark CPU / variant CPU)", lambda x: _fmt_ratio(x["median_cpu_ratio"])),
        row("rows produced by the scans, all queries", lambda x: f"{x['rows'] / 1e6:.1f} M"),
        row("rows identical to Spark", lambda x: f"{x['identical']:.0f}/{x['queries']:.0f}"),
        "",
    ]
    for v in ("preds", "dipper"):
        if v in table:
            ms_v = np.array([m.rewrite_ms for m in table[v].values()])
            built = np.array([m.dips_built for m in table[v].values()])
            naive = np.array([m.dips_naive for m in table[v].values()])
            same = sum(m.naive_same for m in table[v].values())
            lines.append(f"{LABELS[v]} rewrite time: p50 {np.median(ms_v):.1f} ms, p95 {np.percentile(ms_v, 95):.1f} ms, "
                         f"max {ms_v.max():.1f} ms" + (
                             f"; diPs built per query: median {np.median(built):.0f}, max {built.max()}, total "
                             f"{built.sum()} (the naive schedule, every edge both ways until nothing changes, builds "
                             f"{naive.sum()}: median {np.median(naive):.0f}, max {naive.max()}; same files kept in {same} of "
                             f"{len(table[v])} queries)"
                             if v == "dipper" else "") + ".")
    failed = sorted({m.query for m in ms if m.rewrite_error})
    lines += ["", f"Peak resident memory of the benchmark's Python process (statistics and rewriter; Spark runs "
              f"in its own JVM): {info.peak_rss_mb:.0f} MB."
              + (f" The rewriter failed open on: {', '.join(failed)}." if failed else ""), "",
              "## Per query", "",
              "MB read and wall seconds per variant; INPUTCUT and speed-up of Dipper over Spark; for a query "
              f"where Dipper's INPUTCUT is below {NO_GAIN}x, why (seed 000 §2.1 conditions C1-C3, from the "
              "decision record).", ""]
    cols = " | ".join(f"{LABELS[v]} MB | s | CPU s" for v in variants)
    lines += [f"| query | {cols} | cut | speed-up | diPs (naive) | rewrite ms | same rows | why no gain |",
              "|---|" + "---:|---:|---:|" * len(variants) + "---:|---:|---:|---:|---|---|"]
    best = "dipper" if "dipper" in table else variants[-1]
    for q in sorted(table[variants[0]]):
        cells = " | ".join(f"{table[v][q].bytes_read / 1e6:.1f} | {table[v][q].seconds:.2f} | {table[v][q].cpu_seconds:.2f}"
                           for v in variants)
        m = table[best][q]
        sp = table["spark"][q].seconds / m.seconds if "spark" in table and m.seconds else math.nan
        speedup = "—" if math.isnan(sp) else f"{sp:.2f}x"
        same = all(table[v][q].identical for v in variants)
        why = m.note if m.inputcut < NO_GAIN else ""
        lines.append(f"| {q} | {cells} | {_fmt_cut(m.inputcut)} | {speedup} | {m.dips_built} ({m.dips_naive}) | {m.rewrite_ms:.1f} | "
                     f"{'yes' if same else '**NO**'} | {why} |")
    lines += ["", "## Plots", "", "![CDF of INPUTCUT](inputcut_cdf.png)", "", "![per query](per_query.png)", "",
              "![CDF of rewrite latency](rewrite_latency_cdf.png)", "",
              "![executor CPU against bytes read](cpu_vs_bytes.png)", ""]
    return "\n".join(lines)


def _plots(folder: Path, ms: list[Measurement], variants: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = by_variant(ms)
    queries = sorted(table[variants[0]])

    _cdf_figure(folder / "inputcut_cdf.png", [([min(m.inputcut, CUT_CAP) for m in table[v].values()], v) for v in variants],
                "INPUTCUT (input bytes / bytes read), log scale", "fraction of queries with INPUTCUT <= x",
                "CDF of INPUTCUT (cf. seed 000 Fig. 14)")

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(max(8.0, 0.32 * len(queries) * len(variants) / 2), 7), sharex=True)
    x = np.arange(len(queries))
    width = 0.8 / len(variants)
    for i, v in enumerate(variants):
        top.bar(x + i * width, [table[v][q].bytes_read / max(table[v][q].bytes_input, 1) for q in queries], width,
                label=LABELS[v], color=COLORS[v])
        if v != "spark" and "spark" in table:
            bottom.bar(x + i * width, [table["spark"][q].seconds / table[v][q].seconds for q in queries], width,
                       label=LABELS[v], color=COLORS[v])
    top.set_ylabel("fraction of input read")
    top.legend(ncol=len(variants), fontsize=8)
    bottom.axhline(1.0, color="black", linewidth=0.8)
    bottom.set_ylabel("speed-up over Spark")
    bottom.set_xticks(x + 0.4 - width / 2, queries, rotation=90, fontsize=7)
    top.set_title("Per query: fraction of input bytes read (1 / INPUTCUT) and speed-up")
    fig.tight_layout()
    fig.savefig(folder / "per_query.png", dpi=110)
    plt.close(fig)

    _cpu_figure(folder / "cpu_vs_bytes.png", table, variants)
    _cdf_figure(folder / "rewrite_latency_cdf.png",
                [([max(m.rewrite_ms, 0.01) for m in table[v].values()], v) for v in ("preds", "dipper") if v in table],
                "rewrite time (ms), log scale", "fraction of queries", "CDF of rewrite latency")


def _cpu_figure(path: Path, table: dict[str, dict[str, Measurement]], variants: list[str]) -> None:
    """Per query and variant, executor CPU time and bytes read relative to plain Spark's: the points of a
    variant that reads less should lie below 1 on both axes."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    spark = table.get("spark", {})
    for v in variants:
        if v == "spark":
            continue
        pts = [(m.bytes_read / spark[q].bytes_read, m.cpu_seconds / spark[q].cpu_seconds) for q, m in table[v].items()
               if q in spark and spark[q].bytes_read and spark[q].cpu_seconds > 0 and m.cpu_seconds > 0]
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=14, label=LABELS[v], color=COLORS[v], alpha=0.8)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("bytes read / Spark's bytes read, log scale")
    ax.set_ylabel("executor CPU / Spark's executor CPU, log scale")
    ax.set_title("Per query: executor CPU time against bytes read")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _cdf_figure(path: Path, series: list[tuple[list[float], str]], xlabel: str, ylabel: str, title: str) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    for values, variant in series:
        _cdf(ax, values, LABELS[variant], COLORS[variant])
    ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _cdf(ax, values: list[float], label: str, color: str) -> None:  # noqa: ANN001 - a matplotlib Axes
    xs = np.sort(np.asarray(values, dtype=float))
    ax.step(xs, np.arange(1, len(xs) + 1) / len(xs), where="post", label=label, color=color)


def _spec_order(spec: str) -> tuple[int, int]:
    return (0, 0) if spec == "zonemap" else (1, int(spec.removeprefix("rangeset")))


def compare_statistics(parent: Path, suite: str, layout: str) -> None:
    """Redraw the statistics comparison of one suite and layout from every folder measured for it."""
    prefix = f"{suite}-{layout}-"
    runs = {}
    for d in sorted(parent.glob(prefix + "*")):
        spec = d.name[len(prefix):]
        if d.is_dir() and (d / "results.csv").is_file() and (spec == "zonemap" or spec.startswith("rangeset")):
            runs[spec] = read_csv(d / "results.csv")
    if len(runs) < 2:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    order = sorted(runs, key=_spec_order)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    lines = [f"# {suite.upper()} `{layout}`: which statistics", "",
             "INPUTCUT with each kind of statistic (cf. seed 000 Fig. 16), from the runs in the folders beside "
             "this file; each folder's README gives its date, scale and machine.", "",
             "| statistics | variant | median INPUTCUT | >= 2x | >= 10x | skipping >= 33% |", "|---|---|---:|---:|---:|---:|"]
    for ax, variant in zip(axes, ("preds", "dipper")):
        for spec in order:
            cut = np.array([float(r["inputcut"]) for r in runs[spec] if r["variant"] == variant])
            if not len(cut):
                continue
            _cdf(ax, list(np.minimum(cut, CUT_CAP)), spec, None)
            lines.append(f"| {spec} | {LABELS[variant]} | {_fmt_cut(float(np.median(cut)))} | {(cut >= 2).mean():.0%} | "
                         f"{(cut >= 10).mean():.0%} | {(cut >= 1.5).mean():.0%} |")
        ax.set_xscale("log")
        ax.set_title(f"{LABELS[variant]}: CDF of INPUTCUT")
        ax.set_xlabel("INPUTCUT, log scale")
        ax.grid(alpha=0.3)
        ax.legend()
    axes[0].set_ylabel("fraction of queries with INPUTCUT <= x")
    fig.tight_layout()
    fig.savefig(parent / f"{suite}-{layout}-statistics.png", dpi=110)
    plt.close(fig)
    lines += ["", f"![statistics]({suite}-{layout}-statistics.png)", ""]
    (parent / f"{suite}-{layout}-statistics.md").write_text("\n".join(lines))
