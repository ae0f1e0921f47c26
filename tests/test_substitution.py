"""GenericJob $(...) substitution: the values every form takes in every pod.

Lint-side errors (unresolvable references at their line and column) are in
tests/test_lint_references.py; this file checks what lands in the rendered pods.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from propertykit import examples

from flatjob.compiler.substitution import Context, RefError, find_refs, substitute

CTX = Context(
    job="j",
    replicas={"ps": 1, "worker": 3},
    ports={"http": 2222, "grpc": 50051},
    address=lambda t, r: f"j-{t}-{r}.j",
)


@pytest.mark.parametrize(
    ("text", "rtype", "rank", "want"),
    [
        ("$(type)", "worker", 2, "worker"),
        ("$(rank)", "worker", 2, "2"),
        ("$(replicas[worker])", "ps", 0, "3"),
        ("$(replicas[ps])", "worker", 1, "1"),
        ("$(service.worker[1].host)", "ps", 0, "j-worker-1.j"),
        ("$(service.ps[0].host)", "worker", 2, "j-ps-0.j"),
        ("$(service.port[grpc])", "worker", 0, "50051"),
        ("$(type)$(rank)", "worker", 1, "worker1"),  # adjacent
        ("$(service.worker[0].host):$(service.port[http])", "ps", 0, "j-worker-0.j:2222"),
        ("--rank=$(rank) --of=$(replicas[worker])", "worker", 0, "--rank=0 --of=3"),
        ("$$(rank)", "worker", 1, "$$(rank)"),  # Kubernetes' escape: kept for Kubernetes to unescape
        ("$(HOSTNAME)", "worker", 1, "$(HOSTNAME)"),  # an env var: left for Kubernetes
        ("$$(type)-$(type)", "worker", 1, "$$(type)-worker"),
        ("no refs at all", "ps", 0, "no refs at all"),
        ("$(rank", "worker", 1, "$(rank"),  # unclosed: not a reference (lint warns)
    ],
)
def test_every_form(text: str, rtype: str, rank: int, want: str) -> None:
    assert substitute(text, CTX, rtype, rank) == want


@pytest.mark.parametrize(
    ("text", "code", "words"),
    [
        ("$(service.worker[3].host)", "FJ500", "out of range"),
        ("$(service.chief[0].host)", "FJ500", "no replica type 'chief'"),
        ("$(service.port[https])", "FJ502", "no port named 'https'"),
        ("$(replicas[workers])", "FJ500", "no replica type 'workers'"),
        ("$(service.worker[x].host)", "FJ500", "not a non-negative integer"),
        ("$(service.worker.host)", "FJ500", "not a GenericJob variable"),
    ],
)
def test_unresolvable_references_raise(text: str, code: str, words: str) -> None:
    with pytest.raises(RefError) as err:
        substitute(text, CTX, "worker", 0)
    assert err.value.code == code and words in str(err.value)


def test_service_refs_need_spec_service() -> None:
    ctx = Context("j", {"worker": 1}, None, CTX.address)
    with pytest.raises(RefError) as err:
        substitute("$(service.worker[0].host)", ctx, "worker", 0)
    assert err.value.code == "FJ501"


def test_tf_config_is_valid_json_in_every_pod() -> None:
    text = '{"task":{"type":"$(type)","index":$(rank)},"cluster":{"worker":["$(service.worker[0].host):$(service.port[http])","$(service.worker[1].host):$(service.port[http])","$(service.worker[2].host):$(service.port[http])"]}}'
    for rank in range(3):
        doc = json.loads(substitute(text, CTX, "worker", rank))
        assert doc["task"] == {"type": "worker", "index": rank}
        assert doc["cluster"]["worker"] == [f"j-worker-{i}.j:2222" for i in range(3)]


def test_find_refs_spans() -> None:
    refs = find_refs("a $(type) b $$(rank) $(rank)")
    assert [(r.text, r.start, r.end) for r in refs] == [("type", 2, 9), ("rank", 21, 28)]


def _one_match_at_a_time(value: str, rtype: str, rank: int) -> str:
    """The reference rule, one regex match at a time (substitute's path when `$$(` is present)."""
    from flatjob.compiler.substitution import _REF, is_ours, resolve

    return _REF.sub(lambda m: m.group(0) if m.group(1) or not is_ours(m.group(2)) else resolve(m.group(2), CTX, rtype, rank), value)


PIECES = ["$(rank)", "$(type)", "$(replicas[worker])", "$(service.port[http])", "$(HOME)", "$", "(", ")", "$(", "x", "-", "$$(rank)", "$(ra", "nk)"]


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=12), st.sampled_from(["ps", "worker"]), st.integers(0, 2))
def test_replacing_each_distinct_reference_at_once_is_the_same_as_one_match_at_a_time(pieces: list[str], rtype: str, rank: int) -> None:
    value = "".join(pieces)
    assert substitute(value, CTX, rtype, rank) == _one_match_at_a_time(value, rtype, rank)
