"""Job values that lint passed and compile crashed on, or that the API server would refuse.

Each case runs lint, compile, krm (the job as a ResourceList item) and the Argo CD plugin in
a capped child (tests/hostile/kit.py) and asserts exit 1 with the code at the line:col of
the value, and nothing written.  Before issue 21: `.nan`/`.inf` in a resource or a sizeLimit
passed lint and ended compile in an internal error (also through an overlay); `env: 1` and a
mapping as an env name crashed lint, compile and krm (exit 3, krm with empty output); a
52-character job name with TensorBoard rendered a 64-character Service; env names `A=B` or
not ASCII passed; job `x` and job `x` of namespace `team` rendered twice under `-n team`.
After it (round 7): annotations at the API server's limit passed, though the record and the
pods flatjob renders from them hold more.
"""

from __future__ import annotations

import pytest
import yaml

from .kit import BOUNDED_CPU, JOB, MEASURED, Sandbox, assert_clean_exit, resource_list

CPU = BOUNDED_CPU
MIB = 100  # peak resident memory of the run

CONTAINER = "            - name: python\n              image: pytorch/pytorch:2.4.0\n              command: [python, train.py]\n"


def _job(extra_container: str = "", spec_extra: str = "", name: str = "bad", kind: str = "PyTorchTrainingJob", volumes: str = "") -> str:
    text = JOB.format(name=name).replace("PyTorchTrainingJob", kind)
    text = text.replace("              command: [python, train.py]\n", "              command: [python, train.py]\n" + extra_container)
    if volumes:
        text += "          volumes:\n" + volumes
    return text.replace("spec:\n  replicaSpecs:", "spec:\n" + spec_extra + "  replicaSpecs:", 1)


_DS = """\
apiVersion: batch.tensorstack.dev/v1beta1
kind: DeepSpeedJob
metadata:
  name: bad
spec:
  ssh: {authMountPath: /root/.ssh, sshdPath: /usr/sbin/sshd}
  config:
    slotsPerWorker: 1
    run:
      python: [train.py]
  worker:
    replicas: 2
    template:
      spec:
        containers:
          - name: worker
            image: deepspeed:latest
            volumeMounts:
              - name: d
                mountPath: MOUNT
        volumes: [{name: d, emptyDir: {}}]
"""
_CAI = """\
apiVersion: batch.tensorstack.dev/v1beta1
kind: ColossalAIJob
metadata:
  name: bad
spec:
  ssh: {authMountPath: /root/.ssh}
  launcher: {image: "hpcaitech/colossalai:0.3.0"}
  worker:
    replicas: 2
    command: [train.py]
    template:
      spec:
        containers:
          - name: worker
            image: hpcaitech/colossalai:0.3.0
            volumeMounts: [{name: d, mountPath: MOUNT}]
        volumes: [{name: d, emptyDir: {}}]
"""

