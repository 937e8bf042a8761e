"""``python -m bench compare-runs``: `bench run` folders of one suite side by side, against the first one's
plain Spark: what a layout (or any other change between the runs) buys in wall time, CPU and bytes.

The first folder is the baseline, say the `tuned` dataset as users have it; the others are, say, the copy
``bench layout-effect`` laid out, measured with ``bench run --database``. For every variant of every run
and every query the runs share, the report gives the wall time and its speed-up over the baseline's plain
Spark, and the INPUTCUT *against the baseline's bytes*: the size of the baseline's tables the query covers
divided by what the variant read, so that a layout whose copy grew (small blocks compress worse) is charged
for it. Nothing is run; the numbers are the runs' medians as ``bench run`` recorded them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path

from bench.execute import Measurement, inputcut
from bench.report import LABELS, RunInfo, load_run
from dipper.errors import DatasetError

CLASSES = ((2.0, ">= 2x"), (10.0, ">= 10x"))


def compare(folders: Sequence[Path], output: Path) -> Path:
    """Write ``output`` (markdown) and a PNG beside it; returns the markdown's path."""
    if len(folders) < 2:
        raise DatasetError("compare-runs needs two run folders or more: the baseline first")
    runs = [load_run(f) for f in folders]
    base_info, base = runs[0]
    for info, _ in runs[1:]:
        if (info.suite, info.sf) != (base_info.suite, base_info.sf):
            raise DatasetError(f"{info.database} is {info.suite} SF {info.sf:g} and {base_info.database} "
                               f"{base_info.suite} SF {base_info.sf:g}: compare runs of one suite and scale")
    shown = _shown([info for info, _ in runs])
    columns = [(info, v, {m.query: m for m in ms if m.variant == v}, f"{LABELS[v]} on {shown[k]}")
               for k, (info, ms) in enumerate(runs) for v in dict.fromkeys(m.variant for m in ms)]
    # The baseline's plain Spark: the one column the others are measured against (compared by identity below).
    reference = next((by for info, v, by, _ in columns if info is base_info and v == "spark"), None)
    if reference is None:
        raise DatasetError(f"{folders[0]} has no plain Spark variant to compare against")
    queries = sorted(set(reference).intersection(*({m.query for m in ms} for _, ms in runs[1:])))
    if not queries:
        raise DatasetError("the runs share no query")
    lines = _summary(columns, reference, queries, runs) + _per_query(columns, reference, queries)
    output.parent.mkdir(parents=True, exist_ok=True)
    png = output.with_suffix(".png")
    _plot(png, columns, reference, queries)
    lines += ["", f"![speed-ups]({png.name})", ""]
    output.write_text("\n".join(lines))
    return output


def _shown(infos: list[RunInfo]) -> list[str]:
    """How each run is named in the report: its label, and when it was measured where two runs share a label
    (the same dataset timed again, to see what drift between hours does)."""
    labels = [info.label for info in infos]
    return [f"`{info.label}`" + (f" ({info.when})" if labels.count(info.label) > 1 else "") for info in infos]


def _cut(m: Measurement, ref: Measurement) -> float:
    return inputcut(ref.bytes_input, m.bytes_read)


def _seconds(total: float) -> str:
    return "—" if math.isnan(total) else f"{total:.1f} s"  # NaN: a run recorded before CPU time was measured


def _speedup(m: Measurement, ref: Measurement) -> float:
    return ref.seconds / m.seconds if m.seconds > 0 else math.inf


