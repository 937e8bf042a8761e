"""The registry of Spark functions (rewriter/spark/, issue 61): semantic code dispatches on exact classes,
sqlglot's subclasses are other functions, and the cases the issue found are decided as Spark decides them.
No Spark here; tests/test_spark_conformance.py compares the definitions with Spark."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from rewriter.errors import Untranslatable
from rewriter.literals import fold, is_constant
from rewriter.spark import definition, definitions, evaluate, model
from stats.model import Kind

ROOT = Path(__file__).resolve().parent.parent
# Classes with subclasses that semantic code may still test with isinstance: syntax, not functions (a
# column, a set operation, any expression or function at all).
STRUCTURAL = {"Column", "SetOperation", "Expression", "Func", "Query", "Condition", "Binary", "Unary"}


def _subclasses(cls: type) -> set[type]:
    out: set[type] = set()
    for sub in cls.__subclasses__():
        out |= {sub} | _subclasses(sub)
    return out


def test_semantic_code_dispatches_on_exact_classes() -> None:
    """``isinstance(node, exp.Concat)`` admits ``ConcatWs``, ``isinstance(node, exp.Cast)`` admits
    ``JSONCast``: in the rewriter a sqlglot class with subclasses is tested by ``type(node) is``, or asked of
    the registry."""
    offences = []
    for path in sorted((ROOT / "rewriter").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2):
                continue
            classes = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
            for c in classes:
                if isinstance(c, ast.Attribute) and getattr(c.value, "id", None) == "exp" and c.attr not in STRUCTURAL:
                    cls = getattr(exp, c.attr, None)
                    if cls is not None and _subclasses(cls):
                        offences.append(f"{path.relative_to(ROOT)}:{node.lineno} isinstance(..., exp.{c.attr})")
    assert offences == []


@pytest.mark.parametrize("sql, spark", [
    ("concat('a', b)", "concat"), ("concat_ws('/', a, b)", "concat_ws"), ("CAST(a AS INT)", "cast"),
    ("TRY_CAST(a AS INT)", "try_cast"), ("a || b", "||"), ("substr(a, 1, 2)", "substring"),
    ("coalesce(a, b)", "coalesce"), ("nvl(a, b)", "coalesce"), ("hash(a)", "hash"),
])
def test_each_spark_function_finds_its_own_definition(sql: str, spark: str) -> None:
    fn = definition(sqlglot.parse_one(sql, read="spark"))
    assert fn is not None and fn.spark == spark


def test_subclasses_and_other_variants_are_opaque() -> None:
    assert definition(exp.JSONCast(this=exp.column("a"), to=exp.DataType.build("INT"))) is None
    substr = sqlglot.parse_one("substr(a, 1, 2)", read="spark")
    substr.set("zero_start", None)  # another dialect's SUBSTRING, where position 0 is not 1
    assert definition(substr) is None
    between = sqlglot.parse_one("a BETWEEN 1 AND 2", read="spark")
    between.set("symmetric", True)
    assert definition(between) is None
    assert not is_constant(exp.JSONCast(this=exp.Literal.string("1"), to=exp.DataType.build("INT")))


def test_concat_ws_is_not_concat() -> None:
    """Issue 61, case 1: ``concat_ws('/', p_brand, p_container)`` was evaluated as ``concat``, so no part
    row passed and every partsupp file was skipped."""
    node = sqlglot.parse_one("concat_ws('/', b, c) = 'Brand#52/JUMBO DRUM'", read="spark")
    column_of = lambda c: c.name  # noqa: E731
    kinds = {"b": Kind("string"), "c": Kind("string")}
    assert evaluate.evaluate(node, {"b": "Brand#52", "c": "JUMBO DRUM"}, column_of, kinds) is True
    assert evaluate.evaluate(node.this, {"b": "Brand#52", "c": None}, column_of, kinds) == "Brand#52"
    assert evaluate.evaluate(node.this, {"b": None, "c": None}, column_of, kinds) == ""
    assert fold(sqlglot.parse_one("concat_ws('-', 'a', 'b')", read="spark")) == "a-b"
    assert fold(sqlglot.parse_one("concat('a', 'b')", read="spark")) == "ab"
    with pytest.raises(Untranslatable):
        fold(sqlglot.parse_one("concat('a', NULL)", read="spark"))


KINDS = {"i": Kind("int", bits=32), "b": Kind("int", bits=64), "s": Kind("string"), "f": Kind("float"),
         "d": Kind("decimal", precision=15, scale=2), "day": Kind("date")}


@pytest.mark.parametrize("sql, spark_type", [
    ("0.5", "decimal(1,1)"), ("1.50", "decimal(3,2)"), ("3000000000", "bigint"), ("1e3", "double"),
    ("d + 1", "decimal(16,2)"), ("d * d", "decimal(31,4)"), ("i + b", "bigint"), ("i / 2", "double"),
    ("d / 3", "decimal(19,6)"), ("i % b", "bigint"), ("coalesce(i, b)", "bigint"), ("coalesce(i, d)", "decimal(15,2)"),
    ("concat_ws('/', s, s)", "string"), ("length(s)", "int"), ("floor(f)", "bigint"), ("floor(d)", "decimal(14,0)"),
    ("sum(i)", "bigint"), ("sum(d)", "decimal(25,2)"), ("avg(d)", "decimal(19,6)"), ("count(*)", "bigint"),
    ("day + 1", "date"), ("year(day)", "int"), ("CAST(s AS DECIMAL(10, 2))", "decimal(10,2)"),
])
def test_result_types(sql: str, spark_type: str) -> None:
    """A few of Spark's result types, as typeof() prints them (each checked against Spark by the
    conformance test)."""
    from rewriter.spark.types import spark_name

    kind = model.result_kind(sqlglot.parse_one(sql, read="spark"), lambda c: KINDS.get(c.name))
    assert kind is not None and spark_name(kind) == spark_type


def test_every_definition_names_its_spark_function() -> None:
    assert all(f.spark for f in definitions())
    assert len({(f.cls, f.anonymous, f.spark) for f in definitions()}) == len(definitions())


@pytest.mark.parametrize("sql, reason", [
    ("my_udf(i) > 1", "no definition of the function my_udf in rewriter/spark/"),
    ("coalesce(s, i) IS NOT NULL", "coalesce: Spark's implicit cast of an argument may fail"),
    ("i + 1 > 2", "+ may raise on its arguments' values"),
    ("CASE WHEN i > 0 THEN s ELSE 1 END = 'a'", "CASE: Spark's cast of its values to one type may fail"),
    ("upper(s) = 'A'", None),
])
def test_the_decision_record_says_why_a_filter_may_raise(sql: str, reason: str | None) -> None:
    """What is not modelled is declined, and the record names the definition that was missing."""
    node = sqlglot.parse_one(sql, read="spark")
    assert model.why_it_may_raise(node, lambda c: KINDS.get(c.name), ansi=True) == reason


@pytest.mark.parametrize("sql", ["127Y + 1Y", "-CAST(-32768 AS SMALLINT)", "CAST(200 AS SMALLINT) * CAST(200 AS SMALLINT)",
                                 "2147483647 + 1"])
def test_constants_that_overflow_their_type_are_not_folded(sql: str) -> None:
    """Spark computes ``127Y + 1Y`` in TINYINT: it raises (ANSI) or wraps to -128, never 128."""
    assert not is_constant(sqlglot.parse_one(sql, read="spark"))


WIDE = {**KINDS, "d38": Kind("decimal", precision=38, scale=0), "d3820": Kind("decimal", precision=38, scale=20),
        "d72": Kind("decimal", precision=7, scale=2)}


@pytest.mark.parametrize("sql, raises", [
    ("b + -9223372036854775808 > 0", True),  # -9223372036854775808 is one BIGINT literal: b + it overflows
    ("xu = yu", True), ("xu IN (yu, zu)", True), ("(s, i) = (1, 2)", True),  # unknown types may be strings
    ("d38 = 1.5", True), ("b = d3820", True), ("coalesce(b, d3820) > 0", True),  # decimal widening past 38 digits
    ("d72 = 1.5", False), ("coalesce(i, d72) > 0", False),
    ("lag(i, 1, b) OVER (ORDER BY i) > 0", True), ("lag(b, 1, i) OVER (ORDER BY i) > 0", False),
    ("round(d72, 2) > 1", False), ("round(d72, -1) > 1", False), ("round(i, -1) > 1", True),
    ("ltrim(s) = 'a'", False), ("initcap(s) = 'A'", False),
])
def test_what_may_raise_found_in_review(sql: str, raises: bool) -> None:
    node = sqlglot.parse_one(sql, read="spark")
    assert model.can_raise(node, lambda c: WIDE.get(c.name), ansi=True) is raises


def test_every_template_of_the_conformance_run_reaches_its_definition() -> None:
    """A definition registered under a class sqlglot never produces for the function (``hex`` is
    ``exp.Hex``, not an anonymous function) is dead: each conformance template must parse to a node that
    finds the definition it is listed under."""
    from bench.conform import TEMPLATES, _PLACEHOLDER

    missing = []
    for name, templates in TEMPLATES.items():
        for template in templates:
            node = sqlglot.parse_one(_PLACEHOLDER.sub(lambda m: "c", template), read="spark")
            if not any((fn := definition(n)) is not None and fn.spark == name for n in node.walk()):
                missing.append(f"{name}: {template}")
    assert missing == []
