"""The registry of Spark functions against Spark (issue 61): a sample of ``python -m bench conform``.

Every registered definition has conformance templates; each case runs on the shared Spark session under
ANSI on and off and three session time zones, and Spark's type, value and errors are compared with what
the rewriter derives (``bench/conform.py``)."""

from __future__ import annotations

import pytest

from bench.conform import SETTINGS, TEMPLATES, conform, draw_cases, missing_templates
from tests.conftest import Stack


def test_every_definition_has_conformance_templates() -> None:
    assert missing_templates() == []


@pytest.fixture(scope="module")
def outcomes(stack: Stack) -> list:
    return conform(stack.spark, seed=61, per_template=1, batch=120, settings=SETTINGS)


@pytest.mark.spark
@pytest.mark.parametrize("function", sorted(name for name, templates in TEMPLATES.items() if templates))
def test_definition_agrees_with_spark(outcomes: list, function: str) -> None:
    mine = [o for o in outcomes if o.case.function == function]
    assert len(mine) == len([c for c in draw_cases(61, 1) if c.function == function]) * len(SETTINGS)
    bad = [f"{o.case.sql} {o.case.values!r} ({o.setting}): {'; '.join(o.disagreements())}"
           for o in mine if o.disagreements()]
    assert bad == []
    # not vacuous: Spark typed every case, and the sample raised or evaluated somewhere across the registry
    assert all(o.spark_type is not None or o.spark_error is not None for o in mine)
