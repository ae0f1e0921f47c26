"""Plan a PyTorchTrainingJob: plain DDP environment, or an exact torchrun command per pod.

Plain mode: every pod gets MASTER_ADDR (rank 0's address), MASTER_PORT, WORLD_SIZE and
RANK (global, in replicaSpec order), also when the job has no master type.
torchrun mode: the training container's command becomes `torchrun <flags>`; its args (the
script and the script's args) are kept.  Flags use the underscore spellings every torchrun
since 1.10 accepts (T9k images ship torch 1.13); see docs/architecture.md.
"""

from __future__ import annotations

from dataclasses import replace

from ..digits import port
from ..jobtypes import PyTorchTrainingJob
from ..options import CompileOptions
from ..podtemplate import accelerator_count, containers_of, literal_env
from . import ContainerPatch, JobPlan, PodPlan, ServicePlan
from .common import base_pods, elastic_of, env, layout, mode_patch, release_counts, run_mode_name

DEFAULT_MASTER_PORT = 29500
DEBUG_COMMAND = ("sleep", "inf")  # T9k's default debug command
MASTER_PORT_NAME = "pytorch"


def master_port(first: PodPlan) -> int:
    """29500, unless the first pod's training container sets MASTER_PORT to a literal number."""
    if first.container is None:
        return DEFAULT_MASTER_PORT
    number = port(literal_env(containers_of(first.template)[first.container], "MASTER_PORT"))
    return DEFAULT_MASTER_PORT if number is None else number


def nproc(job: PyTorchTrainingJob, pod: PodPlan) -> str:
    """--nproc_per_node: the number, or the replica's GPU count for 'gpu' (kept if unknown)."""
    ppn = job.spec.torchrun_config.proc_per_node if job.spec.torchrun_config else "1"
    if ppn != "gpu" or pod.container is None:
        return ppn
    count = accelerator_count(containers_of(pod.template)[pod.container])
    return str(count) if count else "gpu"


def torchrun_command(job: PyTorchTrainingJob, pod: PodPlan, endpoint: str, nnodes: str, procs: str | None = None) -> list[str]:
    """The exact torchrun command for one pod (the script comes from the container's args).

    `procs` is nproc(job, pod) when the caller already knows it (it is the same for every
    pod of a replica type)."""
    tr = job.spec.torchrun_config
    assert tr is not None
    extra = list(tr.extra_options)
    given = _flags(extra)
    ours = [
        ("--nnodes", nnodes),
        ("--nproc_per_node", procs if procs is not None else nproc(job, pod)),
        ("--rdzv_backend", tr.rdzv_backend),
        ("--rdzv_endpoint", endpoint),  # an etcd backend's endpoint is the user's etcd: extraOptions
        ("--rdzv_id", job.metadata.name),
        ("--max_restarts", str(tr.max_restarts)),
    ]
    # A flag the user sets in extraOptions replaces flatjob's (torchrun keeps the last anyway;
    # leaving ours out keeps the command line honest for review).
    cmd = ["torchrun", *(f"{flag}={value}" for flag, value in ours if flag not in given)]
    if tr.rdzv_backend == "c10d":
        # c10d guesses which node hosts its store by matching the endpoint against the
        # host's names; behind DNS that guess can fail, so say it explicitly.  torchrun keeps
        # only the last --rdzv_conf, so a user's one (timeouts...) is merged into this flag.
        user, extra = split_rdzv_conf(extra)
        conf = f"is_host={'true' if pod.rank == 0 else 'false'}"
        if user:
            conf = user if "is_host" in _conf_keys(user) else f"{conf},{user}"
        cmd.append(f"--rdzv_conf={conf}")
    cmd.extend(extra)
    return cmd


RDZV_CONF_FLAGS = ("--rdzv_conf", "--rdzv-conf")


def split_rdzv_conf(options: list[str]) -> tuple[str | None, list[str]]:
    """The value of the last --rdzv_conf in extraOptions (torchrun keeps only the last) and the
    other options; None when there is none (the options are then returned unchanged)."""
    value: str | None = None
    rest: list[str] = []
    i = 0
    while i < len(options):
        flag, eq, val = options[i].partition("=")
        if flag in RDZV_CONF_FLAGS and (eq or i + 1 < len(options)):
            value = val if eq else options[i + 1]
            i += 1 if eq else 2
            continue
        rest.append(options[i])
        i += 1
    return value, rest if value is not None else list(options)


def _flags(options: list[str]) -> set[str]:
    """torchrun flags set in extraOptions, in underscore spelling (torchrun takes both)."""
    return {o.partition("=")[0].replace("-", "_").replace("__", "--", 1) for o in options if o.startswith("--")}


def _conf_keys(conf: str) -> set[str]:
    return {item.partition("=")[0].strip() for item in conf.split(",") if item.strip()}


def plan_pytorch(job: PyTorchTrainingJob, options: CompileOptions) -> JobPlan:
    """Plan pods, env and commands of a PyTorchTrainingJob."""
    service = job.metadata.name
    lay = layout(job, [(r.type, r.replicas, r.template) for r in job.spec.replica_specs])
    pods = base_pods(job, lay, service, local=options.local_addresses, block=options.local_block)
    if not pods:
        return JobPlan(job, options, ServicePlan(service), (), run_mode=run_mode_name(job.spec.run_mode))
    port = master_port(pods[0])
    master = pods[0].address
    e = elastic_of(job)
    torchrun = job.spec.torchrun_config is not None and job.spec.torchrun_config.enabled
    nnodes = f"{e.min_replicas}:{e.max_replicas}" if e is not None else str(len(pods))
    planned = []
    procs: dict[str, str] = {}  # replica type -> --nproc_per_node
    for pod in pods:
        variables = [env("MASTER_ADDR", master), env("MASTER_PORT", str(port))]
        if torchrun:
            per = procs.get(pod.type) or procs.setdefault(pod.type, nproc(job, pod))
            command = torchrun_command(job, pod, f"{master}:{port}", nnodes, per)
            patch = ContainerPatch(env=tuple(variables), command=command, logs_on_error=True)
        else:
            variables += [env("WORLD_SIZE", str(len(pods))), env("RANK", str(pod.rank))]
            patch = ContainerPatch(env=tuple(variables))
        patch, drop, skip = mode_patch(job.spec.run_mode, pod.type, DEBUG_COMMAND, patch)
        role = "master" if pod.rank == 0 else "worker"
        planned.append(replace(pod, patch=patch, drop_init_containers=drop, skip_init_on_resume=skip, role=role))
    _, gang = release_counts(job, len(pods))
    ports = ({"name": MASTER_PORT_NAME, "port": port, "protocol": "TCP", "targetPort": port},)
    return JobPlan(
        job,
        options,
        ServicePlan(service, ports),
        tuple(planned),
        min_member=gang,
        run_mode=run_mode_name(job.spec.run_mode),
    )
