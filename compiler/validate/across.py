"""Checks across jobs, the same in lint and compile: what only the set of inputs can show.

- FJ315: two jobs with one namespace and name (they would share an output folder and a record);
- FJ323: two jobs whose objects share a kind, namespace and name (job `a` with replica type
  `b-c` and job `a-b` with type `c` both render pod `a-b-c-0`; job `a-tensorboard`'s Service
  is job `a`'s TensorBoard Service; a GenericJob with spec.service has a Service per pod,
  named as the pod, which a job of that name would also have);
- FJ105: more pods in all than flatjob renders in one run;
- FJ345 (compile, namespace runtime): jobs without a namespace beside jobs in `default`, with no
  -n: each set gets a runtime named `flatjob`, and both land in `default` when applied as they
  are (kustomize refuses the folder: "already registered id").

Only Pods and Services can collide between jobs of different names: every other object is
`<job>-<suffix>` with a suffix no other kind of object ends in (`-config`, `-runtime`; the
TensorBoard Deployment's `-tensorboard` is no Deployment's other suffix), or the job's own
name (the PodGroup, the record), which FJ315 covers.  tests/test_validate_across.py checks
object_names against what is rendered.  Jobs without a namespace land in the run's default
one (compile -n, the Argo CD plugin's): with it they are compared with the jobs that set that
namespace (before issue 21 they were not, and job `x` rendered twice); without it, with the
jobs that set `default`, where applying them as they are puts them (as FJ345 has it; before
issue 21's last round job `x` of `default` with type `a-worker` and job `x-a` without a
namespace both rendered PodTemplate `x-a-worker-0` and lint said nothing).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..errors import Diagnostic
from ..limits import DEFAULT as DEFAULT_LIMITS
from ..loader import Document, PathT
from ..podset import object_names, pod_counts

# Where a job that sets no namespace lands when the run names none: applied as it is (kubectl
# apply, a GitOps tool without a destination namespace), the API server's `default`.
APPLIED_AS_IS = "default"


def job_key(job: Any, default: str | None = None) -> str:
    """`namespace/name`, or `name` when the job lands in no namespace flatjob knows: its own,
    else the run's default (-n, the Argo CD Application's)."""
    ns = job.metadata.namespace or default
    return f"{ns}/{job.metadata.name}" if ns else job.metadata.name


def check_across(jobs: Iterable[tuple[Document, Any]], namespace: str | None = None) -> list[Diagnostic]:
    """Every finding across the jobs, in input order; later jobs are reported, not the first.

    `namespace` is where jobs that set none land (compile -n, the Argo CD plugin's
    ARGOCD_APP_NAMESPACE; without it APPLIED_AS_IS): job `x` and job `x` of namespace `team`
    are one job under -n team, and job `x` and job `x` of `default` are one job without -n.
    """
    jobs = list(jobs)
    landing = namespace or APPLIED_AS_IS
    found = duplicate_jobs(jobs, landing) + run_size(jobs)
    if not found:  # the objects of a job that is there twice, or of a run too big, are not compared
        found += name_collisions(jobs, landing)
    return found


def duplicate_jobs(jobs: Iterable[tuple[Document, Any]], namespace: str | None = None) -> list[Diagnostic]:
    """FJ315 at the name of every job whose namespace and name an earlier job already has."""
    seen: dict[str, tuple[Document, Any]] = {}
    out: list[Diagnostic] = []
    for doc, job in jobs:
        first, first_job = seen.setdefault(job_key(job, namespace), (doc, job))
        if first is not doc:
            said = job.metadata.namespace or first_job.metadata.namespace or (namespace if namespace != APPLIED_AS_IS else None)
            where = f" in namespace {said!r}" if said else ""  # two jobs that set none: as before
            line = first.locate(("metadata", "name")).line
            at = f"at line {line}" if first.path == doc.path else f"in {first.path}:{line}"
            out.append(doc.diagnostic("FJ315", f"job {job.metadata.name!r}{where} is also defined {at}; names must be unique per namespace", ("metadata", "name"), hint="rename one of them"))
    return out


def name_collisions(jobs: Iterable[tuple[Document, Any]], namespace: str | None = None) -> list[Diagnostic]:
    """FJ323 where a job renders an object an earlier job in its namespace already renders."""
    owners: dict[tuple[str, str, str], tuple[Document, Any]] = {}
    out: list[Diagnostic] = []
    for doc, job in jobs:
        ns = job.metadata.namespace or namespace or ""
        for kind, name, path in object_names(job):
            first_doc, first = owners.setdefault((ns, kind, name), (doc, job))
            if first is not job:
                line = first_doc.locate(("metadata", "name")).line
                at = f"line {line}" if first_doc.path == doc.path else f"{first_doc.path}:{line}"
                out.append(doc.diagnostic("FJ323", f"{kind} {name!r} is also rendered by job {first.metadata.name!r} ({at})", path if _exists(doc, path) else ("metadata", "name"), hint="rename one of the jobs or replica types"))
                break  # one finding per pair of jobs is enough
    return out


def _exists(doc: Document, path: PathT) -> bool:
    return tuple(path) in doc.value_marks


def run_size(jobs: Iterable[tuple[Document, Any]]) -> list[Diagnostic]:
    """FJ105 at the job whose pods take the run past limits.run_pods."""
    total = 0
    for doc, job in jobs:
        total += sum(pod_counts(job).values())
        if total > DEFAULT_LIMITS.run_pods:
            return [doc.diagnostic("FJ105", f"the jobs read so far render {total:,} pods, more than the {DEFAULT_LIMITS.run_pods:,} flatjob renders in one run", ("metadata", "name"), hint="compile the folders separately")]
    return []


def runtime_namespaces(jobs: Iterable[tuple[Document, Any]], namespace: str | None, runtime: str) -> list[Diagnostic]:
    """FJ345 at the name of each job without a namespace, in namespace mode without -n, when
    other jobs set namespace `default`: two namespace runtimes would be `flatjob` in one namespace."""
    if runtime != "namespace" or namespace is not None:
        return []
    jobs = list(jobs)
    explicit = next((doc for doc, job in jobs if job.metadata.namespace == "default"), None)
    if explicit is None:
        return []
    at = f"{explicit.path}:{explicit.locate(('metadata', 'namespace')).line}"
    return [doc.diagnostic("FJ345", f"job {job.metadata.name!r} sets no namespace while a job sets namespace 'default' ({at}): each would get a runtime `flatjob` in namespace default",
                           ("metadata", "name"), hint="compile with -n default (or the namespace these jobs land in), or set a namespace on every job")
            for doc, job in jobs if not job.metadata.namespace]
