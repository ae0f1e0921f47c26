"""Generated hostile YAML through lint, compile, krm, the Argo CD plugin and run-local's checks: never a crash.

Hypothesis writes job files from anchors and aliases (bombs of any fan-out and depth),
`<<` merges, tags on scalars and collections, deep nesting, control characters and
arbitrary text; a capped worker (tests/hostile/fuzzworker.py: 1 GiB, 20 CPU seconds per
input) runs every entry point on each.  Each must end in exit 0, 1 or 2 with no
traceback and no "internal error"; exit 3, a signal or a memory error fails the example.
FLATJOB_FUZZ_EXAMPLES sets the number of examples (60 in CI, FLATJOB_EXAMPLES=all; 15 in
the quick run: tests/propertykit.py).

The second test feeds job-shaped input (tests/hostile/jobfuzz.py: every example job and
random overlays, with values replaced by strangers') through lint, compile with --overlay,
krm, the plugin with OVERLAY and run-local with --overlay, up to the moment it would start a
process (tests/hostile/localchecks.py; its jobs half the time carry numbers where run-local
reads them, where `²` and 4 400 digits ended it in exit 3, issue 21): the YAML fuzzing rarely reaches the checks of a job, which is
where `env: 1` and a mapping as an env name crashed (FLATJOB_SHAPED_EXAMPLES, 80 in CI, 20 in the
quick run; thousands run by hand find nothing).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from propertykit import examples

from .jobfuzz import cases
from .kit import _limits, child_env

WORKER = Path(__file__).with_name("fuzzworker.py")
HEADER = "apiVersion: batch.tensorstack.dev/v1beta1\nkind: PyTorchTrainingJob\nmetadata:\n  name: fuzz\n"
CONTROL = st.sampled_from(["\x00", "\x01", "\x07", "\x1b", "\x7f", "\x85", "\u2028", "\ufeff", "\t", "\r", "\x1b[31m", "\ud800"])
WORDS = st.sampled_from(["worker", "python", "true", "0x1F", "1e400", "~", "<<", "=", "-", "'", '"', "{", "]", ": ", "#", "%", "@", "`", "9" * 5000, "é", "日本"])
TAGS = st.sampled_from(["!!str", "!!int", "!!map", "!!seq", "!!set", "!!omap", "!!binary", "!!bool", "!custom", "!", "!!merge", "!<tag:yaml.org,2002:str>"])


class Names:
    """Anchor names drawn so far in one document (aliases may name them, or not)."""

    def __init__(self) -> None:
        self.anchors: list[str] = []


@st.composite
def scalar(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 4))
    if kind == 0:
        return draw(WORDS)
    if kind == 1:
        return json.dumps(draw(st.text(max_size=12)))  # a double-quoted scalar, escapes and all
    if kind == 2:
        return "'" + draw(st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)).replace("'", "''") + "'"
    if kind == 3:
        return draw(CONTROL) + draw(WORDS)
    return str(draw(st.integers(-(2**70), 2**70)))


def flow(draw: st.DrawFn, names: Names, depth: int) -> str:
    """A flow node: a scalar, an alias, a tagged or anchored node, a list or a mapping."""
    choice = draw(st.integers(0, 9 if depth < 6 else 2))
    if choice <= 1:
        text = draw(scalar())
    elif choice == 2:
        text = "*" + (draw(st.sampled_from(names.anchors)) if names.anchors and draw(st.booleans()) else "nowhere")
    elif choice <= 5:
        items = [flow(draw, names, depth + 1) for _ in range(draw(st.integers(0, 4)))]
        text = "[" + ", ".join(items) + "]"
    else:
        pairs = []
        for _ in range(draw(st.integers(0, 4))):
            key = "<<" if draw(st.integers(0, 3)) == 0 else draw(st.sampled_from(["spec", "replicas", "a", "b", "<<", "? [x]", '"k"']))
            pairs.append(f"{key}: {flow(draw, names, depth + 1)}")
        text = "{" + ", ".join(pairs) + "}"
    if draw(st.integers(0, 5)) == 0:
        text = f"{draw(TAGS)} {text}"
    if draw(st.integers(0, 4)) == 0:
        name = f"a{len(names.anchors)}"
        names.anchors.append(name)
        text = f"&{name} {text}"
    return text


@st.composite
def bomb(draw: st.DrawFn) -> str:
    """Aliases (or merges) of aliases: fan-out**levels nodes from a few hundred bytes."""
    fan, levels, merge = draw(st.integers(2, 12)), draw(st.integers(1, 12)), draw(st.booleans())
    lines = ["b0: &b0 {k: v, l: [1, 2, 3]}" if merge else "b0: &b0 [x, y, z]"]
    for i in range(1, levels + 1):
        refs = ", ".join([f"*b{i - 1}"] * fan)
        lines.append(f"b{i}: &b{i} {{<<: [{refs}], c{i}: [{refs}]}}" if merge else f"b{i}: &b{i} [{refs}]")
    return "\n".join(lines) + "\n"


@st.composite
def documents(draw: st.DrawFn) -> tuple[str, str]:
    """(job file text, krm stdin): a job whose spec is hostile, and more, with optional garbage."""
    names = Names()
    kind = draw(st.integers(0, 4))
    if kind == 0:
        body = "spec: " + flow(draw, names, 0) + "\n"
    elif kind == 1:
        body = "spec:\n  replicaSpecs:\n    - type: worker\n      template: " + flow(draw, names, 2) + "\n"
    elif kind == 2:
        body = draw(bomb())
    elif kind == 3:
        depth = draw(st.sampled_from([50, 99, 100, 101, 500, 5000, 100_000]))
        body = "spec: " + "[" * depth + "]" * depth + "\n"
    else:
        body = draw(st.text(max_size=200))
    text = HEADER + body
    if draw(st.booleans()):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(CONTROL) + text[at:]
    if draw(st.integers(0, 5)) == 0:
        text += "---\n" + draw(bomb())
    spec = flow(draw, Names(), 0)
    krm = draw(st.sampled_from([
        text,
        "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: [{apiVersion: batch.tensorstack.dev/v1beta1, kind: PyTorchTrainingJob, metadata: {name: fuzz}, spec: " + spec + "}]\n",
        "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: " + spec + "\nfunctionConfig: " + flow(draw, Names(), 0) + "\n",
    ]))
    return text, krm


class Worker:
    """The capped child that runs the entry points; restarted when it dies."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None

    def ask(self, text: str, krm: str, overlay: str | None = None) -> dict[str, Any]:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen([sys.executable, str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(), preexec_fn=lambda: _limits(cpu=3600))
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"text": text, "krm": krm, "overlay": overlay}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait(timeout=30)
            err = self.proc.stderr.read()[-3000:] if self.proc.stderr else ""
            self.proc = None
            pytest.fail(f"the worker died (exit {code}, a negative number is a signal) on this input:\n{err}")
        return json.loads(line)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr) if self.proc is not None else ():
            if stream is not None:
                stream.close()


@pytest.fixture
def worker() -> Iterator[Worker]:
    """One worker for all of a test's examples (stopped before the leak check of tests/conftest.py)."""
    w = Worker()
    yield w
    w.close()


@settings(max_examples=int(os.environ.get("FLATJOB_FUZZ_EXAMPLES", examples(60))), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(doc=documents())
def test_every_entry_point_ends_in_0_1_or_2(worker: Worker, doc: tuple[str, str]) -> None:
    text, krm = doc
    for name, result in worker.ask(text, krm).items():
        assert result["code"] in (0, 1, 2), f"{name} exited {result['code']}:\n{result['output']}"
        assert "Traceback" not in result["output"] and "internal error" not in result["output"], f"{name}:\n{result['output']}"


@settings(max_examples=int(os.environ.get("FLATJOB_SHAPED_EXAMPLES", examples(80))), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_job_shaped_input_never_exits_3(worker: Worker, case: tuple[str, str, str | None]) -> None:
    text, krm, overlay = case
    for name, result in worker.ask(text, krm, overlay).items():
        assert result["code"] in (0, 1, 2), f"{name} exited {result['code']}:\n{result['output']}"
        assert "Traceback" not in result["output"] and "internal error" not in result["output"], f"{name}:\n{result['output']}"
