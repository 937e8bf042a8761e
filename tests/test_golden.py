"""Golden rewrites: ``tests/golden/NN_name.sql`` in, ``NN_name.out`` (the SQL sent and the decision) out,
over the hand-made statistics of ``tests/test_rewriter.py``. A changed expectation shows up as a diff to
review; ``DIPPER_UPDATE_GOLDEN=1 pytest tests/test_golden.py`` rewrites the .out files."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from rewriter.decision import render
from rewriter.rewrite import rewrite
from tests.test_rewriter import CTX

GOLDEN = Path(__file__).parent / "golden"


def produce(sql: str) -> str:
    result = rewrite(sql, CTX)
    decision = re.sub(r"\d+\.\d ms\)$", "time)", render(result.decision))
    return f"{result.sql.rstrip()}\n\n-- decision\n{decision}\n"


@pytest.mark.parametrize("case", sorted(p.stem for p in GOLDEN.glob("*.sql")))
def test_golden(case: str) -> None:
    actual = produce((GOLDEN / f"{case}.sql").read_text())
    expected_file = GOLDEN / f"{case}.out"
    if os.environ.get("DIPPER_UPDATE_GOLDEN") == "1":
        expected_file.write_text(actual)
    assert actual == expected_file.read_text()
