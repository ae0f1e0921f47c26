"""`flatjob compile` and `flatjob diff` against a real output folder (tmp_path).

Covers:
- atomic writes: a file is replaced by rename, never rewritten in place; a write that fails
  half-way leaves no temporary file and no partial file; unchanged files are not touched;
- a failed compile leaves OUT byte for byte (and mtime for mtime) untouched;
- pruning: files of jobs that disappeared go, with their emptied folders; files flatjob did
  not write stay; a job named like a namespace shares that folder without losing either;
- FJ701: a file flatjob did not write where it must write is refused, unless --force;
- --check writes nothing, prints a unified diff and exits 1 when stale, 0 when current;
- `flatjob diff` shows the change and writes nothing; a long diff is cut, naming each file and
  the lines left out;
- the metadata file (version, inputs and their digest, files) and the one-line header;
- an output folder inside a source folder is a fixed point (compile twice = no change);
- `kubectl kustomize OUT` accepts the output (skipped without kubectl).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result
from goldenkit import read_tree

from flatjob.compiler.cli import cli
from flatjob.compiler.keys import GENERATED_HEADER
from flatjob.compiler.outdir import SafeDir
from flatjob.compiler.output import META_FILE
from flatjob.compiler.version import __version__

JOB = """\
apiVersion: batch.tensorstack.dev/v1beta1
kind: PyTorchTrainingJob
metadata:
  name: {name}
spec:
  replicaSpecs:
    - type: worker
      replicas: {replicas}
      template:
        spec:
          containers:
            - name: python
              image: pytorch/pytorch:2.4.0
              command: [python, train.py]
"""
BROKEN = JOB.replace("replicas: {replicas}", "replicas: {replicas}\n      replica: 1")


def write_job(src: Path, name: str, replicas: int = 2, template: str = JOB) -> Path:
    path = src / f"{name}.yaml"
    path.write_text(template.format(name=name, replicas=replicas), encoding="utf-8")
    return path


def flatjob(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under root with its bytes and mtime, and every folder."""
    out: dict[str, tuple[bytes, int]] = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        out[rel] = (p.read_bytes(), p.stat().st_mtime_ns) if p.is_file() else (b"<dir>", 0)
    return out


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Path]:
    """A source folder with two jobs, compiled once into OUT."""
    src, out = tmp_path / "jobs", tmp_path / "rendered"
    src.mkdir()
    write_job(src, "alpha")
    write_job(src, "beta")
    res = flatjob("compile", str(src), "-o", str(out))
    assert res.exit_code == 0, res.output
    return src, out


# --- atomic writes -----------------------------------------------------------------------


def test_no_temporary_files_are_left(project: tuple[Path, Path]) -> None:
    _, out = project
    leftovers = [p.name for p in out.rglob("*") if p.name.startswith(".") or p.suffix == ".tmp"]
    assert leftovers == []


def test_changed_file_is_replaced_not_rewritten(project: tuple[Path, Path]) -> None:
    src, out = project
    pods = out / "alpha" / "podtemplates.yaml"
    with pods.open("rb") as reader:  # a reader holding the old file keeps seeing it whole
        old_text, old_inode = reader.read(), os.fstat(reader.fileno()).st_ino
        write_job(src, "alpha", replicas=3)
        assert flatjob("compile", str(src), "-o", str(out)).exit_code == 0
        reader.seek(0)
        assert reader.read() == old_text
    assert pods.stat().st_ino != old_inode
    assert b"alpha-worker-2" in pods.read_bytes()


def test_unchanged_files_are_not_touched(project: tuple[Path, Path]) -> None:
    src, out = project
    before = snapshot(out)
    res = flatjob("compile", str(src), "-o", str(out))
    assert res.exit_code == 0 and "0 file(s) written" in res.output
    assert snapshot(out) == before


