import os
from pathlib import Path

import pytest

from dipper.config import DEFAULT_CONFIG, load
from dipper.errors import ConfigError


def test_defaults_load_and_resolve_relative_paths(tmp_path: Path) -> None:
    config = load(environ={}, base_dir=tmp_path)
    assert config.backend.mode == "embedded"
    assert config.backend.port == 10001
    assert config.paths.warehouse == tmp_path / "data" / "warehouse"


def test_environment_overrides_win_and_are_typed(tmp_path: Path) -> None:
    config = load(environ={"DIPPER_BACKEND_PORT": "12345", "DIPPER_PATHS_WAREHOUSE": "/srv/wh", "HOME": "/root",
                           "DIPPER_TEST_SOMETHING": "ignored: not a config section"}, base_dir=tmp_path)
    assert config.backend.port == 12345
    assert config.paths.warehouse == Path("/srv/wh")


def test_config_is_frozen() -> None:
    config = load(environ={})
    with pytest.raises(AttributeError):
        config.backend.port = 1  # type: ignore[misc]
    assert config.replace("backend", port=2).backend.port == 2
    assert config.backend.port != 2


@pytest.mark.parametrize("environ, message", [
    ({"DIPPER_BACKEND_PROT": "1"}, "unknown key backend.prot"),
    ({"DIPPER_BACKEND_PORT": "ten"}, "backend.port must be an integer"),
    ({"DIPPER_BACKEND_PORT": "70000"}, "between 1 and 65535"),
    ({"DIPPER_BACKEND_MODE": "cloud"}, "backend.mode must be one of"),
    ({"DIPPER_REWRITER_MIN_SKIP_FRACTION": "a tenth"}, "rewriter.min_skip_fraction must be a number"),
    ({"DIPPER_REWRITER_MIN_SKIP_FRACTION": "1"}, "rewriter.min_skip_fraction must be at least 0 and below 1"),
    ({"DIPPER_REWRITER_MIN_SKIP_FRACTION": "-0.1"}, "rewriter.min_skip_fraction must be at least 0 and below 1"),
    ({"DIPPER_BACKEND_METASTORE": "mysql://db:3306/hive"}, "backend.metastore must be empty"),
    ({"DIPPER_BACKEND_METASTORE": "thrift://host"}, "backend.metastore must be empty"),  # no port
    ({"DIPPER_BACKEND_METASTORE": "jdbc:postgresql://db:5432/metastore",
      "DIPPER_BACKEND_METASTORE_DRIVER_JAR": "/nowhere/postgresql.jar"}, "install it .apt-get install"),
])
def test_bad_overrides_name_the_key(environ: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(environ=environ)


def test_the_skip_fraction_reaches_the_rewriter() -> None:
    assert load(environ={}).rewriter.context_options()["min_skip_fraction"] == 0.1
    assert load(environ={"DIPPER_REWRITER_MIN_SKIP_FRACTION": "0"}).rewriter.context_options()["min_skip_fraction"] == 0


@pytest.mark.parametrize("uri", ["", "thrift://a:9083", "thrift://a:9083,thrift://b:9083"])
def test_metastores_that_are_accepted(uri: str) -> None:
    assert load(environ={"DIPPER_BACKEND_METASTORE": uri}).backend.metastore == uri


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load(tmp_path / "missing.toml", environ={})
    broken = tmp_path / "broken.toml"
    broken.write_text("[backend\nport = 1")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load(broken, environ={})
    unknown = tmp_path / "unknown.toml"
    unknown.write_text(DEFAULT_CONFIG.read_text() + "\n[proxxy]\nport = 1\n")
    with pytest.raises(ConfigError, match=r"unknown section \[proxxy\]"):
        load(unknown, environ={})
    partial = tmp_path / "partial.toml"
    partial.write_text("[proxy]\nport = 20000\n")
    config = load(partial, environ={})  # the keys a file leaves out keep their defaults
    assert config.proxy.port == 20000 and config.backend.mode == "embedded" and config.proxy.client_auth == "any"


@pytest.mark.parametrize("environ, message", [
    ({"DIPPER_PROXY_CLIENT_AUTH": "kerberos"}, "proxy.client_auth must be one of"),
    ({"DIPPER_BACKEND_AUTH": "ldap"}, "backend.auth must be one of"),
    ({"DIPPER_PROXY_PORT": "10001"}, "the backend needs a port of its own"),
    ({"DIPPER_PROXY_TLS_CERT": "/nonexistent.pem"}, "tls_cert and proxy.tls_key go together"),
    ({"DIPPER_PROXY_TLS_CERT": "/nonexistent.pem", "DIPPER_PROXY_TLS_KEY": "/k"}, "not a readable file"),
    ({"DIPPER_PROXY_SKIPPING_ENABLED": "yes"}, "proxy.skipping_enabled must be true or false"),
    ({"DIPPER_PROXY_MAX_SCAN_BYTES": "-1"}, "proxy.max_scan_bytes must not be negative"),
    ({"DIPPER_PROXY_IDLE_TIMEOUT_SECONDS": "0"}, "proxy.idle_timeout_seconds must be at least 1"),
    ({"DIPPER_PROXY_READ_TIMEOUT_SECONDS": "0"}, "proxy.read_timeout_seconds must be at least 1"),
    ({"DIPPER_PROXY_MAX_CONNECTIONS": "0"}, "proxy.max_connections must be at least 1"),
    ({"DIPPER_BACKEND_REQUEST_TIMEOUT_SECONDS": "-1"}, "backend.request_timeout_seconds must be at least 1"),
    ({"DIPPER_BACKEND_CONNECT_TIMEOUT_SECONDS": "0"}, "backend.connect_timeout_seconds must be at least 1"),
])
def test_bad_proxy_settings_name_the_key(environ: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(environ=environ)


GIB = 1 << 30


@pytest.mark.parametrize("available, expected", [
    (2 * GIB, "1g"),          # a quarter would be 512m: at least 1g
    (4 * GIB, "1g"),
    (6 * GIB, "1536m"),       # a quarter, in whole MiB
    (23 * GIB + 12345, "5888m"),
    (16 * GIB, "4g"),
    (124 * GIB, "31g"),
    (512 * GIB, "31g"),       # at most 31g: above 32g the JVM loses compressed object pointers
])
def test_auto_driver_memory_is_a_quarter_of_the_memory_within_bounds(available: int, expected: str) -> None:
    from dipper.driver_memory import driver_memory

    assert driver_memory("auto", available) == expected


def test_driver_memory_defaults_to_auto_and_keeps_explicit_values(tmp_path: Path) -> None:
    from dipper.driver_memory import auto_driver_memory, available_memory

    assert 'driver_memory = "auto"' in DEFAULT_CONFIG.read_text()
    assert load(environ={}).backend.driver_memory == auto_driver_memory(available_memory())
    assert load(environ={"DIPPER_BACKEND_DRIVER_MEMORY": "3584m"}).backend.driver_memory == "3584m"
    assert load(environ={"DIPPER_BACKEND_DRIVER_MEMORY": "2G"}).backend.driver_memory == "2g"


def test_a_container_limit_below_the_physical_memory_sizes_the_driver(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from dipper import driver_memory as dm

    limit = tmp_path / "memory.max"
    limit.write_text(f"{8 * GIB}\n")
    monkeypatch.setattr(dm, "CGROUP_LIMITS", (limit,))
    assert dm.available_memory() == min(8 * GIB, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    limit.write_text("max\n")  # cgroup v2's "no limit"
    assert dm.available_memory() == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


@pytest.mark.parametrize("value, message", [
    ("4", "backend.driver_memory must be \"auto\" .* or a whole size with a unit such as 4g or 3584m, not '4'"),
    ("1.5g", "backend.driver_memory must be \"auto\""),
    ("lots", "backend.driver_memory must be \"auto\""),
    ("4q", "backend.driver_memory must be \"auto\""),
    ("-1g", "backend.driver_memory must be \"auto\""),
    ("", "backend.driver_memory must be \"auto\""),
    ("256m", "backend.driver_memory = '256m' is too small for Spark .*give at least 512m"),
])
def test_bad_driver_memory_names_the_key_and_the_fix(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(environ={"DIPPER_BACKEND_DRIVER_MEMORY": value})
