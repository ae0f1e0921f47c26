"""Every convention docs/architecture.md §3 lists, pinned: names, DNS, ports, env, flags, paths.

Changing one of these is a breaking change for users' scripts and dashboards; if a test
here fails, update docs/architecture.md in the same change, with the reason.
"""

from __future__ import annotations

import shlex
import textwrap
from typing import Any

import yaml
from manifestkit import pod_of

from flatjob.compiler.loader import Loaded, parse
from flatjob.compiler.options import CompileOptions
from flatjob.compiler.pipeline import compile_documents
from flatjob.compiler.plan.scripts import LAUNCH_ENV


def render(spec: str, **options: Any) -> dict[tuple[str, str], dict[str, Any]]:
    """Compile one job; manifests by (kind, name), plus ("Pod", name) for the pod each
    PodTemplate makes (what runs is what these conventions are about)."""
    docs, problems = parse(textwrap.dedent(spec), "job.yaml")
    assert not problems
    result = compile_documents(Loaded(jobs=docs), CompileOptions(**options))
    assert not result.failed, [d.message for d in result.diagnostics]
    out = {}
    for rel, text in result.jobs[0].files.items():
        for d in yaml.safe_load_all(text):
            if d and rel != "kustomization.yaml":
                out[(d["kind"], d["metadata"]["name"])] = d
                if d["kind"] == "PodTemplate":
                    out[("Pod", d["metadata"]["name"])] = pod_of(d)
    return out


def container(pod: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    cs = pod["spec"]["containers"]
    return next(c for c in cs if name is None or c["name"] == name)


def env(c: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}


PYTORCH = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: PyTorchTrainingJob
metadata: {name: job}
spec:
  replicaSpecs:
    - type: worker
      replicas: 2
      template:
        spec:
          containers:
            - {name: sidecar, image: busybox}
            - name: python
              image: pytorch
              command: [python]
              args: [train.py, --lr, "0.1"]
              resources: {limits: {nvidia.com/gpu: 4}}
"""


def test_pod_names_service_and_dns() -> None:
    m = render(PYTORCH)
    pods = sorted(n for k, n in m if k == "Pod")
    assert pods == ["job-worker-0", "job-worker-1"]
    svc = m[("Service", "job")]["spec"]
    assert svc["clusterIP"] == "None" and svc["publishNotReadyAddresses"] is True
    assert svc["selector"] == {"flatjob.dev/job-name": "job"}
    pod = m[("Pod", "job-worker-1")]["spec"]
    assert (pod["hostname"], pod["subdomain"]) == ("job-worker-1", "job")
    assert "dnsConfig" not in pod  # no namespace known: only <pod>.<job> resolves


def test_short_names_resolve_when_the_namespace_is_known() -> None:
    pod = render(PYTORCH, namespace="ml", cluster_domain="corp.local")[("Pod", "job-worker-0")]
    assert pod["spec"]["dnsConfig"]["searches"] == ["job.ml.svc.corp.local"]


def test_plain_mode_env_for_worker_only_jobs() -> None:
    m = render(PYTORCH)
    for rank in (0, 1):
        e = env(container(m[("Pod", f"job-worker-{rank}")], "python"))
        assert e["MASTER_ADDR"] == "job-worker-0.job" and e["MASTER_PORT"] == "29500"
        assert (e["WORLD_SIZE"], e["RANK"]) == ("2", str(rank))
    assert "env" not in container(m[("Pod", "job-worker-0")], "sidecar")  # only the training container


def test_kubectl_logs_follows_the_training_container_where_it_is_not_the_first() -> None:
    """T9k's manuals follow a job with `kubectl logs $POD -f` (POD: status.tasks[0].replicas[0].name,
    UM lane-detection.md, start-llm-finetuning.md), which reads the training log: kubectl takes
    the container its default-container annotation names, else the first (the sidecar here)."""
    key = "kubectl.kubernetes.io/default-container"
    m = render(PYTORCH)
    assert {m[("Pod", f"job-worker-{i}")]["metadata"]["annotations"][key] for i in (0, 1)} == {"python"}
    first = render(PYTORCH.replace("            - {name: sidecar, image: busybox}\n", ""))
    assert key not in first[("Pod", "job-worker-0")]["metadata"]["annotations"]  # the first: nothing to say
    ds = render("""
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: DeepSpeedJob
        metadata: {name: ds}
        spec:
          config: {run: {python: [t.py]}}
          worker:
            replicas: 1
            template:
              spec:
                containers:
                  - {name: log-shipper, image: fluent-bit}
                  - {name: worker, image: ds}
        """)
    assert ds[("Pod", "ds-worker-0")]["metadata"]["annotations"][key] == "worker"
    own = render(PYTORCH.replace("      template:\n        spec:", "      template:\n        metadata: {annotations: {kubectl.kubernetes.io/default-container: sidecar}}\n        spec:"))
    assert own[("Pod", "job-worker-0")]["metadata"]["annotations"][key] == "sidecar"  # the template's own choice stays


def test_torchrun_command_line() -> None:
    spec = PYTORCH.replace("spec:\n  replicaSpecs:", "spec:\n  torchrunConfig: {enabled: true, procPerNode: gpu, maxRestarts: 2, extraOptions: [--monitor_interval=5]}\n  replicaSpecs:")
    m = render(spec)
    c0, c1 = (container(m[("Pod", f"job-worker-{i}")], "python") for i in (0, 1))
    assert c0["command"] == [
        "torchrun", "--nnodes=2", "--nproc_per_node=4", "--rdzv_backend=c10d", "--rdzv_endpoint=job-worker-0.job:29500",
        "--rdzv_id=job", "--max_restarts=2", "--rdzv_conf=is_host=true", "--monitor_interval=5",
    ]
    assert c1["command"][-2] == "--rdzv_conf=is_host=false"
    assert c0["args"] == ["train.py", "--lr", "0.1"]
    assert c0["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert "WORLD_SIZE" not in env(c0)  # torchrun sets it per process


TEMPLATE_POLICIES = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: DeepSpeedJob
metadata: {name: ds}
spec:
  config: {slotsPerWorker: 1, run: {python: [train.py]}}
  worker:
    replicas: 2
    restartPolicy: OnFailure
    template:
      spec:
        restartPolicy: OnFailure
        containers:
          - {name: worker, image: "deepspeed:latest"}
"""


