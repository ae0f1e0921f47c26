"""The job's ConfigMap files (hostfile, launch scripts) in a temp folder, with mount paths mapped.

A cluster mounts ConfigMap <job>-config at /flatjob (and the hostfile at /t9k/hostfile);
here the files are written to a folder, the generated scripts find it through FLATJOB_DIR
and FLATJOB_HOSTFILE, and command-line arguments under a mount path are rewritten to it.
Other volumes (PVCs, emptyDir, Secrets) are not mounted: paths reach the local filesystem.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any


def materialise(files: Mapping[str, str], folder: Path) -> None:
    """Write every ConfigMap file into `folder` (mode 0755, like the rendered defaultMode)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        path.chmod(0o755)


def path_env(files: Mapping[str, str], folder: Path) -> dict[str, str]:
    """FLATJOB_DIR and FLATJOB_HOSTFILE pointing at the folder, when the job has files."""
    if not files:
        return {}
    env = {"FLATJOB_DIR": str(folder)}
    if "hostfile" in files:
        env["FLATJOB_HOSTFILE"] = str(folder / "hostfile")
    return env


def config_mounts(pod: Mapping[str, Any], container: Mapping[str, Any], configmap: str, folder: Path) -> dict[str, str]:
    """mountPath -> local path, for the container's mounts of the job's ConfigMap."""
    volumes = {v.get("name"): v for v in (pod.get("spec") or {}).get("volumes") or []}
    out: dict[str, str] = {}
    for m in container.get("volumeMounts") or []:
        source = (volumes.get(m.get("name")) or {}).get("configMap") or {}
        if source.get("name") == configmap:
            out[m["mountPath"].rstrip("/")] = str(folder / m["subPath"]) if m.get("subPath") else str(folder)
    return out


def map_paths(argv: list[str], mounts: Mapping[str, str]) -> list[str]:
    """Arguments that name a file under a mapped mount path, pointed at the local copy."""
    out = []
    for arg in argv:
        for mount, local in sorted(mounts.items(), key=lambda kv: -len(kv[0])):
            if arg == mount or arg.startswith(mount + "/"):
                arg = local + arg[len(mount):]
                break
        out.append(arg)
    return out

