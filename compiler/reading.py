"""Find and read input files as a pull request may present them: regular files only, links
kept inside the folder being read, and no more bytes than the limits allow.

A job folder in git can hold symbolic links to anywhere (`/dev/zero`, `/proc/self/environ`,
`../.git/config`).  A link is followed only when it resolves inside its root (the folder
named on the command line; for a path named relative to it, the working directory) and not
into a hidden folder; otherwise it is skipped with FJ106.  A path named absolute is taken as
given: the command line is the caller's, the repository's content is not.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .errors import Diagnostic, Severity
from .limits import RUN_SPLIT_HINT, Budget

YAML_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class Input:
    """A file to read: named on the command line (explicit) or found in a named folder."""

    path: Path
    explicit: bool


def confined(path: Path, root: Path) -> bool:
    """Whether `path` stays inside `root` once links are resolved, and out of hidden folders.

    A path that passes through no link is confined by construction (the walk never enters
    hidden folders); only where a link leads is checked.
    """
    plain = os.path.abspath(path)
    real = os.path.realpath(path)
    if real == plain:
        return True
    base = os.path.realpath(root)
    if os.path.commonpath([base, real]) != base:
        return False
    return not any(part.startswith(".") for part in Path(os.path.relpath(real, base)).parts)


def _skipped(path: Path, root: Path, named: bool = False) -> Diagnostic:
    """FJ106: a warning for a link found in a folder; an error for a file named on the command
    line, which must hold a job (lint's help), where a warning let `lint link.yaml` pass with
    0 jobs checked (a named folder that is such a link is FJ102, loader._mark_skipped)."""
    where = "the working directory" if root == Path() else str(root)
    return Diagnostic(
        "FJ106",
        f"{'not read' if named else 'skipped'}: a symbolic link that leads outside {where} (or into a hidden folder); flatjob does not follow it",
        str(path),
        severity=Severity.ERROR if named else Severity.WARNING,
        hint="commit the file itself, or name its real path on the command line",
    )


def find_inputs(paths: Iterable[str]) -> Iterator[Input | Diagnostic]:
    """Each file to read, in a stable order (folders are walked sorted, hidden ones skipped),
    or an FJ106 warning for a link that is not followed."""
    for raw in paths:
        p = Path(raw)
        if not p.is_absolute() and not confined(p, Path()):  # an absolute path is the caller's own
            yield _skipped(p, Path(), named=not p.is_dir())
            continue
        if not p.is_dir():
            yield Input(p, True)
            continue
        # The walk enters no linked folder, so only the root and each file's own entry can be a
        # link: the root is resolved once here, and a file through no link needs no realpath
        # (30 000 files took 0.5 s of realpath calls).
        plain_root = os.path.abspath(p) == os.path.realpath(p)
        for folder, files, linked in _walk(str(p)):
            for name in linked:  # never entered (the walk follows no link), but said: its jobs are not read
                yield _linked_folder(Path(folder) / name)
            for entry in files:
                file = Path(folder) / entry.name
                if _is_link(entry):
                    ok = confined(file, p)
                else:  # what confined() finds for it without resolving anything
                    ok = plain_root or not entry.name.startswith(".")
                yield Input(file, False) if ok else _skipped(file, p)


def _linked_folder(path: Path) -> Diagnostic:
    return Diagnostic(
        "FJ106",
        "skipped: a symbolic link to a folder; flatjob enters no linked folder, so no job under it is read",
        str(path),
        severity=Severity.WARNING,
        hint="commit the folder itself, or name its real path on the command line",
    )


def _walk(top: str) -> Iterator[tuple[str, list[os.DirEntry[str]], list[str]]]:
    """(folder, its YAML files sorted, the names of its linked folders) for top and every folder
    under it that is not hidden or a link, depth first in sorted order: what os.walk gives,
    with the entries it already read."""
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError:  # as os.walk: a folder that cannot be listed is passed over
            continue
        dirs: list[str] = []
        linked: list[str] = []
        files: list[os.DirEntry[str]] = []
        for entry in entries:
            if _is_dir(entry):
                if entry.name.startswith("."):
                    continue
                if _is_link(entry):
                    linked.append(entry.name)
                else:
                    dirs.append(entry.path)
            elif entry.name.endswith(YAML_SUFFIXES):
                files.append(entry)
        yield folder, files, linked
        stack.extend(reversed(dirs))


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _is_link(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_symlink()
    except OSError:
        return True  # unknown: the full check decides


def read_text(path: Path, budget: Budget) -> tuple[str | None, Diagnostic | None]:
    """A regular file's text (UTF-8), within the size limits; failures become FJ103/FJ105."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        return None, Diagnostic("FJ103", f"cannot read: {exc.strerror or exc}", str(path))
    kind = os.fstat(fd).st_mode  # before io.open, which refuses a folder with IsADirectoryError
    if not stat.S_ISREG(kind):
        os.close(fd)
        if stat.S_ISDIR(kind):
            return None, Diagnostic("FJ103", "is a directory", str(path))
        return None, Diagnostic("FJ103", "is not a regular file (a device, pipe or socket); flatjob reads files only", str(path))
    with io.open(fd, "rb", closefd=True) as f:  # noqa: UP020 - opens a descriptor, not a name
        cap = min(budget.limits.file_bytes, max(budget.bytes, 0))
        try:
            raw = f.read(cap + 1)
        except OSError as exc:
            return None, Diagnostic("FJ103", f"cannot read: {exc.strerror or exc}", str(path))
    return decode(raw, str(path), budget, cap)


def decode(raw: bytes, path: str, budget: Budget, cap: int | None = None) -> tuple[str | None, Diagnostic | None]:
    """Bytes read (at most cap + 1 of them) as UTF-8 text, or FJ105 / FJ103 at the position."""
    cap = min(budget.limits.file_bytes, max(budget.bytes, 0)) if cap is None else cap
    if len(raw) > cap:
        return None, _too_big(path, raw, cap, budget)
    budget.bytes -= len(raw)
    try:
        return raw.decode("utf-8-sig"), None
    except UnicodeDecodeError as exc:
        return None, _not_utf8(path, raw, exc)


def _too_big(path: str, raw: bytes, cap: int, budget: Budget) -> Diagnostic:
    """FJ105 at the line and column where reading stopped (the line itself is not quoted)."""
    line = raw.count(b"\n", 0, cap) + 1
    col = cap - (raw.rfind(b"\n", 0, cap) + 1) + 1
    limits = budget.limits
    if cap >= limits.file_bytes:
        what = f"larger than {limits.file_bytes // 1024:,} KiB, the most flatjob reads from one file"
    else:
        budget.spent = True
        what = f"past {limits.run_bytes // 1024:,} KiB read in this run, the most flatjob reads from all its inputs"
    return Diagnostic("FJ105", f"file is {what}; flatjob stops reading here", path, line, col, hint=RUN_SPLIT_HINT if budget.spent else None)


# A file a Windows editor saved as "Unicode" starts with a UTF-16 byte order mark: said as
# "byte 0xff cannot be decoded" at 1:1 with no line shown (its NULs are never quoted).
UTF16_BOMS = {b"\xff\xfe": "utf-16-le", b"\xfe\xff": "utf-16-be"}
UTF16 = "not UTF-8 text: the file is UTF-16 (what Windows editors call \"Unicode\"); save it as UTF-8"


def _not_utf8(path: str, raw: bytes, exc: UnicodeDecodeError) -> Diagnostic:
    """FJ103 at the line and column of the first byte that is not UTF-8."""
    codec = UTF16_BOMS.get(raw[:2])
    if codec is not None:  # its first line, read as UTF-16: what the user sees in the editor
        first = raw[2:4098].decode(codec, "replace").split("\n", 1)[0].rstrip("\r")
        return Diagnostic("FJ103", UTF16, path, 1, 1, source_line=first)
    bom = 3 if raw.startswith(b"\xef\xbb\xbf") else 0  # utf-8-sig counts from after the BOM
    start = exc.start + bom
    begin = max(raw.rfind(b"\n", 0, start) + 1, bom)
    end = raw.find(b"\n", start)
    line_bytes = raw[begin : end if end >= 0 else len(raw)].rstrip(b"\r")
    col = len(raw[begin:start].decode("utf-8", "replace")) + 1
    return Diagnostic(
        "FJ103", f"not UTF-8 text: byte 0x{raw[start:start + 1].hex()} cannot be decoded (save the file as UTF-8)",
        path, raw.count(b"\n", 0, start) + 1, col, source_line=line_bytes.decode("utf-8", "replace"),
    )
