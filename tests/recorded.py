"""What each generated case did when it was recorded, as floors it must still reach (issue 64).

A differential case that passes when nothing was rewritten proves nothing. Each case of the generated searches
(random and adversarial queries, exact keys' generated predicates and joins, redrawn star joins) therefore
asserts that it still does at least what it did when its outcome was recorded in
``tests/expected_outcomes.json`` (rewritten or not, files skipped, files diPs and block descriptions removed,
compared with Spark at all, an answer with rows worth comparing), and a test checks that the record as a
whole is not vacuous (enough cases rewritten, diPs removing files in several, ...). Both hold under ``-k``,
``--lf`` and in any order, unlike a count kept in module globals during one run.

A change that makes the rewriter do more raises the floors by re-recording, e.g.
``DIPPER_RECORD_OUTCOMES=1 pytest tests/test_random_queries.py``; one that makes it do less fails the cases
it affects, and must be explained before re-recording. (The TPC queries' floors are files skipped, in
``tests/expected_skips.json``: ``DIPPER_RECORD_SKIPS=1``.)
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

FILE = Path(__file__).with_name("expected_outcomes.json")
_lock = threading.Lock()


def recorded_outcomes() -> dict[str, dict[str, int]]:
    return json.loads(FILE.read_text()) if FILE.is_file() else {}


def floors(case: str, measured: dict[str, int]) -> dict[str, int] | None:
    """The floors recorded for ``case`` (None if none are); records ``measured`` instead when
    ``DIPPER_RECORD_OUTCOMES`` is set."""
    with _lock:
        recorded = recorded_outcomes()
        if os.environ.get("DIPPER_RECORD_OUTCOMES"):
            recorded[case] = measured
            lines = [f"{json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in sorted(recorded.items())]
            FILE.write_text("{\n" + ",\n".join(lines) + "\n}\n")  # one case per line: reviewable diffs
        return recorded.get(case)


def below(measured: dict[str, int], floor: dict[str, int]) -> dict[str, tuple[int, int]]:
    """The measures under their floor: name -> (measured, recorded)."""
    return {k: (measured.get(k, 0), v) for k, v in floor.items() if measured.get(k, 0) < v}
