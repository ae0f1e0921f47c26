"""What `flatjob init` writes, and the generated files under the repository's overlays/.

Pure: functions return {relative path: text}; compiler/cli/init.py checks for existing files
and writes.  The Argo CD and Flux pieces come from compiler/argocd.py and compiler/flux.py,
the same source as overlays/argocd and overlays/flux (tests/test_init.py, test_argocd.py).
"""

from __future__ import annotations

from . import argocd, flux
from .argocd import yaml_file
from .version import __version__

ENVIRONMENTS = ("dev", "prod")

REPO_PLACEHOLDER = "REPO_URL"


def namespace(env: str) -> str:
    """The namespace an environment's jobs run in."""
    return f"training-{env}"


# --- overlays/ of the flatjob repository ----------------------------------------------

CM_HEADER = """\
argocd-cm additions for flatjob: the health of the job records (health.lua, one copy per
kind) and the one field changed in the cluster on purpose, an elastic record's
expectedReplicas (`kubectl scale`; git holds PodTemplates, never pods: docs/gitops.md).
Patch it in: kubectl -n argocd patch configmap argocd-cm --patch-file argocd-cm.yaml
(or list it in a kustomization, as kustomization.yaml here does; Helm users: put the data
entries under configs.cm in the argo-cd chart's values).
Generated from compiler/argocd.py; edit that and run pytest tests/test_argocd.py --update-golden."""

APP_HEADER = """\
An Argo CD Application for one environment's rendered output: CI runs `flatjob compile`
and commits rendered/<env>/, Argo CD applies it as plain kustomize. Replace REPO_URL.
ignoreDifferences + RespectIgnoreDifferences: `kubectl scale` owns an elastic record's
expectedReplicas, the one field git states that changes in the cluster (git holds
PodTemplates, never pods; the runtime creates the pods: docs/gitops.md).
Generated from compiler/argocd.py."""

PLUGIN_APP_HEADER = """\
An Argo CD Application that compiles the job specs in the repo-server with the flatjob
Config Management Plugin (install it first: kustomization.yaml here). It points at the
repository root; SOURCES and OVERLAY are relative to it. Replace REPO_URL.
Generated from compiler/argocd.py."""

FLUX_SOURCE_HEADER = """\
The repository Flux watches. Replace REPO_URL (and the branch); private repositories need
spec.secretRef. Generated from compiler/flux.py."""

FLUX_KS_HEADER = """\
A Flux Kustomization applying one environment's rendered output, with prune (a job removed
from git is deleted, its pods with its record). Git holds PodTemplates, never pods: flatjob's
runtime creates the pods, so Flux never creates, changes or prunes one. wait: true checks
the health of everything applied, so every job record in the folder and the runtime's
Deployment: nothing to list or update when jobs come and go. The healthCheckExprs
(Flux >= 2.5) read a record's status: starting, restarting or waiting for its runtime is in
progress, failed is failed, running, succeeded or paused is current.
Generated from compiler/flux.py."""

FLUX_IGNORE_HEADER = """\
Optional: lets `kubectl scale` change an elastic job's expectedReplicas without Flux putting
git's value back. Needs kustomize-controller's Kustomization .spec.ignore
(fluxcd/kustomize-controller#1627); on a Flux without it the apply fails with "field not
declared in schema": leave it out and scale by editing expectedReplicas in git.
Use it as a JSON patch of the Kustomization (see kustomization.yaml here).
Generated from compiler/flux.py."""


def overlay_files() -> dict[str, str]:
    """The generated files of the repository's overlays/argocd and overlays/flux."""
    prod = namespace("prod")
    return {
        "argocd/health.lua": argocd.HEALTH_LUA,
        "argocd/argocd-cm.yaml": yaml_file(CM_HEADER, argocd.argocd_cm()),
        "argocd/application.yaml": yaml_file(APP_HEADER, argocd.application("training-prod", REPO_PLACEHOLDER, "rendered/prod", prod)),
        "argocd/application-plugin.yaml": yaml_file(
            PLUGIN_APP_HEADER,
            argocd.application("training-prod", REPO_PLACEHOLDER, ".", prod, {"SOURCES": "jobs", "OVERLAY": "overlays/prod"}),
        ),
        "flux/gitrepository.yaml": yaml_file(FLUX_SOURCE_HEADER, flux.git_repository("training", REPO_PLACEHOLDER)),
        "flux/kustomization-prod.yaml": yaml_file(FLUX_KS_HEADER, flux.kustomization("training-prod", "training", "rendered/prod")),
        "flux/elastic-ignore-patch.yaml": yaml_file(FLUX_IGNORE_HEADER, flux.elastic_ignore()),
    }


