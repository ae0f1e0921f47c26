"""Ctrl-C is exit 130 whenever it comes (compiler/cli guarded), so scripts can tell "stopped"
from "failed".

Covers: a KeyboardInterrupt inside any command (click's standalone mode turned one into
"Aborted!" and exit 1); `flatjob run-local` interrupted at instants from its imports to its
run (before issue 21, Ctrl-C in its first ~0.25 s said the job failed: exit 1); every console
script interrupted during its imports, at a chosen import (deterministic) and at instants
(before, Ctrl-C in the first ~0.2 s of `flatjob compile`, `flatjob-cmp` or `flatjob-ci` ended
in a KeyboardInterrupt traceback).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest

from flatjob.compiler.cli import guarded

SLEEPER = """\
apiVersion: batch.tensorstack.dev/v1beta1
kind: GenericJob
metadata: {name: sleeper}
spec:
  replicaSpecs:
    - type: worker
      replicas: 1
      template:
        spec:
          containers:
            - {name: main, image: busybox, command: [sleep, "30"]}
"""


def test_an_interrupt_inside_a_command_is_130(capsys: pytest.CaptureFixture[str]) -> None:
    @click.command()
    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as exc:
        guarded(interrupted, [], "flatjob")
    assert exc.value.code == 130 and "Aborted" not in capsys.readouterr().err


# The console script, saying on stderr that flatjob's first module is in: the delays count from
# there, so a busy machine still interrupts flatjob's own imports and run, not the interpreter's
# start-up (a SIGINT inside `site` is Python's "Fatal Python error", exit 1) or the ~0.5 ms the
# wrapper pip writes takes to import compiler/console.py (measured in its docstring).
UP = b"interpreter up\n"


@pytest.mark.slow  # a signal at a real instant: on a busy machine next to xdist workers one case once exited otherwise (unexplained); serial in .ci/run
@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15, 0.25, 0.4, 1.0])
def test_run_local_stopped_at_any_instant_is_130(tmp_path: Path, delay: float) -> None:
    pytest.importorskip("kubernetes")
    (tmp_path / "job.yaml").write_text(SLEEPER)
    proc = subprocess.Popen(
        [sys.executable, str(script(tmp_path, "flatjob", up=True)), "run-local", "job.yaml"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None and proc.stderr.readline() == UP
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    # -SIGINT: Python's default handler was not yet installed (the shell shows 130 too)
    assert proc.returncode in (130, -signal.SIGINT), (proc.returncode, err.decode()[-2000:])
    assert b"Aborted" not in err


ROOT = Path(__file__).resolve().parents[1]

# What pip writes for each [project.scripts] entry (distlib's script template), so the test runs
# the chain a user's Ctrl-C meets: the wrapper's own imports, then the module it names.
PIP_WRAPPER = """\
import re
import sys
from {module} import {attr}
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit({attr}())
"""

# Prepended to the wrapper: SIGINT is sent to the process at the moment `module` starts to be
# imported (a finder asked first), so "Ctrl-C during the import of X" happens every time.
RING_AT = """\
import os, signal, sys

class _Ring:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == {at!r}:
            sys.meta_path.remove(_Ring)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, _Ring)
"""


def console_scripts() -> dict[str, str]:
    if sys.version_info < (3, 11):
        pytest.skip("tomllib needs Python 3.11")
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


def script(tmp_path: Path, name: str, ring_at: str | None = None, up: bool = False) -> Path:
    """pip's wrapper for console script `name`; `up`: it writes UP once the module it names is in."""
    module, _, attr = console_scripts()[name].partition(":")
    path = tmp_path / "bin" / name
    path.parent.mkdir(exist_ok=True)
    text = PIP_WRAPPER.format(module=module, attr=attr)
    if up:
        text = text.replace(
            "\nif __name__", f"\nsys.stderr.buffer.write({UP!r}); sys.stderr.flush()\nif __name__"
        )
    path.write_text((RING_AT.format(at=ring_at) if ring_at else "") + text)
    return path


def stopped(proc: subprocess.CompletedProcess[bytes] | subprocess.Popen[bytes], err: bytes) -> bool:
    """Exit 130 and the one line (after the newline click writes to end the terminal's ^C)."""
    return proc.returncode == 130 and err.strip() == b"interrupted"


