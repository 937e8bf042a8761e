"""Checks of the machine that entry points run before doing any work, each failing with one clear line."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import uuid
from collections.abc import Mapping
from pathlib import Path

from dipper.errors import EnvironmentProblem

MIN_JAVA = 17
JAVA_INSTALL_HINT = "install it with: apt-get install -y openjdk-17-jre-headless"


def java_executable(environ: Mapping[str, str]) -> str:
    """The java binary Spark will use (``$JAVA_HOME/bin/java``, else ``java`` on PATH), checked to be 17+."""
    home = environ.get("JAVA_HOME")
    candidate = str(Path(home) / "bin" / "java") if home else shutil.which("java", path=environ.get("PATH", ""))
    if not candidate or not os.access(candidate, os.X_OK):
        where = f"JAVA_HOME={home}" if home else "PATH"
        raise EnvironmentProblem(f"Java {MIN_JAVA}+ is required but no java was found on {where}; {JAVA_INSTALL_HINT}")
    out = subprocess.run([candidate, "-version"], capture_output=True, text=True, timeout=60)
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        raise EnvironmentProblem(f"could not read the version of {candidate}; Java {MIN_JAVA}+ is required; {JAVA_INSTALL_HINT}")
    major = int(match.group(1))
    if major == 1:  # "1.8.0_392" style
        major = int(match.group(2) or 0)
    if major < MIN_JAVA:
        raise EnvironmentProblem(f"Java {MIN_JAVA}+ is required but {candidate} is Java {major}; {JAVA_INSTALL_HINT}")
    return candidate


def ensure_writable_dir(path: Path, what: str) -> Path:
    """Create ``path`` if needed and prove it is writable by creating and removing a file in it."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".write-test-{uuid.uuid4().hex}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise EnvironmentProblem(f"{what} directory {path} is not writable: {e.strerror or e}") from None
    return path


def ensure_port_free(host: str, port: int, what: str) -> None:
    """Fail with one line if something already listens on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            raise EnvironmentProblem(f"{what} port {host}:{port} is already in use ({e.strerror}); "
                                     f"stop the other process or choose another port") from None


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago (for tests and private backend ports)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
