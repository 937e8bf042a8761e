"""What a client connection needs of the proxy that serves it (``proxy/server.py``), as a protocol: the
connection modules depend on this, not on the server, so the server imports them and nothing imports it back."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from dipper.config import Config
from proxy.decision_log import DecisionLog
from proxy.metrics import Metrics
from rewriter.exact_keys import KeyCache
from rewriter.spark.zones import ZoneRules
from stats.loader import StatsLoader

if TYPE_CHECKING:
    from proxy.refusal import Refusals


class ProxyHost(Protocol):
    config: Config
    stats: StatsLoader
    key_cache: KeyCache  # rows read for exact keys, shared by every session
    zone_rules: ZoneRules  # per session time zone: are Python's rules the backend's? (rewriter/spark/zones.py)
    decision_log: DecisionLog
    metrics: Metrics
    tls: ssl.SSLContext | None
    refusals: Refusals  # answers connections over proxy.max_connections (proxy/refusal.py)
    stopping: threading.Event  # set when the proxy shuts down
    drain_deadline: float  # monotonic time by which connections finish their open operations
    # Drops the statistics of tables (only those of the given locations, if given); returns the tables dropped.
    forget_statistics: Callable[[list[str], dict[str, str] | None], list[str]]

    def forget(self, conn: Any) -> None:
        """The connection ``conn`` has ended."""
