"""Pod templates checked strictly against Kubernetes 1.32 (FJ400-FJ405), one case each.

Covers: unknown fields (in a container and in a volume source) with "did you mean", wrong
JSON types, enums Kubernetes keeps only in prose (imagePullPolicy, restartPolicy), missing
names and images, bad quantities, duplicate container and env names. Findings are drawn in
the YAML (`# ^ CODE`, lintkit.marked).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lintkit import Case, case_ids, check_case, edit, pytorch

CASES = [
    Case(
        "k8s-unknown-field",
        pytorch(
            container="""
        commands: [python]
      # ^ FJ400
        """
        ),
        message="unknown field 'commands' in Container",
        hint="did you mean 'command'?",
    ),
    Case(
        "k8s-unknown-field-volume",
        edit(
            pytorch(),
            "        spec:\n",
            """\
        spec:
          volumes: [{name: s, secret: {name: s}}]
          #                            ^ FJ400
""",
        ),
        message="unknown field 'name' in SecretVolumeSource",
    ),
    Case(
        "k8s-wrong-type",
        pytorch(
            container="""
        command: python
        #        ^ FJ401
        """
        ),
        message="expected array, got string",
    ),
    Case(
        "k8s-wrong-type-port",
        pytorch(
            container="""
        ports: [{containerPort: "29500"}]
        #                       ^ FJ401
        """
        ),
        message="expected integer, got string",
    ),
    Case(
        "k8s-bad-enum",
        pytorch(
            container="""
        imagePullPolicy: Allways
        #                ^ FJ402
        """
        ),
        message="'Allways' is not one of Always, IfNotPresent, Never",
        hint="did you mean 'Always'?",
    ),
    Case(
        "k8s-bad-enum-restart-policy",
        edit(
            pytorch(),
            "        spec:\n",
            """\
        spec:
          restartPolicy: Sometimes
          #              ^ FJ402
""",
        ),
        message="'Sometimes' is not one of",
    ),
    Case(
        "k8s-missing-env-name",
        pytorch(
            container="""
        env: [{value: "1"}]
        #     ^ FJ403
        """
        ),
        message="missing required field 'name' in EnvVar",
    ),
    Case(
        "k8s-missing-container-name",
        edit(
            pytorch(),
            "              args: [train.py]\n",
            """\
              args: [train.py]
            - image: sidecar
            # ^ FJ403
""",
        ),
        message="missing required field 'name' in Container",
    ),
    Case(
        "k8s-container-without-image",
        edit(
            pytorch(),
            "              args: [train.py]\n",
            """\
              args: [train.py]
            - name: sidecar
            # ^ FJ403
""",
        ),
        message="container 'sidecar' has no image",
        hint="add image: <registry>/<repository>:<tag>",
    ),
    Case(
        "k8s-bad-quantity",
        pytorch(
            container="""
        resources: {limits: {memory: 4GB}}
        #                            ^ FJ404
        """
        ),
        message="'4GB' is not a valid quantity",
    ),
    Case(
        "k8s-duplicate-container-name",
        edit(
            pytorch(),
            "              args: [train.py]\n",
            """\
              args: [train.py]
            - name: python
            # ^ FJ405
              image: sidecar
""",
        ),
        message="duplicate name='python' (first at index 0)",
    ),
    Case(
        "k8s-duplicate-env",
        pytorch(
            container="""
        env:
          - {name: A, value: "1"}
          - {name: A, value: "2"}
        #   ^ FJ405
        """
        ),
        message="duplicate name='A'",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_lint_finds_exactly(tmp_path: Path, case: Case) -> None:
    check_case(tmp_path, case)