def test_every_pod_template_restart_policy_is_never_whatever_the_template_says() -> None:
    """T9k's reference: "RestartPolicy in PodTemplateSpec will always be set to Never", also where
    the template writes OnFailure (as T9k's own DeepSpeed examples do); the replica's policy
    is the runtime's to apply."""
    pods = [m for (kind, _), m in render(TEMPLATE_POLICIES).items() if kind == "Pod"]
    assert len(pods) == 2 and {p["spec"]["restartPolicy"] for p in pods} == {"Never"}


def test_runtime_env_from_annotations() -> None:
    e = env(container(render(PYTORCH)[("Pod", "job-worker-0")], "python"))
    assert e["FLATJOB_RESTART_COUNT"] == {"fieldRef": {"fieldPath": "metadata.annotations['flatjob.dev/restart-count']"}}
    assert e["FLATJOB_ATTEMPT"] == {"fieldRef": {"fieldPath": "metadata.annotations['flatjob.dev/attempt']"}}


def test_pod_templates_gate_restart_policy_and_no_gitops_annotations() -> None:
    m = render(PYTORCH)
    assert not [k for k in m if k[0] == "Pod" and k not in {("Pod", n) for kind, n in m if kind == "PodTemplate"}]
    pod = m[("Pod", "job-worker-0")]
    assert pod["spec"]["schedulingGates"] == [{"name": "flatjob.dev/release"}]
    assert pod["spec"]["restartPolicy"] == "Never"
    notes = pod["metadata"]["annotations"]
    assert not [k for k in notes if k.startswith(("kustomize.toolkit.fluxcd.io/", "argocd.argoproj.io/"))]
    labels = pod["metadata"]["labels"]
    assert labels["tensorstack.dev/owner-name"] == "job" and "app.kubernetes.io/instance" not in labels
    template = m[("PodTemplate", "job-worker-0")]
    assert template["metadata"]["labels"] == labels  # kubectl get podtemplates -l ... finds them like pods
    assert template["metadata"]["annotations"] == {"flatjob.dev/rank": "0", "flatjob.dev/wave": "0", "flatjob.dev/training-container": "python"}
    record = m[("PyTorchTrainingJob", "job")]
    count, _, digest = record["metadata"]["annotations"]["flatjob.dev/pod-templates"].partition(":")
    assert count == "2" and len(digest) == 16


DEEPSPEED = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: DeepSpeedJob
metadata: {name: ds}
spec:
  config:
    slotsPerWorker: 2
    localRank: false
    autotune: run
    otherArgs: [--master_port=12346]
    run: {module: [pkg.train, --x, "a b"]}
  worker:
    replicas: 2
    template:
      spec:
        containers:
          - name: worker
            image: ds
            env: [{name: A, value: "1"}]
