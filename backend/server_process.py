"""Run ``server.py`` as a background process: start it, wait until it serves, find it again, stop it.

Used by ``make demo`` / ``make stop`` and by the tests that restart the server. The server writes its pid
to ``<logs>/server.pid`` once it is ready and removes it on a clean stop; its output goes to
``<logs>/server.log``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from dipper.config import REPO_ROOT, Config
from dipper.environment import port_open
from dipper.errors import BackendError

START_TIMEOUT = 240.0


def pid_file(config: Config) -> Path:
    return config.paths.logs / "server.pid"


def log_file(config: Config) -> Path:
    return config.paths.logs / "server.log"


def running_pid(config: Config) -> int | None:
    """The pid of a live server recorded in the pid file, or None (a stale pid file is removed)."""
    path = pid_file(config)
    try:
        pid = int(path.read_text().strip())
        os.kill(pid, 0)
    except (FileNotFoundError, ValueError):
        return None
    except ProcessLookupError:
        path.unlink(missing_ok=True)
        return None
    return pid


def start_server(config: Config, config_path: Path, env: dict[str, str] | None = None,
                 timeout: float = START_TIMEOUT, args: tuple[str, ...] = ()) -> subprocess.Popen[bytes]:
    """Start ``server.py`` detached from this process group and wait until it serves: the proxy's port
    answers (the backend's with ``--no-proxy``)."""
    config.paths.logs.mkdir(parents=True, exist_ok=True)
    with open(log_file(config), "ab") as out:
        proc = subprocess.Popen([sys.executable, str(REPO_ROOT / "server.py"), "--config", str(config_path), *args],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, start_new_session=True)
    host, port = (config.backend.host, config.backend.port) if "--no-proxy" in args else \
        (config.proxy.host, config.proxy.port)
    deadline = time.monotonic() + timeout
    while not (pid_file(config).is_file() and port_open(host, port)):
        if proc.poll() is not None:
            tail = log_file(config).read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
            raise BackendError(f"server.py exited with code {proc.returncode}: {tail[0]} (full log: {log_file(config)})")
        if time.monotonic() > deadline:
            proc.terminate()
            raise BackendError(f"server.py did not become ready within {timeout:.0f}s (log: {log_file(config)})")
        time.sleep(0.5)
    return proc


def stop_server(pid: int, timeout: float = 60.0) -> None:
    """SIGTERM (the server stops Spark cleanly), then SIGKILL if it has not exited within ``timeout``."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        _reap(pid)
        time.sleep(0.3)
    os.kill(pid, signal.SIGKILL)


def _reap(pid: int) -> None:
    """Collect the exit status if ``pid`` is our own child, so it does not linger as a zombie."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
