"""Which error a Spark query raised, for the fuzzers that compare an original query's error with its rewrite's
(ARCHITECTURE.md §3.3: a rewritten query returns the same rows or raises the same error).

An error is named by Spark's error condition (``ARITHMETIC_OVERFLOW``), or the exception's type without one. Two
wrappers hide the condition that matters:

- an error raised while a broadcast is built reaches Python as an ExecutionException in a Py4JJavaError, without
  a condition: the Spark exception's condition is in its text;
- with adaptive query execution, stages run concurrently, and when two of them fail Spark raises
  ``STAGE_MATERIALIZATION_MULTIPLE_FAILURES`` listing each failure (``  1. SparkArithmeticException:
  [ARITHMETIC_OVERFLOW] ...``); when one fails first it raises that one's condition. Which happens is timing:
  the same text raised ``ARITHMETIC_OVERFLOW`` twice and the wrapper once in three runs (fuzz-queries seed 2911,
  tpcds:qdtree #44, both the original and its rewrite). The wrapper is named by the set of conditions it lists,
  ``A|B``. A rewrite raised the original's error when it raised no condition the original did not: ``A`` for an
  original's ``A|B`` (its other stage did not fail first), not ``A|C``. The other way round (the original ``A``,
  the rewrite ``A|B``) may be timing too, or a new error: the caller runs both again without adaptive execution.
"""

from __future__ import annotations

import re

MULTIPLE_FAILURES = "STAGE_MATERIALIZATION_MULTIPLE_FAILURES"
_WRAPPED_CONDITION = re.compile(r"org\.apache\.spark\.\w+Exception: \[([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)?)\]")
_LISTED_FAILURE = re.compile(r"^\s*\d+\.\s+[\w.$]+: \[([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)?)\]", re.MULTILINE)


def error_class(e: BaseException) -> str:
    """Spark's error condition of ``e`` (``ARITHMETIC_OVERFLOW``), the conditions a multiple-failure error lists
    joined by ``|``, or the exception's type when it has no condition."""
    condition = None
    for getter in ("getCondition", "getErrorClass"):
        method = getattr(e, getter, None)
        if callable(method):
            try:
                condition = method()
            except Exception:  # noqa: BLE001 - older or non-captured exceptions, or a dead JVM describing it
                condition = None
            if condition:
                break
    text = str(e)
    if not condition:
        wrapped = _WRAPPED_CONDITION.search(text)
        condition = wrapped.group(1) if wrapped else None
    if condition == MULTIPLE_FAILURES:
        listed = sorted(set(_LISTED_FAILURE.findall(text)))
        return "|".join(listed) if listed else MULTIPLE_FAILURES
    return str(condition) if condition else type(e).__name__


def same_error(original: str | None, rewritten: str | None) -> bool:
    """Whether a rewrite raised the original's error (classes of :func:`error_class`): no condition the original
    did not raise (equal, or fewer of a multiple failure's)."""
    if original is None or rewritten is None:
        return original is rewritten
    return set(rewritten.split("|")) <= set(original.split("|"))
