"""find_inputs walks a folder with the entries scandir already read, resolving only links: it
yields what os.walk with a realpath per file gives (same files, same order, same FJ106 skips)
on a tree holding every case a pull request can commit."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flatjob.compiler.errors import Diagnostic
from flatjob.compiler.reading import YAML_SUFFIXES, Input, confined, find_inputs


def _reference(root: str) -> list[tuple[str, str]]:
    """The walk as it was: os.walk sorted, hidden folders skipped, realpath for every file."""
    out = []
    p = Path(root)
    for folder, dirs, files in os.walk(p):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.endswith(YAML_SUFFIXES):
                file = Path(folder) / name
                out.append(("read" if confined(file, p) else "skip", str(file)))
    return out


LINKED_FOLDER = "a symbolic link to a folder"


def _got(root: str) -> list[tuple[str, str]]:
    return [("read", str(f.path)) if isinstance(f, Input) else ("skip", str(f.path)) for f in find_inputs([root])
            if isinstance(f, Input) or (isinstance(f, Diagnostic) and LINKED_FOLDER not in f.message)]


def _tree(base: Path) -> None:
    jobs = base / "work" / "jobs"
    (jobs / "b" / "deep" / "deeper").mkdir(parents=True)
    (jobs / "a").mkdir()
    (jobs / ".hidden").mkdir()
    (base / "outside").mkdir()
    for rel in ("z.yaml", "a.yml", ".dot.yaml", "notes.txt", "b/x.yaml", "b/deep/deeper/y.yaml", "a/k.yaml", ".hidden/h.yaml"):
        (jobs / rel).write_text("a: 1\n")
    (base / "outside" / "o.yaml").write_text("a: 1\n")
    (jobs / "in.yaml").symlink_to("z.yaml")  # stays inside
    (jobs / "out.yaml").symlink_to(base / "outside" / "o.yaml")  # leaves the root
    (jobs / "hid.yaml").symlink_to(".hidden/h.yaml")  # into a hidden folder
    (jobs / "broken.yaml").symlink_to("nowhere.yaml")
    (jobs / "linked-dir").symlink_to(base / "outside")  # a folder link: never entered
    (jobs / "dir.yaml").symlink_to("a")  # a folder link named like a file: not read
    (jobs / "m.yaml").mkdir()  # a folder named like a file: not read
    (base / "alias").symlink_to(jobs)  # the root itself through a link


@pytest.mark.parametrize("root", ["work/jobs", "work/jobs/", "alias", "work"])
def test_the_walk_yields_what_os_walk_with_realpath_yields(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, root: str) -> None:
    _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    want = _reference(root)
    assert want, "the tree holds files to read"
    assert _got(root) == want


def test_a_linked_folder_is_not_entered_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder link was skipped in silence, so `lint jobs/` beside `jobs/current -> v2` read
    nothing under it and said nothing (hx37): it is an FJ106 warning, hidden folders aside."""
    _tree(tmp_path)
    (tmp_path / "work" / "jobs" / ".linked").symlink_to(tmp_path / "outside")  # hidden: silent, as hidden folders are
    monkeypatch.chdir(tmp_path)
    said = [f for f in find_inputs(["work/jobs"]) if isinstance(f, Diagnostic) and LINKED_FOLDER in f.message]
    assert [(str(f.path), f.code, f.severity.value) for f in said] == [("work/jobs/dir.yaml", "FJ106", "warning"), ("work/jobs/linked-dir", "FJ106", "warning")]
