"""The pull-request workflow: action.yml's steps and their Python (compiler/ci.py), run locally,
and the pre-commit hooks.

Covers: splitting and shortening diffs (per file first, then whole files, with a note of what
was left out; never over the budget); the report stays under GitHub's 65,536-character
comment limit for a huge diff; lint findings as `::error file=...,line=...` workflow
commands; the action's check step run by bash as the runner would (annotations on stdout,
the summary file, status and report outputs, stale output failing the run); its comment step
with a fake `gh` (creates a comment, then updates the same one); .pre-commit-hooks.yaml's
entries are real flatjob commands that pass on a good repository and fail on a stale one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from overlaykit import DDP, write

from flatjob.compiler.ci import COMMENT_LIMIT, MARKER, EnvReport, report, shorten_diff, split_diff

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def file_diff(name: str, lines: int) -> str:
    body = "".join(f"-old {i}\n+new {i}\n" for i in range(lines))
    return f"--- a/{name}\n+++ b/{name}\n@@ -1,{lines} +1,{lines} @@\n{body}"


def test_split_diff_counts_files_and_lines() -> None:
    diff = file_diff("a/podtemplates.yaml", 3) + file_diff("b/job.yaml", 1) + "--- a/gone.yaml\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"
    assert [(f.name, f.counts) for f in split_diff(diff)] == [("a/podtemplates.yaml", (3, 3)), ("b/job.yaml", (1, 1)), ("gone.yaml", (0, 1))]


def test_a_small_diff_is_kept_whole() -> None:
    diff = file_diff("x.yaml", 5)
    assert shorten_diff(diff, 10_000) == diff


def test_long_files_are_cut_with_a_note() -> None:
    diff = file_diff("big/podtemplates.yaml", 2000) + file_diff("small/job.yaml", 2)
    out = shorten_diff(diff, 20_000)
    assert len(out) <= 20_000
    assert "more lines of big/podtemplates.yaml not shown" in out
    assert file_diff("small/job.yaml", 2) in out  # the small file survives whole


def test_when_cutting_is_not_enough_files_are_listed() -> None:
    diff = "".join(file_diff(f"job-{i}/podtemplates.yaml", 200) for i in range(300))
    out = shorten_diff(diff, 30_000)
    assert len(out) <= 30_000
    assert "more changed file(s): job-" in out


def test_report_fits_a_github_comment() -> None:
    huge = "".join(file_diff(f"job-{i}/podtemplates.yaml", 500) for i in range(200))
    envs = [EnvReport("dev", "rendered/dev", "flatjob compile jobs/ --overlay overlays/dev -o rendered/dev", changes=huge),
            EnvReport("prod", "rendered/prod", "flatjob compile jobs/ --overlay overlays/prod -o rendered/prod", stale_diff=huge, files=(400, 2))]
    text = report(envs, 1, 2, 200)
    assert len(text) <= COMMENT_LIMIT and text.startswith(MARKER)
    assert "| prod | `rendered/prod` | ❌ stale: 400 file(s) to write, 2 to delete |" in text
    assert "- `flatjob compile jobs/ --overlay overlays/prod -o rendered/prod`" in text
    assert text.count("<details>") == 2 and "more changed file(s)" in text


def test_report_with_hostile_names_fits_and_names_what_it_leaves_out() -> None:
    """150 stale environments named with 200 characters (the fix commands and the table were
    outside the budget: 191 KB, review 21 round 5 #2): everything counts, and every diff shown
    holds its pod templates."""
    envs = [EnvReport(f"{i:03d}" + "\x01|`<!--" * 40, f"rendered/{i:03d}" + "x" * 200, "flatjob compile jobs -o " + "y" * 300,
                      stale_diff=file_diff(f"job-{i}/podtemplates.yaml", 40), files=(1, 0)) for i in range(150)]
    text = report(envs, 0, 0, 1)
    assert len(text.encode("utf-16-le")) // 2 + text.count("\n") <= COMMENT_LIMIT
    assert "... and 120 more environment(s), 120 of them failing" in text and "- ... and 140 more" in text
    shown = text.count("<details>")
    assert shown >= 20 and text.count("podtemplates.yaml\n@@") == shown and f"... and {150 - shown} more environment(s)" in text


# --- the action's steps, run by bash as the runner does ----------------------------------


def action_step(name: str) -> dict:
    steps = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))["runs"]["steps"]
    return next(s for s in steps if s.get("name") == name)


def user_repo(tmp: Path) -> Path:
    repo = tmp / "repo"
    write(repo, {"jobs/ddp.yaml": DDP, "overlays/dev/overlay.yaml": "namespace: training-dev\n", "overlays/prod/overlay.yaml": "namespace: training-prod\n"})
    for env in ("dev", "prod"):
        subprocess.run([str(BIN / "flatjob"), "compile", "jobs", "--overlay", f"overlays/{env}", "-o", f"rendered/{env}"], cwd=repo, check=True, capture_output=True)
    return repo


def run_check_step(repo: Path, tmp: Path, **inputs: str) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """The check step's script, with the env the runner sets from the step's inputs."""
    step = action_step("Lint, compile --check, report")
    (tmp / "runner").mkdir(exist_ok=True)
    env = {
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp),
        "JOBS": inputs.get("jobs", "jobs"), "OVERLAYS": inputs.get("overlays", "overlays"),
        "RENDERED": inputs.get("rendered", "rendered"), "SARIF": inputs.get("sarif", "false"),
        "GITHUB_OUTPUT": str(tmp / "runner" / "output"), "GITHUB_STEP_SUMMARY": str(tmp / "runner" / "summary.md"),
        "RUNNER_TEMP": str(tmp / "runner"),
    }
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=repo, env=env, capture_output=True, text=True, timeout=120, check=False)
    outputs = dict(line.split("=", 1) for line in (tmp / "runner" / "output").read_text(encoding="utf-8").splitlines())
    return done, outputs


def test_check_step_on_a_good_repository(tmp_path: Path) -> None:
    repo = user_repo(tmp_path)
    done, outputs = run_check_step(repo, tmp_path, sarif="true")
    assert done.returncode == 0, done.stderr
    assert outputs["status"] == "0"
    summary = (tmp_path / "runner" / "summary.md").read_text(encoding="utf-8")
    assert "| dev | `rendered/dev` | ✅ up to date |" in summary and "| prod | `rendered/prod` | ✅ up to date |" in summary
    assert Path(outputs["report"]).read_text(encoding="utf-8") == summary
    assert yaml.safe_load((tmp_path / "runner" / "flatjob.sarif").read_text(encoding="utf-8"))["version"] == "2.1.0"


def test_check_step_annotates_and_fails(tmp_path: Path) -> None:
    repo = user_repo(tmp_path)
    (repo / "jobs" / "ddp.yaml").write_text(DDP.replace("replicas: 3", "replicas: 4").replace("command: [sleep, inf]", "comand: [sleep, inf]"), encoding="utf-8")
    done, outputs = run_check_step(repo, tmp_path)
    assert done.returncode == 0  # the step records the status; the action's last step fails the job
    assert outputs["status"] == "1"
    assert done.stdout == "::error file=jobs/ddp.yaml,line=36,col=15,title=FJ400 k8s-unknown-field::unknown field 'comand' in Container (did you mean 'command'?)\n"
    summary = (tmp_path / "runner" / "summary.md").read_text(encoding="utf-8")
    assert "Lint: 1 error(s)" in summary and "compile error(s)" in summary


def test_check_step_reports_stale_output(tmp_path: Path) -> None:
    repo = user_repo(tmp_path)
    (repo / "overlays" / "prod" / "overlay.yaml").write_text("namespace: training-prod\nlabels: {env: prod}\n", encoding="utf-8")
    done, outputs = run_check_step(repo, tmp_path)
    assert outputs["status"] == "1" and done.stdout == ""
    summary = (tmp_path / "runner" / "summary.md").read_text(encoding="utf-8")
    assert "| dev | `rendered/dev` | ✅ up to date |" in summary
    assert "| prod | `rendered/prod` | ❌ stale:" in summary
    assert "+    env: prod" in summary and "`flatjob compile jobs --overlay overlays/prod -o rendered/prod`" in summary


def test_check_step_passes_a_repository_whose_last_job_was_removed(tmp_path: Path) -> None:
    """Removing the last job is a reviewable change: lint does not refuse the empty jobs folder
    (FJ102), and each environment's check says its rendered jobs are stale until a compile
    --allow-empty prunes them, then up to date (review hx26: FJ102 failed CI with no way out)."""
    repo = user_repo(tmp_path)
    (repo / "jobs" / "ddp.yaml").unlink()
    done, outputs = run_check_step(repo, tmp_path)
    assert done.stdout == "" and outputs["status"] == "1"
    summary = (tmp_path / "runner" / "summary.md").read_text(encoding="utf-8")
    assert "Lint: 0 error(s), 0 warning(s) in 0 job(s)." in summary
    assert "| dev | `rendered/dev` | ❌ stale:" in summary
    for env in ("dev", "prod"):
        subprocess.run([str(BIN / "flatjob"), "compile", "jobs", "--overlay", f"overlays/{env}", "-o", f"rendered/{env}", "--allow-empty"], cwd=repo, check=True, capture_output=True)
    done, outputs = run_check_step(repo, tmp_path)
    assert (done.stdout, outputs["status"]) == ("", "0"), done.stderr
    summary = (tmp_path / "runner" / "summary.md").read_text(encoding="utf-8")
    assert "| dev | `rendered/dev` | ✅ up to date |" in summary and "| prod | `rendered/prod` | ✅ up to date |" in summary


FAKE_GH = """\
#!/bin/sh
echo "$*" >> "$GH_LOG"
case "$*" in
  *--paginate*) cat "$GH_COMMENTS" 2>/dev/null ;;
  *"body=@$GH_REFUSE") exit 1 ;;