# (script, arguments, the import during which Ctrl-C comes): the CLI's first heavy imports, a
# command's own lazy imports, and run-local's kubernetes client (the runtime's imports).
INTERRUPTED_IMPORTS = [
    ("flatjob", ["compile", "job.yaml", "-o", "out"], "flatjob.compiler.cli"),
    ("flatjob", ["compile", "job.yaml", "-o", "out"], "click"),
    ("flatjob", ["compile", "job.yaml", "-o", "out"], "yaml"),
    ("flatjob", ["compile", "job.yaml", "-o", "out"], "flatjob.compiler.pipeline"),
    ("flatjob", ["lint", "job.yaml"], "flatjob.compiler.lint"),
    ("flatjob", ["run-local", "job.yaml"], "flatjob.runtime.cli"),
    ("flatjob", ["run-local", "job.yaml"], "kubernetes"),
    ("flatjob-cmp", [], "flatjob.compiler.cmp"),
    ("flatjob-cmp", [], "flatjob.compiler.pipeline"),
    ("flatjob-ci", ["--jobs", "job.yaml"], "flatjob.compiler.ci"),
    ("flatjob-ci", ["--jobs", "job.yaml"], "click"),
]


@pytest.mark.parametrize(("name", "args", "at"), INTERRUPTED_IMPORTS)
def test_a_console_script_interrupted_while_importing_is_130(
    tmp_path: Path, name: str, args: list[str], at: str
) -> None:
    if at == "kubernetes":
        pytest.importorskip("kubernetes")
    (tmp_path / "job.yaml").write_text(SLEEPER)
    env = {**os.environ, "ARGOCD_APP_NAME": "app", "ARGOCD_APP_NAMESPACE": "team"}
    done = subprocess.run(
        [sys.executable, str(script(tmp_path, name, at)), *args],
        cwd=tmp_path,
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert stopped(done, done.stderr), (done.returncode, done.stderr.decode()[-2000:])
    assert not (tmp_path / "out").exists()  # compile stopped before writing anything


@pytest.mark.slow  # signals at real instants, so a busy machine hits a different import each run
@pytest.mark.parametrize("name", ["flatjob", "flatjob-cmp", "flatjob-ci"])
def test_a_console_script_stopped_at_any_instant_is_130(tmp_path: Path, name: str) -> None:
    """Ctrl-C at instants from flatjob's first module on: 130 and one line, or a finished run."""
    (tmp_path / "job.yaml").write_text(SLEEPER)
    path = script(tmp_path, name, up=True)
    args = {
        "flatjob": ["compile", "job.yaml", "-o", "out"],
        "flatjob-cmp": [],
        "flatjob-ci": ["--jobs", "job.yaml"],
    }[name]
    env = {**os.environ, "ARGOCD_APP_NAME": "app", "ARGOCD_APP_NAMESPACE": "team"}
    for delay in (0.0, 0.001, 0.005, 0.01, 0.03, 0.06, 0.1, 0.15, 0.2, 0.3):
        proc = subprocess.Popen(
            [sys.executable, str(path), *args],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        assert proc.stderr is not None and proc.stderr.readline() == UP
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        finished = (
            proc.returncode in (0, 1) and b"interrupted" not in err
        )  # done before the signal came
        assert (stopped(proc, err) or finished) and b"Traceback" not in err, (
            delay,
            proc.returncode,
            err.decode()[-2000:],
        )


class _Frame:
    """A stand-in for a stack frame: its code and its caller."""

    def __init__(self, code: object, back: _Frame | None = None) -> None:
        self.f_code, self.f_back = code, back


def test_a_ctrl_c_inside_a_c_extensions_init_is_deferred_and_never_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    """orjson 3.13's init segfaulted on a KeyboardInterrupt raised inside it (CI: exit -11 at a
    Ctrl-C 0.06 s into flatjob-cmp): one that comes there, or in the import system's own code,
    is sent again later, and a command that ends first still ends 130."""
    handler = signal.getsignal(signal.SIGINT)  # importing console installs the scripts' handler: not for this process
    from flatjob.compiler import console

    signal.signal(signal.SIGINT, handler)
    again: list[object] = []
    monkeypatch.setattr(console._thread, "start_new_thread", lambda fn, args: again.append(fn))
    monkeypatch.setattr(console, "_deferred", False)
    for init in console._INITS:
        console._interrupt(signal.SIGINT, _Frame(_Frame.__init__.__code__, _Frame(init, _Frame(test_interrupt_code))))  # type: ignore[arg-type]
        assert console._deferred and again.pop() is console._again
    importlib_code = compile("pass", "<frozen importlib._bootstrap>", "exec")  # the import system's own code, innermost
    console._interrupt(signal.SIGINT, _Frame(importlib_code, _Frame(test_interrupt_code)))  # type: ignore[arg-type]
    assert console._deferred and again.pop() is console._again
    with pytest.raises(KeyboardInterrupt):  # a module's own code under an import unwinds cleanly: at once
        console._interrupt(signal.SIGINT, _Frame(test_interrupt_code, _Frame(importlib_code)))  # type: ignore[arg-type]
    with pytest.raises(KeyboardInterrupt):  # anywhere else: at once
        console._interrupt(signal.SIGINT, _Frame(test_interrupt_code, _Frame(console._run.__code__)))
    assert not console._deferred and not again


test_interrupt_code = test_a_ctrl_c_inside_a_c_extensions_init_is_deferred_and_never_lost.__code__


def test_a_ctrl_c_python_could_only_print_is_sent_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A KeyboardInterrupt raised in a __del__ or a weakref callback (importlib's module-lock
    one: "Exception ignored in: <function _get_module_lock.<locals>.cb>") was printed and lost,
    the command running on to exit 0; the command's unraisable hook sends it again."""
    import types

    handler = signal.getsignal(signal.SIGINT)
    from flatjob.compiler import console

    signal.signal(signal.SIGINT, handler)
    again: list[object] = []
    printed: list[object] = []
    monkeypatch.setattr(console._thread, "start_new_thread", lambda fn, args: again.append(fn))
    monkeypatch.setattr(console, "_deferred", False)
    hook = console._unraisable(printed.append)
    hook(types.SimpleNamespace(exc_value=KeyboardInterrupt()))
    assert console._deferred and again == [console._again] and not printed
    other = types.SimpleNamespace(exc_value=ValueError("a bug in a __del__"))
    hook(other)
    assert printed == [other] and again == [console._again]


def test_a_command_that_ends_before_its_deferred_ctrl_c_came_back_ends_130(tmp_path: Path) -> None:
    """The deferred Ctrl-C is not lost when the command ends first: `_run` ends it 130."""
    (tmp_path / "m.py").write_text("import flatjob.compiler.console as c\ndef main():\n    c._deferred = True\n")
    done = subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.insert(0, '.'); from flatjob.compiler import console; console._run('m', 'main')"],
        cwd=tmp_path, capture_output=True, timeout=60,
    )
    assert (done.returncode, done.stderr) == (130, b"interrupted\n")


def test_an_exception_a_ctrl_c_caused_is_a_ctrl_c(capsys: pytest.CaptureFixture[str]) -> None:
    """Python 3.11 wraps a KeyboardInterrupt raised in a class's __set_name__ (a dataclass
    defined by a lazy import) as RuntimeError: the bench saw 'internal error', exit 3."""
    from flatjob.compiler import cmp
    from flatjob.compiler.cli import guarded
    from flatjob.compiler.interrupts import by_ctrl_c

    def wrapped() -> None:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise RuntimeError("Error calling __set_name__ on 'Field' instance 'jobs' in 'Loaded'") from exc

    with pytest.raises(RuntimeError) as caught:
        wrapped()
    assert by_ctrl_c(caught.value) and by_ctrl_c(KeyboardInterrupt()) and not by_ctrl_c(RuntimeError("a bug"))

    @click.command()
    def command() -> None:
        wrapped()

    with pytest.raises(SystemExit) as stop:
        guarded(command, [], "flatjob")
    assert stop.value.code == 130 and capsys.readouterr().err == "interrupted\n"
    with pytest.MonkeyPatch.context() as mp, pytest.raises(KeyboardInterrupt):  # the console script's _run ends it 130
        mp.setattr(cmp, "generate", lambda env: wrapped())
        cmp.main([])
