"""Layouts: how a table's rows are placed in files so that queries can skip them (ARCHITECTURE.md §1). The one
place that writes a table in a layout.

- ``simple``: one order per table (``tuned``, ``keyed``, ``random:<seed>``, ``partitioned``) and the PySpark job
  that writes a table in one; the benchmarks' datasets are written by it (``bench/lay_out.py``);
- the workload-driven layout of seed 003 (Qd-tree):
  - ``workload``: the statements to lay a table out for (the proxy's decision log or a SQL file), and the
    predicates each applies to the table, through the rewriter's own analysis, joined filters included
    (a dimension's predicate reaching the table through an equi-join, as the rewriter's diPs do);
  - ``joined``: the exact keys of joined filters, read from the senders' files;
  - ``sample``: a uniform sample of the table's rows, read from its Parquet files, in the statistics' domain;
  - ``qdtree``: candidate cuts and the greedy construction of Algorithm 1 on the sample;
  - ``whatif``: the workload replayed over the proposed blocks (judged as the rewriter would judge their
    files), the current files and simple layouts;
  - ``apply``: the job that rewrites a table into the blocks of a plan, as a new version, and records the
    blocks' descriptions for the rewriter (``rewriter/blocks.py``);
- ``__main__``: ``python -m layout plan | what-if | apply``.
"""
