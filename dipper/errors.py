"""The one exception hierarchy of Dipper.

Every error Dipper raises on purpose derives from :class:`DipperError`; its message is written for the
person who has to act on it (one line, what is wrong and what to do), because command-line entry points
print ``str(error)`` as is and exit non-zero.
"""


class DipperError(Exception):
    """Root of every error Dipper raises on purpose."""


class ConfigError(DipperError):
    """The configuration file or an environment override is invalid."""


class EnvironmentProblem(DipperError):
    """The machine lacks something Dipper needs (Java, a free port, a writable directory)."""


class DatasetError(DipperError):
    """A benchmark dataset request is invalid, or a dataset is missing or damaged."""


class BackendError(DipperError):
    """The Spark backend could not be started or reached."""


class StatsError(DipperError):
    """The statistics store is missing, unreadable, of another format version, or a collection failed."""
