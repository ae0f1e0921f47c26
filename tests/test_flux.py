"""Flux: the shipped files, how Flux judges a record's health, and what it applies.

Covers:
- overlays/flux's generated files match compiler/flux.py (--update-golden rewrites them) and
  build with kustomize, also with the optional .spec.ignore patch (skipped without kubectl);
- kstatus, as cli-utils computes it, on records the runtime's status code wrote: Running and
  Succeeded are Current, Failed is Failed, starting is InProgress, and a paused job is
  InProgress (why the Kustomization carries healthCheckExprs);
- the healthCheckExprs, evaluated by a CEL implementation (cel-python; skipped without it)
  in Flux's order (inProgress, failed, current): a paused job is Current;
- git holds PodTemplates, never pods, so nothing Flux applies competes with the runtime.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
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


def test_kustomization_prunes_and_does_not_wait() -> None:
    spec = yaml.safe_load((FLUX / "kustomization-prod.yaml").read_text(encoding="utf-8"))["spec"]
    assert spec["prune"] is True and "wait" not in spec and "targetNamespace" not in spec
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


# --- kstatus (kubernetes-sigs/cli-utils pkg/kstatus/status, the generic rules) ---------


def kstatus(obj: dict[str, Any]) -> str:
    """cli-utils' generic status of a custom resource."""
    status = obj.get("status")
    if status is None:
        return "InProgress"
    if status.get("observedGeneration") is not None and status["observedGeneration"] != obj["metadata"].get("generation"):
        return "InProgress"
    conditions = {c["type"]: c["status"] for c in status.get("conditions", [])}
    if conditions.get("Reconciling") == "True":
        return "InProgress"
    if conditions.get("Stalled") == "True":
        return "Failed"
    ready = conditions.get("Ready")
    return "InProgress" if ready == "False" else "Current"


KSTATUS = {
    "pending": "InProgress", "running": "Current", "resuming": "InProgress", "paused": "InProgress",
    "succeeded": "Current", "failed": "Failed", "older-generation": "InProgress", "no-status": "InProgress",
    "unknown": "InProgress",
}
CEL = {
    "pending": "InProgress", "running": "Current", "resuming": "InProgress", "paused": "Current",
    "succeeded": "Current", "failed": "Failed", "older-generation": "InProgress", "no-status": "InProgress",
    "unknown": "InProgress",
}


@pytest.mark.parametrize("phase", KSTATUS)
def test_kstatus_of_the_record(phase: str) -> None:
    assert kstatus(PHASES[phase][0]) == KSTATUS[phase]


def cel_health(obj: dict[str, Any]) -> str:
    """Flux's healthCheckExprs: inProgress, then failed, then current; an error keeps waiting."""
    celpy = pytest.importorskip("celpy")
    env = celpy.Environment()
    activation = {k: celpy.json_to_cel(v) for k, v in obj.items()}
    for key, result in (("inProgress", "InProgress"), ("failed", "Failed"), ("current", "Current")):
        try:
            value = env.program(env.compile(flux.HEALTH_EXPRS[key])).evaluate(activation)
        except Exception:  # celpy raises its own error types for a missing field
            return "InProgress"
        if isinstance(value, Exception):
            return "InProgress"
        if bool(value):
            return result
    return "InProgress"


@pytest.mark.parametrize("phase", CEL)
def test_health_check_exprs(phase: str) -> None:
    assert cel_health(PHASES[phase][0]) == CEL[phase]


def test_flux_needs_no_annotation_because_git_holds_no_pod(tmp_path: Path) -> None:
    from overlaykit import DDP

    write(tmp_path, {"job.yaml": DDP})
    (job,) = compile_paths([str(tmp_path)]).jobs
    docs = [d for name, text in job.files.items() if name != "kustomization.yaml" for d in yaml.safe_load_all(text)]
    assert [d for d in docs if d["kind"] == "PodTemplate"] and not [d for d in docs if d["kind"] == "Pod"]
    for d in docs:
        notes = {**(d["metadata"].get("annotations") or {}), **(((d.get("template") or {}).get("metadata") or {}).get("annotations") or {})}
        assert not [k for k in notes if k.startswith("kustomize.toolkit.fluxcd.io/")], d["metadata"]["name"]
