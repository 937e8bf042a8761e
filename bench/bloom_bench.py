"""``python -m bench bloom``: what per-file Bloom filters (``stats/bloom.py``) skip on TPC-DS, what they cost
in the store and in the rewrite (issue 17, part 2).

Needs the dataset's statistics collected with filters on the key columns, e.g.::

    python -m stats collect --database tpcds_sf1_tuned --bloom ss_customer_sk,ss_item_sk,cs_bill_customer_sk,...

Three measurements, each with the filters and without them (the same statistics, filters stripped on load):

1. **Size and collection time**: per column with filters, the files that have one, bytes in total and per
   file, and the share of the table's own bytes; the time to collect ``--collect-tables`` (into a scratch store)
   with their filters and without, in the same Spark session.
2. **The 99 TPC-DS queries**: bytes kept per query from the rewriter's decisions (no query runs) and the
   rewrite time (median of 3, statistics loaded).
3. **Lookups by key**, the statements ids are for: a customer's sales by ``ss_customer_sk`` / ``cs_bill_customer_sk``,
   an IN list of ten customers, a customer found by ``c_customer_id`` and joined to its sales (its one key
   reaches ``store_sales`` as a diP of exact keys), and the same for items. Each runs on Spark (an in-process
   session over the warehouse catalog) as written and rewritten both ways: bytes read from Spark's scan
   metrics, wall time (median of 3 after a warm-up), and the rows compared with plain Spark's.

The report goes to ``docs/results/bloom.md``.
"""

from __future__ import annotations

import dataclasses
import datetime
import platform
import random
import statistics
import time
from pathlib import Path
from typing import Any

from backend.scan_metrics import collect_with_metrics
from bench.execute import normalised
from bench.query_suite import runnable_queries
from dipper.config import Config
from dipper.errors import DatasetError
from rewriter.rewrite import RewriteContext, rewrite
from stats.freshness import Lister
from stats.loader import StatsLoader
from stats.model import TableStats
from stats.store import StatsStore


class without_indexes:  # noqa: N801 - used like a function: a view of a statistics source
    """The statistics of ``source`` with every statistic kind of ``stats/indexes.py`` stripped: the baseline."""

    def __init__(self, source: Any) -> None:
        self._source = source

    def __getattr__(self, name: str) -> Any:
        return getattr(self._source, name)

    def table_stats(self, table: str, fresh_listing: bool = False) -> TableStats | None:
        stats = self._source.table_stats(table, fresh_listing=fresh_listing)
        if stats is None:
            return None
        return dataclasses.replace(stats, columns={c: dataclasses.replace(s, indexes={})
                                                   for c, s in stats.columns.items()})


@dataclasses.dataclass
class Lookup:
    name: str
    sql: str
    bytes_input: int = 0
    kept_without: int = 0  # bytes kept by the rewriter without filters
    kept_with: int = 0
    read: dict[str, int] = dataclasses.field(default_factory=dict)  # variant -> bytes Spark read
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    identical: bool = True


def measure(config: Config, database: str, lookups: int, output: Path,
            collect_tables: tuple[str, ...] = ("store_sales", "catalog_sales")) -> int:
    source = StatsLoader(StatsStore(config.paths.stats), Lister(600))
    snap = source.snapshot()
    filtered = {name: e for name, e in snap.tables.items() if name.startswith(database + ".") and e.indexes}
    if not filtered:
        raise DatasetError(f"no Bloom filters in the statistics of {database}; collect them with: python -m stats "
                           f"collect --database {database} --bloom ss_customer_sk,ss_item_sk,...")
    r = config.rewriter
    on = RewriteContext(source, database=database, **r.context_options())
    off = dataclasses.replace(on, stats=without_indexes(source))
    sizes = _sizes(source, filtered)
    queries = _queries(database, on, off)
    print(f"99 queries: {sum(q['with'] for q in queries) / 1e9:.2f} GB kept with filters, "
          f"{sum(q['without'] for q in queries) / 1e9:.2f} GB without")
    runs, timings = _lookups(config, database, on, off, lookups, {t: filtered[f"{database}.{t}"].indexes
                                                                   for t in collect_tables if f"{database}.{t}" in filtered})
    _report(output, database, sizes, queries, runs, timings)
    print(f"wrote {output}")
    return 0 if all(x.identical for x in runs) else 1


