"""The job's SSH key pair and Secret (runtime.sshkeys), generated in the cluster, never in git.

- an OpenSSH ed25519 private key whose public half is the public key line we return;
- a fresh pair every time;
- the Secret: type kubernetes.io/ssh-auth, owned by the record (controller reference), with
  the keys sshd and ssh need.
"""

from __future__ import annotations

from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from flatjob.compiler import keys
from flatjob.runtime.sshkeys import generate_key_pair, ssh_secret

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
