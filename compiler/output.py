"""The output folder: plan what changes, write it atomically, prune what flatjob wrote before.

A compile computes every file in memory first; only when the whole run succeeded does
anything touch the disk.  Each file is written to a temporary file in its folder and moved
into place (os.replace, atomic on POSIX), files whose bytes are unchanged are not touched,
and the metadata file is written last.  Files flatjob did not write are never deleted.
"""

from __future__ import annotations

import difflib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

META_FILE = "flatjob-meta.json"


@dataclass
class TreeChanges:
    """What bringing a folder to the desired files would do."""

    write: dict[str, str] = field(default_factory=dict)  # new or changed files
    delete: list[str] = field(default_factory=list)  # files flatjob wrote before, now gone
    unchanged: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)  # existing files flatjob did not write

    @property
    def empty(self) -> bool:
        return not self.write and not self.delete


def previous_files(root: Path) -> set[str] | None:
    """The files the last compile wrote (from the metadata file), or None without one."""
    try:
        meta = json.loads((root / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    files = meta.get("files") if isinstance(meta, dict) else None
    return {f for f in files if isinstance(f, str) and _safe(f)} if isinstance(files, list) else None


def _safe(rel: str) -> bool:
    """A relative path that stays inside the output folder."""
    p = Path(rel)
    return not p.is_absolute() and ".." not in p.parts and rel != ""


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def plan_changes(root: Path, desired: dict[str, str]) -> TreeChanges:
    """Compare the desired files with the folder; nothing is written."""
    before = previous_files(root)
    owned = before if before is not None else set()
    changes = TreeChanges()
    for rel, text in sorted(desired.items()):
        current = _read(root / rel)
        if current == text:
            changes.unchanged.append(rel)
            continue
        if current is not None and rel not in owned and rel != META_FILE:
            changes.conflicts.append(rel)
        changes.write[rel] = text
    changes.delete = sorted(f for f in owned if f not in desired and (root / f).is_file())
    return changes


def unified_diff(root: Path, changes: TreeChanges) -> str:
    """A git-style unified diff of what applying the changes would do."""
    out: list[str] = []
    for rel in sorted(set(changes.write) | set(changes.delete)):
        old = _read(root / rel)
        new = changes.write.get(rel)
        a = old.splitlines(keepends=True) if old is not None else []
        b = new.splitlines(keepends=True) if new is not None else []
        fromfile = f"a/{rel}" if old is not None else "/dev/null"
        tofile = f"b/{rel}" if new is not None else "/dev/null"
        for line in difflib.unified_diff(a, b, fromfile, tofile):
            out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def write_files(root: Path, files: dict[str, str]) -> None:
    """Write each file atomically: temp file in the same folder, fsync, then os.replace."""
    for rel, text in sorted(files.items()):
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def apply_changes(root: Path, changes: TreeChanges) -> None:
    """Write changed files (metadata last) and delete stale ones, removing emptied folders."""
    meta = {k: v for k, v in changes.write.items() if k == META_FILE}
    write_files(root, {k: v for k, v in changes.write.items() if k != META_FILE})
    for rel in changes.delete:
        (root / rel).unlink(missing_ok=True)
        parent = (root / rel).parent
        while parent != root and parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
    write_files(root, meta)
