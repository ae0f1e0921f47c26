"""Plan a ColossalAIJob: workers run sshd; the launcher waits for them, then `colossalai run`.

`colossalai run` ssh-es to every hostfile host, cds into the launcher's working directory
and starts torchrun there with the launcher's environment exported (it overwrites HOSTNAME
and PATH on the workers, see docs/architecture.md); the launch script therefore unsets the
launcher's per-pod variables before it starts, so workers keep their own.
"""

from __future__ import annotations

from dataclasses import replace

from ..jobtypes import ColossalAIJob
from ..options import CompileOptions
from ..podtemplate import containers_of
from ..render.configmap import configmap_name
from . import ContainerPatch, JobPlan, PodPlan, scripts, ssh
from .common import address, base_pods, layout, mode_patch, run_mode_name

MASTER_PORT = 29500
LAUNCH_SCRIPT, SSHD_SCRIPT = ssh.LAUNCH_SCRIPT, ssh.SSHD_SCRIPT
PER_POD_VARS = ("HOSTNAME",)  # set per pod by Kubernetes; must not be exported to workers


def extra_launch_args(args: list[str]) -> str | None:
    """torchArgs/extraArgs as `colossalai run --extra_launch_args` (`--a=1 --b` -> `a=1,b`)."""
    items: list[str] = []
    for a in args:
        if a.startswith("-"):
            items.append(a.lstrip("-"))
        elif items and "=" not in items[-1]:
            items[-1] += f"={a}"  # "--max_restarts", "3" -> max_restarts=3
        else:
            items.append(a)
    return ",".join(items) if items else None


def colossalai_args(job: ColossalAIJob, master_addr: str) -> list[str]:
    """`colossalai run` arguments after --hostfile: processes, rendezvous, extra args, script."""
    tc = job.spec.torch_config
    assert tc is not None
    argv = [f"--nproc_per_node={tc.proc_per_worker}", f"--master_addr={master_addr}", f"--master_port={MASTER_PORT}"]
    extra = extra_launch_args(tc.extra_args)
    if extra:
        argv.append(f"--extra_launch_args={extra}")
    return argv + list(tc.script)


def hostfile(workers: list[PodPlan]) -> str:
    """ColossalAI's hostfile: one host per line, no slots."""
    return "".join(f"{p.address}\n" for p in workers)


def launch_script(job: ColossalAIJob, master_addr: str) -> str:
    """The launcher's script: wait for the workers' sshd, then `colossalai run`."""
    return "".join(
        [
            scripts.header(),
            f"# ColossalAIJob {job.metadata.name}: the launcher runs `colossalai run`, which starts torchrun\n"
            "# on every host in the hostfile over ssh, in this container's working directory.\n",
            scripts.traps(),
            scripts.wait_for_peers(),
            "# colossalai run exports the launcher's whole environment to the workers: keep theirs.\n",
            f"unset {' '.join(PER_POD_VARS)}\n",
            "# colossalai run with spec.torchConfig (procPerWorker, extraArgs, script); a child (&, wait)\n"
            "# so the traps see SIGTERM. extraArgs reach torchrun as --extra_launch_args=a=1,b.\n",
            scripts.background(
                f'colossalai run --hostfile="$FLATJOB_HOSTFILE" {scripts.quote(colossalai_args(job, master_addr))}'
            ),
        ]
    )


def plan_colossalai(job: ColossalAIJob, options: CompileOptions) -> JobPlan:
    """Plan the launcher and workers of a canonical ColossalAIJob."""
    name = job.metadata.name
    specs = job.spec.replica_specs or []
    lay = layout(job, [(r.type, 1 if r.type == "launcher" else r.replicas, r.template) for r in specs])
    pods = base_pods(job, lay, name)
    mode = run_mode_name(job.spec.run_mode)
    workers = [p for p in pods if p.type == "worker"]
    master = workers[0].address if workers else address(f"{name}-worker-0", name)
    cm = configmap_name(name)
    files = ssh.shared_files(job, hostfile(workers), launch_script(job, master))
    mounts = ssh.volume_mounts(job.spec.ssh.auth_mount_path)
    planned = []
    for pod in pods:
        launcher = pod.type == "launcher"
        if launcher:
            names = [c.get("name") for c in containers_of(pod.template)]
            index = names.index("launcher") if "launcher" in names else 0
            pod = replace(pod, name=f"{name}-launcher", address=address(f"{name}-launcher", name), container=index)
            patch = ContainerPatch(command=ssh.script_command(LAUNCH_SCRIPT), args=[], volume_mounts=mounts)
        else:
            patch = ssh.sshd_patch(mounts)
        patch, drop, skip = mode_patch(job.spec.run_mode, pod.type, ("sleep", "inf"), patch)
        wave = 1 if launcher and mode != "debug" else 0
        planned.append(replace(pod, patch=patch, volumes=ssh.volumes(job, cm), drop_init_containers=drop, skip_init_on_resume=skip, role=pod.type, wave=wave))
    return ssh.job_plan(job, options, planned, files, mode)
