"""The Argo CD plugin and the CI check run inside a repository's checkout: the repository's
files must never become flatjob's code.

`python -m` puts the working directory first on sys.path, so a `yaml.py` (or a `flatjob/`
package) committed next to the jobs ran inside the repo-server sidecar, which serves every
Application (review 21, round 3).  plugin.yaml and action.yml now run console scripts, which
never put the working directory on sys.path, and the image sets PYTHONSAFEPATH as well.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from .kit import Sandbox, run, script

ROOT = Path(__file__).resolve().parents[2]
# Modules flatjob imports at start-up, and flatjob itself, each shadowed by a file that leaves a mark.
SHADOWS = ("yaml.py", "orjson.py", "click.py", "pydantic.py", "flatjob/__init__.py", "flatjob/compiler/__init__.py", "flatjob/compiler/cmp.py", "flatjob/compiler/ci.py")


def _shadowed(box: Sandbox) -> Path:
    mark = box.tmp / "PWNED"
    for name in SHADOWS:
        path = box.repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"open({str(mark)!r}, 'a').write({name!r} + '\\n')\nraise SystemExit(0)\n")
    return mark


def test_the_plugin_runs_flatjob_not_the_repositorys_modules(tmp_path: Path) -> None:
    box = Sandbox(tmp_path)
    box.job()
    mark = _shadowed(box)
    command = yaml.safe_load((ROOT / "overlays" / "argocd" / "plugin.yaml").read_text())["spec"]["generate"]["command"]
    assert command == ["flatjob-cmp"]
    done = run([script(command[0])], box.repo, env={"ARGOCD_APP_NAMESPACE": "training", "ARGOCD_ENV_SOURCES": "jobs"})
    assert not mark.exists(), mark.read_text()
    assert done.code == 0 and "kind: PodTemplate" in done.stdout, done.stderr
    # What the plugin ran before: the repository's yaml.py
    run([sys.executable, "-m", "flatjob.compiler.cmp"], box.repo, env={"ARGOCD_APP_NAMESPACE": "training"})
    assert mark.exists()


def test_the_ci_check_runs_flatjob_not_the_repositorys_modules(tmp_path: Path) -> None:
    box = Sandbox(tmp_path)
    box.job()
    mark = _shadowed(box)
    action = (ROOT / "action.yml").read_text()
    assert "flatjob-ci " in action and "python -m flatjob" not in action
    assert 'cd "$RUNNER_TEMP" && python -m pip install' in action  # pip, too, runs outside the checkout
    done = run([script("flatjob-ci"), "--jobs", "jobs", "--rendered", "rendered"], box.repo)
    assert not mark.exists(), mark.read_text()
    assert done.code in (0, 1) and "internal error" not in done.output, done.output


def test_the_image_never_imports_from_the_working_directory() -> None:
    assert "ENV PYTHONSAFEPATH=1" in (ROOT / "Dockerfile").read_text()
