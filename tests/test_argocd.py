"""Argo CD: the record health check in a real Lua runtime, the shipped files, the CMP generate.

Covers:
- overlays/argocd/health.lua, run by lupa without Lua's standard libraries (as Argo CD runs
  it), against records whose status the runtime's own build_status wrote, in every phase,
  restarting, failed by its restart limit, for a status of an older generation, a record
  the runtime refused, one no runtime has written (the CRD's default status) and one
  without status at all;
- overlays/argocd's generated files match compiler/argocd.py (--update-golden rewrites them);
  the Component installs the plugin sidecar and argocd-cm keys onto an Argo CD install
  (kubectl kustomize; skipped without kubectl);
- the plugin's generate command run as Argo CD runs it: in the Application's directory, with
  ARGOCD_APP_* and ARGOCD_ENV_* set and nothing else; stdout parses as manifests only, and a
  bad job gives lint's messages on stderr and a non-zero exit; discover finds job folders.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from healthkit import served
from overlaykit import DDP, write

from flatjob.compiler import argocd
from flatjob.compiler.options import CompileOptions
from flatjob.compiler.overlay import load_overlays
from flatjob.compiler.pipeline import compile_paths
from flatjob.compiler.render.crd import WAITING_MESSAGE
from flatjob.compiler.scaffold import overlay_files
from flatjob.compiler.version import __version__
from flatjob.runtime.decisions.refuse import refused_status
from flatjob.runtime.decisions.status import MSG_PAUSED, MSG_RUNNING, build_status
from flatjob.runtime.model import JobView, Ledger, PodSpecView, PodState

ROOT = Path(__file__).resolve().parents[1]
ARGOCD = ROOT / "overlays" / "argocd"


# --- records in every phase, with the status the runtime writes --------------------------

POD = "j-worker-0"
NOW = 1_000_000.0
FAILED = "PyTorchTrainingJob j has failed: j-worker-0 failed with exit code 137"


def record(ledger: Ledger, pods: dict[str, PodState] | None = None, generation: int = 1, observed: int = 1) -> dict[str, Any]:
    """A job record whose status comes from runtime.decisions.status.build_status."""
    view = JobView(
        kind="PyTorchTrainingJob", name="j", namespace="default", generation=observed,
        pods=(PodSpecView(POD, "worker", 0, 0, 0, None, "h", "main"),),
        scope="group", rules={}, backoff_limit=3, deadline=None, cleanup="Unfinished", decider="first",
    )
    status = build_status(view, pods or {}, ledger, None, NOW)
    return {"apiVersion": "flatjob.dev/v1beta1", "kind": "PyTorchTrainingJob", "metadata": {"name": "j", "generation": generation}, "spec": {}, "status": status}


BARE = {"apiVersion": "flatjob.dev/v1beta1", "kind": "PyTorchTrainingJob", "metadata": {"name": "j", "generation": 1}, "spec": {}}
REFUSED = {**BARE, "status": refused_status(None, "VersionMismatch", "record j was compiled by flatjob 0.0.1", 1, NOW)}
RESTARTING = Ledger(start_time=1.0, backoff_count=1, replica_failed="Pod[j-worker-0] exited with error code 137", gang_not_before=NOW + 10)
RUNNING = {POD: PodState(POD, "uid-1", "Running", gated=False, ready=True, attempt=1)}
# name: (record as served, Argo CD health, its message)
PHASES: dict[str, tuple[dict[str, Any], str, str]] = {
    "pending": (record(Ledger()), "Progressing", "The job is pending."),
    "running": (record(Ledger(released=(POD,), start_time=1.0), RUNNING), "Progressing", MSG_RUNNING),
    "restarting": (record(RESTARTING), "Progressing", "Restarting j-worker-0 after Pod[j-worker-0] exited with error code 137 (restart 1 of backoffLimit 3)."),
    "resuming": (record(Ledger(resuming=True, start_time=1.0)), "Progressing", "The job is resuming."),
    "paused": (record(Ledger(paused=True, start_time=1.0)), "Suspended", MSG_PAUSED),
    "succeeded": (record(Ledger(outcome="Succeeded", message="j-worker-0 succeeded", start_time=1.0)), "Healthy", "j-worker-0 succeeded"),
    "failed": (record(Ledger(outcome="Failed", reason="Failed", message=FAILED, start_time=1.0)), "Degraded", FAILED),
    "backoff-limit": (record(Ledger(outcome="Failed", reason="BackoffLimitExceeded", message=FAILED, start_time=1.0)), "Degraded", f"BackoffLimitExceeded: {FAILED}"),
    "unknown": (record(Ledger(start_time=1.0)) | {"status": record(Ledger(start_time=1.0))["status"] | {"phase": "Unknown"}}, "Progressing", "The job is pending."),
    "older-generation": (record(Ledger(outcome="Succeeded", message="done"), generation=2, observed=1), "Progressing", "Waiting for the flatjob runtime to observe generation 2"),
    "waiting-for-runtime": (served(BARE), "Progressing", WAITING_MESSAGE),
    "refused": (served(REFUSED), "Degraded", "VersionMismatch: record j was compiled by flatjob 0.0.1"),
    "no-status": (BARE, "Progressing", "Waiting for the flatjob runtime to report status"),  # a CRD without the default status
}


@pytest.fixture(scope="module")
def health() -> Any:
    """Run the shipped overlays/argocd/health.lua as Argo CD does: `obj` set, no
    string/io/os/math/debug libraries."""
    lupa = pytest.importorskip("lupa")
    script = (ARGOCD / "health.lua").read_text(encoding="utf-8")

    def run(obj: dict[str, Any]) -> dict[str, Any]:
        lua = lupa.LuaRuntime(unpack_returned_tuples=True)
        lua.execute("string, io, os, math, debug, utf8, coroutine, require, load, loadstring, dofile = nil")
        lua.globals().obj = lua.table_from(obj, recursive=True)
        result = lua.execute(script)
        return dict(result)

    return run


@pytest.mark.parametrize("phase", PHASES, ids=list(PHASES))
def test_health_check_in_every_phase(health: Any, phase: str) -> None:
    obj, status, message = PHASES[phase]
    assert health(obj) == {"status": status, "message": message}


def test_every_phase_the_runtime_reports_is_covered() -> None:
    from flatjob.compiler.models.status import PHASES as RECORD_PHASES

    seen = {obj.get("status", {}).get("phase") for obj, _, _ in PHASES.values()} - {None}
    assert seen == set(RECORD_PHASES)


def test_a_restarting_job_is_progressing_with_the_restart_not_running_normally(health: Any) -> None:
    """Issue 20: a crash-looping job looked healthy until the limit. While a failed replica
    waits for its replacement the record says so, and Argo CD shows it; the job may still
    succeed, so it is Progressing (as Argo CD's batch/v1 Job within backoffLimit), and
    Degraded once the limit is reached."""
    got = health(PHASES["restarting"][0])
    assert got["status"] == "Progressing" and got["message"].startswith("Restarting j-worker-0 after Pod[j-worker-0] exited with error code 137")
    assert health(PHASES["backoff-limit"][0])["status"] == "Degraded"


# --- the shipped files ------------------------------------------------------------------


def test_overlays_argocd_files_are_current(update_golden: bool) -> None:
    files = {k.split("/", 1)[1]: v for k, v in overlay_files().items() if k.startswith("argocd/")}
    current = {rel: (ARGOCD / rel).read_text(encoding="utf-8") for rel in files if (ARGOCD / rel).is_file()}
    if update_golden:
        for rel, text in files.items():
            (ARGOCD / rel).write_text(text, encoding="utf-8")
        return
    assert current == files, "overlays/argocd is stale: run pytest tests/test_argocd.py --update-golden"


def test_argocd_cm_has_the_health_check_for_every_record_kind() -> None:
    data = yaml.safe_load((ARGOCD / "argocd-cm.yaml").read_text(encoding="utf-8"))["data"]
    for kind in argocd.RECORD_KINDS:
        assert data[f"resource.customizations.health.flatjob.dev_{kind}"] == (ARGOCD / "health.lua").read_text(encoding="utf-8")
    assert not [k for k in data if k.startswith("resource.customizations.ignoreDifferences.") and "flatjob.dev_" not in k]  # pods are not in git
    for kind in ("PyTorchTrainingJob", "DeepSpeedJob"):
        rule = yaml.safe_load(data[f"resource.customizations.ignoreDifferences.flatjob.dev_{kind}"])
        assert rule == {"jsonPointers": ["/spec/elastic/expectedReplicas"]}


@pytest.mark.parametrize("name", ["application.yaml", "application-plugin.yaml"])
def test_application_templates(name: str) -> None:
    spec = yaml.safe_load((ARGOCD / name).read_text(encoding="utf-8"))["spec"]
    assert {"ServerSideApply=true", "RespectIgnoreDifferences=true"} <= set(spec["syncPolicy"]["syncOptions"])
    assert spec["syncPolicy"]["automated"] == {"prune": True, "selfHeal": True}
    ignored = {(d.get("group", ""), d["kind"], p) for d in spec["ignoreDifferences"] for p in d["jsonPointers"]}
    assert ignored == {("flatjob.dev", "PyTorchTrainingJob", "/spec/elastic/expectedReplicas"), ("flatjob.dev", "DeepSpeedJob", "/spec/elastic/expectedReplicas")}


STUB_INSTALL = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-cm}
data: {url: https://argocd.example}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: argocd-repo-server}
spec:
  selector: {matchLabels: {app: repo}}
  template:
    metadata: {labels: {app: repo}}
    spec:
      containers: [{name: argocd-repo-server, image: quay.io/argoproj/argocd:v3.1.0}]
      volumes: [{name: var-files, emptyDir: {}}, {name: plugins, emptyDir: {}}]
"""


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
def test_component_installs_onto_argocd(tmp_path: Path) -> None:
    shutil.copytree(ARGOCD, tmp_path / "flatjob")
    write(tmp_path, {"install.yaml": STUB_INSTALL, "kustomization.yaml": "namespace: argocd\nresources: [install.yaml]\ncomponents: [flatjob]\n"})
    out = subprocess.run(["kubectl", "kustomize", str(tmp_path)], capture_output=True, text=True, timeout=60, check=True).stdout
    objs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(out)}
    cm = objs[("ConfigMap", "argocd-cm")]["data"]
    assert cm["url"] == "https://argocd.example" and set(argocd.argocd_cm_data()) <= set(cm)
    plugin = yaml.safe_load(objs[("ConfigMap", "flatjob-cmp-plugin")]["data"]["plugin.yaml"])
    assert plugin["kind"] == "ConfigManagementPlugin" and plugin["metadata"]["name"] == argocd.PLUGIN
    pod = objs[("Deployment", "argocd-repo-server")]["spec"]["template"]["spec"]
    sidecar = next(c for c in pod["containers"] if c["name"] == "flatjob-cmp")
    assert sidecar["command"] == ["/var/run/argocd/argocd-cmp-server"] and sidecar["securityContext"]["runAsUser"] == 999
    assert sidecar["image"] == f"ghcr.io/flatjob/flatjob:{__version__}"  # the runtime refuses records of other versions
    mounts = {m["mountPath"]: m["name"] for m in sidecar["volumeMounts"]}
    assert mounts["/home/argocd/cmp-server/config/plugin.yaml"] == "flatjob-cmp-plugin"
    assert {v["name"] for v in pod["volumes"]} >= {"var-files", "plugins", "flatjob-cmp-plugin", "flatjob-cmp-tmp"}


