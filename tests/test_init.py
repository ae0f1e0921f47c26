"""`flatjob init`: a new repository, end to end, for each GitOps tool.

Covers: init in an empty folder writes the scaffold and renders every environment; then
add a job, compile, lint clean, compile --check up to date, and `kubectl kustomize` of each
rendered folder (skipped without kubectl); the Argo CD and Flux objects are the shipped ones
with the repository filled in; init refuses to overwrite anything (nothing written, a clear
message) unless --force; the CI workflow uses this repository's action at this version.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from healthkit import flux_cel
from overlaykit import DDP

from flatjob.compiler import argocd, flux, keys
from flatjob.compiler.cli import cli
from flatjob.compiler.version import __version__
from flatjob.runtime.sim.cluster import FakeCluster

URL = "https://github.com/example/training.git"


def invoke(*args: str) -> object:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.mark.parametrize("gitops", ["argocd", "flux", "none"])
def test_init_add_a_job_compile_lint_kustomize(tmp_path: Path, gitops: str) -> None:
    repo = tmp_path / "training"
    result = invoke("init", "--gitops", gitops, "--repo-url", URL, str(repo))
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    (repo / "jobs" / "ddp.yaml").write_text(DDP, encoding="utf-8")
    assert invoke("lint", str(repo / "jobs")).exit_code == 0  # type: ignore[attr-defined]
    for env in ("dev", "prod"):
        args = ["compile", str(repo / "jobs"), "--overlay", str(repo / "overlays" / env), "-o", str(repo / "rendered" / env)]
        assert invoke(*args).exit_code == 0  # type: ignore[attr-defined]
        assert invoke(*args, "--check").exit_code == 0  # type: ignore[attr-defined]
        jobs = sorted(p.name for p in (repo / "rendered" / env / f"training-{env}").iterdir() if p.is_dir())
        assert jobs == ["ddp", "hello-ddp"]
    if shutil.which("kubectl"):
        for env in ("dev", "prod"):
            out = subprocess.run(["kubectl", "kustomize", str(repo / "rendered" / env)], capture_output=True, text=True, timeout=60, check=True).stdout
            docs = list(yaml.safe_load_all(out))
            assert {d["metadata"]["namespace"] for d in docs} == {f"training-{env}"}
            assert sum(d["kind"] == "PodTemplate" for d in docs) == {"dev": 6, "prod": 8}[env]


def test_init_renders_at_once_and_ci_finds_it_current(tmp_path: Path) -> None:
    from flatjob.compiler.ci import check, environments

    assert invoke("init", "--repo-url", URL, str(tmp_path)).exit_code == 0  # type: ignore[attr-defined]
    envs = environments(tmp_path / "overlays", tmp_path / "rendered")
    run = check([str(tmp_path / "jobs")], envs)
    assert [e.name for e in run.envs] == ["dev", "prod"]
    assert not run.failed and run.lint == []
    workflow = yaml.safe_load((tmp_path / ".github" / "workflows" / "flatjob.yml").read_text(encoding="utf-8"))
    steps = workflow["jobs"]["flatjob"]["steps"]
    assert steps[-1]["uses"] == f"flatjob/flatjob@v{__version__}"
    assert workflow["permissions"]["pull-requests"] == "write"


def test_init_beside_jobs_of_the_repository_says_to_compile_them(tmp_path: Path) -> None:
    """Adopting flatjob in a repository that has jobs/ already: rendered/ is compiled from the
    scaffold alone, so CI's compile --check failed on the first push, unsaid (hx37)."""
    (tmp_path / "jobs" / "team").mkdir(parents=True)
    (tmp_path / "jobs" / "team" / "ddp.yaml").write_text(DDP, encoding="utf-8")
    result = CliRunner().invoke(cli, ["init", "--repo-url", URL, str(tmp_path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert f"{tmp_path / 'jobs'} held job specs already; rendered/ holds the example alone" in result.stderr
    for env in ("dev", "prod"):
        args = ["compile", str(tmp_path / "jobs"), "--overlay", str(tmp_path / "overlays" / env), "-o", str(tmp_path / "rendered" / env)]
        assert f"  flatjob {' '.join(args)}\n" in result.stderr
        assert invoke(*args, "--check").exit_code == 1  # type: ignore[attr-defined]
        assert invoke(*args).exit_code == 0  # type: ignore[attr-defined]
    again = CliRunner().invoke(cli, ["init", "--force", "--repo-url", URL, str(tmp_path / "fresh")], catch_exceptions=False)
    assert "held job specs already" not in again.stderr  # the scaffold's own job is not the repository's


def test_gitops_objects(tmp_path: Path) -> None:
    assert invoke("init", "--gitops", "argocd", "--repo-url", URL, str(tmp_path / "a")).exit_code == 0  # type: ignore[attr-defined]
    app = yaml.safe_load((tmp_path / "a" / "gitops" / "argocd" / "prod.yaml").read_text(encoding="utf-8"))
    assert app == argocd.application("training-prod", URL, "rendered/prod", "training-prod")
    cm = yaml.safe_load((tmp_path / "a" / "gitops" / "argocd-cm.yaml").read_text(encoding="utf-8"))
    assert cm == argocd.argocd_cm()
    assert invoke("init", "--gitops", "flux", "--repo-url", URL, str(tmp_path / "f")).exit_code == 0  # type: ignore[attr-defined]
    listed = yaml.safe_load((tmp_path / "f" / "gitops" / "flux" / "kustomization.yaml").read_text(encoding="utf-8"))["resources"]
    assert listed == ["dev.yaml", "gitrepository.yaml", "namespace-dev.yaml", "namespace-prod.yaml", "prod.yaml"]
    source = yaml.safe_load((tmp_path / "f" / "gitops" / "flux" / "gitrepository.yaml").read_text(encoding="utf-8"))
    assert source == flux.git_repository("training", URL)
    ks = yaml.safe_load((tmp_path / "f" / "gitops" / "flux" / "dev.yaml").read_text(encoding="utf-8"))
    assert ks["spec"]["path"] == "./rendered/dev" and ks["spec"]["prune"] is True


RESNET = DDP.replace("name: ddp", "name: resnet")


def rendered_records(repo: Path, env: str) -> list[dict[str, Any]]:
    return [d for p in sorted((repo / "rendered" / env).rglob("job.yaml")) for d in yaml.safe_load_all(p.read_text(encoding="utf-8")) if d]


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_flux_health_follows_the_jobs_that_exist_with_no_list_to_keep(tmp_path: Path, env: str) -> None:
    """Issue 20: the scaffold named hello-ddp under healthChecks, so once a user replaced the
    example both Kustomizations checked a record that no longer existed, and nothing noticed.
    Now Flux checks everything the Kustomization applies (`wait: true`) and reads each record
    kind with healthCheckExprs: replace the example, recompile, and Flux checks the new job's
    record and nothing else, with no edit under gitops/."""
    assert invoke("init", "--gitops", "flux", "--repo-url", URL, str(tmp_path)).exit_code == 0  # type: ignore[attr-defined]
    (tmp_path / "jobs" / "hello-ddp.yaml").unlink()
    (tmp_path / "jobs" / "resnet.yaml").write_text(RESNET, encoding="utf-8")
    args = ["compile", str(tmp_path / "jobs"), "--overlay", str(tmp_path / "overlays" / env), "-o", str(tmp_path / "rendered" / env)]
    if env == "prod":  # prod's overlay patches hello-ddp, as init writes it: the user drops that patch too
        overlay = tmp_path / "overlays" / "prod" / "overlay.yaml"
        overlay.write_text(overlay.read_text(encoding="utf-8").split("patches:")[0], encoding="utf-8")
    assert invoke(*args).exit_code == 0 and invoke(*args, "--check").exit_code == 0  # type: ignore[attr-defined]
    gitops = {p.name: p.read_text(encoding="utf-8") for p in (tmp_path / "gitops" / "flux").iterdir()}
    assert not [name for name, text in gitops.items() if "hello-ddp" in text or "healthChecks:" in text]
    spec = yaml.safe_load(gitops[f"{env}.yaml"])["spec"]
    assert spec["wait"] is True and spec["path"] == f"./rendered/{env}"
    # What Flux checks with wait: true: every object applied; the records among them, read as
    # the API server serves them (no runtime yet: the CRD's default status), by the CEL.
    records = rendered_records(tmp_path, env)
    assert [r["metadata"]["name"] for r in records] == ["resnet"]
    kinds = {(e["apiVersion"], e["kind"]) for e in spec["healthCheckExprs"]}
    cluster = FakeCluster(lambda: 0.0)
    for r in records:
        assert (r["apiVersion"], r["kind"]) in kinds
        cluster.apply(r)
        live = cluster.record(r["metadata"]["namespace"], keys.RECORD_PLURALS[r["kind"]], r["metadata"]["name"])
        assert flux_cel(live) == "InProgress"


def test_refuses_to_overwrite_unless_forced(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("mine\n", encoding="utf-8")
    result = invoke("init", str(tmp_path))
    assert result.exit_code == 1  # type: ignore[attr-defined]
    assert f"{tmp_path / 'README.md'}: already exists" in result.output  # type: ignore[attr-defined]
    assert "refusing to overwrite existing files; nothing was written. Use --force" in result.output  # type: ignore[attr-defined]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md"]
    assert (tmp_path / "README.md").read_text(encoding="utf-8") == "mine\n"
    assert invoke("init", "--force", str(tmp_path)).exit_code == 0  # type: ignore[attr-defined]
    assert (tmp_path / "README.md").read_text(encoding="utf-8").startswith("# Training jobs")


def test_placeholder_without_a_remote(tmp_path: Path) -> None:
    result = invoke("init", str(tmp_path))
    assert result.exit_code == 0  # type: ignore[attr-defined]
    assert "Replace REPO_URL under gitops/" in result.output  # type: ignore[attr-defined]
    assert "repoURL: REPO_URL" in (tmp_path / "gitops" / "argocd" / "dev.yaml").read_text(encoding="utf-8")


@pytest.mark.parametrize(("given", "written"), [
    ("https://user:TOKEN@github.com/o/r.git", "https://github.com/o/r.git"),
    ("https://TOKEN@github.com/o/r", "https://github.com/o/r"),  # a token given as the user
    ("ssh://git:pw@host/r", "ssh://git@host/r"),
    ("ssh://git@host/r", "ssh://git@host/r"),
    ("git@github.com:o/r.git", "git@github.com:o/r.git"),
    ("https://github.com/o/r", "https://github.com/o/r"),
])
def test_the_repository_url_is_written_without_credentials(given: str, written: str) -> None:
    """Files flatjob init writes are committed: no password or http(s) user (review of round 13)."""
    from flatjob.compiler.cli.init import without_credentials

    assert without_credentials(given) == written


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_flux_takes_an_ssh_origin_in_the_form_its_crd_admits(tmp_path: Path) -> None:
    """A clone over SSH has origin git@host:org/repo.git, which Argo CD takes but Flux's
    GitRepository CRD refuses (url must match ^(http|https|ssh)://.*$): the Flux scaffold writes
    ssh://git@host/org/repo.git, and no 'Replace REPO_URL' once the URL is filled in (issue 25)."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "remote", "add", "origin", "git@github.com:example/training.git"], check=True)
    assert invoke("init", "--gitops", "flux", str(tmp_path)).exit_code == 0  # type: ignore[attr-defined]
    text = (tmp_path / "gitops" / "flux" / "gitrepository.yaml").read_text(encoding="utf-8")
    assert yaml.safe_load(text)["spec"]["url"] == "ssh://git@github.com/example/training.git"
    assert "REPO_URL" not in text
    assert invoke("init", "--gitops", "argocd", "--force", str(tmp_path)).exit_code == 0  # type: ignore[attr-defined]
    app = yaml.safe_load((tmp_path / "gitops" / "argocd" / "dev.yaml").read_text(encoding="utf-8"))
    assert app["spec"]["source"]["repoURL"] == "git@github.com:example/training.git"  # Argo CD takes it as is


@pytest.mark.parametrize(("given", "written"), [
    ("git@github.com:o/r.git", "ssh://git@github.com/o/r.git"),
    ("git@host:/srv/r.git", "ssh://git@host/srv/r.git"),
    ("https://github.com/o/r.git", "https://github.com/o/r.git"),
    ("ssh://git@github.com/o/r.git", "ssh://git@github.com/o/r.git"),
    ("REPO_URL", "REPO_URL"),
])
def test_flux_url(given: str, written: str) -> None:
    assert flux.flux_url(given) == written


def test_flux_init_warns_of_a_url_flux_refuses(tmp_path: Path) -> None:
    result = invoke("init", "--gitops", "flux", "--repo-url", "/srv/git/r.git", str(tmp_path))
    assert result.exit_code == 0  # type: ignore[attr-defined]
    assert "Flux's GitRepository takes only http(s):// and ssh:// URLs, not /srv/git/r.git" in result.output  # type: ignore[attr-defined]
