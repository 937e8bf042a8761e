"""Result sets the proxy answers itself, in HiveServer2's own shapes (schema and row sets)."""

from __future__ import annotations

import dataclasses
from typing import Any

from TCLIService import ttypes as t

# Column types a virtual result can have: Hive type id and the TColumn / TColumnValue field that carries it.
_TYPES = {
    "string": (t.TTypeId.STRING_TYPE, "stringVal", t.TStringColumn, t.TStringValue),
    "tinyint": (t.TTypeId.TINYINT_TYPE, "byteVal", t.TByteColumn, t.TByteValue),
    "smallint": (t.TTypeId.SMALLINT_TYPE, "i16Val", t.TI16Column, t.TI16Value),
    "int": (t.TTypeId.INT_TYPE, "i32Val", t.TI32Column, t.TI32Value),
    "bigint": (t.TTypeId.BIGINT_TYPE, "i64Val", t.TI64Column, t.TI64Value),
    "double": (t.TTypeId.DOUBLE_TYPE, "doubleVal", t.TDoubleColumn, t.TDoubleValue),
    "boolean": (t.TTypeId.BOOLEAN_TYPE, "boolVal", t.TBoolColumn, t.TBoolValue),
}
_EMPTY = {"string": "", "tinyint": 0, "smallint": 0, "int": 0, "bigint": 0, "double": 0.0, "boolean": False}
# From protocol V6 on, results travel as columns; before, as rows.
COLUMNAR_FROM = t.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V6


@dataclasses.dataclass
class ResultSet:
    columns: list[tuple[str, str]]  # (name, one of _TYPES)
    rows: list[tuple[Any, ...]]
    protocol: int = COLUMNAR_FROM  # the session's negotiated protocol version
    offset: int = 0  # rows already fetched
    # The schema to show instead of one built from ``columns`` (an answer from statistics shows Spark's own:
    # its column names, DATE / TIMESTAMP / DECIMAL types with their qualifiers, carried as strings).
    schema_override: t.TTableSchema | None = None

    def __post_init__(self) -> None:
        for name, kind in self.columns:
            if kind not in _TYPES:
                raise ValueError(f"column {name}: unsupported type {kind}")

    def schema(self) -> t.TTableSchema:
        if self.schema_override is not None:
            return self.schema_override
        return t.TTableSchema(columns=[
            t.TColumnDesc(columnName=name, position=i + 1, comment="",
                          typeDesc=t.TTypeDesc(types=[t.TTypeEntry(primitiveEntry=t.TPrimitiveTypeEntry(type=_TYPES[kind][0]))]))
            for i, (name, kind) in enumerate(self.columns)])

    def fetch(self, max_rows: int, from_start: bool = False) -> t.TRowSet:
        if from_start:
            self.offset = 0
        start = self.offset
        batch = self.rows[start:start + max(max_rows, 0)]
        self.offset += len(batch)
        if self.protocol >= COLUMNAR_FROM:
            return t.TRowSet(startRowOffset=start, rows=[], columns=[self._column(i, batch) for i in range(len(self.columns))])
        rows = [t.TRow(colVals=[self._value(kind, row[i]) for i, (_, kind) in enumerate(self.columns)]) for row in batch]
        return t.TRowSet(startRowOffset=start, rows=rows)

    def _column(self, i: int, batch: list[tuple[Any, ...]]) -> t.TColumn:
        kind = self.columns[i][1]
        _, field, column_cls, _ = _TYPES[kind]
        values = [row[i] for row in batch]
        return t.TColumn(**{field: column_cls(values=[_EMPTY[kind] if v is None else v for v in values],
                                              nulls=null_bitmap([v is None for v in values]))})

    @staticmethod
    def _value(kind: str, value: Any) -> t.TColumnValue:
        _, field, _, value_cls = _TYPES[kind]
        return t.TColumnValue(**{field: value_cls(value=value)})


def null_bitmap(is_null: list[bool]) -> bytes:
    """Hive's null bitmap: bit ``i % 8`` of byte ``i // 8`` is set when value ``i`` is NULL."""
    out = bytearray((len(is_null) + 7) // 8)
    for i, null in enumerate(is_null):
        if null:
            out[i // 8] |= 1 << (i % 8)
    return bytes(out)


def empty_row_set(protocol: int) -> t.TRowSet:
    return t.TRowSet(startRowOffset=0, rows=[], columns=[] if protocol >= COLUMNAR_FROM else None)


_COLUMN_FIELDS = ("boolVal", "byteVal", "i16Val", "i32Val", "i64Val", "doubleVal", "stringVal", "binaryVal")


def row_tuples(row_set: t.TRowSet | None) -> list[tuple[Any, ...]]:
    """The rows of a row set Spark sent (columnar from protocol V6 on, row by row before), NULLs as None."""
    if row_set is None:
        return []
    if row_set.columns:
        columns = []
        for column in row_set.columns:
            values = next((getattr(column, f) for f in _COLUMN_FIELDS if getattr(column, f) is not None), None)
            if values is None:
                return []
            nulls = values.nulls or b""
            columns.append([None if i // 8 < len(nulls) and nulls[i // 8] >> (i % 8) & 1 else v
                            for i, v in enumerate(values.values)])
        return list(zip(*columns))
    rows = []
    for row in row_set.rows or []:
        cells = []
        for value in row.colVals:
            cell = next((getattr(value, f) for f in _COLUMN_FIELDS[:7] if getattr(value, f) is not None), None)
            cells.append(None if cell is None else cell.value)
        rows.append(tuple(cells))
    return rows
