"""Golden output of the example environments: examples/ compiled with overlays/examples/{dev,prod}.

Covers: each environment renders to exactly tests/overlay_golden/<env>/ (what the recommended
`flatjob compile jobs/ --overlay overlays/<env> -o rendered/<env>` layout commits); the CLI
writes the same bytes into a per-environment folder and `--check` then finds it up to date;
the two environments differ only where their overlays say.

Run `pytest tests/test_overlay_golden.py --update-golden` to rewrite, then review the diff.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from goldenkit import check_golden, read_tree

from flatjob.compiler.cli import cli
from flatjob.compiler.overlay import load_overlays
from flatjob.compiler.pipeline import compile_paths

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
OVERLAYS = ROOT / "overlays" / "examples"
GOLDEN = Path(__file__).resolve().parent / "overlay_golden"
ENVS = ("dev", "prod")


def rendered(env: str, out: Path) -> dict[str, str]:
    result = compile_paths([str(EXAMPLES)], overlay=load_overlays([OVERLAYS / env]))
    assert not result.failed, [d.message for d in result.diagnostics]
    assert [d for d in result.diagnostics if not d.is_error] == []
    return result.tree(out)


@pytest.mark.parametrize("env", ENVS)
def test_environment_golden(env: str, update_golden: bool) -> None:
    check_golden(GOLDEN / env, rendered(env, GOLDEN / env), update_golden, "run pytest tests/test_overlay_golden.py --update-golden and review")


def test_cli_renders_each_environment_into_its_folder(tmp_path: Path) -> None:
    runner = CliRunner()
    for env in ENVS:
        out = tmp_path / "rendered" / env
        args = ["compile", str(EXAMPLES), "--overlay", str(OVERLAYS / env), "-o", str(out)]
        assert runner.invoke(cli, args).exit_code == 0
        assert read_tree(out) == rendered(env, out)
        assert runner.invoke(cli, [*args, "--check"]).exit_code == 0


def _job(env: str, name: str) -> dict:
    text = (GOLDEN / env / f"training-{env}" / name / "job.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def test_environments_differ_where_their_overlays_say() -> None:
    dev, prod = _job("dev", "mnist-ddp"), _job("prod", "mnist-ddp")
    workers = {e: next(r for r in j["spec"]["replicaSpecs"] if r["type"] == "worker") for e, j in (("dev", dev), ("prod", prod))}
    assert (workers["dev"]["replicas"], workers["prod"]["replicas"]) == (1, 7)
    assert dev["metadata"]["labels"]["env"] == "dev" and prod["metadata"]["labels"]["env"] == "prod"
    assert prod["metadata"]["annotations"]["example.com/cost-center"] == "ml-platform"
    master = next(r for r in prod["spec"]["replicaSpecs"] if r["type"] == "master")
    assert [e["name"] for e in master["template"]["spec"]["containers"][0].get("env", [])] == []  # one container only
    assert master["template"]["spec"]["containers"][0]["image"].endswith(":2.4.1-cuda12.4-cudnn9-runtime")
    assert _job("prod", "gpt-neox")["spec"]["runPolicy"]["backoffLimit"] == 3