CASES = {
    # name: (job text, (line, col, code) expected)
    "nan-cpu": (_job("              resources: {limits: {cpu: .nan}}\n"), (15, 41, "FJ204")),
    "inf-memory": (_job("              resources: {requests: {memory: .inf}}\n"), (15, 46, "FJ204")),
    "inf-size-limit": (_job(volumes="            - {name: d, emptyDir: {sizeLimit: -.inf}}\n"), (16, 47, "FJ204")),
    "inf-replicas": (JOB.format(name="bad").replace("replicas: 2", "replicas: .inf"), (8, 17, "FJ204")),
    "generic-env-number": (_job("              env: 1\n", kind="GenericJob"), (15, 20, "FJ401")),
    "generic-env-name-mapping": (_job("              env: [{name: {a: 1}, value: x}]\n", kind="GenericJob"), (15, 28, "FJ401")),
    "env-name-equals": (_job("              env: [{name: A=B, value: x}]\n"), (15, 28, "FJ404")),
    "env-name-not-ascii": (_job("              env: [{name: \"ÄÖ\", value: x}]\n"), (15, 28, "FJ404")),
    "annotations-300KiB": (JOB.format(name="bad").replace("  name: bad\n", "  name: bad\n  annotations: {a: " + "x" * 300 * 1024 + "}\n"), (5, 3, "FJ313")),
    # review 21 r7 #3: at the limit alone, over it with what flatjob adds to the record (version,
    # pod-templates, run-mode, runtime) and to each pod (spec-hash, and the runtime's attempt,
    # restart-count, resuming)
    "annotations-at-the-limit-on-the-record": (JOB.format(name="bad").replace("  name: bad\n", "  name: bad\n  annotations: {a: " + "x" * (256 * 1024 - 1) + "}\n"), (5, 3, "FJ313")),
    "annotations-at-the-limit-on-the-pods": (JOB.format(name="bad").replace("      template:\n", "      template:\n        metadata: {annotations: {a: " + "x" * (256 * 1024 - 1) + "}}\n"), (10, 20, "FJ313")),
    "container-name": (_job().replace("- name: python", "- name: Python_1"), (12, 21, "FJ404")),
    # hx13: what flatjob mounts in an SSH kind's pods, mounted again by the job (a second mount
    # at the path: the API server refuses it; `/flatjob/`: flatjob's scripts hidden), and an ssh
    # folder sshd would read otherwise than written (split at a space, % expanded)
    "deepspeed-volume-at-flatjobs-scripts": (_DS.replace("MOUNT", "/flatjob"), (20, 28, "FJ309")),
    "deepspeed-volume-at-flatjobs-scripts-slash": (_DS.replace("MOUNT", "/flatjob/"), (20, 28, "FJ309")),
    "colossalai-volume-at-the-hostfile": (_CAI.replace("MOUNT", "/t9k/hostfile"), (16, 49, "FJ309")),
    "colossalai-ssh-folder-at-flatjobs-scripts": (_CAI.replace("/root/.ssh", "/flatjob").replace("MOUNT", "/data"), (6, 24, "FJ309")),
    "deepspeed-volume-named-like-flatjobs": (_DS.replace("MOUNT", "/data").replace("{name: d, emptyDir", "{name: flatjob-config, emptyDir").replace("- name: d\n", "- name: flatjob-config\n"), (21, 26, "FJ309")),
    # hx13: pdsh replaces %h, %u, %n and %% in the command deepspeed has every node run
    "deepspeed-argument-pdsh-rewrites": (_DS.replace("MOUNT", "/data").replace("python: [train.py]", "python: [train.py, --out=run_%h]"), (10, 26, "FJ340")),
    # hx34: deepspeed before 0.19 (0.10.0 is examples/deepspeed.yaml's image) also exports names
    # starting with its Nebula settings' (MASTER_HOST, LOCAL_HOST, AZUREML_...): lint said only
    # FJ404's warning for an env name 'LOCAL_HOST;id' deepspeed pastes into every node's shell
    "deepspeed-env-name-older-deepspeed-exports": (_DS.replace("MOUNT", "/data").replace("            image: deepspeed:latest\n", "            image: deepspeed:latest\n            env: [{name: 'LOCAL_HOST;id', value: x}]\n"), (18, 26, "FJ340")),
    "deepspeed-working-dir-pdsh-rewrites": (_DS.replace("MOUNT", "/data").replace("            image: deepspeed:latest\n", "            image: deepspeed:latest\n            workingDir: /w/%n\n"), (18, 25, "FJ340")),
    "flatjobs-own-scheduling-gate": (JOB.format(name="bad").replace("      template:\n        spec:\n", "      template:\n        spec:\n          schedulingGates: [{name: flatjob.dev/release}]\n"), (11, 36, "FJ204")),
    "deepspeed-ssh-folder-with-a-space": (_DS.replace("/root/.ssh", "/root/my keys").replace("MOUNT", "/data"), (6, 24, "FJ204")),
    "deepspeed-ssh-folder-with-a-token": (_DS.replace("/root/.ssh", "/keys/%u").replace("MOUNT", "/data"), (6, 24, "FJ204")),
    "deepspeed-relative-sshd": (_DS.replace("sshdPath: /usr/sbin/sshd", "sshdPath: sshd").replace("MOUNT", "/data"), (6, 46, "FJ204")),
    # hx17: every integer of a T9k type is an int32 (activeDeadlineSeconds an int64) in T9k's CRD
    # and the launchers; 2**63 passed lint
    "deepspeed-slots-beyond-int32": (_DS.replace("slotsPerWorker: 1", "slotsPerWorker: 9223372036854775808").replace("MOUNT", "/data"), (8, 21, "FJ204")),
    "deadline-beyond-int64": (JOB.format(name="bad").replace("spec:\n  replicaSpecs:", "spec:\n  runPolicy: {activeDeadlineSeconds: 9223372036854775808}\n  replicaSpecs:", 1), (6, 38, "FJ204")),
    # hx17: a null item of a list of scalars, which the API server stores as "" or 0
    "command-with-a-null-item": (JOB.format(name="bad").replace("[python, train.py]", "[python, ~]"), (14, 33, "FJ401")),
    "supplemental-group-null": (JOB.format(name="bad").replace("      template:\n        spec:\n", "      template:\n        spec:\n          securityContext: {supplementalGroups: [1000, null]}\n"), (11, 56, "FJ401")),
    # hx17: an image the kubelet cannot parse (distribution/reference) ends in InvalidImageName
    "image-with-an-inner-space": (JOB.format(name="bad").replace("image: pytorch/pytorch:2.4.0", "image: \"py torch:2.4.0\""), (13, 22, "FJ204")),
    "colossalai-launcher-image-upper-case": (_CAI.replace('launcher: {image: "hpcaitech/colossalai:0.3.0"}', 'launcher: {image: "hpcaitech/ColossalAI:0.3.0"}').replace("MOUNT", "/data"), (7, 21, "FJ204")),
    # hx22: the Kueue LocalQueue a job names becomes the kueue.x-k8s.io/queue-name label of every
    # pod: a value no label holds (64 characters, a DNS subdomain still; or '-x-') passed lint
    # and compile, and the API server refused every PodTemplate
    "kueue-queue-64-characters": (JOB.format(name="bad").replace("  name: bad\n", "  name: bad\n  annotations: {flatjob.dev/scheduler: kueue, flatjob.dev/kueue-queue: " + "q" * 64 + "}\n"), (5, 72, "FJ313")),
    "kueue-queue-not-a-name": (JOB.format(name="bad").replace("  name: bad\n", "  name: bad\n  annotations: {flatjob.dev/scheduler: kueue, flatjob.dev/kueue-queue: \"-x-\"}\n"), (5, 72, "FJ313")),
    # hx22: shapes the API server refuses that lint passed: an envFrom item with no source
    # (ValidateEnvFrom), a label or annotation key no object can have in a fieldRef's subscript
    # (validateObjectFieldSelector), in env and in a downwardAPI volume
    "env-from-without-a-source": (_job("              envFrom: [{prefix: A}]\n"), (15, 25, "FJ204")),
    "field-ref-annotation-key-with-a-space": (_job("              env: [{name: A, valueFrom: {fieldRef: {fieldPath: \"metadata.annotations['a b']\"}}}]\n"), (15, 65, "FJ204")),
    "downward-volume-label-key-too-long": (_job(volumes="            - {name: d, downwardAPI: {items: [{path: l, fieldRef: {fieldPath: \"metadata.labels['" + "k" * 64 + "']\"}}]}}\n"), (16, 79, "FJ204")),
    "tensorboard-service-name": (_job(spec_extra="  tensorboardSpec:\n    image: tensorflow/tensorflow:2.14.0\n    trainingLogFilesets: [t9k://pvc/logs/x]\n", name="a" * 55).replace("type: worker", "type: w"), (6, 3, "FJ305")),
}


