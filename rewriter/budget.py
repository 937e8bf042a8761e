"""What one statement may cost the rewriter (issue 62, item 3): limits checked before parsing (the statement's
length and literal count), after parsing (its expression depth) and as it runs (time), so that no statement
holds the proxy's CPU for long. A statement over any limit is sent as it is, and its decision says which limit
and how to raise it; nothing keeps running after the budget is spent.

Why these three and where:

- Parsing, resolving names and generating SQL are sqlglot's, and cannot be stopped half way. Their cost grows
  with the statement's length and literal count (an ``IN`` list of 20,000 keys took 20 s to rewrite here) and,
  faster than linearly, with the nesting depth of its expressions (sqlglot's qualification walks from every
  column to the root: a sum of 1,000 terms, 1,000 deep, took 0.9 s; of 5,000 terms, 32 s). So those are
  bounded before the work starts: TPC-DS's 99 queries reach depth 29, 419 literals and 7.7 kB.
- The rewriter's own phases (per table reference, per diP exchange, per exact-key read) call :func:`check`,
  which ends the rewrite with :class:`BudgetSpent` once it has used ``rewriter.max_rewrite_ms`` of CPU. The
  limit is on the thread's own CPU time, not on the clock: rewrites share one interpreter, so under load each
  takes longer on the clock for others' work, and a clock limit would send more statements unrewritten (and so
  read more) exactly when the backend is busiest. Each client's rewrite is timed on its own (a context
  variable per thread).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import re
import time
from collections.abc import Iterator

from sqlglot import exp

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("rewrite_deadline", default=None)
# Quoted strings and numbers: what makes an IN list long. Comments and identifiers with digits count too; the
# limit is far above what hand-written statements hold, so an overcount costs nothing.
# An unterminated literal runs to the end of the text: without ``\Z`` every quote of a text full of escaped quotes
# starts a scan to the end that fails, which takes time growing with the square of the length (80 kB: 27 s).
_LITERAL = re.compile(r"'(?:[^'\\]|\\.)*(?:'|\Z)|\"(?:[^\"\\]|\\.)*(?:\"|\Z)|(?<![\w$])\d+(?:\.\d*)?(?:[eE][+-]?\d+)?",
                      re.S)


@dataclasses.dataclass(frozen=True)
class Budget:
    max_statement_chars: int = 1_000_000
    max_literals: int = 5_000
    max_expression_depth: int = 300
    max_rewrite_ms: int = 2_000  # 0: no time limit

    def before_parsing(self, sql: str) -> str | None:
        """Why ``sql`` is over the budget before it is parsed, or None."""
        if len(sql) > self.max_statement_chars:
            return f"the statement is {len(sql):,} characters long, over rewriter.max_statement_chars " \
                   f"({self.max_statement_chars:,})"
        if len(sql) // 2 > self.max_literals:  # a literal and a separator take two characters at least
            literals = sum(1 for _ in _LITERAL.finditer(sql))
            if literals > self.max_literals:
                return f"the statement holds {literals:,} literals, over rewriter.max_literals ({self.max_literals:,})"
        return None

    def after_parsing(self, tree: exp.Expression) -> str | None:
        """Why the parsed statement is over the budget, or None."""
        deepest = depth(tree, self.max_expression_depth)
        if deepest > self.max_expression_depth:
            return f"its expressions nest more than {self.max_expression_depth} deep " \
                   "(rewriter.max_expression_depth)"
        return None


def depth(tree: exp.Expression, limit: int) -> int:
    """The nesting depth of ``tree``, or ``limit + 1`` as soon as it exceeds ``limit`` (without recursion)."""
    stack = [(tree, 1)]
    deepest = 0
    while stack:
        node, d = stack.pop()
        if d > limit:
            return d
        deepest = max(deepest, d)
        stack.extend((child, d + 1) for child in node.iter_expressions())
    return deepest


class BudgetSpent(Exception):  # noqa: N818 - a decision, not an error of the statement
    def __init__(self, where: str, limit_ms: int) -> None:
        super().__init__(f"the rewrite used more CPU than rewriter.max_rewrite_ms ({limit_ms:,} ms); stopped "
                         f"{where}")


@contextlib.contextmanager
def deadline(limit_ms: int) -> Iterator[None]:
    """Run the block with a limit on the thread's CPU time that :func:`check` enforces (none if ``limit_ms`` is
    0)."""
    token = _DEADLINE.set(time.thread_time() + limit_ms / 1000 if limit_ms > 0 else None)
    _LIMIT.set(limit_ms)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


_LIMIT: contextvars.ContextVar[int] = contextvars.ContextVar("rewrite_limit_ms", default=0)


def check(where: str) -> None:
    """End the rewrite (:class:`BudgetSpent`) if its time is spent; ``where`` says at what step."""
    limit = _DEADLINE.get()
    if limit is not None and time.thread_time() > limit:
        raise BudgetSpent(where, _LIMIT.get())