def _summary(columns, reference: dict[str, Measurement], queries: list[str],  # noqa: ANN001
             runs: list[tuple[RunInfo, list[Measurement]]]) -> list[str]:
    n = len(queries)
    head = [f"Baseline: plain Spark on `{runs[0][0].label}` ({runs[0][0].database}, {runs[0][0].files} files, "
            f"{runs[0][0].bytes / 1e6:.1f} MB). " + "; ".join(
                f"`{info.label}`: {info.database}, {info.files} files, {info.bytes / 1e6:.1f} MB, measured {info.when} "
                f"with `{info.command}`" for info, _ in runs) + ".", "",
            f"{n} queries every run measured. INPUTCUT is against the baseline's bytes (the baseline's tables a "
            "query covers / bytes the variant read); speed-up is the baseline Spark's wall time / the variant's.", "",
            "| | " + " | ".join(name for _, _, _, name in columns) + " |",
            "|---|" + "---:|" * len(columns)]

    def row(label: str, fmt) -> str:  # noqa: ANN001 - a small formatter over one column's measurements
        return f"| {label} | " + " | ".join(fmt([by[q] for q in queries]) for _, _, by, _ in columns) + " |"

    def speedups(ms: list[Measurement]) -> list[float]:
        return [_speedup(m, reference[m.query]) for m in ms]

    def cuts(ms: list[Measurement]) -> list[float]:
        return [_cut(m, reference[m.query]) for m in ms]

    body = [row("sum of wall times", lambda ms: f"{sum(m.seconds for m in ms):.1f} s"),
            row("sum of executor CPU", lambda ms: _seconds(sum(m.cpu_seconds for m in ms))),
            row("median speed-up", lambda ms: f"{statistics.median(speedups(ms)):.2f}x"),
            row("geometric-mean speed-up", lambda ms: f"{statistics.geometric_mean(speedups(ms)):.2f}x"),
            row("queries faster by >= 1.5x", lambda ms: f"{sum(s >= 1.5 for s in speedups(ms))}"),
            row("queries slower by >= 1.2x", lambda ms: f"{sum(s <= 1 / 1.2 for s in speedups(ms))}"),
            row("median INPUTCUT", lambda ms: f"{statistics.median(cuts(ms)):.2f}x")]
    body += [row(f"queries with INPUTCUT {label}", lambda ms, t=t: f"{sum(c >= t for c in cuts(ms))}")
             for t, label in CLASSES]
    body += [row("rows identical to plain Spark on the same layout", lambda ms: f"{sum(m.identical for m in ms)}/{n}")]
    return head + body + [""]


def _per_query(columns, reference: dict[str, Measurement], queries: list[str]) -> list[str]:  # noqa: ANN001
    others = [(by, name) for _, _, by, name in columns if by is not reference]
    lines = ["## Per query", "",
             "Wall seconds (median), speed-up over the baseline's plain Spark, INPUTCUT against the baseline's bytes.",
             "", "| query | baseline s | " + " | ".join(f"{name}: s, speed-up, cut" for _, name in others) + " |",
             "|---|---:|" + "---:|" * len(others)]
    for q in queries:
        ref = reference[q]
        cells = [f"{by[q].seconds:.2f}, {_speedup(by[q], ref):.2f}x, {_cut(by[q], ref):.1f}x"
                 + ("" if by[q].identical else " **DIFFERENT**") for by, _ in others]
        lines.append(f"| {q} | {ref.seconds:.2f} | " + " | ".join(cells) + " |")
    return lines


def _plot(path: Path, columns, reference: dict[str, Measurement], queries: list[str]) -> None:  # noqa: ANN001
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, (cdf, scatter) = plt.subplots(1, 2, figsize=(12, 4.5))
    for _, _, by, name in columns:
        if by is reference:
            continue
        speed = np.array([_speedup(by[q], reference[q]) for q in queries])
        cut = np.array([min(_cut(by[q], reference[q]), 1000.0) for q in queries])
        xs = np.sort(speed)
        line, = cdf.step(xs, np.arange(1, len(xs) + 1) / len(xs), where="post", label=name)
        scatter.scatter(cut, speed, s=12, color=line.get_color(), label=name)
    for ax in (cdf, scatter):
        ax.set_xscale("log")
        ax.grid(True, which="both", alpha=0.3)
    cdf.axvline(1.0, color="grey", lw=0.8)
    cdf.set_xlabel("speed-up over the baseline's plain Spark")
    cdf.set_ylabel("share of queries at or below")
    cdf.legend(fontsize=8)
    scatter.set_yscale("log")
    scatter.axhline(1.0, color="grey", lw=0.8)
    scatter.set_xlabel("INPUTCUT against the baseline's bytes (capped at 1000)")
    scatter.set_ylabel("speed-up")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
