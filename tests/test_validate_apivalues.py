"""Values the API server refuses, caught at lint (compiler/validate/apivalues.py): one case a row.

Each row is a field of a job and a value: the finding's code and the words of its message.
Kubernetes' own validation is the anchor (pkg/apis/core/validation: ports 1-65535, pod
activeDeadlineSeconds >= 1, no negative quantity; apimachinery: label values, DNS-1123
subdomains); the values beside them that must pass are the edges.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lintkit import lint_text

PYTORCH = """\
apiVersion: batch.tensorstack.dev/v1beta1
kind: PyTorchTrainingJob
metadata: {{name: apiv}}
spec:
{spec}
  replicaSpecs:
    - type: worker
      replicas: 1
      template:
{template}
"""
LONG_PREFIX = ("a" * 63 + ".") * 3 + "a" * 58  # 250 characters: a qualified name's prefix, but 259 with `requests.`
CONTAINER = "          spec:\n            containers:\n              - {{name: w, image: i, {fields}}}"
GENERIC = """\
apiVersion: batch.tensorstack.dev/v1beta1
kind: GenericJob
metadata: {{name: gen}}
spec:
  service:
    ports: [{{name: http, port: {port}, targetPort: {target}}}]
  replicaSpecs:
    - type: worker
      replicas: 1
      template: {{spec: {{containers: [{{name: w, image: i}}]}}}}
