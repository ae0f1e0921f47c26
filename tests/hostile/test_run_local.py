"""`flatjob run-local` on numbers lint passes: a diagnostic (exit 2) or a run, never exit 3.

Before issue 21 (hx7's D1-D4) each of these ended run-local in an internal error: a
resourceFieldRef over a limit of 4 300 digits or more (`1e5000`), a MASTER_PORT of `²`
(str.isdigit takes it, int() does not) or of 4 400 digits, `--master_port=<4 400 digits>` in
the args; also `--replicas-scale worker=²`.  Every number run-local reads from a job is
now ASCII digits within a bound (runtime/local/numbers.py): a resource value a kubelet
cannot compute (an int64) is refused naming the variable and `--env`, and a value that is
no port binds nothing, so the job runs as it would in a cluster (checked up to the moment
run-local would start processes: tests/hostile/localchecks.py; a capped child cannot start
the local cluster's threads).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .kit import Sandbox, assert_clean_exit
from .localchecks import checks_only

LONG = "9" * 4400
JOB = """\
apiVersion: batch.tensorstack.dev/v1beta1
kind: GenericJob
metadata:
  name: {name}
spec:
  replicaSpecs:
    - type: worker
      replicas: 1
      template:
        spec:
          containers:
            - name: c
              image: busybox
              command: [sh, -c, 'echo ran', x, '{arg}']
              resources:
                limits: {{memory: "{memory}", cpu: "{cpu}"}}
              env:
                - {{name: MASTER_PORT, value: "{port}"}}
{env}"""
FIELD = "                - {{name: {name}, valueFrom: {{resourceFieldRef: {{resource: {resource}{divisor}}}}}}}\n"


def _job(name: str, *, arg: str = "x", memory: str = "1Gi", cpu: str = "1", port: str = "29500", env: str = "") -> str:
    return JOB.format(name=name, arg=arg, memory=memory, cpu=cpu, port=port, env=env)


def _field(resource: str, divisor: str = "") -> str:
    return FIELD.format(name="V", resource=resource, divisor=f", divisor: {divisor}" if divisor else "")


REFUSED = {
    "memory-1e5000": _job("m", memory="1e5000", env=_field("limits.memory")),
    "memory-1e999999": _job("m", memory="1e999999", env=_field("requests.memory")),
    "cpu-beyond-int64-millicores": _job("c", cpu="1e16", env=_field("limits.cpu", "1m")),
}
RUN = {
    "port-superscript": _job("sup", port="²"),
    "port-arabic-indic": _job("ar", port="٣٠٠٠"),
    "port-4400-digits": _job("longport", port=LONG),
    "port-zero": _job("zero", port="0"),
    "arg-port-4400-digits": _job("argport", arg="--master_port=" + LONG),
    "arg-rdzv-port-4400-digits": _job("rdzv", arg="--rdzv_endpoint=h:" + LONG),
    "memory-at-int64": _job("edge", memory="9223372036854775807", env=_field("limits.memory")),
}


@pytest.mark.parametrize("text", REFUSED.values(), ids=REFUSED.keys())
def test_a_resource_value_no_kubelet_computes_is_refused_by_name(box: Sandbox, text: str) -> None:
    box.job(text=text)
    assert_clean_exit(box.flatjob("lint", "jobs"), 0)  # the API server takes these quantities
    r = box.flatjob("run-local", "jobs")
    assert_clean_exit(r, 2)
    assert "cannot resolve V (" in r.stderr and "int64" in r.stderr and "pass --env V=VALUE" in r.stderr, r.stderr


@pytest.mark.parametrize("text", RUN.values(), ids=RUN.keys())
def test_a_number_that_is_no_port_runs_as_in_a_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> None:
    from flatjob.compiler.cli import main

    (tmp_path / "job.yaml").write_text(text, encoding="utf-8")
    with checks_only(), pytest.raises(SystemExit) as done:
        main(["run-local", str(tmp_path / "job.yaml")])
    output = capsys.readouterr()
    assert done.value.code == 0, output.err


@pytest.mark.parametrize("scale", ["worker=²", "worker=" + LONG, "worker=2147483648", "worker=-1"])
def test_a_replica_count_on_the_command_line_is_ascii_digits_within_int32(box: Sandbox, scale: str) -> None:
    box.job(text=_job("scaled"))
    r = box.flatjob("run-local", "jobs", "--replicas-scale", scale)
    assert_clean_exit(r, 2)
    assert "expected TYPE=N with N from 0 to 2147483647" in r.stderr and len(r.stderr) < 400, r.stderr
