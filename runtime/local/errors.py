"""Errors of run-local; each one means nothing ran (exit status 2)."""

from __future__ import annotations


class LocalError(Exception):
    """run-local cannot run this job here; the message says why and what to do."""


class Unsupported(LocalError):
    """The job needs something out of reach on one machine (sshd, a paused job...)."""


class EnvError(LocalError):
    """Environment variables that only a cluster could resolve (Secrets, ConfigMaps)."""
