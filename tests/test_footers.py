"""Footer rows (``stats/footers.footer_row``): what a Parquet footer may vouch for, file by file, and when a file
must stay unknown because Spark would read it otherwise than its footer says (or refuse to read it). Real
Parquet files written by pyarrow; Spark's own reading of such files is checked in test_statistics_upkeep.py."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from stats.footers import footer_row
from stats.freshness import FileInfo, list_files
from stats.model import kind_of
from stats.store import COLUMN_PREFIX, StatsStore, TableEntry
from stats.upkeep import cover_from_footers

SCHEMA = {"id": "bigint", "amount": "decimal(10,2)", "day": "date", "name": "string", "ratio": "double"}


def kinds(schema: dict[str, str]) -> dict:
    return {c: kind_of(t) for c, t in schema.items()}


def write(path: Path, table: pa.Table, **kwargs) -> FileInfo:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, **kwargs)
    [info] = [f for f in list_files(f"file:{path.parent}") if f.path.endswith(path.name)]
    return info


def row_of(tmp_path: Path, table: pa.Table, schema: dict[str, str] = SCHEMA, partitions: tuple[str, ...] = (),
           **kwargs) -> dict | None:
    info = write(tmp_path / "f.parquet", table, **kwargs)
    return footer_row(info, str(tmp_path / "f.parquet"), schema, kinds(schema), partitions)


def sample(**override) -> pa.Table:
    columns = {
        "id": pa.array([5, 9, None], pa.int64()),
        "amount": pa.array([decimal.Decimal("1.50"), decimal.Decimal("-2.25"), None], pa.decimal128(10, 2)),
        "day": pa.array([datetime.date(2024, 1, 2), datetime.date(2024, 3, 4), None], pa.date32()),
        "name": pa.array(["b", "a", None]),
        "ratio": pa.array([0.5, float("nan"), None]),
    }
    columns.update(override)
    return pa.table(columns)


def test_a_footer_gives_exact_bounds_and_null_counts(tmp_path: Path) -> None:
    row = row_of(tmp_path, sample())
    assert row is not None and row["rows"] == 3 and row["footer"] is True
    assert row[COLUMN_PREFIX + "id"] | {} == {"min": 5, "max": 9, "nulls": 1, "known": True, "rs_lo": None,
                                             "rs_hi": None, "values": None}
    assert (row[COLUMN_PREFIX + "amount"]["min"], row[COLUMN_PREFIX + "amount"]["max"]) == \
        (decimal.Decimal("-2.25"), decimal.Decimal("1.50"))
    day = row[COLUMN_PREFIX + "day"]
    assert (day["min"], day["max"]) == ((datetime.date(2024, 1, 2) - datetime.date(1970, 1, 1)).days,
                                        (datetime.date(2024, 3, 4) - datetime.date(1970, 1, 1)).days)
    assert (row[COLUMN_PREFIX + "name"]["min"], row[COLUMN_PREFIX + "name"]["max"]) == ("a", "b")
    assert row[COLUMN_PREFIX + "ratio"]["known"] is False  # a NaN is outside any footer's min/max


def test_columns_a_footer_cannot_vouch_for_are_unknown_not_guessed(tmp_path: Path) -> None:
    """Partition columns (values in the path), missing columns, dates before 1900 (calendar rebasing),
    files of Spark's legacy calendar, row groups without statistics: the file is described, those columns not."""
    old = sample(day=pa.array([datetime.date(1850, 1, 1), datetime.date(2024, 1, 1), None], pa.date32()))
    assert row_of(tmp_path, old)[COLUMN_PREFIX + "day"]["known"] is False
    legacy = sample().replace_schema_metadata({b"org.apache.spark.legacyDateTime": b""})
    assert row_of(tmp_path, legacy)[COLUMN_PREFIX + "day"]["known"] is False
    assert row_of(tmp_path, sample(), partitions=("id",))[COLUMN_PREFIX + "id"]["known"] is False
    assert row_of(tmp_path, sample().drop_columns(["name"]))[COLUMN_PREFIX + "name"]["nulls"] == -1
    unstated = row_of(tmp_path, sample(), write_statistics=["name"])
    assert unstated[COLUMN_PREFIX + "id"]["known"] is False and unstated[COLUMN_PREFIX + "name"]["known"] is True


