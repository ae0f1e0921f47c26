"""Leader election: runtime.lease.decide_lease, lease_body and MicroTime.

- acquire when there is no Lease, no holder, or the holder stopped renewing; renew our own;
  otherwise wait until the holder's lease runs out (the boundary included);
- the Lease body: renewTime always, acquireTime and leaseTransitions on a take-over;
- MicroTime formatting and its round trip, also in a time zone with summer time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flatjob.runtime.lease import (
    LEASE_SECONDS,
    LeaseDecision,
    decide_lease,
    lease_body,
    micro_time,
    parse_micro_time,
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
        pytest.param(lease("other", renewed=None), T0, LeaseDecision("acquire"), id="never-renewed"),
    ],
)
def test_decide_lease(current: dict[str, Any] | None, now: float, expected: LeaseDecision) -> None:
    assert decide_lease(current, "me", now) == expected


def test_a_malformed_renew_time_counts_as_expired() -> None:
    current = lease("other")
    current["spec"]["renewTime"] = "yesterday"
    assert decide_lease(current, "me", T0).action == "acquire"


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
