"""Replays as durable jobs, black-box: a replay answers at once and goes on in the background.

- a window of thousands of events answers 202 `running` at once, and is done later without its
  client waiting; killed with SIGKILL in the middle and restarted, Herald finishes the job, and
  every event of the window got exactly one new message from it;
- on PostgreSQL, a job started by one process is finished by the other after the first is killed,
  again with every event replayed exactly once;
- an unknown job, or another customer's, answers 404 problem+json.

The subscription is paused, so the replayed messages are held rather than delivered: the test
counts what the job made, not what a receiver got.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import datetime, timedelta, timezone

from conftest import SpawnHerald, TwoProcesses
from harness import HeraldServer, Tenant, cloud_event, describe, unique, wait_until
from webhook_receiver import Receiver

EVENTS = 20_000
WAIT = 180.0  # seconds: a debug build on a loaded machine replays a few thousand events a second


def archive(server: HeraldServer, receiver: Receiver) -> tuple[Tenant, dict, dict]:
    """A customer with `EVENTS` kept events of one type and a paused subscription to it: (tenant,
    subscription, the replay's window)."""
    tenant = server.new_tenant("replays")
    event_type = unique("replay.order")
    since = datetime.now(timezone.utc) - timedelta(minutes=1)
    for start in range(0, EVENTS, 1000):
        tenant.client.publish([cloud_event(f"r-{n}", event_type) for n in range(start, start + 1000)])
    body = {"name": unique("replays"), "url": receiver.url("/replays"), "event_types": [event_type], "status": "paused"}
    sub = tenant.client.post("/api/v1/subscriptions", json=body, expect=201).json()
    until = datetime.now(timezone.utc) + timedelta(minutes=1)
    window = {"since": since.isoformat(), "until": until.isoformat(), "subscription_id": sub["id"]}
    return tenant, sub, window


def job(tenant: Tenant, replay_id: str) -> dict:
    return tenant.client.get(f"/api/v1/replays/{replay_id}", expect=200).json()


def kill_mid_job(server: HeraldServer, tenant: Tenant, replay_id: str) -> int:
    """Waits until the job is past its first batches, kills the process, and says how far it got."""

    def underway() -> int | None:
        replayed = job(tenant, replay_id)["replayed"]
        return replayed if replayed >= 2000 else None

    replayed = wait_until(underway, WAIT, "the replay to be underway", interval=0.05)
    server.kill()
    assert replayed < EVENTS, f"the job ended before the kill ({replayed}): nothing was left to resume"
    return replayed


def assert_each_event_replayed_once(tenant: Tenant, sub: dict) -> None:
    """One message per event of the window for the subscription, which no event had before the job."""
    messages = tenant.client.list_all("/api/v1/messages", {"subscription_id": sub["id"]})
    per_event = Counter(m["event_id"] for m in messages)
    assert len(per_event) == EVENTS, f"{len(per_event)} of {EVENTS} events got a message"
    twice = [event for event, n in per_event.items() if n != 1]
    assert not twice, f"{len(twice)} events got more than one message, e.g. {twice[:3]}"


def test_a_long_replay_answers_at_once_and_resumes_after_a_kill(
    spawn_herald: SpawnHerald, receiver: Receiver
) -> None:
    server = spawn_herald("replays")
    tenant, sub, window = archive(server, receiver)
    started_at = time.monotonic()
    started = tenant.client.post("/api/v1/events/replay", json=window, expect=202).json()
    answered_in = time.monotonic() - started_at
    assert started["state"] == "running" and started["replayed"] == 500, started
    assert answered_in < 1.0, f"the answer came after {answered_in:.2f} s"

    got = kill_mid_job(server, tenant, started["replay_id"])
    server.restart()

    def done() -> dict | None:
        state = job(tenant, started["replay_id"])
        return state if state["state"] == "done" else None

    finished = wait_until(done, WAIT, f"the job to finish after the restart (it had {got})")
    assert finished["replayed"] == EVENTS, finished
    assert_each_event_replayed_once(tenant, sub)


def test_a_job_is_finished_by_another_process_after_its_own_is_killed(
    two_processes: TwoProcesses, receiver: Receiver
) -> None:
    doomed, survivor = two_processes("replays")
    tenant, sub, window = archive(doomed, receiver)
    started = tenant.client.post("/api/v1/events/replay", json=window, expect=202).json()
    kill_mid_job(doomed, tenant, started["replay_id"])
    other = survivor.client(tenant.api_key["token"])

    def done() -> dict | None:
        state = other.get(f"/api/v1/replays/{started['replay_id']}", expect=200).json()
        return state if state["state"] == "done" else None

    finished = wait_until(done, WAIT, "the other process to finish the job")
    assert finished["replayed"] == EVENTS, finished
    survivor_tenant = Tenant(tenant.customer, tenant.api_key, other)
    assert_each_event_replayed_once(survivor_tenant, sub)


def test_an_unknown_or_another_customers_job_is_not_found(herald: HeraldServer, receiver: Receiver) -> None:
    owner, stranger = herald.new_tenant("replay-owner"), herald.new_tenant("replay-stranger")
    body = {"name": unique("owned"), "url": receiver.url("/owned"), "event_types": ["t"]}
    sub = owner.client.post("/api/v1/subscriptions", json=body, expect=201).json()
    window = {"since": "2026-01-01T00:00:00Z", "until": "2026-02-01T00:00:00Z", "subscription_id": sub["id"]}
    started = owner.client.post("/api/v1/events/replay", json=window, expect=202).json()
    assert started["state"] == "done", started
    for client, replay_id in ((stranger.client, started["replay_id"]), (owner.client, "rpl_01M8EEPPSC8BRBJB7V8EGXG3YG")):
        for method in ("GET", "DELETE"):
            resp = client.request(method, f"/api/v1/replays/{replay_id}")
            assert resp.status_code == 404, describe(resp)
            assert resp.headers["content-type"].startswith("application/problem+json")
    resp = owner.client.delete(f"/api/v1/replays/{started['replay_id']}")
    assert resp.status_code == 409, f"a job that ended cannot be cancelled: {describe(resp)}"
