"""What the proxy must recognise in a statement before it goes anywhere.

Two kinds of statement matter:

- **Virtual statements**, answered by the proxy itself: ``EXPLAIN SKIPPING <query>``,
  ``SHOW SKIPPING LOG [LIMIT n]``, ``SET skipping.<key> [= value]``.
- **Session-changing statements**, which the rewriter must know about to stay correct (``proxy/session_state.py``
  keeps what they change):

  - ``USE db`` and catalog switches: what unqualified names mean;
  - temporary views, which hide a catalog table of the same name from unqualified references:
    ``CREATE [OR REPLACE] [GLOBAL] TEMP|TEMPORARY VIEW|TABLE``, ``CACHE [LAZY] TABLE name [AS] query``,
    ``DROP VIEW|TABLE name``, ``ALTER VIEW|TABLE name RENAME TO other``;
  - settings: ``SET key=value``, ``SET TIME ZONE ...``, ``RESET [key]``;
  - statements whose effect on names cannot be read from their text (``EXECUTE IMMEDIATE`` of a computed
    string, SQL scripts, procedures): :class:`NamesUnknown`, after which the proxy asks Spark.

Why this is sound: a statement is classified by its leading keywords only, after comments. Every statement
kind that can create or drop a temporary view is either read exactly or is :class:`NamesUnknown`; only kinds
that cannot touch temporary views (queries, ``SHOW``, ``DESCRIBE``, DML, ...) are ``None``. So a ``SHOW
TABLES LIKE 'temp'`` changes nothing, and nothing that does change a name goes unnoticed. ``SET`` is read the
way Spark's own parser reads it (``SparkSqlAstBuilder``: the raw text after ``SET``, keys and values in
backquotes unquoted, trailing semicolons dropped, everything else kept verbatim, comments included); a form
that cannot be read with certainty asks Spark for the values afterwards (:class:`Relearn`).

A small tokenizer rather than sqlglot: these statements are short and fixed in form, and recognising them
must not depend on sqlglot understanding the rest of the dialect.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

_COMMENTS = re.compile(r"\A(?:\s+|--[^\n]*(?:\n|\Z)|/\*.*?\*/)*", re.S)
_NAME = r"(`(?:[^`]|``)+`|[\w$]+)"
_QUALIFIED = rf"{_NAME}(?:\s*\.\s*{_NAME})?(?:\s*\.\s*{_NAME})?"

_EXPLAIN = re.compile(r"EXPLAIN\s+SKIPPING\b\s*(.*)", re.S | re.I)
_SHOW_LOG = re.compile(r"SHOW\s+SKIPPING\s+LOG(?:\s+LIMIT\s+(\d+))?\s*;?\s*\Z", re.S | re.I)
_SET_SKIPPING = re.compile(r"SET\s+skipping\.([\w.]*)\s*(?:=\s*(.*?))?\s*;?\s*\Z", re.S | re.I)
SPARK_CATALOG = "spark_catalog"

# Spark's own patterns for SET (SparkSqlAstBuilder.configKeyValueDef / configKeyDef / configValueDef).
_CONF_KEY = r"[a-zA-Z_\d\\.:]+"
_SET_KEY_VALUE = re.compile(rf"({_CONF_KEY})\s*=([^;]*);*", re.S)
_SET_KEY_QUOTED_VALUE = re.compile(rf"({_CONF_KEY})\s*=\s*(`(?:[^`]|``)*`)\s*;*\s*", re.S)
_SET_KEY = re.compile(rf"({_CONF_KEY})")
_CONF_VALUE = re.compile(r"([^;]*);*", re.S)
_BACKQUOTED = re.compile(r"`((?:[^`]|``)*)`")

# First keywords of statements that cannot create or drop a temporary view, switch databases or change a
# setting. Anything else not read below (EXECUTE IMMEDIATE, BEGIN ... END, CALL, a new statement kind) may.
_NO_NAME_EFFECT = frozenset({
    "SELECT", "WITH", "VALUES", "FROM", "TABLE", "(", "SHOW", "DESCRIBE", "DESC", "EXPLAIN", "INSERT", "MERGE",
    "UPDATE", "DELETE", "ANALYZE", "REFRESH", "MSCK", "REPAIR", "ADD", "LIST", "TRUNCATE", "COMMENT", "DECLARE",
    "LOAD", "UNCACHE", "CLEAR", "GRANT", "REVOKE", "REPLACE",
})
_MAX_TOKENS = 100_000


# -- virtual statements ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Explain:
    query: str


@dataclasses.dataclass(frozen=True)
class ShowLog:
    limit: int | None


@dataclasses.dataclass(frozen=True)
class SetSkipping:
    key: str  # lower case, without the "skipping." prefix
    value: str | None  # None: show the current value


# -- session changes ---------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class UseDatabase:
    database: str | None  # None: a catalog other than spark_catalog (names no longer mean what stats know)
    # USE CATALOG spark_catalog: Spark keeps the current namespace when the catalog is current already (and
    # only then is the database known), so the database stays what it was; unknown stays unknown.
    keep: bool = False


@dataclasses.dataclass(frozen=True)
class TempView:
    """A temporary view of this (lower-case) name exists once the statement succeeded."""

    name: str


@dataclasses.dataclass(frozen=True)
class DropView:
    """No temporary view of this name exists once the statement succeeded: ``DROP VIEW|TABLE name`` drops the
    session's temporary view of that name when there is one (Spark looks there first)."""

    name: str


