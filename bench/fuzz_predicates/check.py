"""The property, checked on Spark for a batch of predicates under one session setting.

For each predicate ``p`` and each rewriter variant (statistics with large or tiny range-sets and value
lists; the session's time zone told to the rewriter or not), ``SELECT * FROM t WHERE p`` is rewritten
with the same ANSI mode and time zone Spark runs with, and:

1. every file the rewriter skipped holds no row where ``p`` is TRUE, and evaluating ``p`` over its rows
   raises no error (an error that does not depend on the data, such as a literal that does not cast,
   raises whatever is read and is not the skipped file's doing);
2. the rewritten query returns as many rows as the original, or, when the original raises, raises too,
   with the same error class.

Spark calls are batched, because each costs a job. Every query runs as Spark runs it, ``WHERE p`` with
Parquet pushdown and all (a projection ``SELECT (p) FROM t`` is not the same: Parquet row-group filters
drop a NaN the files' statistics leave out, so ``count_if(f64 >= -0.5)`` and ``WHERE f64 >= -0.5``
differ). The originals of a batch run as ``UNION ALL``s of ``SELECT i, _metadata.file_path FROM t WHERE
(p_i)``, which gives each predicate's matches per file; a union that raises is split until the branches
that raise are alone. For an original that raises, the predicate then runs over the skipped files only
(``WHERE _metadata.file_path IN (...) AND (p)``: Spark prunes the files at planning, so ``p`` sees only
their rows), over no file (an error without data is no file's doing), then file by file. The rewritten
queries of originals that succeeded run as ``UNION ALL``s too, each distinct text once; those of originals
that raised run one by one.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from sqlglot import exp

from bench.execute import spark_conf
from bench.spark_errors import error_class, same_error
from bench.fuzz_predicates.predicates import Case
from bench.fuzz_predicates.tables import FuzzTable
from rewriter.rewrite import RewriteContext, rewrite
from rewriter.session import SessionSettings
from stats.freshness import Lister
from stats.loader import StatsLoader

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ANSI = "spark.sql.ansi.enabled"
TIME_ZONE = "spark.sql.session.timeZone"
PUSHDOWN = "spark.sql.parquet.filterPushdown"
PATH = exp.Dot(this=exp.column("_metadata"), expression=exp.to_identifier("file_path"))
# Queries per UNION ALL (Spark plans one of a few hundred branches much slower than its parts), and the
# parts a union that raises is split into, recursively.
UNION_SIZE = 24
SPLIT = 4

# Failure kinds.
MATCH = "a skipped file holds matching rows"
RAISES = "a skipped file raises an error"
COUNT = "the rewritten query returns another count"
REWRITTEN_RAISES = "the rewritten query raises, the original does not"
REWRITTEN_SUCCEEDS = "the original raises, the rewritten query does not"
ERROR_CLASS = "the rewritten query raises another error"


@dataclasses.dataclass(frozen=True)
class Setting:
    """The session a predicate runs in: ANSI mode and time zone, on Spark and in the rewriter alike, and
    Parquet filter pushdown on Spark only (the rewriter takes it for harmless: ``rewriter/session.py``).
    Without pushdown Spark evaluates the predicate on every row of every file it reads, so an error a
    skipped file would raise is not hidden by Parquet's own row-group pruning."""

    ansi: bool
    time_zone: str
    pushdown: bool = True

    def __str__(self) -> str:
        return f"ansi={'on' if self.ansi else 'off'},{self.time_zone}" + ("" if self.pushdown else ",no-pushdown")


@dataclasses.dataclass(frozen=True)
class Variant:
    """One way of running the rewriter: which statistics, and whether it is told the session's time zone."""

    name: str
    stats: str  # a key of FuzzTable.stores
    knows_zone: bool = True


# What the test suite runs: both ANSI modes in UTC with pushdown, and in Los Angeles without.
SETTINGS = (Setting(True, "UTC"), Setting(False, "UTC"), Setting(True, "America/Los_Angeles", pushdown=False),
            Setting(False, "America/Los_Angeles", pushdown=False))
