"""Cross-cutting pieces every Dipper package may use: configuration, errors, logging, environment checks."""
