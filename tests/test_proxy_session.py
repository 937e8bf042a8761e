"""Session state through the proxy, against the real Thrift Server: the settings the rewriter computes with
(read from Spark when a session opens, then every SET and RESET), and temporary views (tracked from the
statements, and asked of Spark after a statement whose effect cannot be read)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from proxy.server import ProxyServer
from tests.conftest import Stack, hive_cursor
from tests.proxy_support import decisions, proxy_config, start_proxy

pytestmark = pytest.mark.spark

PRUNING = ("SELECT l_returnflag, count(*) FROM lineitem WHERE l_shipdate BETWEEN DATE '1995-03-01' AND DATE '1995-03-31' "
           "GROUP BY l_returnflag ORDER BY 1")


@pytest.fixture(scope="module")
def proxied(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ProxyServer, str]]:
    database = stack.database("tpch", "tuned")
    server = start_proxy(proxy_config(stack.config, tmp_path_factory.mktemp("proxy-session")),
                         stack.stats_store("tpch", "tuned"))
    yield server, database
    server.shutdown(drain_seconds=2)


def last_record(server: ProxyServer, user: str, statement: str) -> dict[str, Any]:
    return [r for r in decisions(server.config) if r["user"] == user and r["statement"] == statement][-1]


def run(cursor: Any, sql: str) -> list[tuple]:
    cursor.execute(sql)
    return cursor.fetchall()


def test_the_backends_own_settings_are_all_modelled(proxied: tuple[ProxyServer, str]) -> None:
    """What the embedded backend starts with (UTC, shuffle partitions, warehouse, pyspark's own keys) leaves
    pruning on: a fresh session's statement is rewritten under ANSI mode and the UTC time zone."""
    server, database = proxied
    with hive_cursor(server.port, database, user="fresh") as cursor:
        run(cursor, PRUNING)
    record = last_record(server, "fresh", PRUNING)
    assert record["settings"] == {"ansi": True, "time_zone": "UTC", "unmodelled": []}
    assert record["outcome"] == "rewritten"


# Each statement, then what the rewriter computes with for the next query of the same session.
STEPS = [
    ("SET spark.sql.ansi.enabled=false", {"ansi": False, "time_zone": "UTC"}),
    ("SET spark.sql.session.timeZone = America/New_York", {"ansi": False, "time_zone": "America/New_York"}),
    ("RESET spark.sql.ansi.enabled", {"ansi": True, "time_zone": "America/New_York"}),
    ("SET `spark.sql.ansi.enabled` = `false`;", {"ansi": False, "time_zone": "America/New_York"}),
    ("SET TIME ZONE LOCAL", {"ansi": False, "time_zone": "Etc/UTC"}),  # the server's zone: read back from Spark
    ("SET TIME ZONE '+08:00'", {"ansi": False, "time_zone": None}),  # an offset: every zone's reading, always sound
    ("/* c */ SET spark.sql.ansi.enabled", {"ansi": False, "time_zone": None}),  # shows, changes nothing
    ("RESET", {"ansi": True, "time_zone": "UTC"}),
]


def test_set_and_reset_reach_the_rewriter(stack: Stack, proxied: tuple[ProxyServer, str]) -> None:
    server, database = proxied
    with hive_cursor(server.port, database, user="setter") as cursor:
        for i, (statement, expected) in enumerate(STEPS):
            cursor.execute(statement)
            query = f"{PRUNING} -- after step {i}"
            run(cursor, query)
            settings = last_record(server, "setter", query)["settings"]
            assert (statement, {k: settings[k] for k in expected}) == (statement, expected)
            assert settings["unmodelled"] == []


@pytest.mark.differential
def test_answers_follow_ansi_mode_as_spark_does(stack: Stack, proxied: tuple[ProxyServer, str]) -> None:
    """Under ANSI mode the product overflows and fails; without it, it wraps: the same through the proxy as
    directly, in both modes."""
    from pyhive.exc import OperationalError

    server, database = proxied
    wraps = ("SELECT count(*) FROM lineitem WHERE l_linenumber * 1000000000 < 0 "
             "AND l_shipdate BETWEEN DATE '1995-03-01' AND DATE '1995-03-31'")
    with hive_cursor(server.port, database, user="ansi") as through, stack.cursor(database) as direct:
        for cursor in (through, direct):
            with pytest.raises(OperationalError, match="ARITHMETIC_OVERFLOW"):
                cursor.execute(wraps)
            cursor.execute("SET spark.sql.ansi.enabled = false")
        assert run(through, wraps) == run(direct, wraps) != [(0,)]
    assert last_record(server, "ansi", wraps)["settings"]["ansi"] is False


def test_an_unmodelled_setting_passes_statements_through_until_reset(proxied: tuple[ProxyServer, str]) -> None:
    server, database = proxied
    with hive_cursor(server.port, database, user="casey") as cursor:
        cursor.execute("SET spark.sql.caseSensitive=true")
        declined = run(cursor, PRUNING)
        record = last_record(server, "casey", PRUNING)
        assert record["outcome"] == "forwarded unchanged" and "sent" not in record
        assert record["decision"]["passthrough"] == \
            "session settings the rewriter does not model: spark.sql.caseSensitive=true"
        cursor.execute("RESET spark.sql.caseSensitive")
        assert run(cursor, PRUNING) == declined
    assert last_record(server, "casey", PRUNING)["outcome"] == "rewritten"


@pytest.mark.parametrize("configuration, ansi, declined", [
    ({"set:hiveconf:spark.sql.ansi.enabled": "false"}, False, False),  # Spark applies it: the rewriter follows
    ({"spark.sql.ansi.enabled": "false"}, True, True),  # a plain key Spark does not apply: in doubt, declined
], ids=["hiveconf", "plain-key"])
def test_open_session_configuration(proxied: tuple[ProxyServer, str], configuration: dict[str, str], ansi: bool,
                                    declined: bool) -> None:
    server, database = proxied
    user = f"configured-{'declined' if declined else 'applied'}"
    with hive_cursor(server.port, database, user=user, configuration=configuration) as cursor:
        run(cursor, PRUNING)
    settings = last_record(server, user, PRUNING)["settings"]
    assert settings["ansi"] is ansi
    assert bool(settings["unmodelled"]) is declined
    if declined:
        assert settings["unmodelled"][0].startswith("spark.sql.ansi.enabled=false (asked for when the session opened")


def test_show_tables_like_temp_keeps_pruning(proxied: tuple[ProxyServer, str]) -> None:
    """A statement that only mentions "temp" changes no name: pruning (and a byte budget) carry on."""
    server, database = proxied
    with hive_cursor(server.port, database, user="shower") as cursor:
        cursor.execute("SHOW TABLES LIKE 'temp'")
        cursor.fetchall()
        cursor.execute("SET skipping.max_scan_bytes = 100000000")
        run(cursor, PRUNING)
    assert last_record(server, "shower", PRUNING)["outcome"] == "rewritten"


@pytest.mark.differential
def test_a_temporary_view_from_dynamic_sql_is_asked_of_spark(stack: Stack, proxied: tuple[ProxyServer, str]) -> None:
    """EXECUTE IMMEDIATE of a computed string creates a temporary view named like a catalog table: the proxy
    cannot read the name, so it asks Spark before the next query, and the view's answer comes back (not a
    rewrite of the catalog table, which would fail on the view). Once the view is dropped, pruning resumes."""
    server, database = proxied
    query = "SELECT count(*) FROM lineitem WHERE l_shipdate BETWEEN DATE '1995-03-01' AND DATE '1995-03-31'"
    create = ("EXECUTE IMMEDIATE 'CREATE OR REPLACE TEM' || 'PORARY VIEW ' || 'line' || 'item' || "
              "' AS SELECT DATE''1995-03-05'' AS l_shipdate'")
    with hive_cursor(server.port, database, user="dynamic") as cursor:
        cursor.execute(create)
        assert run(cursor, query) == [(1,)]  # the view's one row, as Spark answers
        viewed = last_record(server, "dynamic", query)
        cursor.execute("DROP VIEW lineitem")
        pruned = run(cursor, query)
    with stack.cursor(database) as direct:
        assert pruned == run(direct, query) != [(1,)]
    assert viewed["outcome"] == "forwarded unchanged"
    assert viewed["decision"]["tables"][0]["refused"] == "the name may be a temporary view of this session"
    # The catalog table again: pruned, or (a count of whole files) answered from its statistics.
    assert last_record(server, "dynamic", query)["outcome"] in ("rewritten", "answered from statistics")


@pytest.mark.differential
def test_a_renamed_temporary_view_shadows_its_new_name(stack: Stack, proxied: tuple[ProxyServer, str]) -> None:
    server, database = proxied
    query = "SELECT count(*) FROM orders WHERE o_orderdate < DATE '1993-01-01'"
    with hive_cursor(server.port, database, user="renamer") as cursor:
        cursor.execute(f"CREATE TEMPORARY VIEW tmp_orders AS SELECT l_orderkey AS o_orderkey, "
                       f"l_shipdate AS o_orderdate FROM {database}.lineitem")
        cursor.execute("ALTER VIEW tmp_orders RENAME TO orders")
        through_view = run(cursor, query)
    with stack.cursor(database) as direct:
        expected = run(direct, f"SELECT count(*) FROM {database}.lineitem WHERE l_shipdate < DATE '1993-01-01'")
    assert through_view == expected
    record = last_record(server, "renamer", query)
    assert record["outcome"] == "forwarded unchanged"  # not rewritten as the catalog table, nothing fell back
    assert record["decision"]["tables"][0]["refused"] == "the name may be a temporary view of this session"


@pytest.mark.parametrize("overlay, outcome, unmodelled", [
    pytest.param({"spark.sql.shuffle.partitions": "3"}, "rewritten", [], id="harmless"),
    pytest.param({"spark.sql.ansi.enabled": "false"}, "forwarded unchanged",
                 ["spark.sql.ansi.enabled=false (in the statement's confOverlay, which Spark's Thrift Server does not "
                  "apply)"], id="would-matter"),
])
def test_a_conf_overlay_that_would_matter_declines_pruning(stack: Stack, proxied: tuple[ProxyServer, str],
                                                           overlay: dict[str, str], outcome: str,
                                                           unmodelled: list[str]) -> None:
    """Spark's Thrift Server ignores ExecuteStatement.confOverlay; the proxy cannot know every server does, so an
    overlay that would change what the rewriter computes sends the statement unchanged (and Spark answers it
    under the session's own settings, as it would directly)."""
    from pyhive import hive
    from TCLIService import ttypes as t

    server, database = proxied
    conn = hive.connect(host="127.0.0.1", port=server.port, auth="NONE", username="overlay", database=database)
    try:
        response = conn.client.ExecuteStatement(t.TExecuteStatementReq(
            sessionHandle=conn.sessionHandle, statement=f"{PRUNING} -- {overlay}", confOverlay=overlay))
        assert response.status.statusCode == t.TStatusCode.SUCCESS_STATUS
        conn.client.CloseOperation(t.TCloseOperationReq(operationHandle=response.operationHandle))
    finally:
        conn.close()
    record = last_record(server, "overlay", f"{PRUNING} -- {overlay}")
    assert record["outcome"] == outcome
    assert record["settings"]["unmodelled"] == unmodelled


# Zones whose rules changed in recent tzdata releases (Tehran's 1978 change in 2025b; links such as
# Copenhagen -> Berlin merged since 2022): on a machine whose Python tzdata is newer than its JVM's, some differ.
CHANGED_ZONES = ("Asia/Tehran", "Europe/Copenhagen", "Africa/Kinshasa", "Europe/Monaco", "America/Creston",
                 "Asia/Phnom_Penh", "Pacific/Funafuti")


@pytest.mark.parametrize("agreeing", [False, True], ids=["rules-differ", "rules-agree"])
def test_a_zone_whose_rules_differ_from_the_backend_s_is_not_computed_with(
        stack: Stack, proxied: tuple[ProxyServer, str], agreeing: bool) -> None:
    """Issue 61, case 4: Python's zone rules (tzdata) and the JVM's may differ. The proxy asks the backend
    once per zone; where they differ the session counts as one of unknown zone (every zone's reading), where
    they agree the zone is used."""
    from rewriter.spark import zones

    def agrees(zone: str) -> bool:
        return zones.agrees(zone, [tuple(r) for r in stack.spark.sql(zones.probe_sql(zone)).collect()])

    if agreeing:
        zone = "America/New_York"
        assert agrees(zone)
    else:
        differing = [z for z in CHANGED_ZONES if not agrees(z)]
        if not differing:
            pytest.skip("this machine's Python and JVM agree on every zone tried: nothing differs to refuse")
        zone = differing[0]
    server, database = proxied
    with hive_cursor(server.port, database, user=f"zoned-{zone}") as cursor:
        cursor.execute(f"SET spark.sql.session.timeZone = {zone}")
        query = f"{PRUNING} -- in {zone}"
        run(cursor, query)
    assert last_record(server, f"zoned-{zone}", query)["settings"]["time_zone"] == (zone if agreeing else None)
    assert server.zone_rules.verdict(zone) is agreeing