VARIANTS = (Variant("k8n16", "k8n16"), Variant("k2n2", "k2n2"), Variant("k8n16/zone-unknown", "k8n16", knows_zone=False))


@dataclasses.dataclass(frozen=True)
class Failure:
    kind: str
    case: Case
    setting: Setting
    variant: str
    files: tuple[str, ...]  # the skipped files concerned (empty for whole-query failures)
    detail: str

    def brief(self) -> str:
        where = f" {', '.join(f.rsplit('/', 1)[-1] for f in self.files)}" if self.files else ""
        return (f"case {self.case.seed}/{self.case.index} [{self.setting}; {self.variant}] {self.kind}{where}: "
                f"{self.detail} -- WHERE {self.case.sql}")


@dataclasses.dataclass
class Outcome:
    """What happened to one predicate under one setting."""

    case: Case
    setting: Setting
    skipped: dict[str, tuple[str, ...]]  # variant -> paths of the files it skipped
    rewritten: dict[str, str]  # variant -> rewritten SQL (only variants that skipped a file)
    rewrite_errors: dict[str, str]  # variant -> why the rewriter failed open
    matches: collections.Counter[str] | None = None  # rows per file where the predicate is TRUE
    original_error: str | None = None  # error class of the original query
    data_independent_error: bool = False
    raising_files: frozenset[str] = frozenset()
    failures: list[Failure] = dataclasses.field(default_factory=list)

    @property
    def pruned(self) -> bool:
        return any(self.skipped.values())

    def fail(self, kind: str, variant: str, files: Sequence[str], detail: str) -> None:
        self.failures.append(Failure(kind, self.case, self.setting, variant, tuple(files), detail))


def _is_query_error(e: Exception) -> bool:
    """An error the query raised, rather than a dead JVM or a broken connection to it."""
    from py4j.protocol import Py4JNetworkError

    return not isinstance(e, (Py4JNetworkError, ConnectionError, OSError))


@contextlib.contextmanager
def session(spark: SparkSession, setting: Setting) -> Iterator[None]:
    """Spark's ANSI mode, time zone and Parquet pushdown set to ``setting``; the previous values restored on exit."""
    with spark_conf(spark, {ANSI: "true" if setting.ansi else "false", TIME_ZONE: setting.time_zone,
                            PUSHDOWN: "true" if setting.pushdown else "false"}):
        yield


@contextlib.contextmanager
def quiet(spark: SparkSession) -> Iterator[None]:
    """Silence the error logs of queries that are meant to fail (PySpark's and the JVM's), then restore them."""
    python_logger = logging.getLogger("SQLQueryContextLogger")
    python_level = python_logger.level
    root = spark._jvm.org.apache.logging.log4j.LogManager.getRootLogger()  # noqa: SLF001
    jvm_level = root.getLevel().toString()
    python_logger.setLevel(logging.CRITICAL + 1)
    spark.sparkContext.setLogLevel("OFF")
    try:
        yield
    finally:
        python_logger.setLevel(python_level)
        spark.sparkContext.setLogLevel(jvm_level)


def path_in(paths: Sequence[str]) -> str:
    """``_metadata.file_path IN (...)``, the paths quoted by sqlglot."""
    return exp.In(this=PATH.copy(), expressions=[exp.Literal.string(p) for p in paths]).sql("spark")


