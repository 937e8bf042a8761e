"""The predicate property test against Spark (ARCHITECTURE.md §7, issue 13).

A seeded generator builds a small table whose files hold every edge of every type, collects its statistics
with the real collector, generates random predicates over everything the rewriter understands, and checks
on Spark, under several session settings, that every file the rewriter skips holds no matching row and
raises no error, and that the rewritten query answers (or fails) exactly as the original.

The modules, one job each:

- ``values``: the columns, their Spark and Arrow types, and the values of each type worth testing;
- ``tables``: lay the values out into Parquet files, register the table, collect its statistics;
- ``predicates``: the predicate tree, the seeded generator and the shrinking candidates;
- ``check``: the property, checked for a batch of predicates under one session setting;
- ``shrink``: a failing predicate reduced to a minimal one, and the reproducer printed for it;
- ``run``: ``python -m bench fuzz-predicates``, the long-running command.
"""
