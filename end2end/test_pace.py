"""A subscription's pace (`rate_limit_per_sec`), black-box: at most that many attempts a second to
its endpoint.

- a paced endpoint gets its messages within its rate over every second, and all of them in the
  end, each delivered at its first attempt (waiting for a turn spends no attempt), while an unpaced
  endpoint that gets the same events is not held up;
- on PostgreSQL, two processes that count each other take half the rate each: together they stay
  within it;
- rates out of 1..=10000, or not whole numbers, are refused with 422 naming `rate_limit_per_sec`
  and change nothing; `null` removes the pace.

The rate is read from the receiver's arrival times (`received_monotonic`): in every window of one
second that starts at an arrival, at most the rate plus one (for the clocks' granularity).
"""

from __future__ import annotations

import bisect
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests

from conftest import TwoProcesses
from harness import ApiClient, HeraldServer, Tenant, TestDatabase, cloud_event, describe, unique, wait_until
from webhook_receiver import ReceivedRequest, Receiver

RATE = 10  # attempts a second
SHARED_RATE = 50  # attempts a second, shared by two processes: 25 each
WAIT = 40.0  # seconds: the longest run here takes 4, and a loaded machine is slow

# ---------------------------------------------------------------------------------------------
# Helpers


def subscribe(tenant: Tenant, receiver: Receiver, event_type: str, **options: Any) -> dict:
    """A subscription of `tenant` to `event_type`, on a path of its own on the receiver."""
    body = {"name": unique("pace"), "url": receiver.url(f"/{unique('pace')}"), "event_types": [event_type]}
    return tenant.client.post("/api/v1/subscriptions", json={**body, **options}, expect=201).json()


def path_of(sub: dict) -> str:
    return urlsplit(sub["url"]).path


def publish(client: ApiClient, event_type: str, n: int) -> None:
    """Publishes `n` events of `event_type` in one batch."""
    client.publish([cloud_event(unique("evt"), event_type) for _ in range(n)])


def busiest_second(arrivals: list[ReceivedRequest]) -> int:
    """The most arrivals within one second [t, t + 1 s); the busiest such window starts at one."""
    times = sorted(r.received_monotonic for r in arrivals)
    return max(bisect.bisect_left(times, t + 1.0) - i for i, t in enumerate(times))


def timeline(arrivals: list[ReceivedRequest]) -> list[float]:
    """Each arrival's time after the first, in seconds, in order, for failure messages."""
    times = sorted(r.received_monotonic for r in arrivals)
    return [round(t - times[0], 3) for t in times]


def assert_within_rate(arrivals: list[ReceivedRequest], n: int, rate: int, most: int) -> None:
    """`n` arrivals, at most `most` within any second, spaced as `rate` a second needs."""
    assert len(arrivals) == n, f"{n} deliveries, no more: {len(arrivals)}"
    busiest = busiest_second(arrivals)
    assert busiest <= most, f"{busiest} arrivals within one second at {rate} a second: {timeline(arrivals)}"
    times = [r.received_monotonic for r in arrivals]
    took = max(times) - min(times)
    least = (n - 1) / rate - 1  # a second less than the spacing needs, for the clocks
    assert took >= least, f"{n} arrivals at {rate} a second take {least + 1:.1f} s, not {took:.1f}"


def assert_delivered_at_first_attempt(client: ApiClient, sub: dict, n: int) -> None:
    """Waits until the `n` messages of `sub` are recorded as delivered (or dead); each must be
    delivered with one attempt: waiting for a turn spends none."""

    def settled() -> list[dict] | None:
        messages = client.list_all("/api/v1/messages", {"subscription_id": sub["id"]})
        done = len(messages) == n and all(m["state"] in ("delivered", "dead") for m in messages)
        return messages if done else None

    messages = wait_until(settled, WAIT, f"the {n} messages of {sub['id']} to be recorded as delivered")
    wrong = [(m["id"], m["state"], m["attempt_count"]) for m in messages]
    wrong = [(id_, state, count) for id_, state, count in wrong if (state, count) != ("delivered", 1)]
    assert not wrong, f"every paced message is delivered at its first attempt: {wrong}"


def assert_refused(resp: requests.Response) -> None:
    assert resp.status_code == 422, f"expected 422: {describe(resp)}"
    media_type = resp.headers.get("content-type", "").split(";")[0].strip()
    assert media_type == "application/problem+json", f"a problem+json answer: {describe(resp)}"
    errors = resp.json().get("errors") or []
    assert errors and errors[0].get("field") == "rate_limit_per_sec", f"names rate_limit_per_sec: {describe(resp)}"


def each_counts_the_other(database: TestDatabase) -> bool:
    """Whether both processes have beaten since half a second after the later one started: each
    counts the processes alive right after its beat, so each then paces at half the rate."""
    import psycopg

    with psycopg.connect(database.url) as conn:
        rows = conn.execute("SELECT started_at, heartbeat_at FROM herald_processes").fetchall()
    return len(rows) == 2 and min(beat for _, beat in rows) >= max(start for start, _ in rows) + 500


