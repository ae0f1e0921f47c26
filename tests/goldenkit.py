"""Pure helpers for golden tests: read a folder as {relative path: text}, compare two such
trees with a readable report, and rewrite a folder to hold exactly a given tree.

Used by tests/test_golden.py and tests/test_output.py.
"""

from __future__ import annotations

import difflib
import shutil
from pathlib import Path

Tree = dict[str, str]

# Lines of unified diff shown per changed file, and changed files shown per report.
DIFF_LINES = 40
FILES_SHOWN = 8


def read_tree(root: Path) -> Tree:
    """Every file under root (hidden ones included), keyed by its POSIX path relative to root."""
    if not root.is_dir():
        return {}
    return {
        p.relative_to(root).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def file_diff(rel: str, expected: str, actual: str, limit: int = DIFF_LINES) -> str:
    """A unified diff of one file, cut to `limit` lines."""
    lines = list(
        difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            f"expected/{rel}",
            f"actual/{rel}",
        )
    )
    more = len(lines) - limit
    shown = "".join(line if line.endswith("\n") else line + "\n" for line in lines[:limit])
    return shown + (f"... {more} more diff lines\n" if more > 0 else "")


def compare_trees(expected: Tree, actual: Tree) -> str:
    """An empty string when the trees are equal, else what is missing, extra and changed."""
    missing = sorted(set(expected) - set(actual))
    extra = sorted(set(actual) - set(expected))
    changed = sorted(k for k in set(expected) & set(actual) if expected[k] != actual[k])
    if not (missing or extra or changed):
        return ""
    parts = [f"{len(missing)} missing, {len(extra)} extra, {len(changed)} changed file(s)"]
    parts += [f"missing: {rel}" for rel in missing]
    parts += [f"extra:   {rel}" for rel in extra]
    parts += [file_diff(rel, expected[rel], actual[rel]) for rel in changed[:FILES_SHOWN]]
    if len(changed) > FILES_SHOWN:
        parts.append(f"... and {len(changed) - FILES_SHOWN} more changed file(s)")
    return "\n".join(parts)


def replace_tree(root: Path, tree: Tree) -> None:
    """Make root hold exactly `tree` (used by --update-golden)."""
    if root.exists():
        shutil.rmtree(root)
    for rel, text in tree.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="\n")


def check_golden(expected_root: Path, actual: Tree, update: bool, hint: str) -> None:
    """Assert that expected_root holds exactly `actual`, or rewrite it when updating."""
    if update:
        replace_tree(expected_root, actual)
        return
    report = compare_trees(read_tree(expected_root), actual)
    assert not report, f"{expected_root} is stale ({hint}):\n{report}"
