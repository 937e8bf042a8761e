"""How Spark reads a file (``stats/spark_reader.py``, issue 61 cases 3 and 5): files in Spark's legacy
calendar, files as Spark 2.4 leaves them, strings that are not UTF-8. What Dipper reads is checked against
what Spark reads from the same file; where they could differ, Dipper refuses (exact keys) or leaves the
column unknown (statistics), never guesses."""

from __future__ import annotations

import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rewriter.rewrite import RewriteContext, rewrite
from stats import spark_reader
from stats.collect import collect
from stats.freshness import Lister
from stats.loader import StatsLoader
from stats.model import Kind
from stats.store import StatsStore
from tests.conftest import Stack

pytestmark = pytest.mark.spark
DATE = Kind("date")
_EPOCH = datetime.date(1970, 1, 1)


def _spark_days(stack: Stack, folder: Path) -> list[int]:
    rows = stack.spark.read.parquet(str(folder)).selectExpr("unix_date(d) AS d").orderBy("d").collect()
    return [r.d for r in rows]


def _file_of(folder: Path) -> Path:
    return next(folder.glob("*.parquet"))


@pytest.mark.parametrize("mode", ["LEGACY", "CORRECTED"])
def test_dates_written_in_either_calendar(stack: Stack, tmp_path: Path, mode: str) -> None:
    """A DATE column Spark wrote with ``datetimeRebaseModeInWrite=LEGACY`` is stored in the Julian calendar:
    pyarrow reads 1000-01-01 as 1000-01-06, Spark rebases it back. Dipper refuses the file's ancient dates;
    the CORRECTED file it reads value for value as Spark does."""
    session = stack.spark.newSession()
    session.conf.set("spark.sql.parquet.datetimeRebaseModeInWrite", mode)
    folder = tmp_path / mode
    session.sql("SELECT d FROM VALUES (DATE '1000-01-01'), (DATE '2020-02-29') AS t(d)").coalesce(1) \
        .write.parquet(str(folder))
    parquet = pq.ParquetFile(_file_of(folder))
    arr = parquet.read().column("d").combine_chunks()
    spark_days = _spark_days(stack, folder)
    raw = sorted(int(v) for v in spark_reader.read_values(arr, DATE))
    if mode == "LEGACY":
        assert raw != spark_days  # what a reader that ignores the calendar would get wrong
        with pytest.raises(spark_reader.NotReadAsSpark, match="legacy calendar"):
            spark_reader.check(arr, DATE, parquet.metadata.metadata)
    else:
        spark_reader.check(arr, DATE, parquet.metadata.metadata)
        assert raw == spark_days


@pytest.mark.parametrize("version, rebased", [("2.4.8", True), ("3.5.1", False), (None, False)])
def test_files_of_other_writers(stack: Stack, tmp_path: Path, version: str | None, rebased: bool) -> None:
    """A file as Spark 2.4 leaves it (its version in the footer, dates in the hybrid calendar) is rebased
    by Spark's reader; one of Spark 3 or of another engine (no version) is read as it stands."""
    folder = tmp_path / f"v{version}"
    folder.mkdir()
    days = [(datetime.date(1010, 5, 20) - _EPOCH).days, (datetime.date(2001, 1, 1) - _EPOCH).days]
    table = pa.table({"d": pa.array(days, pa.int32()).cast(pa.date32())})
    if version is not None:
        table = table.replace_schema_metadata({b"org.apache.spark.version": version.encode()})
    pq.write_table(table, folder / "part-0.parquet")
    parquet = pq.ParquetFile(folder / "part-0.parquet")
    arr = parquet.read().column("d").combine_chunks()
    spark_days = _spark_days(stack, folder)
    assert (spark_days != days) is rebased
    if rebased:
        with pytest.raises(spark_reader.NotReadAsSpark):
            spark_reader.check(arr, DATE, parquet.metadata.metadata)
    else:
        spark_reader.check(arr, DATE, parquet.metadata.metadata)
        assert list(spark_reader.read_values(arr, DATE)) == spark_days


def _strings(values: list[bytes]) -> pa.Array:
    """A string array holding exactly these bytes, valid UTF-8 or not (as Hive or Impala may leave it)."""
    offsets = [0]
    for v in values:
        offsets.append(offsets[-1] + len(v))
    return pa.Array.from_buffers(pa.string(), len(values), [None, pa.py_buffer(pa.array(offsets, pa.int32())
                                                                                   .buffers()[1].to_pybytes()),
                                                           pa.py_buffer(b"".join(values))])


@pytest.mark.differential
def test_strings_that_are_not_utf8(stack: Stack, tmp_path: Path) -> None:
    """Bytes that are not UTF-8 reached the store as U+FFFD: the bounds then skipped a file holding a
    matching row (``s < 'caf\\uA000'``). Exact keys refuse such a column; the collector leaves it unknown in
    that file and describes the other files as before."""
    folder = tmp_path / "latin1"
    folder.mkdir()
    bad = [b"caf\xe9", b"caf\xe9s"]  # Latin-1 bytes: before 'caf\uA000' as bytes, after it as U+FFFD
    good = [b"zebra", b"zoo"]
    pq.write_table(pa.table({"s": _strings(bad)}), folder / "part-0.parquet")
    pq.write_table(pa.table({"s": _strings(good)}), folder / "part-1.parquet")
    with pytest.raises(spark_reader.NotReadAsSpark, match="UTF-8"):
        spark_reader.check(pq.read_table(folder / "part-0.parquet").column("s").combine_chunks(), Kind("string"))
    if not stack.spark.catalog.databaseExists("reader_test"):
        stack.spark.sql("CREATE DATABASE reader_test")
    stack.spark.sql(f"CREATE TABLE reader_test.latin1 USING parquet LOCATION '{folder}'")
    store = StatsStore(tmp_path / "store")
    collect(stack.spark, store, ["reader_test.latin1"], range_set_size=8)
    stats = StatsLoader(store, Lister(0)).stored("reader_test.latin1")
    column = stats.columns["s"]
    by_file = {Path(p).name: i for i, p in enumerate(stats.paths)}
    assert not column.known[by_file["part-0.parquet"]] and column.known[by_file["part-1.parquet"]]
    ctx = RewriteContext(StatsLoader(store, Lister(0)), database="reader_test")
    sql = "SELECT count(*) FROM latin1 WHERE s < 'caf\uA000'"
    result = rewrite(sql, ctx)
    session = stack.spark.newSession()
    session.sql("USE reader_test")
    want = session.sql(sql).collect()[0][0]
    assert want == 2 and session.sql(result.sql).collect()[0][0] == want
    assert result.decision.tables[0].files_skipped == 1  # not vacuous: the UTF-8 file is still skipped
