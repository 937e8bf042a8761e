"""Latency summaries of the load benchmarks (``bench proxy``, ``bench soak``): percentiles by nearest rank.

Nearest rank (the smallest value with at least q of the values at or below it) is used, never interpolation:
a reported p95 is then a latency some statement really had, and a p95 of 20 values is their 19th, which a
reader can check in the run's CSV by hand.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (0 < q <= 1) of ``values``; NaN for no values."""
    if not 0 < q <= 1:
        raise ValueError(f"a quantile is in (0, 1], not {q}")
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclasses.dataclass(frozen=True)
class Summary:
    """What the report shows of one path's statements: how many ran, how many failed, and the latencies (ms)
    of those that succeeded. A failed statement's time is not a latency (it may have failed at once)."""

    count: int
    errors: int
    p50: float
    p95: float
    max: float
    mean: float

    @classmethod
    def of(cls, latencies_ms: Iterable[float], errors: int = 0) -> Summary:
        values = list(latencies_ms)
        return cls(count=len(values) + errors, errors=errors, p50=percentile(values, 0.5),
                   p95=percentile(values, 0.95), max=max(values, default=math.nan),
                   mean=sum(values) / len(values) if values else math.nan)

    def cells(self) -> str:
        """Markdown cells: statements | errors | p50 | p95 | max (ms)."""
        return f"{self.count} | {self.errors} | {_ms(self.p50)} | {_ms(self.p95)} | {_ms(self.max)}"


def _ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:,.1f}"