esac
"""


def _comment_step(tmp_path: Path, refuse: str = "") -> Callable[[], object]:
    """The comment step, run by bash with a fake `gh` that fails for a body of `refuse`."""
    step = action_step("Comment on the pull request")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "gh").write_text(FAKE_GH, encoding="utf-8")
    (tmp_path / "bin" / "gh").chmod(0o755)
    (tmp_path / "report.md").write_text(MARKER + "\nreport\n", encoding="utf-8")
    env = {"PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}", "GH_LOG": str(tmp_path / "log"), "GH_COMMENTS": str(tmp_path / "ids"),
           "GITHUB_REPOSITORY": "me/training", "PR": "7", "REPORT": str(tmp_path / "report.md"), "GH_TOKEN": "x",
           "RUNNER_TEMP": str(tmp_path), "GH_REFUSE": refuse}
    return lambda: subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], env=env, capture_output=True, text=True, timeout=30, check=True)


def test_comment_step_creates_then_updates_one_comment(tmp_path: Path) -> None:
    run = _comment_step(tmp_path)
    run()
    (tmp_path / "ids").write_text("123\n", encoding="utf-8")  # what the --jq filter printed: our earlier comment
    run()
    calls = (tmp_path / "log").read_text(encoding="utf-8").splitlines()
    assert calls[1] == f"api --method POST repos/me/training/issues/7/comments -F body=@{tmp_path / 'report.md'}"
    assert calls[3] == f"api --method PATCH repos/me/training/issues/comments/123 -F body=@{tmp_path / 'report.md'}"
    assert 'startswith("<!-- flatjob -->")' in calls[0]


def test_a_refused_report_replaces_the_old_comment_with_a_note(tmp_path: Path) -> None:
    """GitHub refusing the body (too long, review 21 round 5 #2) left the previous push's
    comment on the pull request: now it is replaced by a short note."""
    run = _comment_step(tmp_path, refuse=str(tmp_path / "report.md"))
    (tmp_path / "ids").write_text("123\n", encoding="utf-8")
    run()
    calls = (tmp_path / "log").read_text(encoding="utf-8").splitlines()
    assert calls[2] == f"api --method PATCH repos/me/training/issues/comments/123 -F body=@{tmp_path / 'flatjob-comment-short.md'}"
    note = (tmp_path / "flatjob-comment-short.md").read_text(encoding="utf-8")
    assert note.startswith(MARKER) and "job summary" in note


def test_action_declares_its_inputs_and_permissions_story() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    assert action["runs"]["using"] == "composite"
    assert set(action["inputs"]) == {"jobs", "overlays", "rendered", "comment", "sarif", "python-version", "flatjob"}
    upload = next(s for s in action["runs"]["steps"] if s.get("uses", "").startswith("github/codeql-action/upload-sarif"))
    assert upload["if"] == "inputs.sarif == 'true'"
    assert action["runs"]["steps"][-1]["run"] == 'exit "${STATUS:-1}"'


# --- pre-commit -------------------------------------------------------------------------


@pytest.mark.parametrize("hook", ["flatjob-lint", "flatjob-compile-check"])
def test_pre_commit_hooks(tmp_path: Path, hook: str) -> None:
    hooks = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))}
    spec = hooks[hook]
    assert spec["language"] == "python" and spec["pass_filenames"] is False
    repo = tmp_path / "repo"
    write(repo, {"jobs/ddp.yaml": DDP})
    subprocess.run([str(BIN / "flatjob"), "compile", "jobs/", "-o", "rendered/"], cwd=repo, check=True, capture_output=True)
    argv = [str(BIN / spec["entry"].split()[0]), *spec["entry"].split()[1:], *spec["args"]]
    assert subprocess.run(argv, cwd=repo, capture_output=True, timeout=60, check=False).returncode == 0
    (repo / "jobs" / "ddp.yaml").write_text(DDP.replace("replicas: 3", "replicas: x"), encoding="utf-8")
    assert subprocess.run(argv, cwd=repo, capture_output=True, timeout=60, check=False).returncode == 1


def git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


def check_against_main(repo: Path):
    """The CI check run in `repo` (it names folders as the user does), diffing against main."""
    from flatjob.compiler.ci import check, environments

    cwd = os.getcwd()
    os.chdir(repo)
    try:
        return check(["jobs"], environments(Path("overlays"), Path("rendered")), base="main")
    finally:
        os.chdir(cwd)


def test_report_shows_the_rendered_changes_against_the_base_branch(tmp_path: Path) -> None:
    repo = user_repo(tmp_path)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    (repo / "overlays" / "prod" / "overlay.yaml").write_text("namespace: training-prod\nlabels: {env: prod}\n", encoding="utf-8")
    subprocess.run([str(BIN / "flatjob"), "compile", "jobs", "--overlay", "overlays/prod", "-o", "rendered/prod"], cwd=repo, check=True, capture_output=True)
    run = check_against_main(repo)
    assert not run.failed
    prod = next(e for e in run.envs if e.name == "prod")
    dev = next(e for e in run.envs if e.name == "dev")
    assert dev.changes == "" and "+    env: prod" in prod.changes
    text = report(run.envs, 0, 0, run.jobs)
    assert "<summary>prod: rendered changes:" in text and "dev: rendered changes" not in text


@pytest.mark.parametrize("base", ["mian", "origin/main", "--output=x"])
def test_a_base_git_does_not_know_is_said_not_shown_as_no_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, base: str) -> None:
    """`flatjob-ci --base mian` (or a base branch not fetched) gave a report with no rendered
    diff, which reads as "nothing changed", and said nothing (hx37)."""
    from click.testing import CliRunner

    from flatjob.compiler.ci import main

    repo = user_repo(tmp_path)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    monkeypatch.chdir(repo)
    unknown = CliRunner().invoke(main, ["--base", base], catch_exceptions=False)
    assert unknown.exit_code == 0, unknown.output
    assert f"flatjob-ci: --base {base}: git knows no such commit here (misspelt, or not fetched); the report shows no rendered diff" in unknown.stderr
    known = CliRunner().invoke(main, ["--base", "main"], catch_exceptions=False)
    assert known.exit_code == 0 and "git knows no such commit" not in known.stderr


def test_a_diff_far_under_the_limit_is_shown_whole(tmp_path: Path) -> None:
    """Before: a section given exactly what it needed reserved 28 for a code fence of 16, so a
    6 KB comment cut both files and the changed worker image was in neither (review round 6 #1)."""

    repo = tmp_path / "repo"
    write(repo, {"jobs/ddp.yaml": DDP})
    flatjob = [str(BIN / "flatjob"), "compile", "jobs", "-o", "rendered"]
    subprocess.run(flatjob, cwd=repo, check=True, capture_output=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    master, worker = DDP.split("    - type: worker")
    padding = "".join(f'                - {{name: V{i}, value: "{i}"}}\n' for i in range(40))  # 40 more env variables
    master = master.replace('                - {name: B, value: "2"}\n', '                - {name: B, value: "2"}\n' + padding)
    (repo / "jobs" / "ddp.yaml").write_text(master + "    - type: worker" + worker.replace("pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime", "evil.example/miner:1"))
    subprocess.run(flatjob, cwd=repo, check=True, capture_output=True)
    run = check_against_main(repo)
    text = report(run.envs, 0, 0, run.jobs)
    assert len(text) < 12_000
    assert "+      image: evil.example/miner:1" in text and "not shown" not in text and "more changed file(s)" not in text


def pod_env(name: str, lines: int = 3, added: bool = False) -> EnvReport:
    """An environment whose pull request changes (or, `added`, adds) its one pod template."""
    path = f"rendered/{name}/train/podtemplates.yaml"
    old = "--- /dev/null\n" if added else f"--- a/{path}\n"
    diff = f"diff --git a/{path} b/{path}\n{old}+++ b/{path}\n@@ -1 +1,{lines} @@\n" + "".join(f"+  image: {name}-{i}\n" for i in range(lines))
    return EnvReport(name, f"rendered/{name}", "c", changes=diff, root=f"rendered/{name}", written=frozenset({"train/podtemplates.yaml"}))


def test_a_three_line_diff_of_one_file_is_shown() -> None:
    """Before: the code block held only '... and 1 more changed file(s): train/podtemplates.yaml'."""
    text = report([pod_env("prod")], 0, 0, 1)
    assert "+  image: prod-0\n+  image: prod-1\n+  image: prod-2\n```" in text and "more changed file(s)" not in text


def test_a_section_given_what_it_needs_is_shown_whole_and_never_more_than_its_budget() -> None:
    from flatjob.compiler.ci import Section, _size, section

    fence = "".join(f"-old {i}\n+new ````` {i}\n" for i in range(30))  # backticks: a longer fence
    diff = file_diff("t/podtemplates.yaml", 40) + file_diff("t/job.yaml", 3) + f"--- a/t/x.yaml\n+++ b/t/x.yaml\n@@ -1,30 +1,30 @@\n{fence}"
    files = split_diff(diff)
    cases = [Section("one", (files[0],)), Section("three", tuple(files)),
             Section("foreign", (*files, *(replace(f, name=f"notes/{f.name}", ours=False) for f in files)))]
    for s in cases:
        whole = section(s, 10**12)
        need = _size(whole)
        assert section(s, need) == whole, s.title
        for budget in range(need - 1, 0, -7):
            assert _size(section(s, budget)) <= budget, (s.title, budget)


def test_environments_are_not_dropped_while_the_comment_has_room() -> None:
    """Before: sections stopped at budget // 800 whatever they needed, and the table at 30 rows:
    80 environments a pull request adds before prod left prod named nowhere in a 16 KB comment
    (review round 6 #2)."""
    from flatjob.compiler.ci import _size

    text = report([pod_env(f"a{i:02d}", added=True) for i in range(80)] + [pod_env("prod")], 0, 0, 1)
    assert _size(text) < 25_000 and text.count("<details>") == 81 and "+  image: prod-2\n" in text
    assert "not shown" not in text


def test_environments_left_out_are_named_and_the_base_branchs_come_first() -> None:
    """When the sections do not all fit, an environment changing files the base branch has is
    shown before those a pull request adds, and every one left out is named."""
    from flatjob.compiler.ci import _size

    envs = [pod_env(f"a{i:02d}", lines=400, added=True) for i in range(90)] + [pod_env("prod", lines=400)]
    text = report(envs, 0, 0, 1)
    assert _size(text) <= COMMENT_LIMIT - 2048
    assert text.index("<summary>prod: rendered changes") < text.index("<summary>a00: rendered changes")
    assert "+  image: prod-0\n" in text
    shown = text.count("<details>")
    assert 60 <= shown < 91
    note = text[text.rindex("... and "):]
    assert note.startswith(f"... and {91 - shown} more environment(s) with changes")
    left_out = [f"a{i:02d}" for i in range(shown - 1, 90)]
    assert all(f"`{name}`" in note for name in left_out[:20]) and (len(left_out) <= 20 or note.rstrip().endswith(", ..."))


@pytest.mark.parametrize("requirement", [".", "tools/flatjob"])
def test_install_step_resolves_a_relative_requirement_in_the_checkout(tmp_path: Path, requirement: str) -> None:
    """The install step runs pip outside the checkout (a pip/ folder there would be imported):
    a requirement that is a path in the checkout (`flatjob: .`, `tools/flatjob`) must reach pip
    made absolute first (review of the round-3 fixes: only ./x and ../x were)."""
    steps = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))["runs"]["steps"]
    script = next(s for s in steps if s.get("name") == "Install flatjob")["run"]
    repo, runner, fake = tmp_path / "repo", tmp_path / "runner", tmp_path / "bin"
    for d in (repo / "tools" / "flatjob", runner, fake):
        d.mkdir(parents=True)
    log = tmp_path / "pip.log"
    (fake / "python").write_text(f'#!/bin/sh\nprintf "%s\\n" "$PWD" "$@" > {log}\n', encoding="utf-8")
    (fake / "python").chmod(0o755)
    env = {"PATH": f"{fake}{os.pathsep}{os.environ['PATH']}", "RUNNER_TEMP": str(runner),
           "GITHUB_ACTION_PATH": str(ROOT), "FLATJOB_REQUIREMENT": requirement}
    subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=repo, env=env, check=True)
    cwd, *args = log.read_text(encoding="utf-8").splitlines()
    given = args[-1]
    resolved = (Path(cwd) / given).resolve()
    assert resolved == (repo / requirement).resolve(), f"pip got {given!r} in {cwd}: {resolved}, not the checkout's {requirement!r}"
