"""Every function the rewriter follows has Spark's own result type (issue 13, ARCHITECTURE.md §8): the
expression is recognised as the rewriter recognises it (``monotone.peel_all``), its result kind computed
(``monotone.kind_after``) and compared with ``typeof()`` on the running Spark, for each argument type."""

from __future__ import annotations

import pytest
import sqlglot

from rewriter.monotone import kind_after, peel_all
from stats.model import Kind, kind_of
from tests.conftest import Stack

pytestmark = pytest.mark.spark

# (column type, expression over x) for every function definition and the argument types it accepts
CASES = [
    ("tinyint", "x + 1"), ("smallint", "x + 1"), ("int", "x + 1"), ("bigint", "x + 1"), ("int", "x - 7"),
    ("int", "x * 3"), ("int", "x * 3000000000"), ("tinyint", "x * 2"), ("bigint", "2 * x"),
    ("decimal(15,2)", "x + 1"), ("decimal(15,2)", "x * 3"), ("decimal(7,2)", "x + 3000000000"),
    ("double", "x + 1"), ("double", "x * 2"),
    ("int", "CAST(x AS BIGINT)"), ("smallint", "CAST(x AS BIGINT)"), ("int", "CAST(x AS DOUBLE)"),
    ("double", "CAST(x AS DOUBLE)"), ("date", "CAST(x AS DATE)"), ("string", "CAST(x AS STRING)"),
    ("date", "to_date(x)"), ("date", "year(x)"), ("date", "month(x)"), ("date", "quarter(x)"),
    ("date", "trunc(x, 'MM')"), ("date", "trunc(x, 'YEAR')"), ("date", "date_trunc('MONTH', x)"),
    ("date", "date_trunc('WEEK', x)"), ("date", "date_add(x, 3)"), ("date", "date_sub(x, 3)"), ("date", "x + 1"),
    ("date", "x - 1"), ("date", "add_months(x, 2)"), ("date", "x + INTERVAL 3 DAYS"),
    ("date", "x + INTERVAL 2 MONTHS"), ("date", "year(x) + 1"), ("int", "CAST(x + 1 AS BIGINT) * 2"),
    ("smallint", "x + (1 + 1)"), ("smallint", "x + 1S"), ("int", "x - (-2147483648)"),
]
VALUES = {"tinyint": "1", "smallint": "1", "int": "1", "bigint": "1", "decimal(15,2)": "1.5", "decimal(7,2)": "1.5",
          "double": "1.5", "date": "'2020-02-29'", "string": "'a'"}


def spark_name(kind: Kind) -> str:
    if kind.name == "int":
        return {8: "tinyint", 16: "smallint", 32: "int", 64: "bigint"}[kind.bits]
    if kind.name == "decimal":
        return f"decimal({kind.precision},{kind.scale})"
    return {"float": "double", "date": "date", "timestamp": "timestamp", "string": "string"}[kind.name]


@pytest.mark.parametrize("column_type, expression", CASES, ids=[f"{t}:{e}" for t, e in CASES])
def test_result_type_is_sparks(stack: Stack, column_type: str, expression: str) -> None:
    node = sqlglot.parse_one(expression, read="spark")
    inner, fns = peel_all(node)
    assert isinstance(inner, sqlglot.exp.Column) and fns, f"{expression} is not followed by the rewriter"
    kind = kind_after(fns, kind_of(column_type))
    source = f"SELECT CAST({VALUES[column_type]} AS {column_type}) AS x"
    typed = stack.spark.sql(f"SELECT typeof({expression}) FROM ({source})").collect()[0][0]
    assert spark_name(kind) == typed
