"""Which error Spark raised (``bench/spark_errors.py``), as the fuzzers compare them. The multiple-failure text is
Spark 4's, as raised by the original of fuzz-queries seed 2911, tpcds:qdtree #44 (which one of three runs of the
same text raised it is timing: the other two raised ARITHMETIC_OVERFLOW)."""

from __future__ import annotations

import pytest

from bench.spark_errors import MULTIPLE_FAILURES, error_class, same_error

OVERFLOW_LINE = ("SparkArithmeticException: [ARITHMETIC_OVERFLOW] overflow. Use 'try_multiply' to tolerate overflow "
                 "and return NULL instead. If necessary set \"spark.sql.ansi.enabled\" to \"false\" to bypass this "
                 "error. SQLSTATE: 22003")
MULTIPLE = ("An error occurred while calling o3581.collectToPython.\n"
            ": org.apache.spark.SparkException: [STAGE_MATERIALIZATION_MULTIPLE_FAILURES] Multiple failures (2) in "
            "stage materialization: \n"
            f"  1. {OVERFLOW_LINE}\n== SQL (line 1, position 456) ==\n"
            "...WHERE s6.sr_returned_date_sk * 1000000000000000 < 0\n\n"
            "  2. SparkArithmeticException: [DIVIDE_BY_ZERO] Division by zero. SQLSTATE: 22012\n"
            " SQLSTATE: XX000\n\tat org.apache.spark.sql.errors.QueryExecutionErrors$."
            "multiFailuresInStageMaterializationError")


class _Captured(Exception):
    """As pyspark's captured exceptions: the condition from ``getCondition``."""

    def __init__(self, text: str, condition: str | None) -> None:
        super().__init__(text)
        self._condition = condition

    def getCondition(self) -> str | None:  # noqa: N802 - pyspark's name
        return self._condition


def test_a_multiple_failure_is_named_by_the_conditions_it_lists() -> None:
    assert error_class(_Captured(MULTIPLE, MULTIPLE_FAILURES)) == "ARITHMETIC_OVERFLOW|DIVIDE_BY_ZERO"
    # Wrapped without a condition (raised while a broadcast was built): found in the text all the same.
    assert error_class(RuntimeError(MULTIPLE)) == "ARITHMETIC_OVERFLOW|DIVIDE_BY_ZERO"
    no_list = _Captured("[STAGE_MATERIALIZATION_MULTIPLE_FAILURES] no list", MULTIPLE_FAILURES)
    assert error_class(no_list) == MULTIPLE_FAILURES


def test_plain_and_wrapped_conditions_and_types() -> None:
    assert error_class(_Captured("[ARITHMETIC_OVERFLOW] overflow", "ARITHMETIC_OVERFLOW")) == "ARITHMETIC_OVERFLOW"
    wrapped = RuntimeError("java.util.concurrent.ExecutionException: org.apache.spark.SparkArithmeticException: "
                           "[CAST_INVALID_INPUT] The value 'x' ...")
    assert error_class(wrapped) == "CAST_INVALID_INPUT"
    assert error_class(ValueError("no condition")) == "ValueError"


@pytest.mark.parametrize("original, rewritten, same", [
    ("ARITHMETIC_OVERFLOW", "ARITHMETIC_OVERFLOW", True),
    ("ARITHMETIC_OVERFLOW", "DIVIDE_BY_ZERO", False),
    ("ARITHMETIC_OVERFLOW|DIVIDE_BY_ZERO", "ARITHMETIC_OVERFLOW", True),  # the rewrite's other stage was later
    ("ARITHMETIC_OVERFLOW|DIVIDE_BY_ZERO", "ARITHMETIC_OVERFLOW|DIVIDE_BY_ZERO", True),
    ("DIVIDE_BY_ZERO", "ARITHMETIC_OVERFLOW|DIVIDE_BY_ZERO", False),  # a condition the original did not raise
    ("ARITHMETIC_OVERFLOW|DIVIDE_BY_ZERO", "ARITHMETIC_OVERFLOW|CAST_INVALID_INPUT", False),
    ("CAST_INVALID_INPUT|DIVIDE_BY_ZERO", "ARITHMETIC_OVERFLOW", False),
    (None, None, True),
    (None, "ARITHMETIC_OVERFLOW", False),
    ("ARITHMETIC_OVERFLOW", None, False),
])
def test_a_rewrite_raised_the_originals_error_when_it_raised_no_other_condition(
        original: str | None, rewritten: str | None, same: bool) -> None:
    assert same_error(original, rewritten) is same


@pytest.mark.spark
def test_spark_names_a_real_overflow(stack) -> None:  # noqa: ANN001 - the shared Spark stack
    with pytest.raises(Exception) as raised:
        stack.spark.sql("SELECT id * 1000000000000000000 * 100 FROM range(3)").collect()
    assert error_class(raised.value) == "ARITHMETIC_OVERFLOW"