class Checker:
    """Checks the property for batches of cases over one table (``bench/fuzz_predicates/tables.py``)."""

    def __init__(self, spark: SparkSession, table: FuzzTable, variants: Sequence[Variant] = VARIANTS,
                 loaders: dict[str, StatsLoader] | None = None) -> None:
        self.spark = spark
        self.table = table
        self.variants = tuple(variants)
        # Lister(0): no cached listing, every rewrite sees the files on storage now.
        self.loaders = loaders or {name: StatsLoader(store, Lister(0)) for name, store in table.stores.items()}
        self.queries = 0  # Spark queries run, for reports

    def only(self, variant: str) -> Checker:
        """The same checker with one rewriter variant (shrinking checks only the one that failed)."""
        return Checker(self.spark, self.table, [v for v in self.variants if v.name == variant], self.loaders)

    # -- the rewriter --------------------------------------------------------------------------------

    def statement(self, case: Case) -> str:
        return f"SELECT * FROM {self.table.name} WHERE {case.sql}"

    def context(self, variant: Variant, setting: Setting) -> RewriteContext:
        zone = setting.time_zone if variant.knows_zone else None
        return RewriteContext(self.loaders[variant.stats], database=self.table.database,
                              session=SessionSettings(ansi=setting.ansi, time_zone=zone))

    def rewrite(self, case: Case, setting: Setting) -> Outcome:
        out = Outcome(case, setting, {}, {}, {})
        sql = self.statement(case)
        for v in self.variants:
            result = rewrite(sql, self.context(v, setting))
            tables = result.decision.tables
            out.skipped[v.name] = tuple(tables[0].skipped_paths) if tables else ()
            if result.decision.error:
                out.rewrite_errors[v.name] = result.decision.error
            if out.skipped[v.name]:
                out.rewritten[v.name] = result.sql
        return out

    # -- the property ----------------------------------------------------------------------------------

    def check(self, cases: Sequence[Case], setting: Setting) -> list[Outcome]:
        """Rewrite every case under ``setting`` and check on Spark those where some variant skipped files."""
        outcomes = [self.rewrite(c, setting) for c in cases]
        active = [o for o in outcomes if o.pruned]
        if not active:
            return outcomes
        with session(self.spark, setting):
            self._originals(active)
            for o in active:
                if o.original_error is not None:
                    self._locate_errors(o)
                self._judge_files(o)
            self._rewritten([o for o in active if o.original_error is None])
            for o in active:
                if o.original_error is not None:
                    self._rewritten_raises(o)
        return outcomes

    def _run(self, sql: str) -> list:
        self.queries += 1
        return self.spark.sql(sql).collect()

    def _try(self, sql: str) -> tuple[list | None, str | None]:
        """(rows, None) or (None, error class)."""
        try:
            return self._run(sql), None
        except Exception as e:  # noqa: BLE001 - any error of the query is an outcome to compare
            if not _is_query_error(e):
                raise
            return None, error_class(e)

    def _union(self, branches: Sequence[str], on_rows: Callable[[int, list], None],
               on_error: Callable[[int, str | None], None]) -> None:
        """Run ``branches`` (queries returning ``(k, ...)`` rows, ``k`` the branch's index) as UNION ALLs of
        ``UNION_SIZE``; a union that raises is split until the branches that raise are alone.
        ``on_rows(index, rows)`` gets each branch's rows, ``on_error(index, error class)`` each failure."""
        def run(indexes: list[int]) -> None:
            rows, error = self._try(" UNION ALL ".join(f"({branches[i]})" for i in indexes))
            if rows is not None:
                by_branch: dict[int, list] = {i: [] for i in indexes}
                for r in rows:
                    by_branch[r[0]].append(r)
                for i in indexes:
                    on_rows(i, by_branch[i])
                return
            if len(indexes) == 1:
                on_error(indexes[0], error)
                return
            size = -(-len(indexes) // SPLIT)
            for k in range(0, len(indexes), size):
                run(indexes[k:k + size])

        for k in range(0, len(branches), UNION_SIZE):
            run(list(range(k, min(k + UNION_SIZE, len(branches)))))

    def _originals(self, outcomes: Sequence[Outcome]) -> None:
        """Each original query as Spark runs it (``WHERE p``, with Parquet pushdown and all): the rows per
        file where the predicate is TRUE, or the error it raises."""
        path = PATH.sql("spark")
        branches = [f"SELECT {i} AS k, {path} AS f FROM {self.table.name} WHERE ({o.case.sql})"
                    for i, o in enumerate(outcomes)]

        def rows(i: int, found: list) -> None:
            outcomes[i].matches = collections.Counter(r[1] for r in found)

        def error(i: int, error_class: str | None) -> None:
            outcomes[i].original_error = error_class or "unknown error"

        self._union(branches, rows, error)

    def _locate_errors(self, o: Outcome) -> None:
        """For an original that raises: the skipped files' matches, and which skipped files raise. Spark
        prunes ``_metadata.file_path IN (...)`` at planning, so the predicate sees only those files' rows.
        An error raised with no file read at all (a literal that does not cast) is no file's doing."""
        path, p = PATH.sql("spark"), o.case.sql
        o.matches = collections.Counter()
        skipped = sorted({f for files in o.skipped.values() for f in files})
        rows, error = self._try(f"SELECT {path} AS f FROM {self.table.name} WHERE {path_in(skipped)} AND ({p})")
        if rows is not None:
            o.matches.update(r[0] for r in rows)
            return
        _, error = self._try(f"SELECT {path} AS f FROM {self.table.name} WHERE {path_in([''])} AND ({p})")
        if error is not None:
            o.data_independent_error = True
            return
        raising = set()
        for f in skipped:
            rows, error = self._try(f"SELECT {path} AS f FROM {self.table.name} WHERE {path_in([f])} AND ({p})")
            if rows is None:
                raising.add(f)
            else:
                o.matches.update(r[0] for r in rows)
        o.raising_files = frozenset(raising)

    def _judge_files(self, o: Outcome) -> None:
        assert o.matches is not None
        for variant, skipped in o.skipped.items():
            matching = [f for f in skipped if o.matches.get(f, 0) > 0]
            if matching:
                o.fail(MATCH, variant, matching, ", ".join(f"{o.matches[f]} rows in {_name(f)}" for f in matching))
            raising = [f for f in skipped if f in o.raising_files]
            if raising:
                o.fail(RAISES, variant, raising, f"the original raises {o.original_error}")

    def _rewritten(self, outcomes: Sequence[Outcome]) -> None:
        """The rewritten queries of predicates whose original succeeded, each distinct text once: each must
        return as many rows as its original."""
        by_sql: dict[str, list[tuple[Outcome, str]]] = {}
        for o in outcomes:
            for variant, sql in o.rewritten.items():
                by_sql.setdefault(sql, []).append((o, variant))
        jobs = list(by_sql.items())

        def rows(i: int, found: list) -> None:
            for o, variant in jobs[i][1]:
                want = sum(o.matches.values()) if o.matches is not None else 0
                if len(found) != want:
                    o.fail(COUNT, variant, (), f"original {want} rows, rewritten {len(found)}")

        def error(i: int, error_class: str | None) -> None:
            for o, variant in jobs[i][1]:
                o.fail(REWRITTEN_RAISES, variant, (), f"rewritten raises {error_class}")

        self._union([f"SELECT {i} AS k FROM ({sql}) AS q{i}" for i, (sql, _) in enumerate(jobs)], rows, error)

    def _rewritten_raises(self, o: Outcome) -> None:
        """The rewritten queries of a predicate whose original raised must raise the same error class."""
        answers: dict[str, tuple[list | None, str | None]] = {}
        for variant, sql in o.rewritten.items():
            if sql not in answers:
                answers[sql] = self._try(f"SELECT count(*) FROM ({sql}) AS q")
            rows, error = answers[sql]
            if rows is not None:
                o.fail(REWRITTEN_SUCCEEDS, variant, (), f"original raises {o.original_error}, rewritten returns {rows[0][0]}")
            elif not same_error(error, o.original_error):
                o.fail(ERROR_CLASS, variant, (), f"original raises {o.original_error}, rewritten {error}")


def _name(path: str) -> str:
    return path.rsplit("/", 1)[-1]