def test_failed_write_leaves_no_partial_or_temp_file(
    project: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that fails half-way (disk full) undoes the staging: the old tree, nothing else."""
    src, out = project
    before = snapshot(out)
    real_write = SafeDir.write
    calls: list[str] = []

    def flaky_write(self: SafeDir, rel: str, data: bytes) -> None:
        calls.append(rel)
        if len([c for c in calls if c.endswith(".flatjob-new")]) == 2:
            raise OSError(28, "No space left on device")
        real_write(self, rel, data)

    write_job(src, "alpha", replicas=3)
    write_job(src, "gamma")
    monkeypatch.setattr(SafeDir, "write", flaky_write)
    res = flatjob("compile", str(src), "-o", str(out))
    assert res.exit_code == 1 and "No space left on device" in res.output
    assert snapshot(out) == before


def test_written_files_follow_the_umask(project: tuple[Path, Path]) -> None:
    _, out = project
    mask = os.umask(0o022)
    os.umask(mask)
    assert (out / "alpha" / "podtemplates.yaml").stat().st_mode & 0o777 == 0o666 & ~mask


# --- failed compiles, pruning, ownership -------------------------------------------------


def test_failed_compile_leaves_output_untouched(project: tuple[Path, Path]) -> None:
    src, out = project
    before = snapshot(out)
    write_job(src, "alpha", replicas=5)  # a valid change that must not be written either
    write_job(src, "gamma", template=BROKEN)
    res = flatjob("compile", str(src), "-o", str(out))
    assert res.exit_code == 1
    assert "nothing was written" in res.output and "gamma.yaml" in res.output
    assert snapshot(out) == before


def test_an_upgrade_prunes_the_pods_yaml_an_earlier_version_wrote(project: tuple[Path, Path]) -> None:
    src, out = project
    old = out / "alpha" / "pods.yaml"  # before PodTemplates, git held gated Pods here
    old.write_text(GENERATED_HEADER + "apiVersion: v1\nkind: Pod\nmetadata: {name: alpha-worker-0}\n")
    meta = json.loads((out / META_FILE).read_text())
    meta["files"] = sorted([*meta["files"], "alpha/pods.yaml"])
    (out / META_FILE).write_text(json.dumps(meta))
    res = flatjob("compile", str(src), "-o", str(out))
    assert res.exit_code == 0, res.output
    assert not old.exists()
    assert "alpha/pods.yaml" not in json.loads((out / META_FILE).read_text())["files"]


def test_jobs_that_disappear_are_pruned_and_user_files_kept(project: tuple[Path, Path]) -> None:
    src, out = project
    (out / "README.md").write_text("mine\n")
    (out / "beta" / "notes.txt").write_text("mine too\n")
    (src / "alpha.yaml").unlink()
    (src / "beta.yaml").unlink()
    write_job(src, "delta")
    res = flatjob("compile", str(src), "-o", str(out))
    assert res.exit_code == 0, res.output
    assert not (out / "alpha").exists()  # emptied folder removed
    assert sorted(p.name for p in (out / "beta").iterdir()) == ["notes.txt"]
    assert (out / "README.md").read_text() == "mine\n"
    assert yaml.safe_load((out / "kustomization.yaml").read_text())["resources"] == ["runtime.yaml", "delta"]
    assert json.loads((out / META_FILE).read_text())["files"] == sorted(
        [
            *(
                f"delta/{f}"
                for f in (
                    "job.yaml",
                    "kustomization.yaml",
                    "podtemplates.yaml",
                    "service.yaml",
                )
            ),
            "kustomization.yaml",
            "runtime.yaml",  # the namespace's one runtime
        ]
    )


def _many_jobs(src: Path, count: int) -> list[Path]:
    """`count` job files; with more than one, jobs of two namespaces (team-a, team-b) besides
    the run's default one, and two kinds."""
    src.mkdir()
    files = []
    for i in range(count):
        namespace = ("", "\n  namespace: team-a", "\n  namespace: team-b")[i % 3] if count > 1 else ""
        spec = write_job(src, f"job{i:02d}", replicas=1 + i % 3)
        text = spec.read_text().replace(f"  name: job{i:02d}", f"  name: job{i:02d}{namespace}")
        spec.write_text(text.replace("kind: PyTorchTrainingJob", "kind: GenericJob") if i % 2 else text)
        files.append(spec)
    return files


@pytest.mark.parametrize("count", [1, 3, 50])
def test_the_runtime_is_rendered_once_per_namespace_folder_whatever_the_number_of_jobs(tmp_path: Path, count: int) -> None:
    """Issue 24: in namespace mode one runtime.yaml per namespace folder (one Deployment
    `flatjob`), none in a job's folder, and the same bytes whatever order the files are given in."""
    files = _many_jobs(tmp_path / "jobs", count)
    out, again = tmp_path / "rendered", tmp_path / "again"
    assert flatjob("compile", *map(str, files), "-o", str(out)).exit_code == 0
    assert flatjob("compile", *map(str, reversed(files)), "-o", str(again)).exit_code == 0
    tree = read_tree(out)
    assert tree == read_tree(again)
    namespaces = {"", "team-a/", "team-b/"} if count > 1 else {""}
    assert sorted(p for p in tree if p.endswith("runtime.yaml")) == sorted(f"{ns}runtime.yaml" for ns in namespaces)
    for ns in namespaces:
        deployments = [d for d in yaml.safe_load_all(tree[f"{ns}runtime.yaml"]) if d["kind"] == "Deployment"]
        assert [d["metadata"]["name"] for d in deployments] == ["flatjob"]


def test_the_namespace_runtimes_are_byte_identical_across_hash_seeds(tmp_path: Path) -> None:
    files = _many_jobs(tmp_path / "jobs", 50)
    trees = []
    for seed in ("0", "1", "4242"):
        out = tmp_path / f"rendered-{seed}"
        subprocess.run([sys.executable, "-m", "flatjob.compiler.cli", "compile", str(files[0].parent), "-o", str(out)],
                       env={**os.environ, "PYTHONHASHSEED": seed}, capture_output=True, check=True)
        trees.append({p: (out / p).read_bytes() for p in read_tree(out)})
    assert trees[0] == trees[1] == trees[2]
    assert {"runtime.yaml", "team-a/runtime.yaml", "team-b/runtime.yaml"} <= set(trees[0])


def test_pruning_removes_nested_namespace_folders(tmp_path: Path) -> None:
    src, out = tmp_path / "jobs", tmp_path / "rendered"
    src.mkdir()
    spec = write_job(src, "nsjob")
    spec.write_text(spec.read_text().replace("  name: nsjob", "  name: nsjob\n  namespace: team"))
    write_job(src, "plain")
    assert flatjob("compile", str(src), "-o", str(out)).exit_code == 0
    assert (out / "team" / "nsjob" / "podtemplates.yaml").is_file()
    spec.unlink()
    assert flatjob("compile", str(src), "-o", str(out)).exit_code == 0
    assert not (out / "team").exists()


def test_job_named_like_a_namespace_keeps_both(tmp_path: Path) -> None:
    src, out = tmp_path / "jobs", tmp_path / "rendered"
    src.mkdir()
    write_job(src, "research")
    spec = write_job(src, "llm")
    spec.write_text(spec.read_text().replace("  name: llm", "  name: llm\n  namespace: research"))
    assert flatjob("compile", str(src), "-o", str(out)).exit_code == 0
    resources = yaml.safe_load((out / "research" / "kustomization.yaml").read_text())["resources"]
    assert resources == ["job.yaml", "service.yaml", "podtemplates.yaml", "runtime.yaml", "llm"]  # runtime.yaml: namespace research's
    assert yaml.safe_load((out / "kustomization.yaml").read_text())["resources"] == ["runtime.yaml", "research"]  # the root's: job research's
    spec.unlink()
    assert flatjob("compile", str(src), "-o", str(out)).exit_code == 0
    resources = yaml.safe_load((out / "research" / "kustomization.yaml").read_text())["resources"]
    assert resources == ["job.yaml", "service.yaml", "podtemplates.yaml"]
    assert not (out / "research" / "llm").exists() and not (out / "research" / "runtime.yaml").exists()


@pytest.mark.parametrize("force", [False, True], ids=["refused", "forced"])
def test_foreign_file_in_the_way(tmp_path: Path, force: bool) -> None:
    src, out = tmp_path / "jobs", tmp_path / "rendered"
    src.mkdir()
    write_job(src, "alpha")
    (out / "alpha").mkdir(parents=True)
    (out / "alpha" / "podtemplates.yaml").write_text("# hand-written\n")
    before = snapshot(out)
    res = flatjob("compile", str(src), "-o", str(out), *(["--force"] if force else []))
    if force:
        assert res.exit_code == 0, res.output
        assert (out / "alpha" / "podtemplates.yaml").read_text().startswith(GENERATED_HEADER)
    else:
        assert res.exit_code == 1
        assert "[FJ701]" in res.output and "alpha/podtemplates.yaml" in res.output
        assert snapshot(out) == before


# --- --check and diff --------------------------------------------------------------------


def test_check_passes_when_current(project: tuple[Path, Path]) -> None:
    src, out = project
    res = flatjob("compile", str(src), "-o", str(out), "--check")
    assert res.exit_code == 0, res.output
    assert res.stdout == ""


def test_check_fails_with_a_diff_and_writes_nothing(project: tuple[Path, Path]) -> None:
    src, out = project
    before = snapshot(out)
    write_job(src, "alpha", replicas=3)
    res = flatjob("compile", str(src), "-o", str(out), "--check")
    assert res.exit_code == 1
    assert "--- a/alpha/podtemplates.yaml\n+++ b/alpha/podtemplates.yaml\n" in res.stdout
    assert "+  name: alpha-worker-2\n" in res.stdout
    assert "stale" in res.stderr
    assert snapshot(out) == before


def test_check_on_a_missing_folder_creates_nothing(tmp_path: Path) -> None:
    src = tmp_path / "jobs"
    src.mkdir()
    write_job(src, "alpha")
    res = flatjob("compile", str(src), "-o", str(tmp_path / "rendered"), "--check")
    assert res.exit_code == 1 and "+++ b/alpha/podtemplates.yaml" in res.stdout
    assert not (tmp_path / "rendered").exists()


def test_diff_shows_the_change_and_writes_nothing(project: tuple[Path, Path]) -> None:
    src, out = project
    before = snapshot(out)
    (src / "beta.yaml").unlink()
    res = flatjob("diff", str(src), "-o", str(out), "--exit-code")
    assert res.exit_code == 1
    assert "--- a/beta/podtemplates.yaml\n+++ /dev/null\n" in res.stdout
    assert "-- beta\n" in res.stdout  # the top kustomization loses the job
    assert res.stdout.index("+++ b/flatjob-meta.json") > res.stdout.index(
        "--- a/kustomization.yaml"
    )
    assert snapshot(out) == before
    assert flatjob("diff", str(src), "-o", str(out)).exit_code == 0  # without --exit-code


def test_a_long_diff_is_cut_naming_each_file_and_the_lines_left_out() -> None:
    """`compile --check` and `diff` print at most DIFF_LINES of diff (a CI log): a few KB of job
    may change a hundred MB of manifests (review 21 r7 #2); the rest is counted per file."""
    from flatjob.compiler.output import TreeChanges, unified_diff

    changes = TreeChanges(write={"a/podtemplates.yaml": "x\n" * 40, "b/job.yaml": "y\n" * 30}, delete=["c/job.yaml"], old={"c/job.yaml": "z\n" * 5})
    whole = unified_diff(changes)
    assert whole.count("\n") == (3 + 40) + (3 + 30) + (3 + 5) and "not shown" not in whole
    cut = unified_diff(changes, 50)
    assert cut.startswith(whole[: len("".join(whole.splitlines(keepends=True)[:50]))])
    assert cut.splitlines()[50:] == [
        "... the diff is cut at 50 lines: 34 more lines in 2 file(s) not shown",
        "... 26 more lines of b/job.yaml not shown",
        "... 8 more lines of c/job.yaml not shown",
    ]
    assert unified_diff(changes, 1000) == whole


# --- what is written ---------------------------------------------------------------------


def test_metadata_records_version_inputs_and_files(project: tuple[Path, Path]) -> None:
    src, out = project
    meta = json.loads((out / META_FILE).read_text())
    assert meta["generator"] == f"flatjob {__version__}"
    inputs = [
        (f"../jobs/{n}.yaml", hashlib.sha256((src / f"{n}.yaml").read_bytes()).hexdigest())
        for n in ("alpha", "beta")
    ]
    assert [(i["path"], i["sha256"]) for i in meta["inputs"]] == inputs
    digest = hashlib.sha256("".join(f"{p}\0{h}\n" for p, h in inputs).encode()).hexdigest()
    assert meta["inputsDigest"] == f"sha256:{digest}"
    assert meta["files"] == sorted(set(read_tree(out)) - {META_FILE})
    assert [j["source"] for j in meta["jobs"]] == ["../jobs/alpha.yaml", "../jobs/beta.yaml"]


def test_every_yaml_file_has_one_header_line(project: tuple[Path, Path]) -> None:
    _, out = project
    tree = read_tree(out)
    yamls = {rel: text for rel, text in tree.items() if rel.endswith(".yaml")}
    assert len(yamls) == len(tree) - 1
    for rel, text in yamls.items():
        assert text.startswith(GENERATED_HEADER), rel
        assert text.count("Code generated by flatjob") == 1, rel
        assert GENERATED_HEADER.count("\n") == 1


def test_output_inside_a_source_folder_is_a_fixed_point(tmp_path: Path) -> None:
    src = tmp_path / "examples"
    src.mkdir()
    write_job(src, "alpha")
    out = src / "rendered"
    assert flatjob("compile", str(src), "-o", str(out)).exit_code == 0
    before = snapshot(out)
    res = flatjob("compile", str(src), "-o", str(out), "--check")
    assert res.exit_code == 0, res.stdout
    assert flatjob("compile", str(src), "-o", str(out)).exit_code == 0
    assert snapshot(out) == before


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
def test_kubectl_kustomize_accepts_the_output(project: tuple[Path, Path]) -> None:
    _, out = project
    run = subprocess.run(
        ["kubectl", "kustomize", str(out)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    docs = [d for d in yaml.safe_load_all(run.stdout) if d]
    kinds = sorted(d["kind"] for d in docs)
    per_job = ["PodTemplate", "PodTemplate", "PyTorchTrainingJob", "Service"]
    namespace_runtime = ["Deployment", "Role", "RoleBinding", "ServiceAccount"]
    assert kinds == sorted(per_job * 2 + namespace_runtime)


# --- a metadata file's claims (a pull request's) -------------------------------------------


def _claim(out: Path, names: list[str]) -> None:
    meta = json.loads((out / META_FILE).read_text())
    meta["files"] += names
    (out / META_FILE).write_text(json.dumps(meta))


def test_claims_of_names_flatjob_never_writes_touch_nothing(project: tuple[Path, Path]) -> None:
    """A claim through a user's file (README.md/x) or of a name no compile writes is no claim:
    nothing is opened for it, and the compile goes on (it stopped with FJ702 once)."""
    src, out = project
    (out / "README.md").write_text("mine\n")
    _claim(out, ["README.md/x", "kustomization.yaml/job.yaml", "alpha/notes/x", "/etc/passwd", "../x", "a/" * 300 + "x"])
    res = flatjob("compile", str(src), "-o", str(out))
    assert res.exit_code == 0 and "FJ702" not in res.output, res.output
    assert (out / "README.md").read_text() == "mine\n"


def test_the_first_link_in_a_claim_is_reported_whatever_the_hash_seed(project: tuple[Path, Path]) -> None:
    """Claimed names are looked up in sorted order, so which link is reported never varies."""
    src, out = project
    for name in ("gamma", "delta"):
        (out.parent / f"{name}-elsewhere").mkdir()
        (out / name).symlink_to(out.parent / f"{name}-elsewhere")
    _claim(out, ["gamma/kustomization.yaml", "delta/kustomization.yaml"])
    said = set()
    for seed in ("0", "1", "2", "3"):
        p = subprocess.run([sys.executable, "-m", "flatjob.compiler.cli", "compile", str(src), "-o", str(out), "--check"],
                           capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": seed}, check=False)
        said |= {line for line in p.stderr.splitlines() if "FJ702" in line}
    assert len(said) == 1 and "rendered/delta" in said.pop()
