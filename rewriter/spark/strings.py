"""String functions: Spark's definitions."""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from rewriter.errors import Untranslatable
from rewriter.spark.coercion import ANY, SMALL_INTEGERS, STRINGS, expects
from rewriter.spark.registry import Call, Function, register
from rewriter.spark.types import INT, STRING
from rewriter.spark.values import integer, strict, string


def _string(call: Call) -> Any:
    return STRING


def _int(call: Call) -> Any:
    return INT


_INT_MIN, _INT_MAX = -2**31, 2**31 - 1


def substring(s: str, pos: int, length: int | None) -> str:
    """Spark's substring(str, pos, len) (``UTF8String.substringSQL``), on code points, with its INT
    arithmetic: no length is ``Integer.MAX_VALUE``, and ``start + len`` is clamped to INT's range
    (``substring(' ', -2147483648)`` is empty). Positions and lengths must be INT values: Spark casts a
    BIGINT one to INT first, which is not reproduced."""
    if not (_INT_MIN <= pos <= _INT_MAX) or length is not None and not (_INT_MIN <= length <= _INT_MAX):
        raise Untranslatable("a substring position or length outside INT")
    n = len(s)
    length = _INT_MAX if length is None else length
    start = pos - 1 if pos > 0 else (n + pos if pos < 0 else 0)
    end = min(max(start + length, _INT_MIN), _INT_MAX)
    start = max(start, 0)
    return "" if start >= end else s[start:min(end, n)]


def _substring(values: list[Any], node: exp.Expression) -> Any:
    if any(v is None for v in values):
        return None
    s, pos, length = string(values[0]), integer(values[1]) if len(values) > 1 else 1, \
        integer(values[2]) if len(values) > 2 else None
    return substring(s, pos, length)


def _case_mapped(upper: bool) -> Any:
    def evaluate(s: Any) -> str:
        if not string(s).isascii():
            raise Untranslatable("case mapping of non-ASCII text depends on the JVM's locale")
        return s.upper() if upper else s.lower()
    return strict(evaluate)


def _concat(values: list[Any], node: exp.Expression) -> Any:
    return None if any(v is None for v in values) else "".join(string(v) for v in values)


def _concat_ws(values: list[Any], node: exp.Expression) -> Any:
    """concat_ws(sep, s1, s2, ...): NULL only when the separator is; NULL strings are skipped."""
    if not values or values[0] is None:
        return None
    return string(values[0]).join(string(v) for v in values[1:] if v is not None)


def _bounded_length(call: Call) -> bool:
    """lpad/rpad build a string of the requested length: past Spark's limit on one string it raises, so the
    length must be a literal of sane size."""
    length = call.node.expression
    return not (type(length) is exp.Literal and not length.is_string and length.this.isdigit()
                and int(length.this) <= 1_000_000)


def _growing_replace(call: Call) -> bool:
    """replace(s, search, by) grows the string when ``by`` is longer than ``search``; past Spark's limit on
    one string that raises. Literals that cannot grow it are safe."""
    search, by = call.node.expression, call.node.args.get("replacement")
    if by is None:
        return False
    return not (type(search) is exp.Literal and search.is_string and type(by) is exp.Literal and by.is_string
                and len(by.this) <= max(len(search.this), 1))


register(
    Function(exp.Upper, "upper", ("this",), _string, expects(STRINGS), evaluate=_case_mapped(True)),
    Function(exp.Lower, "lower", ("this",), _string, expects(STRINGS), evaluate=_case_mapped(False)),
    # sqlglot gives initcap a default delimiter argument of one space: Spark's initcap
    Function(exp.Initcap, "initcap", ("this",), _string, expects(STRINGS), flags=frozenset({"expression"}),
             when=lambda node: node.args.get("expression") is None or node.expression == exp.Literal.string(" ")),
    Function(exp.Reverse, "reverse", ("this",), _string, expects(STRINGS),
             when=lambda n: True),
    # trim, ltrim, rtrim of spaces (``position`` says which side); trim of other characters is opaque
    Function(exp.Trim, "trim", ("this",), _string, expects(STRINGS), flags=frozenset({"position"})),
    Function(exp.Length, "length", ("this",), _int, expects(STRINGS),
             evaluate=strict(lambda s: len(string(s)))),
    # sqlglot describes Spark's concat as ``safe`` without ``coalesce`` (a NULL argument makes it NULL) and
    # concat_ws with ``coalesce`` (NULL arguments are skipped); other settings are other dialects' functions.
    Function(exp.Concat, "concat", ("expressions",), _string, expects(STRINGS), evaluate=_concat,
             flags=frozenset({"safe"})),
    Function(exp.DPipe, "||", ("this", "expression"), _string, expects(STRINGS), evaluate=_concat,
             flags=frozenset({"safe"})),
    Function(exp.ConcatWs, "concat_ws", ("expressions",), _string, expects(STRINGS), evaluate=_concat_ws,
             flags=frozenset({"safe", "coalesce", "flatten"}), when=lambda node: bool(node.args.get("coalesce"))),
    Function(exp.Substring, "substring", ("this", "start", "length"), _string,
             expects(STRINGS, SMALL_INTEGERS), evaluate=_substring, flags=frozenset({"zero_start"}),
             when=lambda node: bool(node.args.get("zero_start"))),  # Spark's: position 0 is 1
    Function(exp.Left, "left", ("this", "expression"), _string, expects(STRINGS, SMALL_INTEGERS),
             evaluate=strict(lambda s, n: substring(string(s), 1, integer(n)))),
    Function(exp.Right, "right", ("this", "expression"), _string, expects(STRINGS, SMALL_INTEGERS)),
    Function(exp.Pad, "lpad/rpad", ("this", "expression", "fill_pattern"), _string,
             expects(STRINGS, SMALL_INTEGERS, STRINGS), raises=_bounded_length, flags=frozenset({"is_left"})),
    Function(exp.Replace, "replace", ("this", "expression", "replacement"), _string, expects(STRINGS),
             raises=_growing_replace),
    Function(exp.StrPosition, "locate", ("this", "substr", "position"), _int,
             expects(STRINGS, STRINGS, SMALL_INTEGERS)),
    Function(exp.MD5, "md5", ("this",), _string, expects(ANY)),
    Function(exp.SHA, "sha1", ("this",), _string, expects(ANY)),
    Function(exp.SHA2, "sha2", ("this", "length"), _string, expects(ANY, SMALL_INTEGERS)),
    Function(exp.Anonymous, "octet_length", ("expressions",), _int, expects(STRINGS), anonymous="octet_length"),
    Function(exp.BitLength, "bit_length", ("this",), _int, expects(STRINGS)),
    Function(exp.Ascii, "ascii", ("this",), _int, expects(STRINGS)),
    Function(exp.ToBase64, "base64", ("this",), _string, expects(ANY)),
    Function(exp.Hex, "hex", ("this",), _string, expects(ANY)),
    Function(exp.Soundex, "soundex", ("this",), _string, expects(STRINGS)),
)
