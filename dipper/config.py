"""Dipper's configuration: one frozen object, loaded once from ``conf/dipper.toml`` plus environment overrides.

Only entry points (``server.py``, the ``python -m`` commands, the test fixture) call :func:`load`; everything
below them receives the :class:`Config` object explicitly. No other module reads the environment.
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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


@dataclasses.dataclass(frozen=True)
class Backend:
    mode: str
    host: str
    port: int
    spark_master: str
    driver_memory: str
    shuffle_partitions: int


@dataclasses.dataclass(frozen=True)
class Config:
    paths: Paths
    backend: Backend

    def replace(self, section: str, **changes: Any) -> Config:
        """A copy with some keys of one section changed (used by tests and command-line flags)."""
        return dataclasses.replace(self, **{section: dataclasses.replace(getattr(self, section), **changes)})


_SECTIONS: dict[str, type] = {"paths": Paths, "backend": Backend}
_BACKEND_MODES = ("embedded", "remote")


def load(path: Path | str | None = None, environ: Mapping[str, str] | None = None, base_dir: Path | None = None) -> Config:
    """Read the configuration file (default ``conf/dipper.toml``) and apply ``DIPPER_<SECTION>_<KEY>`` overrides.

    Relative paths are resolved against ``base_dir`` (default: the current directory). Unknown sections or
    keys, wrong types and bad values raise :class:`ConfigError` naming the offending key, so a typo is
    reported instead of silently ignored.
    """
    path = Path(path) if path is not None else DEFAULT_CONFIG
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"configuration file not found: {path}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"configuration file {path} is not valid TOML: {e}") from None
    for section, keys in raw.items():
        if section not in _SECTIONS:
            raise ConfigError(f"{path}: unknown section [{section}] (known: {', '.join(_SECTIONS)})")
        fields = {f.name for f in dataclasses.fields(_SECTIONS[section])}
        for key in keys:
            if key not in fields:
                raise ConfigError(f"{path}: unknown key {section}.{key} (known: {', '.join(sorted(fields))})")
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
    if config.backend.shuffle_partitions < 1:
        raise ConfigError("backend.shuffle_partitions must be at least 1")
    return config


def _build(cls: type, values: dict[str, Any], section: str, base: Path) -> Any:
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in values:
            raise ConfigError(f"missing configuration key {section}.{f.name}")
        kwargs[f.name] = _coerce(values[f.name], f.type, f"{section}.{f.name}", base)
    return cls(**kwargs)


def _coerce(value: Any, type_name: Any, key: str, base: Path) -> Any:
    type_name = type_name if isinstance(type_name, str) else type_name.__name__
    if type_name == "int":
        if isinstance(value, bool):
            raise ConfigError(f"{key} must be an integer, not {value!r}")
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{key} must be an integer, not {value!r}") from None
    if type_name == "Path":
        p = Path(str(value)).expanduser()
        return p if p.is_absolute() else (base / p)
    if not isinstance(value, str):
        raise ConfigError(f"{key} must be a string, not {value!r}")
    return value