@dataclasses.dataclass(frozen=True)
class RenameView:
    """``ALTER VIEW|TABLE old RENAME TO new``: if ``old`` was a temporary view, ``new`` is one now."""

    old: str
    new: str


@dataclasses.dataclass(frozen=True)
class NamesUnknown:
    """The statement may create or drop temporary views the proxy cannot name (dynamic SQL, scripts)."""

    why: str


@dataclasses.dataclass(frozen=True)
class SetConf:
    key: str  # as Spark stores it (case kept)
    value: str


@dataclasses.dataclass(frozen=True)
class Relearn:
    """Settings change in a way the text does not say (RESET, SET TIME ZONE LOCAL, ${...} substitution):
    the proxy reads them from Spark once the statement succeeded."""

    why: str


Virtual = Explain | ShowLog | SetSkipping
SessionChange = UseDatabase | TempView | DropView | RenameView | NamesUnknown | SetConf | Relearn


def strip_leading_comments(sql: str) -> str:
    return sql[_COMMENTS.match(sql).end():]


def virtual(sql: str) -> Virtual | None:
    text = strip_leading_comments(sql)
    if m := _EXPLAIN.match(text):
        return Explain(m.group(1).strip())
    if m := _SHOW_LOG.match(text):
        return ShowLog(int(m.group(1)) if m.group(1) else None)
    if m := _SET_SKIPPING.match(text):
        value = m.group(2)
        return SetSkipping(m.group(1).lower(), value.strip().strip("'\"") if value is not None else None)
    return None


def session_change(sql: str) -> SessionChange | None:
    """What ``sql`` changes in the session once it succeeds on Spark, or None if it changes nothing the
    rewriter depends on."""
    text = strip_leading_comments(sql)
    tokens = list(_head(text, 24))
    if not tokens:
        return None
    first = tokens[0].word
    if first == "USE":
        return _use(tokens)
    if first == "SET":
        return _set(text, tokens)
    if first == "RESET":
        return Relearn("RESET restores values the proxy was not told")
    if first == "CREATE":
        return _create(tokens)
    if first == "CACHE":
        return _cache(text, tokens)
    if first == "DROP":
        return _drop(tokens)
    if first == "ALTER":
        return _alter(tokens)
    if first in _NO_NAME_EFFECT:
        return None
    if first == "EXECUTE":
        return NamesUnknown("EXECUTE IMMEDIATE runs SQL text the proxy cannot read")
    return NamesUnknown(f"a {first or tokens[0].text!r} statement may create or drop temporary views")


def tables_redefined(sql: str) -> list[list[str]]:
    """The catalog tables (dotted names as written, lower case) whose name ``sql`` may point at other files:
    ``DROP TABLE``, any ``ALTER TABLE`` (``RENAME TO`` names both tables; ``SET LOCATION``, ``ADD PARTITION ...
    LOCATION`` and the like), ``CREATE [OR REPLACE] TABLE`` (a table of that name dropped outside Dipper may
    have left statistics), ``REPLACE TABLE`` and ``TRUNCATE TABLE``. No rewrite uses their statistics while
    the statement runs, and those of a table it changed go once Spark confirmed it (``proxy/execution.py``):
    statistics of files that are no longer the table's would let it originate diPs without its real rows.
    ``INSERT`` needs nothing: new files are unknown to the statistics and are always read. Temporary views
    and tables are not catalog tables."""
    tokens = list(_head(strip_leading_comments(sql), 24))
    first, i = _word(tokens, 0), 1
    if first == "CREATE":
        if _words(tokens, i, 2) == ["OR", "REPLACE"]:
            i += 2
        i += _word(tokens, i) == "EXTERNAL"
    elif first not in ("DROP", "ALTER", "REPLACE", "TRUNCATE"):
        return []
    if _word(tokens, i) != "TABLE":
        return []
    i += 1
    if _words(tokens, i, 3) == ["IF", "NOT", "EXISTS"]:
        i += 3
    elif _words(tokens, i, 2) == ["IF", "EXISTS"]:
        i += 2
    name, i = _name(tokens, i)
    if name is None:
        return []
    if first == "ALTER" and _words(tokens, i, 2) == ["RENAME", "TO"]:
        new, _ = _name(tokens, i + 2)
        if new is not None and len(new) == 1:
            new = name[:-1] + new  # RENAME TO keeps the table in its database
        return [name] + ([new] if new is not None else [])
    return [name]


