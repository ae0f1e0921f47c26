"""`python -m flatjob.compiler.cli`: the same entry point as the `flatjob` script."""

from . import entry

entry()
