"""The job's SSH key pair, generated in the cluster into a Secret (never rendered, never in git).

ed25519, in OpenSSH formats; the Secret is of type kubernetes.io/ssh-auth, owned by the job
record (deleting the record deletes it), with authorized_keys for sshd, and immutable: a
kubelet stops watching an immutable Secret once a pod has it
(pkg/kubelet/util/manager/watch_based_manager.go, objectCache.Get), so a Secret deleted and
made again under the same name never reaches pods already running.

A `<job>-ssh` Secret the runtime did not make is never used: anyone who may create Secrets in
the namespace could make one first, and every pod would trust that person's key.  An
ownerReference proves nothing (anyone may write one, with the record's uid, which anyone who
reads the record knows), and nor does the record's status (`sshSecretUid`: anyone who may
update the status may write it).  What proves a Secret is the runtime's own: the uid its
create returned, or, when it carries the record's controller ownerReference, a pod of the job
that a runtime released with it (after a restart, or a Lease handed between runtime
processes), which carries its uid (SSH_SECRET_UID, written in the patch that removes the
pod's gate; only those who may create or update pods can forge one, and they may mount the
Secret anyway).  While no released pod carries one, pods released by an older runtime vouch
by their age instead: a Secret made in an earlier second than one of them (creation times are
the API server's, to the second).  A Secret with the record's ownerReference that this
process did not make and no released pod vouches for is one nothing that runs was released
with: it is replaced (worker._replace_unproven_secret: deleted by its uid, made again), which
covers one planted with a forged reference, one swapped in while the runtime was away, and a
runtime restarted between making it and releasing a pod; meanwhile no pod is created or
released (SecretReplacing), and one that cannot be deleted is said (SecretNotReplaced).  One without the reference is a
ForeignSecret (a Secret that does not claim to be the record's is not the runtime's to
delete): an Event and a Stalled condition, and no pod is created or released until it is
deleted; every other decision goes on.  A Secret the job
names itself (flatjob.dev/ssh-secret, even under the default name) is the job author's
choice, and used as it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from flatjob.compiler import keys

from .job import RecordError, gated
from .observe import seconds


class ForeignSecret(RecordError):
    """The job's own `<job>-ssh` exists, lacks the record's ownerReference, and nothing proves the
    runtime made it: no pod is created or released until it is deleted; every other decision goes on."""

    reason = "ForeignSecret"
    quiet = False  # said on the record (Stalled) and in an Event


class SecretReplacing(ForeignSecret):
    """An unproven `<job>-ssh` (module docstring) whose deletion was just asked for: creating and
    releasing pods waits for its fresh replacement, quietly; every other decision goes on."""

    reason = "SecretReplaced"
    quiet = True


class SecretNotReplaced(ForeignSecret):
    """An unproven `<job>-ssh` that cannot be deleted (a webhook or RBAC refuses, or a finalizer
    holds it): said on the record and in an Event, as a ForeignSecret is, till it goes."""

    reason = "SecretNotReplaced"


def controller_ref(obj: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """An object's controller ownerReference (the API server allows one), or None."""
    refs = ((obj or {}).get("metadata") or {}).get("ownerReferences")
    return next((r for r in refs if isinstance(r, Mapping) and r.get("controller") is True), None) if isinstance(refs, list) else None


def owned_by(obj: dict[str, Any] | None, record: dict[str, Any]) -> bool:
    """Whether an object (trimmed or not) has a controller ownerReference to the record's uid."""
    uid = (record.get("metadata") or {}).get("uid")
    return bool(uid) and (controller_ref(obj) or {}).get("uid") == uid


def vouched(pods: Iterable[dict[str, Any]], record: dict[str, Any], secret: dict[str, Any]) -> bool:
    """Whether a pod of the job that the runtime released vouches for this Secret: one carries
    its uid, or, when none carries any (released by a runtime before pods carried it), one was
    made in a later second than the Secret."""
    meta = secret.get("metadata") or {}
    released = [p for p in pods if owned_by(p, record) and not gated(p)]
    marks = {((p.get("metadata") or {}).get("annotations") or {}).get(keys.SSH_SECRET_UID) for p in released} - {None}
    if marks:
        return meta.get("uid") in marks
    made = seconds(meta.get("creationTimestamp"))  # strictly older: one swapped in the pods' own second proves nothing
    stamps = [seconds((p.get("metadata") or {}).get("creationTimestamp")) for p in released]
    return made is not None and any(s is not None and made < s for s in stamps)


def _meta_name(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name"))


def _namesake_owner(secret: dict[str, Any], record: dict[str, Any]) -> str | None:
    """`<Kind> <name>` when the Secret's controller ownerReference is a record of another kind and
    the same name (a namesake from another folder made it), else None."""
    ref = controller_ref(secret)
    meta = record.get("metadata") or {}
    if ref is None or ref.get("name") != meta.get("name") or ref.get("kind") == record.get("kind") or ref.get("uid") == meta.get("uid"):
        return None
    return f"{str(ref.get('kind'))[:64]} {ref.get('name')}"


def foreign_secret(name: str, secret: dict[str, Any] | None, record: dict[str, Any], trusted: str | None, vouch: bool) -> ForeignSecret | None:
    """The refusal for an existing `<job>-ssh` Secret the runtime did not create, else None
    (`trusted`: the uid this runtime process's create returned, if it made one; `vouch`: a
    released pod of the job vouches for it, as after another runtime process made it)."""
    if secret is None:
        return None
    uid = (secret.get("metadata") or {}).get("uid")
    if uid == trusted or (vouch and owned_by(secret, record)):
        return None
    why = ("it lacks the record's controller ownerReference, which the runtime's own always has" if not owned_by(secret, record)
           else "this runtime process did not make it and no pod of the job was released with it")
    owner = _namesake_owner(secret, record)
    if owner:  # deleting it would take the key from under the other job's pods
        return ForeignSecret(
            f"Secret {name} is owned by {owner}, another job named {_meta_name(record)} in this namespace (its pods, Service, Secret and PodGroup "
            "have this job's names too): its key is not this job's, so no pod is released; rename one of the jobs, or delete the other"
        )
    return ForeignSecret(
        f"Secret {name} exists but was not created by this job's runtime ({why}): its key would let whoever made it into every pod "
        "of the job, so no pod is released; delete the Secret and the runtime makes a fresh key pair (or, if the job names it itself "
        "with flatjob.dev/ssh-secret, compile its PodTemplates again with this flatjob version: those say so)"
    )


def generate_key_pair(comment: str) -> tuple[str, str]:
    """A fresh ed25519 key pair: (OpenSSH private key, public key line)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    private = Ed25519PrivateKey.generate()
    private_text = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()).decode()
    public = private.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    return private_text, f"{public} {comment}\n"


def ssh_secret(name: str, namespace: str, record: dict[str, Any]) -> dict[str, Any]:
    """The Secret body for a job's key pair, owned by its record."""
    meta = record.get("metadata") or {}
    private, public = generate_key_pair(f"flatjob-{meta.get('name')}")
    owner = {"apiVersion": record.get("apiVersion"), "kind": record.get("kind"), "name": meta.get("name"), "uid": meta.get("uid"), "controller": True}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/ssh-auth",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {keys.JOB_NAME: meta.get("name", ""), keys.APP_MANAGED_BY: keys.MANAGED_BY_VALUE},
            "ownerReferences": [owner] if owner["uid"] else [],
        },
        "immutable": True,  # a Secret swapped in later never reaches a running pod (module docstring)
        "stringData": {"ssh-privatekey": private, "ssh-publickey": public, "authorized_keys": public},
    }
