"""docs/gitops.md, followed as a new user would: every command of "From an empty folder" runs
as written, in order, in an empty folder (blocks marked `<!-- needs a cluster -->` excepted).

Needs git and kubectl (the walkthrough looks at the output with `kubectl kustomize`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "gitops.md"
SECTION = "## From an empty folder"
BLOCK = re.compile(r"(?P<mark><!-- needs a cluster -->\n)?```sh\n(?P<body>.*?)```", re.DOTALL)


def walkthrough() -> list[str]:
    """The shell blocks of the walkthrough that the tests run."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    return [m["body"] for m in BLOCK.finditer(text, start, end) if not m["mark"]]


def test_the_walkthrough_has_the_steps() -> None:
    script = "".join(walkthrough())
    for step in ("flatjob init", "cat > jobs/", "flatjob lint", "flatjob compile", "--check", "git commit"):
        assert step in script, step


@pytest.mark.skipif(shutil.which("kubectl") is None or shutil.which("git") is None, reason="needs kubectl and git")
def test_every_command_works_as_written(tmp_path: Path) -> None:
    script = "set -euo pipefail\n" + "".join(walkthrough())
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "GIT_AUTHOR_NAME": "New User", "GIT_AUTHOR_EMAIL": "new@example.com",
        "GIT_COMMITTER_NAME": "New User", "GIT_COMMITTER_EMAIL": "new@example.com",
    }
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert done.stdout.strip() == "6"  # prod: hello-ddp's master and 3 workers, resnet's 2 nodes
    assert "rendered/prod: up to date (2 job(s))" in done.stderr
    repo = tmp_path / "training"
    log = subprocess.run(["git", "-C", str(repo), "log", "--oneline"], capture_output=True, text=True, check=True).stdout
    assert "Training jobs" in log
    tracked = subprocess.run(["git", "-C", str(repo), "ls-files"], capture_output=True, text=True, check=True).stdout.split()
    assert "rendered/prod/training-prod/resnet/podtemplates.yaml" in tracked and "gitops/argocd/prod.yaml" in tracked


def test_a_stale_check_prints_the_compile_that_fixes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """"From then on a change is: edit jobs/, run the two flatjob compile commands": a newcomer
    who forgot one is told by --check the command itself, as typed less --check (options that
    change the output included), and that command brings the folder up to date. "run `flatjob
    compile`" alone, as before, was a usage error when run as written (issue 25)."""
    from click.testing import CliRunner

    from flatjob.compiler.cli import cli

    monkeypatch.chdir(tmp_path)
    run = CliRunner().invoke
    assert run(cli, ["init", "--gitops", "none", "--repo-url", "https://example.com/t.git"]).exit_code == 0
    job = tmp_path / "jobs" / "hello-ddp.yaml"
    text = job.read_text()
    assert "print('rank'" in text
    job.write_text(text.replace("print('rank'", "print('RANK'"))
    check = ["compile", "jobs/", "--overlay", "overlays/prod", "-o", "rendered/prod", "--runtime", "job", "--check"]
    stale = run(cli, check)
    assert stale.exit_code == 1
    last = stale.stderr.strip().splitlines()[-1]
    fix = "flatjob compile jobs/ --overlay overlays/prod -o rendered/prod --runtime job"
    assert last.endswith(f"; run and commit: {fix}"), last
    assert run(cli, fix.split()[1:]).exit_code == 0
    assert run(cli, check).exit_code == 0
