"""Paths named on the command line: one that does not exist names a near one that does
(`flatjob lint job/` beside `jobs/`), as click names a near option for a misspelt one."""

from __future__ import annotations

import os
from itertools import islice
from pathlib import Path
from typing import Any

import click

# Entries of the parent folder compared with the missing name: a folder of a million files is
# not listed whole to suggest one.
LISTED = 1000


def near_path(value: str) -> str | None:
    """A path that exists beside `value`, named as the user wrote `value`, or None."""
    from ..validate.suggest import closest  # only on this error: --help loads no validator

    path = Path(value)
    if not path.name:
        return None
    try:
        with os.scandir(path.parent) as listing:
            names = [e.name for e in islice(listing, LISTED) if not e.name.startswith(".")]
    except OSError:
        return None
    near = closest(path.name, names)
    if near is None or near == path.name:
        return None
    suggestion = os.path.join(os.path.dirname(value.rstrip("/")), near)
    return suggestion + "/" if value.endswith("/") else suggestion


class ExistingPath(click.Path):
    """click.Path(exists=True) whose "does not exist" says which path was likely meant."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(exists=True, **kwargs)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as exc:
            near = near_path(os.fsdecode(value)) if not os.path.lexists(value) else None
            if near is not None:
                exc.message += f" Did you mean {near!r}?"
            raise
