"""Per-file statistics: the model, the store, the PySpark collector, freshness and the loader (ARCHITECTURE.md §4)."""
