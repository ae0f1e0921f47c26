"""flatjob's version: one place, read by packaging, the CLI and every rendered record."""

__version__ = "0.1.0"
