"""`flatjob init` into a folder a stranger prepared: it writes nothing through a link (a
committed `README.md -> ../outside/x` or `.github -> ../outside`), and a refusal writes
nothing at all (review 21, round 10: it wrote outside its folder, and left the scaffold
behind when it refused to render)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .kit import TOKEN, Sandbox, assert_clean_exit, flatjob, run


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


@pytest.mark.parametrize("link", ["dangling-file-link", "folder-link"])
def test_init_writes_nothing_outside_its_folder(tmp_path: Path, link: str) -> None:
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    repo.mkdir()
    outside.mkdir()
    (outside / "keep.txt").write_text("mine\n")
    if link == "dangling-file-link":
        (repo / "README.md").symlink_to("../outside/planted.md")  # a committed link to a file that does not exist (yet)
    else:
        (repo / ".github").symlink_to("../outside")  # a committed link to a folder outside
    before = _tree(outside)
    r = flatjob("init", ".", "--gitops", "none", cwd=repo)
    assert r.code in (0, 1, 2), r.output
    assert _tree(outside) == before, f"init wrote {sorted(set(_tree(outside)) - set(before))} outside {repo}"


# --- 5. flatjob init: a refusal after writing ----------------------------------------------------

def test_init_that_refuses_writes_nothing(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "rendered" / "dev").mkdir(parents=True)
    (repo / "rendered" / "dev" / "kustomization.yaml").write_text("resources: [mine.yaml]\n")
    before = _tree(repo)
    r = flatjob("init", ".", "--gitops", "none", cwd=repo)
    assert r.code == 1, r.output
    # before: exit 1, but the scaffold files were written, and a rerun refused because they existed
    assert _tree(repo) == before, sorted(set(_tree(repo)) - set(before))


# `flatjob init` copied (review of round 13) `git remote get-url origin` verbatim into files meant to be committed
#    and pushed (gitops/*/…yaml, README.md): a clone made with https://user:TOKEN@host/… puts the
#    token in git.
@pytest.mark.parametrize("gitops", ["argocd", "flux"])
def test_init_never_writes_the_credentials_of_the_origin_url(box: Sandbox, gitops: str) -> None:
    repo = box.tmp / "scaffold"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", f"https://x-access-token:{TOKEN}@github.com/o/r.git"], check=True)
    run_ = run([sys.executable, "-m", "flatjob.compiler.cli", "init", ".", "--gitops", gitops], repo)
    assert_clean_exit(run_, 0, 1)
    leaked = sorted(str(p.relative_to(repo)) for p in repo.rglob("*") if ".git" not in p.parts and p.is_file() and TOKEN in p.read_text(errors="replace"))
    assert not leaked, f"token written into {leaked}"
