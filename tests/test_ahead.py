"""The thread pool differential tests run their Spark work on (tests/ahead.py), without Spark: a case whose
preparation failed fails alone, and each worker thread keeps one session of its own."""

from __future__ import annotations

import threading
import time

import pytest

from tests.ahead import Ahead


class _Sessions:
    """The one method Ahead asks of a SparkSession: each call a new session."""

    def newSession(self) -> object:  # noqa: N802 - PySpark's name
        return object()


def test_a_failed_preparation_fails_its_own_case_only() -> None:
    pool = Ahead(_Sessions(), workers=2)  # type: ignore[arg-type]
    try:
        assert pool.prepare("a", lambda: 1) == 1 and pool.made("a") == 1
        assert pool.prepare("b", lambda: 1 / 0) is None
        pool.submit("a", lambda session, x: (session, x), 5)
        session, x = pool.result("a")
        assert x == 5 and session is not None
        with pytest.raises(ZeroDivisionError):
            pool.result("b")
        with pytest.raises(ZeroDivisionError):
            pool.made("b")
        with pytest.raises(KeyError, match="no job was submitted"):
            pool.result("c")
    finally:
        pool.close()


def test_each_worker_thread_keeps_one_session_of_its_own() -> None:
    pool = Ahead(_Sessions(), workers=3)  # type: ignore[arg-type]
    try:
        def job(session: object) -> tuple[int, int]:
            time.sleep(0.02)
            return threading.get_ident(), id(session)

        for i in range(12):
            pool.submit(i, job)
        seen = [pool.result(i) for i in range(12)]
    finally:
        pool.close()
    by_thread: dict[int, set[int]] = {}
    for thread, session in seen:
        by_thread.setdefault(thread, set()).add(session)
    assert len(by_thread) >= 2 and all(len(sessions) == 1 for sessions in by_thread.values())
    assert len({s for sessions in by_thread.values() for s in sessions}) == len(by_thread)
