"""Nothing a pull request holds makes flatjob write, delete or print outside the output folder.

Covers: a namespace that is a path (`../../../escaped`, `/tmp/x`) in a job or an overlay is an
error at its line in lint, compile and krm (before: files written at every level above -o);
links in the output folder (a job folder, a file, the metadata file, the folder itself) are
refused with FJ702 and nothing outside changes (before: files outside overwritten, a file
outside deleted); the metadata file can only make flatjob delete files with flatjob's names
that still carry its header; `compile --check` and the CI report never print what a link
points at (before: a token from .git/config in the PR comment).
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from .kit import JOB, MEASURED, TOKEN, Sandbox, assert_clean_exit, resource_list, run, script

NAMESPACES = ["../../../escaped", "/tmp/flatjob-escaped", "a/b"]  # a path in every form; other bad names: test_lint_rules


def with_namespace(name: str, namespace: str) -> str:
    return JOB.format(name=name).replace(f"  name: {name}\n", f"  name: {name}\n  namespace: {json.dumps(namespace)}\n", 1)


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_a_namespace_that_is_a_path_is_an_error_at_its_line(box: Sandbox, namespace: str) -> None:
    box.job(file="ns.yaml", text=with_namespace("esc", namespace))
    box.freeze()
    for args in (("lint", "jobs"), ("compile", "jobs", "-o", "rendered")):
        run_ = box.flatjob(*args)
        assert_clean_exit(run_, 1)
        assert ("ns.yaml", 5, 14, "error", "FJ305") in run_.findings()
    assert box.untouched() and not box.out.exists()
    assert not os.path.exists("/tmp/flatjob-escaped")
    krm = box.flatjob("krm", stdin=resource_list(with_namespace("esc", namespace)))
    assert_clean_exit(krm, 1)
    assert "[FJ305]" in krm.stdout and "config.kubernetes.io/path" not in krm.stdout  # the job, unchanged; nothing rendered


def test_an_overlay_namespace_that_is_a_path_is_an_error_at_its_line(box: Sandbox) -> None:
    box.job()
    (box.repo / "overlays" / "prod").mkdir(parents=True)
    (box.repo / "overlays" / "prod" / "overlay.yaml").write_text("labels: {env: prod}\nnamespace: ../../../escaped\n")
    box.freeze()
    run_ = box.flatjob("compile", "jobs", "--overlay", "overlays/prod", "-o", "rendered")
    assert_clean_exit(run_, 1)
    assert ("overlay.yaml", 2, 12, "error", "FJ602") in run_.findings()
    assert box.untouched() and not box.out.exists()


@pytest.mark.parametrize("flag", ["--namespace", "--cluster-domain"])
def test_a_namespace_option_that_is_a_path_is_a_usage_error(box: Sandbox, flag: str) -> None:
    box.job()
    box.freeze()
    run_ = box.compile(flag, "../x")
    assert_clean_exit(run_, 2)
    assert box.untouched() and not box.out.exists()


# --- links in the output folder --------------------------------------------------------------


def compiled(box: Sandbox) -> None:
    box.job("alpha")
    box.job("beta")
    assert_clean_exit(box.compile(), 0)


def test_a_job_folder_replaced_by_a_link_is_refused(box: Sandbox) -> None:
    compiled(box)
    (box.jobs / "alpha.yaml").write_text(JOB.format(name="alpha").replace("replicas: 2", "replicas: 3"))
    for p in sorted((box.out / "alpha").iterdir()):
        p.unlink()
    (box.out / "alpha").rmdir()
    os.symlink(box.outside / "dir", box.out / "alpha")
    box.freeze()
    run_ = box.compile()
    assert_clean_exit(run_, 1)
    assert "rendered/alpha: error: is a symbolic link" in run_.output and "[FJ702]" in run_.output
    assert box.untouched()


def test_a_tampered_metadata_file_and_a_linked_folder_delete_nothing_outside(box: Sandbox) -> None:
    compiled(box)
    meta = json.loads((box.out / "flatjob-meta.json").read_text())
    meta["files"] += ["gone/podtemplates.yaml", "../../outside/secret.txt", "/etc/passwd", "gone/../../outside/kustomization.yaml"]
    (box.out / "flatjob-meta.json").write_text(json.dumps(meta))
    os.symlink(box.outside / "dir", box.out / "gone")
    box.freeze()
    run_ = box.compile()
    assert_clean_exit(run_, 1)
    assert "rendered/gone: error: is a symbolic link" in run_.output
    assert box.untouched()


def test_the_metadata_file_deletes_only_what_flatjob_wrote(box: Sandbox) -> None:
    compiled(box)
    (box.out / "README.md").write_text("mine\n")
    (box.out / "notes").mkdir()
    (box.out / "notes" / "podtemplates.yaml").write_text("# mine, and named like flatjob's\n")
    (box.out / "alpha" / "extra.yaml").write_text("mine\n")
    meta = json.loads((box.out / "flatjob-meta.json").read_text())
    meta["files"] += ["README.md", "notes/podtemplates.yaml", "alpha/extra.yaml"]
    (box.out / "flatjob-meta.json").write_text(json.dumps(meta))
    (box.jobs / "beta.yaml").unlink()
    run_ = box.compile()
    assert_clean_exit(run_, 0)
    assert (box.out / "README.md").read_text() == "mine\n"
    assert (box.out / "notes" / "podtemplates.yaml").exists() and (box.out / "alpha" / "extra.yaml").exists()
    assert not (box.out / "beta").exists()


@pytest.mark.parametrize("where", ["file", "metadata", "root"])
def test_check_and_ci_never_print_what_a_link_points_at(box: Sandbox, where: str) -> None:
    compiled(box)
    target = box.repo / ".git" / "config"
    if where == "file":
        (box.out / "alpha" / "podtemplates.yaml").unlink()
        os.symlink(target, box.out / "alpha" / "podtemplates.yaml")
    elif where == "metadata":
        (box.out / "flatjob-meta.json").unlink()
        os.symlink(target, box.out / "flatjob-meta.json")
    else:
        os.rename(box.out, box.repo / "real")
        os.symlink(box.repo / ".git", box.out)
    box.freeze()
    named = {"file": "rendered/alpha/podtemplates.yaml", "metadata": "rendered/flatjob-meta.json", "root": "rendered"}[where]
    for args in (("compile", "jobs", "-o", "rendered", "--check"), ("diff", "jobs", "-o", "rendered"), ("compile", "jobs", "-o", "rendered")):
        run_ = box.flatjob(*args)
        assert_clean_exit(run_, 1)
        assert "[FJ702]" in run_.output and TOKEN not in run_.output
        assert f"{named}: error: is a symbolic link" in run_.output, run_.output  # before issue 21: rendered/rendered
    comment = box.repo / "comment.md"
    ci = run([script("flatjob-ci"), "--jobs", "jobs", "--rendered", "rendered", "--comment", str(comment)], box.repo)
    assert_clean_exit(ci, 1)
    assert TOKEN not in ci.output and TOKEN not in comment.read_text() and "FJ702" in ci.output
    assert f"file={named}," in ci.output
    comment.unlink()
    assert box.untouched()


@pytest.mark.parametrize("kind", ["hard-link", "fifo"])
def test_a_hard_link_or_fifo_at_a_staged_name_is_replaced_never_written_through(box: Sandbox, kind: str) -> None:
    """Every file flatjob writes is a new one at a name of its own (`.x.flatjob-new`, the
    journal's `.tmp`), then renamed: before review 21 round 3 an old file there was opened and
    truncated, so a hard link wrote the PodTemplates outside -o and a FIFO hung the compile."""
    compiled(box)
    (box.jobs / "alpha.yaml").write_text(JOB.format(name="alpha").replace("replicas: 2", "replicas: 3"))
    precious = box.outside / "precious.txt"
    precious.write_text("precious\n")
    for name in ("alpha/.job.yaml.flatjob-new", "alpha/.podtemplates.yaml.flatjob-new", ".flatjob-journal.json.tmp", ".flatjob-meta.json.flatjob-new"):
        at = box.out / name
        os.link(precious, at) if kind == "hard-link" else os.mkfifo(at)
    box.freeze()
    run_ = box.compile()
    assert_clean_exit(run_, 0)
    assert box.untouched() and precious.read_text() == "precious\n"
    assert "kind: PyTorchTrainingJob" in (box.out / "alpha" / "job.yaml").read_text()
    assert (box.out / "alpha" / "podtemplates.yaml").read_text().count("kind: PodTemplate") == 3
    assert not list(box.out.rglob("*.flatjob-new")) and not (box.out / ".flatjob-journal.json.tmp").exists()


def test_a_folder_where_a_file_goes_is_refused(box: Sandbox) -> None:
    compiled(box)
    (box.out / "alpha" / "podtemplates.yaml").unlink()
    (box.out / "alpha" / "podtemplates.yaml").mkdir()
    box.freeze()
    run_ = box.compile("--force")
    assert_clean_exit(run_, 1)
    assert "rendered/alpha/podtemplates.yaml: error: is a folder where flatjob writes a file" in run_.output and "[FJ702]" in run_.output
    assert box.untouched()


@pytest.mark.parametrize("name", [".flatjob-journal.json.tmp", "alpha/.podtemplates.yaml.flatjob-new"])
def test_a_committed_folder_at_a_name_flatjob_removes_is_refused_at_that_name(box: Sandbox, name: str) -> None:
    """Before (hx34): a pull request's folder at the journal's temporary name ended compile in
    `flatjob: cannot write .flatjob-journal.json.tmp: Is a directory`, no code, no path under
    the output folder; at a staged name a journal names, the same from its recovery."""
    compiled(box)
    (box.out / name).mkdir()
    (box.out / name / "keep").write_text("keep\n")
    if name.endswith(".flatjob-new"):
        (box.out / ".flatjob-journal.json").write_text('{"state": "commit", "write": ["alpha/podtemplates.yaml"], "delete": [], "made": []}')
    box.freeze()
    run_ = box.compile()
    assert_clean_exit(run_, 1)
    assert f"rendered/{name}: error: is a folder where flatjob writes a file" in run_.output and "[FJ702]" in run_.output, run_.output
    assert box.untouched() and (box.out / name / "keep").read_text() == "keep\n"


def test_an_output_folder_named_through_parent_folders_is_the_callers(box: Sandbox) -> None:
    """`..` on the command line is the caller's choice; only links inside the repository are refused."""
    box.job()
    (box.repo / "sub").mkdir()
    run_ = run([sys.executable, "-m", "flatjob.compiler.cli", "compile", "../jobs", "-o", "../rendered"], box.repo / "sub")
    assert_clean_exit(run_, 0)
    assert (box.out / "ok" / "podtemplates.yaml").is_file()


@MEASURED
@pytest.mark.parametrize("where", ["alpha/podtemplates.yaml", "flatjob-meta.json"])
def test_a_committed_file_grown_huge_is_not_read_or_printed_whole(box: Sandbox, where: str) -> None:
    """The output folder is a pull request's too: 90 MB of comments in one file took diff and
    compile --check to 383 MiB and printed them all."""
    compiled(box)
    with (box.out / where).open("a") as f:
        f.write(("# " + "x" * 1000 + "\n") * 20_000)  # 20 MB
    for run_ in (box.flatjob("diff", "jobs", "-o", "rendered"), box.compile("--check")):
        assert_clean_exit(run_, 0, 1)
        assert run_.cpu < 1.0 and run_.rss_mib < 100, (run_.cpu, run_.rss_mib)
        assert len(run_.output) < 1_000_000


def test_schema_out_with_a_link_or_a_binary_file_is_a_diagnostic_not_an_internal_error(box: Sandbox) -> None:
    """`flatjob schema -o` with a link in the folder, and `--check` over a file that is not UTF-8,
    ended in `internal error` (review of round 16): FJ702 and stale; nothing goes through the link."""
    out = box.repo / "schemas"
    out.mkdir()
    (out / "crds").symlink_to(box.outside / "dir")
    linked = box.flatjob("schema", "-o", "schemas")
    assert not any((box.outside / "dir").glob("*.yaml.flatjob-new")) and sorted(p.name for p in (box.outside / "dir").iterdir()) == ["podtemplates.yaml"]
    assert_clean_exit(linked, 1, 2)
    (out / "crds").unlink()
    (out / "jobs").mkdir()
    (out / "jobs" / "genericjob.json").write_bytes(b"\xff\xfe")
    assert_clean_exit(box.flatjob("schema", "-o", "schemas", "--check"), 1)


@pytest.mark.parametrize("where", ["Kustomization", "alpha/kustomization.yml"])
def test_a_second_kustomization_file_beside_flatjobs_is_an_error_everywhere(box: Sandbox, where: str) -> None:
    """hx22: a pull request adds `Kustomization` (or `kustomization.yml`) beside a
    kustomization.yaml flatjob writes.  kustomize refuses such a folder ("Found multiple
    kustomization files"), so every sync of the environment stopped, while `compile --check`,
    `diff` and the CI check said "up to date" (flatjob's own files were)."""
    compiled(box)
    (box.out / where).write_text("resources: [evil.yaml]\n", encoding="utf-8")
    box.freeze()
    expected = f"rendered/{where}: error: a second kustomization file beside flatjob's kustomization.yaml"
    for run_ in (box.compile("--check"), box.flatjob("diff", "jobs", "-o", "rendered"), box.compile(), box.compile("--force")):
        assert_clean_exit(run_, 1)
        assert expected in run_.output and "[FJ701]" in run_.output, run_.output[-2000:]
    ci = run([script("flatjob-ci"), "--jobs", "jobs", "--rendered", "rendered", "--overlays", "no-overlays"], box.repo)
    assert ci.code == 1 and "FJ701" in ci.output, ci.output[-2000:]
    assert box.untouched()