@pytest.mark.parametrize("column, array, why", [
    ("id", pa.array([1, 2, 3], pa.uint64()), "unsigned: Spark reads it as a decimal"),
    ("amount", pa.array([decimal.Decimal("1.5")] * 3, pa.decimal128(12, 1)), "another precision and scale"),
    ("name", pa.array([1, 2, 3], pa.int32()), "an integer where the table has a string"),
    ("day", pa.array([datetime.datetime(2024, 1, 1)] * 3, pa.timestamp("us")), "a timestamp where a date is"),
])
def test_a_file_spark_reads_otherwise_stays_unknown(tmp_path: Path, column: str, array: pa.Array, why: str) -> None:
    assert row_of(tmp_path, sample(**{column: array})) is None, why


def test_integers_may_widen_not_narrow(tmp_path: Path) -> None:
    narrow = sample(id=pa.array([1, 2, None], pa.int32()))
    assert row_of(tmp_path, narrow)[COLUMN_PREFIX + "id"]["max"] == 2  # Spark widens an INT file column to BIGINT
    assert row_of(tmp_path, sample(), schema={**SCHEMA, "id": "int"}) is None  # a BIGINT file under an INT table


def test_columns_differing_only_in_case_make_the_file_unknown(tmp_path: Path) -> None:
    assert row_of(tmp_path, sample().append_column("ID", pa.array([1, 2, 3], pa.int64()))) is None


def test_cover_adds_new_files_drops_gone_ones_and_keeps_the_rest(tmp_path: Path) -> None:
    from stats.collect import arrow_schema

    folder = tmp_path / "t"
    first = write(folder / "a.parquet", sample())
    store = StatsStore(tmp_path / "stats")
    k = kinds(SCHEMA)
    scanned = footer_row(first, str(folder / "a.parquet"), SCHEMA, k) | {"footer": False}
    entry = TableEntry(name="db.t", location=f"file:{folder}", format="parquet", partition_columns=(), schema=SCHEMA,
                       kinds=k, skipped_columns={}, range_set_size=8, value_list_max=16, collected_at="now", files=1,
                       bytes=first.size)
    store.commit({"db.t": (entry, pa.Table.from_pylist([scanned], schema=arrow_schema(k)))})
    write(folder / "b.parquet", sample(id=pa.array([100, 200, 300], pa.int64())))
    (folder / "c.parquet").write_bytes(b"not parquet at all")

    result = cover_from_footers(store, "db.t")
    assert (result.added, result.dropped, [f.path.rsplit("/", 1)[1] for f in result.failed]) == (1, 0, ["c.parquet"])
    rows = {r["path"].rsplit("/", 1)[1]: r for r in store.snapshot().read("db.t").to_pylist()}
    assert set(rows) == {"a.parquet", "b.parquet"} and rows["a.parquet"]["footer"] is False
    assert rows["b.parquet"]["footer"] is True and rows["b.parquet"][COLUMN_PREFIX + "id"]["max"] == 300
    assert store.snapshot().entry("db.t").files == 2
    from stats.show import show

    assert "(1 described from Parquet footers only" in show(store, "db.t")

    (folder / "a.parquet").unlink()
    again = cover_from_footers(store, "db.t", skip=result.failed)
    assert (again.added, again.dropped, again.failed) == (0, 1, ())
    assert [r["path"].rsplit("/", 1)[1] for r in store.snapshot().read("db.t").to_pylist()] == ["b.parquet"]


def test_cover_leaves_a_table_whose_statistics_went_meanwhile(tmp_path: Path) -> None:
    assert cover_from_footers(StatsStore(tmp_path / "stats"), "db.none").added == 0