@MEASURED
@pytest.mark.parametrize("name", list(CASES))
def test_a_bad_value_is_a_diagnostic_at_its_line_everywhere(box: Sandbox, name: str) -> None:
    text, (line, col, code) = CASES[name]
    box.job(file="bad.yaml", text=text)
    box.freeze()
    for run_ in (box.flatjob("lint", "jobs"), box.compile(), box.plugin(SOURCES="jobs")):
        assert_clean_exit(run_, 1)
        assert ("bad.yaml", line, col, "error", code) in run_.findings(), run_.output[-2000:]
        assert run_.cpu < CPU and run_.rss_mib < MIB, (run_.cpu, run_.rss_mib)
    krm = box.flatjob("krm", stdin=resource_list(text))
    assert_clean_exit(krm, 1)
    out = yaml.safe_load(krm.stdout)
    assert out["kind"] == "ResourceList" and any(f"[{code}]" in r["message"] and r["severity"] == "error" for r in out["results"]), krm.stdout[-2000:]
    assert box.untouched() and not box.out.exists()


def test_an_env_name_older_api_servers_refuse_is_a_warning(box: Sandbox) -> None:
    box.job(file="warn.yaml", text=_job("              env: [{name: \"A;B\", value: x}]\n", name="warn"))
    run_ = box.flatjob("lint", "jobs")
    assert_clean_exit(run_, 0)
    assert ("warn.yaml", 15, 28, "warning", "FJ404") in run_.findings()


