"""The job's SSH key pair, generated in the cluster into a Secret (never rendered, never in git).

ed25519, in OpenSSH formats; the Secret is of type kubernetes.io/ssh-auth, owned by the job
record (deleting the record deletes it), with authorized_keys for sshd.
"""

from __future__ import annotations

from typing import Any

from flatjob.compiler import keys


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
