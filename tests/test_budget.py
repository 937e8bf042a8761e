"""What one statement may cost the rewriter (issue 62, item 3; rewriter/budget.py), without Spark: the limits
before and after parsing, the time limit at the rewriter's own steps, the typing of long OR chains in linear
time, and the decision log's truncation of long literals."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
import sqlglot

import rewriter.rewrite as rewriting
from proxy.decision_log import LONG_LITERAL, DecisionLog
from rewriter.budget import Budget, BudgetSpent, check, deadline, depth
from rewriter.rewrite import RewriteContext, rewrite
from tests.test_rewriter import CTX, ITEMS, ORDERS, Source

JOIN = "SELECT count(*) FROM orders o JOIN items i ON o.id = i.order_id WHERE o.status = 'F'"


def test_a_statement_within_the_budget_is_rewritten() -> None:
    result = rewrite(JOIN, CTX)
    assert result.changed and result.decision.passthrough is None


@pytest.mark.parametrize("budget, sql, why", [
    (Budget(max_statement_chars=50), JOIN, "characters long, over rewriter.max_statement_chars (50)"),
    (Budget(max_literals=100), "SELECT count(*) FROM orders WHERE id IN (" + ", ".join(map(str, range(101))) + ")",
     "holds 101 literals, over rewriter.max_literals (100)"),
    (Budget(max_literals=3), "SELECT count(*) FROM orders WHERE status IN ('a', \"b\", 'c''d', '1 2 3')",
     "holds 5 literals"),  # 'c''d' is two literals to Spark's lexer (adjacent ones are concatenated)
    (Budget(max_expression_depth=20), "SELECT count(*) FROM orders WHERE " + " OR ".join(["id = 1"] * 30),
     "nest more than 20 deep (rewriter.max_expression_depth)"),
], ids=["length", "numbers", "strings", "depth"])
def test_a_statement_over_a_limit_is_sent_as_it_is_with_the_limit_named(budget: Budget, sql: str, why: str) -> None:
    result = rewrite(sql, RewriteContext(CTX.stats, database="db", budget=budget))
    assert not result.changed and result.sql == sql and result.decision.error is None
    assert result.decision.passthrough.startswith("over the rewrite budget: ") and why in result.decision.passthrough
    assert rewrite(sql, CTX).decision.passthrough is None  # under the default budget: rewritten


def test_the_literal_count_is_not_fooled_by_identifiers_with_digits() -> None:
    sql = "SELECT c1, c2, c3, c4 FROM t1 JOIN t2 WHERE x = 1"
    assert Budget(max_literals=1).before_parsing(sql) is None


def test_the_time_limit_stops_the_rewrite_at_a_step_and_leaves_nothing_running(monkeypatch) -> None:
    """A step that overruns (here: exchanging diPs made slow) ends the rewrite at the next check: the original
    is sent, the decision names the limit and the step, and no thread is left working."""
    real = rewriting._exchange_dips

    def slow(*args, **kwargs):
        spin = time.thread_time() + 0.3
        while time.thread_time() < spin:  # CPU, which the limit counts (a sleep is not the rewriter's cost)
            pass
        return real(*args, **kwargs)

    monkeypatch.setattr(rewriting, "_exchange_dips", slow)
    threads = threading.active_count()
    context = RewriteContext(CTX.stats, database="db", budget=Budget(max_rewrite_ms=100))
    started = time.perf_counter()
    result = rewrite(JOIN, context)
    assert time.perf_counter() - started < 2
    assert not result.changed and result.decision.tables == []
    why = result.decision.passthrough
    assert why.startswith("over the rewrite budget: the rewrite used more CPU than rewriter.max_rewrite_ms (100 ms)")
    assert "stopped before the prune filter" in why or "exchanging" in why, why
    assert threading.active_count() == threads
    assert rewrite(JOIN, CTX).changed  # the deadline does not outlive its statement


def test_deadlines_are_per_thread() -> None:
    seen: list[str] = []

    def other() -> None:
        try:
            check("in another thread")
            seen.append("not stopped")
        except BudgetSpent:
            seen.append("stopped")

    with deadline(1):
        spin = time.thread_time() + 0.01
        while time.thread_time() < spin:
            pass
        with pytest.raises(BudgetSpent):
            check("here")
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert seen == ["not stopped"]
    check("after the block")  # no deadline left behind


def test_the_limit_counts_the_threads_own_cpu_not_the_clock() -> None:
    """Waiting (for the interpreter, for I/O) is not the statement's cost: a rewrite slowed by others' load is
    not sent unrewritten for it."""
    with deadline(50):
        started = time.monotonic()
        time.sleep(0.1)
        assert time.monotonic() - started > 0.05  # the clock went past the limit while the thread waited
        try:
            check("after waiting")
        except BudgetSpent:
            pytest.fail("the time the thread spent waiting counted against its limit")


def test_depth_stops_counting_past_the_limit() -> None:
    tree = sqlglot.parse_one("SELECT " + " + ".join(["a"] * 500), read="spark")
    assert depth(tree, 50) == 51
    assert depth(sqlglot.parse_one("SELECT a + b FROM t", read="spark"), 50) < 10


@pytest.mark.parametrize("terms", [100, 250])
def test_typing_an_or_chain_grows_linearly(terms: int) -> None:
    """Each node's type and constancy are asked once per model: an OR chain of 250 terms took 35 s before."""
    sql = "SELECT count(*) FROM orders WHERE " + " OR ".join(f"id = {i}" for i in range(terms))
    started = time.perf_counter()
    result = rewrite(sql, RewriteContext(Source(ORDERS, ITEMS), database="db", budget=Budget(max_rewrite_ms=0)))
    assert result.decision.passthrough is None and result.decision.error is None
    assert time.perf_counter() - started < 5  # seconds; about 0.1 s here (a limit, not a timing)