"""


def test_deepspeed_hostfile_paths_and_command() -> None:
    m = render(DEEPSPEED)
    data = m[("ConfigMap", "ds-config")]["data"]
    assert data["hostfile"] == "ds-worker-0.ds slots=2\nds-worker-1.ds slots=2\n"
    launch = data["launch.sh"]
    line = next(ln for ln in launch.splitlines() if ln.startswith(f"{LAUNCH_ENV}deepspeed "))
    assert shlex.split(line.removeprefix(LAUNCH_ENV).removesuffix(" &")) == [
        "deepspeed", "--hostfile=$FLATJOB_HOSTFILE", "--master_addr=ds-worker-0.ds", "--force_multi", "--no_local_rank",
        "--autotuning=run", "--module", "--master_port=12346", "pkg.train", "--x", "a b",
    ]
    assert "DS_ENV_FILE" not in launch.replace("for name in DS_ENV_FILE", "")  # every pod's sessions load its own env (session.sh): no env file is written
    assert "> .deepspeed_env" not in launch and "deepspeed_env\n" not in launch
    assert '(umask 077 && export -p > "$FLATJOB_POD_ENV")' in data["sshd.sh"]
    sshd = next(ln for ln in data["sshd.sh"].splitlines() if ln.startswith("exec "))
    assert shlex.split(sshd) == [
        "exec", "/usr/sbin/sshd", "-D", "-e", "-p", "22", "-f", "$FLATJOB_SSHD_CONFIG", "-o", "StrictModes=no",
        "-o", "AuthorizedKeysFile=$FLATJOB_SSH_DIR/authorized_keys", "-o", "ForceCommand=/bin/sh $(flatjob_q $FLATJOB_DIR/session.sh) $(flatjob_q $FLATJOB_POD_ENV)",  # quoted for sshd's shell
    ]
    assert "FLATJOB_SSH_DIR=${FLATJOB_SSH_DIR:-/root/.ssh}" in data["sshd.sh"]
    env = {e["name"]: e.get("value") for e in container(m[("Pod", "ds-worker-1")])["env"]}
    assert (env["FLATJOB_DIR"], env["FLATJOB_POD_ENV"], env["FLATJOB_SSH_DIR"]) == ("/flatjob", "/run/flatjob-pod-env", "/root/.ssh")  # env entries: they win over envFrom
    w0 = m[("Pod", "ds-worker-0")]
    mounts = {v["mountPath"]: v for v in container(w0)["volumeMounts"]}
    assert mounts["/t9k/hostfile"]["subPath"] == "hostfile" and "/root/.ssh" in mounts and "/flatjob" in mounts
    assert container(w0)["command"] == ["/bin/sh", "/flatjob/launch.sh"]
    assert container(m[("Pod", "ds-worker-1")])["command"] == ["/bin/sh", "/flatjob/sshd.sh"]
    # Started (and Ready) once sshd accepts connections, then never probed again: sshd logs
    # two lines per probe connection.
    assert container(w0)["startupProbe"] == {"tcpSocket": {"port": 22}, "periodSeconds": 2, "failureThreshold": 300}
    assert "readinessProbe" not in container(w0)
    ssh = next(v for v in w0["spec"]["volumes"] if v["name"] == "flatjob-ssh")["projected"]
    assert ssh["sources"][0]["secret"]["name"] == "ds-ssh" and ssh["defaultMode"] == 0o600
    assert "StrictHostKeyChecking no" in data["ssh_config"] and "UserKnownHostsFile /dev/null" in data["ssh_config"]


def test_deepspeed_spec_ssh_is_flatjobs_own_and_works_as_on_a_colossalai_job() -> None:
    """T9k's DeepSpeedJob has no spec.ssh (DeepSpeedJobSpec in user-manuals' and ucman's API
    references and in the older user-docs one; its keys are at /root/.ssh, which a job must not
    mount over: UM deepspeedjob.md).  flatjob accepts ColossalAIJob's SSHConfig there and applies
    it the same way (docs/t9k-compatibility.md); without it a DeepSpeedJob is T9k's
    (test_deepspeed_hostfile_paths_and_command: /root/.ssh, /usr/sbin/sshd)."""
    ssh = "  ssh: {authMountPath: /etc/keys, sshdPath: /opt/bin/sshd}\n"
    ds = render(DEEPSPEED.replace("spec:\n", "spec:\n" + ssh, 1))
    cai = render(COLOSSAL.replace("spec:\n", "spec:\n" + ssh, 1))
    for m, pod in ((ds, "ds-worker-1"), (cai, "cai-worker-1")):
        mounts = {v["mountPath"]: v["name"] for v in container(m[("Pod", pod)])["volumeMounts"]}
        assert mounts["/etc/keys"] == "flatjob-ssh" and "/root/.ssh" not in mounts
    assert ds[("ConfigMap", "ds-config")]["data"]["sshd.sh"] == cai[("ConfigMap", "cai-config")]["data"]["sshd.sh"]
    assert "exec /opt/bin/sshd -D" in ds[("ConfigMap", "ds-config")]["data"]["sshd.sh"]


COLOSSAL = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: ColossalAIJob
metadata: {name: cai}
spec:
  launcher: {image: cai, workingDir: /work}
  worker:
    replicas: 2
    procPerWorker: 4
    command: [train.py, --config, c.py]
    torchArgs: [--max_restarts, "0"]
    template:
      spec:
        containers: [{name: worker, image: cai}]
"""