@pytest.fixture
def tenant(herald: HeraldServer) -> Tenant:
    return herald.new_tenant("pace")


# ---------------------------------------------------------------------------------------------
# The pace


def test_a_paced_endpoint_stays_within_its_rate_and_holds_up_no_other(tenant: Tenant, receiver: Receiver) -> None:
    event_type = unique("pace.order")
    paced = subscribe(tenant, receiver, event_type, rate_limit_per_sec=RATE)
    unpaced = subscribe(tenant, receiver, event_type)
    assert paced.get("rate_limit_per_sec") == RATE, f"the subscription shows its pace: {paced}"
    assert "rate_limit_per_sec" in unpaced and unpaced["rate_limit_per_sec"] is None, f"null: {unpaced}"

    publish(tenant.client, event_type, 40)
    fast = receiver.wait_for_path(path_of(unpaced), 40, WAIT)
    slow = receiver.wait_for_path(path_of(paced), 40, WAIT)
    all_fast = fast[39].received_monotonic
    paced_by_then = sum(1 for r in slow if r.received_monotonic <= all_fast)
    assert paced_by_then <= 20, (
        f"the unpaced endpoint had its 40 deliveries {all_fast - slow[0].received_monotonic:.2f} s after the "
        f"paced one's first, when the paced one had {paced_by_then}: it must not wait for the pace"
    )

    assert_delivered_at_first_attempt(tenant.client, paced, 40)
    assert_within_rate(receiver.on_path(path_of(paced)), 40, RATE, RATE + 1)
    assert len(receiver.on_path(path_of(unpaced))) == 40, "the unpaced endpoint gets each message once"


def test_the_pace_is_held_across_two_processes(
    two_processes: TwoProcesses, fresh_database: TestDatabase, receiver: Receiver
) -> None:
    a, b = two_processes("pace")
    tenant = a.new_tenant("pace-two")
    event_type = unique("pace.shared")
    sub = subscribe(tenant, receiver, event_type, rate_limit_per_sec=SHARED_RATE)
    # Each process counts the processes alive at its heartbeat, every 2 s.
    wait_until(lambda: each_counts_the_other(fresh_database), 15, "both processes to beat after both started")

    # Each process leases and paces the messages published through it.
    publish(tenant.client, event_type, 100)
    publish(b.client(tenant.api_key["token"]), event_type, 100)
    receiver.wait_for_path(path_of(sub), 200, WAIT)

    assert_delivered_at_first_attempt(tenant.client, sub, 200)
    # Within 10 %: each process keeps its half, up to one early turn each.
    assert_within_rate(receiver.on_path(path_of(sub)), 200, SHARED_RATE, SHARED_RATE * 11 // 10)


# ---------------------------------------------------------------------------------------------
# Bad input


def test_bad_rates_are_refused_and_change_nothing(tenant: Tenant, receiver: Receiver) -> None:
    event_type = unique("pace.bad")
    sub = subscribe(tenant, receiver, event_type, rate_limit_per_sec=RATE)
    url = f"/api/v1/subscriptions/{sub['id']}"
    refused_names = set()
    for bad in (0, 10001, -1, "x", 1.5):
        name = unique("refused")
        refused_names.add(name)
        body = {"name": name, "url": sub["url"], "event_types": [event_type], "rate_limit_per_sec": bad}
        assert_refused(tenant.client.post("/api/v1/subscriptions", json=body))
        assert_refused(tenant.client.patch(url, json={"rate_limit_per_sec": bad}))
        after = tenant.client.get(url, expect=200).json()
        kept = (after.get("updated_at"), after.get("rate_limit_per_sec"))
        assert kept == (sub["updated_at"], RATE), f"a refused PATCH ({bad!r}) changes nothing: {after}"
    created = [s for s in tenant.client.list_all("/api/v1/subscriptions") if s["name"] in refused_names]
    assert not created, f"a refused create stores nothing: {created}"

    for rate in (1, 10000):
        changed = tenant.client.patch(url, json={"rate_limit_per_sec": rate}, expect=200).json()
        assert changed.get("rate_limit_per_sec") == rate, f"{rate} is within 1..=10000: {changed}"
    renamed = tenant.client.patch(url, json={"name": unique("renamed")}, expect=200).json()
    assert renamed.get("rate_limit_per_sec") == 10000, f"a PATCH without the field keeps it: {renamed}"
    removed = tenant.client.patch(url, json={"rate_limit_per_sec": None}, expect=200).json()
    assert "rate_limit_per_sec" in removed and removed["rate_limit_per_sec"] is None, f"null removes it: {removed}"
    assert tenant.client.get(url, expect=200).json().get("rate_limit_per_sec") is None, "and it stays removed"
