"""Every test can fail (ARCHITECTURE.md §7): a test function asserts, or expects an exception, a failure or a
warning (``pytest.raises``, ``pytest.fail``, ``pytest.warns``), itself or through a function of tests/ it
calls (by name, transitively: a helper of its own module, or one imported from another test module). A test
that only calls the code under test, such as one that parses SQL in a loop and looks at nothing, fails here,
named by file and line.

Read from the source with ``ast``, without importing the modules (so without Spark)."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
CHECKS = frozenset({"raises", "fail", "warns"})  # pytest's: each makes a test fail unless something happens


@dataclasses.dataclass
class Module:
    """One file of tests/: its functions by name (every definition, nested ones too), and the names it imports
    from other modules of tests/ (local name -> (module, name there))."""
    name: str
    functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]
    imported: dict[str, tuple[str, str]]
    modules: dict[str, str]  # a tests module imported whole: local name -> module
    pytest_names: frozenset[str]  # raises, fail, warns imported from pytest by name
    fixtures: frozenset[str]  # functions decorated as pytest fixtures


def read_module(path: Path) -> Module:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    imported: dict[str, tuple[str, str]] = {}
    modules: dict[str, str] = {}
    pytest_names: set[str] = set()
    fixtures: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.setdefault(node.name, []).append(node)
            if _is_fixture(node):
                fixtures.add(node.name)
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                local = alias.asname or alias.name
                if node.module.startswith("tests."):
                    imported[local] = (node.module.removeprefix("tests."), alias.name)
                elif node.module == "tests":
                    modules[local] = alias.name
                elif node.module == "pytest" and alias.name in CHECKS:
                    pytest_names.add(local)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("tests.") and alias.asname:
                    modules[alias.asname] = alias.name.removeprefix("tests.")
    return Module(path.stem, functions, imported, modules, frozenset(pytest_names), frozenset(fixtures))


def _is_fixture(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if isinstance(target, ast.Attribute) and target.attr == "fixture" or \
                isinstance(target, ast.Name) and target.id == "fixture":
            return True
    return False


def body(fn: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``fn``, not those of functions defined inside it: one of those checks only if ``fn`` names it."""
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            todo.extend(ast.iter_child_nodes(node))


def checks_itself(fn: ast.AST, module: Module) -> bool:
    """``fn`` holds an assert statement or a call of pytest.raises, pytest.fail or pytest.warns."""
    for node in body(fn):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in CHECKS and isinstance(f.value, ast.Name) \
                    and f.value.id == "pytest":
                return True
            if isinstance(f, ast.Name) and f.id in module.pytest_names:
                return True
    return False


def referenced(fn: ast.AST, module: Module) -> Iterator[tuple[str, str]]:
    """The functions of tests/ that ``fn`` names (called, or passed on as a value): (module, name). A test or a
    fixture is never a helper: inside a test, a fixture's name is the value it gave (the ``ahead`` fixtures name
    their test to find its cases, and would otherwise make every test that asks for them count as checking)."""
    for node in body(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id.startswith("test_") or node.id in module.fixtures:
                continue
            if node.id in module.functions:
                yield module.name, node.id
            elif node.id in module.imported:
                yield module.imported[node.id]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in module.modules:
            yield module.modules[node.value.id], node.attr


class Suite:
    """The modules of tests/, and which of their functions check something (memoised)."""

    def __init__(self, folder: Path) -> None:
        self.modules = {p.stem: read_module(p) for p in sorted(folder.glob("*.py"))}
        self._checks: dict[tuple[str, str], bool] = {}

    def checks(self, module: str, name: str) -> bool:
        key = (module, name)
        if key not in self._checks:
            self._checks[key] = False  # a cycle of helpers proves nothing by itself
            m = self.modules.get(module)
            if m is not None:
                if name in m.imported:  # re-exported: follow it to its definition
                    self._checks[key] = self.checks(*m.imported[name])
                else:
                    self._checks[key] = any(checks_itself(fn, m) or any(
                        self.checks(*ref) for ref in referenced(fn, m) if ref != key) for fn in m.functions.get(name, []))
        return self._checks[key]

    def unchecked(self, module: str) -> list[str]:
        """``file:line name`` of each test function of ``module`` that checks nothing."""
        m = self.modules[module]
        return [f"tests/{module}.py:{fn.lineno} {name}" for name, fns in m.functions.items() if name.startswith("test_")
                for fn in fns if not (checks_itself(fn, m) or any(self.checks(*ref) for ref in referenced(fn, m)))]


SUITE = Suite(TESTS)


@pytest.mark.parametrize("module", sorted(m for m in SUITE.modules if m.startswith("test_")))
def test_every_test_function_can_fail(module: str) -> None:
    unchecked = SUITE.unchecked(module)
    assert not unchecked, "test functions that assert nothing (add an assert, or pytest.raises/fail/warns):\n" + \
        "\n".join(unchecked)


def _suite_of(tmp_path: Path, files: dict[str, str]) -> Suite:
    for name, text in files.items():
        (tmp_path / f"{name}.py").write_text(text, encoding="utf-8")
    return Suite(tmp_path)


def test_a_test_that_only_parses_sql_in_a_loop_is_named(tmp_path: Path) -> None:
    suite = _suite_of(tmp_path, {"test_parses": (
        "import sqlglot\n"
        "def test_every_text_parses():\n"
        "    for sql in ('SELECT 1', 'SELECT 2'):\n"
        "        sqlglot.parse_one(sql, read='spark')\n")})
    assert suite.unchecked("test_parses") == ["tests/test_parses.py:2 test_every_text_parses"]


def test_helpers_count_by_name_through_modules_and_cycles_prove_nothing(tmp_path: Path) -> None:
    suite = _suite_of(tmp_path, {
        "helpers": "def same(a, b):\n    assert a == b\ndef loop_a():\n    loop_b()\ndef loop_b():\n    loop_a()\n",
        "test_uses": (
            "import pytest\n"
            "from pytest import raises as expect\n"
            "from tests.helpers import loop_a, same\n"
            "def local(x):\n    return same(x, x)\n"
            "def test_through_a_local_helper():\n    local(1)\n"
            "def test_through_an_imported_one():\n    same(1, 1)\n"
            "def test_passed_as_a_value():\n    list(map(local, [1]))\n"
            "def test_raises():\n    with pytest.raises(ValueError):\n        int('x')\n"
            "def test_raises_by_its_own_name():\n    with expect(ValueError):\n        int('x')\n"
            "def test_fails():\n    pytest.fail('no')\n"
            "def test_a_cycle_of_helpers():\n    loop_a()\n"
            "def test_skips_only():\n    pytest.skip('no')\n"
            "def test_same_name_elsewhere():\n    other.same(1, 1)\n"
            "def test_an_inner_check_never_called():\n    def inner():\n        assert False\n"
            "def test_an_inner_check_called():\n    def inner():\n        assert False\n    inner()\n"
            "@pytest.fixture\ndef ahead():\n    test_fails()\n    return 1\n"
            "def test_through_a_fixture_that_names_a_checking_test(ahead):\n    ahead.bit_length()\n")})
    assert suite.unchecked("test_uses") == ["tests/test_uses.py:20 test_a_cycle_of_helpers",
                                            "tests/test_uses.py:22 test_skips_only",
                                            "tests/test_uses.py:24 test_same_name_elsewhere",
                                            "tests/test_uses.py:26 test_an_inner_check_never_called",
                                            "tests/test_uses.py:37 test_through_a_fixture_that_names_a_checking_test"]
