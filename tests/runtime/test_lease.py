"""Leader election: runtime.lease.decide_lease, observe, leading, lease_body and MicroTime.

- acquire when there is no Lease or no holder; renew our own; otherwise wait until the
  holder's record has not changed for its leaseDurationSeconds, measured from the *local*
  time this runtime first saw that record (client-go's observedTime), never from renewTime;
- a leader acts only while its last renewal is within the renew deadline, which is shorter
  than the lease, so it stops before anyone may take over;
- the Lease body: renewTime always, acquireTime and leaseTransitions on a take-over, an
  ownerReference to the record;
- MicroTime formatting and its round trip, also in a time zone with summer time.
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flatjob.runtime.api import ApiError, Conflict, NotFound
from flatjob.runtime.lease import (
    LEASE_MAX,
    LEASE_SECONDS,
    RENEW_DEADLINE,
    LeaseDecision,
    Observed,
    decide_lease,
    leading,
    lease_body,
    micro_time,
    observe,
    parse_micro_time,
    released_body,
)

T0 = 1_718_000_000.0  # 2024-06-10T06:13:20Z: summer time in Europe


def lease(holder: str | None, renewed: float | None = T0, duration: int | None = 30) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if holder is not None:
        spec["holderIdentity"] = holder
    if renewed is not None:
        spec["renewTime"] = micro_time(renewed)
    if duration is not None:
        spec["leaseDurationSeconds"] = duration
    return {"metadata": {"name": "j-runtime", "resourceVersion": "7"}, "spec": spec}


def seen_at(current: dict[str, Any] | None, at: float) -> Observed:
    return observe(current, None, at)


@pytest.mark.parametrize(
    ("current", "now", "expected"),
    [
        pytest.param(None, T0, LeaseDecision("acquire"), id="no-lease"),
        pytest.param(lease("me"), T0 + 5, LeaseDecision("renew"), id="ours"),
        pytest.param(lease("me"), T0 + 500, LeaseDecision("renew"), id="ours-even-expired"),
        pytest.param(lease(""), T0 + 1, LeaseDecision("acquire"), id="released-by-holder"),
        pytest.param(lease(None), T0 + 1, LeaseDecision("acquire"), id="no-holder"),
        pytest.param(lease("other"), T0 + 10, LeaseDecision("wait", T0 + 30), id="other-holder-fresh"),
        pytest.param(lease("other"), T0 + 29.999, LeaseDecision("wait", T0 + 30), id="other-holder-just-before-expiry"),
        pytest.param(lease("other"), T0 + 30, LeaseDecision("acquire"), id="other-holder-at-expiry"),
        pytest.param(lease("other"), T0 + 300, LeaseDecision("acquire"), id="other-holder-long-expired"),
        pytest.param(lease("other", duration=None), T0 + 10, LeaseDecision("wait", T0 + LEASE_SECONDS), id="default-duration"),
        pytest.param(lease("other", duration=60), T0 + 45, LeaseDecision("wait", T0 + 60), id="their-duration"),
        pytest.param(lease("other", renewed=None), T0 + 10, LeaseDecision("wait", T0 + 30), id="never-renewed-but-just-seen"),
    ],
)
def test_decide_lease(current: dict[str, Any] | None, now: float, expected: LeaseDecision) -> None:
    # First seen at T0 (local time); expiry counts from there.
    assert decide_lease(current, "me", seen_at(current, T0), now) == expected


@pytest.mark.parametrize(("now", "expected"), [
    pytest.param(T0 + 10, LeaseDecision("wait", T0 + 30), id="named-but-not-taken-waited-out"),
    pytest.param(T0 + 30, LeaseDecision("acquire"), id="then-acquired"),
])
def test_a_lease_naming_this_runtime_that_it_does_not_hold_is_waited_out(now: float, expected: LeaseDecision) -> None:
    """A tenant's edit naming the standby (or this pod's previous container) never makes it
    renew at once while the leader still leads (review of round 11)."""
    current = lease("me")
    assert decide_lease(current, "me", seen_at(current, T0), now, holding=False) == expected


@pytest.mark.parametrize("skew", [-3600.0, -20.0, 0.0, 20.0, 3600.0])
def test_expiry_ignores_the_holders_clock(skew: float) -> None:
    # The holder's renewTime comes from its own clock; however far off it is, a record first
    # seen now is live for a whole lease duration of *our* time.
    current = lease("other", renewed=T0 + skew)
    seen = seen_at(current, T0)
    assert decide_lease(current, "me", seen, T0 + 29) == LeaseDecision("wait", T0 + 30)
    assert decide_lease(current, "me", seen, T0 + 30).action == "acquire"


def test_a_record_that_changes_is_live_again() -> None:
    first = lease("other", renewed=T0)
    seen = seen_at(first, T0)
    renewed = lease("other", renewed=T0 + 25)
    seen = observe(renewed, seen, T0 + 28)  # we read it again at T0+28 and see it renewed
    assert seen.at == T0 + 28
    assert decide_lease(renewed, "me", seen, T0 + 40) == LeaseDecision("wait", T0 + 58)
    same = observe(renewed, seen, T0 + 50)  # unchanged: still first seen at T0+28
    assert same.at == T0 + 28
    assert decide_lease(renewed, "me", same, T0 + 58).action == "acquire"


def test_a_leader_stops_acting_before_anyone_may_take_over() -> None:
    assert RENEW_DEADLINE < LEASE_SECONDS
    assert leading(T0, T0) and leading(T0, T0 + RENEW_DEADLINE - 0.001)
    assert not leading(T0, T0 + RENEW_DEADLINE)
    assert not leading(None, T0)


@pytest.mark.parametrize("bad", [{"renewTime": "yesterday"}, {"leaseDurationSeconds": "30"}, {"leaseDurationSeconds": -1}, {"leaseTransitions": "x"}])
def test_a_hand_edited_lease_is_judged_by_observation_without_error(bad: dict[str, Any]) -> None:
    current = lease("other")
    current["spec"].update(bad)
    assert decide_lease(current, "me", seen_at(current, T0), T0 + 10) == LeaseDecision("wait", T0 + LEASE_SECONDS)
    assert lease_body("j-runtime", "ns", "me", T0 + 40, current)["spec"]["holderIdentity"] == "me"


@pytest.mark.parametrize("duration", [86_400, 2_147_483_647])
def test_a_lease_claiming_longer_than_any_flatjob_runtime_writes_is_believed_for_lease_max(duration: int) -> None:
    """One Lease write by a tenant (a holder nobody runs, 2^31-1 s) held the runtime off for 68
    years (review of round 13): a Lease lasts at most LEASE_MAX after it last changed."""
    current = lease("nobody-runs-me", duration=duration)
    assert decide_lease(current, "me", seen_at(current, T0), T0 + 10) == LeaseDecision("wait", T0 + LEASE_MAX)
    assert decide_lease(current, "me", seen_at(current, T0), T0 + LEASE_MAX) == LeaseDecision("acquire")


def test_lease_body_on_create() -> None:
    body = lease_body("j-runtime", "ns", "me", T0, None)
    assert body == {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "j-runtime", "namespace": "ns"},
        "spec": {
            "holderIdentity": "me",
            "leaseDurationSeconds": LEASE_SECONDS,
            "renewTime": micro_time(T0),
            "acquireTime": micro_time(T0),
            "leaseTransitions": 0,
        },
    }


def test_lease_body_on_renew_keeps_acquire_time() -> None:
    current = lease("me")
    current["spec"].update(acquireTime=micro_time(T0 - 100), leaseTransitions=2)
    body = lease_body("j-runtime", "ns", "me", T0 + 10, current)
    assert body["metadata"]["resourceVersion"] == "7"
    assert body["spec"]["renewTime"] == micro_time(T0 + 10)
    assert (body["spec"]["acquireTime"], body["spec"]["leaseTransitions"]) == (micro_time(T0 - 100), 2)


def test_the_lease_is_owned_by_the_record_and_keeps_its_owner() -> None:
    owner = {"apiVersion": "flatjob.dev/v1beta1", "kind": "PyTorchTrainingJob", "name": "j", "uid": "u-1"}
    created = lease_body("j-runtime", "ns", "me", T0, None, owner)
    assert created["metadata"]["ownerReferences"] == [owner]
    current = {**created, "metadata": {**created["metadata"], "resourceVersion": "3"}}
    assert lease_body("j-runtime", "ns", "me", T0 + 5, current, {**owner, "uid": "u-2"})["metadata"]["ownerReferences"] == [owner]
    assert "ownerReferences" not in lease_body("j-runtime", "ns", "me", T0, None, {**owner, "uid": None})["metadata"]


def test_released_lease_has_no_holder() -> None:
    body = released_body({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "j-runtime", "resourceVersion": "9"}, "spec": {"holderIdentity": "me", "leaseDurationSeconds": 30}}, T0)
    assert body["spec"]["holderIdentity"] == "" and body["metadata"]["resourceVersion"] == "9"
    assert decide_lease(body, "other", seen_at(body, T0), T0).action == "acquire"


def test_lease_body_on_take_over_counts_a_transition() -> None:
    current = lease("other")
    current["spec"]["leaseTransitions"] = 2
    body = lease_body("j-runtime", "ns", "me", T0 + 40, current)
    assert body["spec"]["holderIdentity"] == "me"
    assert (body["spec"]["acquireTime"], body["spec"]["leaseTransitions"]) == (micro_time(T0 + 40), 3)


# --- MicroTime ------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("ts", "text"),
    [
        (0.0, "1970-01-01T00:00:00.000000Z"),
        (T0, "2024-06-10T06:13:20.000000Z"),
        (T0 + 0.25, "2024-06-10T06:13:20.250000Z"),
        (T0 + 0.123456, "2024-06-10T06:13:20.123456Z"),
    ],
)
def test_micro_time_format(ts: float, text: str) -> None:
    assert micro_time(ts) == text


@pytest.mark.parametrize("ts", [0.0, T0, T0 + 0.5, 1_705_000_000.75], ids=["epoch", "summer", "fraction", "winter"])
def test_micro_time_round_trip_utc(ts: float) -> None:
    got = parse_micro_time(micro_time(ts))
    assert got is not None and abs(got - ts) < 1e-6


@pytest.mark.parametrize("text", [None, "", "not a time", "2024-13-40T00:00:00Z"])
def test_unreadable_micro_time_is_none(text: str | None) -> None:
    assert parse_micro_time(text) is None


def test_micro_time_without_fraction() -> None:
    assert parse_micro_time("2024-06-10T06:13:20Z") == T0


@pytest.fixture
def summer_time_zone() -> Iterator[None]:
    if not Path("/usr/share/zoneinfo/Europe/Berlin").exists():
        pytest.skip("no tz database")
    old = os.environ.get("TZ")
    os.environ["TZ"] = "Europe/Berlin"
    time.tzset()
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = old
        time.tzset()


def test_micro_time_round_trip_in_a_summer_time_zone(summer_time_zone: None) -> None:
    got = parse_micro_time(micro_time(T0))
    assert got == T0


class _SlowLeaseCluster:
    """A cluster whose Lease GETs take `delay` seconds of the runtime's clock; the record
    exists, and another runtime holds a live Lease."""

    def __init__(self, clock: list[float], delay: float, holder: dict[str, Any]):
        self.clock, self.delay, self.holder = clock, delay, holder

    def get(self, res: Any, namespace: str, name: str) -> dict[str, Any]:
        self.clock[0] += self.delay  # the answer comes back this much later
        return self.holder

    def create(self, *a: Any, **k: Any) -> Any:
        raise AssertionError("must not take the Lease over")

    replace = create


def test_a_slow_lease_get_dates_the_look_after_it_returns() -> None:
    """client-go's setObservedRecord stamps the observation after the GET returned: a GET that
    took 20 s must not make the holder's Lease look 20 s older (two runtimes acting at once)."""
    from flatjob.runtime.controller import Controller

    now = [T0]
    holder = {"metadata": {"name": "j-runtime", "resourceVersion": "5"}, "spec": {"holderIdentity": "other", "leaseDurationSeconds": LEASE_SECONDS, "renewTime": "2024-01-01T00:00:00.000000Z"}}
    c = Controller(_SlowLeaseCluster(now, 20.0, holder), "default", "PyTorchTrainingJob", "j", identity="me", clock=lambda: now[0])  # type: ignore[arg-type]
    assert c._hold_lease() is False
    assert c._observed is not None and c._observed.at == T0 + 20  # after the GET, not before
    now[0] = T0 + 20 + LEASE_SECONDS - 1  # the holder has not renewed, but its Lease is not out yet
    assert c._hold_lease() is False



