"""Flux: the shipped files, how Flux judges a record's health, and what it applies.

Covers:
- overlays/flux's generated files match compiler/flux.py (--update-golden rewrites them) and
  build with kustomize, also with the optional .spec.ignore patch (skipped without kubectl);
- kstatus, as fluxcd/cli-utils computes it, on records the runtime's status code wrote:
  Running and Succeeded are Current, Failed is Failed, starting and restarting are
  InProgress, and a paused job is InProgress (why the Kustomization carries healthCheckExprs);
- the healthCheckExprs, evaluated by a CEL implementation (cel-python; skipped without it)
  as Flux evaluates them (tests/healthkit.py): a paused job is Current, a restarting one in
  progress, and a record no runtime has written is in progress, not a CEL error;
- the Kustomization waits for everything it applies and lists no job by name;
- git holds PodTemplates, never pods, so nothing Flux applies competes with the runtime.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from healthkit import flux_cel, kstatus, served
from overlaykit import write
from test_argocd import PHASES

from flatjob.compiler import flux
from flatjob.compiler.pipeline import compile_paths
from flatjob.compiler.scaffold import overlay_files

ROOT = Path(__file__).resolve().parents[1]
FLUX = ROOT / "overlays" / "flux"


def test_overlays_flux_files_are_current(update_golden: bool) -> None:
    files = {k.split("/", 1)[1]: v for k, v in overlay_files().items() if k.startswith("flux/")}
    if update_golden:
        for rel, text in files.items():
            (FLUX / rel).write_text(text, encoding="utf-8")
        return
    current = {rel: (FLUX / rel).read_text(encoding="utf-8") for rel in files if (FLUX / rel).is_file()}
    assert current == files, "overlays/flux is stale: run pytest tests/test_flux.py --update-golden"


def test_kustomization_prunes_and_waits_for_what_it_applies_with_no_list_of_jobs() -> None:
    spec = yaml.safe_load((FLUX / "kustomization-prod.yaml").read_text(encoding="utf-8"))["spec"]
    assert spec["prune"] is True and spec["wait"] is True and "targetNamespace" not in spec
    assert "healthChecks" not in spec  # `wait: true` ignores it; health follows what the folder holds
    assert {e["kind"] for e in spec["healthCheckExprs"]} == {"GenericJob", "PyTorchTrainingJob", "DeepSpeedJob", "ColossalAIJob"}


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
def test_flux_folder_builds_with_the_ignore_patch(tmp_path: Path) -> None:
    shutil.copytree(FLUX, tmp_path / "flux")
    text = (tmp_path / "flux" / "kustomization.yaml").read_text(encoding="utf-8")
    (tmp_path / "flux" / "kustomization.yaml").write_text(text.replace("# patches:", "patches:").replace("#   - path", "  - path").replace("#     target", "    target"), encoding="utf-8")
    out = subprocess.run(["kubectl", "kustomize", str(tmp_path / "flux")], capture_output=True, text=True, timeout=60, check=True).stdout
    docs = {d["kind"]: d for d in yaml.safe_load_all(out)}
    assert docs["GitRepository"]["spec"]["url"] == "REPO_URL"
    assert docs["Kustomization"]["spec"]["ignore"] == flux.elastic_ignore()[0]["value"]


# --- how Flux reads a record (tests/healthkit.py: kstatus, and the CEL by cel-python) -------

KSTATUS = {
    "pending": "InProgress", "running": "Current", "restarting": "InProgress", "resuming": "InProgress", "paused": "InProgress",
    "succeeded": "Current", "failed": "Failed", "backoff-limit": "Failed", "older-generation": "InProgress",
    "waiting-for-runtime": "InProgress", "refused": "Failed", "no-status": "Current", "unknown": "InProgress",
}
CEL = {**KSTATUS, "paused": "Current", "no-status": "Unknown: no such attribute(s): status"}


@pytest.mark.parametrize("phase", KSTATUS)
def test_kstatus_of_the_record(phase: str) -> None:
    assert kstatus(PHASES[phase][0]) == KSTATUS[phase]


@pytest.mark.parametrize("phase", CEL)
def test_health_check_exprs(phase: str) -> None:
    assert flux_cel(PHASES[phase][0]) == CEL[phase]


def test_a_record_failed_without_stalled_is_failed_as_argo_cd_shows_it() -> None:
    """Another writer's status (or an older runtime's) may say Failed with no Stalled
    condition: Argo CD's Lua says Degraded, so Flux must say Failed, not its default
    InProgress (new-user review of issue 20)."""
    import copy

    record = copy.deepcopy(PHASES["failed"][0])
    record["status"]["conditions"] = [c for c in record["status"]["conditions"] if c["type"] != "Stalled"]
    assert record["status"]["phase"] == "Failed" and flux_cel(record) == "Failed"


def test_a_record_no_runtime_has_written_is_in_progress_not_a_cel_error() -> None:
    """Issue 20: before the runtime writes (or forever, when its image cannot be pulled) the
    expressions used to fail with a CEL error on the missing status. The CRD's default
    status fills it in on every read: in progress, waiting for the runtime. Without that
    default no expression can read `status` at all."""
    bare = PHASES["no-status"][0]
    assert flux_cel(bare).startswith("Unknown: no such attribute")
    old = {"inProgress": "status.observedGeneration != metadata.generation || status.phase in ['Pending', 'Resuming']",
           "failed": "status.phase == 'Failed'", "current": "status.phase in ['Running', 'Succeeded', 'Paused']"}
    assert flux_cel(bare, old).startswith("Unknown:") and flux_cel(served(bare), old).startswith("Unknown:")  # the old expressions
    assert flux_cel(served(bare)) == "InProgress" and kstatus(served(bare)) == "InProgress"


def test_flux_needs_no_annotation_because_git_holds_no_pod(tmp_path: Path) -> None:
    from overlaykit import DDP

    write(tmp_path, {"job.yaml": DDP})
    (job,) = compile_paths([str(tmp_path)]).jobs
    docs = [d for name, text in job.files.items() if name != "kustomization.yaml" for d in yaml.safe_load_all(text)]
    assert [d for d in docs if d["kind"] == "PodTemplate"] and not [d for d in docs if d["kind"] == "Pod"]
    for d in docs:
        notes = {**(d["metadata"].get("annotations") or {}), **(((d.get("template") or {}).get("metadata") or {}).get("annotations") or {})}
        assert not [k for k in notes if k.startswith("kustomize.toolkit.fluxcd.io/")], d["metadata"]["name"]
