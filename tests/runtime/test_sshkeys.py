"""The job's SSH key pair and Secret (runtime.sshkeys), generated in the cluster, never in git.

- an OpenSSH ed25519 private key whose public half is the public key line we return;
- a fresh pair every time;
- the Secret: type kubernetes.io/ssh-auth, owned by the record (controller reference),
  immutable, with the keys sshd and ssh need;
- which `<job>-ssh` the runtime trusts (a decision table): the uid its own create returned,
  else a released pod of the job no older than the Secret; the status's uid only refuses.
"""

from __future__ import annotations

from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from flatjob.compiler import keys
from flatjob.runtime.sshkeys import foreign_secret, generate_key_pair, newest_release, ssh_secret

RECORD: dict[str, Any] = {
    "apiVersion": "flatjob.dev/v1beta1",
    "kind": "DeepSpeedJob",
    "metadata": {"name": "ds", "namespace": "team", "uid": "uid-record"},
}


def test_key_pair_is_openssh_ed25519_and_matches() -> None:
    private_text, public_line = generate_key_pair("flatjob-ds")
    assert private_text.startswith("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    assert private_text.rstrip().endswith("-----END OPENSSH PRIVATE KEY-----")
    private = serialization.load_ssh_private_key(private_text.encode(), password=None)
    assert isinstance(private, Ed25519PrivateKey)

    kind, blob, comment = public_line.rstrip("\n").split(" ")
    assert (kind, comment) == ("ssh-ed25519", "flatjob-ds")
    assert public_line.endswith("\n")
    public = serialization.load_ssh_public_key(f"{kind} {blob}".encode())
    assert isinstance(public, Ed25519PublicKey)
    raw = serialization.Encoding.Raw, serialization.PublicFormat.Raw
    assert private.public_key().public_bytes(*raw) == public.public_bytes(*raw)

    message = b"flatjob"
    public.verify(private.sign(message), message)  # raises if they do not belong together


def test_every_pair_is_new() -> None:
    assert generate_key_pair("a")[0] != generate_key_pair("a")[0]


def test_secret_is_ssh_auth_owned_by_the_record() -> None:
    secret = ssh_secret("ds-ssh", "team", RECORD)
    assert secret["type"] == "kubernetes.io/ssh-auth"
    assert secret["metadata"]["name"] == "ds-ssh" and secret["metadata"]["namespace"] == "team"
    assert secret["metadata"]["ownerReferences"] == [
        {"apiVersion": "flatjob.dev/v1beta1", "kind": "DeepSpeedJob", "name": "ds", "uid": "uid-record", "controller": True},
    ]
    assert secret["immutable"] is True
    assert secret["metadata"]["labels"] == {keys.JOB_NAME: "ds", keys.APP_MANAGED_BY: keys.MANAGED_BY_VALUE}
    data = secret["stringData"]
    assert set(data) == {"ssh-privatekey", "ssh-publickey", "authorized_keys"}
    assert data["authorized_keys"] == data["ssh-publickey"]
    private = serialization.load_ssh_private_key(data["ssh-privatekey"].encode(), password=None)
    public = serialization.load_ssh_public_key(" ".join(data["ssh-publickey"].split()[:2]).encode())
    raw = serialization.Encoding.Raw, serialization.PublicFormat.Raw
    assert private.public_key().public_bytes(*raw) == public.public_bytes(*raw)


def test_a_record_without_uid_gets_no_dangling_owner_reference() -> None:
    record = {**RECORD, "metadata": {"name": "ds"}}
    assert ssh_secret("ds-ssh", "team", record)["metadata"]["ownerReferences"] == []


OWNER = [{"uid": "uid-record", "controller": True}]


def _secret(uid: str, made: str, owners: list[dict[str, Any]] = OWNER) -> dict[str, Any]:
    return {"metadata": {"name": "ds-ssh", "uid": uid, "creationTimestamp": made, "ownerReferences": owners}}


def _pod(made: str, gated: bool = False, owners: list[dict[str, Any]] = OWNER) -> dict[str, Any]:
    spec = {"schedulingGates": [{"name": keys.RELEASE_GATE}]} if gated else {}
    return {"metadata": {"creationTimestamp": made, "ownerReferences": owners}, "spec": spec}


T0, T1, T2 = "2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z", "2026-01-01T00:05:00Z"


@pytest.mark.parametrize(
    ("secret", "trusted", "pods", "kept", "refused"),
    [
        (_secret("s1", T0), "s1", [], None, False),  # this process made it
        (_secret("s2", T0), "s1", [_pod(T1)], "s2", True),  # not the one this process made, whatever else vouches
        (_secret("s1", T0), None, [_pod(T1)], "s1", False),  # restarted: a released pod no older vouches
        (_secret("s1", T1), None, [_pod(T1)], None, False),  # same second: the runtime makes its Secret first
        (_secret("s1", T0), None, [_pod(T1)], None, False),  # an older ledger without the uid
        (_secret("s2", T2), None, [_pod(T1)], "s2", True),  # swapped in after the pods, status edited to match
        (_secret("s2", T0), None, [_pod(T1)], "s1", True),  # the status names another: it can only refuse
        (_secret("s1", T0), None, [_pod(T1, gated=True)], "s1", True),  # a gated pod vouches for nothing
        (_secret("s1", T0), None, [_pod(T1, owners=[{"uid": "x", "controller": True}])], "s1", True),  # nor another owner's
        (_secret("s1", T0, owners=[]), None, [_pod(T1)], "s1", True),  # the runtime's own always has the reference
        (_secret("s1", T0), None, [], "s1", True),  # nothing vouches (the worker replaces it instead)
        (None, None, [], None, False),  # nothing to refuse: the runtime makes one
    ],
)
def test_which_ssh_secret_the_runtime_trusts(secret: dict[str, Any] | None, trusted: str | None, pods: list[dict[str, Any]],
                                             kept: str | None, refused: bool) -> None:
    witness = newest_release(pods, RECORD)
    assert (foreign_secret("ds-ssh", secret, RECORD, trusted, witness, kept) is not None) is refused


def test_the_newest_released_pod_is_the_witness() -> None:
    pods = [_pod(T0), _pod(T2, gated=True), _pod(T1), {"metadata": {"creationTimestamp": "junk", "ownerReferences": OWNER}}]
    assert newest_release(pods, RECORD) == newest_release([_pod(T1)], RECORD) and newest_release([], RECORD) is None
