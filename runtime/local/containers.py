"""Which containers of a pod run here, and with what: argv, env, working folder, log label.

Init containers run first, in order; those with restartPolicy Always (Kubernetes' native
sidecars) are started in their turn, the next waiting until one has started, and keep running
beside the regular containers until they have stopped.  Every
regular container runs, as in a pod; `--only-training` runs just the training container
(for pods whose sidecars need their image).  Checked for every pod before anything starts.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flatjob.compiler import keys
from flatjob.compiler.podtemplate import ACCELERATORS
from flatjob.compiler.render.configmap import configmap_name

from .environment import command_line, declared_env, pod_facts, process_env
from .errors import LocalError
from .files import config_mounts, map_paths, path_env
from .processes import Launch, PodLaunch

DEFAULT_GRACE = 30.0  # Kubernetes' terminationGracePeriodSeconds default


@dataclass(frozen=True)
class Options:
    """How containers are run here (from the command line)."""

    env: Mapping[str, str] = field(default_factory=dict)  # --env NAME=VALUE, in every container
    skip_env_from: bool = False
    only_training: bool = False
    cwd: str = "."  # where containers run when their workingDir does not exist here
    base_env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


@dataclass(frozen=True)
class PodExtra:
    """More for a pod's processes: env after run-local's paths and before the declared env,
    and command-line strings of processes that lose their mark (runtime/local/ssh.py)."""

    env: Mapping[str, str] = field(default_factory=dict)
    titled: tuple[str, ...] = ()


@dataclass(frozen=True)
class Selected:
    """A pod's containers in the roles they play here."""

    init: tuple[dict[str, Any], ...]  # every init container, in the pod's order, sidecars included
    sidecars: tuple[dict[str, Any], ...]  # those of them with restartPolicy Always
    main: tuple[dict[str, Any], ...]


def select(manifest: Mapping[str, Any], training: str | None, only_training: bool) -> Selected:
    """Init containers, native sidecars and regular containers that run for this pod."""
    spec = manifest.get("spec") or {}
    containers = tuple(spec.get("containers") or [])
    if only_training:
        chosen = tuple(c for c in containers if c.get("name") == training) or containers[:1]
        return Selected((), (), chosen)
    inits = tuple(spec.get("initContainers") or [])
    return Selected(inits, tuple(c for c in inits if c.get("restartPolicy") == "Always"), containers)


def working_dir(container: Mapping[str, Any], options: Options) -> str:
    """The container's workingDir when it exists here, else run-local's working folder."""
    wd = container.get("workingDir")
    return wd if wd and os.path.isdir(wd) else options.cwd


def _launch(manifest: Mapping[str, Any], container: Mapping[str, Any], facts: Any, options: Options, folder: Path, label: str, mark: str, files: Mapping[str, str], extra: PodExtra) -> Launch:
    declared, problems = declared_env(container, facts, options.env, skip_env_from=options.skip_env_from)
    if problems:
        raise LocalError(f"{facts.name}/{container.get('name')}: cannot resolve {'; '.join(problems)}")
    argv = command_line(container, declared, facts.name)
    name = manifest["metadata"]["name"]
    job = (manifest["metadata"].get("labels") or {}).get(keys.JOB_NAME, "")
    mounts = config_mounts(manifest, container, configmap_name(job), folder)
    hostname = (manifest.get("spec") or {}).get("hostname") or name
    env = process_env(options.base_env, declared, hostname, {**path_env(files, folder), **extra.env})
    return Launch(
        container=str(container.get("name")),
        argv=tuple(map_paths(argv, mounts)),
        env=env,
        cwd=working_dir(container, options),
        label=label,
        mark=mark,
        fallback_logs=container.get("terminationMessagePolicy") == "FallbackToLogsOnError",
        titled=extra.titled,
    )