def test_ambiguous_and_narrowed_columns_keep_the_file_unknown(tmp_path: Path) -> None:
    """A column named "a.b" beside a struct a with a field b (the footer's paths are the same), and a DOUBLE file
    column under a FLOAT table column (Spark refuses to read it: a row would let a query skip the error)."""
    dotted = pa.table({"a.b": pa.array([5, 6], pa.int64()), "a": pa.array([{"b": 1000}, {"b": 1000}])})
    assert row_of(tmp_path, dotted, schema={"a.b": "bigint"}) is None
    doubles = sample().drop_columns(["ratio"]).append_column("ratio", pa.array([1.0, 2.0, 3.0], pa.float64()))
    assert row_of(tmp_path, doubles, schema={**SCHEMA, "ratio": "float"}) is None
    assert row_of(tmp_path, doubles) is not None  # under DOUBLE it reads as it is


def test_a_bound_python_cannot_hold_leaves_the_column_unknown(tmp_path: Path) -> None:
    far = sample(day=pa.array([0, 3_000_000, None], pa.date32()))  # day 3,000,000 is past Python's year 9999
    row = row_of(tmp_path, far)
    assert row is not None and row[COLUMN_PREFIX + "day"]["known"] is False


def test_rows_a_collector_commits_during_a_pass_are_kept(tmp_path: Path) -> None:
    """The pass merges into the version current when it commits: a row committed meanwhile stays."""
    from stats.collect import arrow_schema

    folder = tmp_path / "t"
    first = write(folder / "a.parquet", sample())
    store = StatsStore(tmp_path / "stats")
    k = kinds(SCHEMA)
    entry = TableEntry(name="db.t", location=f"file:{folder}", format="parquet", partition_columns=(), schema=SCHEMA,
                       kinds=k, skipped_columns={}, range_set_size=8, value_list_max=16, collected_at="now", files=1,
                       bytes=first.size)
    store.commit({"db.t": (entry, pa.Table.from_pylist([footer_row(first, str(folder / "a.parquet"), SCHEMA, k)],
                                                        schema=arrow_schema(k)))})
    second = write(folder / "b.parquet", sample())
    original = store.update

    def update_after_a_collector(change):  # a collector commits b just before the pass takes the lock
        row = footer_row(second, str(folder / "b.parquet"), SCHEMA, k) | {"footer": False}
        original(lambda base: ({"db.t": (entry, pa.Table.from_pylist(base.read("db.t").to_pylist() + [row],
                                                                     schema=arrow_schema(k)))}, ()))
        return original(change)

    store.update = update_after_a_collector  # type: ignore[method-assign]
    cover_from_footers(store, "db.t")
    rows = {r["path"].rsplit("/", 1)[1]: r["footer"] for r in store.snapshot().read("db.t").to_pylist()}
    assert rows == {"a.parquet": True, "b.parquet": False}


def test_statistics_collected_again_elsewhere_are_not_forgotten_for_the_old_place(tmp_path: Path) -> None:
    """The proxy drops a moved table's statistics only if they are still those of the old location: another
    client may have collected them again at the new one meanwhile."""
    from stats.collect import arrow_schema
    from stats.freshness import Lister
    from stats.loader import StatsLoader

    store = StatsStore(tmp_path / "stats")
    k = kinds(SCHEMA)
    entry = TableEntry(name="db.t", location="file:/new", format="parquet", partition_columns=(), schema=SCHEMA,
                       kinds=k, skipped_columns={}, range_set_size=8, value_list_max=16, collected_at="now", files=0,
                       bytes=0)
    store.commit({"db.t": (entry, pa.Table.from_pylist([], schema=arrow_schema(k)))})
    loader = StatsLoader(store, Lister(0))
    assert loader.forget(["db.t"], {"db.t": "file:/old"}) == [] and store.snapshot().entry("db.t") is not None
    assert loader.forget(["db.t"], {"db.t": "file:/new"}) == ["db.t"] and store.snapshot().entry("db.t") is None