"""


def _service(ports: str) -> str:
    return GENERIC.format(port=0, target=0).replace("[{name: http, port: 0, targetPort: 0}]", ports)


def _container(fields: str) -> str:
    return PYTORCH.format(spec="", template=CONTAINER.format(fields=fields))


def _pod(fields: str, container: str = "") -> str:
    """A pod spec holding `fields` (lines at the spec's indent), and one container."""
    extra = f", {container.removeprefix('{').removesuffix('}')}" if container else ""
    return PYTORCH.format(spec="", template=f"          spec:\n            {fields}\n            containers: [{{name: w, image: i{extra}}}]")


def _tensorboard(name: str, sub: str) -> str:
    spec = f"  tensorboardSpec:\n    image: tensorflow/tensorflow:2.14.0\n    logDir:\n      pvc: [{{name: {name!r}, subPath: [{sub!r}]}}]"
    return PYTORCH.format(spec=spec, template=CONTAINER.format(fields="command: [python, t.py]"))


CASES = [
    # (id, job text, code or None, words of the message)
    ("port-0", _container("ports: [{containerPort: 0}]"), "FJ204", "containerPort 0 is not a port"),
    ("port-65536", _container("ports: [{containerPort: 65536}]"), "FJ204", "the API server takes 1-65535"),
    ("port-65535", _container("ports: [{containerPort: 65535}]"), None, ""),
    ("host-port-0-is-unset", _container("ports: [{containerPort: 80, hostPort: 0}]"), None, ""),
    ("host-port-70000", _container("ports: [{containerPort: 80, hostPort: 70000}]"), "FJ204", "hostPort 70000"),
    ("negative-gpu", _container("resources: {limits: {nvidia.com/gpu: -1}}"), "FJ204", "no negative quantity"),
    ("negative-cpu-text", _container("resources: {requests: {cpu: '-500m'}}"), "FJ204", "requests.cpu is -500m"),
    ("zero-cpu", _container("resources: {requests: {cpu: 0}}"), None, ""),
    ("quantity-empty", _container("resources: {requests: {cpu: ''}}"), "FJ404", "not a valid quantity"),
    ("quantity-without-digit-is-0", _container("resources: {requests: {cpu: '.'}}"), None, ""),  # ParseQuantity: 0 (the decode corpus)
    ("deadline-0", PYTORCH.format(spec="", template="          spec:\n            activeDeadlineSeconds: 0\n            containers: [{name: w, image: i}]"), "FJ204", "activeDeadlineSeconds 0"),
    ("deadline-1", PYTORCH.format(spec="", template="          spec:\n            activeDeadlineSeconds: 1\n            containers: [{name: w, image: i}]"), None, ""),
    ("reserved-annotation", PYTORCH.format(spec="", template="          metadata: {annotations: {flatjob.dev/stopped: 'true'}}\n          spec: {containers: [{name: w, image: i}]}"), "FJ313", "flatjob.dev/ annotations are flatjob's own"),
    ("reserved-label", PYTORCH.format(spec="", template="          metadata: {labels: {flatjob.dev/job-name: other}}\n          spec: {containers: [{name: w, image: i}]}"), "FJ313", "flatjob.dev/ labels are flatjob's own"),
    ("queue-with-space", PYTORCH.format(spec="  scheduler: {t9kScheduler: {queue: 'a b'}}", template=CONTAINER.format(fields="command: [x]")), "FJ313", "becomes the label scheduler.tensorstack.dev/queue"),
    ("queue-plain", PYTORCH.format(spec="  scheduler: {t9kScheduler: {queue: team-a.gpu}}", template=CONTAINER.format(fields="command: [x]")), None, ""),
    ("pvc-empty", _tensorboard("", "logs"), "FJ204", "claimName must not be empty"),
    ("pvc-dotdot", _tensorboard("logs", "../../etc"), "FJ204", "leaves the PVC's mount"),
    ("pvc-comma", _tensorboard("logs", "a,b:c"), "FJ204", "splits tensorboard's --logdir_spec"),
    ("pvc-plain", _tensorboard("logs", "runs/exp-1"), None, ""),
    ("service-port-0", GENERIC.format(port=0, target=8080), "FJ204", "port 0 is not a port"),
    ("service-target-port-name", GENERIC.format(port=80, target="http"), None, ""),
    ("service-target-port-70000", GENERIC.format(port=80, target=70000), "FJ204", "targetPort 70000"),
    # ValidateService (review 21, round 5, #5): the job's Service and each per-replica Service were refused
    ("service-duplicate-name", _service("[{name: a, port: 80}, {name: a, port: 81}]"), "FJ204", "the same name (a)"),
    ("service-duplicate-port", _service("[{name: a, port: 80}, {name: b, port: 80}]"), "FJ204", "the same port and protocol (80/TCP)"),
    ("service-same-port-other-protocol", _service("[{name: a, port: 80}, {name: b, port: 80, protocol: UDP}]"), None, ""),
    ("service-name-a-list", _service("[{name: [a], port: 80}, {name: b, port: 81}]"), "FJ401", ""),  # the schema's finding, not an internal error (review round 6)
    ("service-name-a-mapping", _service("[{name: {a: 1}, port: 80}, {name: b, port: 81}]"), "FJ401", ""),
    ("service-second-port-unnamed", _service("[{name: http, port: 80}, {port: 81}]"), "FJ204", "must be named when the Service has more than one"),
    ("service-one-port-unnamed", _service("[{port: 81}]"), None, ""),
    ("service-node-port", _service("[{name: a, port: 80, nodePort: 30000}]"), "FJ204", "nodePort 30000 may not be used"),
    ("service-target-port-bad-name", _service("[{name: a, port: 80, targetPort: Bad_Name}]"), "FJ204", "targetPort 'Bad_Name'"),
    ("service-app-protocol", _service("[{name: a, port: 80, appProtocol: 'a b'}]"), "FJ204", "appProtocol 'a b'"),
    ("service-app-protocol-qualified", _service("[{name: a, port: 80, appProtocol: kubernetes.io/h2c}]"), None, ""),
    # compiler/validate/podspec.py (review 21, round 3: each passed lint and compile)
    ("resource-without-domain", _container("resources: {limits: {gpu: 1}}"), "FJ204", "resource name 'gpu' is no standard resource"),
    ("resource-name-two-slashes", _container("resources: {limits: {nvidia.com/gpu/x: 1}}"), "FJ204", "resource name 'nvidia.com/gpu/x'"),
    ("gpu-fraction", _container("resources: {limits: {nvidia.com/gpu: 1.5}}"), "FJ204", "a device is counted in whole units"),
    ("gpu-milli", _container("resources: {limits: {nvidia.com/gpu: 500m}}"), "FJ204", "a device is counted in whole units"),
    ("gpu-request-only", _container("resources: {requests: {nvidia.com/gpu: 1}}"), "FJ204", "needs its limit (it cannot be overcommitted)"),
    ("gpu-request-not-limit", _container("resources: {requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 2}}"), "FJ204", "they must be equal"),
    ("gpu-request-equals-limit", _container("resources: {requests: {nvidia.com/gpu: 2}, limits: {nvidia.com/gpu: '2'}}"), None, ""),
    ("cpu-request-over-limit", _container("resources: {requests: {cpu: '1500m'}, limits: {cpu: 1}}"), "FJ204", "requests.cpu 1500m is more than its limit 1"),
    ("memory-request-over-limit", _container("resources: {requests: {memory: 2Gi}, limits: {memory: 2000Mi}}"), "FJ204", "is more than its limit"),
    ("memory-request-at-limit", _container("resources: {requests: {memory: 1Gi}, limits: {memory: 1024Mi}}"), None, ""),
    ("hugepages-alone", _container("resources: {limits: {hugepages-2Mi: 1Gi}}"), "FJ204", "hugepages-2Mi without cpu or memory"),
    ("image-leading-space", PYTORCH.format(spec="", template="          spec:\n            containers: [{name: w, image: ' img'}]"), "FJ204", "must not have leading or trailing spaces"),
    ("config-map-volume-name", PYTORCH.format(spec="", template="          spec:\n            volumes: [{name: v, configMap: {name: Bad_CM}}]\n            containers: [{name: w, image: i}]"), "FJ305", "ConfigMap name 'Bad_CM'"),
    ("claim-name", PYTORCH.format(spec="", template="          spec:\n            volumes: [{name: v, persistentVolumeClaim: {claimName: Bad_PVC}}]\n            containers: [{name: w, image: i}]"), "FJ305", "claimName 'Bad_PVC'"),
    ("secret-key-with-slash", _container("env: [{name: A, valueFrom: {secretKeyRef: {name: s, key: k/x}}}]"), "FJ204", "secretKeyRef.key 'k/x'"),
    ("env-from-prefix", _container("envFrom: [{prefix: '1=', configMapRef: {name: c}}]"), "FJ204", "envFrom prefix '1='"),
    ("field-path", _container("env: [{name: A, valueFrom: {fieldRef: {fieldPath: metadata.nope}}}]"), "FJ204", "is no field an env value can come from"),
    ("field-path-label", _container("env: [{name: A, valueFrom: {fieldRef: {fieldPath: \"metadata.labels['app']\"}}}]"), None, ""),
    ("sub-path-dotdot", PYTORCH.format(spec="", template="          spec:\n            volumes: [{name: v, emptyDir: {}}]\n            containers: [{name: w, image: i, volumeMounts: [{name: v, mountPath: /m, subPath: ../etc}]}]"), "FJ204", "subPath '../etc'"),
    ("service-account", PYTORCH.format(spec="", template="          spec:\n            serviceAccountName: Bad_SA\n            containers: [{name: w, image: i}]"), "FJ305", "serviceAccountName 'Bad_SA'"),
    ("node-selector-value", PYTORCH.format(spec="", template="          spec:\n            nodeSelector: {pool: -bad}\n            containers: [{name: w, image: i}]"), "FJ204", "nodeSelector value '-bad'"),
    ("toleration-key", PYTORCH.format(spec="", template="          spec:\n            tolerations: [{key: a b, operator: Exists}]\n            containers: [{name: w, image: i}]"), "FJ204", "toleration key 'a b'"),
    ("host-alias", PYTORCH.format(spec="", template="          spec:\n            hostAliases: [{ip: not-an-ip, hostnames: [x]}]\n            containers: [{name: w, image: i}]"), "FJ204", "must be an IP address"),
    ("duplicate-port-name", _container("ports: [{name: http, containerPort: 80}, {name: http, containerPort: 81}]"), "FJ204", "port name 'http' is used twice"),
    ("init-and-container-same-name", PYTORCH.format(spec="", template="          spec:\n            initContainers: [{name: w, image: i}]\n            containers: [{name: w, image: i}]"), "FJ204", "is also an init container's"),
    ("probe-port-name", _container("livenessProbe: {httpGet: {port: Bad_Name}}"), "FJ204", "livenessProbe port name 'Bad_Name'"),
    # not refused: spec.host is converted to spec.nodeName (ConvertDownwardAPIFieldLabel); a name
    # holding kubernetes.io/ is native, not a device (helper.IsNativeResource)
    ("storage-in-a-container", _container("resources: {requests: {storage: 1Gi}}"), "FJ204", "resource name 'storage' is no standard resource"),
    ("hugepages-request-not-limit", _container("resources: {requests: {memory: 1Gi, hugepages-2Mi: 1Gi}, limits: {memory: 1Gi, hugepages-2Mi: 2Gi}}"), "FJ204", "they must be equal"),
    ("config-map-key-dotdot-prefix", _container("env: [{name: A, valueFrom: {configMapKeyRef: {name: c, key: ..data}}}]"), "FJ204", "configMapKeyRef.key '..data'"),
    # an exponent beyond formats.EXPONENT_BOUND is refused, never a crash (exit 3 before): the API
    # server decodes some to other numbers and hangs on others (review of round 9)
    ("quantity-exponent-overflow", _container("resources: {requests: {cpu: 1e9999999}, limits: {cpu: '1'}}"), "FJ404", "not a valid quantity"),
    ("quantity-exponent-at-the-bound", _container("resources: {requests: {cpu: 1e1000000}, limits: {cpu: '1'}}"), "FJ204", "requests.cpu 1e1000000 is more than its limit 1"),
    # review of round 8 #5: suffixHandler.interpret keeps int32(parsed) of the exponent, so
    # 1e4294967296 is 1 and 1e4294967299 is 1000; ParseQuantity rounds below 1n up to 1n
    ("limit-exponent-wraps-to-one", _container("resources: {requests: {cpu: '2'}, limits: {cpu: '1e4294967296'}}"), "FJ204", "requests.cpu 2 is more than its limit 1e4294967296"),
    ("request-exponent-wraps-to-one", _container("resources: {requests: {cpu: '1e4294967296'}, limits: {cpu: '1'}}"), None, ""),
    ("hugepages-exponent-wraps", _container("resources: {limits: {memory: 1Gi, hugepages-2Mi: '1e4294967299'}}"), "FJ204", "is not a positive integer multiple of hugepages-2Mi"),
    ("gpu-exponent-wraps-negative", _container("resources: {limits: {nvidia.com/gpu: '1e4294967295'}}"), "FJ204", "a device is counted in whole units"),
    ("request-over-limit-beyond-decimal-context", _container("resources: {requests: {cpu: '2e999999'}, limits: {cpu: '1e999999'}}"), "FJ204", "is more than its limit"),
    ("request-below-limit-beyond-decimal-context", _container("resources: {requests: {cpu: '1e-999999'}, limits: {cpu: '1e999999'}}"), None, ""),
    ("exponent-the-api-server-never-decodes", _container("resources: {limits: {cpu: '1e-2147483648'}}"), "FJ404", "not a valid quantity"),
    ("requests-below-a-nano-are-one-nano", _container("resources: {requests: {cpu: '5e-10'}, limits: {cpu: '1e-10'}}"), None, ""),
    ("gpu-below-a-nano-is-no-whole-unit", _container("resources: {limits: {nvidia.com/gpu: '1e-999999'}}"), "FJ204", "a device is counted in whole units"),
    ("field-path-spec-host", _container("env: [{name: A, valueFrom: {fieldRef: {fieldPath: spec.host}}}]"), None, ""),
    # compiler/validate/podspec.py and podshape.py (review 21, round 4: 42 more passed lint)
    ("env-value-and-value-from", _container("env: [{name: A, value: x, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]"), "FJ204", "has both value and valueFrom"),
    ("env-value-from-empty", _container("env: [{name: A, valueFrom: {}}]"), "FJ204", "valueFrom must have one of"),
    ("env-resource-field", _container("env: [{name: A, valueFrom: {resourceFieldRef: {resource: bogus}}}]"), "FJ204", "resourceFieldRef resource 'bogus'"),
    ("volume-without-source-is-an-empty-dir", _pod("volumes: [{name: v}]"), None, ""),
    ("hostname-empty", _pod("hostname: ''"), None, ""),
    ("ephemeral-containers-empty", _pod("ephemeralContainers: []"), None, ""),
    ("volume-two-sources", _pod("volumes: [{name: v, emptyDir: {}, configMap: {name: c}}]"), "FJ204", "may have only one of emptyDir, configMap"),
    ("mount-of-no-volume", _container("volumeMounts: [{name: nope, mountPath: /m}]"), "FJ204", "volumeMounts name 'nope' is no volume of this pod"),
    ("probe-without-handler", _container("livenessProbe: {periodSeconds: 5}"), "FJ204", "livenessProbe must have one of"),
    ("probe-two-handlers", _container("livenessProbe: {exec: {command: [x]}, tcpSocket: {port: 80}}"), "FJ204", "may have only one of exec, tcpSocket"),
    ("probe-port-0", _container("readinessProbe: {tcpSocket: {port: 0}}"), "FJ204", "readinessProbe port 0 must be between 1 and 65535"),
    ("probe-period-negative", _container("livenessProbe: {exec: {command: [x]}, periodSeconds: -1}"), "FJ204", "periodSeconds -1"),
    ("hook-without-handler", _container("lifecycle: {preStop: {}}"), "FJ204", "lifecycle.preStop must have one of"),
    ("probe-on-an-init-container", _pod("initContainers: [{name: i, image: i, readinessProbe: {exec: {command: [x]}}}]"), "FJ204", "may not be set on an init container"),
    ("probe-on-a-sidecar", _pod("initContainers: [{name: i, image: i, restartPolicy: Always, readinessProbe: {exec: {command: [x]}}}]"), None, ""),
    ("hostname-upper", _pod("hostname: Bad_Host"), "FJ204", "hostname 'Bad_Host'"),
    ("runtime-class", _pod("runtimeClassName: Bad_RC"), "FJ305", "runtimeClassName 'Bad_RC'"),
    ("fs-group-negative", _pod("securityContext: {fsGroup: -5}"), "FJ204", "fsGroup -5 must be between 0"),
    ("config-map-mode", _pod("volumes: [{name: v, configMap: {name: c, defaultMode: 99999}}]"), "FJ204", "configMap defaultMode 99999"),
    ("config-map-item-path", _pod("volumes: [{name: v, configMap: {name: c, items: [{key: k, path: ../x}]}}]"), "FJ204", "configMap item path '../x'"),
    ("dns-none-without-config", _pod("dnsPolicy: None"), "FJ204", "dnsPolicy None needs a dnsConfig"),
    ("share-pid-and-host-pid", _pod("shareProcessNamespace: true\n            hostPID: true"), "FJ204", "cannot both be true"),
    ("host-network-host-port", _pod("hostNetwork: true", "ports: [{containerPort: 80, hostPort: 8080}]"), "FJ204", "hostPort must equal containerPort"),
    ("toleration-exists-value", _pod("tolerations: [{key: k, operator: Exists, value: v}]"), "FJ204", "operator Exists has no value"),
    ("privileged-without-escalation", _container("securityContext: {privileged: true, allowPrivilegeEscalation: false}"), "FJ204", "needs allowPrivilegeEscalation"),
    ("seccomp-localhost-without-path", _pod("securityContext: {seccompProfile: {type: Localhost}}"), "FJ204", "needs localhostProfile"),
    ("ephemeral-containers", _pod("ephemeralContainers: [{name: e, image: i}]"), "FJ204", "ephemeralContainers are not allowed"),
    ("topology-max-skew-0", _pod("topologySpreadConstraints: [{maxSkew: 0, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]"), "FJ204", "maxSkew 0"),
    ("affinity-selector-key", _pod("affinity: {podAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: zone, labelSelector: {matchLabels: {a b: x}}}]}}"), "FJ204", "label selector key 'a b'"),
    ("termination-message-policy", _container("terminationMessagePolicy: Bogus"), "FJ204", "terminationMessagePolicy 'Bogus'"),
    ("native-kubernetes-io-resource", _container("resources: {limits: {cpu: 1, example.kubernetes.io/widget: 500m}, requests: {example.kubernetes.io/widget: 250m}}"), None, ""),
    # review 21, round 7: helper.IsExtendedResourceName, validateResourceQuantityHugePageValue, suffixHandler.interpret
    ("extended-name-requests-prefix", _container("resources: {limits: {requests.example.com/gpu: 1}}"), "FJ204", "may not start with 'requests.'"),
    ("extended-name-quota-form-too-long", _container(f"resources: {{limits: {{{LONG_PREFIX}/gpu: 1}}}}"), "FJ204", "its quota form"),
    ("extended-name-prefix-at-the-quota-limit", _container(f"resources: {{limits: {{{LONG_PREFIX[:244]}/gpu: 1}}}}"), None, ""),
    ("hugepages-not-a-multiple", _container("resources: {limits: {hugepages-2Mi: 3Mi, memory: 1Gi}}"), "FJ204", "limits.hugepages-2Mi 3Mi is not a positive integer multiple of hugepages-2Mi"),
    ("hugepages-a-multiple", _container("resources: {limits: {hugepages-2Mi: 4Mi, hugepages-1Gi: 2Gi, memory: 1Gi}}"), None, ""),
    ("hugepages-size-not-a-quantity", _container("resources: {limits: {hugepages-foo: 2Mi, memory: 1Gi}}"), "FJ204", "'foo' is no page size"),
    ("hugepages-size-fraction", _container("resources: {limits: {hugepages-1500m: 3, memory: 1Gi}}"), "FJ204", "no whole, positive page size"),
    ("cpu-exponent-beyond-int64", _container("resources: {limits: {cpu: 1e99999999999999999999}}"), "FJ404", "is not a valid quantity"),
    ("gpu-exponent-beyond-int64", _container("resources: {limits: {nvidia.com/gpu: 1e99999999999999999999}}"), "FJ404", "is not a valid quantity"),
    ("memory-request-exponent-beyond-int64", _container("resources: {requests: {memory: 1E99999999999999999999}}"), "FJ404", "is not a valid quantity"),
    ("empty-dir-size-exponent-beyond-int64", _pod("volumes: [{name: v, emptyDir: {sizeLimit: 1e99999999999999999999}}]"), "FJ404", "is not a valid quantity"),
]


@pytest.mark.parametrize(("text", "code", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_value_the_api_server_refuses_is_found_at_lint(tmp_path: Path, text: str, code: str | None, words: str) -> None:
    found = [d for d in lint_text(tmp_path, text) if d.is_error]
    if code is None:
        assert not found, [(d.code, d.message) for d in found]
    else:
        assert [d.code for d in found] == [code] and words in found[0].message, [(d.code, d.message) for d in found]


# hx17: the reference grammar the kubelet parses images with (distribution/reference
# ParseNormalizedNamed); an image it refuses ends in InvalidImageName, never pulled.
_SHA = "sha256:" + "0" * 64


@pytest.mark.parametrize("image", [
    "ubuntu", "pytorch/pytorch:2.4.0", "localhost:5000/a/b:1", "[::1]:5000/x", "Registry.example.com/a",
    "My-Registry/x", f"a@{_SHA}", f"a:b@{_SHA}", "a__b", "a--b.c_d", "t9kpublic/deepspeed:0.9.2-cu118",
])
def test_an_image_the_kubelet_parses_passes(image: str) -> None:
    from flatjob.compiler.validate.names import image_pull_problem

    assert image_pull_problem(image) is None


@pytest.mark.parametrize("image", [
    "py torch", "pytorch/PyTorch", "a:b:c", "a@sha256:abc", "a@md5:" + "0" * 32, "0" * 64, "a/", "a:", "a\n",
    "a@sha256:" + "A" * 64, "a:ü", "a" * 256, "a/b:" + "t" * 129, "-a", "a_", "a/_b",
])
def test_an_image_the_kubelet_cannot_parse_is_refused(image: str) -> None:
    from flatjob.compiler.validate.names import image_pull_problem

    assert image_pull_problem(image)
