"""What deepspeed and `colossalai run` cannot carry to the nodes, reported at the line.

Both launchers build one shell command per node and run it over ssh, and neither quotes all
it puts there (../shared/research/launchers.md):
- deepspeed (pdsh) passes the script itself raw, whatever it holds, and each of its arguments
  raw, or in double quotes when it has a space, so the node's shell expands `$`, backticks and
  `\\` in them, and splits, globs or runs the rest; it splits `--launcher_args` into pdsh's own
  arguments (`-R exec` runs the command on the launching pod);
- `colossalai run` joins `torchrun ... script args` with spaces, unquoted (flatjob quotes the
  script's arguments, but not the script's own path, which colossalai checks for `.py`, nor
  the --extra_launch_args items), splits every extra item at each `=`, and exports the
  launcher's environment in double quotes it does not escape;
- both paste the launcher's working directory (`cd <dir>`) and its env names (`export NAME=`)
  into every node's command unquoted (deepspeed's pdsh runner; fabric's cd escapes spaces only),
  so they must be plain words and shell names (tests/test_launcher_shell.py);
- some flags a launcher ignores (deepspeed's pdsh runner drops --bind_cores_to_rank), no
  longer has (deepspeed 0.19.8 removed the elastic flags), or rejects while exiting 0
  (`colossalai run` on a script that does not end in .py).
Also: the SSH wiring needs root in every pod (sshd, its host keys, the 0600 key files).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ..errors import Diagnostic, Severity
from ..jobtypes import ColossalAIJob, DeepSpeedJob
from ..loader import Document, PathT
from ..plan.colossalai import extra_items
from ..plan.common import resume_entries
from ..plan.deepspeed import run_program
from ..podtemplate import containers_of, launch_index, training_index
from .groups import groups

# deepspeed 0.19.8's own flags that take a value (launcher/runner.py parse_args; the others
# are store_true): what follows one of them, unless it is `--flag=value`, is its value, and the
# first word that is neither a flag nor a value is the script.
DEEPSPEED_VALUE_FLAGS = ("-H", "--hostfile", "-i", "--include", "-e", "--exclude", "--num_nodes", "--num_gpus", "--num_accelerators",
                         "--master_port", "--master_addr", "--node_rank", "--launcher", "--launcher_args", "--enable_each_rank_log",
                         "--autotuning", "--bind_core_list", "--ssh_port", "--venv_script", "--log_level")
# A word every POSIX shell (and bash) leaves exactly as it is (DeepSpeed's own "safe" set).
PLAIN_WORD = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")
# pdsh replaces %h, %u, %n and %% in every word of the ssh command it runs, the node's command
# included (src/common/pipecmd.c, pipecmd_format_arg): through deepspeed, a word holding one of
# them reaches the node changed (`run_%h` as `run_<host>`; hx13).  Any other `%` stays.
PDSH_FORMAT = re.compile(r"%[hun%]")
PDSH_FORMATS = "pdsh replaces %h, %u, %n and %% in the command every node runs"
# Inside double quotes these still act: $ expands, ` runs, \ escapes.
IN_DOUBLE_QUOTES = re.compile(r'[$`\\]')
DROPPED_BY_PDSH = {
    "--bind_cores_to_rank": "deepspeed's pdsh runner does not pass it to the nodes, so no rank is bound",
    "--bind_core_list": "deepspeed's pdsh runner does not pass it to the nodes, so no rank is bound",
}
# Flags whose values deepspeed's pdsh runner pastes into the remote command as they are
# (multinode_runner.py PDSHRunner.get_cmd: `source <venv_script>;`, `--master_addr=...`,
# `--enable_each_rank_log=...`; --master_port is an int).
PASTED_BY_PDSH = ("--master_addr", "--venv_script", "--enable_each_rank_log")
REMOVED_ELASTIC = {
    f: "deepspeed 0.19.8 removed it (0.7.0-0.19.7 had it) and exits 2; flatjob sizes an elastic job itself"
    for f in ("--elastic_training", "--min_elastic_nodes", "--max_elastic_nodes")
}


def _flag(arg: str) -> str:
    return arg.split("=", 1)[0]


# --- DeepSpeedJob ----------------------------------------------------------------------------


def _pdsh_changes(arg: str) -> str | None:
    """How pdsh or the node's shell would change a script argument deepspeed passes through pdsh."""
    if PDSH_FORMAT.search(arg):
        return PDSH_FORMATS
    if " " in arg:
        found = IN_DOUBLE_QUOTES.search(arg)
        return f"{found.group()!r} would act inside the double quotes deepspeed puts around it" if found else None
    if arg == "":
        return "an empty argument disappears"
    if not PLAIN_WORD.fullmatch(arg):
        return "it goes to the shell unquoted, which would expand, split or glob it"
    return None