# -- the readers ---------------------------------------------------------------------------------------------
def _use(tokens: list[_Token]) -> UseDatabase:
    i = 1
    kind = tokens[i].word if i < len(tokens) else ""
    if kind in ("DATABASE", "SCHEMA", "NAMESPACE", "CATALOG"):
        i += 1
    name, i = _name(tokens, i)
    if name is None or not _only_semicolons(tokens, i):
        return UseDatabase(None)  # not read: names no longer mean what the statistics know (until the next USE)
    if kind == "CATALOG":
        return UseDatabase(None, keep=True) if name == [SPARK_CATALOG] else UseDatabase(None)
    if len(name) == 1:
        return UseDatabase(name[0])
    return UseDatabase(name[1] if len(name) == 2 and name[0] == SPARK_CATALOG else None)


def _set(text: str, tokens: list[_Token]) -> SessionChange | None:
    # A keyword only when a name follows it: SET var = 1 and SET catalog.x = 1 set settings of those names.
    second = tokens[1].word if len(tokens) > 2 and tokens[2].text not in (".", "=", ":") else ""
    if second == "CATALOG":
        return UseDatabase(None)
    if second in ("VAR", "VARIABLE"):
        return None  # a session variable, not a setting
    if second == "TIME" and len(tokens) > 2 and tokens[2].word == "ZONE":
        return Relearn("SET TIME ZONE (LOCAL and intervals name a zone the text does not)")
    rest = text[tokens[0].end:]
    if "${" in rest:
        return Relearn("variable substitution in SET")
    stripped = rest.strip()
    if stripped in ("", "-v") or not stripped.strip(";").strip():
        return None  # lists settings
    if stripped.startswith("`"):
        return _set_quoted_key(stripped)
    if m := _SET_KEY_QUOTED_VALUE.fullmatch(stripped):
        return SetConf(m.group(1), _unquote(m.group(2)))
    if m := _SET_KEY_VALUE.fullmatch(stripped):
        return SetConf(m.group(1), m.group(2).strip())
    if _SET_KEY.fullmatch(stripped):
        return None  # SET key: shows the value
    return Relearn("a SET the proxy does not read")


def _set_quoted_key(stripped: str) -> SessionChange | None:
    m = _BACKQUOTED.match(stripped)
    if m is None:
        return Relearn("a SET the proxy does not read")
    key = m.group(1).replace("``", "`")
    after = stripped[m.end():].strip()
    if not after.strip(";").strip():
        return None  # SET `key`: shows the value
    if not after.startswith("="):
        return Relearn("a SET the proxy does not read")
    value = after[1:].strip()
    if (q := _BACKQUOTED.match(value)) and not value[q.end():].strip().strip(";").strip():
        return SetConf(key, q.group(1).replace("``", "`"))
    if m2 := _CONF_VALUE.fullmatch(value):
        return SetConf(key, m2.group(1).strip())
    return Relearn("a SET the proxy does not read")


def _create(tokens: list[_Token]) -> SessionChange | None:
    i = 1
    if _words(tokens, i, 2) == ["OR", "REPLACE"]:
        i += 2
    is_global = _word(tokens, i) == "GLOBAL"
    i += is_global
    temporary = _word(tokens, i) in ("TEMP", "TEMPORARY")
    i += temporary
    kind = _word(tokens, i)
    if not temporary:
        return None  # a catalog object: it lives in a database, not in the session's names
    if kind == "FUNCTION":
        return None  # temporary functions cannot shadow built-in ones (Spark refuses ROUTINE_ALREADY_EXISTS)
    if kind not in ("VIEW", "TABLE"):
        return NamesUnknown("a CREATE TEMPORARY statement the proxy does not read")
    if is_global and kind == "VIEW":
        return None  # global temporary views are reached as global_temp.name only (USE global_temp is refused)
    i += 1
    if _words(tokens, i, 3) == ["IF", "NOT", "EXISTS"]:
        i += 3
    name, _ = _name(tokens, i)
    if name is None:
        return NamesUnknown("a temporary view whose name the proxy cannot read")
    return TempView(name[-1])