def test_a_nan_patched_in_by_an_overlay_is_reported_in_the_overlay(box: Sandbox) -> None:
    box.job()
    folder = box.repo / "overlays" / "prod"
    folder.mkdir(parents=True)
    (folder / "overlay.yaml").write_text(
        "patches:\n  - patch:\n      kind: PyTorchTrainingJob\n      metadata: {name: ok}\n      spec:\n        replicaSpecs:\n"
        "          - type: worker\n            template:\n              spec:\n                containers:\n"
        "                  - name: python\n                    resources: {limits: {cpu: .nan}}\n"
    )
    box.freeze()
    for run_ in (box.compile("--overlay", "overlays/prod"), box.plugin(SOURCES="jobs", OVERLAY="overlays/prod")):
        assert_clean_exit(run_, 1)
        assert ("overlay.yaml", 12, 47, "error", "FJ204") in run_.findings(), run_.output[-2000:]
    assert box.untouched()


def test_a_job_without_namespace_and_its_twin_in_the_default_namespace_collide(box: Sandbox) -> None:
    box.job("x", file="a.yaml")
    box.job(file="b.yaml", text=JOB.format(name="x").replace("  name: x\n", "  name: x\n  namespace: team\n"))
    box.freeze()
    assert_clean_exit(box.flatjob("lint", "jobs"), 0)  # without a default, they land in different namespaces
    for run_ in (box.flatjob("lint", "-n", "team", "jobs"), box.compile("-n", "team"), box.plugin(SOURCES="jobs", NAMESPACE="team")):
        assert_clean_exit(run_, 1)
        assert ("b.yaml", 4, 9, "error", "FJ315") in run_.findings(), run_.output[-2000:]
    plugin = box.plugin(SOURCES="jobs")  # ARGOCD_APP_NAMESPACE=training: no collision there
    assert_clean_exit(plugin, 0)
    assert box.untouched()


@pytest.mark.parametrize(
    "container",
    [
        '              env: [{name: MASTER_PORT, value: "' + "9" * 4400 + '"}]\n',
        '              env: [{name: MASTER_PORT, value: "²"}]\n',
        '              resources: {limits: {nvidia.com/gpu: "' + "9" * 4400 + '"}}\n',
    ],
    ids=["master-port-4400-digits", "master-port-superscript-guard", "gpus-4400-digits"],
)
def test_a_number_in_a_job_text_is_read_as_bounded_ascii_digits(box: Sandbox, container: str) -> None:
    """Before issue 21 (found by the run-local fuzzing): `int()` of 4 400 digits ended lint and
    compile of a PyTorch job in exit 3; a MASTER_PORT that is no port keeps 29500, a GPU count
    beyond int64 keeps procPerNode `gpu` (compiler/digits.py).

    The superscript case is a guard, not a witness: the compiler's old check (`isascii()`
    before `isdigit()`) already refused "²"; it ended run-local in exit 3, and
    tests/hostile/test_run_local.py's `port-superscript` fails with that fix reverted."""
    text = _job(container, name="digits").replace("spec:\n  replicaSpecs:", "spec:\n  torchrunConfig: {enabled: true, procPerNode: gpu}\n  replicaSpecs:", 1)
    text = text.replace("command: [python, train.py]", "command: [python]\n              args: [train.py]")
    box.job(text=text)
    for run_ in (box.flatjob("lint", "jobs"), box.compile()):
        assert_clean_exit(run_, 0)
    assert "29500" in (box.out / "digits" / "podtemplates.yaml").read_text()


def test_a_job_without_namespace_is_compared_with_the_jobs_of_default_when_no_namespace_is_given(box: Sandbox) -> None:
    """Applied as they are, jobs that set no namespace land in `default` (FJ345 says so of their
    runtimes): job `x` of `default` with type `a-worker` and job `x-a` without one both render
    PodTemplate `x-a-worker-0` (hx7: lint exit 0, and compile --runtime job wrote both); a
    namespace-less twin of a job of `default` is the same job."""
    box.job(file="a.yaml", text=JOB.format(name="x").replace("  name: x\n", "  name: x\n  namespace: default\n").replace("type: worker", "type: a-worker"))
    box.job(file="b.yaml", text=JOB.format(name="x-a"))
    box.freeze()
    for run_ in (box.flatjob("lint", "jobs"), box.compile("--runtime", "job")):
        assert_clean_exit(run_, 1)
        assert ("b.yaml", 7, 13, "error", "FJ323") in run_.findings(), run_.output[-2000:]
    assert_clean_exit(box.flatjob("lint", "-n", "team", "jobs"), 0)  # x-a lands in team: apart
    box.job(file="b.yaml", text=JOB.format(name="x"))
    box.freeze()
    run_ = box.flatjob("lint", "jobs")
    assert_clean_exit(run_, 1)
    assert ("b.yaml", 4, 9, "error", "FJ315") in run_.findings() and "in namespace 'default'" in run_.output, run_.output[-2000:]
    assert box.untouched()
