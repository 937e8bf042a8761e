"""What every Dipper command-line entry point shares: logging set-up and one-line errors."""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Callable

from dipper.errors import DipperError


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
