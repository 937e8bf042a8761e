"""Run beeline, the Hive JDBC command-line client that ships inside the pyspark wheel."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path


def spark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def jdbc_url(host: str, port: int, database: str = "default", options: str = "") -> str:
    """``options``: the URL's session variables, e.g. ``transportMode=http;httpPath=cliservice``."""
    return f"jdbc:hive2://{host}:{port}/{database}" + (f";{options}" if options else "")


def beeline_command(java: str, host: str, port: int, sql: str, database: str = "default", user: str = "dipper",
                    options: str = "") -> list[str]:
    return [java, "-cp", f"{spark_jars()}/*", "org.apache.hive.beeline.BeeLine",
            "-u", jdbc_url(host, port, database, options), "-n", user, "--silent=true", "--outputformat=tsv2",
            "-e", sql]


def run_beeline(java: str, host: str, port: int, sql: str, database: str = "default",
                timeout: float = 180.0, options: str = "") -> subprocess.CompletedProcess[str]:
    """Run one statement through beeline over JDBC; returns the completed process (stdout holds TSV rows)."""
    return subprocess.run(beeline_command(java, host, port, sql, database, options=options), capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def beeline_rows(stdout: str) -> list[list[str]]:
    """Rows of beeline's ``--outputformat=tsv2`` output, header first.

    Beeline echoes its prompt (``0: jdbc:hive2://...> ``) before the output of each ``-e`` statement even
    when silent and not on a terminal; it is removed here.
    """
    rows = []
    for line in stdout.splitlines():
        line = re.sub(r"^\d+: jdbc:hive2://\S*> ", "", line)
        if line.strip():
            rows.append(line.split("\t"))
    return rows
