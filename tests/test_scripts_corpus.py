"""Every valid DeepSpeedJob and ColossalAIJob of the real T9k corpus, launched against stubs.

tests/test_compile_corpus.py already compiles every corpus file, validates every object
strictly and greps for private keys; this adds what only running shows: each job's launch.sh
runs under /bin/sh (dash) to its launcher, which receives the user's program and arguments
exactly as the spec lists them (ColossalAI: after `--`, quoted for the workers' shell, since
`colossalai run` joins them unquoted), and the hostfile parses by the launcher's own rule.
The specs are used as written, except spec.ssh.sshdPath, pointed at the stub sshd.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import corpus_absent, corpus_files, corpus_params
from scriptkit import LOADER, Scripts, compile_job, stub_bin
from test_compile_corpus import BROKEN

KINDS = {"deepspeedjob": "deepspeed", "colossalaijob": "colossalai"}
FILES = [f for f in corpus_files("t9k") if f.name.split("--")[0] in KINDS and f.name not in BROKEN]
DEEPSPEED_LINE = re.compile(r"^(\S+)\s+slots=(\d+)")


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return stub_bin(tmp_path_factory.mktemp("bin"))


def program(job: dict[str, Any]) -> list[str]:
    """The user's program and its arguments as the launcher receives them, from the spec."""
    spec = job["spec"]
    if job["kind"] == "DeepSpeedJob":
        run = spec["config"].get("run") or {}
        return next((run[k] for k in ("python", "module", "exec") if k in run), [])
    script = spec["worker"]["command"] if "worker" in spec else spec["torchConfig"]["script"]
    n = 2 if script[:1] == ["-m"] else 1
    return [*script[:n], "--", *(shlex.quote(a) for a in script[n:])]


def test_corpus_has_both_kinds() -> None:
    if not corpus_files("t9k"):
        pytest.skip(corpus_absent())
    kinds = {f.name.split("--")[0] for f in FILES}
    assert kinds == set(KINDS) and len(FILES) >= 30


@pytest.mark.parametrize("path", corpus_params(FILES), ids=lambda p: p.stem if p else "corpus-absent")
def test_corpus_launch_runs_the_users_program(tmp_path: Path, bin_dir: Path, path: Path) -> None:
    (job,) = [d for d in yaml.load_all(path.read_text(encoding="utf-8"), LOADER) if d]
    job["spec"].setdefault("ssh", {})["sshdPath"] = str(bin_dir / "sshd")
    data = compile_job(job).data
    hosts = data["hostfile"].splitlines()
    if job["kind"] == "DeepSpeedJob":
        assert all(DEEPSPEED_LINE.match(h) for h in hosts)
        hosts = [h.split()[0] for h in hosts]
    assert hosts and len(set(hosts)) == len(hosts)
    s = Scripts(tmp_path, data, bin_dir)
    run = s.run()
    assert run.code == 0, run.stderr
    launcher = KINDS[path.name.split("--")[0]]
    (call,) = run.of(launcher)
    expected = program(job)
    assert call.argv[len(call.argv) - len(expected) :] == expected
    if job["spec"].get("config", {}).get("customCommand") is None:
        assert any(a.startswith("--hostfile=") for a in call.argv)
