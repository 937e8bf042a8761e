"""The Dockerfile mirrors the Makefile's install steps and ships everything pyproject declares."""

from __future__ import annotations

import re
import tomllib

import pytest

from dipper.config import REPO_ROOT

PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
DOCKERFILE = (REPO_ROOT / "Dockerfile").read_text()
MAKEFILE = (REPO_ROOT / "Makefile").read_text()


def pip_installs(text: str) -> list[str]:
    """The arguments of every `pip install` in a Dockerfile or Makefile, options removed."""
    args = []
    for match in re.finditer(r"pip install ([^\n&\\]+)", text):
        args += [a.strip("'\"") for a in match.group(1).split() if not a.startswith("-")]
    return args


def test_docker_installs_exactly_the_project_with_the_makefiles_runtime_extras() -> None:
    docker = pip_installs(DOCKERFILE)
    make = pip_installs(MAKEFILE)
    # Nothing is installed by name: every dependency comes from pyproject.toml.
    assert docker == ["pip", ".[bench]"]
    assert make == ["pip", ".[bench,dev]"]
    # The image leaves out only the test tools.
    assert set(PYPROJECT["project"]["optional-dependencies"]) == {"bench", "dev"}
    # Both install in editable mode, so conf/ is found beside the code (dipper.config.REPO_ROOT).
    assert "-e '.[bench]'" in DOCKERFILE and "-e '.[bench,dev]'" in MAKEFILE


COPIED = set(re.findall(r"^COPY (\S+) ", DOCKERFILE, re.M)) | set(
    " ".join(re.findall(r"^COPY (.+) \./$", DOCKERFILE, re.M)).split())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]


@pytest.mark.parametrize("path", [*SETUPTOOLS["packages"], *(f"{m}.py" for m in SETUPTOOLS["py-modules"]), "conf",
                                  "pyproject.toml"])
def test_docker_copies_every_package_and_module(path: str) -> None:
    assert path in COPIED, f"Dockerfile does not COPY {path}"


def test_runtimes_match() -> None:
    assert "FROM python:3.11" in DOCKERFILE
    assert PYPROJECT["project"]["requires-python"].startswith(">=3.11")
    assert "openjdk-17-jre-headless" in DOCKERFILE
    assert re.search(r'ENTRYPOINT \["python", "server.py"\]', DOCKERFILE)