def _script_changes(arg: str) -> str | None:
    """How the node's shell would change the script word, which deepspeed pastes as it is."""
    if PDSH_FORMAT.search(arg):
        return PDSH_FORMATS
    return None if PLAIN_WORD.fullmatch(arg) else "deepspeed puts the script unquoted into the command, whose shell would split, expand or run it"


def _long_flag(flag: str) -> str:
    """deepspeed's flag that `flag` names, also abbreviated (argparse takes any unambiguous prefix)."""
    if not flag.startswith("--"):
        return flag
    found = [f for f in DEEPSPEED_VALUE_FLAGS if f.startswith("--") and f.startswith(flag)]
    return found[0] if len(found) == 1 else flag


def deepspeed_words(other_args: list[str], program: list[str], run_path: PathT) -> Iterator[tuple[PathT, str, bool]]:
    """The positional words of deepspeed's command line (otherArgs, then the program), with
    their paths and whether each is the script (the first: deepspeed takes every word after
    it as the script's arguments, argparse REMAINDER)."""
    words = [(("spec", "config", "otherArgs", i), a) for i, a in enumerate(other_args)]
    words += [((*run_path, i), a) for i, a in enumerate(program)]
    i, script_seen = 0, False
    while i < len(words):
        path, word = words[i]
        if not script_seen and word.startswith("-") and word != "-":
            i += 2 if "=" not in word and _long_flag(word) in DEEPSPEED_VALUE_FLAGS else 1
            continue
        yield path, word, not script_seen
        script_seen = True
        i += 1


def deepspeed_program(job: DeepSpeedJob, doc: Document) -> Iterator[Diagnostic]:
    """The script and its arguments as pdsh's remote shell would not pass them on: an error,
    since no user value may become shell source (a `$VAR` meant for that shell is read from the
    env by the program instead; deepspeed passes the worker's env on).  The script is the first
    positional word, also when it is in otherArgs."""
    cfg = job.spec.config
    if cfg.custom_command is not None:
        return
    name, program = run_program(cfg)
    for path, arg, script in deepspeed_words(list(cfg.other_args), program, ("spec", "config", "run", name)):
        why = _script_changes(arg) if script else _pdsh_changes(arg)
        if why:
            yield doc.diagnostic(
                "FJ340", f"deepspeed runs {arg!r} through each node's shell: {why}", path,
                hint="name the script with plain characters (letters, digits, _@%+=:,./-)" if script else "use plain words, or pass the value in the worker's env and read it there",
            )


def flag_value(args: list[str], i: int) -> tuple[str | None, int]:
    """The value of the flag at args[i] (`--f=v`, or `--f v`) and its index; None when it has none."""
    if "=" in args[i]:
        return args[i].split("=", 1)[1], i
    return (args[i + 1], i + 1) if i + 1 < len(args) else (None, i)


def _pasted(flag: str) -> str | None:
    """The flag whose value deepspeed pastes into the nodes' command that `flag` names, also
    abbreviated (argparse takes any unambiguous prefix)."""
    return next((f for f in PASTED_BY_PDSH if len(flag) > 3 and f.startswith(flag)), None)