class _Leases:
    """The API server's Lease, shared by every runtime's connection to it."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.rv = 0

    def write(self, body: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        self.lease = {**copy.deepcopy(body), "metadata": {**body["metadata"], "resourceVersion": str(self.rv)}}
        return copy.deepcopy(self.lease)


class _Connection:
    """One runtime's connection: every write is applied, the next `lose` answers never arrive
    (504, a time-out), and while `cut` nothing gets through (a partition)."""

    def __init__(self, server: _Leases) -> None:
        self.server, self.lose, self.cut = server, 0, False

    def get(self, res: Any, namespace: str, name: str) -> dict[str, Any]:
        if self.cut:
            raise ApiError("connection refused", status=503)
        if self.server.lease is None:
            raise NotFound("leases", name)
        return copy.deepcopy(self.server.lease)

    def _write(self, res: Any, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.cut:
            raise ApiError("connection refused", status=503)
        current = self.server.lease
        if current is not None and body["metadata"].get("resourceVersion") not in (None, current["metadata"]["resourceVersion"]):
            raise Conflict("the object has been modified")
        written = self.server.write(body)
        if self.lose > 0:
            self.lose -= 1
            raise ApiError("the server was unable to return a response in the time allotted", status=504)
        return written

    create = replace = _write


def _runtime(connection: _Connection, identity: str, now: list[float]) -> Any:
    from flatjob.runtime.controller import Controller

    return Controller(connection, "default", "PyTorchTrainingJob", "j", identity=identity, clock=lambda: now[0], mono=lambda: now[0])  # type: ignore[arg-type]


@pytest.mark.parametrize("forged", [False, True], ids=["its-own-write", "a-forged-holder"])
def test_a_lease_write_whose_answer_was_lost_is_known_by_its_renew_time(forged: bool) -> None:
    """A renewal the API server applied but whose answer never came (a time-out) names this
    runtime with the renewTime it sent: it renews on, instead of waiting out its own Lease for
    30 s (liveness review of issue 24); a forged holderIdentity with any other renewTime is
    still waited out."""
    from flatjob.runtime.controller import LEASE_RETRY

    now, server = [T0], _Leases()
    connection = _Connection(server)
    c = _runtime(connection, "me", now)
    assert c._hold_lease() is True  # acquired
    connection.lose = 1
    now[0] += 5.0  # RENEW_EVERY: the renewal's answer is lost
    assert c._hold_lease() is True  # still within the renew deadline
    if forged:  # a tenant rewrites it naming this runtime, with another renewTime
        assert server.lease is not None
        server.write({**server.lease, "spec": {**server.lease["spec"], "renewTime": micro_time(now[0] - 1)}})
    now[0] += LEASE_RETRY
    assert c._hold_lease() is (not forged)


def test_a_replayed_renew_time_never_makes_two_runtimes_lead() -> None:
    """A's renewal lands, its answer lost, then A is cut off; B takes the Lease over once it ran
    out; a tenant who read A's landed write replays its holder and renewTime right after B
    renews. A, back, must wait that out: its renew deadline has long passed, so the renewTime
    proves nothing any more (review of the lost-answer change: both led for 1.75 s)."""
    now, server = [T0], _Leases()
    ca, cb = _Connection(server), _Connection(server)
    a, b = _runtime(ca, "a", now), _runtime(cb, "b", now)
    assert a._hold_lease() is True
    now[0] += 1
    assert b._hold_lease() is False
    now[0] = T0 + 5
    ca.lose = 1
    assert a._hold_lease() is True  # the renewal lands; its answer is lost
    seen = copy.deepcopy(server.lease)  # anyone who may get or watch Leases reads it
    assert seen is not None and seen["spec"]["holderIdentity"] == "a"
    ca.cut = True
    while now[0] < T0 + 70:
        now[0] += 1
        a._hold_lease()
        b._hold_lease()
    assert not a.leading() and b.leading()  # b took over, properly, once the Lease ran out
    renewed = server.rv
    while server.rv == renewed:  # b's next renewal
        now[0] += 0.25
        b._hold_lease()
    assert server.lease is not None
    server.write({**server.lease, "spec": {**server.lease["spec"], "holderIdentity": "a", "renewTime": seen["spec"]["renewTime"]}})
    ca.cut = False
    both = []
    for _ in range(40):  # 10 s, each polling as its loop does
        now[0] += 0.25
        a._hold_lease()
        b._hold_lease()
        if a.leading() and b.leading():
            both.append(now[0] - T0)
    assert not both, f"two runtimes lead at once, at T0+{both}"


@pytest.mark.parametrize(("found", "written"), [(2, 3), (2**31 - 2, 2**31 - 1), (2**31 - 1, 2**31 - 1), (2**40, 1), (-3, 1), ("7", 1), (True, 1), (None, 1)])
def test_a_take_over_counts_a_transition_within_an_int32(found: Any, written: int) -> None:
    """The API server refuses a leaseTransitions past 2^31-1 (an int32): a tenant's Lease at that
    count made every take-over fail (hx22)."""
    current = lease("other")
    current["spec"]["leaseTransitions"] = found
    assert lease_body("j-runtime", "ns", "me", T0, current)["spec"]["leaseTransitions"] == written
