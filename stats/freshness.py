"""Which of a table's current files the statistics describe (ARCHITECTURE.md §3.2, seed 000 §4.1).

A file is identified by (path, size, modification time). Listing the table's location now and comparing
with the store classifies every file: FRESH (same identity as when collected), STALE (the store describes
an older version of it, or it is gone) and UNKNOWN (on storage, not in the store). Only fresh files may be
skipped; a table with any unknown file is *tainted*: its unknown rows could join with anything, so it may
receive diPs but never originate one.

A cached listing (``Lister``, with a TTL) is safe for skipping: a skipped file is pinned by its identity,
so a file rewritten since the listing no longer matches and is read, and a file added since is not in the
skip list at all. (Runs of a layout's block files are skipped by name ranges, which also cover names added
since; ``rewriter/name_ranges.py`` says why only ``layout apply`` writes such names.) It is not safe for deciding that a table is fully covered (a file added within the TTL
would be missed); that decision needs ``list_files`` itself.

Paths are spelled as Spark spells ``_metadata.file_path`` (``file:/abs/path``, URL-encoded) and times are truncated to
milliseconds, the precision Hadoop's local file system reports, so that both sides agree.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import unicodedata
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.fs as pafs

from dipper.errors import StatsError


@dataclasses.dataclass(frozen=True)
class FileInfo:
    path: str  # as Spark reports it
    size: int
    mtime: int  # microseconds since the epoch, millisecond precision


def stored_file(row: dict) -> FileInfo:
    """The identity a store row describes (its ``path``, ``size`` and ``mtime``), comparable with a listing's."""
    return FileInfo(row["path"], row["size"], row["mtime"])


def filesystem(location: str) -> tuple[pafs.FileSystem, str, str]:
    """(filesystem, path inside it, prefix that turns such a path back into Spark's spelling).

    A location is spelled as the catalog gives it (``DESCRIBE``: not URL-encoded), so a local one is taken
    as it stands after ``file:``: a ``#``, ``?`` or ``%`` in a folder name is part of the name."""
    if location.startswith("file:") or "://" not in location:
        path = location.removeprefix("file:")
        path = "/" + path.lstrip("/") if path.startswith("//") else path  # file:///abs
        return pafs.LocalFileSystem(), path, "file:"
    parsed = urlparse(location)
    try:
        fs, path = pafs.FileSystem.from_uri(location)
    except (ValueError, OSError) as e:
        raise StatsError(f"cannot list {location}: {e}") from None
    return fs, path, f"{parsed.scheme}://{parsed.netloc}"


# Characters java.net.URI leaves unquoted in a path (RFC 2396 pchar and "/"): Spark spells a file as its
# Hadoop path's URI (``SparkPath.urlEncoded``), so "a b%.parquet" is "a%20b%25.parquet" in _metadata.file_path.
_URI_PATH_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.!~*'():@&=+$,;/")


def spark_path(path: str) -> str:
    """A file system path quoted as java.net.URI's multi-argument constructors quote it: US-ASCII characters
    outside the path set (space, %, #, ?, [, ] ...) and any non-ASCII space or control character as UTF-8
    escapes; other non-ASCII characters (é, ü) stay as they are."""
    out = []
    for ch in path:
        if ch in _URI_PATH_CHARS or ord(ch) >= 0x80 and unicodedata.category(ch) not in ("Zs", "Zl", "Zp", "Cc"):
            out.append(ch)
        else:
            out.append("".join(f"%{b:02X}" for b in ch.encode("utf-8")))
    return "".join(out)


def location_prefix(location: str) -> str:
    """How every file under ``location`` begins in Spark's spelling (ends with "/")."""
    _, root, prefix = filesystem(location)
    return prefix + spark_path(root).rstrip("/") + "/"


def list_files(location: str) -> list[FileInfo]:
    """Every data file under ``location``, skipping the names Spark's listing skips: any path component
    starting with ``.``, or with ``_`` unless it holds ``=`` (Spark reads ``_x=1.parquet``; its
    ``HadoopFSUtils.shouldFilterOutPathName``). Names ending in ``._COPYING_``, which Spark also skips, are
    kept: a copy in progress then leaves the table not fully covered (never the other way round: a file
    Spark reads and this listing missed would let the table look covered while the store lacks its rows)."""
    fs, root, prefix = filesystem(location)
    try:
        infos = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    except OSError as e:
        raise StatsError(f"cannot list {location}: {e}") from None
    out = []
    for info in infos:
        if info.type != pafs.FileType.File:
            continue
        relative = info.path[len(root):].lstrip("/")
        if any(part.startswith(".") or part.startswith("_") and "=" not in part for part in relative.split("/")):
            continue
        out.append(_identity(prefix + spark_path(info.path), info))
    return sorted(out, key=lambda f: f.path)


def local_path(path: str) -> str:
    """The file system path of a local file spelled as Spark spells it (``file:/a%20b`` -> ``/a b``)."""
    return unquote(path.removeprefix("file:"))


def _inside(location: str, path: str) -> tuple[pafs.FileSystem, str]:
    """(filesystem, path inside it) of a file ``list_files(location)`` returned (``path`` in Spark's spelling)."""
    fs, _, prefix = filesystem(location)
    if not path.startswith(prefix):
        raise StatsError(f"{path} is not a file under {location}")
    return fs, unquote(path[len(prefix):])


def open_listed(location: str, path: str) -> pa.NativeFile:
    """Open for reading a file that ``list_files(location)`` returned."""
    fs, inner = _inside(location, path)
    return fs.open_input_file(inner)


def identity_now(location: str, path: str) -> FileInfo | None:
    """The identity a file ``list_files(location)`` returned has on storage now; None if it is gone."""
    fs, inner = _inside(location, path)
    try:
        info = fs.get_file_info(inner)
    except OSError as e:
        raise StatsError(f"cannot look at {path}: {e}") from None
    return _identity(path, info) if info.type == pafs.FileType.File else None


def _identity(path: str, info: pafs.FileInfo) -> FileInfo:
    mtime_ms = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else -1
    return FileInfo(path, int(info.size), int(mtime_ms) * 1000)


class Lister:
    """``list_files`` with a time-to-live cache per location, safe to share between threads."""

    def __init__(self, ttl_seconds: float) -> None:
        self.ttl = ttl_seconds
        self._cache: dict[str, tuple[float, list[FileInfo]]] = {}
        self._lock = threading.Lock()

    def files(self, location: str, max_age: float | None = None) -> list[FileInfo]:
        """The files under ``location``, from a listing at most ``max_age`` seconds old (default: the TTL)."""
        now = time.monotonic()
        ttl = self.ttl if max_age is None else max_age
        with self._lock:
            hit = self._cache.get(location)
        if hit is not None and now - hit[0] < ttl:
            return hit[1]
        files = list_files(location)
        with self._lock:
            self._cache[location] = (now, files)
        return files