def deepspeed_flags(job: DeepSpeedJob, doc: Document) -> Iterator[Diagnostic]:
    args = job.spec.config.other_args
    for i, arg in enumerate(args):
        why = DROPPED_BY_PDSH.get(_flag(arg)) or REMOVED_ELASTIC.get(_flag(arg))
        if why:
            yield doc.diagnostic("FJ341", f"{_flag(arg)} has no effect here: {why}", ("spec", "config", "otherArgs", i), severity=Severity.WARNING)
        if _long_flag(_flag(arg)) == "--launcher_args":
            yield doc.diagnostic(
                "FJ340", "deepspeed splits --launcher_args into pdsh's own arguments, before the command every node runs: they could change what pdsh runs, and where",
                ("spec", "config", "otherArgs", i), hint="remove it: flatjob sets up pdsh and ssh itself",
            )
            continue
        pasted = _pasted(_flag(arg)) if arg.startswith("--") else None
        if pasted is None:
            continue
        value, at = flag_value(args, i)
        if value is not None and (not PLAIN_WORD.fullmatch(value) or PDSH_FORMAT.search(value)):
            yield doc.diagnostic(
                "FJ340", f"deepspeed puts the value of {pasted} ({value!r}) unquoted into every node's command, whose shell would split or run it" + (f", and {PDSH_FORMATS}" if PDSH_FORMAT.search(value) else ""),
                ("spec", "config", "otherArgs", at), hint="use a plain word (letters, digits, _@%+=:,./-, no %h, %u, %n or %%)",
            )


# --- ColossalAIJob ---------------------------------------------------------------------------


def _torch(job: ColossalAIJob) -> tuple[PathT, list[str], PathT, list[str]]:
    """(script path, script, extra args path, extra args) in either shape."""
    s = job.spec
    if s.worker is not None:
        return ("spec", "worker", "command"), s.worker.command, ("spec", "worker", "torchArgs"), s.worker.torch_args
    tc = s.torch_config
    return ("spec", "torchConfig", "script"), tc.script if tc else [], ("spec", "torchConfig", "extraArgs"), tc.extra_args if tc else []


def colossalai_script(job: ColossalAIJob, doc: Document) -> Iterator[Diagnostic]:
    """The script (or `-m module`) as `colossalai run` checks it; it exits 0 when it refuses."""
    where, script, _, _ = _torch(job)
    if job.spec.worker is None and job.spec.torch_config is None:
        return
    module = script[:1] == ["-m"]
    target = script[1] if module and len(script) > 1 else (None if module else (script[0] if script else None))
    at = (*where, 1 if module else 0)
    if target is None:
        yield doc.diagnostic("FJ341", "no script to run: colossalai run would print an error and exit 0", where, key=not script)
    elif module and target.endswith(".py"):
        yield doc.diagnostic("FJ341", f"-m takes a module, not a file: colossalai run refuses {target!r} and exits 0", at, hint=f"did you mean {target.removesuffix('.py').replace('/', '.')!r}?")
    elif not module and not target.endswith(".py"):
        yield doc.diagnostic("FJ341", f"colossalai run only runs a .py file (or -m module); it refuses {target!r} and exits 0", at)
    elif not PLAIN_WORD.fullmatch(target):
        yield doc.diagnostic("FJ340", f"colossalai run puts {target!r} unquoted into each worker's command, whose shell would split or expand it", at, hint="rename the file to plain characters")


def colossalai_extra(job: ColossalAIJob, doc: Document) -> Iterator[Diagnostic]:
    """--extra_launch_args items: one `=` at most, and plain shell words (joined unquoted).
    (A comma cannot pass at all: FJ204, in rules.py.)"""
    _, _, where, extra = _torch(job)
    for item, i in extra_items(list(extra)):
        if "," in item:
            continue
        if item.count("=") > 1:
            yield doc.diagnostic(
                "FJ340", f"colossalai run splits --extra_launch_args item {item!r} at every '=' and fails", (*where, i),
                hint="it passes only key=value with a single '='",
            )
        elif not all(PLAIN_WORD.fullmatch(part) for part in item.split("=") if part):
            yield doc.diagnostic("FJ340", f"colossalai run puts {item!r} unquoted into each worker's command, whose shell would split or expand it", (*where, i))


def _launcher_env(job: ColossalAIJob) -> tuple[PathT, list[Any]]:
    """The launcher's env (old shape: spec.launcher.env; new: its container's) and its path."""
    s = job.spec
    if s.launcher is not None:
        return ("spec", "launcher", "env"), list(s.launcher.env)
    for g in groups(job):
        if g.type == "launcher" and g.template is not None:
            cs = containers_of(g.template)
            i = next((n for n, c in enumerate(cs) if c.get("name") == "launcher"), 0)
            if cs:
                env = cs[i].get("env")
                return (*g.template_path, "spec", "containers", i, "env"), env if isinstance(env, list) else []
    return (), []


