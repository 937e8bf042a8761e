"""Statistic kinds as plug-ins: each is one module that declares how it is collected in Spark, stored, loaded
and evaluated (Xskipper's index types, seed 001), and this registry is the only place that lists them.

A kind module provides:

- ``NAME``: its name, on the command line (``stats collect --bloom``) and in the store (column
  ``<NAME>:<column>``, one value per file; NULL for a file it does not describe, which then always might match);
- ``covers(kind) -> bool``: the column kinds (``stats/model.py``) it can describe;
- ``arrow_type()``: the store type of one file's value;
- ``collect(run, rows, columns, sql) -> (values, changed paths)``: each file's value per column, computed in
  Spark after the statistics scan (``stats/scan.py`` calls it with the store rows it made and its ``ScanSql``:
  the request, and the statement parts the scan's own statements use); a file whose identity differs from
  its row's has changed since the scan and is returned, to be left out;
- ``load(array, kind)``: the store column as a loaded object (or None if no file has a value), which has
  ``nbytes``, ``subset(keep)`` (the files where ``keep`` is True, as the freshness check needs) and
  ``might_contain(values) -> bool per file``: may the file hold a row whose column equals one of
  ``values`` (domain values)? Never False for a file holding one (false positives only).

The evaluators ask every loaded kind of a column (``ColumnStats.indexes``) through :func:`might_contain`, for
``col = v``, ``col IN (...)`` and diPs of few values. Min/max, null counts, range-sets and value lists are the
store's built-in statistics: the one scan computes them together, and the evaluators use them for ranges and
for diPs' intervals, which a membership test cannot give.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from stats import bloom
from stats.model import Kind

KINDS: dict[str, ModuleType] = {m.NAME: m for m in (bloom,)}


class Loaded(Protocol):
    nbytes: int
    present: np.ndarray  # bool per file: the file has a value of this kind

    def subset(self, keep: np.ndarray) -> Loaded: ...

    def might_contain(self, values: np.ndarray) -> np.ndarray: ...


def store_column(name: str, column: str) -> str:
    return f"{name}:{column}"


def arrow_fields(indexes: Mapping[str, tuple[str, ...]]) -> list[pa.Field]:
    """The store columns of ``indexes`` (kind name -> columns it describes)."""
    return [pa.field(store_column(name, column), KINDS[name].arrow_type())
            for name, columns in sorted(indexes.items()) for column in columns]


def load_all(data: pa.Table, kinds: Mapping[str, Kind]) -> dict[str, dict[str, Loaded]]:
    """column -> kind name -> loaded values, for every store column of a registered kind in ``data``."""
    out: dict[str, dict[str, Loaded]] = {}
    for field in data.column_names:
        name, sep, column = field.partition(":")
        if sep and name in KINDS and column in kinds:
            loaded = KINDS[name].load(data.column(field).combine_chunks(), kinds[column])
            if loaded is not None:
                out.setdefault(column, {})[name] = loaded
    return out


# At most this many values are tested against a column's kinds (an IN list, a diP's keys): each costs about
# files x 7 bit tests, on the rewrite's path. More values: every file might match.
MAX_PROBED_VALUES = 2048


def might_contain(indexes: Mapping[str, Loaded], values: np.ndarray, n_files: int) -> np.ndarray:
    """Per file: may it hold one of ``values``, by every loaded kind of a column? (True without any, and for
    more than ``MAX_PROBED_VALUES`` values.)"""
    out = np.ones(n_files, dtype=bool)
    if len(values) > MAX_PROBED_VALUES:
        return out
    for loaded in indexes.values():
        out &= loaded.might_contain(values)
    return out


def collect_all(run: Callable[[str], list[tuple]], rows: dict[str, dict[str, Any]], sql: Any) -> set[str]:
    """Every requested kind's values (``sql.req.indexes``: kind name -> columns) set in ``rows``; returns the
    paths of files that changed since the scan. ``sql`` is the scan's ``stats.scan.ScanSql``."""
    changed: set[str] = set()
    for name, columns in sorted(sql.req.indexes.items()):
        if not columns:
            continue
        values, moved = KINDS[name].collect(run, rows, list(columns), sql)
        changed |= moved
        for path, row in rows.items():
            for column in columns:
                row[store_column(name, column)] = values.get((path, column))
    return changed


def chosen(requested: Mapping[str, tuple[str, ...]], kinds: Mapping[str, Kind],
           partition_columns: tuple[str, ...]) -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    """The columns of a table each requested kind will describe, and why the others are passed over (a column
    the table lacks is not named: a request may name columns of several tables)."""
    out: dict[str, tuple[str, ...]] = {}
    passed: dict[str, str] = {}
    for name, columns in requested.items():
        keep = []
        for column in columns:
            if column not in kinds:
                continue
            if column in partition_columns:
                passed[column] = f"no {name}: a partition column"
            elif not KINDS[name].covers(kinds[column]):
                passed[column] = f"no {name}: its kind {kinds[column].name} is not covered"
            else:
                keep.append(column)
        if keep:
            out[name] = tuple(sorted(keep))
    return out, passed
