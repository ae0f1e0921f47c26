"""Another job of the same name in the namespace: a job of another kind (a PyTorchTrainingJob
`x` beside a DeepSpeedJob `x`), compiled from another folder, so that compile's check across
jobs (FJ315) never saw both.

A job's pods, its PodTemplates, its Service, its `<job>-ssh` Secret and its PodGroup are named
after the job's name alone, as T9k names them; two jobs of one name share every one of those
names.  The rule (docs/runtime.md, "Two jobs of one name"): a job never touches, adopts or
trusts an object of its namesake's.  Its pods are told apart by their kind label and their
controller ownerReference (the record's uid); its PodGroup by the kind it is labelled for; its
Secret by its ownerReference.  The job that finds its namesake's pods holding its pod names
creates and releases no pod, says so (Stalled, reason NameTaken, and a Warning Event), and
runs once they are gone (the controller wakes it as its namesake's pods change); everything
else goes on (its outcome, deadlines, clean-up).

Two jobs can each hold a name of the other's: served by runtimes of different modes (neither
caches the other's pods), each creates its gang in its own order (a GenericJob's replicaSpecs
in theirs, a PyTorchTrainingJob's master first) and stops at the first name the other holds;
every pod either holds is gated and waits for a gang that cannot start, so neither ever ran.
So a job whose names are taken before it released its gang gives way: the pods it created for
that gang are deleted (decisions.reconcile, as after a refused create), freeing their names
for the other job.  A job whose PodTemplates the other folder's apply took (its view out of
step, job.problem) creates nothing, so it never meets the other's pods to learn that its own
hold their names: it deletes those of its gated pods whose PodTemplate went from its view
(release.given_back), the very names the other job rendered.  No precedence between the two: a rule by the records' uids deadlocked
again where only part of the other job is known (a namesake running on, whose replacement's
name this job took while it was free, NameTaken in turn and never releasing the replacement
of its own that this job meets).  Should both give way at once, each tries again when the
names it waits for change or are read free, at its own time, and the first to try runs.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from typing import Any

from flatjob.compiler import keys

from .sshkeys import ForeignSecret, controller_ref

Obj = dict[str, Any]
SHOWN = 3  # pod names a message lists


class NameTaken(ForeignSecret):
    """The job's pod names (or its PodGroup) are held by a namesake of another kind: no pod is
    created or released until they are free; every other decision goes on."""

    reason = "NameTaken"


RULE = ("a job's pods, PodTemplates, Service, SSH Secret and PodGroup are named after the job alone, so two jobs of one name cannot both "
        "run in a namespace, whatever their kinds (compile refuses them in one folder, FJ315, but cannot see another folder)")


def _owner_uid(obj: Mapping[str, Any]) -> str | None:
    return (controller_ref(obj) or {}).get("uid")


def _listed(names: Iterable[str]) -> str:
    names = sorted(names)
    more = f" and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
    return ", ".join(names[:SHOWN]) + more


def pods_taken(kind: str, name: str, namespace: str, record_uid: str | None, wanted: Container[str],
               namesakes: Mapping[str, Mapping[str, Obj]]) -> NameTaken | None:
    """The refusal when pods of a namesake (`namesakes`: another kind -> its pods by name, of the
    job's own name) hold any of the names this job's pods need (`wanted`), else None.  A pod the
    record itself controls (by uid) is never the namesake's, whatever its labels say."""
    for other in sorted(namesakes):
        held = {n for n, p in namesakes[other].items() if n in wanted and _owner_uid(p) != record_uid}
        if held:
            owners = sorted({u for n in held if (u := _owner_uid(namesakes[other][n]))})
            whose = (f" (owned by its record, uid {owners[0]})" if len(owners) == 1 else
                     "" if owners else " (by its labels alone: no record owns it, so no runtime made it)")
            return NameTaken(
                f"{'pod' if len(held) == 1 else 'pods'} {_listed(held)} {'belongs' if len(held) == 1 else 'belong'} to {other} {name}{whose}, another job named {name} in namespace {namespace}: {RULE}; "
                f"this {kind} creates and releases no pod while that job's pods hold its pod names (the pods of a gang it has not started are deleted, "
                "freeing their names), and never touches them; rename one of the jobs"
            )
    return None


def podgroup_taken(kind: str, name: str, group: Mapping[str, Any] | None) -> NameTaken | None:
    """The refusal when the PodGroup `name` this job's pods join is labelled for another kind
    (app.kubernetes.io/name, which compile writes on it): a namesake's gang, with its minMember."""
    labels = ((group or {}).get("metadata") or {}).get("labels") or {}
    label = labels.get(keys.APP_NAME)
    if not isinstance(label, str) or label == kind.lower():
        return None
    other = next((k for k in keys.RECORD_PLURALS if k.lower() == label), label)
    return NameTaken(
        f"PodGroup {name} is labelled for {other} {name} ({keys.APP_NAME}={label}), another job named {name}: {RULE}; "
        f"this {kind} creates and releases no pod into another job's gang (the pods of a gang it has not started are deleted); rename one of the jobs"
    )
