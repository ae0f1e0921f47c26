"""What deepspeed and `colossalai run` cannot carry (compiler/validate/launchers.py, FJ340-FJ343, FJ347).

Each case is one job; findings are drawn in the YAML (`# ^ CODE`, lintkit.marked), and
`valid-*` cases must stay clean.  Why each launcher mangles what it does is in the module's
docstring and docs/diagnostics.md; tests/e2e/ runs the same launchers for real.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lintkit import Case, case_ids, check_case, deepspeed


def colossalai(torch_config: str, rest: str = "") -> str:
    """A new-shape ColossalAIJob; `torch_config` (indented, markers included) starts on line
    6, `rest` replaces the worker container's closing line (for env, securityContext)."""
    return f"""
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: ColossalAIJob
        metadata: {{name: job}}
        spec:
          torchConfig:
{torch_config}
          replicaSpecs:
            - type: launcher
              template: {{spec: {{containers: [{{name: launcher, image: c}}]}}}}
            - type: worker
              replicas: 2
              template:
                spec:
                  containers:
                    - name: worker
                      image: c
{rest}
        """


CASES = [
    # --- deepspeed: script arguments through pdsh's remote shell (errors: no value becomes shell source) ---
    Case(
        "deepspeed-dollar-in-a-spaced-argument",
        deepspeed("""
          config:
            run: {python: [train.py, "--name=a $HOME"]}
        #                            ^ FJ340
        """),
        message="'$' would act inside the double quotes deepspeed puts around it",
    ),
    Case(
        "deepspeed-unquoted-shell-characters",
        deepspeed("""
          config:
            run: {python: [train.py, "it's", "*.txt", ""]}
        #                            ^ FJ340
        #                                    ^ FJ340
        #                                             ^ FJ340
        """),
        message="it goes to the shell unquoted",
    ),
    Case(
        # multinode_runner.py get_cmd pastes user_script raw: a space does not quote it (review 21, round 4)
        "deepspeed-script-with-a-space-is-pasted-raw",
        deepspeed("""
          config:
            run: {python: ["train.py; touch /tmp/x #", "a b"]}
        #                  ^ FJ340
        """),
        message="deepspeed puts the script unquoted into the command, whose shell would split, expand or run it",
        hint="name the script with plain characters (letters, digits, _@%+=:,./-)",
    ),
    Case(
        "deepspeed-module-and-exec-scripts-are-pasted-raw",
        deepspeed("""
          config:
            run: {module: ["m; id #"]}
        #                  ^ FJ340
        """),
        message="deepspeed puts the script unquoted",
    ),
    Case(
        # argparse takes the first positional word as user_script; the program's words become its arguments
        "deepspeed-positional-other-arg-is-the-script",
        deepspeed("""
          config:
            run: {python: [train.py]}
            otherArgs: [--master_port, "29501", "evil.py;id", --num_gpus=1]
        #                                       ^ FJ340
        """),
        message="'evil.py;id' through each node's shell: deepspeed puts the script unquoted",
    ),
    Case(
        "deepspeed-launcher-args-reach-pdsh",
        deepspeed("""
          config:
            run: {python: [train.py]}
            otherArgs: [--launcher_args, "-R exec", --launcher_a=x]
        #               ^ FJ340
        #                                           ^ FJ340
        """),
        message="deepspeed splits --launcher_args into pdsh's own arguments",
        hint="remove it: flatjob sets up pdsh and ssh itself",
    ),
    Case(
        "valid-deepspeed-flag-values-are-not-the-script",
        deepspeed("""
          config:
            run: {python: [train.py, "a b"]}
            otherArgs: [--master_port, "29501", -i, "worker-0:0,1", --log_level=info]
        """),
    ),
    Case(
        "valid-deepspeed-plain-and-spaced-arguments",
        deepspeed("""
          config:
            run: {python: [train.py, --data_path, "/data/enwik8 text", --lr=0.1, "say \\"hi\\" there"]}
        """),
    ),
    Case(
        "valid-deepspeed-custom-command-is-the-users",
        deepspeed("""
          config:
            customCommand: deepspeed train.py --x '$HOME'
        """),
    ),
    # --- deepspeed: flags it ignores or removed (warnings) ---
    Case(
        "deepspeed-bind-cores-dropped-by-pdsh",
        deepspeed("""
          config:
            run: {python: [train.py]}
            otherArgs: [--bind_cores_to_rank, --bind_core_list=0-3]
        #               ^ FJ341
        #                                     ^ FJ341
        """),
        message="deepspeed's pdsh runner does not pass it to the nodes",
    ),
    Case(
        "deepspeed-elastic-flags-removed",
        deepspeed("""
          config:
            run: {python: [train.py]}
            otherArgs: [--elastic_training, --min_elastic_nodes=1]
        #               ^ FJ341
        #                                   ^ FJ341
        """),
        message="deepspeed 0.19.8 removed it",
    ),
    # --- deepspeed: a launcher other than pdsh; a container command that never runs ---
    Case(
        "deepspeed-launcher-other-than-pdsh",
        deepspeed("""
          config:
            run: {python: [train.py]}
            otherArgs: [--launcher=openmpi]
        #               ^ FJ311
        """),
        message="--launcher openmpi in otherArgs: DeepSpeedJob runs deepspeed's pdsh launcher only (T9k)",
        hint="remove it: pdsh is the default",
    ),
    Case(
        "valid-deepspeed-launcher-pdsh",
        deepspeed("""
          config:
            run: {python: [train.py]}
            otherArgs: [--launcher, PDSH]
        """),
    ),
    Case(
        # T9k runs sshd there too (UM colossalaijob.md): "the training container's command no longer takes effect"
        "deepspeed-worker-command-never-runs",
        deepspeed(container="command: [bash, -c, 'pip install x && python train.py']"),
        also=((14, 13, "FJ343"),),
        message="this container runs sshd (worker-0: deepspeed, which reaches the others over ssh), so its command is never run (as in T9k)",
        hint="the program is spec.config.run; put setup in an init container",
    ),
    Case(
        "colossalai-worker-args-never-run",
        colossalai("            script: [train.py]", "                      args: [train.py]"),
        also=((17, 15, "FJ343"),),
        message="this container runs sshd, which colossalai run reaches over ssh, so its args are never run (as in T9k)",
    ),
    # --- colossalai: the script, extra args, the launcher's env ---
    Case(
        "colossalai-script-not-py-exits-0",
        colossalai("""
            script: [train.sh, --x]
        #            ^ FJ341
        """),
        message="it refuses 'train.sh' and exits 0",
    ),
    Case(
        "colossalai-module-given-a-file",
        colossalai("""
            script: ["-m", pkg/train.py]
        #                  ^ FJ341
        """),
        hint="did you mean 'pkg.train'?",
    ),
    Case(
        "colossalai-script-path-with-a-space",
        colossalai("""
            script: ["my train.py"]
        #            ^ FJ340
        """),
        message="whose shell would split or expand it",
    ),
    Case(
        "colossalai-extra-arg-with-two-equals",
        colossalai("""
            script: [train.py]
            extraArgs: [--rdzv_conf=timeout=900]
        #               ^ FJ340
        """),
        message="splits --extra_launch_args item 'rdzv_conf=timeout=900' at every '='",
    ),
    Case(
        "colossalai-extra-arg-split-value-with-a-space",
        colossalai("""
            script: [train.py]
            extraArgs: [--log_dir, "/tmp/a b"]
        #               ^ FJ340
        """),
        message="'log_dir=/tmp/a b' unquoted",
    ),
    Case(
        "colossalai-launcher-env-it-cannot-export",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: ColossalAIJob
        metadata: {name: job}
        spec:
          launcher:
            image: c
            env:
              - {name: GREETING, value: 'say "hi"'}
        #                               ^ FJ340
              - {name: SHARED, value: $x}
          worker:
            command: [train.py]
            template:
              spec:
                containers:
                  - {name: worker, image: c, env: [{name: SHARED, value: y}]}
        """,
        message="colossalai run cannot export GREETING's value",
    ),
    Case(
        "valid-colossalai-quoted-script-arguments",
        colossalai("""
            script: [train.py, "two words", "$HOME", --master_port, "1"]
            extraArgs: [--max_restarts, "3", --rdzv_conf=timeout]
        """),
    ),
    # --- both: what the launcher pastes from its own container into every node's shell ---
    Case(
        "deepspeed-working-dir-with-a-command",
        deepspeed(container="""
          workingDir: /ws;touch /tmp/x
        #             ^ FJ340
        """),
        message="deepspeed runs `cd /ws;touch /tmp/x; export NAME=...` unquoted on every node",
    ),
    Case(
        "deepspeed-working-dir-with-a-substitution",
        deepspeed(container="""
          workingDir: /ws/$(id)
        #             ^ FJ340
        """),
    ),
    Case(
        "deepspeed-env-names-that-are-no-shell-names",
        deepspeed(container="""
          env: [{name: PYTHON.VAR, value: x}, {name: "NCCL_X;id", value: y}, {name: NCCL_OK, value: z}, {name: MY.VAR, value: a}]
        #              ^ FJ340
        #                                            ^ FJ340
        #                                            ^ FJ404
        """),
        message="so the node's shell would split or run it",
    ),
    Case(
        "colossalai-launcher-env-names-are-all-exported",
        colossalai("""
            script: [train.py]
        """).replace("containers: [{name: launcher, image: c}]", "containers: [{name: launcher, image: c, env: [{name: MY.VAR, value: x}]}]"),
        also=[(11, 78, "FJ340")],
        message="env name 'MY.VAR'",
    ),
    Case(
        "colossalai-launcher-working-dir",
        colossalai("""
            script: [train.py]
        """).replace("containers: [{name: launcher, image: c}]", 'containers: [{name: launcher, image: c, workingDir: "/ws/$(id)"}]'),
        also=[(11, 77, "FJ340")],
        message="colossalai run runs `cd /ws/$(id) && export",
    ),
    Case(
        "colossalai-default-launcher-takes-the-workers-working-dir",
        colossalai("""
            script: [train.py]
        """, """
                      workingDir: "/ws;id"
        #                         ^ FJ340
        """).replace("            - type: launcher\n              template: {spec: {containers: [{name: launcher, image: c}]}}\n", ""),
    ),
    Case(
        "valid-plain-working-dirs-and-names",
        deepspeed(container="""
          workingDir: /workspace/gpt-neox_2.0
          env: [{name: NCCL_DEBUG, value: INFO}, {name: _x1, value: "a b"}]
        """),
    ),
    # --- both: root ---
    Case(
        "deepspeed-pod-runs-as-non-root",
        deepspeed(container="""
          securityContext: {runAsUser: 1000}
        #                              ^ FJ342
        """),
        message="runAsUser: 1000: DeepSpeedJob pods must run as root",
    ),
    Case(
        "colossalai-worker-run-as-non-root",
        colossalai("""
            script: [train.py]
        """, """
                      securityContext: {runAsNonRoot: true}
        #                                             ^ FJ342
        """),
        message="runAsNonRoot: true",
    ),
    # --- both: a resumeSpec that replaces sshd or the launcher (FJ347, a warning) ---
    Case(
        "deepspeed-resume-command-replaces-sshd",
        deepspeed("""
          config: {run: {python: [train.py]}}
          runMode: {pause: {resumeSpecs: [{type: worker, command: [python, resume.py]}]}}
        #                                                ^ FJ347
        """),
        message="on resume, worker pods run this command instead of sshd (worker-0: deepspeed, which reaches the others over ssh): "
                "sshd never starts, so its startup probe on port 22 fails",
    ),
    Case(
        "colossalai-resume-args-replace-the-launcher",
        colossalai("""
            script: [train.py]
          runMode: {pause: {resumeSpecs: [{type: launcher, args: [--resume]}]}}
        #                                                  ^ FJ347
        """),
        message="on resume, launcher pods run these args instead of colossalai run: colossalai run never starts",
    ),
    Case(
        "valid-resume-spec-that-only-skips-init-containers",
        deepspeed("""
          config: {run: {python: [train.py]}}
          runMode: {pause: {resumeSpecs: [{type: worker, skipInitContainer: true}]}}
        """),
    ),
    Case(
        "valid-container-root-over-a-non-root-pod",
        deepspeed(container="securityContext: {runAsUser: 0}").replace("          spec:\n", "          spec:\n            securityContext: {runAsUser: 1000}\n", 1),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_lint_finds_exactly(tmp_path: Path, case: Case) -> None:
    check_case(tmp_path, case)
