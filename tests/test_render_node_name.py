"""A template's nodeName is rendered as the node affinity that means the same node: every pod
flatjob renders is gated, and kube-apiserver refuses a pod with a nodeName and scheduling gates
(ValidatePodCreate).  T9k's ColossalAIJob tutorial pins its workers so (`nodeName: sm02`)."""

from __future__ import annotations

from typing import Any

from flatjob.compiler.render.pod import _pin_by_affinity

PIN = {"key": "metadata.name", "operator": "In", "values": ["sm02"]}


def _required(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]


def test_a_node_name_alone_becomes_one_term() -> None:
    spec: dict[str, Any] = {"nodeName": "sm02", "containers": []}
    _pin_by_affinity(spec)
    assert "nodeName" not in spec and _required(spec) == [{"matchFields": [PIN]}]


def test_a_pinned_pod_tolerates_every_no_schedule_taint_as_its_kubelet_admits_it() -> None:
    """With a nodeName the scheduler is skipped and the kubelet checks NoExecute taints only, so
    T9k's pod ran on a cordoned or NoSchedule-tainted node (a GPU node's, often): so does
    flatjob's; a template's own tolerations stay, the added one once (review hx26)."""
    own = {"key": "gpu", "operator": "Exists", "effect": "NoExecute"}
    spec: dict[str, Any] = {"nodeName": "sm02", "tolerations": [own]}
    _pin_by_affinity(spec)
    assert spec["tolerations"] == [own, {"operator": "Exists", "effect": "NoSchedule"}]
    again: dict[str, Any] = {"nodeName": "sm02", "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}]}
    _pin_by_affinity(again)
    assert again["tolerations"] == [{"operator": "Exists", "effect": "NoSchedule"}]


def test_each_required_term_must_match_the_node_too_and_an_empty_term_still_matches_none() -> None:
    gpu = {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}
    spec: dict[str, Any] = {
        "nodeName": "sm02",
        "affinity": {"podAffinity": {"x": 1}, "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1}],
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [gpu, {}]}}},
    }
    _pin_by_affinity(spec)
    assert _required(spec) == [{**gpu, "matchFields": [PIN]}, {}]
    assert spec["affinity"]["podAffinity"] == {"x": 1} and spec["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] == [{"weight": 1}]


def test_no_or_an_empty_node_name_changes_nothing_else() -> None:
    for spec in ({"containers": []}, {"nodeName": "", "containers": []}):
        _pin_by_affinity(spec)
        assert spec == {"containers": []}
