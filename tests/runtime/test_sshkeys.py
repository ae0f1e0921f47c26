"""The job's SSH key pair and Secret (runtime.sshkeys), generated in the cluster, never in git.

- an OpenSSH ed25519 private key whose public half is the public key line we return;
- a fresh pair every time;
- the Secret: type kubernetes.io/ssh-auth, owned by the record (controller reference),
  immutable, with the keys sshd and ssh need;
- which `<job>-ssh` the runtime trusts (decision tables): the uid its own create returned, else
  with the record's controller ownerReference, a pod of the job released with it (its uid on
  the pod; by age only while no released pod carries a uid).
"""

from __future__ import annotations

from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from flatjob.compiler import keys
from flatjob.runtime.sshkeys import foreign_secret, generate_key_pair, ssh_secret, vouched

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


def _secret(uid: str, made: str = "2026-01-01T00:00:01Z", owners: list[dict[str, Any]] = OWNER) -> dict[str, Any]:
    return {"metadata": {"name": "ds-ssh", "uid": uid, "creationTimestamp": made, "ownerReferences": owners}}


def _pod(mark: str | None, made: str = "2026-01-01T00:00:01Z", gated: bool = False, owners: list[dict[str, Any]] = OWNER) -> dict[str, Any]:
    spec = {"schedulingGates": [{"name": keys.RELEASE_GATE}]} if gated else {}
    notes = {keys.ATTEMPT: "1", **({keys.SSH_SECRET_UID: mark} if mark else {})}
    return {"metadata": {"creationTimestamp": made, "ownerReferences": owners, "annotations": notes}, "spec": spec}


T0, T1, T2 = "2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z", "2026-01-01T00:05:00Z"


@pytest.mark.parametrize(
    ("pods", "secret", "vouch"),
    [
        ([_pod("s1")], _secret("s1"), True),  # released with it
        ([_pod("s1"), _pod("s2")], _secret("s2"), True),  # a pod released after the runtime made a fresh pair
        ([_pod("s1")], _secret("s2", made=T0), False),  # swapped in, even in the same second or earlier: the uid decides
        ([_pod("s1", gated=True)], _secret("s1"), False),  # a gated pod was released with nothing
        ([_pod("s1", owners=[{"uid": "x", "controller": True}])], _secret("s1"), False),  # another owner's pod
        ([], _secret("s1"), False),  # no released pod
        ([_pod(None, made=T1)], _secret("s1", made=T0), True),  # released before pods carried the uid: by age
        ([_pod(None, made=T1)], _secret("s1", made=T1), False),  # the same second proves nothing: a swap could be in it
        ([_pod(None, made=T1)], _secret("s1", made=T2), False),  # newer than every such pod
        ([_pod(None, made=T2), _pod("s1")], _secret("s9", made=T0), False),  # once any pod carries a uid, only the uid counts
    ],
)
def test_which_released_pods_vouch_for_a_secret(pods: list[dict[str, Any]], secret: dict[str, Any], vouch: bool) -> None:
    assert vouched(pods, RECORD, secret) is vouch


@pytest.mark.parametrize(
    ("secret", "trusted", "vouch", "refused"),
    [
        (_secret("s1"), "s1", False, False),  # this process made it
        (_secret("s2"), "s1", True, False),  # another runtime process made it (a Lease handed over), and released pods with it
        (_secret("s2"), "s1", False, True),  # not the one this process made, and no pod was released with it
        (_secret("s1"), None, True, False),  # restarted: a released pod vouches
        (_secret("s1", owners=[]), None, True, True),  # the runtime's own always has the reference
        (_secret("s1"), None, False, True),  # nothing vouches (with the reference, the worker replaces it first)
        (None, None, False, False),  # nothing to refuse: the runtime makes one
    ],
)
def test_which_ssh_secret_the_runtime_trusts(secret: dict[str, Any] | None, trusted: str | None, vouch: bool, refused: bool) -> None:
    assert (foreign_secret("ds-ssh", secret, RECORD, trusted, vouch) is not None) is refused
