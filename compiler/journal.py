"""Change an output folder as one transaction: lock, recover, stage, commit, rename, prune.

    lock the folder (flock on its own descriptor: no lock file to leave behind)
    recover: a journal left by a killed run is finished (committed) or undone (staging)
    journal {state: staging, write, delete, made} -> stage every new file as .<name>.flatjob-new
    journal {state: commit}  -> rename each staged file over its target, delete, prune folders,
                                the metadata last -> remove the journal

Each journal is written to a temporary name and renamed into place, so it is whole or
absent.  Killed before the commit, the folder still holds the old tree (plus staged files
and folders the journal names, which the next run removes); killed after it, the next run
renames what is left.  Either way the next run reports it (FJ705) before doing its own work.
`compile --check` and `diff` take the lock shared and change nothing; a journal they find
makes the folder stale.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .keys import GENERATED_HEADER
from .outdir import SafeDir
from .output import (
    KUSTOMIZATION,
    META_FILE,
    TreeChanges,
    committed_json,
    folders_of,
    owned,
    plan_changes,
    staged_name,
)

JOURNAL = ".flatjob-journal.json"
JOURNAL_TMP = JOURNAL + ".tmp"
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")  # Linux: 122 random bits, new at every boot
LOCK_WAIT = 600.0  # seconds a compile waits for another one writing the same folder
JOURNAL_BYTES = 16 * 1024 * 1024  # a journal of the largest run the limits allow is ~3 MB; a bigger one is not flatjob's
_HEADER = GENERATED_HEADER.encode()


class Busy(Exception):
    """Another flatjob process held the folder's lock for longer than the wait."""


@dataclass
class Session:
    """A locked output folder: what recovery did, and the changes to plan and apply."""

    dir: SafeDir
    exists: bool
    notes: list[str] = field(default_factory=list)  # recovery, for the user (FJ705)
    interrupted: bool = False  # read-only: a journal shows an unfinished compile
    foreign: bool = False  # read-only: a journal this machine did not write (from git)

    def plan(self, desired: dict[str, str]) -> TreeChanges:
        return plan_changes(self.dir, desired)

    def apply(self, changes: TreeChanges) -> None:
        apply_changes(self.dir, changes)


@contextmanager
def session(root: Path, write: bool, on_wait: Callable[[], None] = lambda: None, wait: float = LOCK_WAIT) -> Iterator[Session]:
    """Open and lock `root` (exclusively to write, shared to read); recover when writing.

    Raises outdir.LinkFound when the root is a link, Busy when the lock does not come.
    """
    d = SafeDir(root)
    try:
        exists = d.open_root(create=write)
        s = Session(d, exists)
        if exists:
            _lock(d, exclusive=write, on_wait=on_wait, wait=wait)
            if write:
                s.notes = recover(d)
            elif d.exists(JOURNAL):
                journal = _valid(d.read(JOURNAL, JOURNAL_BYTES) or b"", here(d))
                s.interrupted, s.foreign = journal is not None, journal is None
        yield s
    finally:
        d.close()  # closing the root's descriptor releases the lock


