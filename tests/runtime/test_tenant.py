"""The runtime against a tenant of its namespace: what anyone who may write there can make.

Over the real client and HTTP against the fake API server (tests/runtime/harness.py):
- a 38-byte edit of the record's status.runtime naming a million pods is refused as an
  InvalidRecord (an Event, Stalled), decoding at most the pods a job can have (before issue
  21 the runtime expanded it: 50 -> 622 MiB); repaired, the job goes on; so is a time that is
  no finite number ("nan", "inf", "1e400": a NaN written back as null reset startTime);
- a `<job>-ssh` Secret someone else created first without the record's ownerReference is
  refused (an Event and a Stalled ForeignSecret condition) and no pod is released; deleted,
  the runtime makes its own key pair and the job runs; with a forged reference it is
  replaced; after a restart only a pod released with its uid vouches for it, so one swapped in
  meanwhile (even in the second the pods were released, the status edited to name it) is
  replaced or refused, and the runtime's own survives restarts; one planted mid-run holds
  back releases only; a namespace runtime's failed read releases nothing and is retried every
  5 s; a replacement a finalizer or a webhook stops is said on the record (SecretNotReplaced),
  deleted once, and never stops the job's other decisions; a per-job runtime whose first
  Secret list failed makes the Secret once it lists; a job naming `<job>-ssh` itself has it used;
- PodTemplates carrying the job's labels but not its pods' names are never cached and never
  stall the job (before: one of them stalled it), whether they exist before the runtime
  starts or come while it runs; one of the job's own names, grown past what compile renders,
  is kept as its size only and is a problem the status states;
- a list page larger than the runtime parses is asked for again in smaller pages;
- a pod is cached as the labels, annotations, controller reference and statuses the decisions
  read, each capped, whatever its maker put on it; pods with the job's labels and a forged
  ownerReference to its record never stall it (before: 200 junk pods of 1 MiB took the
  runtime to 124 MiB of its 128).
Memory itself is measured by bench/hostile_runtime.py (never by timed tests).
"""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from flatjob.compiler import keys
from flatjob.runtime import nameset
from flatjob.runtime.api import POD_TEMPLATES, ApiError
from flatjob.runtime.job import job_view
from flatjob.runtime.kube import PAGE_BYTES
from flatjob.runtime.lease import LEASE_MAX
from flatjob.runtime.lookups import SECRET_RETRY
from flatjob.runtime.model import Ledger
from flatjob.runtime.trim import CONTAINERS_CAP, TEMPLATE_BYTES, pod, template

from .harness import NAMESPACE, REAL, Scenario
from .test_scenarios import DEEPSPEED, pytorch

fake_only = pytest.mark.skipif(REAL, reason="drives the fake API server's objects")


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in status.get("conditions") or [] if c["type"] == kind)


def _events(s: Scenario, reason: str) -> list[dict[str, Any]]:
    return [o for (r, ns, _), o in s.cluster.objects.items() if r == "events" and ns == NAMESPACE and o.get("reason") == reason]


# --- the ledger ---------------------------------------------------------------------------------


@pytest.mark.parametrize("items", [["x0-{0..1000000}"], ["a{0..9999}", "b{0..1}"], ["x" * 64], ["a{0..99999999999}"]])
def test_decoding_names_is_bounded_by_the_pods_a_job_can_have(items: list[str]) -> None:
    with pytest.raises(ValueError):
        nameset.decode(items)


def test_one_budget_bounds_every_list_of_a_ledger() -> None:
    budget = nameset.Budget(10)
    assert len(nameset.decode(["a{0..5}"], budget)) == 6
    with pytest.raises(ValueError, match="more than"):
        nameset.decode(["b{0..4}"], budget)


