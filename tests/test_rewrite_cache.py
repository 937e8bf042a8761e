"""Rewrites of repeated statements, kept (rewriter/cache.py), without Spark: served only while every setting
and everything the statistics source returned is the same, and never shared in a form a caller can change."""

from __future__ import annotations

import dataclasses

import pytest

from rewriter.cache import RewriteCache
from rewriter.rewrite import RewriteContext, rewrite
from rewriter.session import SessionSettings
from tests.test_rewriter import ITEMS, ORDERS, Source

JOIN = "SELECT count(*) FROM orders o JOIN items i ON o.id = i.order_id WHERE o.status = 'F'"


def context(source: Source, **changes) -> RewriteContext:
    return RewriteContext(source, database="db", cache=changes.pop("cache"), **changes)


def test_a_repeated_statement_is_served_from_the_cache() -> None:
    cache = RewriteCache()
    ctx = context(Source(ORDERS, ITEMS), cache=cache)
    first, again = rewrite(JOIN, ctx), rewrite(JOIN, ctx)
    assert first.changed and not first.decision.cached
    assert again.decision.cached and again.sql == first.sql
    assert [t.files_kept for t in again.decision.tables] == [t.files_kept for t in first.decision.tables]
    assert (cache.hits, cache.misses, len(cache)) == (1, 1, 1)


def test_new_statistics_or_another_listing_are_a_miss() -> None:
    """A table whose statistics object is another one (a file added, changed or gone; a new store version) is
    rewritten again, and the new answer is what a rewrite without the cache gives."""
    cache = RewriteCache()
    source = Source(ORDERS, ITEMS)
    ctx = context(source, cache=cache)
    rewrite(JOIN, ctx)
    source.tables["db.items"] = dataclasses.replace(ITEMS, unknown_files=1, unknown_bytes=10)
    fresh = rewrite(JOIN, ctx)
    assert not fresh.decision.cached
    assert fresh.sql == rewrite(JOIN, RewriteContext(source, database="db")).sql
    items = next(t for t in fresh.decision.tables if t.table == "db.items")
    assert items.unknown_files == 1


@pytest.mark.parametrize("changes", [{"session": SessionSettings(ansi=False)}, {"dips": False},
                                     {"shadowed": frozenset({"orders"})}, {"unusable": {"db.items": "moved"}}],
                         ids=["session", "dips", "shadowed", "unusable"])
def test_other_settings_are_a_miss(changes: dict) -> None:
    cache = RewriteCache()
    source = Source(ORDERS, ITEMS)
    rewrite(JOIN, context(source, cache=cache))
    assert not rewrite(JOIN, context(source, cache=cache, **changes)).decision.cached, changes


def test_another_statement_is_a_miss() -> None:
    cache = RewriteCache()
    source = Source(ORDERS, ITEMS)
    rewrite(JOIN, context(source, cache=cache))
    assert not rewrite(JOIN.replace("'F'", "'O'"), context(source, cache=cache)).decision.cached


def test_a_caller_changing_its_decision_does_not_change_the_cache() -> None:
    cache = RewriteCache()
    ctx = context(Source(ORDERS, ITEMS), cache=cache)
    first = rewrite(JOIN, ctx)
    first.decision.error, first.decision.changed = "the catalog could not be asked", False
    first.decision.tables[0].files_kept = 99
    again = rewrite(JOIN, ctx)
    assert again.decision.cached and again.decision.error is None and again.decision.changed
    assert again.decision.tables[0].files_kept != 99


def test_the_cache_holds_at_most_its_size() -> None:
    cache = RewriteCache(size=2)
    ctx = context(Source(ORDERS, ITEMS), cache=cache)
    for status in "ABC":
        rewrite(JOIN.replace("'F'", f"'{status}'"), ctx)
    assert len(cache) == 2
    assert not rewrite(JOIN.replace("'F'", "'A'"), ctx).decision.cached  # the oldest went first
