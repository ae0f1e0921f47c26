"""The runtime's Role is exactly what it uses: every request it makes is allowed, every rule is used.

The Role (compiler/render/runtime.py, rendered into runtime.yaml) is checked with RBAC's own
matching rules (k8s.io/apiserver/pkg/authorization, rbac/v1 PolicyRule): apiGroups,
resources with subresources, verbs, and resourceNames, which a create never satisfies and a
list or watch satisfies only through a `metadata.name` field selector
(k8s.io/apiserver/pkg/endpoints/request/requestinfo.go).  The requests are those the runtime
really sends to the fake API server while an SSH-launched job with a PodGroup, a Lease, a
restart and a clean-up runs to its end.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import parse_qs

import pytest

from flatjob.runtime.sim.kubelet import until_deleted

from .harness import NAMESPACE, REAL, Scenario
from .test_scenarios import DEEPSPEED, _launcher_fails_once

pytestmark = [pytest.mark.skipif(REAL, reason="reads the fake API server's request log"), pytest.mark.usefixtures("runtime_mode")]  # each test in both runtime modes

JOB = DEEPSPEED.replace("spec:\n  config:", "spec:\n  scheduler:\n    t9kScheduler:\n      queue: default\n  runPolicy:\n    cleanUpPolicy: All\n    backoffLimit: 2\n  config:", 1).replace("  runPolicy:\n    backoffLimit: 2\n  worker:", "  worker:")


def _split(resource: str) -> tuple[str, str]:
    """The server log's `plural[.group][/sub]` as (group, plural[/sub])."""
    head, _, sub = resource.partition("/")
    plural, _, group = head.partition(".")
    return group, plural + (f"/{sub}" if sub else "")


def _name(verb: str, name: str | None, query: str) -> str | None:
    if verb in ("list", "watch"):
        selector = (parse_qs(query).get("fieldSelector") or [""])[0]
        return selector[len("metadata.name="):] if selector.startswith("metadata.name=") else None
    return name


def allowed(rules: list[dict[str, Any]], verb: str, group: str, resource: str, name: str | None) -> dict[str, Any] | None:
    """The first rule that allows the request (RBAC's PolicyRule matching), or None."""
    for rule in rules:
        if group not in rule["apiGroups"] or resource not in rule["resources"] or verb not in rule["verbs"]:
            continue
        names = rule.get("resourceNames")
        if names and (verb == "create" or name not in names):
            continue
        return rule
    return None


@pytest.mark.parametrize("named", [None, "ds-ssh", "my-keys"], ids=["its-own-secret", "named-under-the-default-name", "named"])
def test_every_request_of_the_runtime_is_allowed_and_every_rule_is_used(named: str | None) -> None:
    """Exactly the verbs the runtime uses: with its own Secret, create and (to replace a planted
    one) delete; with a Secret the job names (flatjob.dev/ssh-secret), even `<job>-ssh`, reads
    only (review: the Role granted delete on the author's own Secret)."""
    s = Scenario(JOB if named is None else JOB.replace("  name: ds\n", f"  name: ds\n  annotations:\n    flatjob.dev/ssh-secret: {named}\n", 1))
    role = next(o for o in s.manifests if o["kind"] == "Role")
    s.kubelet.behaviors["ds-worker-0"] = _launcher_fails_once
    for name in ("ds-worker-1", "ds-worker-2"):
        s.kubelet.behaviors[name] = until_deleted
    s.controller.close()
    record = s.cluster.record(NAMESPACE, s.kind.lower() + "s", s.name)  # its own: a Secret planted with a forged ownerReference, replaced (delete)
    owner = {"apiVersion": record["apiVersion"], "kind": record["kind"], "name": s.name, "uid": record["metadata"]["uid"], "controller": True}
    s.cluster.create_secret(NAMESPACE, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": named or f"{s.name}-ssh", "namespace": NAMESPACE, "ownerReferences": [] if named else [owner]},
                                        "stringData": {"authorized_keys": "ssh-ed25519 AAAAplanted x\n"}})
    s.controller = s.runtime("rbac")  # with its Lease
    s.controller.start()
    s.finished()
    s.settle(60)
    s.controller.release_lease()
    s.controller.close()
    s.server.drop_watches()  # every watch ends before the log is read
    end = time.monotonic() + 60  # a safety time-out: they end in milliseconds
    while s.server.open_watches and time.monotonic() < end:
        time.sleep(0.05)
    used: dict[int, set[str]] = {}
    refused = []
    for r in s.server.log:
        if not r.agent.endswith("(rbac)"):
            continue
        group, resource = _split(r.resource)
        rule = allowed(role["rules"], r.verb, group, resource, _name(r.verb, r.name, r.query))
        if rule is None:
            refused.append((r.verb, r.resource, r.name, r.query))
        else:
            used.setdefault(id(rule), set()).add(r.verb)
    assert not refused, refused
    unused = [(rule["resources"], sorted(set(rule["verbs"]) - used.get(id(rule), set()))) for rule in role["rules"] if set(rule["verbs"]) - used.get(id(rule), set())]
    assert not unused, f"the Role grants what the runtime never uses: {unused}"


