"""Benchmark datasets (TPC-H, TPC-DS) in the diP paper's layouts, the benchmark queries, the demo."""
