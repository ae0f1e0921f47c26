"""run-local for the SSH-launched kinds (DeepSpeedJob, ColossalAIJob): a real sshd in every pod.

The pods run the rendered scripts unchanged; what a cluster gives an SSH pod is made here:

| in a cluster | here |
|---|---|
| the key Secret, projected at ssh.authMountPath | the Secret as the API server holds it (the runtime created it, runtime/sshkeys.py), laid out as the kubelet lays out a projected volume: a 1777 folder, a timestamped folder holding each item at its mode, `..data` and one symlink per item (kubernetes#61049); sshd's StrictModes refuses it exactly as in a cluster |
| the image's /etc/ssh | FLATJOB_SSH_ROOT: `ssh-keygen -A` finds the run's host keys under the pod's folder; FLATJOB_SSHD_CONFIG: the pod's own sshd_config, which only places sshd (ListenAddress, HostKey, PidFile): every other option is the rendered command line's |
| port 22 on the pod's IP | port 22 on the pod's loopback address (so run-local needs root) |
| ~/.ssh for ssh clients | OpenSSH reads the passwd home, not $HOME: an `ssh` first on the pod's PATH runs the real one with `-F`/`-i` of the pod's `~/.ssh` (FLATJOB_SSH_HOME, the pod's home folder, where the scripts link keys mounted elsewhere); fabric (paramiko) reads $HOME, the pod's folder unless the job's env sets another, whose `.ssh` is the mount (or, with another ssh.authMountPath, where the launch script links the keys) |
| /run/flatjob-pod-env, /tmp/flatjob-hostfile, /tmp | FLATJOB_POD_ENV, FLATJOB_RUN_HOSTFILE, TMPDIR in the pod's folder |

Processes behind ssh sessions carry their pod's FLATJOB_LOCAL_MARK (session.sh loads the
container's environment), so they are stopped with their pod like any other of its processes.
Pods of concurrent runs need port 22 on distinct addresses: each SSH job claims a block of
loopback addresses (127.0.B.x) under a lock file, past its run's other jobs' blocks, and
checks the port is free.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import fcntl
import importlib.util
import os
import pwd
import shlex
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from flatjob.compiler.errors import RUNTIME_INSTALL
from flatjob.compiler.plan import colossalai as colossalai_plan
from flatjob.compiler.plan import scripts
from flatjob.compiler.podtemplate import containers_of

from .addresses import MAX_BLOCK, span
from .containers import Options, PodExtra, working_dir
from .environment import declared_env, pod_facts
from .errors import LocalError, Unsupported

SSH_KINDS = frozenset({"DeepSpeedJob", "ColossalAIJob"})
# Programs each kind's pods run, found on PATH (sshd is the job's ssh.sshdPath).
TOOLS = {
    "DeepSpeedJob": ("ssh", "ssh-keygen", "pdsh", "deepspeed"),
    "ColossalAIJob": ("ssh", "ssh-keygen", "colossalai"),
}
INSTALL = "see docs/run-local.md, 'DeepSpeedJob and ColossalAIJob', for the packages"
HOST_KEY_TYPES = ("rsa", "ecdsa", "ed25519")
LOCK_DIR = "/tmp"  # machine-wide, whatever TMPDIR says: port 22 is machine-wide too


# --- addresses ----------------------------------------------------------------------------


def block_addresses(block: int, count: int) -> list[str]:
    """The loopback addresses of `count` pods in a block (the compiler's local_address)."""
    from flatjob.compiler.plan.common import local_address

    return [local_address(i, block) for i in range(count)]


def _port_free(ip: str, port: int) -> bool:
    """Whether nothing listens on ip:port (a port only root may bind counts as free here:
    the preflight says root is needed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((ip, port))
        except OSError as exc:
            return exc.errno in (errno.EACCES, errno.EPERM)
    return True


def _this_host() -> set[str]:
    """Addresses this machine's own name resolves to (Debian maps it to 127.0.1.1): a pod
    there would be taken by `colossalai run` for the launcher itself and run without ssh."""
    with contextlib.suppress(OSError):
        return set(socket.gethostbyname_ex(socket.gethostname())[2])
    return set()


def _lock_file(path: Path) -> IO[str] | None:
    """The lock file, opened without following a link and only when it is a regular file of
    this user's: in a shared /tmp anyone may plant a link there, and root's run-local would
    create or open what it names (review of round 14).  None: not usable, try the next block."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:  # a link (ELOOP), or not ours to open
        return None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
        os.close(fd)
        return None
    return os.fdopen(fd, "a", encoding="utf-8")


def claim_block(count: int, skip: Collection[int] = (), port: int = scripts.SSH_PORT, lock_dir: str | None = None) -> tuple[int, IO[str]]:
    """The first block whose `count` addresses are this run's: no block of them is in `skip`
    (other jobs of the run), its lock file is free (held until the run ends) and `port` is
    free on every address.  Returns (block, lock)."""
    own = _this_host()
    folder = Path(lock_dir or LOCK_DIR)
    for block in range(1, MAX_BLOCK + 1):
        addresses = block_addresses(block, count)
        if own & set(addresses) or any(block + i in skip for i in span(count)):
            continue
        lock = _lock_file(folder / f"flatjob-run-local-127.0.{block}.lock")
        if lock is None:
            continue
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            continue
        if all(_port_free(ip, port) for ip in addresses):
            return block, lock
        lock.close()
    raise Unsupported(f"no block of {count} loopback addresses has port {port} free (127.0.1.x to 127.0.{MAX_BLOCK}.x)")


# --- what must be here ----------------------------------------------------------------------


def preflight(kind: str, sshd_path: str, environ: Mapping[str, str]) -> list[str]:
    """Why this machine cannot run the job's pods (empty when it can)."""
    problems = []
    if os.geteuid() != 0:
        problems.append(
            f"{kind} needs root here: every pod runs sshd on port 22 of its loopback address, and a "
            "root sshd needs /run/sshd (run with sudo, keeping your Python environment on PATH)"
        )
    if not os.access(sshd_path, os.X_OK):
        problems.append(f"sshd is not at {sshd_path} (spec.ssh.sshdPath): install openssh-server; {INSTALL}")
    path = environ.get("PATH", "")
    missing = [t for t in TOOLS[kind] if shutil.which(t, path=path) is None]
    if missing:
        problems.append(f"{', '.join(missing)} not found on PATH: {INSTALL}")
    if importlib.util.find_spec("cryptography") is None:
        problems.append(f"the runtime makes the job's SSH key pair with the cryptography package: {RUNTIME_INSTALL}")
    return problems


# What a HOME the job's env or --env sets is here, as the home check sees it (most telling first).
HOME_STATES = {
    "own": "your own home",
    "user": "the ssh folder of a user of this machine",
    "replaced": "its {names} would be replaced",
    "not-a-folder": "not a folder",
    "full": "in a folder that holds files of its own",
    "empty": "in an empty folder",
    "missing": "not there yet: the pods would create it",
    "earlier": "holding only an earlier run's links",
}
# The states a HOME you pass with --env may be in: links made there touch nothing of yours.
GIVEN_HOMES = frozenset({"empty", "missing", "earlier"})


def home_refused(state: str, given: bool) -> bool:
    """Whether run-local refuses to have the pods link keys into a HOME's .ssh on this machine
    (outside the run's own folders): always, unless you passed that HOME with --env (`given`)
    and it is an empty folder, not there yet, or holds only an earlier run's links.  A HOME
    only the job's env sets is refused whatever it holds: the job's author named it for a
    container, not for this machine (HOME=/etc made /etc/.ssh here)."""
    return not (given and state in GIVEN_HOMES)


def _home_state(here: str, own: Collection[str], users: Collection[str], runs: str) -> tuple[str, str]:
    """(the HOME_STATES key of the folder `here`, what its message says)."""
    dot = os.path.join(here, ".ssh")

    def earlier(path: str) -> bool:  # a link an earlier run's pod made, into run-local's temp folders
        return os.path.islink(path) and os.readlink(path).startswith(runs)

    theirs = [f for f in scripts.LINKED_KEYS if os.path.lexists(os.path.join(dot, f)) and not earlier(os.path.join(dot, f))]
    real = os.path.realpath(dot)
    if os.path.realpath(here) in own:
        return "own", HOME_STATES["own"]
    if real in users:
        return "user", HOME_STATES["user"] + ("" if real == os.path.normpath(dot) else f", {real}")
    if theirs:
        return "replaced", HOME_STATES["replaced"].format(names=", ".join(theirs))
    if not os.path.lexists(here):
        return "missing", HOME_STATES["missing"]
    if not os.path.isdir(here):  # a file, or a link to nothing
        return "not-a-folder", HOME_STATES["not-a-folder"]
    entries = os.listdir(here)  # the folder a link leads to: the pods write there
    if not entries:
        return "empty", HOME_STATES["empty"]
    if entries == [".ssh"] and os.path.isdir(dot) and not os.path.islink(dot) and all(earlier(os.path.join(dot, f)) for f in os.listdir(dot)):
        return "earlier", HOME_STATES["earlier"]
    return "full", HOME_STATES["full"]


def home_problems(manifests: Iterable[Mapping[str, Any]], training: Mapping[str, str | None], options: Options, mount_path: str) -> list[str]:
    """Why a pod's script would write outside the run's own folders.  With ssh.authMountPath
    elsewhere than ~/.ssh, each SSH pod's script links the key pair and client config into
    $HOME/.ssh, creating it (scripts.client_keys, `mkdir -p`, `rm -f`, `ln -s`).  run-local gives
    every pod a home of its own, but a HOME the job's env or --env sets is this machine's
    folder: HOME=/root created this machine's /root/.ssh and would have replaced a key of the
    user's by a link into the run's temp folder (review hx33), HOME=/etc made /etc/.ssh.  So
    such a HOME is refused before anything starts (home_refused) unless you passed it with
    --env and it is an empty folder, not there yet, or holds only an earlier run's links."""
    if not scripts.client_keys(mount_path):
        return []
    own = {os.path.realpath(h) for h in (pwd.getpwuid(os.geteuid()).pw_dir, options.base_env.get("HOME")) if h}
    # A HOME of its own whose .ssh is a link to a user's (~/.ssh -> /root/.ssh) reaches that user's files too.
    users = {os.path.realpath(os.path.join(h, ".ssh")) for h in {*own, *(e.pw_dir for e in pwd.getpwall())} if h}
    runs = os.path.join(tempfile.gettempdir(), "flatjob-")  # the runner's folders (runner.py mkdtemp)
    given = "HOME" in options.env
    source = "--env" if given else "the job's env"
    problems: list[str] = []
    for m in manifests:
        name = m["metadata"]["name"]
        containers = (m.get("spec") or {}).get("containers") or []
        c = next((c for c in containers if c.get("name") == training.get(name)), containers[0] if containers else None)
        if c is None:
            continue
        facts = pod_facts(m, "preflight", "127.0.0.1", m["metadata"].get("annotations") or {}, "localhost")
        home = declared_env(c, facts, options.env, skip_env_from=options.skip_env_from)[0].get("HOME")
        if not home:
            continue
        # A relative HOME is the container's working folder's: this machine's (run-local's own when the workingDir is not here).
        here = os.path.normpath(os.path.join(working_dir(c, options), home))  # an absolute HOME as it is
        state, what = _home_state(here, own, users, runs)
        if home_refused(state, given):
            problems.append(
                f"{name}/{c.get('name')}: HOME={home} ({source}): the pod's script links the job's SSH key "
                f"and client config (ssh.authMountPath {mount_path}) into $HOME/.ssh, which here is this machine's "
                f"{os.path.join(here, '.ssh')} ({what}); run-local makes those links outside its own folders only in a HOME "
                "you pass with --env that is an empty folder or not there yet: pass --env HOME=<an empty folder>"
                + ("" if given else ", or an --overlay that removes HOME")
            )
    return problems


def launcher_home_problem(plan: Any) -> str | None:
    """Why a ColossalAIJob's launcher cannot log in here: a worker template that sets HOME has
    launch.sh unset HOME on the launcher (colossalai.launcher_unsets), so fabric reads the
    passwd entry's home.  In a cluster that is /root, whose .ssh is the key mount (or holds the
    links to it); here it is this machine's own, which run-local never writes: fabric would try
    your own keys and config against the pods' sshd and fail ("No authentication methods
    available").  Python reads the passwd home from the passwd database, which no variable of
    the launcher's can point elsewhere, and a HOME on the launcher reaches the workers over
    their own: refused before anything starts, naming the overlay that runs it."""
    if plan.kind != "ColossalAIJob":
        return None
    workers = [p for p in plan.pods if p.type == "worker"]
    if "HOME" not in colossalai_plan.launcher_unsets(colossalai_plan.worker_env_names(workers)):
        return None
    container = containers_of(workers[0].template)[workers[0].container]["name"]
    patch = (f"{{target: {{kind: ColossalAIJob, name: {plan.name}}}, patch: {{spec: {{replicaSpecs: [{{type: worker, template: {{spec: "
             f"{{containers: [{{name: {container}, env: [{{name: HOME, $patch: delete}}]}}]}}}}}}]}}}}}}")
    return (
        f"{plan.name}: the worker template sets HOME, so launch.sh unsets HOME on the launcher (colossalai run would export it "
        "over the workers' own) and fabric reads the passwd entry's home, here this machine's "
        f"{os.path.join(pwd.getpwuid(os.geteuid()).pw_dir, '.ssh')}, which run-local never gives the job's key (in a cluster "
        f"/root/.ssh holds it): the launch would fail; run it here with an --overlay that removes that HOME, patches: [{patch}]"
    )


# --- the kubelet's projected-volume layout --------------------------------------------------


def project(target: Path, items: Iterable[tuple[str, bytes, int]], now: float | None = None) -> None:
    """Write files as the kubelet's atomic writer does for a Secret or projected volume.

    `target` (mode 1777, kubernetes#61049) holds `..<timestamp>/` with each (path, data, mode),
    `..data` -> that folder, and `<path>` -> `..data/<path>` for every top-level entry.
    """
    stamp = time.strftime("..%Y_%m_%d_%H_%M_%S", time.gmtime(now)) + f".{os.getpid()}"
    target.mkdir(parents=True, exist_ok=True)
    target.chmod(0o1777)
    data_dir = target / stamp
    data_dir.mkdir(mode=0o755)
    data_dir.chmod(0o755)
    tops = []
    for rel, data, mode in items:
        path = data_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(mode)
        tops.append(rel.split("/", 1)[0])
    (target / "..data").symlink_to(stamp)
    for top in dict.fromkeys(tops):
        (target / top).symlink_to(f"..data/{top}")


def projected_items(volume: Mapping[str, Any], secret: Mapping[str, bytes], configmap: Mapping[str, str]) -> list[tuple[str, bytes, int]]:
    """(path, data, mode) of a projected volume's items, from the Secret's (decoded) and the
    ConfigMap's data."""
    default = int((volume.get("projected") or {}).get("defaultMode", 0o644))
    out = []
    for source in (volume.get("projected") or {}).get("sources") or []:
        for item in (source.get("secret") or {}).get("items") or []:
            out.append((item["path"], secret[item["key"]], int(item.get("mode", default))))
        for item in (source.get("configMap") or {}).get("items") or []:
            out.append((item["path"], configmap[item["key"]].encode(), int(item.get("mode", default))))
    return out


def secret_data(secret: Mapping[str, Any]) -> dict[str, bytes]:
    """A Secret's data as the kubelet writes it into a volume (base64 decoded)."""
    return {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}


def _mount(manifest: Mapping[str, Any], mount_path: str) -> Mapping[str, Any] | None:
    """The projected volume a container of the pod mounts at `mount_path`."""
    spec = manifest.get("spec") or {}
    volumes = {v.get("name"): v for v in spec.get("volumes") or []}
    for c in spec.get("containers") or []:
        for m in c.get("volumeMounts") or []:
            if m.get("mountPath", "").rstrip("/") == mount_path.rstrip("/") and "projected" in volumes.get(m.get("name"), {}):
                return volumes[m["name"]]
    return None


# --- one run ----------------------------------------------------------------------------------


@dataclass
class SshRun:
    """The run's host keys, and the folders of its pods."""

    folder: Path
    configmap: Mapping[str, str]  # the job's ConfigMap data
    mount_path: str  # ssh.authMountPath
    base_path: str  # the machine's PATH (where the real ssh is found)
    keygen: subprocess.Popen[bytes] | None = None  # `ssh-keygen -A`, until the first pod needs its keys

    def pod(self, pod: str, uid: str, manifest: Mapping[str, Any], address: str, secret: Mapping[str, bytes]) -> PodExtra:
        """Make one pod incarnation's folder, its key mount from `secret` (the Secret's data);
        what its processes get for it.  Its sshd is found by the folder in its command line
        (sshd overwrites its environment for its title)."""
        self._host_keys()
        root = self.folder / f"{pod}-{uid}"
        return PodExtra(self._pod_env(root, manifest, address, secret), (f"{root}/",))

    def _host_keys(self) -> None:
        """Wait for the host keys (LocalError when ssh-keygen failed)."""
        if self.keygen is None:
            return
        keygen, self.keygen = self.keygen, None
        _, err = keygen.communicate()
        if keygen.returncode != 0:
            raise LocalError(f"ssh-keygen -A failed (exit {keygen.returncode}): {err.decode(errors='replace').strip()}")

    def close(self) -> None:
        """Stop ssh-keygen if it still runs (the run ended before any pod started)."""
        if self.keygen is not None and self.keygen.poll() is None:
            self.keygen.kill()
        if self.keygen is not None:
            self.keygen.wait()

    def _pod_env(self, root: Path, manifest: Mapping[str, Any], address: str, secret: Mapping[str, bytes]) -> dict[str, str]:
        mount = root / "ssh"
        volume = _mount(manifest, self.mount_path)
        if volume is not None:
            project(mount, projected_items(volume, secret, self.configmap))
        etc = root / "etc" / "ssh"
        etc.mkdir(parents=True)
        tmp = root / "tmp"  # the pod's own /tmp
        tmp.mkdir()
        for f in (self.folder / "host" / "etc" / "ssh").iterdir():
            shutil.copy2(f, etc / f.name)
        config = root / "sshd_config"
        config.write_text(
            "# flatjob run-local: where this pod's sshd listens and its host keys; every other\n"
            "# option is on the rendered command line (sshd.sh).\n"
            f"ListenAddress {address}\n"
            + "".join(f"HostKey {etc}/ssh_host_{t}_key\n" for t in HOST_KEY_TYPES)
            + "PidFile none\n",
            encoding="utf-8",
        )
        env = {
            "FLATJOB_SSH_DIR": str(mount),
            "FLATJOB_SSH_ROOT": str(root),
            "FLATJOB_SSHD_CONFIG": str(config),
            "FLATJOB_POD_ENV": str(root / "env"),
            "FLATJOB_RUN_HOSTFILE": str(root / "run-hostfile"),
            "TMPDIR": str(tmp),
        }
        if volume is not None:
            env.update(self._clients(root, mount, self.mount_path.rstrip("/") == os.path.join(pwd.getpwuid(os.getuid()).pw_dir, ".ssh")))
        return env

    def _clients(self, root: Path, mount: Path, at_home: bool) -> dict[str, str]:
        """ssh clients find the keys in the pod's own ~/.ssh: the mount itself where the job
        mounts its keys there (`at_home`), else an empty home, where the launch script links
        them (scripts.client_keys), as in a cluster, and never into this machine's ~/.ssh."""
        home = root / "home"
        home.mkdir()
        if at_home:
            (home / ".ssh").symlink_to(mount)
        dot_ssh = home / ".ssh"
        real = shutil.which("ssh", path=self.base_path) or "/usr/bin/ssh"
        bin_dir = root / "bin"
        bin_dir.mkdir()
        shim = bin_dir / "ssh"
        shim.write_text(
            "#!/bin/sh\n"
            "# flatjob run-local: the pod's ssh client config and key, mounted at ~/.ssh in a cluster\n"
            "# (OpenSSH reads the passwd entry's home, not $HOME).\n"
            f"exec {shlex.quote(real)} -F {shlex.quote(str(dot_ssh / 'config'))} -i {shlex.quote(str(dot_ssh / 'id_ed25519'))} \"$@\"\n",
            encoding="utf-8",
        )
        shim.chmod(0o755)
        # FLATJOB_SSH_HOME: the home the launch script links the keys into for OpenSSH (in a
        # cluster the passwd entry's), whatever HOME the job's env sets (issue 20).
        return {"HOME": str(home), "FLATJOB_SSH_HOME": str(home), "PATH": f"{bin_dir}{os.pathsep}{self.base_path}"}


def prepare(folder: Path, configmap: Mapping[str, str], mount_path: str, base_path: str) -> SshRun:
    """One set of host keys for the run's pods (each pod's sshd gets a copy).  `ssh-keygen -A`
    (an RSA key: ~0.6 s of CPU) runs in the background while the cluster starts."""
    host = folder / "host" / "etc" / "ssh"
    host.mkdir(parents=True)
    keygen = subprocess.Popen(["ssh-keygen", "-A", "-f", str(folder / "host")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={"PATH": base_path})
    return SshRun(folder, configmap, mount_path, base_path, keygen)
