"""What kube-apiserver adds to a pod before storing it: defaulting, then admission.

Defaulting (pkg/apis/core/v1/defaults.go, applied on every decode, so on create and on update):
SetDefaults_PodSpec (dnsPolicy ClusterFirst, restartPolicy Always, terminationGracePeriodSeconds
30, schedulerName default-scheduler, securityContext {}), SetDefaults_Pod (enableServiceLinks,
requests copied from limits), SetDefaults_Container (terminationMessagePath/Policy,
imagePullPolicy Always for `:latest` or untagged images, else IfNotPresent), ContainerPort
protocol TCP, Probe timings, HTTPGetAction path and scheme, volume defaultMode 420, fieldRef
apiVersion v1.  A ResourceRequirements struct is always serialized (`resources: {}`).

Admission on create (plugin/pkg/admission/serviceaccount/admission.go: serviceAccountName
`default` and the projected `kube-api-access-<5 chars>` volume mounted read-only in every
container; plugin/pkg/admission/defaulttolerationseconds: not-ready/unreachable NoExecute
tolerations for 300 s; plugin/pkg/admission/priority: priority from the PriorityClass,
preemptionPolicy PreemptLowerPriority).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from ...api import Obj

SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
TOLERATION_SECONDS = 300
_NOT_READY, _UNREACHABLE = "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"
SYSTEM_PRIORITY_CLASSES = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}
_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


def _image_pull_policy(image: str) -> str:
    """Always for `:latest` or no tag (a digest pins it), else IfNotPresent."""
    if "@" in image:
        return "IfNotPresent"
    name = image.rsplit("/", 1)[-1]
    tag = name.split(":", 1)[1] if ":" in name else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def _probe(probe: Obj | None) -> None:
    if not isinstance(probe, dict):
        return
    for key, value in (("timeoutSeconds", 1), ("periodSeconds", 10), ("successThreshold", 1), ("failureThreshold", 3)):
        probe.setdefault(key, value)
    get = probe.get("httpGet")
    if isinstance(get, dict):
        get.setdefault("path", "/")
        get.setdefault("scheme", "HTTP")


def _field_refs(items: Any) -> None:
    for item in items or []:
        ref = ((item.get("valueFrom") or {}) if "valueFrom" in item else item).get("fieldRef")
        if isinstance(ref, dict):
            ref.setdefault("apiVersion", "v1")


def _container(c: Obj) -> None:
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    if isinstance(c.get("image"), str):
        c.setdefault("imagePullPolicy", _image_pull_policy(c["image"]))
    resources = c.setdefault("resources", {})
    limits, requests = resources.get("limits") or {}, resources.get("requests")
    if limits:  # SetDefaults_Pod: a limit without a request is also the request
        requests = resources.setdefault("requests", {}) if requests is None else requests
        for name, value in limits.items():
            requests.setdefault(name, value)
    for port in c.get("ports") or []:
        port.setdefault("protocol", "TCP")
    for key in ("livenessProbe", "readinessProbe", "startupProbe"):
        _probe(c.get(key))
    _field_refs(c.get("env"))


def _volume(v: Obj) -> None:
    sources = [k for k in v if k != "name"]
    if not sources:
        v["emptyDir"] = {}
    for key in ("configMap", "secret", "projected", "downwardAPI"):
        if isinstance(v.get(key), dict):
            v[key].setdefault("defaultMode", 420)
    if isinstance(v.get("downwardAPI"), dict):
        _field_refs(v["downwardAPI"].get("items"))
    for source in (v.get("projected") or {}).get("sources") or []:
        if isinstance(source.get("downwardAPI"), dict):
            _field_refs(source["downwardAPI"].get("items"))
    if isinstance(v.get("hostPath"), dict):
        v["hostPath"].setdefault("type", "")


def pod_spec(spec: Obj) -> Obj:
    """SetDefaults for a PodSpec (pods and pod templates alike), in place; returns it."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    for key in _CONTAINER_LISTS:
        for c in spec.get(key) or []:
            if isinstance(c, dict):
                _container(c)
    for v in spec.get("volumes") or []:
        if isinstance(v, dict):
            _volume(v)
    if spec.get("serviceAccountName") and not spec.get("serviceAccount"):
        spec["serviceAccount"] = spec["serviceAccountName"]  # the deprecated mirror (v1 conversion)
    return spec


def _suffix(rng: random.Random) -> str:
    """names.SimpleNameGenerator's 5 characters (vowels and confusable letters left out)."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    return "".join(rng.choice(alphabet) for _ in range(5))


def _service_account(spec: Obj, rng: random.Random) -> None:
    spec.setdefault("serviceAccountName", "default")
    spec["serviceAccount"] = spec["serviceAccountName"]
    if spec.get("automountServiceAccountToken") is False:
        return
    name = f"kube-api-access-{_suffix(rng)}"
    spec.setdefault("volumes", []).append({
        "name": name,
        "projected": {
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ],
            "defaultMode": 420,
        },
    })
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or []:
            mounts = c.setdefault("volumeMounts", [])
            if not any(m.get("mountPath") == SA_MOUNT for m in mounts):
                mounts.append({"name": name, "readOnly": True, "mountPath": SA_MOUNT})


def _tolerations(spec: Obj) -> None:
    tolerations = spec.setdefault("tolerations", [])
    for key in (_NOT_READY, _UNREACHABLE):
        # An empty key tolerates every taint, so it covers these too (defaulttolerationseconds).
        if not any(t.get("key") in (key, None, "") and t.get("effect") in (None, "", "NoExecute") for t in tolerations):
            tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": TOLERATION_SECONDS})


def admit(pod: Obj, rng: random.Random, priority_of: Callable[[str], int | None]) -> str | None:
    """Admission plugins' mutations of a new pod, in place; a refusal's message, if any."""
    spec = pod["spec"]
    _service_account(spec, rng)
    _tolerations(spec)
    cls = spec.get("priorityClassName")
    if cls:
        value = priority_of(cls)
        if value is None:
            return f"no PriorityClass with name {cls} was found"
        spec["priority"] = value
    else:
        spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    return None


def qos_class(spec: Obj) -> str:
    """pkg/apis/core/helper/qos GetPodQOS: Guaranteed, Burstable or BestEffort."""
    containers = [c for key in ("initContainers", "containers") for c in spec.get(key) or []]
    requests = [(c.get("resources") or {}).get("requests") or {} for c in containers]
    limits = [(c.get("resources") or {}).get("limits") or {} for c in containers]
    compute = ("cpu", "memory")
    if not any(r.get(k) not in (None, "0") for r in requests + limits for k in compute):
        return "BestEffort"
    guaranteed = all(
        all(k in lim and req.get(k, lim[k]) == lim[k] for k in compute)
        for req, lim in zip(requests, limits, strict=True)
    )
    return "Guaranteed" if guaranteed else "Burstable"


