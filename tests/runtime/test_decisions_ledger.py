"""The ledger in status.runtime: runtime.model.Ledger.to_dict/from_dict and runtime.nameset.

- pod names are written as sorted brace ranges (`j-worker-{0..4999}`) and read back exactly
  (a hypothesis property: decode(encode(x)) == sorted(set(x)));
- every field survives to_dict -> JSON -> from_dict; a missing or partial ledger is defaults;
- a ledger edited into another shape raises ValueError or TypeError (the runtime refuses the
  record instead of acting on a misread ledger).
"""

from __future__ import annotations

import ast
import inspect
import json
import textwrap
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flatjob.runtime import nameset
from flatjob.runtime.model import Ledger

from .builders import NOW

WORKERS = tuple(f"j-worker-{i}" for i in range(5000))

# names -> their encoding
ENCODED = [
    pytest.param((), [], id="none"),
    pytest.param(("j-worker-0",), ["j-worker-0"], id="one"),
    pytest.param(("j-worker-1", "j-worker-0"), ["j-worker-{0..1}"], id="a-run-of-two"),
    pytest.param(WORKERS[::-1], ["j-worker-{0..4999}"], id="5000-in-any-order"),
    pytest.param(("j-worker-0", "j-worker-1", "j-worker-2", "j-worker-4", "j-worker-6", "j-worker-7"),
                 ["j-worker-4", "j-worker-{0..2}", "j-worker-{6..7}"], id="gaps"),
    pytest.param(("j-worker-9", "j-worker-10", "j-worker-11"), ["j-worker-{9..11}"], id="across-a-digit"),
    pytest.param(("j-launcher", "j-worker-1", "j-master-0", "j-worker-0"), ["j-launcher", "j-master-0", "j-worker-{0..1}"], id="types-and-launcher"),
    pytest.param(("j-worker-3", "j-worker-3"), ["j-worker-3"], id="duplicates"),
    pytest.param(("x-007", "x-008", "x-7"), ["x-00{7..8}", "x-7"], id="leading-zeros-kept"),
    pytest.param(("7", "8", "x"), ["x", "{7..8}"], id="bare-numbers"),
]


@pytest.mark.parametrize(("names", "encoded"), ENCODED)
def test_encode_writes_sorted_brace_ranges_that_decode_back(names: tuple[str, ...], encoded: list[str]) -> None:
    assert nameset.encode(names) == encoded
    assert nameset.decode(encoded) == tuple(sorted(set(names)))


DNS_LABEL = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,12}[a-z0-9])?", fullmatch=True)
INDEXED = st.builds(lambda head, n: f"{head}-{n}", st.sampled_from(["j-worker", "j-master", "big-job-node", "a"]), st.integers(0, 300))


@given(st.lists(st.one_of(DNS_LABEL, INDEXED), max_size=200))
def test_decode_of_encode_is_the_sorted_set(names: list[str]) -> None:
    encoded = nameset.encode(names)
    assert nameset.decode(encoded) == tuple(sorted(set(names)))
    assert encoded == sorted(encoded) and len(encoded) <= len(set(names))
    assert nameset.encode(nameset.decode(encoded)) == encoded


@pytest.mark.parametrize(
    "items",
    [
        pytest.param([1], id="not-a-string"),
        pytest.param([None], id="null"),
        pytest.param([""], id="empty-name"),
        pytest.param(["j-worker-{3..1}"], id="backwards-range"),
        pytest.param(["j-worker-{0..2000000}"], id="range-too-long"),
        pytest.param("j-worker-0", id="a-string-not-a-list"),
        pytest.param({"j-worker-0": 1}, id="a-map-not-a-list"),
    ],
)
def test_decode_refuses_what_encode_never_writes(items: Any) -> None:
    with pytest.raises((ValueError, TypeError)):
        nameset.decode(items)


# --- the ledger -------------------------------------------------------------------------------

