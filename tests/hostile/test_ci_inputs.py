"""The CI surfaces' inputs from a pull request (review of round 16): the command the PR comment
tells a maintainer to run is exactly `flatjob compile` for that environment, shell-quoted and
whole (an overlay folder named `a;touch${IFS}x;b` ran `touch`); the comment step updates only
the bot's own comment; the install step decides from the requirement's form whether it is a
path, never from what the checkout holds."""

from __future__ import annotations

import html
import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from .kit import Sandbox, run, script

markdown_it = pytest.importorskip("markdown_it")

ROOT = Path(__file__).resolve().parents[2]
INJECTED = "a;touch${IFS}PWNED;b"  # a folder name: no slash, nothing else needed


def _fix_commands(comment: str) -> list[str]:
    """The commands the report tells the reviewer to run, as a reader copies them (rendered)."""
    rendered = markdown_it.MarkdownIt("commonmark", {"html": True}).enable("table").render(comment)
    tail = rendered.split("run and commit:", 1)[1]
    return [html.unescape(re.sub(r"<[^>]+>", "", li)) for li in re.findall(r"<li>(.*?)</li>", tail, re.DOTALL)]


@pytest.mark.parametrize("name", [INJECTED, "x" * 150], ids=["shell-syntax", "long-name"])
def test_the_reports_fix_command_runs_exactly_flatjob_compile_for_that_environment(box: Sandbox, name: str) -> None:
    """A pull request adds overlays/<name>/overlay.yaml (an environment not yet rendered, so
    stale).  The comment says "run and commit:" followed by the command; pasted into a shell, it
    must run flatjob with that environment's folders as two words, and nothing else."""
    box.job()
    folder = box.repo / "overlays" / name
    folder.mkdir(parents=True)
    (folder / "overlay.yaml").write_text("namespace: team\n", encoding="utf-8")
    comment = box.tmp / "comment.md"
    done = run([script("flatjob-ci"), "--jobs", "jobs", "--overlays", "overlays", "--rendered", "rendered", "--comment", str(comment)], box.repo)
    assert done.code == 1, done.output[-2000:]
    commands = _fix_commands(comment.read_text(encoding="utf-8"))
    assert len(commands) == 1, commands
    # The reviewer pastes it: a fake `flatjob` records its argv (nothing is compiled).
    bin_dir = box.tmp / "bin"
    bin_dir.mkdir()
    (bin_dir / "flatjob").write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$ARGV_LOG"\n', encoding="utf-8")
    (bin_dir / "flatjob").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "ARGV_LOG": str(box.tmp / "argv")}
    subprocess.run(["sh", "-c", commands[0]], cwd=box.repo, env=env, capture_output=True, timeout=30, check=False)
    assert not (box.repo / "PWNED").exists(), f"the pasted command ran an injected command: {commands[0]!r}"
    argv = (box.tmp / "argv").read_text(encoding="utf-8").splitlines() if (box.tmp / "argv").exists() else []
    assert argv == ["compile", "jobs", "--overlay", f"overlays/{name}", "-o", f"rendered/{name}"], (commands[0], argv)


FAKE_GH = """\
#!/bin/sh
echo "$*" >> "$GH_LOG"
case "$*" in
  *--paginate*)
    filter=""; prev=""
    for a in "$@"; do [ "$prev" = "--jq" ] && filter=$a; prev=$a; done
    jq -r "$filter" "$GH_COMMENTS" ;;
esac
"""


def _action_step(name: str) -> dict:
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    return next(s for s in action["runs"]["steps"] if s.get("name") == name)


