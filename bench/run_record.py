"""Where and on what a load run ran, and how its report joins the others in a Markdown file.

The machine is shared (2 cores here, other engineers' Spark tests beside the run), so every report records
the load average when the run started: a number measured under someone else's load is still a number, but
the reader must be able to tell.
"""

from __future__ import annotations

import datetime
import os
import platform
import re
import subprocess
from pathlib import Path

import psutil

from dipper.config import REPO_ROOT


def machine() -> str:
    return f"{platform.machine()}, {psutil.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB"


def commit() -> str:
    """The checkout's commit (short), with ``+changes`` when its tracked files differ from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=False).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("+changes" if git("status", "--porcelain", "--untracked-files=no") else "")


def load_average() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def stamp(when: datetime.datetime) -> str:
    """A file-name-safe UTC time stamp, e.g. 20261207-1932."""
    return when.strftime("%Y%m%d-%H%M%S")


def append_section(path: Path, title: str, body: str, heading: str = "# Proxy measurements") -> None:
    """Add ``## title`` with ``body`` to ``path`` (created with ``heading`` if missing). A section of the same
    title is replaced, so running a report again does not stack copies; other sections stay as they are."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = path.read_text() if path.is_file() else f"{heading}\n"
    section = f"## {title}\n\n{body.strip()}\n"
    pattern = re.compile(rf"^## {re.escape(title)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text, count=1).rstrip() + "\n"
    else:
        text = text.rstrip() + "\n\n" + section
    path.write_text(text)
