"""Errors inside the rewriter. None of them reaches a client: ``rewrite()`` fails open on every one."""

from dipper.errors import DipperError


class RewriteError(DipperError):
    """Analysis or rewriting failed; the original SQL is sent unchanged."""


class Untranslatable(RewriteError):
    """A clause has no falsifiable expression we can build; it counts as MIGHT_MATCH for that clause only."""