def _sizes(source: StatsLoader, filtered: dict) -> list[dict[str, Any]]:
    out = []
    for name, entry in sorted(filtered.items()):
        stats = source.stored(name)
        assert stats is not None
        table_bytes = int(stats.sizes.sum())
        for column in entry.indexes.get("bloom", ()):
            loaded = stats.columns[column].indexes.get("bloom")
            if loaded is None:
                continue
            present = int(loaded.present.sum())
            bits = sorted(int(1 << b) for b in loaded.log2[loaded.present])
            out.append({"table": name.partition(".")[2], "column": column, "files": present, "bytes": loaded.nbytes,
                        "per_file": loaded.nbytes / max(1, present), "median_bits": bits[len(bits) // 2] if bits else 0,
                        "share": loaded.nbytes / max(1, table_bytes)})
    return out


def _median_ms(sql: str, ctx: RewriteContext) -> tuple[Any, float]:
    result = rewrite(sql, ctx)
    times = []
    for _ in range(3):
        started = time.perf_counter()
        rewrite(sql, ctx)
        times.append((time.perf_counter() - started) * 1000)
    return result, statistics.median(times)


def _kept(result: Any) -> tuple[int, int]:
    tables = [t for t in result.decision.tables if t.has_stats]
    return sum(t.bytes_total for t in tables), sum(t.bytes_kept for t in tables)


def _queries(database: str, on: RewriteContext, off: RewriteContext) -> list[dict[str, Any]]:
    out = []
    for name, sql in sorted(runnable_queries("tpcds").items()):
        with_filters, ms_with = _median_ms(sql, on)
        without, ms_without = _median_ms(sql, off)
        total, kept_with = _kept(with_filters)
        _, kept_without = _kept(without)
        out.append({"query": name, "total": total, "with": kept_with, "without": kept_without,
                    "ms_with": ms_with, "ms_without": ms_without})
    return out


def _keys(spark: Any, database: str, rng: random.Random, n: int) -> dict[str, list]:
    """Random customers and items that have store sales, with their business ids."""
    customers = spark.sql(f"SELECT c_customer_sk, c_customer_id FROM {database}.customer WHERE c_customer_sk IN "
                          f"(SELECT ss_customer_sk FROM {database}.store_sales) ORDER BY c_customer_sk").collect()
    items = spark.sql(f"SELECT i_item_sk, i_item_id FROM {database}.item ORDER BY i_item_sk").collect()
    return {"customers": rng.sample([tuple(r) for r in customers], n), "items": rng.sample([tuple(r) for r in items], n)}


def _lookup_statements(database: str, keys: dict[str, list]) -> list[Lookup]:
    out = []
    for n, ((ck, cid), (ik, iid)) in enumerate(zip(keys["customers"], keys["items"])):
        ten = ", ".join(str(k) for k, _ in keys["customers"][n:n + 10])
        out += [
            Lookup("customer =", f"SELECT count(*), sum(ss_net_paid) FROM store_sales WHERE ss_customer_sk = {ck}"),
            Lookup("customer IN (10)", f"SELECT count(*), sum(ss_net_paid) FROM store_sales WHERE ss_customer_sk IN ({ten})"),
            Lookup("customer by id, joined", "SELECT c_last_name, sum(ss_net_paid) FROM store_sales JOIN customer ON "
                   f"ss_customer_sk = c_customer_sk WHERE c_customer_id = '{cid}' GROUP BY c_last_name"),
            Lookup("catalog customer =", "SELECT count(*), sum(cs_net_paid) FROM catalog_sales WHERE "
                   f"cs_bill_customer_sk = {ck}"),
            Lookup("item =", f"SELECT count(*), sum(ss_net_paid) FROM store_sales WHERE ss_item_sk = {ik}"),
            Lookup("item by id, joined", "SELECT i_brand, sum(ss_net_paid) FROM store_sales JOIN item ON "
                   f"ss_item_sk = i_item_sk WHERE i_item_id = '{iid}' GROUP BY i_brand"),
        ]
    return out


def _collect_times(spark: Any, database: str, tables: dict[str, dict]) -> dict[str, tuple[float, float]]:
    """Seconds to collect each table into a scratch store without its filters and with them."""
    import tempfile

    from stats.collect import collect

    out = {}
    for table, kinds in tables.items():
        times = []
        for asked in ({name: () for name in kinds}, kinds):
            with tempfile.TemporaryDirectory() as scratch:
                started = time.perf_counter()
                collect(spark, StatsStore(Path(scratch)), [f"{database}.{table}"], indexes=asked)
                times.append(time.perf_counter() - started)
        out[table] = (times[0], times[1])
        print(f"collect {table}: {times[0]:.1f}s without filters, {times[1]:.1f}s with")
    return out


def _lookups(config: Config, database: str, on: RewriteContext, off: RewriteContext, n: int,
             collect_tables: dict[str, dict]) -> tuple[list[Lookup], dict[str, tuple[float, float]]]:
    from backend.catalog import register_warehouse
    from backend.spark_session import spark_session

    spark = spark_session(config, "dipper-bloom-bench")
    try:
        register_warehouse(spark, config.paths.warehouse)
        timings = _collect_times(spark, database, collect_tables)
        statements = _lookup_statements(database, _keys(spark, database, random.Random(2026), n))
        spark.sql(f"USE {database}")
        for i, lookup in enumerate(statements, 1):
            variants = {"spark": lookup.sql, "without filters": rewrite(lookup.sql, off).sql,
                        "with filters": rewrite(lookup.sql, on).sql}
            lookup.bytes_input, lookup.kept_without = _kept(rewrite(lookup.sql, off))
            _, lookup.kept_with = _kept(rewrite(lookup.sql, on))
            reference = None
            for variant, text in variants.items():
                rows, metrics = collect_with_metrics(spark.sql(text))  # warm-up, rows and bytes read
                lookup.read[variant] = sum(m.bytes for m in metrics)
                reference = normalised(rows) if reference is None else reference
                lookup.identical &= normalised(rows) == reference
            for variant, text in variants.items():
                times = []
                for _ in range(3):
                    started = time.perf_counter()
                    spark.sql(text).collect()
                    times.append(time.perf_counter() - started)
                lookup.seconds[variant] = statistics.median(times)
            print(f"[{i}/{len(statements)}] {lookup.name}: read {lookup.read['without filters'] / 1e6:.1f} MB without "
                  f"filters, {lookup.read['with filters'] / 1e6:.1f} MB with; {lookup.seconds['spark']:.2f}s / "
                  f"{lookup.seconds['with filters']:.2f}s; identical: {lookup.identical}")
    finally:
        spark.stop()
    return statements, timings


def _report(output: Path, database: str, sizes: list[dict], queries: list[dict], runs: list[Lookup],
            timings: dict[str, tuple[float, float]]) -> None:
    lines = [f"# Bloom filters on {database}", "",
             f"Measured {datetime.date.today()} by `python -m bench bloom --database {database}` on "
             f"{platform.machine()} ({platform.python_version()}), Spark in-process (`local[2]`). Filters: "
             "`stats/bloom.py` (7 hashes, about 10 bits per distinct value of a file, at most 128 KiB per file "
             "and column). Without filters = the same statistics with the filters stripped on load.", "",
             "## Size", "", "| table | column | files | bytes | bytes per file | median bits per file | share of table bytes |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for s in sizes:
        lines.append(f"| {s['table']} | {s['column']} | {s['files']} | {s['bytes']:,} | {s['per_file']:,.0f} | "
                     f"{s['median_bits']:,} | {s['share']:.2%} |")
    total = sum(s["bytes"] for s in sizes)
    lines += ["", f"All filters together: {total / 1e6:.2f} MB.", "",
              "Collection time (`stats collect` of the table into a scratch store, one Spark session, footers used):", "",
              "| table | without filters (s) | with filters (s) | filters on |", "|---|---:|---:|---|"]
    for table, (without, with_filters) in timings.items():
        columns = ", ".join(c for s in sizes if s["table"] == table for c in [s["column"]])
        lines.append(f"| {table} | {without:.1f} | {with_filters:.1f} | {columns} |")
    lines.append("")
    kept_with, kept_without = sum(q["with"] for q in queries), sum(q["without"] for q in queries)
    gained = [q for q in queries if q["with"] < q["without"]]
    lines += ["## The 99 TPC-DS queries (rewriter decisions, no query run)", "",
              f"Bytes kept over all queries: {kept_without / 1e9:.3f} GB without filters, {kept_with / 1e9:.3f} GB "
              f"with. Queries that keep fewer bytes with filters: {len(gained)} of {len(queries)}.", "",
              f"Rewrite time, median over queries: {statistics.median(q['ms_without'] for q in queries):.1f} ms "
              f"without filters, {statistics.median(q['ms_with'] for q in queries):.1f} ms with; slowest with: "
              f"{max(q['ms_with'] for q in queries):.1f} ms.", ""]
    if gained:
        lines += ["| query | bytes of its tables | kept without | kept with |", "|---|---:|---:|---:|"]
        lines += [f"| {q['query']} | {q['total']:,} | {q['without']:,} | {q['with']:,} |" for q in gained]
        lines.append("")
    lines += ["## Lookups by key (run on Spark)", "",
              "Per shape, over its instances: bytes Spark read (scan metrics) as written, rewritten without "
              "filters and with them; median wall time; every result compared with plain Spark's.", "",
              "| statement | instances | read by Spark (MB) | without filters (MB) | with filters (MB) | "
              "INPUTCUT with filters | Spark (s) | with filters (s) | identical |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name in dict.fromkeys(x.name for x in runs):
        group = [x for x in runs if x.name == name]
        mb = {v: sum(x.read[v] for x in group) / len(group) / 1e6 for v in group[0].read}
        cut = mb["spark"] / mb["with filters"] if mb["with filters"] else float("inf")
        lines.append(f"| {name} | {len(group)} | {mb['spark']:.1f} | {mb['without filters']:.1f} | "
                     f"{mb['with filters']:.1f} | {cut:.1f}x | "
                     f"{statistics.median(x.seconds['spark'] for x in group):.2f} | "
                     f"{statistics.median(x.seconds['with filters'] for x in group):.2f} | "
                     f"{'yes' if all(x.identical for x in group) else 'NO'} |")
    lines += ["", f"![bytes read per lookup]({output.with_suffix('.png').name})", ""]
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text("\n".join(lines) + "\n")
    _plot(output.with_suffix(".png"), database, runs)


def _plot(path: Path, database: str, runs: list[Lookup]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(x.name for x in runs))
    variants = ("spark", "without filters", "with filters")
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.27
    for i, variant in enumerate(variants):
        mb = [statistics.mean(x.read[variant] for x in runs if x.name == n) / 1e6 for n in names]
        ax.bar([j + (i - 1) * width for j in range(len(names))], mb, width=width,
               label={"spark": "Spark as written", "without filters": "Dipper without Bloom filters",
                      "with filters": "Dipper with Bloom filters"}[variant])
    ax.set_xticks(range(len(names)), names, rotation=15)
    ax.set_ylabel("MB read (mean per statement)")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.3)
    ax.set_title(f"Lookups by key on {database}")
    ax.legend(loc="upper center", ncol=3, fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