FULL = Ledger(
    attempt=3,
    released=tuple(sorted(WORKERS[:4000])),
    succeeded=("j-worker-4000", "j-worker-4001"),
    failed=("j-launcher",),
    cleaned_up=True,
    restarts={"worker": 5000, "launcher": 1},
    replica_restarts={"j-worker-3": 2},
    backoff_count=2,
    not_before={"j-worker-4002": NOW + 10.5},
    gang_not_before=NOW + 20,
    refused="the API server refused pod j-worker-4003: exceeded quota",
    refusals=2,
    start_time=NOW - 100,
    size=4,
    outcome="Failed",
    reason="BackoffLimitExceeded",
    message="restart limit 2 reached",
    finished_at=NOW,
    paused=True,
    resuming=True,
    observed_generation=7,
    replica_failed="Pod[j-worker-7] exited with error code 1",
    incident_at=NOW - 5,
    incident=("j-worker-1", "j-worker-2"),
    disruptions=3,
    disrupted={f"j-worker-{i}": NOW - 60 for i in range(10, 500)} | {"j-worker-7": NOW - 20},  # a drain of many nodes: grouped
    disrupted_end={"j-worker-7": NOW - 2},
    settling={"j-worker-9": NOW - 1},
)


@pytest.mark.parametrize(
    "led",
    [
        pytest.param(Ledger(), id="defaults"),
        pytest.param(Ledger(released=("j-master-0", "j-worker-0", "j-worker-1"), start_time=NOW), id="running"),
        pytest.param(FULL, id="every-field"),
    ],
)
def test_ledger_round_trips_through_json(led: Ledger) -> None:
    data = json.loads(json.dumps(led.to_dict()))
    assert Ledger.from_dict(data) == led
    assert data == led.to_dict()


def test_names_are_stored_as_brace_ranges() -> None:
    data = FULL.to_dict()
    assert (data["released"], data["succeeded"], data["failed"]) == (["j-worker-{0..3999}"], ["j-worker-{4000..4001}"], ["j-launcher"])
    assert len(json.dumps(data)) < 1024


def test_release_order_is_not_kept_but_the_names_are() -> None:
    """The ledger names sets of pods; status.runtime writes them sorted."""
    led = Ledger(released=("j-worker-1", "j-worker-2", "j-worker-0"))
    assert Ledger.from_dict(led.to_dict()).released == ("j-worker-0", "j-worker-1", "j-worker-2")
    assert Ledger.from_dict(led.to_dict()).to_dict() == led.to_dict()


def test_optional_fields_are_left_out_until_set() -> None:
    assert set(Ledger().to_dict()) == {
        "attempt", "released", "succeeded", "failed", "cleanedUp", "restarts", "replicaRestarts", "backoffCount", "notBefore", "levels", "paused", "resuming",
    }


@pytest.mark.parametrize("data", [None, {}, {"attempt": 1}], ids=["missing", "empty", "partial"])
def test_a_missing_or_partial_ledger_is_defaults(data: dict[str, Any] | None) -> None:
    assert Ledger.from_dict(data) == Ledger()


@pytest.mark.parametrize(
    "data",
    [
        pytest.param({"attempt": "two"}, id="attempt-not-a-number"),
        pytest.param({"released": "j-worker-0"}, id="released-a-string"),
        pytest.param({"released": [7]}, id="released-not-names"),
        pytest.param({"failed": ["j-worker-{9..1}"]}, id="failed-backwards-range"),
        pytest.param({"restarts": {"worker": "many"}}, id="restarts-not-a-number"),
        pytest.param({"notBefore": {"j-worker-0": "soon"}}, id="not-before-not-a-time"),
        pytest.param({"gangNotBefore": "soon"}, id="gang-not-before-not-a-time"),
        pytest.param({"refusals": []}, id="refusals-a-list"),
        pytest.param({"message": [{"a": 0}] * 1000}, id="message-a-list"),
        pytest.param({"outcome": "Maybe"}, id="outcome-not-an-outcome"),
        pytest.param({"size": "4"}, id="size-a-string"),
        pytest.param({"observedGeneration": {"g": 1}}, id="generation-a-mapping"),
        pytest.param({"sshSecretUid": 7}, id="secret-uid-a-number"),
        pytest.param({"disrupted": ["j-worker-0"]}, id="disrupted-a-list"),
    ],
)
def test_a_ledger_edited_into_another_shape_is_refused(data: dict[str, Any]) -> None:
    with pytest.raises((ValueError, TypeError)):
        Ledger.from_dict(data)


def test_messages_read_back_are_cut() -> None:
    """Written back at every status write: a megabyte put there would stay for good."""
    led = Ledger.from_dict({"message": "m" * 1_000_000, "replicaFailed": "r" * 1_000_000, "reason": "x" * 10_000})
    assert max(len(led.message or ""), len(led.replica_failed or ""), len(led.reason or "")) == 4096


