"""The registry of Spark functions: one definition per function, found by the node's *exact* sqlglot class
(ARCHITECTURE.md §3.6, §8).

sqlglot's expression classes inherit from each other (``ConcatWs`` is a ``Concat``, ``TryCast`` and
``JSONCast`` are ``Cast``\\ s), so an ``isinstance`` allow-list admits functions nobody modelled: that is how
``concat_ws`` came to be evaluated as ``concat``. Here a node has a definition only if its class is
registered as such, no argument the definition does not name is set (sqlglot marks variants with flags:
``Substring.zero_start``, ``Between.symmetric``, ``Round.truncate``), and the definition's ``when`` accepts
it. Everything else is opaque: nothing is folded, typed, bounded or evaluated through it, and it may raise.

A definition carries everything the rewriter may derive from the function, each checked against Spark by
``tests/test_spark_conformance.py`` and ``python -m bench conform``:

- ``coerce``: whether the implicit casts Spark's type coercion puts on the arguments may raise (under ANSI
  a string cast to a number or a date may fail; widening a number never does), from the arguments' types;
- ``result``: Spark's result type, from the arguments' types;
- ``raises``: whether the function itself may raise on some row (overflow, division by zero, invalid
  input), beyond its arguments' coercion and its arguments' own errors;
- ``evaluate``: its value on Python values of its arguments, only where that is exact (None: not
  evaluated); it raises :class:`rewriter.errors.Untranslatable` where a value is outside what it reproduces.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

from sqlglot import exp

from stats.model import Kind

Kinds = Sequence["Kind | None"]


@dataclasses.dataclass(frozen=True)
class Call:
    """One application of a definition, as the model sees it: the node, its arguments' types, the session's
    ANSI setting, and ``nonzero``: whether a divisor is known to be non-zero where the node is evaluated."""

    node: exp.Expression
    kinds: Kinds
    ansi: bool = True
    args: Sequence[exp.Expression] = ()  # the arguments the kinds are of, in order
    nonzero: Callable[[exp.Expression], bool] = lambda _: False


def _never(call: Call) -> bool:
    return False


def _always(node: exp.Expression) -> bool:
    return True


@dataclasses.dataclass(frozen=True)
class Function:
    cls: type[exp.Expression]
    spark: str  # Spark's name of the function, for reports
    roles: tuple[str, ...]  # the node's arguments evaluated per row, in Spark's argument order
    result: Callable[[Call], Kind | None]
    coerce: Callable[[Call], bool] = _never  # may the implicit casts on the arguments raise (ANSI)?
    raises: Callable[[Call], bool] = _never  # may the function itself raise on some row?
    evaluate: Callable[[list[Any], exp.Expression], Any] | None = None
    flags: frozenset[str] = frozenset()  # other arguments of the node the definition accounts for
    when: Callable[[exp.Expression], bool] = _always
    anonymous: str | None = None  # for a function sqlglot parses as exp.Anonymous: its lower-case name

    def arguments(self, node: exp.Expression) -> list[exp.Expression]:
        """The node's per-row arguments, in order."""
        out: list[exp.Expression] = []
        for role in self.roles:
            value = node.args.get(role)
            if isinstance(value, list):
                out.extend(v for v in value if isinstance(v, exp.Expression))
            elif isinstance(value, exp.Expression):
                out.append(value)
        return out

    @functools.cached_property
    def _known(self) -> frozenset[str]:
        """The node arguments the definition accounts for (an anonymous function's name too)."""
        return frozenset(self.roles) | self.flags | (frozenset({"this"}) if self.anonymous else frozenset())

    def matches(self, node: exp.Expression) -> bool:
        return all(key in self._known for key, value in node.args.items() if value not in (None, False, [])) and \
            self.when(node)


_BY_CLASS: dict[type[exp.Expression], list[Function]] = {}
_BY_NAME: dict[str, list[Function]] = {}


def register(*functions: Function) -> None:
    for f in functions:
        if f.anonymous is not None:
            assert f.cls is exp.Anonymous
            _BY_NAME.setdefault(f.anonymous, []).append(f)
        else:
            _BY_CLASS.setdefault(f.cls, []).append(f)


def definition(node: exp.Expression) -> Function | None:
    """The definition that models ``node`` (its exact class, its flags), or None: opaque."""
    if type(node) is exp.Anonymous:
        candidates = _BY_NAME.get(str(node.name).lower(), [])
    else:
        candidates = _BY_CLASS.get(type(node), [])
    return next((f for f in candidates if f.matches(node)), None)


def definitions() -> list[Function]:
    """Every registered definition (for the conformance run and the reports)."""
    return [f for fs in (*_BY_CLASS.values(), *_BY_NAME.values()) for f in fs]
