"""Names and literals spliced into the SQL text the statistics jobs send (sqlglot's quoting: never raw)."""

from __future__ import annotations

from sqlglot import exp


def quote_name(name: str) -> str:
    """A dotted name as Spark SQL identifiers."""
    return ".".join(exp.to_identifier(part, quoted=True).sql("spark") for part in name.split("."))


def quote_literal(text: str) -> str:
    return exp.Literal.string(text).sql("spark")
