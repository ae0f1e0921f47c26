"""The job's SSH key pair, generated in the cluster into a Secret (never rendered, never in git).

ed25519, in OpenSSH formats; the Secret is of type kubernetes.io/ssh-auth, owned by the job
record (deleting the record deletes it), with authorized_keys for sshd.

A `<job>-ssh` Secret the runtime did not make is never used: anyone who may create Secrets in
the namespace could make one first, and every pod would trust that person's key.  An
ownerReference proves nothing (anyone may write one, with the record's uid, which anyone who
reads the record knows), so the runtime trusts the Secret by its uid: the one its own create
returned (kept in memory, and in the ledger as `sshSecretUid`, for the next runtime).  A job
whose pods ran before the ledger kept that uid takes its Secret by the controller
ownerReference to the record's uid, as before.  Anything else is a ForeignSecret: an Event and
a Stalled condition, and no pod is released until it is deleted; the runtime then makes a
fresh pair.  One with the record's controller ownerReference but no uid on record, while no
pod of the job has run, is replaced instead (worker._replace_unproven_secret): nothing trusts
it yet, and a runtime restarted between creating it and writing the ledger leaves just that.  A Secret the job names itself (flatjob.dev/ssh-secret)
is the job author's choice, and used as it is.
"""

from __future__ import annotations

from typing import Any

from flatjob.compiler import keys

from .job import RecordError


class ForeignSecret(RecordError):
    """The job's own SSH Secret exists, but its record did not make it (the runtime refuses)."""

    reason = "ForeignSecret"


def owned_by(obj: dict[str, Any] | None, record: dict[str, Any]) -> bool:
    """Whether an object (trimmed or not) has a controller ownerReference to the record's uid."""
    uid = (record.get("metadata") or {}).get("uid")
    refs = ((obj or {}).get("metadata") or {}).get("ownerReferences")
    return bool(uid) and isinstance(refs, list) and any(isinstance(r, dict) and r.get("uid") == uid and r.get("controller") is True for r in refs)


def foreign_secret(name: str, secret: dict[str, Any] | None, record: dict[str, Any], trusted: str | None = None, ran: bool = False) -> ForeignSecret | None:
    """The refusal for an existing `<job>-ssh` Secret the runtime did not create, else None
    (`trusted`: the uid of the Secret the runtime created, when it knows it; `ran`: pods of the
    job were released before, by a runtime that may not have kept that uid)."""
    if secret is None:
        return None
    uid = (secret.get("metadata") or {}).get("uid")
    if trusted is not None:
        if uid == trusted:
            return None
        why = f"its uid is {uid}, and the Secret this job's runtime created was {trusted}"
    elif ran and owned_by(secret, record):
        return None
    else:
        why = "this job's runtime has no record of creating it; an ownerReference to the record proves nothing, anyone may write one"
    return ForeignSecret(
        f"Secret {name} exists but was not created by this job's runtime ({why}): its key would let whoever made it into every pod "
        "of the job, so no pod is released; delete the Secret and the runtime makes a fresh key pair"
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
        "stringData": {"ssh-privatekey": private, "ssh-publickey": public, "authorized_keys": public},
    }