RUN_HEADS = st.sampled_from(["j-worker-", "j-master-", "a-b-c-", "a-b-", "x-"])


@given(st.dictionaries(RUN_HEADS, st.integers(0, 40), max_size=4), st.sets(DNS_LABEL, max_size=3),
       st.lists(st.one_of(DNS_LABEL, INDEXED, st.builds(lambda h, n: f"{h}{n}", RUN_HEADS, st.sampled_from(["00", "01", "7", "39", "40", "1e3", "-1", "٣"]))), max_size=40))
def test_pod_names_hold_exactly_the_names_their_runs_expand_to(runs: dict[str, int], singles: set[str], probes: list[str]) -> None:
    """What a record renders, kept as runs (review of round 11 #3), answers `in` as its expansion would."""
    names = nameset.PodNames.of(runs, singles)
    expanded = set(singles) | {f"{head}{i}" for head, count in runs.items() for i in range(count)}
    assert set(names) == expanded
    for probe in [*probes, *expanded]:
        assert (probe in names) == (probe in expanded), probe
    assert names & probes == frozenset(expanded) & set(probes) == set(probes) & names


@given(st.lists(st.tuples(st.dictionaries(RUN_HEADS, st.integers(0, 20), max_size=3), st.sets(DNS_LABEL, max_size=2)), max_size=4))
def test_the_union_of_pod_names_holds_every_name_and_contains_each(many: list[tuple[dict[str, int], set[str]]]) -> None:
    parts = [nameset.PodNames.of(runs, singles) for runs, singles in many]
    union = nameset.PodNames.union(parts)
    assert set(union) == set().union(*(set(p) for p in parts))
    assert all(p <= union for p in [*parts, union, nameset.NO_NAMES])


@pytest.mark.parametrize(
    "edit",
    [{"attempt": int("9" * 4000)}, {"attempt": 1e30}, {"attempt": "5"}, {"attempt": -1}, {"attempt": True}, {"backoffCount": 2**63},
     {"restarts": {"a-0": 2**64}}, {"replicaRestarts": {"9" * 400: ["a-0"]}}, {"levels": {"-1": ["a-0"]}}, {"levels": {"٣": ["a-0"]}}],
)
def test_a_count_past_int64_or_not_an_integer_is_unreadable(edit: dict) -> None:
    """Counters are JSON integers from 0 to int64's largest, as the runtime writes them: pods
    carry the attempt and restart count as annotations sized for that (RUNTIME_POD_NOTES), and
    anyone who may update the status may write anything there (helper review of issue 21, round 4)."""
    with pytest.raises(ValueError):
        Ledger.from_dict({**Ledger().to_dict(), **edit})


def _read_by_from_dict() -> set[str]:
    """The members of status.runtime Ledger.from_dict reads, from its source (`d.get("...")`)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(Ledger.from_dict)))
    gets = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get"
            and isinstance(n.func.value, ast.Name) and n.func.value.id == "d"]
    uses = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "d" and isinstance(n.ctx, ast.Load)]
    assert len(uses) == len(gets), "from_dict reads the ledger other than by d.get(\"<member>\"): teach this test to see it"
    assert all(isinstance(g.args[0], ast.Constant) and isinstance(g.args[0].value, str) for g in gets)
    return {g.args[0].value for g in gets}  # type: ignore[attr-defined]


def test_ledger_keys_are_what_from_dict_reads_and_to_dict_writes() -> None:
    """Ledger.KEYS is what a status too big to cache keeps of status.runtime (trim.status_read):
    a member from_dict reads and KEYS lacks would be dropped from such a status, so the ledger
    read back would lose it (and the cycle write it away); a member in KEYS that nothing reads
    is junk kept. Each member to_dict writes is one from_dict reads (it changes the ledger)."""
    assert _read_by_from_dict() == Ledger.KEYS
    written = FULL.to_dict()
    assert set(written) <= Ledger.KEYS
    defaults = Ledger().to_dict()
    for key, value in json.loads(json.dumps(written)).items():
        if value != defaults.get(key):  # (FULL leaves a few at their defaults)
            assert Ledger.from_dict({key: value}) != Ledger(), key
