"""Layouts: how a table's rows are placed in files so that queries can skip them (ARCHITECTURE.md §1).

The workload-driven layout of seed 003 (Qd-tree), built so far as far as planning and the what-if:

- ``workload``: the statements to lay a table out for (the proxy's decision log or a SQL file), and the
  predicates each applies to the table, through the rewriter's own analysis, joined filters included
  (a dimension's predicate reaching the table through an equi-join, as the rewriter's diPs do);
- ``joined``: the exact keys of joined filters, read from the senders' files;
- ``sample``: a uniform sample of the table's rows, read from its Parquet files, in the statistics' domain;
- ``qdtree``: candidate cuts and the greedy construction of Algorithm 1 on the sample;
- ``whatif``: the workload replayed over the proposed blocks, the current files and simple layouts;
- ``__main__``: ``python -m layout plan | what-if``.

Not built yet (issue 15): ``apply`` (the PySpark job that writes the blocks), block descriptions used by the
rewriter (as exact knowledge, pinned to the dimension rows it was computed from), and the benchmark layouts
moved here from ``bench/``.
"""