def _lock(d: SafeDir, exclusive: bool, on_wait: Callable[[], None], wait: float) -> None:
    mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    try:
        fcntl.flock(d.fileno(), mode | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        on_wait()
    deadline = time.monotonic() + wait
    while True:
        time.sleep(0.02)
        try:
            fcntl.flock(d.fileno(), mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise Busy(str(d.root)) from None


# --- the transaction ---------------------------------------------------------------------


def apply_changes(d: SafeDir, changes: TreeChanges) -> None:
    """Stage, commit, rename, delete and prune; undone if staging fails, finishable if killed after."""
    if changes.empty:
        return
    d.open_root(create=True)
    write = sorted(changes.write)
    folders = {f for rel in write for f in folders_of(rel)}
    made = sorted((f for f in folders if d.folder(f) < 0), key=lambda f: (f.count("/"), f))  # each looked up once
    journal = {"version": 1, "state": "staging", "write": write, "delete": sorted(changes.delete), "made": made, "here": here(d)}
    _write_journal(d, journal)
    try:
        for rel in write:
            d.write(staged_name(rel), changes.write[rel].encode("utf-8"))
    except BaseException:
        _undo(d, journal)
        raise
    _write_journal(d, {**journal, "state": "commit"})
    _finish(d, journal)


def _write_journal(d: SafeDir, journal: dict[str, Any]) -> None:
    d.write(JOURNAL_TMP, (json.dumps(journal, sort_keys=True) + "\n").encode())
    d.rename(JOURNAL_TMP, JOURNAL)


def _finish(d: SafeDir, journal: dict[str, Any]) -> int:
    """Rename the staged files into place (the metadata last), delete, prune; drop the journal.

    A staged manifest that does not start with flatjob's header is not flatjob's: it is
    removed, never renamed into place.
    """
    done = 0
    write = [rel for rel in journal["write"] if rel != META_FILE]
    for rel in write:
        staged = staged_name(rel)
        raw = d.read(staged)
        if raw is not None and not raw.startswith(_HEADER):
            d.unlink(staged)
            continue
        done += _rename(d, staged, rel)
    for rel in journal["delete"]:
        raw = d.read(rel)
        if raw is not None and raw.startswith(_HEADER) and d.unlink(rel):
            done += 1
    # Every folder a deleted file was in, also when a killed run already deleted the file:
    # a folder is removed only when empty.
    for folder in sorted({f for rel in journal["delete"] for f in folders_of(rel)}, key=lambda f: (-f.count("/"), f)):
        d.remove_empty(folder)
    if META_FILE in journal["write"]:
        done += _rename(d, staged_name(META_FILE), META_FILE)
    d.unlink(JOURNAL)
    return done


def _rename(d: SafeDir, staged: str, rel: str) -> int:
    """Move a staged file into place; 0 when a killed run already did (it is gone)."""
    try:
        d.rename(staged, rel)
    except FileNotFoundError:
        return 0
    return 1


def _undo(d: SafeDir, journal: dict[str, Any]) -> int:
    """Remove what staging made (files, then the folders it created); drop the journal."""
    removed = sum(d.unlink(staged_name(rel)) for rel in journal["write"])
    for folder in sorted(journal["made"], key=lambda f: -f.count("/")):
        d.remove_empty(folder)
    d.unlink(JOURNAL)
    return removed


# --- recovery ----------------------------------------------------------------------------


def recover(d: SafeDir) -> list[str]:
    """Finish or undo what a killed compile left; one note per thing done."""
    notes = []
    if d.unlink(JOURNAL_TMP):
        notes.append(f"removed {JOURNAL_TMP}, left by a compile killed while starting to write")
    raw = d.read(JOURNAL, JOURNAL_BYTES)
    if raw is None:
        return notes
    journal = _valid(raw, here(d))
    if journal is None:
        staged = _names(raw)
        removed = sum(d.unlink(staged_name(rel)) for rel in staged)
        for folder in sorted({f for rel in staged for f in folders_of(rel)}, key=lambda f: (-f.count("/"), f)):
            d.remove_empty(folder)  # left empty by the staged files just removed
        d.unlink(JOURNAL)
        return [*notes, f"removed {JOURNAL} and the {removed} staged file(s) it names: not a journal a compile wrote in this folder on this machine since it started (committed to git?); nothing it names was put in place"]
    if journal["state"] == "commit":
        n = _finish(d, journal)
        return [*notes, f"finished a compile that was killed while writing: {n} file(s) renamed or deleted; the folder now holds that compile's output"]
    n = _undo(d, journal)
    return [*notes, f"undid a compile that was killed before its output was complete: {n} staged file(s) removed; the folder holds the output from before it"]


def here(d: SafeDir) -> dict[str, Any]:
    """Where and when a journal is written: the folder's device and inode, and the boot.

    A journal is acted on only where it was written: a killed compile's, on the same machine
    since it started, in the same folder.  One committed to git (with staged files of its own)
    was written anywhere but here, and would otherwise put its files in place unseen by
    `flatjob diff` (before issue 21: a privileged Pod, never pruned).  A checkout makes new
    inodes, and the boot id is 122 random bits, so a pull request cannot forge this.
    """
    st = os.fstat(d.fileno())
    try:
        boot = BOOT_ID.read_text(encoding="ascii").strip()
    except OSError:  # not Linux: the folder alone
        boot = ""
    return {"boot": boot, "device": st.st_dev, "inode": st.st_ino}


def _names(raw: bytes) -> list[str]:
    """The files a journal (any journal) says it staged, limited to flatjob's own names."""
    data = committed_json(raw)
    write = data.get("write") if isinstance(data, dict) else None
    return [x for x in write if isinstance(x, str) and (owned(x) or x == META_FILE)] if isinstance(write, list) else []


def _valid(raw: bytes, where: dict[str, Any]) -> dict[str, Any] | None:
    """A journal read from disk, if it was written here (`here`): only flatjob's own names survive."""
    if len(raw) > JOURNAL_BYTES:  # never one flatjob wrote: a committed one is anyone's
        return None
    data = committed_json(raw)
    if not isinstance(data, dict) or data.get("state") not in ("staging", "commit") or data.get("here") != where:
        return None
    names = lambda key, ok: [x for x in data.get(key) or [] if isinstance(x, str) and ok(x)]  # noqa: E731
    return {
        "state": data["state"],
        "write": names("write", lambda x: owned(x) or x == META_FILE),
        "delete": names("delete", owned),
        "made": names("made", lambda x: owned(f"{x}/{KUSTOMIZATION}")),  # a job or namespace folder
    }