# --- the Config Management Plugin, run as Argo CD runs it -------------------------------


def plugin_spec() -> dict[str, Any]:
    return yaml.safe_load((ARGOCD / "plugin.yaml").read_text(encoding="utf-8"))["spec"]


def argocd_env(**user: str) -> dict[str, str]:
    """The environment Argo CD gives generate: its own variables, ARGOCD_ENV_*, PATH and HOME."""
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/bin{os.pathsep}/bin",
        "HOME": "/tmp",
        "ARGOCD_APP_NAME": "training-prod",
        "ARGOCD_APP_NAMESPACE": "training",
        "ARGOCD_APP_REVISION": "0123456789abcdef",
        "KUBE_VERSION": "1.32.0",
    }
    env.update({f"ARGOCD_ENV_{k}": v for k, v in user.items()})
    return env


def generate(app_dir: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = plugin_spec()["generate"]
    argv = [*command["command"], *command.get("args", [])]
    return subprocess.run(argv, cwd=app_dir, env=env, capture_output=True, text=True, timeout=120, check=False)


def repo(tmp: Path) -> Path:
    write(tmp / "repo", {"jobs/ddp.yaml": DDP, "overlays/prod/overlay.yaml": "namespace: training-prod\nlabels: {env: prod}\n"})
    return tmp / "repo"


@pytest.mark.parametrize("mode", [None, "namespace", "job"])
def test_generate_prints_only_manifests(tmp_path: Path, mode: str | None) -> None:
    """With ARGOCD_ENV_RUNTIME (`--runtime`) or without it (namespace mode, the default)."""
    app = repo(tmp_path)
    done = generate(app, argocd_env(SOURCES="jobs", OVERLAY="overlays/prod", **({"RUNTIME": mode} if mode else {})))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    docs = list(yaml.safe_load_all(done.stdout))
    assert docs and all(isinstance(d, dict) and d.get("apiVersion") and d.get("kind") and d["metadata"].get("name") for d in docs)
    options = CompileOptions(namespace="training", runtime=mode or "namespace")  # type: ignore[arg-type]
    compiled = compile_paths([str(app / "jobs")], options, load_overlays([app / "overlays" / "prod"]))
    written = {path: text for path, text in compiled.tree().items() if path.endswith(".yaml") and not path.endswith("kustomization.yaml")}
    expected = [d for text in written.values() for d in yaml.safe_load_all(text)]
    assert docs == expected  # the same manifests `flatjob compile` writes, in the same order
    runtime = "ddp-runtime" if mode == "job" else "flatjob"
    # the namespace's runtime too (review 21, round 7: it was left out), or the job's own
    assert ("training-prod/ddp/runtime.yaml" if mode == "job" else "training-prod/runtime.yaml") in written
    assert {(d["kind"], d["metadata"]["name"]) for d in docs} >= {("Deployment", runtime), ("Role", runtime), ("ServiceAccount", runtime)}
    assert [d["metadata"]["annotations"]["flatjob.dev/runtime"] for d in docs if d["apiVersion"].startswith("flatjob.dev/")] == [mode or "namespace"]
    assert all(d["metadata"].get("namespace") == "training-prod" for d in docs)
    assert sum(d["kind"] == "PodTemplate" for d in docs) == 4 and not [d for d in docs if d["kind"] == "Pod"]
    assert not any(d["kind"] == "Kustomization" for d in docs)


def test_generate_uses_the_application_namespace(tmp_path: Path) -> None:
    app = repo(tmp_path) / "jobs"
    done = generate(app, argocd_env())  # SOURCES defaults to the Application's directory
    assert done.returncode == 0, done.stderr
    assert {d["metadata"].get("namespace") for d in yaml.safe_load_all(done.stdout)} == {"training"}


def test_generate_errors_go_to_stderr(tmp_path: Path) -> None:
    app = repo(tmp_path)
    (app / "jobs" / "ddp.yaml").write_text(DDP.replace("replicas: 3", "replicas: -3"), encoding="utf-8")
    done = generate(app, argocd_env(SOURCES="jobs", OVERLAY="overlays/prod"))
    assert done.returncode == 1
    assert done.stdout == ""
    assert "jobs/ddp.yaml:20:17: error: spec.replicaSpecs[1].replicas: must be >= 0, got -3 [FJ204]" in done.stderr
    missing = generate(app, argocd_env(OVERLAY="overlays/staging"))
    assert missing.returncode == 2 and missing.stdout == "" and "overlays/staging" in missing.stderr


def test_generate_refuses_a_t9k_kind_of_another_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A job copied with another apiVersion beside the good one: Argo CD would sync the folder
    without it, unsaid; generate fails with lint's FJ102 instead (in-process: this checkout's code)."""
    from flatjob.compiler import cmp

    app = repo(tmp_path)
    write(app, {"jobs/copied.yaml": "apiVersion: kubeflow.org/v1\nkind: PyTorchTrainingJob\nmetadata: {name: copied}\n"})
    monkeypatch.chdir(app)
    out, err, status = cmp.generate(argocd_env(SOURCES="jobs"))
    assert status == 1 and out == ""
    assert "jobs/copied.yaml:1:13: error: PyTorchTrainingJob of apiVersion kubeflow.org/v1 is not a T9k job" in err


def test_discover_finds_folders_with_jobs(tmp_path: Path) -> None:
    app = repo(tmp_path)
    write(tmp_path / "other", {"deploy.yaml": "apiVersion: apps/v1\nkind: Deployment\n"})
    command = plugin_spec()["discover"]["find"]["command"]
    found = subprocess.run(command, cwd=app, capture_output=True, text=True, timeout=30, check=False)
    assert found.stdout.strip() == "./jobs/ddp.yaml"
    none = subprocess.run(command, cwd=tmp_path / "other", capture_output=True, text=True, timeout=30, check=False)
    assert none.stdout == ""


@pytest.mark.parametrize(("args", "code", "says"), [
    (["--help"], 0, "Argo CD Config Management Plugin"),
    (["-h"], 0, "ARGOCD_ENV_"),
    (["generate"], 2, "takes no arguments (got 'generate')"),
])
def test_the_plugin_with_arguments_says_how_it_is_used_and_generates_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                                                             args: list[str], code: int, says: str) -> None:
    """`flatjob-cmp --help` ran a real generate in the folder it was typed in (hx37): it takes no arguments."""
    from flatjob.compiler import cmp

    monkeypatch.chdir(tmp_path)  # a folder with no job: a generate would say FJ703
    with pytest.raises(SystemExit) as stop:
        cmp.main(args)
    out, err = capsys.readouterr()
    assert stop.value.code == code and says in (out if code == 0 else err) and "FJ703" not in out + err