# --- a new repository (flatjob init) ---------------------------------------------------

EXAMPLE_JOB = """\
# An example job: PyTorch DDP with one master and one worker, on CPU (gloo backend).
# flatjob sets MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK on every pod.
# Check it with `flatjob lint jobs/`; `flatjob explain PyTorchTrainingJob.spec` lists the fields.
apiVersion: batch.tensorstack.dev/v1beta1
kind: PyTorchTrainingJob
metadata:
  name: hello-ddp
spec:
  runPolicy:
    backoffLimit: 2
  replicaSpecs:
    - type: master
      replicas: 1
      restartPolicy: ExitCode
      template:
        spec:
          containers:
            - name: pytorch
              image: pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime
              command: [python, -c]
              args:
                - "import torch.distributed as d; d.init_process_group('gloo'); print('rank', d.get_rank(), 'of', d.get_world_size())"
              resources:
                requests: {cpu: 500m, memory: 1Gi}
                limits: {cpu: "1", memory: 1Gi}
    - type: worker
      replicas: 1
      restartPolicy: ExitCode
      template:
        spec:
          containers:
            - name: pytorch
              image: pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime
              command: [python, -c]
              args:
                - "import torch.distributed as d; d.init_process_group('gloo'); print('rank', d.get_rank(), 'of', d.get_world_size())"
              resources:
                requests: {cpu: 500m, memory: 1Gi}
                limits: {cpu: "1", memory: 1Gi}
"""

OVERLAYS = {
    "dev": """\
# The dev environment: every job runs in training-dev, labelled env=dev.
# Patches are written in T9k terms; lists merge by their keys (replicaSpecs by type,
# containers and env by name), so only what is written here changes. See flatjob's
# docs/overlays.md.
apiVersion: flatjob.dev/v1alpha1
kind: Overlay
namespace: training-dev
labels:
  env: dev
""",
    "prod": """\
# The prod environment: every job runs in training-prod, labelled env=prod, and the example
# job gets three workers. When you replace the example, retarget or remove its patch: a patch
# that selects no job changes nothing (compile warns FJ600; `target: {kind: ...}` selects by kind).
apiVersion: flatjob.dev/v1alpha1
kind: Overlay
namespace: training-prod
labels:
  env: prod
patches:
  - patch:
      kind: PyTorchTrainingJob
      metadata:
        name: hello-ddp
      spec:
        replicaSpecs:
          - type: worker
            replicas: 3
""",
}

WORKFLOW = """\
# Lint the job specs (annotations on the pull request), check that rendered/ is up to date
# for every environment in overlays/, and post the rendered diff on the pull request.
name: flatjob
on:
  pull_request:
  push:
    branches: [main]
permissions:
  contents: read
  pull-requests: write
jobs:
  flatjob:
    runs-on: ubuntu-24.04
    steps:
      - uses: actions/checkout@v4
      - uses: flatjob/flatjob@v{version}
        with:
          jobs: jobs
          overlays: overlays
          rendered: rendered
"""

GITIGNORE = """\
__pycache__/
*.sarif
"""


def compile_commands() -> list[str]:
    """The commands that bring rendered/ up to date, one per environment."""
    return [f"flatjob compile jobs/ --overlay overlays/{env} -o rendered/{env}" for env in ENVIRONMENTS]