def test_the_decision_log_truncates_long_literals_with_their_length(tmp_path: Path) -> None:
    log = DecisionLog(tmp_path / "decisions.jsonl", 10**8, 1)
    long = "x" * 5_000_000
    statement = f"SELECT length('{long}'), 'short' FROM t WHERE s = 'it''s'"
    log.write({"statement": statement, "sent": statement, "user": "u"})
    line = (tmp_path / "decisions.jsonl").read_text()
    assert len(line) < 1000, len(line)
    record = json.loads(line)
    for key in ("statement", "sent"):
        assert "/* 5,000,000 characters, truncated in the decision log */" in record[key]
        assert record[key].endswith("'short' FROM t WHERE s = 'it''s'")
    assert log.recent("u", 1)[0]["statement"] == record["statement"]  # memory holds the short form too
    exact = f"SELECT '{'y' * LONG_LITERAL}'"
    log.write({"statement": exact, "user": "u"})
    assert json.loads((tmp_path / "decisions.jsonl").read_text().splitlines()[-1])["statement"] == exact


def test_the_decision_log_truncates_long_literals_anywhere_in_the_record(tmp_path: Path) -> None:
    """A literal also reaches the decision's predicates and reasons: each copy is truncated."""
    log = DecisionLog(tmp_path / "decisions.jsonl", 10**8, 1)
    literal = f"'{'q' * 200_000}'"
    log.write({"statement": f"SELECT 1 FROM t WHERE s = {literal}", "user": "u",
               "decision": {"tables": [{"predicates": [{"sql": f"s = {literal}"}]}], "passthrough": None}})
    line = (tmp_path / "decisions.jsonl").read_text()
    assert len(line) < 2000, len(line)
    predicate = json.loads(line)["decision"]["tables"][0]["predicates"][0]["sql"]
    assert predicate.startswith("s = 'qqq") and "200,000 characters" in predicate


@pytest.mark.parametrize("text", ["SELECT " + "\\'" * 100_000, "SELECT " + '\\"' * 100_000, "SELECT '" + "x" * 300_000],
                         ids=["escaped-single", "escaped-double", "unterminated"])
def test_counting_and_truncating_literals_take_linear_time(tmp_path: Path, text: str) -> None:
    """An unterminated literal full of escaped quotes made each quote start a scan to the end: 80 kB took 27 s
    to count and 40 s to truncate, holding the interpreter (and so every client) all the while."""
    started = time.perf_counter()
    Budget(max_literals=10).before_parsing(text)
    DecisionLog(tmp_path / "decisions.jsonl", 10**8, 1).write({"statement": text, "user": "u"})
    assert time.perf_counter() - started < 5  # seconds; about 0.1 s here (a limit, not a timing)


@pytest.mark.parametrize("sql, why", [
    pytest.param("SELECT count(*) FROM orders WHERE id IN (" + ", ".join(map(str, range(20_000))) + ")",
                 "holds 20,000 literals", id="long-in-list"),
    pytest.param("SELECT count(*) FROM orders WHERE " + " + ".join(["id"] * 1000) + " > 3", "nest more than 300 deep",
                 id="deep"),
])
def test_answers_from_statistics_keep_the_budget_too(sql: str, why: str) -> None:
    from rewriter.stats_answer import stats_answer

    started = time.perf_counter()
    attempt = stats_answer(sql, CTX)
    assert attempt.answer is None and why in attempt.why_not, attempt.why_not
    assert attempt.why_not.startswith("not parsed: over the rewrite budget")  # the rewrite's record says it
    assert time.perf_counter() - started < 2
