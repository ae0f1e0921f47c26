"""The Python and library versions a bench's figures were measured with (README cites them)."""

from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError, version

COMPILER = ("flatjob", "PyYAML", "pydantic", "orjson", "jsonschema")


def versions(names: tuple[str, ...] = COMPILER) -> dict[str, str]:
    """Python and each named library's version ("absent" when not installed); PyYAML says
    whether its C parser (libyaml) is there, which decides its speed."""
    out = {"python": sys.version.split()[0]}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "absent"
    if "PyYAML" in out and out["PyYAML"] != "absent":
        import yaml

        out["PyYAML"] += " (libyaml)" if getattr(yaml, "__with_libyaml__", False) else " (pure Python)"
    return out


def line(names: tuple[str, ...] = COMPILER) -> str:
    """The versions on one line, for a bench's header."""
    return ", ".join(f"{k} {v}" for k, v in versions(names).items())
