"""Dipper's configuration: one frozen object, loaded once from ``conf/dipper.toml`` plus environment overrides.

Only entry points (``server.py``, the ``python -m`` commands, the test fixture) call :func:`load`; everything
below them receives the :class:`Config` object explicitly. No other module reads the environment.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dipper.driver_memory import driver_memory
from dipper.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = REPO_ROOT / "conf" / "dipper.toml"
SPARK_LOG_CONFIG = REPO_ROOT / "conf" / "log4j2.properties"
ENV_PREFIX = "DIPPER_"


@dataclasses.dataclass(frozen=True)
class Paths:
    raw: Path
    warehouse: Path
    stats: Path
    logs: Path
    metastore: Path


@dataclasses.dataclass(frozen=True)
class Backend:
    mode: str
    host: str
    port: int
    spark_master: str
    metastore: str
    metastore_user: str
    metastore_password: str
    metastore_driver_jar: str
    driver_memory: str
    shuffle_partitions: int
    auth: str
    transport: str  # "binary" or "http": how the proxy and the statistics jobs reach the Thrift Server
    http_path: str
    connect_timeout_seconds: int
    request_timeout_seconds: int
    idle_operation_timeout_seconds: int  # embedded mode: Spark closes a finished operation idle this long


@dataclasses.dataclass(frozen=True)
class Proxy:
    host: str
    port: int
    http_port: int  # HiveServer2's HTTP transport (proxy/http_transport.py); 0: not served
    http_path: str
    metrics_port: int  # Prometheus metrics (proxy/metrics.py); 0: not served
    client_auth: str
    tls_cert: str
    tls_key: str
    idle_timeout_seconds: int
    read_timeout_seconds: int
    max_connections: int
    max_frame_bytes: int
    drain_seconds: int
    listing_ttl_seconds: int
    footer_coverage: bool
    statistics_refresh_seconds: int
    decision_log: Path
    decision_log_max_bytes: int
    decision_log_backups: int
    skipping_enabled: bool
    max_scan_bytes: int
    metadata_answers: bool
    analysis_cache_seconds: float


@dataclasses.dataclass(frozen=True)
class Rewriter:
    dips: bool
    dip_max_ranges: int
    kappa: int
    exact_keys_max_bytes: int
    exact_keys_max_rows: int
    exact_keys_small_bytes: int
    exact_keys_cache_bytes: int
    min_skip_fraction: float
    dip_column_max_share: float
    max_statement_chars: int
    max_literals: int
    max_expression_depth: int
    max_rewrite_ms: int
    rewrite_cache_entries: int

    def context_options(self) -> dict[str, Any]:
        """The keyword arguments of ``rewriter.rewrite.RewriteContext`` this section sets."""
        from rewriter.budget import Budget  # configuration is read before anything else is imported
        return {"dips": self.dips, "dip_max_ranges": self.dip_max_ranges, "kappa": self.kappa,
                "exact_keys_max_bytes": self.exact_keys_max_bytes, "exact_keys_max_rows": self.exact_keys_max_rows,
                "exact_keys_small_bytes": self.exact_keys_small_bytes,
                "min_skip_fraction": self.min_skip_fraction, "dip_column_max_share": self.dip_column_max_share,
                "budget": Budget(self.max_statement_chars, self.max_literals, self.max_expression_depth,
                                 self.max_rewrite_ms)}


@dataclasses.dataclass(frozen=True)
class Config:
    paths: Paths
    backend: Backend
    proxy: Proxy
    rewriter: Rewriter

    def replace(self, section: str, **changes: Any) -> Config:
        """A copy with some keys of one section changed (used by tests and command-line flags)."""
        return dataclasses.replace(self, **{section: dataclasses.replace(getattr(self, section), **changes)})


_SECTIONS: dict[str, type] = {"paths": Paths, "backend": Backend, "proxy": Proxy, "rewriter": Rewriter}
_BACKEND_MODES = ("embedded", "remote")
_BACKEND_AUTH = ("plain", "nosasl")
_TRANSPORTS = ("binary", "http")
_CLIENT_AUTH = ("any", "plain", "nosasl")


def load(path: Path | str | None = None, environ: Mapping[str, str] | None = None, base_dir: Path | None = None) -> Config:
    """Read the configuration file (default ``conf/dipper.toml``) and apply ``DIPPER_<SECTION>_<KEY>`` overrides.

    A file other than the default needs only the keys it changes; the others keep their defaults from
    ``conf/dipper.toml``. Relative paths are resolved against ``base_dir`` (default: the current directory). Unknown sections or
    keys, wrong types and bad values raise :class:`ConfigError` naming the offending key, so a typo is
    reported instead of silently ignored.
    """
    path = Path(path) if path is not None else DEFAULT_CONFIG
    raw = _read(path)
    _check_keys(raw, path)
    if path.resolve() != DEFAULT_CONFIG.resolve():
        # A file of one's own needs only the keys it changes; the rest keep the shipped defaults.
        defaults = _read(DEFAULT_CONFIG)
        for section, keys in raw.items():
            defaults.setdefault(section, {}).update(keys)
        raw = defaults
    for name, value in (environ or {}).items():
        if not name.startswith(ENV_PREFIX):
            continue
        section, _, key = name[len(ENV_PREFIX):].lower().partition("_")
        if section not in _SECTIONS:
            continue  # other DIPPER_* variables (e.g. DIPPER_TEST_*) are not configuration
        fields = {f.name for f in dataclasses.fields(_SECTIONS[section])}
        if key not in fields:
            raise ConfigError(f"environment variable {name}: unknown key {section}.{key} (known: {', '.join(sorted(fields))})")
        raw.setdefault(section, {})[key] = value
    base = base_dir or Path.cwd()
    sections = {name: _build(cls, raw.get(name, {}), name, base) for name, cls in _SECTIONS.items()}
    config = Config(**sections)
    if config.backend.mode not in _BACKEND_MODES:
        raise ConfigError(f"backend.mode must be one of {', '.join(_BACKEND_MODES)}, not {config.backend.mode!r}")
    if not 0 < config.backend.port < 65536:
        raise ConfigError(f"backend.port must be between 1 and 65535, not {config.backend.port}")
    _check_metastore(config.backend)
    if config.backend.shuffle_partitions < 1:
        raise ConfigError("backend.shuffle_partitions must be at least 1")
    _check(config)
    # "auto" becomes a size here, once, so every Spark session of this process (the backend's, the statistics
    # job's, the benchmarks') gets the same driver, and what is logged or recorded is the size Spark was given.
    return config.replace("backend", driver_memory=driver_memory(config.backend.driver_memory))


def _check_metastore(b: Backend) -> None:
    m = b.metastore
    if not m or all(re.fullmatch(r"thrift://[^\s/:,]+:\d{1,5}", uri) for uri in m.split(",")):
        return
    if m.startswith("jdbc:postgresql://"):
        if not Path(b.metastore_driver_jar).is_file():
            raise ConfigError(f"backend.metastore is a PostgreSQL database, and its JDBC driver is not at "
                              f"backend.metastore_driver_jar = {b.metastore_driver_jar!r}: install it (apt-get install "
                              "libpostgresql-jdbc-java) or set the key to the driver's jar")
        return
    raise ConfigError(f"backend.metastore must be empty (Dipper's own catalog in paths.metastore), a Hive metastore "
                      f"service (thrift://host:port[,thrift://host:port...]) or a PostgreSQL metastore database "
                      f"(jdbc:postgresql://host:port/database), not {m!r}")


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"configuration file not found: {path}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"configuration file {path} is not valid TOML: {e}") from None


def _check_keys(raw: dict[str, Any], path: Path) -> None:
    for section, keys in raw.items():
        if section not in _SECTIONS:
            raise ConfigError(f"{path}: unknown section [{section}] (known: {', '.join(_SECTIONS)})")
        fields = {f.name for f in dataclasses.fields(_SECTIONS[section])}
        for key in keys:
            if key not in fields:
                raise ConfigError(f"{path}: unknown key {section}.{key} (known: {', '.join(sorted(fields))})")


def _check(config: Config) -> None:
    b, p = config.backend, config.proxy
    if b.auth not in _BACKEND_AUTH:
        raise ConfigError(f"backend.auth must be one of {', '.join(_BACKEND_AUTH)}, not {b.auth!r}")
    if b.transport not in _TRANSPORTS:
        raise ConfigError(f"backend.transport must be one of {', '.join(_TRANSPORTS)}, not {b.transport!r}")
    if b.transport == "http" and b.mode == "embedded":
        raise ConfigError("backend.transport = http needs backend.mode = remote: the embedded Thrift Server speaks "
                          "the binary transport")
    for section, value in (("backend", b.http_path), ("proxy", p.http_path)):
        if not value.strip("/") or any(c.isspace() or c in "?#" for c in value):
            raise ConfigError(f"{section}.http_path must be a URL path such as cliservice, not {value!r}")
    if p.client_auth not in _CLIENT_AUTH:
        raise ConfigError(f"proxy.client_auth must be one of {', '.join(_CLIENT_AUTH)}, not {p.client_auth!r}")
    if not 0 < p.port < 65536:
        raise ConfigError(f"proxy.port must be between 1 and 65535, not {p.port}")
    if (p.host, p.port) == (b.host, b.port) and b.mode == "embedded":
        raise ConfigError(f"proxy.port and backend.port are both {p.port}; the backend needs a port of its own")
    if not 0 <= p.http_port < 65536:
        raise ConfigError(f"proxy.http_port must be between 1 and 65535, or 0 for no HTTP transport, not {p.http_port}")
    if not 0 <= p.metrics_port < 65536:
        raise ConfigError(f"proxy.metrics_port must be between 1 and 65535, or 0 for no metrics, not {p.metrics_port}")
    if p.metrics_port and p.metrics_port in (p.port, p.http_port, b.port if b.host == p.host else -1):
        raise ConfigError(f"proxy.metrics_port is {p.metrics_port}, a port Dipper uses for another purpose; the "
                          "metrics need a port of their own")
    if p.http_port and p.http_port in (p.port, b.port if b.host == p.host else -1):
        raise ConfigError(f"proxy.http_port is {p.http_port}, the port of the {'proxy' if p.http_port == p.port else 'backend'}"
                          "; the HTTP transport needs a port of its own")

    if bool(p.tls_cert) != bool(p.tls_key):
        raise ConfigError("proxy.tls_cert and proxy.tls_key go together: set both for TLS, or neither")
    for key in ("tls_cert", "tls_key"):
        value = getattr(p, key)
        if value and not Path(value).is_file():
            raise ConfigError(f"proxy.{key} names {value}, which is not a readable file")
    at_least_one = [("backend", k) for k in ("connect_timeout_seconds", "request_timeout_seconds")] + \
        [("proxy", k) for k in ("idle_timeout_seconds", "read_timeout_seconds", "max_connections", "max_frame_bytes",
                                "drain_seconds", "decision_log_max_bytes")]
    for section, key in at_least_one:
        if getattr(getattr(config, section), key) < 1:
            raise ConfigError(f"{section}.{key} must be at least 1")
    if config.backend.idle_operation_timeout_seconds < 0:
        raise ConfigError(f"backend.idle_operation_timeout_seconds must not be negative, not "
                          f"{config.backend.idle_operation_timeout_seconds} (0: operations stay until closed)")
    if config.rewriter.dip_max_ranges < 1 or config.rewriter.kappa < 1:
        raise ConfigError("rewriter.dip_max_ranges and rewriter.kappa must be at least 1")
    for key in ("listing_ttl_seconds", "decision_log_backups", "max_scan_bytes", "statistics_refresh_seconds",
                "analysis_cache_seconds"):
        if getattr(p, key) < 0:
            raise ConfigError(f"proxy.{key} must not be negative")
    for key, zero in (("exact_keys_max_bytes", "turns exact keys off"), ("exact_keys_max_rows", "turns exact keys off"),
                      ("exact_keys_small_bytes", "reads exact keys only where a receiver is clustered"),
                      ("exact_keys_cache_bytes", "caches nothing")):
        if getattr(config.rewriter, key) < 0:
            raise ConfigError(f"rewriter.{key} must not be negative (0 {zero})")
    for key in ("max_statement_chars", "max_literals", "max_expression_depth"):
        if getattr(config.rewriter, key) < 1:
            raise ConfigError(f"rewriter.{key} must be at least 1, not {getattr(config.rewriter, key)} (a statement "
                              "over it is sent to Spark without being rewritten)")
    if config.rewriter.rewrite_cache_entries < 0:
        raise ConfigError(f"rewriter.rewrite_cache_entries must not be negative, not "
                          f"{config.rewriter.rewrite_cache_entries} (0 keeps none)")
    if config.rewriter.max_rewrite_ms < 0:
        raise ConfigError(f"rewriter.max_rewrite_ms must not be negative, not {config.rewriter.max_rewrite_ms} "
                          "(0: no time limit)")
    if not 0 <= config.rewriter.dip_column_max_share <= 1:
        raise ConfigError(f"rewriter.dip_column_max_share must be between 0 and 1, not "
                          f"{config.rewriter.dip_column_max_share} (0 never writes a diP as a column predicate; 1 "
                          f"writes every one the shape allows)")
    if not 0 <= config.rewriter.min_skip_fraction < 1:
        raise ConfigError(f"rewriter.min_skip_fraction must be at least 0 and below 1, not "
                          f"{config.rewriter.min_skip_fraction} (0 emits every skip; 0.1 skips only where at least "
                          "10% of a table reference's bytes go)")


def _build(cls: type, values: dict[str, Any], section: str, base: Path) -> Any:
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in values:
            raise ConfigError(f"missing configuration key {section}.{f.name}")
        kwargs[f.name] = _coerce(values[f.name], f.type, f"{section}.{f.name}", base)
    return cls(**kwargs)


def _coerce(value: Any, type_name: Any, key: str, base: Path) -> Any:
    type_name = type_name if isinstance(type_name, str) else type_name.__name__
    if type_name == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise ConfigError(f"{key} must be true or false, not {value!r}")
    if type_name in ("int", "float"):
        convert, noun = (int, "an integer") if type_name == "int" else (float, "a number")
        if isinstance(value, bool):
            raise ConfigError(f"{key} must be {noun}, not {value!r}")
        try:
            return convert(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{key} must be {noun}, not {value!r}") from None
    if type_name == "Path":
        p = Path(str(value)).expanduser()
        return p if p.is_absolute() else (base / p)
    if not isinstance(value, str):
        raise ConfigError(f"{key} must be a string, not {value!r}")
    return value
