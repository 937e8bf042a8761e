"""What every Dipper command-line entry point shares: logging set-up and one-line errors."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dipper.config import DEFAULT_CONFIG
from dipper.errors import DipperError


def parser(prog: str, description: str, verbose: bool = True, **kwargs: Any) -> argparse.ArgumentParser:
    """An entry point's argument parser with the options every command shares: ``--config`` and, unless
    ``verbose`` is False, ``-v``."""
    p = argparse.ArgumentParser(prog=prog, description=description, **kwargs)
    p.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="configuration file (default: %(default)s)")
    if verbose:
        p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return p


def setup_logging(verbose: bool = False) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S", stream=sys.stderr)
    for noisy in ("py4j", "pyhive", "thrift"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def run(main: Callable[[], int | None]) -> None:
    """Run ``main`` and exit with its code; a :class:`DipperError` becomes one line on stderr and exit 1."""
    # SIGTERM unwinds like Ctrl-C, so `finally` blocks remove temporary output and stop Spark cleanly.
    signal.signal(signal.SIGTERM, _terminate)
    try:
        code = main()
    except DipperError as e:
        print(f"error: {e}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        code = 130
    sys.exit(code or 0)


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
