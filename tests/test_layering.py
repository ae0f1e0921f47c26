"""Layering rules of DESIGN §2, checked on the source and on a real process.

- compiler/ never imports runtime/ or kubernetes (kubernetes costs 0.75 s to import);
- only runtime/kube.py imports kubernetes (and the simulated API server, for test clients);
- the runtime's own modules never import the simulated cluster (runtime/sim) or run-local;
- what the decisions read (runtime/model.py, runtime/observe.py) never imports the decisions;
- compiler/jobtypes never imports pydantic, and linting or compiling valid specs never loads
  it (pydantic is ~100 ms of start-up; it is loaded only to explain a spec that is wrong);
- schemas/ holds data only.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import: resolve against the file's package
                pkg = ".".join(path.relative_to(ROOT).with_suffix("").parts[: -node.level])
                base = f"{pkg}.{base}" if base else pkg
            out.add(base)
    return out


def _modules(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("path", _modules("compiler"), ids=lambda p: str(p.relative_to(ROOT)))
def test_compiler_never_imports_runtime_or_kubernetes(path: Path) -> None:
    bad = {m for m in _imports(path) if m.split(".")[0] in ("kubernetes", "runtime") or m.startswith("flatjob.runtime")}
    assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


# runtime/sim/server.py is the test bed's HTTP server: it imports the client only inside
# FakeApiServer.api_client(), for tests that want a configured ApiClient.
KUBERNETES_USERS = {"runtime/kube.py", "runtime/sim/server.py"}


@pytest.mark.parametrize("path", _modules("runtime"), ids=lambda p: str(p.relative_to(ROOT)))
def test_only_runtime_kube_imports_kubernetes(path: Path) -> None:
    uses = any(m.split(".")[0] == "kubernetes" for m in _imports(path))
    assert uses == (path.relative_to(ROOT).as_posix() in KUBERNETES_USERS), path


# What runs in a cluster (runtime/*.py, runtime/decisions) never imports what only simulates
# one (runtime/sim) or runs a job on one machine (runtime/local); the simulation never
# imports run-local either, which builds on it.
SIMULATION = ("runtime.sim", "flatjob.runtime.sim", "runtime.local", "flatjob.runtime.local")


def _in_cluster(path: Path) -> bool:
    return path.relative_to(ROOT / "runtime").parts[0] not in ("sim", "local")


@pytest.mark.parametrize("path", [p for p in _modules("runtime") if _in_cluster(p) and p.name != "cli.py"], ids=lambda p: str(p.relative_to(ROOT)))
def test_the_runtime_never_imports_the_simulated_cluster(path: Path) -> None:
    bad = {m for m in _imports(path) if m.startswith(SIMULATION)}
    assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


@pytest.mark.parametrize("path", _modules("runtime/sim"), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_simulated_cluster_never_imports_run_local(path: Path) -> None:
    bad = {m for m in _imports(path) if m.startswith(("runtime.local", "flatjob.runtime.local"))}
    assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


# The decisions read the model and what observe made of the pods; neither reads the decisions
# (observe once took CLOCK_SLACK from decisions.outcomes: shared constants live in model.py).
@pytest.mark.parametrize("name", ["model.py", "observe.py"])
def test_what_the_decisions_read_never_imports_the_decisions(name: str) -> None:
    bad = {m for m in _imports(ROOT / "runtime" / name) if m.startswith(("runtime.decisions", "flatjob.runtime.decisions"))}
    assert not bad, f"runtime/{name} imports {sorted(bad)}"


# The runtime never plans or renders pods: it creates them from the PodTemplates git holds
# (docs/architecture.md §4).  run-local (runtime/local) compiles the job it runs, so it may.
PLANNING = ("flatjob.compiler.plan", "flatjob.compiler.render", "flatjob.compiler.pipeline")


@pytest.mark.parametrize("path", [p for p in _modules("runtime") if p.parent.name != "local"], ids=lambda p: str(p.relative_to(ROOT)))
def test_the_runtime_never_imports_the_planner_or_renderers(path: Path) -> None:
    bad = {m for m in _imports(path) if m.startswith(PLANNING)}
    assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_the_runtime_process_never_loads_the_planner_or_renderers() -> None:
    code = "import sys, flatjob.runtime.cli, flatjob.runtime.controller, flatjob.runtime.kube; print(sorted(m for m in sys.modules if m.startswith(" + repr(PLANNING) + ")))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_fake_server_imports_kubernetes_only_when_asked_for_a_client() -> None:
    code = "import sys, flatjob.runtime.sim.server; print(sorted(m for m in sys.modules if m.split('.')[0] == 'kubernetes'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_schemas_is_data_only() -> None:
    assert not list((ROOT / "schemas").rglob("*.py"))


@pytest.mark.parametrize("path", _modules("compiler/jobtypes"), ids=lambda p: str(p.relative_to(ROOT)))
def test_jobtypes_never_import_pydantic(path: Path) -> None:
    bad = {m for m in _imports(path) if m.split(".")[0] in ("pydantic", "pydantic_core") or ".models" in m}
    assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_lint_and_compile_of_valid_specs_do_not_load_kubernetes_the_runtime_or_pydantic(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from flatjob.compiler.cli import main\n"
        f"for args in (['lint', {str(ROOT / 'examples')!r}], ['compile', {str(ROOT / 'examples')!r}, '-o', {str(tmp_path / 'out')!r}]):\n"
        "    try:\n"
        "        main(args)\n"
        "    except SystemExit as exc:\n"
        "        assert exc.code in (0, None), exc.code\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('kubernetes', 'pydantic') or m.startswith('flatjob.runtime'))\n"
        "print(loaded)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