def _readme(gitops: str, repo_url: str) -> str:
    compile_lines = "\n".join(compile_commands())
    connect = {
        "argocd": """\
## Connect Argo CD (once per cluster)

```sh
kubectl apply -k 'https://github.com/flatjob/flatjob//schemas/crds?ref=v{version}'  # the job record CRDs
# or, from the flatjob you installed (no network): flatjob schema -o /tmp/flatjob && kubectl apply -k /tmp/flatjob/crds
kubectl -n argocd patch configmap argocd-cm --patch-file gitops/argocd-cm.yaml
kubectl apply -f gitops/argocd/
```

`argocd-cm.yaml` adds the health check of the job records and tells Argo CD to ignore an
elastic record's expectedReplicas, which `kubectl scale` changes in the cluster; each
Application syncs `rendered/<env>` with ServerSideApply and RespectIgnoreDifferences. Git
holds each pod as a PodTemplate; flatjob's runtime creates the pods, so Argo CD never creates,
changes or prunes one.
""",
        "flux": """\
## Connect Flux (once per cluster)

```sh
kubectl apply -k 'https://github.com/flatjob/flatjob//schemas/crds?ref=v{version}'  # the job record CRDs
# or, from the flatjob you installed (no network): flatjob schema -o /tmp/flatjob && kubectl apply -k /tmp/flatjob/crds
kubectl apply -k gitops/flux/
```

This creates the namespaces, a GitRepository for this repository and one Kustomization per
environment (`rendered/<env>`, with prune). Git holds each pod as a PodTemplate, which Flux
applies like any other object; flatjob's runtime creates the pods from them, so Flux never
creates, changes or prunes a pod.
""",
        "none": """\
## Apply without a GitOps tool

```sh
kubectl apply -k 'https://github.com/flatjob/flatjob//schemas/crds?ref=v{version}'  # the job record CRDs
# or, from the flatjob you installed (no network): flatjob schema -o /tmp/flatjob && kubectl apply -k /tmp/flatjob/crds
kubectl apply --server-side -k rendered/dev  # server-side: objects over 256 KiB pass
```
""",
    }[gitops].format(version=__version__)
    return f"""\
# Training jobs

T9k training jobs, compiled by [flatjob](https://github.com/flatjob/flatjob) into plain
Kubernetes manifests that {dict(argocd="Argo CD", flux="Flux", none="kubectl")[gitops]} applies.
Repository: {repo_url}

| folder | what |
|---|---|
| `jobs/` | the job specs you edit (T9k's `batch.tensorstack.dev/v1beta1` kinds) |
| `overlays/<env>/overlay.yaml` | what differs per environment (namespace, replicas, images...) |
| `rendered/<env>/` | generated by `flatjob compile`; reviewed in pull requests, synced to the cluster |
| `.github/workflows/flatjob.yml` | CI: lint, check that `rendered/` is current, post the diff |
{"| `gitops/` | the " + dict(argocd="Argo CD", flux="Flux", none="")[gitops] + " objects that sync `rendered/<env>` |" if gitops != "none" else ""}

## Change a job

```sh
flatjob lint jobs/
{compile_lines}
git add -A && git commit
```

Never edit `rendered/` by hand: CI fails when it differs from what `flatjob compile` makes.

{connect}"""


def init_files(gitops: str, repo_url: str) -> dict[str, str]:
    """Every file of a new repository except rendered/ (compiled by init from these)."""
    files = {
        "README.md": _readme(gitops, repo_url),
        ".gitignore": GITIGNORE,
        "jobs/hello-ddp.yaml": EXAMPLE_JOB,
        ".github/workflows/flatjob.yml": WORKFLOW.format(version=__version__),
        **{f"overlays/{env}/overlay.yaml": text for env, text in OVERLAYS.items()},
    }
    files.update(_GITOPS[gitops](repo_url))
    return files


def _argocd(repo_url: str) -> dict[str, str]:
    apps = {
        f"gitops/argocd/{env}.yaml": yaml_file(
            f"Argo CD Application for {env}: syncs rendered/{env}.",
            argocd.application(f"training-{env}", repo_url, f"rendered/{env}", namespace(env)),
        )
        for env in ENVIRONMENTS
    }
    cm = yaml_file(
        "Patch once per Argo CD (not kubectl apply, which would replace its other settings):\n"
        "  kubectl -n argocd patch configmap argocd-cm --patch-file gitops/argocd-cm.yaml",
        argocd.argocd_cm(),
    )
    return {**apps, "gitops/argocd-cm.yaml": cm}


def _flux(repo_url: str) -> dict[str, str]:
    header = FLUX_SOURCE_HEADER if repo_url == REPO_PLACEHOLDER else FLUX_SOURCE_HEADER.replace("Replace REPO_URL (and the branch)", "Check the branch")
    files = {"gitops/flux/gitrepository.yaml": yaml_file(header, flux.git_repository("training", repo_url))}
    for env in ENVIRONMENTS:
        files[f"gitops/flux/{env}.yaml"] = yaml_file(FLUX_KS_HEADER, flux.kustomization(f"training-{env}", "training", f"rendered/{env}"))
        files[f"gitops/flux/namespace-{env}.yaml"] = yaml_file(
            f"Flux does not create namespaces: the {env} jobs run in this one.",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace(env)}},
        )
    names = sorted(n.rsplit("/", 1)[1] for n in files)
    files["gitops/flux/kustomization.yaml"] = "# kubectl apply -k gitops/flux\nresources:\n" + "".join(f"  - {n}\n" for n in names)
    return files


_GITOPS = {"argocd": _argocd, "flux": _flux, "none": lambda _url: {}}
