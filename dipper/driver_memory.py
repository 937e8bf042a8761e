"""How much memory the embedded backend's Spark driver gets (``backend.driver_memory``).

The embedded backend runs Spark in local mode, so its driver JVM is also its only executor: its heap is what every
query has. A fixed default is wrong on most machines (too much for a 4 GB laptop, a waste of a 64 GB server),
so the default is ``"auto"``, sized from the memory this process may use by one rule:

    a quarter of the memory available, at least 1 GiB, at most 31 GiB, rounded down to whole MiB.

- **A quarter** is the JVM's own default maximum heap (``-XX:MaxRAMPercentage=25``) and leaves the rest to what
  shares the machine with the heap: the JVM's memory outside it (metaspace, threads, Parquet's and Netty's direct
  buffers), the Python process (the proxy, the statistics it loads, pyarrow), and the page cache that keeps the
  warehouse's Parquet files hot, which is what file skipping makes the most of.
- **At least 1 GiB**: Spark refuses a heap below 450 MiB outright, and one much above that still fails on an
  ordinary join; a machine with less than 4 GiB is better served by a driver that can run a query.
- **At most 31 GiB**: above 32 GiB the JVM can no longer compress its object pointers, so a heap of 32 to about
  40 GiB holds fewer objects than one of 31 GiB; a larger driver is a deliberate choice, made by setting a value.
- **The memory available** is the smaller of the physical memory and the limit of the control group the
  process runs in (a container's ``--memory``): sizing from the host's memory inside a container would get the
  driver killed by the kernel's OOM killer instead of failing with an error.

An explicit value (``"4g"``, ``"3584m"``) is passed to Spark as it is, after checking it is one Spark reads as
intended: a whole number with a unit, at least 512 MiB.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from dipper.errors import ConfigError

MIB = 1 << 20
GIB = 1 << 30
AUTO_SHARE = 4  # a quarter of the memory available
AUTO_MIN = 1 * GIB
AUTO_MAX = 31 * GIB
EXPLICIT_MIN = 512 * MIB
_UNITS = {"k": 1 << 10, "kb": 1 << 10, "m": MIB, "mb": MIB, "g": GIB, "gb": GIB, "t": 1 << 40, "tb": 1 << 40}
# Control-group memory limits (v2, then v1); "max" or a huge number means none.
CGROUP_LIMITS = (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"))


def driver_memory(value: str, available: int | None = None) -> str:
    """The value of ``spark.driver.memory`` for ``backend.driver_memory = value``: ``"auto"`` sized by the rule
    of this module from ``available`` bytes (default: :func:`available_memory`), else ``value`` once checked.
    Raises :class:`ConfigError` naming the key and the fix for a value Spark would misread or refuse."""
    text = value.strip().lower()
    if text == "auto":
        return auto_driver_memory(available_memory() if available is None else available)
    match = re.fullmatch(r"(\d+)([a-z]+)", text)
    if match is None or match.group(2) not in _UNITS:
        raise ConfigError(f"backend.driver_memory must be \"auto\" (a quarter of this machine's memory, 1g to 31g) "
                          f"or a whole size with a unit such as 4g or 3584m, not {value!r}")
    size = int(match.group(1)) * _UNITS[match.group(2)]
    if size < EXPLICIT_MIN:
        raise ConfigError(f"backend.driver_memory = {value!r} is too small for Spark (it needs a heap of at least "
                          "450 MiB); give at least 512m, or \"auto\"")
    return text


def auto_driver_memory(available: int) -> str:
    """A quarter of ``available`` bytes, at least 1 GiB, at most 31 GiB, in whole MiB (see the module's why)."""
    size = min(max(available // AUTO_SHARE, AUTO_MIN), AUTO_MAX)
    mib = size // MIB
    return f"{mib // 1024}g" if mib % 1024 == 0 else f"{mib}m"


def available_memory() -> int:
    """Bytes of memory this process may use: the physical memory, or its control group's limit if lower."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    limits = [limit for limit in map(_cgroup_limit, CGROUP_LIMITS) if limit is not None]
    return min([physical, *limits])


def _cgroup_limit(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and int(text) > 0 else None  # "max" (v2): no limit
