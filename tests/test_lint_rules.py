"""Cross-field rules (compiler/validate/rules.py, FJ300-FJ321), one malformed job each.

Covers: DeepSpeed run target, elastic ranges and torchrun, unique replica types, GenericJob
success/failure rules, job and pod names, runMode, procPerNode, reserved paths, required
containers and images, launcher args, ColossalAI shapes, labels, jobs without pods,
duplicate jobs in one file, torchrun's script (and the command it drops), etcd endpoints,
TensorBoard log sources, ColossalAI restart policies; plus `valid-*`
cases that must stay clean. Findings are drawn in the YAML (`# ^ CODE`, lintkit.marked).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lintkit import Case, case_ids, check_case, deepspeed, edit, generic, pytorch

CASES = [
    Case(
        "run-target-missing",
        deepspeed("""
          config: {slotsPerWorker: 1}
        # ^ FJ300
        """),
        message="config.run needs exactly one of python, module or exec",
    ),
    Case(
        "run-target-two",
        deepspeed("""
          config:
            run: {python: [a.py], module: [b]}
        #                         ^ FJ300
        """),
        message="config.run sets python and module; set exactly one",
    ),
    Case(
        "run-target-empty",
        deepspeed("""
          config:
            run: {exec: []}
        #               ^ FJ300
        """),
        message="config.run.exec is empty",
    ),
    Case(
        "run-target-ignored-with-custom-command",
        deepspeed("""
          config:
            customCommand: deepspeed train.py
            run: {python: [train.py]}
        #   ^ FJ300
        """),
        message="config.run is ignored because customCommand is set",
    ),
    Case(
        "valid-custom-command-without-run",
        deepspeed("""
          config: {customCommand: deepspeed train.py}
        """),
    ),
    Case(
        "elastic-min-above-max",
        pytorch("""
          torchrunConfig: {enabled: true}
          elastic: {enabled: true, minReplicas: 3, maxReplicas: 2}
        #                                       ^ FJ301
        """),
        message="minReplicas (3) is greater than maxReplicas (2)",
    ),
    Case(
        "elastic-expected-below-min",
        pytorch("""
          torchrunConfig: {enabled: true}
          elastic: {enabled: true, minReplicas: 2, maxReplicas: 4, expectedReplicas: 1}
        #                                                                            ^ FJ301
        """),
        message="expectedReplicas (1) is below minReplicas (2)",
    ),
    Case(
        "elastic-expected-above-max",
        deepspeed("""
          config: {run: {python: [train.py]}}
          elastic: {enabled: true, minReplicas: 1, maxReplicas: 2, expectedReplicas: 3}
        #                                                                            ^ FJ301
        """),
        message="expectedReplicas (3) is above maxReplicas (2)",
    ),
    Case(
        "elastic-needs-min-and-max",
        pytorch("""
          torchrunConfig: {enabled: true}
          elastic: {enabled: true}
        # ^ FJ301
        # ^ FJ301
        """),
        message="elastic mode needs spec.elastic.m",
    ),
    Case(
        "elastic-min-zero",
        pytorch("""
          torchrunConfig: {enabled: true}
          elastic: {enabled: true, minReplicas: 0, maxReplicas: 2}
        #                                       ^ FJ204
        """),
        message="spec.elastic.minReplicas: must be >= 1, got 0",
    ),
    Case(
        "elastic-needs-torchrun",
        pytorch("""
          elastic: {enabled: true, minReplicas: 1, maxReplicas: 2}
        #                    ^ FJ302
        """),
        message="spec.elastic is ignored without torchrun",
        hint="set spec.torchrunConfig.enabled: true to train elastically",
    ),
    Case(
        "elastic-without-torchrun-range-not-checked",  # ignored as T9k ignores it: a warning only
        pytorch("""
          elastic: {enabled: true, minReplicas: 3, maxReplicas: 2}
        #                    ^ FJ302
        """),
    ),
    Case(
        "duplicate-replica-type",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: PyTorchTrainingJob
        metadata: {name: job}
        spec:
          replicaSpecs:
            - type: worker
              template: {spec: {containers: [{name: python, image: p, args: [a.py]}]}}
            - type: worker
        #           ^ FJ303
              template: {spec: {containers: [{name: python, image: p, args: [a.py]}]}}
        """,
        message="replica type 'worker' is already used by spec.replicaSpecs[0]",
    ),
    Case(
        "finish-rule-unknown-type",
        generic("""
          successRules: [{wroker: [0]}]
        #                 ^ FJ304
        """),
        message="no replica type 'wroker' in this job",
        hint="did you mean 'worker'?",
    ),
    Case(
        "finish-rule-rank-out-of-range",
        generic("""
          failureRules:
            - worker: [0, 2]
        #                 ^ FJ304
        """),
        message="rank 2 is out of range: type 'worker' has 2 replica(s)",
    ),
    Case(
        "finish-rule-rank-not-a-number",
        generic("""
          successRules: [{worker: ["one"]}]
        #                          ^ FJ304
        """),
        message="rank 'one' is not a non-negative integer",
    ),
    Case(
        "finish-rule-rank-negative",  # review 20, round 10: waited for a pod gen-worker--1 for ever
        generic("""
          successRules: [{worker: [-1]}]
        #                          ^ FJ304
        """),
        message="rank -1 is not a non-negative integer",
    ),
    Case(
        "finish-rule-type-without-ranks",  # review 20, round 10: Succeeded at the first cycle, no pod ran
        generic("""
          successRules: [{worker: []}]
        #                         ^ FJ304
        """),
        message="type 'worker' lists no rank: the rule would be met before any replica ran",
    ),
    Case(
        "valid-finish-rule-rank-as-string",
        generic("""
          successRules: [{worker: ["1"]}]
        """),
    ),
    Case(
        "finish-rule-empty",
        generic("""
          successRules: [{}]
        #                ^ FJ304
        """),
        message="an empty rule is never met",
    ),
    Case(
        "job-name-not-dns-1035",
        pytorch(name="Train_Job"),
        also=((4, 9, "FJ305"),),
        message="job name 'Train_Job' must consist of lower-case letters",
        hint="did you mean 'train-job'?",
    ),
    Case("job-name-starts-with-digit", pytorch(name="1job"), also=((4, 9, "FJ305"),), message="job name '1job'", hint="did you mean 'job'?"),
    Case(
        # the job name is valid, so the type is at fault: not "shorten" (issue 25)
        "replica-type-in-upper-case",
        edit(pytorch(), "type: worker", "type: Worker"),
        also=((8, 13, "FJ305"),),
        message="pod name 'job-Worker-1' must consist of lower-case letters",
        hint="pod names are <job>-<type>-<index>: write the type in lower-case letters, digits and '-'; did you mean 'worker'?",
    ),
    Case(
        # `job--w-0` is a valid pod name, but the type labels every pod (review 21, round 3)
        "replica-type-not-a-label-value",
        edit(generic(), "type: worker", "type: -w"),
        also=((8, 13, "FJ305"),),
        message="replica type '-w' is a label value of every pod: it must be at most 63 characters",
    ),
    Case(
        "pod-name-too-long",
        edit(pytorch(name="j" * 50), "type: worker", "type: worker-type"),
        also=((8, 13, "FJ305"),),
        message=f"pod name '{'j' * 50}-worker-type-1' is 64 characters long",
    ),
    Case(
        "run-mode-unknown-type",
        pytorch("""
          runMode:
            debug:
              enabled: true
              replicaSpecs: [{type: wroker}]
        #                           ^ FJ306
        """),
        message="no replica type 'wroker' in this job (types: worker)",
        hint="did you mean 'worker'?",
    ),
    Case(
        "run-mode-debug-and-pause",
        pytorch("""
          runMode:
            debug: {enabled: true}
            pause: {enabled: true}
        #                    ^ FJ307
        """),
        message="debug and pause mode are both enabled",
    ),
    Case(
        "proc-per-node-typo",
        pytorch("""
          torchrunConfig: {enabled: true, procPerNode: gpus}
        #                                              ^ FJ308
        """),
        message="procPerNode 'gpus' must be a positive integer (as a string) or one of 'gpu', 'cpu', 'auto'",
        hint="did you mean 'gpu'?",
    ),
    *(
        Case(f"valid-proc-per-node-{word}", pytorch(f"torchrunConfig: {{enabled: true, procPerNode: {word}}}"))
        for word in ("cpu", "auto", '"8"')
    ),
    Case("valid-proc-per-node-gpu", pytorch("torchrunConfig: {enabled: true, procPerNode: gpu}", "resources: {limits: {nvidia.com/gpu: 4}}")),
    Case(
        # T9k: as many processes as the replica's GPUs; torchrun refuses `gpu` without CUDA (review 20, round 3)
        "proc-per-node-gpu-without-a-gpu-warning",
        pytorch("""
          torchrunConfig: {enabled: true, procPerNode: gpu}
        #                                              ^ FJ308
        """),
        message="procPerNode 'gpu', but worker's training container asks for no GPU",
        hint="give the container its GPU limit, or set procPerNode to a number",
    ),
    Case(
        "torchrun-etcd-without-endpoint",
        pytorch("""
          torchrunConfig: {enabled: true, rdzvBackend: etcd}
        #                                              ^ FJ319
        """),
        message="rdzvBackend etcd uses your etcd server, but extraOptions names none",
        hint="add --rdzv_endpoint=<etcd-host>:<port> to spec.torchrunConfig.extraOptions",
    ),
    Case(
        "valid-torchrun-etcd-with-endpoint",
        pytorch("torchrunConfig: {enabled: true, rdzvBackend: etcd-v2, extraOptions: [--rdzv-endpoint, 'etcd:2379']}"),
    ),
    Case(
        "proc-per-node-zero",
        pytorch("""
          torchrunConfig: {enabled: true, procPerNode: "0"}
        #                                              ^ FJ308
        """),
    ),
    Case(
        "proc-per-node-unicode-digit",
        pytorch("""
          torchrunConfig: {enabled: true, procPerNode: "²"}
        #                                              ^ FJ308
        """),
    ),
    Case(
        "reserved-path",
        deepspeed(
            container="""
                volumeMounts: [{name: h, mountPath: /t9k/hostfile}]
        #                                           ^ FJ309
        """
        ),
        also=((14, 35, "FJ204"),),  # and h is no volume of the pod
        message="/t9k/hostfile is reserved",
    ),
    Case(
        "no-containers",
        pytorch().split("          containers:")[0] + "          containers: []\n",
        also=((10, 7, "FJ310"),),
        message="the pod template has no containers",
    ),
    Case(
        "colossalai-needs-worker-container",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: ColossalAIJob
        metadata: {name: job}
        spec:
          torchConfig: {script: [train.py]}
          replicaSpecs:
            - type: worker
              template:
                spec:
                  containers:
        #         ^ FJ310
                    - {name: wroker, image: c}
        """,
        message="ColossalAIJob workers need a container named 'worker' (found 'wroker')",
        hint="did you mean 'worker'?",
    ),
    Case(
        "colossalai-worker-container-without-a-name",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: ColossalAIJob
        metadata: {name: job}
        spec:
          torchConfig: {script: [train.py]}
          replicaSpecs:
            - type: worker
              template:
                spec:
                  containers:
        #         ^ FJ310
                    - {image: c}
        #             ^ FJ403
        """,
        message="ColossalAIJob workers need a container named 'worker' (found a container without a name)",
        hint="add name: worker",
    ),
    Case(
        "conflicting-other-args",
        deepspeed("""
          config:
            run: {python: [a.py]}
            otherArgs: [--num_gpus=2, --module]
        #                             ^ FJ311
        """),
        message="--module in otherArgs conflicts",
        hint="use spec.config.run.module instead",
    ),
    Case(
        "colossalai-mixed-shapes",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: ColossalAIJob
        metadata: {name: job}
        spec:
          worker: {command: [a.py], template: {spec: {containers: [{name: worker, image: c}]}}}
          torchConfig: {script: [a.py]}
        """,
        also=((4, 1, "FJ312"),),
        message="use either launcher/worker or torchConfig/replicaSpecs",
    ),
    Case(
        "colossalai-launcher-replicas",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: ColossalAIJob
        metadata: {name: job}
        spec:
          torchConfig: {script: [train.py]}
          replicaSpecs:
            - type: launcher
              replicas: 2
        #               ^ FJ204
              template: {spec: {containers: [{name: launcher, image: c}]}}
            - type: worker
              template: {spec: {containers: [{name: worker, image: c}]}}
        """,
        message="the launcher has exactly one pod; replicas is 2",
    ),
    Case(
        "bad-label-key",
        edit(pytorch(), "metadata:\n", "metadata:\n  labels: {-team: a}\n  #        ^ FJ313\n"),
        message="key '-team'",
    ),
    Case(
        "bad-label-value",
        edit(
            pytorch(), "metadata:\n", "metadata:\n  labels: {team: a b}\n  #              ^ FJ313\n"
        ),
        message="label value 'a b'",
    ),
    Case(
        "no-replicas-warning",
        edit(pytorch(), "replicas: 2", "replicas: 0"),
        also=((5, 1, "FJ314"),),
        message="every replica count is 0",
    ),
    Case(
        "torchrun-needs-args",
        edit(
            pytorch("torchrunConfig: {enabled: true}"),
            "args: [train.py]",
            "command: [python, train.py]",
        ),
        also=((13, 15, "FJ316"),),
        message="torchrun mode runs `torchrun <options> <args>`",
    ),
    Case(
        "torchrun-drops-the-script-in-command",  # T9k ignores command in torchrun mode
        pytorch("torchrunConfig: {enabled: true}", """
                  command: [python, train.py]
        #                  ^ FJ316
        """),
        message="torchrun mode ignores the container's command (T9k): 'train.py' is not run, only args are",
    ),
    Case(
        "torchrun-drops-a-null-in-command",  # said as YAML writes it ('null'), not as Python prints it ('None')
        pytorch("torchrunConfig: {enabled: true}", """
                  command: [python, ~]
        #                  ^ FJ316
        """),
        also=((16, 33, "FJ401"),),
        message="torchrun mode ignores the container's command (T9k): 'null' is not run, only args are",
    ),
    Case("valid-exit-code-without-a-launcher", edit(pytorch(), "replicas: 2", "replicas: 2\n      restartPolicy: ExitCode")),
    *(
        Case(f"valid-torchrun-command-{i}", pytorch("torchrunConfig: {enabled: true}", f"command: {command}"))
        for i, command in enumerate(("[python]", "[python3]", "[/usr/bin/python3.10]"))
    ),
    Case(
        "valid-plain-mode-keeps-the-command",
        pytorch("torchrunConfig: {enabled: false}", "command: [python, -u]"),
    ),
    Case(
        "duplicate-job-in-one-file",
        pytorch() + "---\n" + pytorch(),
        also=((20, 9, "FJ315"),),
        message="job 'job' is also defined at line 4",
    ),
    Case(
        "namespace-upper-case",
        edit(pytorch(), "name: job", "name: job\n  namespace: Team"),
        also=((5, 14, "FJ305"),),
        message="namespace 'Team' must consist of lower-case letters",
    ),
    Case(
        "namespace-too-long",
        edit(pytorch(), "name: job", "name: job\n  namespace: " + "x" * 64),
        also=((5, 14, "FJ305"),),
        message="is 64 characters long; at most 63 are allowed",
    ),
    Case(
        "valid-same-name-other-namespace",
        pytorch() + "---\n" + edit(pytorch(), "name: job", "name: job\n  namespace: b"),
    ),
    Case(
        "resume-args-need-a-command",
        generic("""
          runMode:
            pause:
              enabled: false
              resumeSpecs:
                - type: worker
                  args: [--resume]
        #         ^ FJ318
        """),
        message="resumeSpecs for 'worker' set args, but the container has no command: it runs its image's entrypoint, which flatjob cannot wrap",
        hint="give the container its command (the image's entrypoint, written out)",
    ),
    Case(
        # The usual run would be an empty `exec`: exit 0 and a job that "succeeds" untrained (review 21, round 3).
        "resume-command-on-an-image-entrypoint",
        generic("""
          runMode:
            pause:
              resumeSpecs:
                - type: worker
                  command: [python, resume.py]
        #         ^ FJ318
        """),
        message="resumeSpecs for 'worker' set command, but the container has no command: it runs its image's entrypoint, which flatjob cannot wrap",
    ),
    Case(
        "valid-resume-args-with-a-command",
        generic(
            """
          runMode:
            pause: {resumeSpecs: [{type: worker, args: [--resume]}]}
        """,
            "command: [python, train.py]",
        ),
    ),
    Case(
        "resume-skip-init-without-command-warning",
        edit(
            generic("runMode: {pause: {resumeSpecs: [{type: worker, skipInitContainer: true}]}}"),
            "        spec:\n",
            """\
        spec:
          initContainers: [{name: fetch, image: busybox}]
""",
        ),
        also=((6, 69, "FJ318"),),
        message="init container 'fetch' has no command, so it cannot be skipped on resume",
    ),
    Case(
        "tensorboard-log-location",
        pytorch("""
          tensorboardSpec:
            image: tensorboard
            trainingLogFilesets: [pvc://logs/run1]
        #                         ^ FJ317
        """),
        message="log location 'pvc://logs/run1' is not of the form t9k://pvc/<pvc>/<path>",
        also=((6, 3, "FJ321"),),  # and so there is no PVC to show
    ),
    Case(
        "tensorboard-without-logs",  # image and resources only: nothing to show, nothing rendered
        pytorch("""
          tensorboardSpec:
        # ^ FJ321
            image: tensorboard
            resources: {requests: {cpu: 100m}}
        """),
        message="tensorboardSpec names no PVC log location, so flatjob renders no TensorBoard",
    ),
    Case(
        "tensorboard-minio-s3-http-are-not-shown",
        pytorch("""
          tensorboardSpec:
            image: tensorboard
            trainingLogFilesets: [t9k://pvc/logs/a, t9k://minio/cred/bucket/run1]
        #                                           ^ FJ321
            logDir:
              s3: {secretRef: {name: cred}, uri: [s3://bucket/run1]}
        #     ^ FJ321
              http: {url: [http://logs.example/run1]}
        #     ^ FJ321
        """),
        message="is not shown: flatjob mounts only PVCs",
    ),
    Case(
        "valid-tensorboard-suspended-with-scheduler",
        pytorch("""
          tensorboardSpec:
            image: tensorboard
            suspend: true
            scheduler: {t9kScheduler: {queue: default}}
            logDir: {pvc: [{name: logs, subPath: [run1]}]}
        """),
    ),
    Case(
        # T9k gives no rule; its PodGroup's queue defaults to `default` (docs/architecture.md §7).
        "valid-t9k-scheduler-without-queue",
        pytorch("""
          scheduler: {t9kScheduler: {priority: 50}}
          tensorboardSpec:
            image: tensorboard
            scheduler: {t9kScheduler: {}}
            logDir: {pvc: [{name: logs, subPath: [run1]}]}
        """),
    ),
    Case(
        "colossalai-restart-policy-is-ignored",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: ColossalAIJob
        metadata: {name: job}
        spec:
          torchConfig: {script: [train.py]}
          replicaSpecs:
            - type: worker
              restartPolicy: {policy: OnFailure, limit: 3}
        #     ^ FJ320
              template: {spec: {containers: [{name: worker, image: c}]}}
        """,
        message="restartPolicy OnFailure is ignored: a restarted pod cannot re-join `colossalai run`",
        hint="remove restartPolicy, or set policy: Never",
    ),
    Case(
        "valid-colossalai-restart-policy-never",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: ColossalAIJob
        metadata: {name: job}
        spec:
          torchConfig: {script: [train.py]}
          replicaSpecs:
            - type: worker
              restartPolicy: {policy: Never}
              template: {spec: {containers: [{name: worker, image: c}]}}
        """,
    ),
    # T9k's own DeepSpeed and ColossalAI examples put restartPolicy in the pod template: always Never
    Case(
        "pod-template-restart-policy-deepspeed",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: DeepSpeedJob
        metadata: {name: job}
        spec:
          config: {run: {python: [train.py]}}
          worker:
            replicas: 2
            template:
              spec:
                restartPolicy: OnFailure
        #       ^ FJ344
                containers: [{name: worker, image: c}]
        """,
        message="the pod's restartPolicy is always Never (as in T9k), so OnFailure here does nothing; restarts follow spec.worker.restartPolicy",
        hint="remove template.spec.restartPolicy",
    ),
    # A probe kill under restartPolicy Never ends the replica, judged by the program's exit code
    Case(
        "liveness-probe-ends-the-replica",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: PyTorchTrainingJob
        metadata: {name: job}
        spec:
          replicaSpecs:
            - type: worker
              replicas: 2
              template:
                spec:
                  containers:
                    - name: pytorch
                      image: c
                      livenessProbe: {exec: {command: [cat, /tmp/alive]}}
        #             ^ FJ348
        """,
        message="a failed livenessProbe ends this replica for good (every pod's restartPolicy is Never): the kubelet stops the container and its exit code "
        "decides as if the program had ended by itself, so one that exits 0 on SIGTERM counts as a success",
        hint="catch a hung training inside the program (NCCL's timeout, a watchdog that exits non-zero) or with activeDeadlineSeconds",
    ),
    Case(
        "deepspeed-slots-per-worker-unset-with-several-gpus",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: DeepSpeedJob
        metadata: {name: job}
        spec:
          config:
        # ^ FJ351
            run: {python: [t.py]}
          worker:
            replicas: 2
            template:
              spec:
                containers: [{name: worker, image: i, resources: {limits: {nvidia.com/gpu: 8}}}]
        """,
        message="config.slotsPerWorker is not set, so every worker runs 1 training process (hostfile slots=1) while its container asks for 8 GPUs: 7 of them stay idle",
        hint="set config.slotsPerWorker: 8 (T9k: usually each replica's GPU count)",
    ),
    Case(
        "valid-deepspeed-slots-per-worker-set-below-the-gpus",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: DeepSpeedJob
        metadata: {name: job}
        spec:
          config:
            slotsPerWorker: 1
            run: {python: [t.py]}
          worker:
            replicas: 2
            template:
              spec:
                containers: [{name: worker, image: i, resources: {limits: {nvidia.com/gpu: 8}}}]
        """,
    ),
    Case(
        "service-target-port-is-not-where-peers-connect",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: GenericJob
        metadata: {name: job}
        spec:
          service:
            ports:
              - {name: http, port: 80, targetPort: 8080}
        #                                          ^ FJ350
          replicaSpecs:
            - type: worker
              template:
                spec:
                  containers: [{name: c, image: i, command: [serve, --port=8080]}]
        """,
        message="targetPort 8080 is not where peers connect: the replica Services are headless (their names resolve to the pod's IP, with no port "
        "translation), so <job>-<type>-<rank>:$(service.port[http]) reaches port 80 of the pod",
        hint="give port the port the program listens on, and leave targetPort out",
    ),
    Case(
        # The API server decodes a null as absent (a nil pointer): one source (review hx26).
        "valid-env-from-with-a-null-beside-its-source",
        generic(container="envFrom: [{configMapRef: null, secretRef: {name: s}}]"),
    ),
    Case(
        # A job that picks another scheduler never makes the queue a label (review hx26).
        "valid-kueue-queue-of-a-job-that-picks-another-scheduler",
        edit(pytorch(), "  name: job\n", "  name: job\n  annotations: {flatjob.dev/scheduler: default, flatjob.dev/kueue-queue: Team_Queue}\n"),
    ),
    Case(
        "valid-service-target-port-equal-to-port",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: GenericJob
        metadata: {name: job}
        spec:
          service:
            ports:
              - {name: http, port: 2222, targetPort: 2222}
          replicaSpecs:
            - type: worker
              template:
                spec:
                  containers: [{name: c, image: i, command: [serve]}]
        """,
    ),
    Case(
        "valid-readiness-probe-ends-nothing",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: PyTorchTrainingJob
        metadata: {name: job}
        spec:
          replicaSpecs:
            - type: worker
              replicas: 2
              template:
                spec:
                  containers:
                    - name: pytorch
                      image: c
                      readinessProbe: {exec: {command: [cat, /tmp/ready]}}
        """,
    ),
    Case(
        "pod-template-restart-policy-pytorch",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: PyTorchTrainingJob
        metadata: {name: job}
        spec:
          replicaSpecs:
            - type: master
              replicas: 1
              template: {spec: {restartPolicy: Always, containers: [{name: pytorch, image: c}]}}
        #                       ^ FJ344
        """,
        message="the pod's restartPolicy is always Never (as in T9k), so Always here does nothing; restarts follow spec.replicaSpecs[0].restartPolicy",
    ),
    Case(
        "reserved-env-flatjob-prefix",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: GenericJob
        metadata: {name: job}
        spec:
          replicaSpecs:
            - type: worker
              template: {spec: {containers: [{name: w, image: c, env: [{name: FLATJOB_POD_ENV, value: x}]}]}}
        #                                                                     ^ FJ346
        """,
        message="env FLATJOB_POD_ENV: flatjob's own (its launch scripts and runtime set them), so a job may not set it",
    ),
    Case(
        "reserved-env-flatjob-envfrom-prefix",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: GenericJob
        metadata: {name: job}
        spec:
          replicaSpecs:
            - type: worker
              template: {spec: {containers: [{name: w, image: c, envFrom: [{prefix: FLATJOB_, configMapRef: {name: m}}]}]}}
        #                                                                           ^ FJ346
        """,
        message="envFrom prefix 'FLATJOB_': it can make names starting with FLATJOB_, which are flatjob's own",
    ),
    Case(
        "reserved-env-deepspeed-pdsh-ssh-args",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: DeepSpeedJob
        metadata: {name: job}
        spec:
          config: {slotsPerWorker: 1, run: {python: [t.py]}}
          worker:
            replicas: 1
            template:
              spec:
                containers:
                  - name: worker
                    image: ds
                    env: [{name: PDSH_SSH_ARGS_APPEND, value: -oLocalCommand=x}, {name: DS_ENV_FILE, value: /run/flatjob-pod-env}]
        #                        ^ FJ346                                                ^ FJ346
        """,
        message="env PDSH_SSH_ARGS_APPEND: the launcher's own configuration (deepspeed and pdsh would read it), so a job may not set it",
    ),
    Case(
        "valid-pdsh-variable-on-a-pytorch-job",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: PyTorchTrainingJob
        metadata: {name: job}
        spec:
          replicaSpecs:
            - type: worker
              template: {spec: {containers: [{name: pytorch, image: c, command: [python, t.py], env: [{name: PDSH_SSH_ARGS, value: x}]}]}}
        """,
    ),
    Case(
        "valid-pod-template-restart-policy-never",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: GenericJob
        metadata: {name: job}
        spec:
          replicaSpecs:
            - type: worker
              template: {spec: {restartPolicy: Never, containers: [{name: w, image: c}]}}
        """,
    ),
    Case(
        "ssh-home-mounted-read-only-beside-a-custom-auth-mount-path",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: DeepSpeedJob
        metadata: {name: job}
        spec:
          ssh: {authMountPath: /etc/keys}
          config: {slotsPerWorker: 1, run: {python: [t.py]}}
          worker:
            replicas: 2
            template:
              spec:
                volumes: [{name: mine, secret: {secretName: my-ssh}}]
                containers:
                  - name: worker
                    image: i
                    volumeMounts: [{name: mine, mountPath: /root/.ssh}]
        #                                                  ^ FJ352
        """,
        message="volume mine at /root/.ssh: the pod's script links the SSH client config and key of ssh.authMountPath /etc/keys into /root/.ssh, where OpenSSH (pdsh, a user's ssh) reads it whatever $HOME says, but this volume is read-only there: the links cannot be made and every pod stops at start",
        hint="mount the volume elsewhere, or the SSH keys at /root/.ssh (ssh.authMountPath: /root/.ssh)",
    ),
    Case(
        "ssh-home-mounted-writable-under-the-containers-home",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: ColossalAIJob
        metadata: {name: job}
        spec:
          ssh: {authMountPath: /etc/keys}
          torchConfig: {script: [t.py]}
          replicaSpecs:
            - type: worker
              replicas: 2
              template:
                spec:
                  volumes: [{name: home, persistentVolumeClaim: {claimName: home}}]
                  containers:
                    - name: worker
                      image: i
                      env: [{name: HOME, value: /workspace}]
                      volumeMounts: [{name: home, mountPath: /workspace/.ssh/}]
        #                                                    ^ FJ352
        """,
        message="volume home at /workspace/.ssh/: the pod's script links the SSH client config and key of ssh.authMountPath /etc/keys into /workspace/.ssh, where fabric and paramiko read it ($HOME): they replace this volume's own config, id_ed25519, id_ed25519.pub",
    ),
    Case(
        "ssh-home-mounted-at-a-linked-file-or-a-read-only-home",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: DeepSpeedJob
        metadata: {name: job}
        spec:
          ssh: {authMountPath: /etc/keys}
          config: {slotsPerWorker: 1, run: {python: [t.py]}}
          worker:
            template:
              spec:
                volumes: [{name: cfg, configMap: {name: c}}, {name: ws, emptyDir: {}}]
                containers:
                  - name: sidecar
                    image: i
                    volumeMounts: [{name: cfg, mountPath: /root/.ssh}]
                  - name: worker
                    image: i
                    env: [{name: HOME, value: /ws}]
                    volumeMounts:
                      - {name: cfg, mountPath: /root/.ssh/config, subPath: config}
        #                                      ^ FJ352
                      - {name: ws, mountPath: /ws, readOnly: true}
        #                                     ^ FJ352
        """,
        message="and a mounted file cannot be replaced by a link: every pod stops at start",
    ),
    Case(
        "ssh-home-mounted-under-a-relative-home-in-the-working-dir",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: ColossalAIJob
        metadata: {name: job}
        spec:
          ssh: {authMountPath: /etc/keys}
          torchConfig: {script: [t.py]}
          replicaSpecs:
            - type: worker
              replicas: 2
              template:
                spec:
                  volumes: [{name: cfg, configMap: {name: c}}]
                  containers:
                    - name: worker
                      image: i
                      workingDir: /workspace
                      env: [{name: HOME, value: ./ws}]
                      volumeMounts: [{name: cfg, mountPath: /workspace/ws/.ssh}]
        #                                                   ^ FJ352
        """,
        message="volume cfg at /workspace/ws/.ssh: the pod's script links the SSH client config and key of ssh.authMountPath /etc/keys into /workspace/ws/.ssh, where fabric and paramiko read it ($HOME, ./ws in the workingDir /workspace), but this volume is read-only there: the links cannot be made and every pod stops at start",
    ),
    Case(
        "valid-ssh-home-mounts-under-a-relative-home-the-image-places",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: ColossalAIJob
        metadata: {name: job}
        spec:
          ssh: {authMountPath: /etc/keys}
          torchConfig: {script: [t.py]}
          replicaSpecs:
            - type: worker
              replicas: 2
              template:
                spec:
                  volumes: [{name: cfg, configMap: {name: c}}]
                  containers:
                    - name: worker
                      image: i
                      env: [{name: HOME, value: ws}]
                      volumeMounts: [{name: cfg, mountPath: /ws/.ssh}]
        """,
    ),
    Case(
        "valid-ssh-home-mounts-with-the-default-auth-mount-path-or-elsewhere",
        """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: DeepSpeedJob
        metadata: {name: job}
        spec:
          ssh: {authMountPath: /etc/keys}
          config: {slotsPerWorker: 1, run: {python: [t.py]}}
          worker:
            template:
              spec:
                volumes: [{name: ws, secret: {secretName: s}}]
                containers:
                  - name: worker
                    image: i
                    env: [{name: HOME, value: /ws}]
                    volumeMounts: [{name: ws, mountPath: /ws/.ssh/known_hosts, subPath: known_hosts}, {name: ws, mountPath: /root/.sshx}]
        """,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_lint_finds_exactly(tmp_path: Path, case: Case) -> None:
    check_case(tmp_path, case)


def test_colossalai_extra_args_with_a_comma_cannot_pass(tmp_path) -> None:
    """colossalai run --extra_launch_args is a comma-separated list."""
    from click.testing import CliRunner

    from flatjob.compiler.cli import cli

    job = tmp_path / "cx.yaml"
    job.write_text(
        "apiVersion: batch.tensorstack.dev/v1beta1\nkind: ColossalAIJob\nmetadata: {name: cx}\nspec:\n"
        "  torchConfig:\n    script: [train.py]\n    extraArgs: [\"--foo=a,b\"]\n"
        "  replicaSpecs:\n    - type: worker\n      template: {spec: {containers: [{name: worker, image: x}]}}\n"
    )
    res = CliRunner().invoke(cli, ["lint", str(job)])
    assert res.exit_code == 1
    assert f"{job}:7:17: error: '--foo=a,b' contains a comma" in res.output and "[FJ204]" in res.output
