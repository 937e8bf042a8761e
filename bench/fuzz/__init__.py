"""Random differential queries (ARCHITECTURE.md §7, issue 13): seeded random Spark SQL over TPC-H and
TPC-DS, run as written and as rewritten on one Spark session, compared exactly, failures shrunk.

- ``schema.py``: what the generator knows of the tables: columns, join domains, value ranges.
- ``generate.py``: the seeded query generator (pure: a seed and an index always give the same text).
- ``differential.py``: one query, original against rewritten, on Spark; the verdict.
- ``shrink.py``: a failing query made smaller while it still fails the same way.
- ``run.py``: ``python -m bench fuzz-queries``: datasets, statistics, the loop, progress and totals.
"""

# Every kind of dataset the search covers: two layouts of TPC-H, TPC-DS, both with qd-tree blocks, and the
# adversarial schema.
DEFAULT_DATASETS = "tpch:tuned,tpch:keyed,tpcds:tuned,tpch:qdtree,tpcds:qdtree,adversarial"
