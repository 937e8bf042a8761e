"""The allow-list: which statements the rewriter models at all (issue 13, ARCHITECTURE.md §3.3 and §3.6).

The rewriter prunes only inside constructs it models explicitly, each with a soundness argument in the
module that handles it. Anything else makes it decline the whole statement, and the decision record says
what: a new Spark or sqlglot release that parses something new (a node type this list has not seen) is
declined, not silently pruned. Checked before any analysis:

- text Spark changes before parsing it: ``${var}`` substitution (``spark.sql.variable.substitute``);
- SQL pipe syntax (``|>``): sqlglot folds a ``|> WHERE`` after ``|> LIMIT`` into the same SELECT, so the
  tree does not say what Spark runs;
- recursive CTEs: a filter on the CTE's output does not commute into its anchor (a seed row whose
  descendants match would be pruned);
- column aliases on a table (``t AS y(v, k)``): the columns are renamed by position, which the resolution of
  columns to statistics does not follow (``y.k`` would be read as ``t.k``); on a derived table or CTE they
  are followed;
- nondeterministic functions (``rand``, ``uuid``, ``monotonically_increasing_id``, ...): their values
  depend on which rows are read and in what partitions, so reading fewer files changes the answer;
- any node type outside :data:`STRUCTURE` that is not a function: QUALIFY, time travel, MATCH_RECOGNIZE,
  TABLESAMPLE (a sample of fewer files, or of a CTE a diP enters, is another sample), ... and whatever a
  later sqlglot adds.

Functions are allowed in general because the rewriter only *interprets* the ones it has a definition for
(``rewriter/spark/``, ``rewriter/monotone.py``); an unknown function is "might match" for its clause.

No round trip through sqlglot's generator is checked: the SQL sent is the original text with table
references spliced in (``rewriter/emit.py``), never regenerated, so what must be right is the parse, and a
parse that folds clauses (pipe syntax) regenerates into a tree equal to itself. A generate-and-reparse
check would only compare sqlglot with itself, while failing on harmless normalisations (its Spark dialect
reads the ``CAST`` it writes for ``DATE '...'`` back as ``TRY_CAST``) and doubling the parse cost.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

# Node types whose meaning the rewriter's modules account for (table_refs, join_tree, join_graph, falsify).
STRUCTURE: frozenset[type[exp.Expression]] = frozenset({
    exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Subquery, exp.From, exp.Join, exp.Where, exp.Group,
    exp.Having, exp.Order, exp.Ordered, exp.Limit, exp.Offset, exp.With, exp.CTE, exp.TableAlias, exp.Table,
    exp.Identifier, exp.Column, exp.Star, exp.Alias, exp.Paren, exp.Literal, exp.Null, exp.Boolean, exp.DataType,
    exp.DataTypeParam, exp.Interval, exp.Var, exp.Window, exp.WindowSpec, exp.Distinct, exp.Tuple, exp.Rollup,
    exp.Cube, exp.GroupingSets, exp.Dot, exp.Bracket, exp.Lambda, exp.Hint, exp.Values,
    exp.Lateral, exp.Pivot, exp.PivotAlias, exp.Filter, exp.Placeholder, exp.Parameter,
    # predicates and operators (those that are not functions in sqlglot's class tree)
    exp.And, exp.Or, exp.Not, exp.Neg, exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.NullSafeEQ,
    exp.NullSafeNEQ, exp.Is, exp.In, exp.Between, exp.Like, exp.ILike, exp.RegexpLike, exp.Add, exp.Sub, exp.Mul,
    exp.Div, exp.IntDiv, exp.Mod, exp.DPipe, exp.BitwiseAnd, exp.BitwiseOr, exp.BitwiseXor, exp.BitwiseNot,
    exp.BitwiseLeftShift, exp.BitwiseRightShift, exp.Escape, exp.Slice, exp.Kwarg, exp.PropertyEQ,
})
# Nodes that are functions in sqlglot's class tree but change what a statement means structurally.
_NOT_FUNCTIONS: frozenset[type[exp.Expression]] = frozenset({exp.Qualify, exp.Version, exp.MatchRecognize})
# Spark functions whose value depends on the rows read, their order or partitioning, or outside state.
NONDETERMINISTIC = frozenset({
    "rand", "randn", "random", "uuid", "shuffle", "monotonically_increasing_id", "spark_partition_id",
    "input_file_name", "input_file_block_start", "input_file_block_length", "randstr", "uniform", "reflect",
    "java_method", "try_reflect", "rand_str",
})


def unmodelled(sql: str, tree: exp.Expression) -> str | None:
    """Why the rewriter must decline ``sql`` (parsed as ``tree``) as a whole, or None if it models it."""
    if "${" in sql:
        return "variable substitution (${...}): Spark changes the text before it parses it"
    if "|>" in sql and any(t.token_type == TokenType.PIPE_GT for t in sqlglot.tokenize(sql, read="spark")):
        return "SQL pipe syntax (|>)"
    for node in tree.walk():
        if isinstance(node, exp.With) and node.args.get("recursive"):
            return "a recursive CTE"
        if isinstance(node, exp.Table) and isinstance(node.args.get("alias"), exp.TableAlias) and \
                node.args["alias"].args.get("columns"):
            return "column aliases on a table (t AS y(a, b)): its columns are renamed by position"
        kind = type(node)
        if kind in _NOT_FUNCTIONS or (kind not in STRUCTURE and not isinstance(node, exp.Func)):
            return f"{kind.__name__} is not modelled"
        if isinstance(node, exp.Func) and _function_name(node) in NONDETERMINISTIC:
            return f"the nondeterministic function {_function_name(node)}()"
    return None


def _function_name(node: exp.Func) -> str:
    if isinstance(node, exp.Anonymous):
        return node.name.lower()
    return node.sql_name().lower()