def test_colossalai_launcher_hostfile_and_command() -> None:
    m = render(COLOSSAL)
    assert ("Pod", "cai-launcher") in m
    data = m[("ConfigMap", "cai-config")]["data"]
    assert data["hostfile"] == "cai-worker-0.cai\ncai-worker-1.cai\n"
    line = next(ln for ln in data["launch.sh"].splitlines() if ln.startswith(f"{LAUNCH_ENV}colossalai "))
    assert shlex.split(line.removeprefix(LAUNCH_ENV).removesuffix(" &")) == [
        "colossalai", "run", "--hostfile=$FLATJOB_HOSTFILE", "--nproc_per_node=4", "--master_addr=cai-worker-0.cai",
        "--master_port=29500", "--extra_launch_args=max_restarts=0", "train.py", "--", "--config", "c.py",
    ]
    assert "for name in FLATJOB_ATTEMPT FLATJOB_RESTART_COUNT FLATJOB_RESUMING HOSTNAME; do unset" in data["launch.sh"]
    assert container(m[("Pod", "cai-launcher")])["workingDir"] == "/work"


def test_extra_options_replace_flatjobs_torchrun_flags() -> None:
    spec = PYTORCH.replace(
        "spec:\n  replicaSpecs:",
        "spec:\n  torchrunConfig: {enabled: true, rdzvBackend: etcd, extraOptions: [--rdzv-endpoint=etcd.infra:2379, --rdzv_conf=read_timeout=120]}\n  replicaSpecs:",
    )
    cmd = container(render(spec)[("Pod", "job-worker-0")], "python")["command"]
    assert cmd == [
        "torchrun", "--nnodes=2", "--nproc_per_node=1", "--rdzv_backend=etcd", "--rdzv_id=job", "--max_restarts=0",
        "--rdzv-endpoint=etcd.infra:2379", "--rdzv_conf=read_timeout=120",
    ]


def test_user_rdzv_conf_is_merged_with_is_host() -> None:
    spec = PYTORCH.replace("spec:\n  replicaSpecs:", "spec:\n  torchrunConfig: {enabled: true, extraOptions: [--rdzv_conf=join_timeout=900]}\n  replicaSpecs:")
    cmd = container(render(spec)[("Pod", "job-worker-1")], "python")["command"]
    assert "--rdzv_conf=is_host=false,join_timeout=900" in cmd and sum(a.startswith("--rdzv_conf") for a in cmd) == 1


def test_t9k_scheduler_without_queue_uses_the_default_queue() -> None:
    """T9k gives no rule for a t9kScheduler without queue; its PodGroup's queue defaults to
    `default` (user-manuals scheduler/podgroup.md), so flatjob renders that (architecture §7)."""
    out = render(PYTORCH.replace("spec:\n  replicaSpecs:", "spec:\n  scheduler: {t9kScheduler: {priority: 50}}\n  replicaSpecs:", 1))
    assert out[("PodGroup", "job")]["spec"]["queue"] == "default" and out[("PodGroup", "job")]["spec"]["priority"] == 50
    assert out[("Pod", "job-worker-0")]["metadata"]["labels"]["scheduler.tensorstack.dev/queue"] == "default"
    assert out[("PyTorchTrainingJob", "job")]["spec"]["scheduler"] == {"t9kScheduler": {"priority": 50, "queue": "default"}}