def _worker_env_names(job: ColossalAIJob) -> set[str]:
    for g in groups(job):
        if g.type == "worker" and g.template is not None:
            idx = training_index(job.kind, g.template)
            env = containers_of(g.template)[idx].get("env") if idx is not None else None
            return {e.get("name") for e in env or [] if isinstance(e, dict)}
    return set()


def colossalai_launcher_env(job: ColossalAIJob, doc: Document) -> Iterator[Diagnostic]:
    """Launcher env values `colossalai run` cannot export in its unescaped double quotes."""
    where, env = _launcher_env(job)
    declared = _worker_env_names(job)
    for i, e in enumerate(env):
        value = e.get("value") if isinstance(e, dict) else None
        if isinstance(value, str) and e.get("name") not in declared and (IN_DOUBLE_QUOTES.search(value) or '"' in value):
            yield doc.diagnostic(
                "FJ340", f"colossalai run cannot export {e.get('name')}'s value to the workers (its quotes are not escaped); flatjob leaves it out",
                (*where, i, "value"), severity=Severity.WARNING, hint="set it on the worker template, whose own env reaches the training processes",
            )


# --- both: what a launcher pastes into every node's shell from its own container -----------

# A name every POSIX shell takes in `export NAME=...` as it is.
SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# What deepspeed exports to the nodes, names starting so (launcher/runner.py EXPORT_ENVS and
# every accelerator's export_envs); `colossalai run` exports every name.  The image picks the
# version: 0.19.8's, then what the releases before it add (0.10.0, the image of
# examples/deepspeed.yaml, to 0.18.x: NEBULA_EXPORT_ENVS of nebula/constants.py, MASTER_HOST and
# LOCAL_HOST among them), and the accelerators added after 0.19.8 (musa, xla).
DEEPSPEED_EXPORTS = (
    "MLFLOW", "PYTHON", "MV2", "UCX", "NCCL", "BKCL", "XPU", "XMLIR", "LD_LIBRARY", "PATH", "NEUWARE_HOME", "CNCL", "ASCEND", "HCCL", "BCCL", "BIREN", "SUPA",
    "DLTS_JOB_ID", "DLTS_NUM_WORKER", "NEBULA_PERSISTENT_STORAGE_PATH", "NEBULA_PERSISTENT_TIME_INTERVAL", "AML_RUN_ID", "AZUREML_RUN_TOKEN",
    "AZUREML_WORKSPACE_SCOPE", "AZUREML_EXPERIMENT_SCOPE", "AZUREML_RUN_HISTORY_SERVICE_ENDPOINT", "AZUREML_RUN_ID", "NEBULA_MEMORY_BUFFER_SIZE",
    "AZUREML_PARAMETER_ITPJOB_NAME", "FC_TASKROLE_NAME", "FC_TASK_INDEX", "MASTER_HOST", "LOCAL_HOST", "AZUREML_BLOB_ACCOUNT_NAME", "AZUREML_BLOB_ACCOUNT_KEY",
    "MUSA_HOME", "MCCL", "PJRT_DEVICE", "TPU_VISIBLE_CHIPS",
)
_PASTED = {
    "DeepSpeedJob": "deepspeed runs `cd {dir}; export NAME=...` unquoted on every node (through pdsh, which replaces %h, %u, %n and %% in it)",
    "ColossalAIJob": "colossalai run runs `cd {dir} && export NAME=\"...\"` unquoted on every node",
}
_FORMATS = {"DeepSpeedJob": PDSH_FORMAT, "ColossalAIJob": None}  # what the launcher itself rewrites


Launching = tuple[PathT, Any, PathT, list[Any]]  # workingDir's path and value, env's path and list


def _launching(job: Any) -> Launching | None:
    """The launcher's workingDir and env: DeepSpeed's worker-0 training container; ColossalAI's
    launcher (spec.launcher, a launcher replica's container, else T9k's default launcher, which
    takes the worker's workingDir and has no env of its own)."""
    by_type = {g.type: g for g in groups(job)}
    worker, launcher = by_type.get("worker"), by_type.get("launcher")
    if isinstance(job, DeepSpeedJob):
        return _own(job, worker, None)
    lc = job.spec.launcher
    if lc is not None:  # the older shape
        wd = (("spec", "launcher", "workingDir"), lc.working_dir) if lc.working_dir is not None else _workdir(job, worker)
        return (*wd, ("spec", "launcher", "env"), list(lc.env))
    if launcher is not None and launcher.template is not None:
        return _own(job, launcher, "launcher")
    return (*_workdir(job, worker), (), [])


