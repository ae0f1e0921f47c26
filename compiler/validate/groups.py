"""The replica groups of a typed job: compiler/groups.py (outside the validate package, so the
runtime may read them without loading the checks)."""

from __future__ import annotations

from ..groups import GROUPS, Group, groups

__all__ = ["GROUPS", "Group", "groups"]