def _cache(text: str, tokens: list[_Token]) -> SessionChange | None:
    """``CACHE [LAZY] TABLE name [OPTIONS (...)] [[AS] query]``: with a query it creates a temporary view;
    without one it caches an existing relation and changes no name."""
    i = 1 + (_word(tokens, 1) == "LAZY")
    if _word(tokens, i) != "TABLE":
        return NamesUnknown("a CACHE statement the proxy does not read")
    name, i = _name(tokens, i + 1)
    if name is None:
        return NamesUnknown("a CACHE statement the proxy does not read")
    rest = _head(text, _MAX_TOKENS, start=tokens[i - 1].end)
    after = next(rest, None)
    if after is not None and after.word == "OPTIONS":
        after = _after_parens(rest)
    while after is not None and after.text == ";":
        after = next(rest, None)
    return None if after is None else TempView(name[-1])


def _drop(tokens: list[_Token]) -> SessionChange | None:
    if _word(tokens, 1) not in ("VIEW", "TABLE"):
        return None
    i = 2
    if _words(tokens, i, 2) == ["IF", "EXISTS"]:
        i += 2
    name, _ = _name(tokens, i)
    if name is None:
        return NamesUnknown("a DROP statement the proxy does not read")
    return DropView(name[0]) if len(name) == 1 else None  # a qualified name is never a temporary view


def _alter(tokens: list[_Token]) -> SessionChange | None:
    if _word(tokens, 1) not in ("VIEW", "TABLE"):
        return None
    old, i = _name(tokens, 2)
    if old is None:
        return NamesUnknown("an ALTER statement the proxy does not read")
    if len(old) > 1 or _words(tokens, i, 2) != ["RENAME", "TO"]:
        return None  # a catalog table, or ALTER VIEW v AS ..., ALTER TABLE t ADD COLUMNS ...: no name changes
    new, _ = _name(tokens, i + 2)
    if new is None:
        return NamesUnknown("an ALTER ... RENAME the proxy does not read")
    return RenameView(old[-1], new[-1])


# -- tokens --------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _Token:
    kind: str  # "word", "quoted" (backquoted identifier), "string", "symbol"
    text: str
    end: int

    @property
    def word(self) -> str:
        """The upper-case keyword, or "" for anything that is not a bare word (a quoted `SET` is no keyword)."""
        return self.text.upper() if self.kind == "word" else ("(" if self.text == "(" else "")


_TOKEN = re.compile(r"""(?P<ws>\s+)|(?P<line>--[^\n]*)|(?P<block>/\*)|(?P<quoted>`(?:[^`]|``)*`)
                       |(?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|(?P<word>[\w$]+)|(?P<symbol>.)""", re.X | re.S)


def _head(text: str, limit: int, start: int = 0) -> Iterator[_Token]:
    """The first ``limit`` tokens of ``text`` from ``start``, comments skipped (bracketed ones nest, as in Spark)."""
    pos, count = start, 0
    while pos < len(text) and count < limit:
        m = _TOKEN.match(text, pos)
        assert m is not None  # the last alternative matches any character
        kind = m.lastgroup
        if kind == "block":
            pos = _comment_end(text, m.end())
            continue
        pos = m.end()
        if kind in ("ws", "line"):
            continue
        count += 1
        yield _Token(kind or "symbol", m.group(), pos)


def _comment_end(text: str, pos: int) -> int:
    depth = 1
    while depth and pos < len(text):
        if text.startswith("/*", pos):
            depth, pos = depth + 1, pos + 2
        elif text.startswith("*/", pos):
            depth, pos = depth - 1, pos + 2
        else:
            pos += 1
    return pos


def _word(tokens: list[_Token], i: int) -> str:
    return tokens[i].word if i < len(tokens) else ""


def _words(tokens: list[_Token], i: int, n: int) -> list[str]:
    return [_word(tokens, j) for j in range(i, i + n)]


def _name(tokens: list[_Token], i: int) -> tuple[list[str] | None, int]:
    """A dotted name starting at token ``i`` (lower case, unquoted) and the index after it."""
    parts: list[str] = []
    if i + 1 < len(tokens) and tokens[i].word == "IDENTIFIER" and tokens[i + 1].text == "(":
        return None, i  # IDENTIFIER('...'): a name computed from an expression
    while i < len(tokens) and tokens[i].kind in ("word", "quoted"):
        parts.append(_unquote(tokens[i].text).lower())
        i += 1
        if i < len(tokens) and tokens[i].text == "." and i + 1 < len(tokens):
            i += 1
            continue
        break
    return (parts or None), i


def _after_parens(tokens: Iterator[_Token]) -> _Token | None:
    """The token after a parenthesised list that ``tokens`` starts with (OPTIONS (...))."""
    first = next(tokens, None)
    if first is None or first.text != "(":
        return first
    depth = 1
    for token in tokens:
        if depth == 0:
            return token
        depth += {"(": 1, ")": -1}.get(token.text, 0)
    return None


def _only_semicolons(tokens: list[_Token], i: int) -> bool:
    return all(t.text == ";" for t in tokens[i:])


def _unquote(name: str) -> str:
    return name[1:-1].replace("``", "`") if name.startswith("`") else name