def _own(job: Any, g: Any, name: str | None) -> Launching | None:
    found = _container(job, g, name)
    if found is None:
        return None
    path, c = found
    env = c.get("env")
    return (*path, "workingDir"), c.get("workingDir"), (*path, "env"), env if isinstance(env, list) else []


def _workdir(job: Any, worker: Any) -> tuple[PathT, Any]:
    found = _container(job, worker, "worker")
    return ((*found[0], "workingDir"), found[1].get("workingDir")) if found else ((), None)


def _container(job: Any, g: Any, name: str | None) -> tuple[PathT, dict[str, Any]] | None:
    """A group's container named `name` (else its training container, else the first)."""
    cs = containers_of(g.template) if g is not None else []
    if not cs:
        return None
    i = next((n for n, c in enumerate(cs) if c.get("name") == name), None) if name else None
    if i is None:
        i = training_index(job.kind, g.template) or 0
    return (*g.template_path, "spec", "containers", i), cs[i]


def launcher_shell(job: Any, doc: Document) -> Iterator[Diagnostic]:
    """The launcher's working directory and env names go into every node's shell unquoted: they
    must be plain words, or they would split the command, or run what they hold (`$(...)`)."""
    found = _launching(job)
    if found is None:
        return
    wd_path, wd, env_path, env = found
    how = _PASTED[job.kind]
    formats = _FORMATS[job.kind]
    if isinstance(wd, str) and (not PLAIN_WORD.fullmatch(wd) or (formats is not None and formats.search(wd))):
        yield doc.diagnostic(
            "FJ340", f"workingDir {wd!r}: {how.format(dir=wd)}, so the node's shell would split or run it, or land elsewhere", wd_path,
            hint="use a directory whose path holds only letters, digits and _@%+=:,./- (and for deepspeed no %h, %u, %n or %%)",
        )
    exported = (lambda n: n.startswith(DEEPSPEED_EXPORTS)) if job.kind == "DeepSpeedJob" else (lambda n: True)
    for i, e in enumerate(env):
        name = e.get("name") if isinstance(e, dict) else None
        if isinstance(name, str) and exported(name) and not SHELL_NAME.fullmatch(name):
            yield doc.diagnostic(
                "FJ340", f"env name {name!r}: {how.format(dir='...')}, so the node's shell would split or run it", (*env_path, i, "name"),
                hint="name it with letters, digits and _ (not starting with a digit)",
            )
    for i, e in enumerate(env_from if isinstance(env_from := _env_from(doc, env_path), list) else []):
        prefix = e.get("prefix") if isinstance(e, dict) else None
        if isinstance(prefix, str) and prefix and not SHELL_NAME.fullmatch(prefix) and (job.kind != "DeepSpeedJob" or prefix.startswith(DEEPSPEED_EXPORTS)):
            yield doc.diagnostic("FJ340", f"envFrom prefix {prefix!r}: {how.format(dir='...')}, so the node's shell would split or run the names it makes", (*env_path[:-1], "envFrom", i, "prefix"))


def _env_from(doc: Document, env_path: PathT) -> Any:
    """The envFrom list beside an env list in the document (None when there is none)."""
    value: Any = doc.data
    for part in (*env_path[:-1], "envFrom") if env_path else ():
        try:
            value = value[part]
        except (KeyError, IndexError, TypeError):
            return None
    return value if env_path else None


# --- both ------------------------------------------------------------------------------------


def _non_root(context: Any) -> tuple[str, str] | None:
    """(field, what it says) when a securityContext makes the container non-root."""
    if not isinstance(context, dict):
        return None
    user = context.get("runAsUser")
    if isinstance(user, int) and user != 0:
        return "runAsUser", f"runAsUser: {user}"
    if context.get("runAsNonRoot") is True:
        return "runAsNonRoot", "runAsNonRoot: true"
    return None


