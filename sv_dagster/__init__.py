"""sv-dagster: the Security Verifiers research program as a Dagster code location."""

__version__ = "0.1.0"
