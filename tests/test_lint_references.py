"""GenericJob $(...) references (FJ500-FJ502): each resolves at compile time or is reported.

Covers: every documented form resolving; $(service...) without spec.service (once per
string); unknown port names with "did you mean"; out-of-range and non-numeric ranks;
unknown types; forms that do not exist; adjacent references, escapes ($$), nesting and
unclosed references at their exact column; env vars left to Kubernetes; typos of $(rank).
Findings are drawn in the YAML (`# ^ CODE`, lintkit.marked).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lintkit import SERVICE, Case, case_ids, check_case, generic

CASES = [
    Case(
        "valid-ref-all-forms",
        generic(
            SERVICE,
            """
        args: ["$(type)-$(rank)", "$(replicas[worker])"]
        command: ["$(service.worker[1].host):$(service.port[http])"]
        env: [{name: ESCAPED, value: "$$(rank)"}]
        """,
        ),
    ),
    Case(
        "ref-service-without-spec-service",
        generic(
            container="""
        args: ["$(service.worker[0].host)", "$(service.port[http])"]
        #       ^ FJ501                      ^ FJ501
        """
        ),
        message="$(service.worker[0].host): spec.service is not set",
        hint="add spec.service.ports (T9k only creates the service when it is set)",
    ),
    Case(
        "ref-service-without-spec-service-once-per-string",
        generic(
            container="""
        args: ["$(service.worker[0].host):$(service.port[http])"]
        #       ^ FJ501
        """
        ),
        message="spec.service is not set",
    ),
    Case(
        "ref-unknown-port",
        generic(
            SERVICE,
            """
        args: ["$(service.port[grpc])"]
        #       ^ FJ502
        """,
        ),
        message="spec.service.ports has no port named 'grpc' (ports: http)",
    ),
    Case(
        "ref-unknown-port-near-miss",
        generic(
            SERVICE,
            """
        args: ["$(service.port[htp])"]
        #       ^ FJ502
        """,
        ),
        hint="did you mean 'http'?",
    ),
    Case(
        "ref-rank-out-of-range",
        generic(
            SERVICE,
            """
        args: ["$(service.worker[2].host)"]
        #       ^ FJ500
        """,
        ),
        message="rank 2 is out of range: type 'worker' has 2 replica(s)",
    ),
    Case(
        "ref-rank-not-a-number",
        generic(
            SERVICE,
            """
        args: ["$(service.worker[last].host)"]
        #       ^ FJ500
        """,
        ),
        message="rank 'last' is not a non-negative integer",
    ),
    Case(
        "ref-unknown-type",
        generic(
            container="""
        args: ["$(replicas[wroker])"]
        #       ^ FJ500
        """
        ),
        message="$(replicas[wroker]): no replica type 'wroker' in this job",
        hint="did you mean 'worker'?",
    ),
    Case(
        "ref-not-a-variable",
        generic(
            SERVICE,
            """
        args: ["$(service.worker[0].ip)"]
        #       ^ FJ500
        """,
        ),
        message="$(service.worker[0].ip): not a GenericJob variable",
    ),
    Case(
        "ref-adjacent",
        generic(
            container="""
        args: ["$(rank)$(replicas[ps])$(replicas[ps])"]
        #              ^ FJ500        ^ FJ500
        """
        ),
        message="$(replicas[ps]): no replica type 'ps'",
    ),
    Case(
        "ref-after-escape",
        generic(
            container="""
        args: ["$$(replicas[ps]) $(replicas[ps])"]
        #                        ^ FJ500
        """
        ),
        message="$(replicas[ps]): no replica type 'ps'",
    ),
    Case(
        "ref-nested",
        generic(
            SERVICE,
            """
        args: ["$(service.worker[$(rank)].host)"]
        #       ^ FJ500
        """,
        ),
        message="$(service.worker[$(rank)].host): a $(...) reference inside another is not",
    ),
    Case(
        "ref-unclosed-warning",
        generic(
            SERVICE,
            """
        args: ["$(service.worker[0].host"]
        #       ^ FJ500
        """,
        ),
        message="'$(service.worker[0].host' is not closed",
    ),
    Case(
        "ref-typo-of-variable-warning",
        generic(
            container="""
        args: ["$(rnak)"]
        #       ^ FJ500
        """
        ),
        message="$(rnak) is neither a GenericJob variable nor an env var",
        hint="did you mean 'rank'?",
    ),
    Case(
        "valid-ref-env-var-is-kubernetes",
        generic(
            container="""
        env: [{name: RANK_DIR, value: /r}]
        args: ["$(RANK_DIR)", "$(HOME)", "$(seq 1 $(replicas[worker]))"]
        """
        ),
    ),
    Case(
        "ref-in-env-value",
        generic(
            SERVICE,
            """
        env:
          - name: PEER
            value: "$(service.worker[5].host)"
        #           ^ FJ500
        """,
        ),
        message="rank 5 is out of range",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_lint_finds_exactly(tmp_path: Path, case: Case) -> None:
    check_case(tmp_path, case)