@fake_only
def test_a_status_naming_a_million_pods_is_refused(runtime_mode: str) -> None:
    s = Scenario(pytorch(master="sleep 400; exit 0", worker="sleep 400; exit 0"))
    s.run_until(lambda st: st.get("phase") == "Running")
    plural = s.kind.lower() + "s"
    good = s.cluster.record(NAMESPACE, plural, s.name)
    edited = copy.deepcopy(good)
    edited["status"]["runtime"]["released"] = ["x0-{0..1000000}"]
    s.cluster.replace_record_status(NAMESPACE, plural, edited)
    for _ in range(5):
        s.tick()
    st = s.status()
    stalled = _condition(st, "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "InvalidRecord") and "pods a job can have" in stalled["message"]
    assert _events(s, "InvalidRecord")
    fixed = s.cluster.record(NAMESPACE, plural, s.name)
    fixed["status"]["runtime"] = good["status"]["runtime"]
    s.cluster.replace_record_status(NAMESPACE, plural, fixed)
    assert s.run_until(lambda st: _condition(st, "Stalled")["status"] == "False", limit=60)["phase"] == "Running"


TIMES = {  # ledger field -> how the runtime writes it (a number, or names grouped under its repr)
    "startTime": lambda t: t, "finishedAt": lambda t: t, "incidentAt": lambda t: t, "incidentEnded": lambda t: t,
    "gangNotBefore": lambda t: t, "notBefore": lambda t: {t: ["a-worker-0"]}, "settling": lambda t: {t: ["a-worker-0"]},
    "disrupted": lambda t: {t: ["a-worker-0"]}, "disruptedEnd": lambda t: {t: ["a-worker-0"]},
}


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e400", float("nan"), float("inf"), 10**400, "١٢", "9" * 5000, True])
@pytest.mark.parametrize("field", list(TIMES))
def test_a_time_in_the_ledger_is_a_finite_number(field: str, value: Any) -> None:
    """float() took "inf", "nan" and "1e400" from a status anyone may edit; a NaN written back
    was null and started startTime over (issue 21): every time is refused unless finite."""
    shaped = TIMES[field](str(value) if field in ("notBefore", "settling", "disrupted", "disruptedEnd") and not isinstance(value, str) else value)
    with pytest.raises((TypeError, ValueError)):
        Ledger.from_dict({field: shaped})
    assert Ledger.from_dict({field: TIMES[field]("1700000000.25" if isinstance(shaped, dict) else 1700000000.25)})


@fake_only
def test_a_status_with_a_time_that_is_no_number_is_refused(runtime_mode: str) -> None:
    s = Scenario(pytorch(master="sleep 400; exit 0", worker="sleep 400; exit 0"))
    st = s.run_until(lambda st: st.get("phase") == "Running")
    plural = s.kind.lower() + "s"
    good = s.cluster.record(NAMESPACE, plural, s.name)
    started = good["status"]["runtime"]["startTime"]
    edited = copy.deepcopy(good)
    edited["status"]["runtime"]["startTime"] = "nan"
    s.cluster.replace_record_status(NAMESPACE, plural, edited)
    for _ in range(5):
        s.tick()
    stalled = _condition(s.status(), "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "InvalidRecord") and "finite time" in stalled["message"]
    fixed = s.cluster.record(NAMESPACE, plural, s.name)
    fixed["status"]["runtime"] = good["status"]["runtime"]
    s.cluster.replace_record_status(NAMESPACE, plural, fixed)
    st = s.run_until(lambda st: _condition(st, "Stalled")["status"] == "False", limit=60)
    assert st["phase"] == "Running" and st["runtime"]["startTime"] == started


def test_a_status_filled_with_junk_is_cached_as_its_size_and_written_over(runtime_mode: str) -> None:
    """1.3 MB of `{"a":0}` in status.runtime (preserve-unknown-fields) is ~31 MiB parsed: the
    runtime cached it so, and a few such records OOM-killed the namespace runtime at every
    start. It keeps a status as compact bytes, at most what this job's status can take (else
    its size only); a cycle then reads that one status again, and its write keeps only the
    ledger's own fields: the job runs on."""
    s = Scenario(pytorch(master="sleep 400; exit 0", worker="sleep 400; exit 0"))
    s.run_until(lambda st: st.get("phase") == "Running")
    plural = s.kind.lower() + "s"
    good = s.cluster.record(NAMESPACE, plural, s.name)
    edited = copy.deepcopy(good)
    edited["status"]["runtime"]["x"] = [{"a": 0} for _ in range(170_000)]
    s.cluster.replace_record_status(NAMESPACE, plural, edited)
    s.sync()
    cached = s.controller.records[s.kind].cache[s.name]["status"]
    assert isinstance(cached, int) and cached > 1_000_000  # its size, never its content
    s.kubelet.kill("sim-worker-0", 1)  # a change: a cycle and a status write
    st = s.run_until(lambda st: "x" not in st["runtime"], limit=30)
    assert st["phase"] == "Running" and st["backoffCount"] == 1 and not _events(s, "InvalidRecord")
    assert isinstance(s.controller.records[s.kind].cache[s.name]["status"], bytes)


def test_a_status_read_whole_keeps_only_the_ledger_and_what_fits_the_jobs_status() -> None:
    """A status too big to cache is read once for a cycle (worker._read_status): of it the cycle
    keeps the ledger's own members of status.runtime and each other member that fits this job's
    status, dropped as soon as it is decoded, so a cycle never holds the junk beside its work;
    a ledger member bigger than the job's status can be is refused, never read."""
    from flatjob.runtime.trim import status_limit, status_read

    limit = status_limit(2, 3)
    junk = [{"a": 0} for _ in range(20_000)]
    status = {"phase": "Running", "conditions": [{"type": "Ready"}], "x": junk, "runtime": {"attempt": 2, "released": ["w-0"], "x": junk}}
    assert status_read(status, limit) == {"phase": "Running", "conditions": [{"type": "Ready"}], "runtime": {"attempt": 2, "released": ["w-0"]}}
    assert set(Ledger().to_dict()) <= Ledger.KEYS  # every member the ledger writes is kept
    with pytest.raises(ValueError, match=r"status.runtime.restarts is \d+ bytes"):
        status_read({"runtime": {"restarts": {f"t{i}": 1 for i in range(20_000)}}}, limit)
    with pytest.raises(ValueError, match=r"status.runtime is \d+ bytes"):
        status_read({"runtime": junk}, limit)
    assert status_read({"runtime": [1]}, limit) == {"runtime": [1]}  # small: the ledger's reader refuses it


def _nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


@fake_only
def test_a_value_nested_past_the_decoders_in_a_record_never_stops_the_runtime(runtime_mode: str) -> None:
    """400 nested lists in status.runtime and under a pod template in the spec (both keep
    unknown fields), 1.6 KB each: orjson's encoder stops at 255 levels, and the error ended
    the namespace runtime's watch, relisted and failing again, so no job was served (attacker
    of issue 21, round 3, with 3 000 levels and json's decoder).  Cut at 100 levels instead:
    the job runs on, restarts its failed pod, and the next status write drops what is not the
    runtime's."""
    s = Scenario(pytorch(master="sleep 400; exit 0", worker="sleep 400; exit 0"))
    s.run_until(lambda st: st.get("phase") == "Running")
    plural = s.kind.lower() + "s"
    record = s.cluster.record(NAMESPACE, plural, s.name)
    record["spec"]["replicaSpecs"][0]["template"]["metadata"] = {"labels": {"a": "b"}, "x-deep": _nested(400)}
    s.cluster.apply_record(NAMESPACE, plural, record)
    edited = s.cluster.record(NAMESPACE, plural, s.name)
    edited["status"]["runtime"]["x"] = _nested(400)
    s.cluster.replace_record_status(NAMESPACE, plural, edited)
    s.sync()
    s.kubelet.kill("sim-worker-0", 1)
    st = s.run_until(lambda st: st["backoffCount"] == 1 and "x" not in st["runtime"], limit=30)
    assert st["phase"] == "Running" and not _events(s, "InvalidRecord")
    assert b"nested" not in s.controller.records[s.kind].cache[s.name]["spec"]  # under a pod template: never kept (trim.UNREAD)


def test_json_nested_past_pythons_decoder_is_cut_not_an_error() -> None:
    """json.loads stops near 1 000 levels (RecursionError, which ended the watch thread's
    stream); the API server stores up to 10 000 (sigs.k8s.io/json maxDepth)."""
    import json

    from flatjob.runtime import nesting

    deep = b'{"a":' + b"[" * 3000 + b"1" + b"]" * 3000 + b', "b": "x]\\\"[{", "c": [[1]]}'
    value = nesting.loads(deep)
    level, node = 0, value["a"]
    while isinstance(node, list):
        level, node = level + 1, node[0]
    assert (level, node) == (nesting.CUT_DEPTH - 1, nesting.TOO_DEEP) and value["b"] == 'x]"[{' and value["c"] == [[1]]
    with pytest.raises(ValueError):
        nesting.loads(b"[" * 3000 + b"]" * 2999)  # not JSON stays not JSON
    assert nesting.loads(json.dumps({"plain": [1, {"x": None}]})) == {"plain": [1, {"x": None}]}


def test_a_spec_is_cached_as_bytes_no_bigger_than_its_json() -> None:
    """A record's spec may hold anything under a pod template (the CRD keeps unknown fields):
    1.3 MB of `{"a":0}` parsed is ~31 MiB; cached, it is its compact JSON (review of round 11)."""
    import tracemalloc

    from flatjob.runtime.trim import record, spec_of

    spec = {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": {"x": [{"a": 0}] * 170_000}}]}
    body = orjson.dumps(spec)
    tracemalloc.start()
    kept = record({"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": "j"}, "spec": spec})
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert isinstance(kept["spec"], bytes) and held < 2 * len(body)
    # Kept without the pod template, which the runtime never reads off the record (trim.UNREAD).
    assert spec_of(kept) == {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": {}}]} and len(kept["spec"]) < 100


def test_a_status_is_cached_as_bytes_no_bigger_than_its_json() -> None:
    """What a record's cache entry costs is its status's compact JSON, whatever it holds."""
    import tracemalloc

    from flatjob.runtime.trim import record, status_bytes, status_of

    spec = {"replicaSpecs": [{"type": "worker", "replicas": 4}]}
    obj = {"apiVersion": "x/v1", "kind": "GenericJob", "metadata": {"name": "j"}, "spec": spec, "status": {"runtime": {"x": [{"a": 0}] * 8000}}}
    body = orjson.dumps(obj["status"])
    assert len(body) <= status_bytes(spec)
    tracemalloc.start()
    kept = record(obj)
    used = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert used < 2 * len(body) and status_of(kept) == obj["status"]


# --- the SSH Secret -----------------------------------------------------------------------------


@fake_only
def test_someone_elses_ssh_secret_is_refused_and_no_pod_is_released(runtime_mode: str) -> None:
    s = Scenario(DEEPSPEED)
    planted = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/ssh-auth", "metadata": {"name": "ds-ssh", "namespace": NAMESPACE},
               "stringData": {"authorized_keys": "ssh-ed25519 AAAAattacker attacker\n", "ssh-privatekey": "x", "ssh-publickey": "x"}}
    s.cluster.create_secret(NAMESPACE, planted)
    for _ in range(10):
        s.tick()
    st = s.status()
    stalled = _condition(st, "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "ForeignSecret"), st.get("conditions")
    assert "was not created by this job's runtime" in stalled["message"]
    assert _events(s, "ForeignSecret")
    assert all(pod["spec"].get("schedulingGates") for pod in s.pods().values())  # none released
    # Deleted, the runtime makes its own key pair, owned by the record, and the job runs.
    s.cluster.store.delete(_secrets(), NAMESPACE, "ds-ssh", {})
    for name in ("ds-worker-0", "ds-worker-1", "ds-worker-2"):
        s.kubelet.behaviors[name] = lambda pod, env: (float("inf"), None)
    s.run_until(lambda st: st.get("phase") == "Running", limit=120)
    secret = s.cluster.objects[("secrets", NAMESPACE, "ds-ssh")]
    record = s.cluster.record(NAMESPACE, s.kind.lower() + "s", s.name)
    assert [r["uid"] for r in secret["metadata"]["ownerReferences"] if r.get("controller")] == [record["metadata"]["uid"]]
    assert "attacker" not in str(secret.get("data"))


@fake_only
@pytest.mark.parametrize("named", ["ds-ssh", "someone-elses"])
def test_a_record_annotation_naming_a_secret_never_makes_a_planted_one_trusted(runtime_mode: str, named: str) -> None:
    """flatjob.dev/ssh-secret on the record is anyone's who may update the record: a tenant who
    planted `ds-ssh` and named it (or any Secret) there had every pod released on their key,
    never refused (hx22). Whether the author named a Secret is read off the PodTemplates, which
    decide what the pods mount."""
    s = Scenario(DEEPSPEED)
    planted = _plant(s, owned=False)
    plural = s.kind.lower() + "s"
    record = s.cluster.record(NAMESPACE, plural, s.name)
    record["metadata"].setdefault("annotations", {})[keys.SSH_SECRET] = named
    s.cluster.apply_record(NAMESPACE, plural, record)
    if named != "ds-ssh":
        s.cluster.create_secret(NAMESPACE, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": named, "namespace": NAMESPACE}})
    for _ in range(10):
        s.tick()
    assert _secret_uid(s) == planted and not _released(s)  # none released on the planted key
    stalled = _condition(s.status(), "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "ForeignSecret")


@fake_only
def test_a_status_edit_naming_a_planted_secret_before_any_pod_ran_does_not_make_it_trusted(runtime_mode: str) -> None:
    """status.runtime.sshSecretUid is read from a status anyone with status rights may write, so
    it proves nothing: only the uid this process's own create returned, or one a released pod
    carries (with the record's ownerReference), is proof; the planted Secret has no reference,
    so it is refused and no pod is released (review of round 11: the planted key was mounted in
    every pod)."""
    s = Scenario(DEEPSPEED)
    planted = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/ssh-auth", "metadata": {"name": "ds-ssh", "namespace": NAMESPACE},
               "stringData": {"authorized_keys": "ssh-ed25519 AAAAattacker attacker\n", "ssh-privatekey": "x", "ssh-publickey": "x"}}
    planted_uid = s.cluster.create_secret(NAMESPACE, planted)["metadata"]["uid"]
    plural = s.kind.lower() + "s"
    rec = s.cluster.record(NAMESPACE, plural, s.name)
    rec["status"] = {**copy.deepcopy(rec.get("status") or {}), "runtime": {**((rec.get("status") or {}).get("runtime") or {}), "sshSecretUid": planted_uid}}
    s.cluster.replace_record_status(NAMESPACE, plural, rec)
    for _ in range(10):
        s.tick()
    st = s.status()
    stalled = _condition(st, "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "ForeignSecret"), st.get("conditions")
    assert all(pod["spec"].get("schedulingGates") for pod in s.pods().values())  # none released with the attacker's key


@pytest.mark.parametrize("forged", ["owner-reference", "owner-reference-after-the-runtime-made-its-own"])
def test_an_ssh_secret_with_a_forged_owner_reference_is_never_trusted(runtime_mode: str, forged: str) -> None:
    """An ownerReference proves nothing: anyone may write one, with the record's uid (which
    anyone who reads the record knows). Only the Secret whose uid the runtime's own create
    returned, or one a released pod carries and that has the record's ownerReference, is trusted. Planted first, before any pod ran, or
    after someone deleted the runtime's own: replaced with a fresh pair (no pod was released
    with it)."""
    s = Scenario(DEEPSPEED)
    record = s.cluster.record(NAMESPACE, s.kind.lower() + "s", s.name)
    owner = {"apiVersion": record["apiVersion"], "kind": record["kind"], "name": s.name, "uid": record["metadata"]["uid"], "controller": True}
    planted = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/ssh-auth",
               "metadata": {"name": "ds-ssh", "namespace": NAMESPACE, "ownerReferences": [owner]},
               "stringData": {"authorized_keys": "ssh-ed25519 AAAAattacker attacker\n", "ssh-privatekey": "x", "ssh-publickey": "x"}}
    if forged == "owner-reference-after-the-runtime-made-its-own":
        s.run_until(lambda st: ("secrets", NAMESPACE, "ds-ssh") in s.cluster.objects, limit=60)
        s.tick()
        assert s.status()["runtime"]["sshSecretUid"] == s.cluster.objects[("secrets", NAMESPACE, "ds-ssh")]["metadata"]["uid"]
        s.cluster.store.delete(_secrets(), NAMESPACE, "ds-ssh", {})
    planted_uid = s.cluster.create_secret(NAMESPACE, planted)["metadata"]["uid"]
    for _ in range(10):
        s.tick()
    st = s.status()
    assert _events(s, "SecretReplaced")
    secret = s.cluster.objects[("secrets", NAMESPACE, "ds-ssh")]
    assert secret["metadata"]["uid"] != planted_uid and "attacker" not in str(secret.get("data"))
    assert st["runtime"]["sshSecretUid"] == secret["metadata"]["uid"]
    assert planted_uid not in _released(s).values()  # no pod released with the attacker's key


def _running_forever(s: Scenario, names: tuple[str, ...] = ("ds-worker-0", "ds-worker-1", "ds-worker-2")) -> None:
    for name in names:
        s.kubelet.behaviors[name] = lambda pod, env: (float("inf"), None)


def _plant(s: Scenario, owned: bool = True) -> str:
    """`ds-ssh` made by a tenant, with a forged controller ownerReference to the record or none."""
    record = s.cluster.record(NAMESPACE, s.kind.lower() + "s", s.name)
    owner = {"apiVersion": record["apiVersion"], "kind": record["kind"], "name": s.name, "uid": record["metadata"]["uid"], "controller": True}
    planted = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/ssh-auth",
               "metadata": {"name": "ds-ssh", "namespace": NAMESPACE, "ownerReferences": [owner] if owned else []},
               "stringData": {"authorized_keys": "ssh-ed25519 AAAAattacker attacker\n", "ssh-privatekey": "x", "ssh-publickey": "x"}}
    return s.cluster.create_secret(NAMESPACE, planted)["metadata"]["uid"]


def _name_in_status(s: Scenario, uid: str) -> None:
    plural = s.kind.lower() + "s"
    rec = s.cluster.record(NAMESPACE, plural, s.name)
    rec["status"] = {**copy.deepcopy(rec["status"]), "runtime": {**rec["status"]["runtime"], "sshSecretUid": uid}}
    s.cluster.replace_record_status(NAMESPACE, plural, rec)


def _released(s: Scenario) -> dict[str, str | None]:
    """Released pods, with the Secret uid each was released with."""
    return {n: (p["metadata"].get("annotations") or {}).get(keys.SSH_SECRET_UID) for n, p in s.pods().items() if not p["spec"].get("schedulingGates")}


def _secret_uid(s: Scenario) -> str | None:
    secret = s.cluster.objects.get(("secrets", NAMESPACE, "ds-ssh"))
    return secret["metadata"]["uid"] if secret else None


def _not_stalled(s: Scenario) -> None:
    st = s.status()
    assert not [c for c in st.get("conditions") or [] if c["type"] == "Stalled" and c["status"] == "True"], st.get("conditions")
    assert not _events(s, "ForeignSecret")


@fake_only
def test_a_restarted_runtime_trusts_its_secret_by_the_pods_it_released_with_it(runtime_mode: str) -> None:
    """Each pod is released with the uid of the Secret the runtime trusted then (an annotation,
    in the patch that removes its gate): after a restart that pod vouches for the Secret, so the
    job goes on, nothing replaced, nothing refused.  The Secret is immutable (so a later swap
    never reaches a running pod's kubelet; not exercised by the fake kubelet)."""
    s = Scenario(DEEPSPEED)
    _running_forever(s)
    s.run_until(lambda st: st.get("phase") == "Running", limit=120)
    secret = s.cluster.objects[("secrets", NAMESPACE, "ds-ssh")]
    assert secret.get("immutable") is True
    assert set(_released(s).values()) == {secret["metadata"]["uid"]}
    s.controller = s.new_controller()
    for _ in range(10):
        s.tick()
    assert s.status().get("phase") == "Running" and _secret_uid(s) == secret["metadata"]["uid"]
    _not_stalled(s)
    assert not _events(s, "SecretReplaced")


@fake_only
@pytest.mark.parametrize("owned", [True, False], ids=["forged-owner-reference", "no-owner-reference"])
def test_a_secret_swapped_in_the_second_pods_were_released_is_never_trusted_after_a_restart(runtime_mode: str, owned: bool) -> None:
    """Someone who may replace Secrets and write the record's status swaps `<job>-ssh` in the
    very second the workers were released (creation times are to the second), names its uid in
    status.runtime.sshSecretUid (if a runtime that watches it has not already replaced it), and
    has the runtime restarted.  No pod was released with the
    planted uid, so it is never trusted: with a forged ownerReference it is replaced with a
    fresh pair, without one it is refused; the launcher is never released with it (attacker
    of issue 21, round 4: a same-second swap passed a check by creation time)."""
    s = Scenario(DEEPSPEED)
    _running_forever(s)
    s.clock.now = float(int(s.clock.now)) + 1.0  # the start of a second: the workers are released within it
    for _ in range(40):
        s.tick(0.1)
        if {"ds-worker-1", "ds-worker-2"} <= set(_released(s)):
            break
    assert "ds-worker-0" not in _released(s)  # the launcher waits for the workers' sshd
    s.cluster.store.delete(_secrets(), NAMESPACE, "ds-ssh", {})
    planted = _plant(s, owned)
    assert s.cluster.objects[("secrets", NAMESPACE, "ds-ssh")]["metadata"]["creationTimestamp"] == s.pods()["ds-worker-1"]["metadata"]["creationTimestamp"]
    for _ in range(5):
        s.tick()
    assert planted not in _released(s).values()  # the live runtime knows its own uid
    if _secret_uid(s) == planted:
        _name_in_status(s, planted)
    s.controller = s.new_controller()
    for _ in range(30):
        s.tick()
    assert planted not in _released(s).values()
    if owned:
        assert _secret_uid(s) != planted and _events(s, "SecretReplaced")
        s.run_until(lambda st: "ds-worker-0" in _released(s), limit=60)
        assert _released(s)["ds-worker-0"] == _secret_uid(s)
    else:
        assert _secret_uid(s) == planted and "ds-worker-0" not in _released(s)  # not the runtime's to delete
        assert _condition(s.status(), "Stalled")["reason"] == "ForeignSecret"


def _launcher_waiting() -> Scenario:
    """A namespace runtime's DeepSpeedJob whose workers run, released, and whose launcher waits
    for their sshd (gated): its next release reads the Secret again."""
    s = Scenario(DEEPSPEED)
    if s.mode != "namespace":
        pytest.skip("a job's own runtime watches its Secret: nothing to read again")
    _running_forever(s)
    s.run_until(lambda st: {"ds-worker-1", "ds-worker-2"} <= set(_released(s)), limit=60)
    assert "ds-worker-0" not in _released(s)
    return s


@fake_only
@pytest.mark.parametrize("fails", ["always", "once"])
def test_a_failed_read_of_the_secret_before_a_release_releases_nothing(fails: str) -> None:
    """A namespace runtime reads the Secret again right before it releases a pod; when that read
    fails (a 503, a 429 under load) nothing is released on the older look, and once it reads the
    planted Secret it replaces it (attacker of issue 21, round 4: the launcher was released)."""
    s = _launcher_waiting()
    s.cluster.store.delete(_secrets(), NAMESPACE, "ds-ssh", {})
    planted = _plant(s)
    failing = {"on": True}
    before = s.server.on_request

    def hook(verb: str, resource: str, namespace: str | None, name: str | None, agent: str = "") -> None:
        if before is not None:
            before(verb, resource, namespace, name, agent)
        if failing["on"] and resource == "secrets" and verb == "get" and "(runtime-" in agent:
            failing["on"] = fails == "always"
            raise ApiError("the server is currently unable to handle the request", status=503)

    s.server.on_request = hook
    for _ in range(60):
        s.tick()
    assert planted not in _released(s).values()
    if fails == "always":
        assert _secret_uid(s) == planted and "ds-worker-0" not in _released(s)
    else:  # read at last: no pod was released with it, so it is replaced
        assert _secret_uid(s) != planted and _events(s, "SecretReplaced")


@fake_only
def test_restarts_before_and_after_the_first_release_never_stall_the_job(runtime_mode: str) -> None:
    """Restarted after its pods were created but before any was released, the runtime replaces
    the Secret it cannot prove (no pod was released with it) and releases the gang with the new
    one; restarted again, those pods vouch for it (review of issue 21, round 4: the second
    restart stalled the job, its gated pods being older than the replacement)."""
    s = Scenario(DEEPSPEED)
    _running_forever(s)
    for _ in range(10):
        s.tick()
        if len(s.pods()) == 3:
            break
    assert len(s.pods()) == 3 and not _released(s)
    first = _secret_uid(s)
    s.controller = s.new_controller()
    s.run_until(lambda st: st.get("phase") == "Running", limit=60)
    assert _secret_uid(s) != first and [e["type"] for e in _events(s, "SecretReplaced")] == ["Normal"]
    s.controller = s.new_controller()
    for _ in range(10):
        s.tick()
    _not_stalled(s)
    assert s.status()["phase"] == "Running" and set(_released(s).values()) == {_secret_uid(s)}


@fake_only
def test_a_secret_its_owner_deleted_mid_run_is_made_again_and_survives_restarts(runtime_mode: str) -> None:
    """Deleted by a person while the job runs, the Secret is made again (by a per-job runtime at
    once, by a namespace runtime at its next read); restarted twice with no pod released with
    it, the job stays Running, never Stalled, and a Secret exists (review of issue 21, round 4:
    it stalled after every restart)."""
    s = Scenario(DEEPSPEED)
    _running_forever(s)
    s.run_until(lambda st: st.get("phase") == "Running", limit=120)
    s.cluster.store.delete(_secrets(), NAMESPACE, "ds-ssh", {})
    if s.mode == "job":  # a namespace runtime reads a Secret when a release needs it, never watches it
        s.run_until(lambda st: _secret_uid(s) is not None and st["runtime"].get("sshSecretUid") == _secret_uid(s), limit=60)
    for _ in range(2):
        s.controller = s.new_controller()
        for _ in range(10):
            s.tick()
        _not_stalled(s)
        assert _secret_uid(s) is not None and s.status()["phase"] == "Running"


@fake_only
@pytest.mark.parametrize("owned", [True, False], ids=["forged-owner-reference", "no-owner-reference"])
def test_a_secret_planted_mid_run_holds_back_releases_only(runtime_mode: str, owned: bool) -> None:
    """Swapped in while the job runs: with a forged ownerReference it is replaced, without one
    it is refused (Stalled, no release; checked where the runtime watches the Secret), and
    either way the job goes on: its launcher's success
    ends it (review of issue 21, round 4: a refusal stopped every decision, so the job never
    finished and its workers ran for ever)."""
    s = Scenario(DEEPSPEED)
    s.kubelet.behaviors["ds-worker-0"] = lambda pod, env: (40.0, 0)
    _running_forever(s, ("ds-worker-1", "ds-worker-2"))
    s.run_until(lambda st: st.get("phase") == "Running", limit=60)
    s.cluster.store.delete(_secrets(), NAMESPACE, "ds-ssh", {})
    planted = _plant(s, owned)
    for _ in range(10):
        s.tick()
    if s.mode == "job":  # a namespace runtime reads the Secret when a release needs it
        assert (_secret_uid(s) != planted) is owned
        if not owned:
            assert _condition(s.status(), "Stalled")["reason"] == "ForeignSecret"
    assert s.finished(limit=120)["phase"] == "Succeeded"
    assert planted not in _released(s).values()


@fake_only
@pytest.mark.parametrize("status", [503, 429])
def test_a_failing_secret_read_is_retried_every_few_seconds_not_every_cycle(status: int) -> None:
    """A namespace runtime whose reads of the job's Secret fail (a 503, APF's 429) asks again
    once a SECRET_RETRY and makes no Secret blind (review of issue 21, round 4: each cycle read
    it four times and tried to create it, a fresh key pair each time)."""
    s = _launcher_waiting()
    asked: list[tuple[str, float]] = []
    before = s.server.on_request

    def hook(verb: str, resource: str, namespace: str | None, name: str | None, agent: str = "") -> None:
        if before is not None:
            before(verb, resource, namespace, name, agent)
        if resource == "secrets" and "(runtime-" in agent and verb in ("get", "create"):
            asked.append((verb, s.clock.now))
            raise ApiError("the server is currently unable to handle the request", status=status)

    s.server.on_request = hook
    for _ in range(120):
        s.tick(0.5)
    gets = [t for verb, t in asked if verb == "get"]
    assert len(gets) <= 60 / SECRET_RETRY + 2 and not [t for verb, t in asked if verb == "create"]
    assert "ds-worker-0" not in _released(s)


def _secrets() -> Any:
    from flatjob.runtime.sim.apiserver import kinds

    return kinds.by_key("secrets")


def _finalize(s: Scenario) -> None:
    """A finalizer on `ds-ssh`, as a tenant's controller (or anyone who may patch Secrets) adds."""
    s.cluster.store.patch(_secrets(), NAMESPACE, "ds-ssh", "merge", {"metadata": {"finalizers": ["example.com/in-use-protection"]}})


def _secret_deletes(s: Scenario) -> int:
    return sum(1 for r in s.server.log if r.verb == "delete" and r.resource == "secrets" and "(runtime-" in r.agent)


@fake_only
def test_a_secret_to_replace_that_a_finalizer_holds_is_said_once_deleted_once_and_replaced_when_it_goes(runtime_mode: str) -> None:
    """Restarted between the Secret's create and the first release (so the Secret must be
    replaced) while a finalizer holds it: one delete, then the record says what holds the job
    (Stalled, SecretNotReplaced) instead of a delete every cycle and a record saying nothing
    (liveness review of issues 21/24: 399 deletes in 400 s, the job Pending for ever); once the
    finalizer goes, a fresh pair is made and the job runs."""
    s = Scenario(DEEPSPEED)
    _running_forever(s)
    s.run_until(lambda st: len(s.pods()) == 3, limit=30)
    assert not _released(s)
    first = _secret_uid(s)
    _finalize(s)
    s.controller = s.new_controller()
    for _ in range(60):
        s.tick()
    stalled = _condition(s.status(), "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "SecretNotReplaced") and "finalizer" in stalled["message"]
    assert _secret_deletes(s) == 1 and _secret_uid(s) == first and not _released(s)
    assert [e["type"] for e in _events(s, "SecretNotReplaced")] == ["Warning"]
    s.cluster.store.patch(_secrets(), NAMESPACE, "ds-ssh", "merge", {"metadata": {"finalizers": None}})
    s.run_until(lambda st: st.get("phase") == "Running", limit=120)
    assert _secret_uid(s) not in (None, first) and set(_released(s).values()) == {_secret_uid(s)}
    _not_stalled(s)


def _swapped_mid_run(s: Scenario) -> str:
    """Deleted by a person while the job runs, the Secret is made again; the runtime restarts
    before it releases any pod with it, so the next process cannot prove it and replaces it."""
    s.run_until(lambda st: st.get("phase") == "Running" and st["aggregate"]["running"] == 3, limit=120)
    first = _secret_uid(s)
    s.cluster.store.delete(_secrets(), NAMESPACE, "ds-ssh", {})
    s.controller = s.new_controller()  # a namespace runtime reads the Secret when a cycle runs: a new process does at once
    s.run_until(lambda st: _secret_uid(s) not in (None, first), limit=30)
    return _secret_uid(s) or ""


@fake_only
@pytest.mark.parametrize("block", ["finalizer", "webhook"])
def test_a_secret_to_replace_that_cannot_be_deleted_never_stops_the_jobs_other_decisions(runtime_mode: str, block: str) -> None:
    """The replacement of an unproven Secret holds back creating and releasing pods only: the
    launcher's success still ends the job (liveness review of issues 21/24: every cycle ended
    at the Secret, before outcomes and the status, and the job said "All pods are running
    normally." for ever). A refused delete (a policy webhook's 403) is said on the record."""
    s = Scenario(DEEPSPEED)
    s.kubelet.behaviors["ds-worker-0"] = lambda pod, env: (600.0, 0)
    _running_forever(s, ("ds-worker-1", "ds-worker-2"))
    second = _swapped_mid_run(s)
    if block == "finalizer":
        _finalize(s)
    else:
        before = s.server.on_request

        def deny(verb: str, resource: str, namespace: str | None, name: str | None, agent: str = "") -> None:
            before(verb, resource, namespace, name, agent)
            if verb == "delete" and resource == "secrets" and "(runtime-" in agent:
                raise ApiError('admission webhook "policy.example.com" denied the request: Secrets may not be deleted', status=403, reason="Forbidden")

        s.server.on_request = deny
    s.tick()
    s.controller = s.new_controller()
    for _ in range(30):
        s.tick()
    stalled = _condition(s.status(), "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "SecretNotReplaced"), stalled
    assert ("finalizer" if block == "finalizer" else "Secrets may not be deleted") in stalled["message"]
    assert _secret_uid(s) == second and second not in _released(s).values()
    s.run_until(lambda st: (s.pods().get("ds-worker-0") or {}).get("status", {}).get("phase") == "Succeeded", limit=900)
    ended = s.now()
    st = s.run_until(lambda st: st.get("phase") in ("Succeeded", "Failed"), limit=900)
    assert st["phase"] == "Succeeded" and s.now() - ended <= 3  # never in the failed delete's back-off
    assert _secret_deletes(s) <= (1 if block == "finalizer" else 900 / 30 + 2)  # once; a refused one at most once a SECRET_TTL


@fake_only
def test_a_secret_to_replace_whose_deletes_keep_failing_is_said_on_the_record(runtime_mode: str) -> None:
    """A validating webhook that is down (failurePolicy: Fail) answers every delete with a 500:
    after two failures in a row the record says the Secret cannot be replaced (Stalled,
    SecretNotReplaced), as for a 403, not "waiting for the SSH Secret" for ever (review)."""
    s = Scenario(DEEPSPEED)
    _running_forever(s)
    s.run_until(lambda st: len(s.pods()) == 3, limit=30)
    first = _secret_uid(s)
    before = s.server.on_request

    def down(verb: str, resource: str, namespace: str | None, name: str | None, agent: str = "") -> None:
        before(verb, resource, namespace, name, agent)
        if verb == "delete" and resource == "secrets" and "(runtime-" in agent:
            raise ApiError('Internal error occurred: failed calling webhook "policy.example.com": context deadline exceeded', status=500)

    s.server.on_request = down
    s.controller = s.new_controller()  # restarted between the Secret's create and the first release
    for _ in range(120):
        s.tick()
    stalled = _condition(s.status(), "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "SecretNotReplaced") and "failed calling webhook" in stalled["message"]
    assert _secret_uid(s) == first and not _released(s)


@fake_only
def test_a_refusal_that_does_not_change_writes_the_status_once(runtime_mode: str) -> None:
    """SecretNotReplaced while a finalizer holds the Secret is stable: its conditions keep their
    transition times, so the status is not written again every cycle, each write waking the
    next and spending the namespace's write budget (review: 120 writes in 120 s)."""
    s = Scenario(DEEPSPEED)
    _running_forever(s)
    s.run_until(lambda st: len(s.pods()) == 3, limit=30)
    _finalize(s)
    s.controller = s.new_controller()
    for _ in range(30):
        s.tick()
    assert _condition(s.status(), "Stalled")["reason"] == "SecretNotReplaced"
    seen = len(s.server.log)
    for _ in range(120):
        s.tick()
    writes = [r for r in s.server.log[seen:] if r.resource.endswith("/status") and "(runtime-" in r.agent and r.verb in ("update", "patch")]
    assert len(writes) <= 1, f"{len(writes)} status writes in 120 s with nothing changing"


@fake_only
def test_a_per_job_runtime_whose_first_secret_list_fails_makes_the_secret_once_it_lists(runtime_mode: str) -> None:
    """A per-job runtime's first list of its `<job>-ssh` fails once (a 500, a 429): the watch
    lists again a second later and finds none, which changes no cache; the job is looked at
    again all the same and its runtime makes the Secret (liveness review of issue 24: the job
    stayed Pending, "waiting for the SSH Secret", for ever)."""
    s = Scenario(DEEPSPEED)
    if s.mode != "job":
        pytest.skip("a namespace runtime reads its Secrets by name, retried after SECRET_RETRY")
    _running_forever(s)
    before, failed = s.server.on_request, []

    def once(verb: str, resource: str, namespace: str | None, name: str | None, agent: str = "") -> None:
        before(verb, resource, namespace, name, agent)
        if verb == "list" and resource == "secrets" and "(runtime-" in agent and not failed:
            failed.append(verb)
            raise ApiError("etcdserver: request timed out", status=500)

    s.server.on_request = once
    s.run_until(lambda st: st.get("phase") == "Running" and st["aggregate"]["running"] == 3, limit=60)
    assert failed and _secret_uid(s) is not None


@fake_only
def test_a_job_naming_its_own_secret_under_the_default_name_uses_it(runtime_mode: str) -> None:
    """`flatjob.dev/ssh-secret: ds-ssh` names the author's own Secret, even under the default
    name: used as it is, never refused, replaced or made (liveness review of issue 21: taken
    for the runtime's own by its name, it was a ForeignSecret for ever)."""
    s = Scenario(DEEPSPEED.replace("  name: ds\n", "  name: ds\n  annotations:\n    flatjob.dev/ssh-secret: ds-ssh\n", 1))
    _running_forever(s)
    for _ in range(5):
        s.tick()
    assert _secret_uid(s) is None and not s.pods()  # waited for, never made
    mine = _plant(s, owned=False)
    s.run_until(lambda st: st.get("phase") == "Running", limit=60)
    assert _secret_uid(s) == mine and set(_released(s).values()) <= {mine, None}
    _not_stalled(s)


def _retemplate(s: Scenario, annotation: str | None) -> None:
    """The job's PodTemplates with flatjob.dev/ssh-secret set to `annotation`, or without it (as
    a flatjob before 1879fc1 rendered them), their pods unchanged."""
    from flatjob.runtime.sim.apiserver import kinds
    from flatjob.runtime.sim.cluster import IN_PROCESS

    res = kinds.by_key("podtemplates")
    for (r, ns, name), obj in list(s.cluster.objects.items()):
        if r != "podtemplates" or ns != NAMESPACE or (obj["metadata"].get("labels") or {}).get(keys.JOB_NAME) != s.name:
            continue
        body = copy.deepcopy(obj)
        notes = body["metadata"].setdefault("annotations", {})
        notes.pop(keys.SSH_SECRET, None)
        if annotation is not None:
            notes[keys.SSH_SECRET] = annotation
        s.cluster.store.update(res, NAMESPACE, name, body, "", IN_PROCESS)


def _named(secret: str) -> str:
    return DEEPSPEED.replace("  name: ds\n", f"  name: ds\n  annotations:\n    flatjob.dev/ssh-secret: {secret}\n", 1)


@fake_only
def test_templates_compiled_before_the_annotation_mount_the_secret_the_job_names(runtime_mode: str) -> None:
    """Version skew: PodTemplates an older flatjob compiled carry no flatjob.dev/ssh-secret, for a
    job naming its own Secret `mine`. The Secret the runtime vouches for is the one the pods
    mount (the template's flatjob-ssh volume): `mine` is used as it is, and a `ds-ssh` a tenant
    planted is nobody's concern (before: the runtime took `ds-ssh` for the job's, refused it,
    and never released a pod; without it, made one the pods never mounted)."""
    s = Scenario(_named("mine"))
    _retemplate(s, None)
    _running_forever(s)
    planted = _plant(s, owned=False)
    mine = s.cluster.create_secret(NAMESPACE, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "mine", "namespace": NAMESPACE}})["metadata"]["uid"]
    s.run_until(lambda st: st.get("phase") == "Running", limit=60)
    assert _secret_uid(s) == planted and set(_released(s).values()) <= {mine, None}
    assert {n for (r, ns, n) in s.cluster.objects if r == "secrets" and ns == NAMESPACE} == {"ds-ssh", "mine"}  # none made
    _not_stalled(s)


@fake_only
@pytest.mark.parametrize("annotation", [None, "another"], ids=["compiled-before-the-annotation", "annotation-beside-another-mount"])
def test_templates_mounting_the_default_secret_never_release_pods_on_a_planted_one(runtime_mode: str, annotation: str | None) -> None:
    """The pods mount `ds-ssh`, the default name: whatever the templates' annotation says (none,
    as an older flatjob compiled them for a job naming `ds-ssh` itself; or another Secret than
    the pods mount), the runtime trusts `ds-ssh` only as its own, so one a tenant planted is
    refused and no pod is released on it (before, an annotation naming `another` made the
    runtime check `another` alone and release every pod on the planted key). The author of
    a job naming `ds-ssh` itself recompiles with this flatjob."""
    s = Scenario(_named("ds-ssh") if annotation is None else DEEPSPEED)
    _retemplate(s, annotation)
    if annotation:
        s.cluster.create_secret(NAMESPACE, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": annotation, "namespace": NAMESPACE}})
    planted = _plant(s, owned=False)
    for _ in range(10):
        s.tick()
    assert _secret_uid(s) == planted and not _released(s)
    stalled = _condition(s.status(), "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "ForeignSecret")


# --- PodTemplates ---------------------------------------------------------------------------------


def _junk(name: str, job: str, size: int = 1000) -> dict[str, Any]:
    labels = {keys.JOB_NAME: job}
    return {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "x", "image": "busybox", "env": [{"name": "J", "value": "j" * size}]}]}}}


@fake_only
def test_podtemplates_of_other_names_are_never_cached_and_never_stall_the_job(runtime_mode: str) -> None:
    s = Scenario(pytorch(master="sleep 60; exit 0", worker="sleep 60; exit 0"))
    for i in range(5):  # before the runtime lists them
        s.cluster.apply(_junk(f"junk-{i}", s.name))
    s.controller = s.new_controller()
    s.run_until(lambda st: st.get("phase") == "Running")
    for i in range(5, 10):  # and while it watches
        s.cluster.apply(_junk(f"junk-{i}", s.name))
    s.sync()
    assert not [n for n in s.controller.templates.cache if n.startswith("junk-")]
    assert s.finished()["phase"] == "Succeeded"


def test_records_asking_for_pods_nobody_made_cost_a_run_of_names_each() -> None:
    """Records are anyone's to create: 20 of a few hundred bytes, each asking for 9 999 workers
    with no PodTemplate or pod, are kept as runs of names, not a string a pod (review of
    round 11 #3: 30 MiB, ~85 such records reached the 128 MiB limit); a template of one of
    their names is still admitted, one past their replicas is not."""
    s = Scenario(pytorch(master="sleep 400; exit 0", worker="sleep 400; exit 0"))
    s.run_until(lambda st: st.get("phase") == "Running")
    plural = s.kind.lower() + "s"
    for i in range(20):
        rec = copy.deepcopy(s.record)
        rec["metadata"] = {"name": f"big{i}", "namespace": NAMESPACE, "annotations": dict(s.record["metadata"].get("annotations") or {})}
        rec.pop("status", None)
        rec["spec"]["replicaSpecs"][1]["replicas"] = 9_999
        s.cluster.apply_record(NAMESPACE, plural, rec)
    s.sync()
    for _ in range(3):
        s.tick()
    kept = [names for _, names in s.controller._pod_names.values()]
    assert len(kept) == 21 and sum(len(n.runs) + len(n.singles) for n in kept) <= 2 * 21
    admitted = s.controller.templates.admitted
    assert admitted is not None and len(admitted.runs) <= 2 * 21
    assert "big7-worker-9998" in admitted and "big7-worker-9999" not in admitted and "big7-worker-01" not in admitted


def test_a_template_grown_past_what_compile_renders_is_kept_as_its_size_and_is_a_problem() -> None:
    from .test_decisions_jobview import compiled, source

    record, templates = compiled(source("DeepSpeedJob"))
    big = copy.deepcopy(templates["j-worker-1"])
    big["template"]["spec"]["containers"][0]["env"] = [{"name": "J", "value": "j" * (TEMPLATE_BYTES + 1)}]
    kept = template(big)
    assert kept["template"]["spec"] is None and kept["template"]["oversize"] > TEMPLATE_BYTES
    templates["j-worker-1"] = kept
    assert "more than the" in (job_view(record, templates).problem or "")


@fake_only
def test_a_list_page_too_large_to_parse_is_asked_for_in_smaller_pages() -> None:
    s = Scenario(pytorch(master="sleep 60; exit 0", worker="sleep 60; exit 0"))
    count = PAGE_BYTES // (1024 * 1024) + 3  # more than one page of 1 MiB objects
    for i in range(count):
        s.cluster.apply(_junk(f"big-{i}", "someone", 1024 * 1024))
    items, _ = s.controller.cluster.list(POD_TEMPLATES, NAMESPACE, labels={keys.JOB_NAME: "someone"}, trim=lambda o: {"metadata": {"name": o["metadata"]["name"]}})
    assert sorted(o["metadata"]["name"] for o in items) == sorted(f"big-{i}" for i in range(count))


# --- pods anyone may create -------------------------------------------------------------------


def _junk_pod(name: str, job: str, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    """A pod with the job's labels, 200 KiB of annotations, a thousand labels, owner references,
    gates and container statuses: what anyone who may create pods (and a kubelet) can put on one."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": NAMESPACE,
            "labels": {keys.JOB_NAME: job, keys.JOB_KIND: "PyTorchTrainingJob", **{f"junk.example/l{i}": "x" * 63 for i in range(1000)}},
            "annotations": {f"junk.example/{i}": "j" * 25_000 for i in range(8)} | {keys.ATTEMPT: "1" * 100_000},
            "ownerReferences": [*([owner] if owner else []), *({"apiVersion": "v1", "kind": "X", "name": "x" * 200, "uid": str(i)} for i in range(1000))],
        },
        "spec": {"containers": [{"name": "x", "image": "busybox"}], "schedulingGates": [{"name": f"g{i}"} for i in range(1000)]},
        "status": {"containerStatuses": [{"name": f"c{i}", "state": {"waiting": {"reason": "r" * 2000, "message": "m" * 2000}}} for i in range(1000)]},
    }


def test_a_pod_is_cached_as_what_the_decisions_read_whatever_its_maker_put_on_it() -> None:
    kept = pod(_junk_pod("junk", "j", {"apiVersion": "flatjob.dev/v1beta1", "kind": "PyTorchTrainingJob", "name": "j", "uid": "u", "controller": True}))
    assert len(orjson.dumps(kept)) < 64 * 1024 < len(orjson.dumps(_junk_pod("junk", "j")))
    meta = kept["metadata"]
    assert meta["labels"] == {keys.JOB_NAME: "j", keys.JOB_KIND: "PyTorchTrainingJob"}
    assert list(meta["annotations"]) == [keys.ATTEMPT] and len(meta["annotations"][keys.ATTEMPT]) <= 256
    assert [r["uid"] for r in meta["ownerReferences"]] == ["u"]  # the controller reference alone
    assert len(kept["spec"]["schedulingGates"]) == len(kept["status"]["containerStatuses"]) == CONTAINERS_CAP


@pytest.mark.parametrize("field", ["name", "apiVersion", "kind", "uid"])
def test_a_controller_reference_of_any_length_is_cached_bounded_and_never_cut_into_ownership(field: str) -> None:
    """The API server bounds no field of an ownerReference (validateOwnerReference asks only
    that each is non-empty): a pod with 1 MiB in its controller reference's name was cached
    whole, the 1 MiB each (attacker of issue 21, round 5: 20 such pods, 24 MiB).  A value
    longer than any object's is left out, not cut: a uid cut to the record's length would be it."""
    uid = "0b6f1c1e-2a3b-4c5d-8e9f-0a1b2c3d4e5f"
    owner = {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "PyTorchTrainingJob", "name": "j", "uid": uid, "controller": True}
    owner[field] = (uid if field == "uid" else owner[field]) + "x" * (1 << 20)
    kept = pod({"metadata": {"name": "j-worker-0", "labels": {keys.JOB_NAME: "j"}, "ownerReferences": [owner]}, "spec": {}, "status": {}})
    assert len(orjson.dumps(kept)) < 4096
    assert (kept["metadata"]["ownerReferences"][0].get("uid") == uid) == (field != "uid")
    from flatjob.runtime.observe import pod_state

    assert pod_state(kept, owner_uid=uid).ours == (field != "uid")


@fake_only
def test_pods_with_the_jobs_labels_and_its_records_uid_never_stall_it(runtime_mode: str) -> None:
    s = Scenario(pytorch(master="sleep 60; exit 0", worker="sleep 60; exit 0"))
    s.run_until(lambda st: st.get("phase") == "Running")
    meta = s.cluster.record(NAMESPACE, s.kind.lower() + "s", s.name)["metadata"]
    owner = {"apiVersion": "flatjob.dev/v1beta1", "kind": s.kind, "name": s.name, "uid": meta["uid"], "controller": True}
    for i in range(3):  # a forged owner makes them read; the names are none of the job's
        s.cluster.apply(_junk_pod(f"junk-{i}", s.name, owner))
    s.sync()
    cached = [p for p in s.controller.pods.cache.values() if p["metadata"]["name"].startswith("junk-")]
    assert cached and all(len(orjson.dumps(p)) < 64 * 1024 for p in cached)
    assert s.finished()["phase"] == "Succeeded"


def _pod_creates(s: Scenario) -> list[str]:
    """The runtime's pod creates from now on, answered or not."""
    seen: list[str] = []
    before = s.server.on_request

    def note(verb: str, resource: str, namespace: str | None, name: str | None, agent: str = "") -> None:
        if verb == "create" and resource == "pods" and "(runtime-" in agent:
            seen.append(verb)
        before(verb, resource, namespace, name, agent)

    s.server.on_request = note
    return seen


@fake_only
def test_a_pod_name_taken_by_a_pod_without_the_jobs_labels_is_said_and_backed_off(runtime_mode: str) -> None:
    """A pod named as one of the job's, made before the runtime without the job's labels: the
    runtime watches its pods by those labels, so it never saw it, and created it again every
    cycle (409, "someone got there first: fine"), 123 creates in 120 s, the record saying
    'waiting for 1 of 3 pod(s) to exist' for ever.  It is a refusal now: the record names the
    pod and what to do, creates back off, and the squatter is never touched."""
    s = Scenario(pytorch(master="sleep 60; exit 0", worker="sleep 60; exit 0"))
    squatter = s.cluster.create_pod(NAMESPACE, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sim-worker-0"},
                                                "spec": {"containers": [{"name": "x", "image": "busybox"}]}})
    creates = _pod_creates(s)
    for _ in range(120):
        s.tick()
    st = s.status()
    assert "sim-worker-0 already exists without this job's labels" in st["runtime"]["refused"]
    assert "already exists without this job's labels" in _condition(st, "Ready")["message"]
    assert len(creates) <= 20 and _events(s, "GangRefused")
    there = s.pods()["sim-worker-0"]
    assert there["metadata"]["uid"] == squatter["metadata"]["uid"] and not there["metadata"].get("ownerReferences")
    s.cluster.store.delete(_pods(), NAMESPACE, "sim-worker-0", {"gracePeriodSeconds": 0})
    assert s.finished(limit=600)["phase"] == "Succeeded"


@fake_only
def test_a_running_pod_whose_job_labels_someone_took_off_is_said_not_replaced_for_ever(runtime_mode: str) -> None:
    """`kubectl label pod sim-worker-0 flatjob.dev/job-name-`: the pods watch sends DELETED (it
    left the selector) and the runtime replaced it after a disruption, a create the name refused
    every cycle.  The record says the name is taken and why; the pod itself is left alone."""
    s = Scenario(pytorch(master="sleep 400; exit 0", worker="sleep 400; exit 0"))
    s.run_until(lambda st: st.get("phase") == "Running")
    uid = s.pods()["sim-worker-0"]["metadata"]["uid"]
    s.cluster.patch_pod(NAMESPACE, "sim-worker-0", {"metadata": {"labels": {keys.JOB_NAME: None}}})
    creates = _pod_creates(s)
    for _ in range(60):
        s.tick()
    st = s.status()
    assert "sim-worker-0 already exists without this job's labels" in st["runtime"]["refused"] and _events(s, "PodRefused")
    ready = next(c for c in st["conditions"] if c["type"] == "Ready")
    assert "already exists without this job's labels" in ready["message"] and "Replacing" not in ready["message"], ready
    assert len(creates) <= 10
    assert s.pods()["sim-worker-0"]["metadata"]["uid"] == uid


def _pods() -> Any:
    from flatjob.runtime.sim.apiserver import kinds

    return kinds.by_key("pods")


def test_the_status_a_job_of_many_types_writes_fits_its_own_budget() -> None:
    """A GenericJob of 500 one-replica types, every pod failed: what the runtime itself writes
    is within what trim.record keeps (else each cycle would read the status again)."""
    import json

    from flatjob.runtime.trim import status_bytes

    from .builders import all_running, cycle, job_view, running_ledger
    from .builders import pod as observed_pod

    types = {f"t{i:03d}" + "x" * 36: 1 for i in range(500)}
    job = job_view("GenericJob", types=types)
    lost = {k: observed_pod(k, "Failed", exit=137, gated=False) for k in all_running(job)}
    c = cycle(job, lost, running_ledger(job))
    spec = {"replicaSpecs": [{"type": t, "replicas": 1} for t in types]}
    assert len(json.dumps(c.status, separators=(",", ":")).encode()) <= status_bytes(spec)


def test_podgroups_and_deployments_with_a_jobs_labels_are_cached_only_when_a_served_job_names_them() -> None:
    """The namespace runtime watches PodGroups and TensorBoard Deployments once for the namespace,
    by label (one LabelWatch each); anyone may label objects so, and it cached them all (review
    hx19): it now caches only the names its served jobs want.  A job whose PodGroup existed before its record is
    read by name once the record names it, and runs."""
    from .test_namespace import namespace_scenario

    t9k = "  scheduler:\n    t9kScheduler:\n      queue: default\n"
    s = namespace_scenario(pytorch(master="sleep 300; exit 0", worker="sleep 300; exit 0").replace("spec:\n", "spec:\n" + t9k, 1))
    group = next(m for m in s.manifests if m["kind"] == "PodGroup")
    s.run_until(lambda st: st.get("aggregate", {}).get("running") == 3, limit=120)
    for i in range(50):
        junk = copy.deepcopy(group)
        junk["metadata"] = {**junk["metadata"], "name": f"junk-{i}"}
        junk["metadata"].pop("ownerReferences", None)
        junk["spec"]["junk"] = "x" * 10_000
        s.cluster.apply(junk)
    s.tick(5)
    assert sorted(s.controller.podgroups.informer.cache) == [group["metadata"]["name"]]
    late = copy.deepcopy(group)
    late["metadata"] = {**late["metadata"], "name": "late"}
    s.cluster.apply(late)  # turned away: no job names it yet
    s.tick(2)
    assert "late" not in s.controller.podgroups.informer.cache
    for obj in compile_late():
        s.cluster.apply(obj)
    for _ in range(60):
        s.tick()
        if s.cluster.record(NAMESPACE, "pytorchtrainingjobs", "late").get("status", {}).get("aggregate", {}).get("running") == 3:
            break
    assert "late" in s.controller.podgroups.informer.cache  # read by name once its record named it
    assert s.cluster.record(NAMESPACE, "pytorchtrainingjobs", "late")["status"]["aggregate"]["running"] == 3


def compile_late() -> list[dict[str, Any]]:
    """Job `late`'s record and PodTemplates (its PodGroup is applied first by the test)."""
    from flatjob.compiler.options import CompileOptions

    from .harness import compile_text

    t9k = "  scheduler:\n    t9kScheduler:\n      queue: default\n"
    text = pytorch(master="sleep 300; exit 0", worker="sleep 300; exit 0").replace("spec:\n", "spec:\n" + t9k, 1).replace("name: sim\n", "name: late\n", 1)
    return [o for o in compile_text(text, CompileOptions(namespace=NAMESPACE, runtime="namespace")) if o["kind"] == "PodTemplate" or o["apiVersion"] == keys.RECORD_API_VERSION]


@fake_only
def test_a_taken_pod_name_whose_look_up_fails_is_backed_off_not_created_every_cycle(runtime_mode: str) -> None:
    """A create answered AlreadyExists is followed by a list of the pod by name; when that list
    fails (503, 429, a time-out) the 409 was swallowed as 'someone got there first: fine', no
    back-off, no error counted, no log: the runtime created (and listed) again every cycle, as
    before the refusal existed (review hx20).  A failed look-up is an API error, backed off."""
    s = Scenario(pytorch(master="sleep 60; exit 0", worker="sleep 60; exit 0"))
    s.cluster.create_pod(NAMESPACE, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sim-worker-0"},
                                     "spec": {"containers": [{"name": "x", "image": "busybox"}]}})
    s.tick()
    creates = _pod_creates(s)
    before = s.server.on_request

    def hook(verb: str, resource: str, namespace: str | None, name: str | None, agent: str = "") -> None:
        if before is not None:
            before(verb, resource, namespace, name, agent)
        if resource == "pods" and verb == "list" and "(runtime-" in agent:
            raise ApiError("the server is currently unable to handle the request", status=503)

    s.server.on_request = hook
    for _ in range(120):
        s.tick()
    assert len(creates) <= 20, f"{len(creates)} creates in 120 ticks"


# --- the Lease ----------------------------------------------------------------------------------


@fake_only
def test_a_lease_whose_transitions_cannot_grow_is_taken_over_all_the_same() -> None:
    """leaseTransitions is an int32: a tenant's Lease (a holder nobody runs) at 2^31-1 made every
    take-over write 2^31, which the API server refuses (400), so no runtime held the Lease again
    and no job of the namespace had another cycle (hx22). The count stays at its maximum."""
    s = Scenario(pytorch(master="sleep 400; exit 0", worker="sleep 400; exit 0"))
    now = [1000.0]
    first = s.runtime("first", use_lease=True, mono=lambda: now[0])
    assert first._hold_lease()
    name = first.scope.lease
    lease = s.cluster.get_lease(NAMESPACE, name)
    lease["spec"].update(holderIdentity="nobody-runs-me", leaseTransitions=2**31 - 1)
    s.cluster.replace_lease(NAMESPACE, lease)
    first.close()
    nxt = s.runtime("next", use_lease=True, mono=lambda: now[0])
    assert not nxt._hold_lease()  # a holder's Lease, seen now: waited out
    now[0] += LEASE_MAX + 1
    assert nxt._hold_lease(), "the runtime never took the Lease over"
    spec = s.cluster.get_lease(NAMESPACE, name)["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("next", 2**31 - 1)
    nxt.close()


# --- Events -------------------------------------------------------------------------------------


@fake_only
def test_an_event_someone_made_unpatchable_is_written_anew() -> None:
    """The runtime patches its Event's count, lastTimestamp and message (JSON patch `replace`); an
    Event someone rewrote without them refuses the patch (422), and every later occurrence of its
    reason was dropped for the runtime's life (hx22). It is created again instead, as one that
    expired is."""
    s = Scenario(pytorch(master="sleep 400; exit 0", worker="sleep 2; exit 1", policy="OnFailure", limit=9))
    s.run_until(lambda st: bool(_events(s, "Restarting")), limit=120)
    (first,) = _events(s, "Restarting")
    meta = first["metadata"]
    for field in ("count", "lastTimestamp"):
        first.pop(field, None)
    from flatjob.runtime.sim.apiserver import kinds
    from flatjob.runtime.sim.cluster import IN_PROCESS

    s.cluster.store.update(kinds.by_key("events"), NAMESPACE, meta["name"], first, "", IN_PROCESS)
    s.run_until(lambda st: sum(e.get("count") or 0 for e in _events(s, "Restarting")) >= 2, limit=300)