@pytest.mark.skipif(shutil.which("jq") is None, reason="the stand-in gh filters with jq (apt-get install jq; .ci/run installs it)")
def test_the_comment_step_updates_only_its_own_comment(tmp_path: Path) -> None:
    """Anyone may comment on a pull request.  A stranger's later comment that starts with
    `<!-- flatjob -->` is the one the step picks (`tail -n 1`), so the bot PATCHes the stranger's
    comment (the report then lives under the stranger's name, who can edit it back) or, refused,
    leaves the bot's own comment with the previous push's report."""
    step = _action_step("Comment on the pull request")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "gh").write_text(FAKE_GH, encoding="utf-8")
    (tmp_path / "bin" / "gh").chmod(0o755)
    comments = [
        {"id": 1, "user": {"login": "github-actions[bot]", "type": "Bot"}, "body": "<!-- flatjob -->\n## flatjob\nprevious push: ❌ stale"},
        {"id": 2, "user": {"login": "mallory", "type": "User"}, "body": "<!-- flatjob -->\n## flatjob\n| prod | `rendered/prod` | ✅ up to date |"},
    ]
    (tmp_path / "comments.json").write_text(json.dumps(comments), encoding="utf-8")
    (tmp_path / "report.md").write_text("<!-- flatjob -->\nreport of this push\n", encoding="utf-8")
    env = {"PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}", "GH_LOG": str(tmp_path / "log"), "GH_COMMENTS": str(tmp_path / "comments.json"),
           "GITHUB_REPOSITORY": "me/training", "PR": "7", "REPORT": str(tmp_path / "report.md"), "GH_TOKEN": "x", "RUNNER_TEMP": str(tmp_path)}
    subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], env=env, capture_output=True, text=True, timeout=30, check=True)
    writes = [c for c in (tmp_path / "log").read_text(encoding="utf-8").splitlines() if "--method" in c]
    assert not any("/comments/2 " in c for c in writes), writes
    assert any("/comments/1 " in c for c in writes), writes


def test_the_install_step_never_installs_a_folder_of_the_checkout_named_like_the_requirement(tmp_path: Path) -> None:
    """`flatjob: flatjob==0.1.0` (a pip requirement).  The step tests `-e "$req"` in the
    checkout first, so a pull request adding a folder `flatjob==0.1.0` (with a setup.py) gets
    its own code installed (and its setup.py run) in place of the release."""
    step = _action_step("Install flatjob")
    checkout, temp, bin_dir = tmp_path / "checkout", tmp_path / "runner", tmp_path / "bin"
    for d in (checkout / "flatjob==0.1.0", temp, bin_dir):
        d.mkdir(parents=True)
    (checkout / "flatjob==0.1.0" / "setup.py").write_text("import os; os.system('touch PWNED')\n", encoding="utf-8")
    (bin_dir / "python").write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$ARGV_LOG"\n', encoding="utf-8")
    (bin_dir / "python").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "ARGV_LOG": str(tmp_path / "argv"), "RUNNER_TEMP": str(temp),
           "GITHUB_ACTION_PATH": str(tmp_path / "action"), **{k: str(v) for k, v in step.get("env", {}).items()},
           "FLATJOB_REQUIREMENT": "flatjob==0.1.0"}
    subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], cwd=checkout, env=env, capture_output=True, timeout=30, check=True)
    argv = (tmp_path / "argv").read_text(encoding="utf-8").splitlines()
    assert argv[-1] == "flatjob==0.1.0", argv


def test_the_fix_command_is_never_cut_into_another_command() -> None:
    """The command was clipped in the middle with an ellipsis, so a long environment name gave a
    command that is not the one to run (review of round 16): shown whole, shell-quoted."""
    from flatjob.compiler.ci import Environment, EnvReport, report

    name = "p" * 120 + ";rm -rf ~;" + "q" * 120
    command = Environment(name, Path(f"overlays/{name}"), Path(f"rendered/{name}")).command(["jobs"])
    env = EnvReport(name, f"rendered/{name}", command, stale_diff="--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    commands = _fix_commands(report([env], 0, 0, 1))
    assert shlex.split(commands[0]) == ["flatjob", "compile", "jobs", "--overlay", f"overlays/{name}", "-o", f"rendered/{name}"], commands[0]