def runs_as_root(job: Any, doc: Document) -> Iterator[Diagnostic]:
    """Every pod of an SSH kind needs root: sshd (host keys in /etc/ssh, /run/sshd, port 22)
    and the key files, mounted 0600 and owned by root."""
    for g in groups(job):
        if g.template is None:
            continue
        spec = g.template.get("spec") if isinstance(g.template.get("spec"), dict) else {}
        idx = training_index(job.kind if g.type != "launcher" else "", g.template)
        containers = containers_of(g.template)
        container = containers[idx] if idx is not None and idx < len(containers) else {}
        own = container.get("securityContext") if isinstance(container, dict) else None
        found = _non_root(own)
        path: PathT = (*g.template_path, "spec", "containers", idx or 0, "securityContext")
        if found is None and not (isinstance(own, dict) and own.get("runAsUser") == 0):
            found, path = _non_root(spec.get("securityContext")), (*g.template_path, "spec", "securityContext")
        if found:
            yield doc.diagnostic(
                "FJ342", f"{found[1]}: {job.kind} pods must run as root, for flatjob's sshd and ssh keys", (*path, found[0]),
                hint="sshd makes host keys in /etc/ssh, needs /run/sshd and port 22; the keys are 0600 files owned by root",
            )


# What a pod of an SSH kind runs instead of its training container's command (T9k does the same:
# UM colossalaijob.md "执行副本的训练容器的 command 字段不再生效"), and where the program goes instead.
_SSH_RUNS = {
    ("DeepSpeedJob", "worker"): ("sshd (worker-0: deepspeed, which reaches the others over ssh)", "the program is spec.config.run"),
    ("ColossalAIJob", "worker"): ("sshd, which colossalai run reaches over ssh", "the program is the launcher's script"),
    ("ColossalAIJob", "launcher"): ("colossalai run", "the program is the launcher's script"),
}


def ssh_commands(job: Any, doc: Document) -> Iterator[Diagnostic]:
    """A command or args on the container flatjob runs sshd or the launcher in: never run."""
    for g in groups(job):
        runs = _SSH_RUNS.get((job.kind, g.type))
        if runs is None or g.template is None:
            continue
        containers = containers_of(g.template)
        idx = launch_index(job.kind, g.type, g.template)
        if idx is None or idx >= len(containers):
            continue
        for field in ("command", "args"):
            if containers[idx].get(field):
                yield doc.diagnostic(
                    "FJ343", f"this container runs {runs[0]}, so its {field} {'is' if field == 'command' else 'are'} never run (as in T9k)",
                    (*g.template_path, "spec", "containers", idx, field), key=True, severity=Severity.WARNING,
                    hint=f"{runs[1]}; put setup in an init container",
                )


# What is lost when a resumeSpec replaces what an SSH kind's pod runs (the same PodTemplate
# chooses at start: render/pod.py _resume_wrapper); the sshd startup probe stays on the pod.
_LOST_ON_RESUME = {
    "worker": "sshd never starts, so its startup probe on port 22 fails until the kubelet kills the pod (600 s), and no launcher reaches it",
    "launcher": "colossalai run never starts, so no worker trains",
}


def ssh_resume_commands(job: Any, doc: Document) -> Iterator[Diagnostic]:
    """A resumeSpec's command or args on a pod that runs sshd or the launcher: on resume they
    run instead of it, and the pod's sshd probe and its peers still expect it."""
    for i, entry in enumerate(resume_entries(job.spec.run_mode)):
        runs = _SSH_RUNS.get((job.kind, entry.type))
        field = "command" if entry.command is not None else "args" if entry.args is not None else None
        if runs is None or field is None:
            continue
        yield doc.diagnostic(
            "FJ347", f"on resume, {entry.type} pods run {'this command' if field == 'command' else 'these args'} instead of {runs[0]}: {_LOST_ON_RESUME[entry.type]}",
            ("spec", "runMode", "pause", "resumeSpecs", i, field), key=True, severity=Severity.WARNING,
            hint=f"leave command and args out of this resumeSpec, so the pod resumes as it starts; {runs[1]}",
        )


DEEPSPEED_RULES = (deepspeed_program, deepspeed_flags, runs_as_root, launcher_shell, ssh_commands, ssh_resume_commands)
TEMPLATE_RULES = (colossalai_launcher_env, launcher_shell)  # it takes the templates' env to be well-formed (rules.TEMPLATE_RULES)
COLOSSALAI_RULES = (colossalai_script, colossalai_extra, colossalai_launcher_env, runs_as_root, launcher_shell, ssh_commands, ssh_resume_commands)