SHRINK = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: GenericJob
metadata:
  name: shrink
spec:
  replicaSpecs:
    - type: worker
      replicas: {replicas}
      restartPolicy: {{policy: OnFailure, limit: 3}}
      template:
        spec:
          containers:
            - {{name: main, image: busybox:1.36, command: [sh, -c, 'sleep 3600']}}
"""


def test_a_commit_with_fewer_replicas_deletes_the_dropped_pods_under_the_new_role() -> None:
    """The Role is rendered from the new templates only: pods must not be named in it, or the
    runtime could not delete the pods whose templates a commit removed (they would run on)."""
    s = Scenario(SHRINK.format(replicas=3), gitops="argo")
    for i in range(3):
        s.kubelet.behaviors[f"shrink-worker-{i}"] = until_deleted
    s.run_until(lambda st: (st.get("aggregate") or {}).get("running") == 3)
    start = len(s.server.log)
    s.update_spec(SHRINK.format(replicas=2))
    role = next(o for o in s.manifests if o["kind"] == "Role")
    s.run_until(lambda st: sorted(s.pods()) == ["shrink-worker-0", "shrink-worker-1"] and (st.get("aggregate") or {}).get("running") == 2)
    sent = [r for r in list(s.server.log)[start:] if "(runtime-" in r.agent]
    assert any(r.verb == "delete" and r.name == "shrink-worker-2" for r in sent)
    refused = [(r.verb, r.resource, r.name) for r in sent if allowed(role["rules"], r.verb, *_split(r.resource), _name(r.verb, r.name, r.query)) is None]
    assert not refused


def test_stopping_pods_for_cleanup_none_is_allowed_by_the_role() -> None:
    """A deadline under cleanUpPolicy None stops the pods (a pod patch) instead of deleting
    them: the Role's pod patch covers it, as it covers the release."""
    from .test_scenarios import pytorch

    s = Scenario(pytorch(master="sleep 300; exit 0", worker="sleep 300; exit 0").replace("runPolicy:", "runPolicy:\n    activeDeadlineSeconds: 20"))
    role = next(o for o in s.manifests if o["kind"] == "Role")
    start = len(s.server.log)
    s.finished()
    s.settle(10)
    sent = [r for r in list(s.server.log)[start:] if "(runtime-" in r.agent]
    assert sorted(r.name for r in sent if r.verb == "patch" and r.name) == sorted(["sim-master-0", "sim-worker-0", "sim-worker-1"] * 2)  # release, stop
    assert not [r for r in sent if r.verb == "delete"]
    refused = [(r.verb, r.resource, r.name) for r in sent if allowed(role["rules"], r.verb, *_split(r.resource), _name(r.verb, r.name, r.query)) is None]
    assert not refused


def test_the_namespace_role_writes_the_status_of_the_records_it_is_rendered_from_only() -> None:
    """list and watch of a kind cannot be narrowed by name, a status update can: the namespace
    runtime's token may not rewrite the ledger of another team's `--runtime job` records, nor of
    kinds its namespace does not use (review 24, round 5)."""
    from flatjob.compiler.options import CompileOptions

    from .harness import compile_text

    two = DEEPSPEED + "\n---\n" + DEEPSPEED.replace("name: ds", "name: ds2", 1) + "\n---\n" + SHRINK.format(replicas=1)
    role = next(o for o in compile_text(two, CompileOptions(namespace=NAMESPACE, runtime="namespace")) if o["kind"] == "Role")
    status = [(r["resources"], r.get("resourceNames")) for r in role["rules"] if any(p.endswith("/status") for p in r["resources"])]
    assert status == [(["deepspeedjobs/status"], ["ds", "ds2"]), (["genericjobs/status"], ["shrink"])]
