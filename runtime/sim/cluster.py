"""The fake Kubernetes API server: every rule it emulates, with the source that says so.

runtime/sim/apiserver holds the storage and the rules; FakeCluster (here) calls them in-process with
the runtime.api.Cluster methods, runtime/sim/server.py serves them over HTTP to the real
`kubernetes` client.  Both get the same behaviour.  Sources are kubernetes/kubernetes paths
(staging/src/k8s.io/... abbreviated to k8s.io/...) unless a URL is given.

Storage and the generic registry (apiserver/store.py; k8s.io/apiserver/pkg/registry/generic/
registry/store.go, k8s.io/apiserver/pkg/registry/rest/{create,update,delete}.go):
- one resourceVersion counter for every write; uid a UUID, creationTimestamp RFC 3339
  (rest.FillObjectMetaSystemFields); a body carrying a resourceVersion on create is refused as the
  etcd3 store refuses it (500);
- 409 AlreadyExists on create (`object is being deleted: ...` while the name is still held);
  404 NotFound; 409 Conflict when metadata.resourceVersion is stale (OptimisticLockErrorMsg);
  an update without resourceVersion where the kind does not allow it (custom resources) is 422
  `metadata.resourceVersion: Invalid value: 0x0: must be specified for an update`;
- uid, creationTimestamp, deletionTimestamp, generation cannot be changed by an update
  (rest.BeforeUpdate); a changed name is 400; an update or patch that changes nothing writes
  nothing (no new resourceVersion, no event);
- delete preconditions on uid and resourceVersion (409, rest.BeforeDelete's message); graceful
  deletion where the kind asks for it: deletionTimestamp = now + grace, deletionGracePeriodSeconds,
  generation + 1; a second delete may only shorten the grace period, 0 removes; finalizers keep an
  object (store.go ShouldDeleteDuringUpdate removes it once they are gone); pods and pod templates
  answer a delete with the object (ReturnDeletedObject), other kinds with a Success Status;
- a stored object over etcd's --max-request-bytes (1572864 bytes, etcd server/embed/config.go
  DefaultMaxRequestBytes; measured here as compact JSON) is refused with etcd's error as
  kube-apiserver passes it on: 500 `etcdserver: request is too large`
  (k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/status.go ErrorToAPIStatus,
  kubernetes/kubernetes#112152); an HTTP body over 3 MiB is 413 before that
  (k8s.io/apiserver/pkg/server/config.go MaxRequestBodyBytes);
- lists: label selectors (k8s.io/apimachinery/pkg/labels/selector.go) and field selectors
  (k8s.io/apimachinery/pkg/fields/selector.go; pods' field labels from
  pkg/registry/core/pod/strategy.go ToSelectableFields, secrets' `type`; others 400);
  limit/continue pages served from the snapshot of the first page with etcd3's continue token,
  410 for a token older than the history, remainingItemCount when unfiltered; typed lists'
  items carry no apiVersion/kind, custom resource lists' items do;
- watches (apiserver/watch.py; k8s.io/apiserver/pkg/storage/cacher): resourceVersion unset or "0"
  starts with the current objects as ADDED; objects entering, staying in or leaving a selection
  give ADDED, MODIFIED, DELETED; a compacted resourceVersion is an ERROR event carrying a 410
  Expired Status (`too old resource version: N (M)`) — runtime.api.Expired in-process; a
  resourceVersion the store has not reached waits 3 s, then a 504 ERROR event; BOOKMARK events
  (allowWatchBookmarks) carry the resourceVersion sent up to, in the kind's empty object;
  sendInitialEvents ends the initial events with the `k8s.io/initial-events-end` bookmark;
- patches (apiserver/patches.py; k8s.io/apiserver/pkg/endpoints/handlers/patch.go): JSON patch
  (RFC 6902; any failure, a failed `test` included, is 422 `the server rejected our request due
  to an error in our request`), merge patch (RFC 7386), strategic merge patch for built-in kinds
  (lists merged by patchMergeKey, `$patch` directives; k8s.io/apimachinery/pkg/util/
  strategicpatch) and 415 for it on custom resources;
- managedFields (apiserver/managedfields.py): an `operation: Update` entry per writer with the
  fields it set, in fieldsV1 (k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager).

Built-in kinds decoded into their Go types (apiserver/typed.py, with the Kubernetes 1.32 OpenAPI
definitions in schemas/kubernetes): unknown fields dropped with a `Warning: 299` header (400 under
fieldValidation=Strict); a value of the wrong JSON type is 400 (an int32 refuses `1.0`);
resource quantities stored canonically (apiserver/quantity.py, k8s.io/apimachinery/pkg/api/
resource/quantity.go CanonicalizeBytes: `1.0` -> "1", `0.5` -> "500m", `1024Mi` -> "1Gi").

Pods (apiserver/pods.py, apiserver/defaults.py):
- defaults (pkg/apis/core/v1/defaults.go): dnsPolicy, restartPolicy, terminationGracePeriodSeconds,
  schedulerName, securityContext, enableServiceLinks, terminationMessagePath/Policy,
  imagePullPolicy (by tag), requests copied from limits, port protocol, probe timings, volume
  defaultMode, fieldRef apiVersion; admission on create: serviceAccountName and the
  kube-api-access-xxxxx projected volume and mounts (plugin/pkg/admission/serviceaccount),
  not-ready/unreachable tolerations for 300 s (plugin/pkg/admission/defaulttolerationseconds),
  priority and preemptionPolicy (plugin/pkg/admission/priority; unknown PriorityClass 403);
- create (pkg/registry/core/pod/strategy.go PrepareForCreate): status Pending with qosClass,
  generation 1, PodScheduled=False `SchedulingGated` while gated; validation of containers,
  restartPolicy and nodeName-with-gates (pkg/apis/core/validation ValidatePodCreate, in part);
- update (ValidatePodUpdate): only container/initContainer images, activeDeadlineSeconds (set or
  lowered), added tolerations (validateOnlyAddedTolerations), removed scheduling gates
  (validateOnlyDeletedSchedulingGates: `spec.schedulingGates[i].name: Forbidden: only deletion is
  allowed, but found new scheduling gate 'x'`) and metadata may change; anything else is 422
  `spec: Forbidden: pod updates may not change fields other than ...`; a spec change bumps
  generation (updatePodGeneration); status is kept;
- status writes (pods/status) keep spec and ownerReferences; terminated containers of pods that
  do not restart stay terminated (ValidateContainerStateTransition);
- graceful deletion (CheckGracefulDelete): the grace period asked for, else
  terminationGracePeriodSeconds, but at once for a pod that is not scheduled (no spec.nodeName)
  or is terminal; the kubelet stand-in (runtime/sim/kubelet.py) ends it;
- binding (pods/binding, pkg/registry/core/pod/storage/storage.go): nodeName is set once, never
  on a gated or deleting pod; PodScheduled=True.

Other kinds: PodTemplates (pod defaults without admission, validated like a pod spec, mutable,
generation counts template changes: pkg/registry/core/podtemplate/strategy.go); Secrets
(stringData merged into base64 data, type Opaque by default, ssh-auth needs ssh-privatekey,
immutable type and data: pkg/apis/core/validation ValidateSecret); Events served by both
core/v1 and events.k8s.io/v1 from one storage with events.k8s.io's strict validation
(pkg/apis/core/validation/events.go); Leases (coordination.k8s.io/v1); ResourceQuotas.

ResourceQuota (apiserver/quota.py; k8s.io/apiserver/pkg/admission/plugin/resourcequota/
controller.go, pkg/quota/v1/evaluator/core/pods.go): every non-terminal pod is charged its
requests and limits from creation, gated or not (KEP-5465, kubernetes/enhancements#5490);
`count/pods` counts every pod; a create over a quota is 403 `pods "x" is forbidden: exceeded
quota: q, requested: ..., used: ..., limited: ...`, one that omits a quota'd cpu/memory value
403 `failed quota: q: must specify ...`; status.used grows in the create admission lets through
and shrinks RELEASE_AFTER (5 s) after a pod ends or goes, when the quota controller has seen it.

Custom resources (apiserver/customresources.py; k8s.io/apiextensions-apiserver): the CRDs of
schemas/crds (and T9k's PodGroup, schema unknown, fields kept); numbers read back as
kube-apiserver's unstructured JSON decoding leaves them (k8s.io/apimachinery/pkg/util/json
convertNumber: an integral float such as `1.0` comes back as `1`); unknown fields pruned;
schema defaults filled in on every read (schema/defaulting/algorithm.go); schema validation with kube-openapi's messages; status and scale subresources (a scale write
must pass the CRD schema: `spec.elastic.expectedReplicas: Invalid value: 0: ... should be
greater than or equal to 1`, and autoscaling's replicas >= 0).

Garbage collection (apiserver/gc.py; pkg/controller/garbagecollector): when an owner is removed,
dependents naming it by uid lose the reference if another owner remains, else are deleted with
background propagation (pods gracefully); propagationPolicy Orphan keeps them; an object born
with all owners absent is collected.

Left out: authentication, authorization and RBAC; admission webhooks and the admission plugins
not named above (LimitRanger, PodSecurity...); server-side apply (apply patches are 415) and
field-ownership conflicts; ResourceQuota scopes; foreground deletion (treated as background);
most of ValidatePod (names, ports, volumes are not checked); conversion between API versions
other than the two Event APIs; cluster-scoped kinds and namespaces (every namespace exists);
deleteCollection; the watch cache's exact bookmark timing; the garbage collector's delay (it
acts at once).  In-process, `calls` counts reads and the writes that
changed the cluster, and `crash_after` makes the N-th next write raise Crash, to kill a runtime
at an arbitrary point in chaos tests.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from ..api import Obj
from .apiserver import kinds
from .apiserver.copies import clone
from .apiserver.selectors import label_selector_of
from .apiserver.store import Store
from .apiserver.watch import Watch

FakeWatch = Watch
IN_PROCESS = "flatjob-fake-client"  # the field manager of in-process writes


class Crash(BaseException):
    """Raised by the fake to kill the process under test at a chosen API call."""


class FakeCluster:
    """The fake API server's store, called in-process with the runtime.api.Cluster methods."""

    def __init__(self, clock: Callable[[], float] = lambda: 0.0, history: int = 10_000, seed: int = 0):
        self.store = Store(clock, history, seed)
        self.clock = clock
        self.calls: Counter[str] = Counter()
        self.crash_after: int | None = None
        self.lock = self.store.lock  # a caller may put its own lock around the calls
        self.store.listeners.append(lambda change: self._bump(change.key, change.type, change.obj))

    # --- the store's state ----------------------------------------------------------------------
    @property
    def objects(self) -> dict[tuple[str, str, str], Obj]:
        return self.store.objects

    @property
    def rv(self) -> int:
        return self.store.rv

    @property
    def log(self) -> list[Any]:
        return self.store.log

    @log.setter
    def log(self, entries: list[Any]) -> None:
        self.store.log = entries

    @property
    def compacted(self) -> int:
        return self.store.compacted

    @compacted.setter
    def compacted(self, rv: int) -> None:
        self.store.compacted = rv

    def _bump(self, resource: str, etype: str, obj: Obj) -> None:
        """Called after every write (a hook for subclasses, e.g. to wake a runtime)."""

    def compact(self) -> None:
        """Forget the whole event history: every open watch gets 410 next time."""
        self.store.compact()

    def _write(self, call: str, fn: Callable[[], Any]) -> Any:
        """Run a write; `crash_after` counts every attempt, `calls` the ones that changed the
        cluster (a refused or no-op write stores nothing, as in kube-apiserver)."""
        if self.crash_after is not None:
            if self.crash_after <= 0:
                self.crash_after = None
                raise Crash(call)
            self.crash_after -= 1
        before = self.store.rv
        try:
            return fn()
        finally:
            if self.store.rv != before:
                self.calls[call] += 1

    # --- pods --------------------------------------------------------------------------------------
    def list_pods(self, namespace: str, selector: Mapping[str, str]) -> tuple[list[Obj], str]:
        self.calls["list_pods"] += 1
        found = self.store.list(kinds.by_key("pods"), namespace, label_selector_of(selector))
        return clone(found["items"]), found["metadata"]["resourceVersion"]

    def watch_pods(self, namespace: str, selector: Mapping[str, str], resource_version: str) -> Watch:
        self.calls["watch_pods"] += 1
        return self.store.watch(kinds.by_key("pods"), namespace, label_selector_of(selector), resource_version=resource_version)

    def create_pod(self, namespace: str, body: Obj) -> Obj:
        return clone(self._write("create_pod", lambda: self.store.create(kinds.by_key("pods"), namespace, body, IN_PROCESS)[0]))

    def patch_pod(self, namespace: str, name: str, patch: Any) -> Obj:
        """A JSON patch (a list of operations) or a strategic merge patch (an object)."""
        kind = "json" if isinstance(patch, list) else "strategic"
        res = kinds.by_key("pods")
        return clone(self._write("patch_pod", lambda: self.store.patch(res, namespace, name, kind, patch, manager=IN_PROCESS)[0]))

    def delete_pod(self, namespace: str, name: str, uid: str | None, grace_period_seconds: int | None = None) -> None:
        """Delete with a UID precondition; scheduled pods that still run terminate gracefully."""
        options: Obj = {"preconditions": {"uid": uid}} if uid else {}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        self._write("delete_pod", lambda: self.store.delete(kinds.by_key("pods"), namespace, name, options))

    def bind_pod(self, namespace: str, name: str, node: str) -> None:
        """The scheduler's binding: the pod is assigned to `node`."""
        self.store.bind(namespace, name, node)

    # --- records (flatjob.dev job records) -----------------------------------------------------------
    def list_records(self, namespace: str, plural: str, name: str) -> tuple[list[Obj], str]:
        self.calls["list_records"] += 1
        found = self.store.list(kinds.record(plural), namespace, field_selector=f"metadata.name={name}")
        return clone(found["items"]), found["metadata"]["resourceVersion"]

    def watch_records(self, namespace: str, plural: str, name: str, resource_version: str) -> Watch:
        self.calls["watch_records"] += 1
        return self.store.watch(kinds.record(plural), namespace, field_selector=f"metadata.name={name}", resource_version=resource_version)

    def replace_record_status(self, namespace: str, plural: str, body: Obj) -> Obj:
        """The status subresource: optimistic concurrency on resourceVersion; spec untouched."""
        res = kinds.record(plural)
        return clone(self._write("replace_record_status", lambda: self.store.update(res, namespace, body["metadata"]["name"], body, "status", IN_PROCESS)[0]))

    def apply_record(self, namespace: str, plural: str, body: Obj) -> Obj:
        """Create or update a record's metadata and spec (a GitOps apply); status is kept."""
        res = kinds.record(plural)
        with self.store.lock:
            current = self.store.objects.get((res.key, namespace, body["metadata"]["name"]))
            if current is None:
                return clone(self.store.create(res, namespace, body, IN_PROCESS)[0])
            desired = clone(current)
            desired["spec"] = clone(body.get("spec"))
            for key in ("labels", "annotations"):
                if key in (body.get("metadata") or {}):
                    desired["metadata"][key] = clone(body["metadata"][key])
            return clone(self.store.update(res, namespace, current["metadata"]["name"], desired, "", IN_PROCESS)[0])

    def scale_record(self, namespace: str, plural: str, name: str, replicas: int) -> Obj:
        """`kubectl scale`: a patch of the scale subresource; returns the record."""
        res = kinds.record(plural)
        self.store.patch(res, namespace, name, "merge", {"spec": {"replicas": replicas}}, "scale", IN_PROCESS)
        return self.record(namespace, plural, name)

    def delete_record(self, namespace: str, plural: str, name: str) -> None:
        self.store.delete(kinds.record(plural), namespace, name)

    # --- everything else ---------------------------------------------------------------------------
    def get_secret(self, namespace: str, name: str) -> Obj:
        self.calls["get_secret"] += 1
        return clone(self.store.get(kinds.by_key("secrets"), namespace, name))

    def create_secret(self, namespace: str, body: Obj) -> Obj:
        return clone(self._write("create_secret", lambda: self.store.create(kinds.by_key("secrets"), namespace, body, IN_PROCESS)[0]))

    def get_podgroup(self, namespace: str, name: str) -> Obj:
        self.calls["get_podgroup"] += 1
        return clone(self.store.get(kinds.by_key("podgroups"), namespace, name))

    def create_event(self, namespace: str, body: Obj) -> None:
        body = clone(body)
        meta = body.setdefault("metadata", {})
        if not meta.get("name") and not meta.get("generateName"):
            meta["name"] = f"event-{self.store.rv + 1}"
        self._write("create_event", lambda: self.store.create(kinds.by_key("events"), namespace, body, IN_PROCESS))

    def get_lease(self, namespace: str, name: str) -> Obj:
        self.calls["get_lease"] += 1
        return clone(self.store.get(kinds.by_key("leases"), namespace, name))

    def create_lease(self, namespace: str, body: Obj) -> Obj:
        return clone(self._write("create_lease", lambda: self.store.create(kinds.by_key("leases"), namespace, body, IN_PROCESS)[0]))

    def replace_lease(self, namespace: str, body: Obj) -> Obj:
        res = kinds.by_key("leases")
        return clone(self._write("replace_lease", lambda: self.store.update(res, namespace, body["metadata"]["name"], body, "", IN_PROCESS)[0]))

    # --- helpers for tests and GitOps simulations ------------------------------------------------------
    def apply(self, obj: Obj) -> None:
        """Create any object the way a GitOps tool would (pods and records get their rules)."""
        ns = obj["metadata"].get("namespace", "default")
        res = kinds.by_kind(obj.get("apiVersion", ""), obj.get("kind", ""))
        if res is None:
            raise ValueError(f"the fake API server does not serve {obj.get('apiVersion')} {obj.get('kind')}")
        if res.custom and res.key.startswith("records/"):
            self.apply_record(ns, res.plural, obj)
        elif res.key == "pods":
            self.create_pod(ns, obj)
        elif (res.key, ns, obj["metadata"]["name"]) not in self.store.objects:
            self.store.create(res, ns, obj, IN_PROCESS)

    def pods(self, namespace: str = "default") -> dict[str, Obj]:
        """The stored pods by name (the store's own objects: read them, never change them)."""
        return {name: o for (_, _, name), o in self.store.of("pods", namespace)}

    def record(self, namespace: str, plural: str, name: str) -> Obj:
        return clone(self.store.get(kinds.record(plural), namespace, name))

    def record_status(self, namespace: str, plural: str, name: str) -> Obj:
        """A copy of the record's status alone ({} before the runtime wrote one)."""
        return clone(self.store.get(kinds.record(plural), namespace, name).get("status") or {})

    def set_pod_status(self, namespace: str, name: str, status: Obj, remove: bool = False, manager: str = "kubelet", uid: str | None = None) -> None:
        """A kubelet's or controller's side: write a pod's status (of incarnation `uid` only,
        when given), or remove a pod the kubelet has stopped (grace 0)."""
        res = kinds.by_key("pods")
        if remove:
            self.store.delete(res, namespace, name, {"gracePeriodSeconds": 0, **({"preconditions": {"uid": uid}} if uid else {})})
            return
        with self.store.lock:
            current = self.store.get(res, namespace, name)
            if uid is not None and current["metadata"]["uid"] != uid:
                from .apiserver.status import conflict

                raise conflict("", "pods", name, f"Precondition failed: UID in precondition: {uid}, UID in object meta: {current['metadata']['uid']}")
            self.store.update(res, namespace, name, {**current, "status": status}, "status", manager)

    def terminate_namespace(self, namespace: str) -> None:
        """`kubectl delete namespace`: it turns Terminating, so every create in it is refused (403,
        staging/src/k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle/admission.go), and
        the namespace controller deletes its pods with their own grace periods and no
        DisruptionTarget (pkg/controller/namespace/deletion: deleteCollection, no grace given).
        The rest of its content is left to the test."""
        with self.store.lock:
            self.store.terminating.add(namespace)
            for name, pod in sorted(self.pods(namespace).items()):
                if not pod["metadata"].get("deletionTimestamp"):
                    self.delete_pod(namespace, name, None)

    def evict_pod(self, namespace: str, name: str, delete_refused: bool = False) -> None:
        """The Eviction API (pods/eviction; `kubectl drain`): the DisruptionTarget condition
        `EvictionByEvictionAPI`, then a graceful delete (pkg/registry/core/pod/storage/
        eviction.go addConditionAndDeletePod: the condition is its own update, the delete a
        second request).  `delete_refused`: that delete fails (a validating webhook on pod
        DELETE, a conflict) and the pod runs on with the condition, until the disruption
        controller finds it stale (disruption.py).  No PodDisruptionBudget is emulated."""
        from .podstatus import disruption, update_condition

        with self.store.lock:
            pod = self.store.get(kinds.by_key("pods"), namespace, name)
            status = pod.get("status") or {}
            condition = disruption("EvictionByEvictionAPI", "Eviction API: evicting", self.clock())
            self.set_pod_status(namespace, name, {**status, "conditions": update_condition(list(status.get("conditions") or []), condition)}, manager="kube-apiserver")
            if not delete_refused:
                self.delete_pod(namespace, name, pod["metadata"]["uid"])
