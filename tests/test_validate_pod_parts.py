"""Pod-template values only pkg/apis/core/validation refuses, found at lint: one case a row.

Review 21, round 5 (#3) found 55 values that ValidatePodTemplateSpec refuses passing lint
and compile (podparts.py, and rows of podspec.py's FIELDS and NUMBERS).  Each row changes
one field of a worker's pod spec and names the words lint must say; the rows with None are
the edges beside them that the API server takes.  The upstream function is named where the
rule is ported (compiler/validate/podparts.py, podspec.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from lintkit import lint_text

Spec = dict[str, Any]


def _job(change: Callable[[Spec], Any]) -> str:
    spec: Spec = {"containers": [{"name": "w", "image": "i", "command": ["python", "t.py"], "resources": {"limits": {"cpu": 1}}}]}
    change(spec)
    doc = {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "PyTorchTrainingJob", "metadata": {"name": "parts"},
           "spec": {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": {"spec": spec}}]}}
    return yaml.safe_dump(doc, sort_keys=False)


def ctr(**fields: Any) -> Callable[[Spec], Any]:
    return lambda s: s["containers"][0].update(fields)


def pod(**fields: Any) -> Callable[[Spec], Any]:
    return lambda s: s.update(fields)


def mounted(volume: dict[str, Any], **fields: Any) -> Callable[[Spec], Any]:
    return lambda s: (s.update(volumes=[{"name": "v", **volume}]), s["containers"][0].update(fields))


def env(value_from: dict[str, Any]) -> Callable[[Spec], Any]:
    return ctr(env=[{"name": "A", "valueFrom": value_from}])


def node_term(**requirement: Any) -> Callable[[Spec], Any]:
    return pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [requirement]}}})


def pod_term(**term: Any) -> Callable[[Spec], Any]:
    return pod(affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone", **term}]}})


def spread(**fields: Any) -> Callable[[Spec], Any]:
    return pod(topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", **fields}])


EXEC = {"exec": {"command": ["true"]}}
EMPTY = {"emptyDir": {}}

CASES: list[tuple[str, Callable[[Spec], Any], str | None]] = [
    # probes and hooks (validateContainers, validateProbe, validateHTTPGetAction, validateSleepAction)
    ("liveness-success2", ctr(livenessProbe={**EXEC, "successThreshold": 2}), "livenessProbe successThreshold 2"),
    ("startup-success2", ctr(startupProbe={**EXEC, "successThreshold": 2}), "startupProbe successThreshold 2"),
    ("readiness-success2", ctr(readinessProbe={**EXEC, "successThreshold": 2}), None),
    ("readiness-tgps", ctr(readinessProbe={**EXEC, "terminationGracePeriodSeconds": 5}), "must not be set for a readinessProbe"),
    ("liveness-tgps0", ctr(livenessProbe={**EXEC, "terminationGracePeriodSeconds": 0}), "terminationGracePeriodSeconds 0"),
    ("liveness-tgps1", ctr(livenessProbe={**EXEC, "terminationGracePeriodSeconds": 1}), None),
    ("httpget-scheme", ctr(livenessProbe={"httpGet": {"port": 80, "scheme": "FTP"}}), "httpGet scheme 'FTP'"),
    ("httpget-scheme-empty", ctr(livenessProbe={"httpGet": {"port": 80, "scheme": ""}}), None),  # SetDefaults_HTTPGetAction makes it HTTP first (review round 6)
    ("httpheader-bad", ctr(livenessProbe={"httpGet": {"port": 80, "httpHeaders": [{"name": "bad header", "value": "x"}]}}), "is no HTTP header name"),
    ("httpheader-plain", ctr(livenessProbe={"httpGet": {"port": 80, "scheme": "HTTPS", "httpHeaders": [{"name": "X-Token", "value": "x"}]}}), None),
    ("poststart-sleep-neg", ctr(lifecycle={"postStart": {"sleep": {"seconds": -1}}}), "postStart sleep seconds -1"),
    ("prestop-sleep-0", ctr(lifecycle={"preStop": {"sleep": {"seconds": 0}}}), None),
    ("prestop-sleep-over-default-grace", ctr(lifecycle={"preStop": {"sleep": {"seconds": 31}}}), "preStop sleep seconds 31 must be at most terminationGracePeriodSeconds (30)"),
    ("prestop-sleep-at-grace", lambda s: (s.update(terminationGracePeriodSeconds=60), s["containers"][0].update(lifecycle={"preStop": {"sleep": {"seconds": 60}}})), None),
    # review of round 8 #6: SetDefaults_PodSpec makes a null grace period 30 before validateSleepAction
    ("prestop-sleep-over-null-grace", lambda s: (s.update(terminationGracePeriodSeconds=None), s["containers"][0].update(lifecycle={"preStop": {"sleep": {"seconds": 40}}})),
     "preStop sleep seconds 40 must be at most terminationGracePeriodSeconds (30)"),
    # containers (validateContainers, validateInitContainers, validateResizePolicy, ValidateSecurityContext)
    ("ctr-restartpolicy", ctr(restartPolicy="Always"), "restartPolicy may not be set on a container"),
    ("sidecar-restartpolicy", pod(initContainers=[{"name": "s", "image": "i", "restartPolicy": "Always"}]), None),
    ("resizepolicy-dup", ctr(resizePolicy=[{"resourceName": "cpu", "restartPolicy": "NotRequired"}] * 2), "resizePolicy resourceName cpu is given twice"),
    ("hostport-dup", ctr(ports=[{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81, "hostPort": 8080}]), "hostPort 8080/TCP is given twice"),
    ("hostport-dup-other-protocol", ctr(ports=[{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81, "hostPort": 8080, "protocol": "UDP"}]), None),
    # checkHostPortConflicts: regular containers together, each init container alone; the key holds hostIP (review round 6)
    ("hostport-dup-two-host-ips", ctr(ports=[{"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.1"}, {"containerPort": 81, "hostPort": 8080, "hostIP": "10.0.0.2"}]), None),
    ("hostport-init-and-regular", lambda s: (s.update(initContainers=[{"name": "init", "image": "i", "ports": [{"containerPort": 80, "hostPort": 8080}]}]),
                                             s["containers"][0].update(ports=[{"containerPort": 80, "hostPort": 8080}])), None),
    ("hostport-two-inits", pod(initContainers=[{"name": f"i{k}", "image": "i", "ports": [{"containerPort": 80, "hostPort": 8080}]} for k in range(2)]), None),
    ("hostport-dup-in-one-init", pod(initContainers=[{"name": "i", "image": "i", "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81, "hostPort": 8080}]}]),
     "hostPort 8080/TCP is given twice"),
    ("procmount", ctr(securityContext={"procMount": "Bogus"}), "procMount 'Bogus'"),
    ("resclaim-unknown", lambda s: s["containers"][0]["resources"].update(claims=[{"name": "nope"}]), "resource claim 'nope' is none of pod.spec.resourceClaims"),
    ("resclaim-known", lambda s: (s.update(resourceClaims=[{"name": "gpu", "resourceClaimName": "c"}]), s["containers"][0]["resources"].update(claims=[{"name": "gpu"}])), None),
    # env and the downward API (validateObjectFieldSelector, validateContainerResourceDivisor, validateDownwardAPIVolumeFile)
    ("cmkeyref-name-empty", env({"configMapKeyRef": {"name": "", "key": "k"}}), "configMapKeyRef.name is required"),
    ("seckeyref-name-empty", env({"secretKeyRef": {"name": "", "key": "k"}}), "secretKeyRef.name is required"),
    ("divisor-3", env({"resourceFieldRef": {"resource": "limits.cpu", "divisor": "3"}}), "divisor 3 is not taken for limits.cpu"),
    ("divisor-1m", env({"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1m"}}), None),
    ("divisor-1Mi", env({"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}), None),
    ("divisor-1024", env({"resourceFieldRef": {"resource": "limits.memory", "divisor": 1024}}), "divisor 1024 is not taken"),  # compared as Quantity.String()
    ("divisor-1e3", env({"resourceFieldRef": {"resource": "limits.memory", "divisor": "1e3"}}), "divisor 1e3 is not taken"),
    ("divisor-1k", env({"resourceFieldRef": {"resource": "limits.memory", "divisor": "1k"}}), None),
    # review of round 8 #4: ParseQuantity keeps "+1", "01", "1e0" as written; 976.5625Ki prints as 1000000
    *((f"divisor-{d}", env({"resourceFieldRef": {"resource": "limits.memory", "divisor": d}}), f"divisor {d} is not taken") for d in ("+1", "01", "1e0", "+1Ki")),
    ("divisor-976.5625Ki", env({"resourceFieldRef": {"resource": "limits.memory", "divisor": "976.5625Ki"}}), "(the API server reads it as '1000000')"),
    ("divisor-1000-is-1k", env({"resourceFieldRef": {"resource": "limits.memory", "divisor": "1000"}}), None),
    ("divisor-1024Ki-is-1Mi", env({"resourceFieldRef": {"resource": "requests.ephemeral-storage", "divisor": "1024Ki"}}), None),
    ("divisor-0.9765625Ki-is-1k", env({"resourceFieldRef": {"resource": "limits.hugepages-2Mi", "divisor": "0.9765625Ki"}}), None),
    ("divisor-0.001-is-1m", env({"resourceFieldRef": {"resource": "limits.cpu", "divisor": "0.001"}}), None),
    ("divisor-float-1", env({"resourceFieldRef": {"resource": "limits.cpu", "divisor": 1.0}}), None),
    ("divisor-0-is-unset", env({"resourceFieldRef": {"resource": "limits.cpu", "divisor": "0.0"}}), None),
    ("fieldref-apiv2", env({"fieldRef": {"apiVersion": "v2", "fieldPath": "metadata.name"}}), "fieldRef apiVersion 'v2'"),
    ("fieldref-apiv1", env({"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}), None),
    ("dapi-vol-podip", pod(volumes=[{"name": "v", "downwardAPI": {"items": [{"path": "a", "fieldRef": {"fieldPath": "status.podIP"}}]}}]), "is no field a downwardAPI volume file can hold"),
    ("dapi-vol-labels", pod(volumes=[{"name": "v", "downwardAPI": {"items": [{"path": "a", "fieldRef": {"fieldPath": "metadata.labels"}}]}}]), None),
    ("dapi-vol-rfr-nocontainer", pod(volumes=[{"name": "v", "downwardAPI": {"items": [{"path": "a", "resourceFieldRef": {"resource": "limits.cpu"}}]}}]), "resourceFieldRef.containerName is required"),
    # volumes (validateVolumeSource and its helpers)
    ("secret-name-empty", pod(volumes=[{"name": "v", "secret": {"secretName": ""}}]), "secret.secretName is required"),
    ("cm-name-empty", pod(volumes=[{"name": "v", "configMap": {"name": ""}}]), "configMap.name is required"),
    ("csi-driver-empty", pod(volumes=[{"name": "v", "csi": {"driver": ""}}]), "csi.driver is required"),
    ("emptydir-neg", pod(volumes=[{"name": "v", "emptyDir": {"sizeLimit": "-1Gi"}}]), "emptyDir sizeLimit is -1Gi"),
    ("ephemeral-noclaim", pod(volumes=[{"name": "v", "ephemeral": {}}]), "ephemeral.volumeClaimTemplate is required"),
    ("hostpath-dotdot", pod(volumes=[{"name": "v", "hostPath": {"path": "/a/../b"}}]), "hostPath path '/a/../b' must not contain '..'"),
    ("gitrepo-dir-dotdot", pod(volumes=[{"name": "v", "gitRepo": {"repository": "x", "directory": "../x"}}]), "gitRepo directory '../x'"),
    ("gitrepo-dir-dot", pod(volumes=[{"name": "v", "gitRepo": {"repository": "x", "directory": "."}}]), None),
    ("sa-token-short", pod(volumes=[{"name": "v", "projected": {"sources": [{"serviceAccountToken": {"path": "t", "expirationSeconds": 10}}]}}]), "expirationSeconds 10 must be between 600"),
    ("sa-token-600", pod(volumes=[{"name": "v", "projected": {"sources": [{"serviceAccountToken": {"path": "t", "expirationSeconds": 600}}]}}]), None),
    ("projected-path-abs", pod(volumes=[{"name": "v", "projected": {"sources": [{"configMap": {"name": "c", "items": [{"key": "k", "path": "/abs"}]}}]}}]), "projected configMap item path '/abs'"),
    # mounts (validateVolumeMounts, validateVolumeDevices, validateMountPropagation)
    ("mountpath-empty", mounted(EMPTY, volumeMounts=[{"name": "v", "mountPath": ""}]), "volumeMounts.mountPath is required"),
    ("subpath-and-expr", mounted(EMPTY, volumeMounts=[{"name": "v", "mountPath": "/a", "subPath": "x", "subPathExpr": "y"}]), "subPath and subPathExpr are mutually exclusive"),
    ("mountprop-bogus", mounted(EMPTY, volumeMounts=[{"name": "v", "mountPath": "/a", "mountPropagation": "Bogus"}]), "mountPropagation 'Bogus'"),
    ("rro-without-ro", mounted(EMPTY, volumeMounts=[{"name": "v", "mountPath": "/a", "recursiveReadOnly": "Enabled"}]), "recursiveReadOnly needs readOnly: true"),
    ("rro-with-ro", mounted(EMPTY, volumeMounts=[{"name": "v", "mountPath": "/a", "readOnly": True, "recursiveReadOnly": "Enabled"}]), None),
    ("rro-propagation", mounted(EMPTY, volumeMounts=[{"name": "v", "mountPath": "/a", "readOnly": True, "recursiveReadOnly": "IfPossible", "mountPropagation": "HostToContainer"}]),
     "recursiveReadOnly is taken only with mountPropagation None"),
    ("volumedevice-and-mount", mounted({"persistentVolumeClaim": {"claimName": "c"}}, volumeMounts=[{"name": "v", "mountPath": "/a"}], volumeDevices=[{"name": "v", "devicePath": "/dev/x"}]),
     "volume 'v' is both mounted and a device"),
    # affinity (ValidateNodeSelectorRequirement, validateNodeFieldSelectorRequirement, ValidateLabelSelectorRequirement, ValidateNamespaceName)
    ("nodeaff-in-novalues", node_term(matchExpressions=[{"key": "a", "operator": "In", "values": []}]), "operator In takes at least one value, not 0"),
    ("nodeaff-exists-values", node_term(matchExpressions=[{"key": "a", "operator": "Exists", "values": ["x"]}]), "operator Exists takes no values, not 1"),
    ("nodeaff-gt-one", node_term(matchExpressions=[{"key": "a", "operator": "Gt", "values": ["1"]}]), None),
    ("nodeaff-matchfields-key", node_term(matchFields=[{"key": "metadata.labels", "operator": "In", "values": ["x"]}]), "matchFields key 'metadata.labels'"),
    ("nodeaff-matchfields-name", node_term(matchFields=[{"key": "metadata.name", "operator": "In", "values": ["n"]}]), None),
    ("nodeaff-weight0", pod(affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}]}}),
     "preferred term weight 0 must be between 1 and 100"),
    ("podaff-weight200", pod(affinity={"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 200, "podAffinityTerm": {"topologyKey": "zone", "labelSelector": {}}}]}}),
     "preferred term weight 200"),
    ("podaff-expr-in-novalues", pod_term(labelSelector={"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}), "operator In takes at least one value"),
    ("podaff-ns-bad", pod_term(namespaces=["Bad_NS"], labelSelector={}), "namespace 'Bad_NS'"),
    # pod-level security (validatePodSpecSecurityContext, validateWindowsHostProcessPod, validateSysctls)
    ("apparmor-local-noprofile", pod(securityContext={"appArmorProfile": {"type": "Localhost"}}), "a Localhost appArmorProfile needs localhostProfile"),
    ("seccomp-profile-nonlocal", pod(securityContext={"seccompProfile": {"type": "RuntimeDefault", "localhostProfile": "x"}}), "localhostProfile is taken only with a Localhost seccompProfile"),
    ("hostprocess-nohostnet", pod(securityContext={"windowsOptions": {"hostProcess": True}}), "hostProcess containers need hostNetwork: true"),
    ("sysctl-dup", pod(securityContext={"sysctls": [{"name": "net.core.somaxconn", "value": "1"}] * 2}), "sysctl net.core.somaxconn is given twice"),
    # dnsConfig (validatePodDNSConfig)
    ("dns-ns-4", pod(dnsConfig={"nameservers": ["1.1.1.1", "1.1.1.2", "1.1.1.3", "1.1.1.4"]}), "nameservers holds 4 entries"),
    ("dns-ns-3", pod(dnsConfig={"nameservers": ["1.1.1.1", "1.1.1.2", "1.1.1.3"]}), None),
    ("dns-options-noname", pod(dnsConfig={"options": [{"value": "x"}]}), "options.name is required"),
    ("dns-search-bad", pod(dnsConfig={"searches": ["bad_search!"]}), "dnsConfig search 'bad_search!'"),
    ("dns-search-trailing-dot", pod(dnsConfig={"searches": ["ns.svc.cluster.local."]}), None),
    # scheduling (ValidatePodSpec, validateSchedulingGates, ValidateTolerations, validateTopologySpreadConstraints)
    ("sched-name-bad", pod(schedulerName="Bad_Sched"), "schedulerName 'Bad_Sched'"),
    ("sched-gate-bad", pod(schedulingGates=[{"name": "a b"}]), "schedulingGates name 'a b'"),
    ("tol-nokey-equal", pod(tolerations=[{"operator": "Equal", "value": "x"}]), "a toleration without a key must have operator Exists"),
    ("tol-nokey-exists", pod(tolerations=[{"operator": "Exists"}]), None),
    ("tol-nokey-nooperator", pod(tolerations=[{"effect": "NoSchedule"}]), "a toleration without a key must have operator Exists"),  # no default for operator
    ("tol-seconds-noexec", pod(tolerations=[{"key": "a", "operator": "Equal", "value": "b", "effect": "NoSchedule", "tolerationSeconds": 5}]), "tolerationSeconds is taken only with effect NoExecute"),
    ("tol-seconds-noexecute", pod(tolerations=[{"key": "a", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}]), None),
    ("tol-value-bad", pod(tolerations=[{"key": "a", "operator": "Equal", "value": "a b"}]), "toleration value 'a b'"),
    ("topo-mindomains-anyway", spread(whenUnsatisfiable="ScheduleAnyway", minDomains=2), "minDomains is taken only with whenUnsatisfiable DoNotSchedule"),
    ("topo-mindomains0", spread(minDomains=0), "minDomains 0 must be between 1"),
    ("topo-key-empty", spread(topologyKey=""), "topologySpreadConstraints.topologyKey is required"),
    ("topo-mindomains2", spread(minDomains=2), None),
]


@pytest.mark.parametrize(("change", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_pod_value_the_api_server_refuses_is_one_lint_error(tmp_path: Path, change: Callable[[Spec], Any], words: str | None) -> None:
    found = [d for d in lint_text(tmp_path, _job(change)) if d.is_error]
    if words is None:
        assert not found, [(d.code, d.message) for d in found]
    else:
        assert [d.code for d in found] in (["FJ204"], ["FJ305"]) and words in found[0].message, [(d.code, d.message) for d in found]


WRONG_TYPES = {
    "operator-mapping": node_term(matchExpressions=[{"key": "a", "operator": {"In": 1}, "values": "x"}]),
    "claim-names-mappings": lambda s: (s.update(resourceClaims=[{"name": {"a": 1}}]), s["containers"][0]["resources"].update(claims=[{"name": {"a": 1}}])),
    "device-name-mapping": mounted(EMPTY, volumeMounts=[{"name": {"a": 1}, "mountPath": "/a"}], volumeDevices=[{"name": {"a": 1}, "devicePath": "/d"}]),
    "host-port-list": ctr(ports=[{"containerPort": 80, "hostPort": [1]}, {"containerPort": 81, "hostPort": [1]}]),
    "divisor-mapping": env({"resourceFieldRef": {"resource": ["x"], "divisor": {"a": 1}}}),
    "sysctl-name-list": pod(securityContext={"sysctls": [{"name": ["a"]}, {"name": ["a"]}]}),
    "volume-name-mapping": pod(volumes=[{"name": {"a": 1}}]),
    "init-container-name-mapping": pod(initContainers=[{"name": {"a": 1}, "image": "i"}]),
}


@pytest.mark.parametrize("change", list(WRONG_TYPES.values()), ids=list(WRONG_TYPES))
def test_a_wrong_type_in_these_fields_is_a_finding_never_a_crash(tmp_path: Path, change: Callable[[Spec], Any]) -> None:
    assert [d for d in lint_text(tmp_path, _job(change)) if d.is_error]  # the schema's finding; lint_text raises on a crash
