"""How the proxy reads the catalog's answer about where tables are (proxy/catalog_check.py), on answers shaped as
Spark gives them; the check against a real Thrift Server is in test_statistics_upkeep.py."""

from __future__ import annotations

from proxy.catalog_check import UNREADABLE, catalog_locations, check_locations


def info(location: str, comment: str = "") -> str:
    text = "Catalog: spark_catalog\nDatabase: db\nTable: t\nType: EXTERNAL\nProvider: parquet\n"
    if comment:
        text += f"Comment: {comment}\n"
    return text + f"Location: {location}\nSerde Library: x\n"


def answering(tables: dict[str, str], described: list[tuple] | None = None):
    asked = []

    def run(sql: str) -> list[tuple]:
        asked.append(sql)
        if sql.startswith("SHOW TABLE EXTENDED"):
            return [("db", name, False, text) for name, text in tables.items()] + [("", "t", True, "temp view")]
        if sql.startswith("SHOW TABLES"):
            return [("db", "we-ird", False)]
        return described or []
    return run, asked


def test_one_statement_per_database_and_the_verdicts() -> None:
    run, asked = answering({"same": info("file:/a"), "moved": info("file:/new")})
    unusable, stale = check_locations(run, {"db.same": "file:/a", "db.moved": "file:/old", "db.gone": "file:/g"})
    assert asked == ["SHOW TABLE EXTENDED IN `db` LIKE 'gone|moved|same'"]
    assert set(unusable) == {"db.moved", "db.gone"} and stale == {"db.moved": "file:/old"}  # gone: not proof
    assert "now reads db.moved at file:/new, not at file:/old" in unusable["db.moved"]


def test_a_comment_that_spells_a_location_is_unreadable_not_believed() -> None:
    run, _ = answering({"t": info("file:/new", comment="x\nLocation: file:/old")})
    assert catalog_locations(run, ["db.t"]) == {"db.t": UNREADABLE}
    unusable, stale = check_locations(run, {"db.t": "file:/old"})
    assert "db.t" in unusable and not stale


def test_a_name_the_pattern_cannot_spell_is_described_by_sections() -> None:
    """A column named Location must not be taken for the table's location."""
    rows = [("Location", "string", None), ("id", "bigint", None), ("", "", ""),
            ("# Detailed Table Information", "", ""), ("Location", "file:/where", "")]
    run, asked = answering({}, described=rows)
    assert catalog_locations(run, ["db.we-ird"]) == {"db.we-ird": "file:/where"}
    assert asked == ["SHOW TABLES IN `db`", "DESCRIBE TABLE EXTENDED `db`.`we-ird`"]
    assert catalog_locations(run, ["db.absent-one"]) == {"db.absent-one": None}