def pod_launch(
    manifest: Mapping[str, Any], uid: str, ip: str, annotations: Mapping[str, str], training: str | None,
    options: Options, folder: Path, mark: str, files: Mapping[str, str], extra: PodExtra | None = None,
) -> PodLaunch:
    """Everything to run for one released pod incarnation (`extra`: what an SSH pod adds)."""
    name = manifest["metadata"]["name"]
    facts = pod_facts(manifest, uid, ip, annotations, socket.gethostname())
    chosen = select(manifest, training, options.only_training)

    def build(c: Mapping[str, Any]) -> Launch:
        label = name if c.get("name") == training or len(chosen.main) + len(chosen.init) == 1 else f"{name}/{c.get('name')}"
        return _launch(manifest, c, facts, options, folder, label, f"{mark}/{c.get('name')}", files, extra or PodExtra())

    grace = (manifest.get("spec") or {}).get("terminationGracePeriodSeconds")
    return PodLaunch(
        name=name,
        uid=uid,
        init=(init := tuple(build(c) for c in chosen.init)),
        sidecars=tuple(launch for launch, c in zip(init, chosen.init, strict=True) if c.get("restartPolicy") == "Always"),
        main=tuple(build(c) for c in chosen.main),
        grace=float(DEFAULT_GRACE if grace is None else grace),
    )


def _words(args: list[str]) -> list[str]:
    """The arguments as words, a shell string (`sh -c "python train.py"`) split as sh would."""
    out: list[str] = []
    for a in args:
        try:
            out += shlex.split(a) if any(c.isspace() for c in a) else [a]
        except ValueError:  # unbalanced quotes: left to the shell to say
            continue
    return out


def preflight(manifests: list[Mapping[str, Any]], training: Mapping[str, str | None], options: Options) -> tuple[list[str], list[str]]:
    """(errors, warnings) for every pod: what could not run here, and what runs differently."""
    errors: list[str] = []
    warnings: list[str] = []
    for m in manifests:
        name = m["metadata"]["name"]
        facts = pod_facts(m, "preflight", "127.0.0.1", m["metadata"].get("annotations") or {}, "localhost")
        chosen = select(m, training.get(name), options.only_training)
        for c in (*chosen.init, *chosen.main):
            where = f"{name}/{c.get('name')}"
            declared, problems = declared_env(c, facts, options.env, skip_env_from=options.skip_env_from)
            errors += [f"{where}: cannot resolve {p}" for p in problems]
            wd = c.get("workingDir")
            try:
                argv = command_line(c, declared, name)
            except LocalError as exc:
                errors.append(str(exc))
            else:
                program = argv[0]
                search = declared.get("PATH", options.base_env.get("PATH", ""))
                if "/" not in program and shutil.which(program, path=search) is None:
                    warnings.append(f"{where}: {program} is not on PATH here, so it will fail to start (exit 128, as where an image lacks it); activate the environment that has it")
                base = wd if wd and os.path.isdir(wd) else str(options.cwd)
                script = next((t for t in _words(argv[1:]) if t.endswith(".py") and not t.startswith("-") and "$" not in t), None)
                if script and os.path.isabs(script) and not os.path.isfile(script):  # said "not a file in <cwd>"
                    warnings.append(f"{where}: {script} is not a file on this machine (no image, no volume is mounted here): put it there, or point the job at a local copy with --overlay")
                elif script and not os.path.isfile(os.path.join(base, script)):
                    warnings.append(f"{where}: {script} is not a file in {base} (relative paths resolve from there): run flatjob from the folder the job's paths are relative to")
            if wd and not os.path.isdir(wd):
                warnings.append(f"{where}: workingDir {wd} does not exist here; it runs in {options.cwd}")
            limits = {**((c.get("resources") or {}).get("requests") or {}), **((c.get("resources") or {}).get("limits") or {})}
            gpus = {k: v for k, v in limits.items() if k in ACCELERATORS}
            if gpus:
                warnings.append(f"{where}: asks for {', '.join(f'{k}: {v}' for k, v in gpus.items())}; run-local has no GPUs, everything runs on this machine's CPUs")
    return errors, warnings
