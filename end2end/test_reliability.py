"""Delivery that gives up neither too early nor too late, checked black-box against
the built binary in real time, with a scriptable webhook receiver:

- retries on an exponential schedule, with the same `webhook-id` on every try;
- the dead reasons `non_retryable`, `attempts_exhausted` and `expired`, and replay of a dead message;
- a dead message reported to the customer as an operational event, signed and a valid CloudEvent;
- history removed after its retention, after which an event's `(source, id)` is new again;
- a window of the event archive replayed to a subscription made after it, signed;
- a paused subscription's events held until it resumes, then delivered;
- `Retry-After` on 429, and a receiver that never answers (a `timeout`);
- the circuit breaker with small thresholds (the HERALD_BREAKER_* env vars): disabled, probes, locked, held
  messages, admin-only unlock with an audit-log row;
- crash safety: SIGKILL and restart in the middle of 600 publishes loses no accepted event; two
  processes on one PostgreSQL database deliver each event once; SIGTERM finishes in-flight work.

Every delay is small; every wait polls or waits on a condition until a deadline. The receiver's
clock (time.monotonic() at arrival) measures the gaps between tries.
"""

from __future__ import annotations

import json
import secrets
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import requests
import standardwebhooks
from cloudevents.core.bindings.http import HTTPMessage, from_structured
from cloudevents.core.formats.json import JSONFormat

from harness import (
    ARTIFACTS_DIR,
    ApiClient,
    ApiError,
    HeraldServer,
    Tenant,
    TestDatabase,
    cloud_event,
    describe,
    exponential,
    unique,
    utc_stamp,
    wait_until,
)
from webhook_receiver import Answer, ReceivedRequest, Receiver

TERMINAL = ("delivered", "dead")

# The breaker's small thresholds for its own herald process.
BREAKER_ENV = {
    "HERALD_BREAKER_DISABLE_CONSECUTIVE": "5",
    "HERALD_BREAKER_PROBE_SECS": "2",
    "HERALD_BREAKER_LOCK_CONSECUTIVE": "9",
    "HERALD_BREAKER_LOCK_SILENCE_SECS": "0",
}

# The crash test: the fresh lane's concurrency bounds how many messages can be in flight when the
# process is killed, and so how many may be delivered twice.
CRASH_EVENTS = 600
CRASH_KILL_AFTER = 150
CRASH_PUBLISHERS = 6
CRASH_FRESH_CONCURRENCY = 32
CRASH_RETRY_CONCURRENCY = 8
# Attempts sent and not yet recorded when the process dies are sent again: those being sent (at most
# the lanes' concurrency) and those waiting for their record (as many again).
CRASH_DUPLICATE_BOUND = 2 * (CRASH_FRESH_CONCURRENCY + CRASH_RETRY_CONCURRENCY)
# A message whose delivery was in flight at the kill stays `delivering` until its lease runs out:
# the longest subscription timeout (60 s) plus the grace set below, then it is claimed again.
CRASH_LEASE_GRACE_SECS = 1
CRASH_RECLAIM_SECS = 60 + CRASH_LEASE_GRACE_SECS


# ---------------------------------------------------------------------------------------------
# Helpers


def subscribe(tenant: Tenant, url: str, event_type: str, retry_policy: Any, **extra: Any) -> dict:
    body = {"name": f"reliability {event_type}", "url": url, "event_types": [event_type], "retry_policy": retry_policy}
    body.update(extra)
    return tenant.client.post("/api/v1/subscriptions", json=body, expect=201).json()


def publish(client: ApiClient, event_type: str, event_id: str | None = None) -> str:
    """Publishes one event for a single subscription; returns its one message id."""
    event = cloud_event(event_id or unique("evt"), event_type, "/reliability")
    resp = client.publish(event)
    entries = resp.json()["events"]
    assert len(entries) == 1 and len(entries[0]["message_ids"]) == 1, (
        f"one event for one subscription makes one message: {describe(resp)}"
    )
    return entries[0]["message_ids"][0]


def message(tenant: Tenant, message_id: str) -> dict:
    """The message detail, with its attempts."""
    return tenant.client.get(f"/api/v1/messages/{message_id}", expect=200).json()


def wait_for_message(
    tenant: Tenant, message_id: str, states: tuple[str, ...] = TERMINAL, timeout: float = 20.0
) -> dict:
    """Poll the message until its state is one of `states`; return its detail."""

    def reached() -> dict | None:
        m = message(tenant, message_id)
        return m if m["state"] in states else None

    try:
        return wait_until(reached, timeout, f"message {message_id} to be {' or '.join(states)}")
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}; it is: {json.dumps(message(tenant, message_id))}") from None


def endpoint(tenant: Tenant, endpoint_id: str) -> dict:
    for ep in tenant.client.list_all("/api/v1/endpoints"):
        if ep["id"] == endpoint_id:
            return ep
    raise ApiError(f"endpoint {endpoint_id} is not in the customer's endpoint list")


def gaps(reqs: list[ReceivedRequest]) -> list[float]:
    """Seconds between consecutive requests, by the receiver's clock."""
    return [round(b.received_monotonic - a.received_monotonic, 3) for a, b in zip(reqs, reqs[1:])]


def webhook_ids(reqs: list[ReceivedRequest]) -> list[str | None]:
    return [r.headers.get("webhook-id") for r in reqs]


def event_id_of(req: ReceivedRequest) -> str:
    """The CloudEvent id of a structured-mode delivery."""
    return json.loads(req.body)["id"]


def attempt_summary(detail: dict) -> list[tuple]:
    return [(a["number"], a["status_code"], a["error_kind"], a["outcome"]) for a in detail["attempts"]]


def rfc3339(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def report(test: str, lines: list[str]) -> None:
    """Prints a measurement (shown with `pytest -rA` or `-s`) and keeps it in end2end/artifacts/."""
    text = "\n".join(f"[{test}] {line}" for line in lines)
    print(text)
    ARTIFACTS_DIR.mkdir(parents=True, exist_ok=True)
    with open(ARTIFACTS_DIR / "reliability-report.log", "a") as f:
        f.write(f"=== {utc_stamp()}\n{text}\n")


@pytest.fixture
def tenant(herald: HeraldServer) -> Tenant:
    """A new customer for each test on the session's server, so that its endpoints and messages
    are its own."""
    return herald.new_tenant("reliability")


# ---------------------------------------------------------------------------------------------
# Retry schedules and dead reasons (the session's server, default breaker thresholds)


def test_503_503_200_is_retried_after_1s_then_2s_with_the_same_webhook_id(tenant: Tenant, receiver: Receiver) -> None:
    path, event_type = f"/{unique('flaky')}", unique("flaky")
    receiver.queue(path, 503, 503)  # then 200
    subscribe(tenant, receiver.url(path), event_type, exponential(1, 2, max_attempts=5))
    message_id = publish(tenant.client, event_type)

    receiver.wait_for_path(path, 3, timeout=15)
    detail = wait_for_message(tenant, message_id, timeout=15)
    reqs = receiver.on_path(path)

    assert detail["state"] == "delivered", f"the message ends delivered: {attempt_summary(detail)} {detail}"
    assert len(reqs) == 3, f"exactly three requests: answers {[r.answer.status for r in reqs]}, gaps {gaps(reqs)}"
    assert detail["attempt_count"] == 3, detail
    assert attempt_summary(detail) == [
        (1, 503, None, "retryable"),
        (2, 503, None, "retryable"),
        (3, 200, None, "success"),
    ]
    gap1, gap2 = gaps(reqs)
    assert 0.9 <= gap1 <= 1.9, f"the first retry comes ≈1 s after the first try: gaps {gaps(reqs)}"
    assert 1.9 <= gap2 <= 3.0, f"the second retry comes ≈2 s after the first retry: gaps {gaps(reqs)}"
    assert webhook_ids(reqs) == [message_id] * 3, f"the same webhook-id (the message id) on every try: {webhook_ids(reqs)}"


def test_400_under_retry_on_transient_is_dead_non_retryable_after_one_try(tenant: Tenant, receiver: Receiver) -> None:
    path, event_type = f"/{unique('bad-request')}", unique("bad-request")
    receiver.answer(path, 400)
    subscribe(tenant, receiver.url(path), event_type, exponential(1, 1, max_attempts=5, retry_on="transient"))
    message_id = publish(tenant.client, event_type)

    detail = wait_for_message(tenant, message_id, timeout=15)
    assert (detail["state"], detail["dead_reason"]) == ("dead", "non_retryable"), detail
    assert detail["attempt_count"] == 1, detail
    assert attempt_summary(detail) == [(1, 400, None, "permanent")]
    assert len(receiver.on_path(path)) == 1, "a permanent failure is not retried"


def test_a_dead_message_is_reported_as_a_signed_cloudevent_to_the_subscription_naming_it(
    tenant: Tenant, receiver: Receiver
) -> None:
    path, event_type, ops_path = f"/{unique('refused')}", unique("refused"), f"/{unique('ops')}"
    receiver.answer(path, 400)
    doomed = subscribe(tenant, receiver.url(path), event_type, exponential(1, 1, max_attempts=5, retry_on="transient"))
    ops = subscribe(tenant, receiver.url(ops_path), "herald.message.dead", exponential(1, 1, max_attempts=3))
    event_id = unique("order")
    message_id = publish(tenant.client, event_type, event_id)

    [req] = receiver.wait_for_path(ops_path, 1, timeout=15)
    standardwebhooks.Webhook(ops["secret"]).verify(req.body, req.headers)
    event = from_structured(HTTPMessage(headers=dict(req.headers), body=req.body), JSONFormat())
    assert (event.get_specversion(), event.get_type(), event.get_source()) == ("1.0", "herald.message.dead", "/herald")
    assert event.get_data() == {
        "message_id": message_id,
        "subscription_id": doomed["id"],
        "event_id": event_id,
        "event_source": "/reliability",
        "dead_reason": "non_retryable",
        "attempt_count": 1,
        "last_status": 400,
    }
    receiver.assert_quiet(ops_path, 1.0)


def test_a_window_of_the_archive_replayed_to_a_later_subscription_arrives_signed(
    tenant: Tenant, receiver: Receiver
) -> None:
    event_type, path = unique("archived"), f"/{unique('late')}"
    since = datetime.now(timezone.utc) - timedelta(minutes=1)
    published = [unique("order") for _ in range(3)]
    for event_id in published:
        tenant.client.publish(cloud_event(event_id, event_type, "/archive"))
    tenant.client.publish(cloud_event(unique("other"), unique("other"), "/archive"))
    until = datetime.now(timezone.utc) + timedelta(minutes=1)
    listed = tenant.client.get("/api/v1/events", params={"type": event_type}, expect=200).json()["data"]
    assert [e["id"] for e in listed] == published[::-1], "the archive lists them newest first"
    found = tenant.client.get(f"/api/v1/events/{published[0]}", expect=200).json()
    assert (found["event"]["id"], found["source"], found["message_ids"]) == (published[0], "/archive", [])
    late = subscribe(tenant, receiver.url(path), event_type, exponential(1, 1, max_attempts=3))

    window = {"since": since.isoformat(), "until": until.isoformat(), "subscription_id": late["id"]}
    replayed = tenant.client.post("/api/v1/events/replay", json=window, expect=202).json()
    assert (replayed["state"], replayed["replayed"]) == ("done", 3), replayed
    reqs = receiver.wait_for_path(path, 3)
    webhook = standardwebhooks.Webhook(late["secret"])
    for req in reqs:
        webhook.verify(req.body, req.headers)
    assert sorted(event_id_of(r) for r in reqs) == sorted(published)
    receiver.assert_quiet(path, 1.0)


def test_a_paused_subscriptions_events_are_delivered_after_it_resumes_and_none_before(
    tenant: Tenant, receiver: Receiver
) -> None:
    event_type, path = unique("paused"), f"/{unique('paused')}"
    sub = subscribe(tenant, receiver.url(path), event_type, exponential(1, 1, max_attempts=3))
    tenant.client.patch(f"/api/v1/subscriptions/{sub['id']}", json={"status": "paused"}, expect=200)
    held = [publish(tenant.client, event_type) for _ in range(3)]
    assert {message(tenant, m)["state"] for m in held} == {"held"}
    receiver.assert_quiet(path, 1.5)

    tenant.client.patch(f"/api/v1/subscriptions/{sub['id']}", json={"status": "active"}, expect=200)
    reqs = receiver.wait_for_path(path, 3)
    assert sorted(webhook_ids(reqs)) == sorted(held)
    for message_id in held:
        assert wait_for_message(tenant, message_id)["state"] == "delivered"


def test_always_503_with_max_attempts_3_is_dead_attempts_exhausted_after_three(
    tenant: Tenant, receiver: Receiver
) -> None:
    path, event_type = f"/{unique('down')}", unique("down")
    receiver.answer(path, 503)
    subscribe(tenant, receiver.url(path), event_type, exponential(1, 1, max_attempts=3))
    message_id = publish(tenant.client, event_type)

    detail = wait_for_message(tenant, message_id, timeout=15)
    reqs = receiver.on_path(path)
    assert (detail["state"], detail["dead_reason"]) == ("dead", "attempts_exhausted"), detail
    assert detail["attempt_count"] == 3, detail
    assert [a["status_code"] for a in detail["attempts"]] == [503, 503, 503]
    assert len(reqs) == 3, f"exactly three requests, got {len(reqs)} (gaps {gaps(reqs)})"
    assert all(0.9 <= g <= 1.9 for g in gaps(reqs)), f"min = max = 1 s: a linear 1 s schedule: {gaps(reqs)}"
    assert webhook_ids(reqs) == [message_id] * 3


def test_ttl_3s_with_an_always_503_receiver_is_dead_expired(tenant: Tenant, receiver: Receiver) -> None:
    path, event_type = f"/{unique('ttl')}", unique("ttl")
    receiver.answer(path, 503)
    subscribe(tenant, receiver.url(path), event_type, exponential(1, 1, max_attempts=100, ttl_secs=3))
    started = time.monotonic()
    message_id = publish(tenant.client, event_type)

    detail = wait_for_message(tenant, message_id, timeout=15)
    took = time.monotonic() - started
    assert (detail["state"], detail["dead_reason"]) == ("dead", "expired"), f"{attempt_summary(detail)} {detail}"
    assert took <= 6.0, f"a message with ttl_secs 3 expires within ~6 s, this one took {took:.1f} s"
    created = rfc3339(detail["created_at"])
    late = [
        (a["number"], a["started_at"])
        for a in detail["attempts"]
        if (rfc3339(a["started_at"]) - created).total_seconds() > 3.2
    ]
    assert not late, f"no attempt starts after the TTL (created {detail['created_at']}): {late}"
    reqs = receiver.on_path(path)
    assert len(reqs) == detail["attempt_count"] >= 3, (
        f"the message is tried every second until it expires: {len(reqs)} requests, {attempt_summary(detail)}"
    )


def test_replay_of_a_dead_message_after_the_fix_delivers_it_with_the_same_webhook_id(
    tenant: Tenant, receiver: Receiver
) -> None:
    path, event_type = f"/{unique('replay')}", unique("replay")
    receiver.answer(path, 400)
    subscribe(tenant, receiver.url(path), event_type, exponential(1, 1, max_attempts=5, retry_on="transient"))
    message_id = publish(tenant.client, event_type)
    dead = wait_for_message(tenant, message_id, timeout=15)
    assert (dead["state"], dead["dead_reason"]) == ("dead", "non_retryable"), dead

    receiver.answer(path, 200)  # the receiver is fixed
    resp = tenant.client.post(f"/api/v1/messages/{message_id}/replay")
    assert resp.status_code in (200, 202), f"replay of a dead message: {describe(resp)}"

    detail = wait_for_message(tenant, message_id, ("delivered",), timeout=15)
    reqs = receiver.on_path(path)
    assert [r.answer.status for r in reqs] == [400, 200], f"one failed try, then the replayed one: {reqs}"
    assert webhook_ids(reqs) == [message_id, message_id], f"replay keeps the message id: {webhook_ids(reqs)}"
    assert detail["id"] == message_id and detail["dead_reason"] is None, detail
    assert [a["status_code"] for a in detail["attempts"]] == [400, 200], (
        f"the attempts history is kept: {attempt_summary(detail)}"
    )


def test_429_with_retry_after_3_is_retried_no_sooner_than_3s(tenant: Tenant, receiver: Receiver) -> None:
    path, event_type = f"/{unique('throttled')}", unique("throttled")
    receiver.queue(path, Answer(429, {"retry-after": "3"}))  # then 200
    # Without Retry-After the retry would come after 1 s.
    subscribe(tenant, receiver.url(path), event_type, exponential(1, 1, max_attempts=5, retry_on="transient"))
    message_id = publish(tenant.client, event_type)

    reqs = receiver.wait_for_path(path, 2, timeout=15)
    detail = wait_for_message(tenant, message_id, timeout=15)
    (gap,) = gaps(reqs[:2])
    assert gap >= 2.9, f"Retry-After: 3 must hold the retry back 3 s; it came after {gap:.3f} s"
    assert gap <= 5.0, f"…and not much longer: {gap:.3f} s"
    assert detail["state"] == "delivered" and detail["attempt_count"] == 2, f"{attempt_summary(detail)} {detail}"
    assert webhook_ids(reqs) == [message_id, message_id]


def test_a_receiver_that_never_answers_is_a_timeout(tenant: Tenant, receiver: Receiver) -> None:
    path, event_type = f"/{unique('blackhole')}", unique("blackhole")
    receiver.answer(path, Answer(hang=True))
    subscribe(tenant, receiver.url(path), event_type, exponential(1, 1, max_attempts=1), timeout_ms=1000)
    message_id = publish(tenant.client, event_type)

    detail = wait_for_message(tenant, message_id, timeout=15)
    assert (detail["state"], detail["dead_reason"]) == ("dead", "attempts_exhausted"), detail
    assert attempt_summary(detail) == [(1, None, "timeout", "retryable")]
    duration = detail["attempts"][0]["duration_ms"]
    assert 900 <= duration <= 5000, f"timeout_ms 1000 cuts the attempt after about 1 s: duration_ms {duration}"
    assert len(receiver.on_path(path)) == 1


# ---------------------------------------------------------------------------------------------
# Retention (a process of its own keeping history for seconds)


def test_history_past_its_retention_is_removed_and_its_key_is_then_new(
    spawn_herald: Callable[..., HeraldServer],
) -> None:
    retention = {
        "HERALD_RETENTION_MESSAGES_SECS": "2",
        "HERALD_RETENTION_EVENTS_SECS": "3",
        "HERALD_RETENTION_SWEEP_SECS": "1",
    }
    herald = spawn_herald("retention", env=retention)
    tenant = herald.new_tenant("retention")
    path, event_type = "/kept", "retention.test"
    with Receiver() as receiver:
        subscribe(tenant, receiver.url(path), event_type, exponential(1, 1, max_attempts=3))
        event = cloud_event("order-1", event_type, "/retention")
        message_id = tenant.client.publish(event).json()["events"][0]["message_ids"][0]
        wait_for_message(tenant, message_id, ("delivered",))

        def removed() -> bool:
            return tenant.client.get(f"/api/v1/messages/{message_id}").status_code == 404

        wait_until(removed, 15, "the delivered message to be removed after its retention")

        def published_anew() -> list[dict] | None:
            again = tenant.client.publish(event).json()["events"][0]
            return None if again["duplicate"] else [again]

        [again] = wait_until(published_anew, 15, "the event to be removed, so that its (source, id) is new again")
        assert again["message_ids"] != [message_id], again
        receiver.wait_for_path(path, 2)


# ---------------------------------------------------------------------------------------------
# The circuit breaker (a process of its own with small thresholds)


def test_breaker_disables_probes_locks_holds_and_admin_unlock_delivers(spawn_herald: Callable[..., HeraldServer]) -> None:
    herald = spawn_herald("breaker", env=BREAKER_ENV)
    tenant = herald.new_tenant("breaker")
    path, event_type = "/breaker", "breaker.test"
    with Receiver() as receiver:
        receiver.answer(path, 503)
        subscribe(tenant, receiver.url(path), event_type, exponential(1, 1, max_attempts=100))
        first = publish(tenant.client, event_type)
        endpoint_id = message(tenant, first)["endpoint_id"]

        # Five failures a second apart, then the circuit opens (disabled)…
        disabled = wait_until(
            lambda: (ep := endpoint(tenant, endpoint_id))["state"] == "disabled" and ep, 15, "the endpoint to be disabled"
        )
        seen = receiver.on_path(path)
        assert len(seen) == 5, f"disabled after exactly 5 failures, but the receiver saw {len(seen)} (gaps {gaps(seen)})"
        assert disabled["consecutive_failures"] == 5, disabled
        assert disabled["next_probe_at"], f"a disabled endpoint has its next probe time: {disabled}"

        # …then one probe every 2 s with the real message, until more than 9 failures lock it.
        locked = wait_until(
            lambda: (ep := endpoint(tenant, endpoint_id))["state"] == "locked" and ep, 30, "the endpoint to be locked"
        )
        seen = receiver.on_path(path)
        times = gaps(seen)
        report("breaker", [f"request gaps until locked (s): {times}"])
        assert len(seen) == 10, f"locked after the 10th consecutive failure; the receiver saw {len(seen)}: gaps {times}"
        assert locked["consecutive_failures"] == 10, locked
        assert all(0.9 <= g <= 1.9 for g in times[:4]), f"the first five tries are 1 s apart: {times}"
        assert all(1.8 <= g <= 3.2 for g in times[4:]), f"a disabled endpoint is probed about every 2 s: {times}"
        assert set(webhook_ids(seen)) == {first}, "the probes are the real due message"

        # Locked: its messages are held and nothing is sent, not even probes.
        held = wait_for_message(tenant, first, ("held",) + TERMINAL, timeout=10)
        assert held["state"] == "held", held
        assert held["attempt_count"] == 10, f"no attempt is spent while the circuit defers a message: {held}"
        second = publish(tenant.client, event_type)
        held2 = wait_for_message(tenant, second, ("held",) + TERMINAL, timeout=10)
        assert held2["state"] == "held" and held2["attempt_count"] == 0, held2
        receiver.assert_quiet(path, 4.0)
        assert endpoint(tenant, endpoint_id)["state"] == "locked"
        assert [message(tenant, m)["state"] for m in (first, second)] == ["held", "held"]

        # Only an admin unlocks it.
        resp = tenant.client.post(f"/api/v1/endpoints/{endpoint_id}/unlock")
        assert resp.status_code == 403, f"a customer key cannot unlock: {describe(resp)}"
        assert endpoint(tenant, endpoint_id)["state"] == "locked", "a refused unlock changes nothing"

        receiver.answer(path, 200)  # the receiver is fixed
        unlocked = herald.admin.post(f"/api/v1/endpoints/{endpoint_id}/unlock", expect=200).json()
        assert unlocked["id"] == endpoint_id and unlocked["state"] == "closed", unlocked
        assert unlocked["consecutive_failures"] == 0, f"unlock resets the counters: {unlocked}"

        for m in (first, second):
            detail = wait_for_message(tenant, m, TERMINAL, timeout=15)
            assert detail["state"] == "delivered", f"every held message is delivered after the unlock: {detail}"
        seen = receiver.on_path(path)
        assert len(seen) == 12, f"10 failures, then the two held messages once each: {len(seen)} requests"
        assert sorted(webhook_ids(seen[10:])) == sorted([first, second])
        assert [r.answer.status for r in seen[10:]] == [200, 200]

    audit = herald.admin.list_all("/api/v1/audit-log")
    unlocks = [a for a in audit if a.get("action") == "endpoint.unlock" and a.get("target") == endpoint_id]
    assert len(unlocks) == 1, f"the audit log shows the unlock once: {audit}"


# ---------------------------------------------------------------------------------------------
# Crash safety (processes of their own)


class Publisher:
    """Publishes events from several threads, each with its own client; a publish that fails with a
    connection error or a 5xx (the server is down or restarting) is retried until it is answered
    202. Records what was accepted."""

    def __init__(self, base_url: str, token: str, threads: int, deadline_secs: float = 120.0):
        self.base_url, self.token, self.threads = base_url, token, threads
        self.deadline = time.monotonic() + deadline_secs
        self.accepted: list[str] = []
        self.duplicates_answered = 0
        self.retries = 0
        self._cond = threading.Condition()
        self._local = threading.local()

    def _client(self) -> ApiClient:
        if not hasattr(self._local, "client"):
            self._local.client = ApiClient(self.base_url, self.token)
        return self._local.client

    def publish(self, event: dict) -> None:
        while True:
            try:
                resp = self._client().publish(event, expect=None)
                if resp.status_code == 202:
                    entry = resp.json()["events"][0]
                    with self._cond:
                        self.accepted.append(event["id"])
                        self.duplicates_answered += bool(entry.get("duplicate"))
                        self._cond.notify_all()
                    return
                if resp.status_code < 500:
                    raise ApiError(f"publish refused: {describe(resp)}")
            except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError):
                pass  # the server died under this request, or is not back yet
            with self._cond:
                self.retries += 1
            if time.monotonic() > self.deadline:
                raise TimeoutError(f"event {event['id']} was never accepted")
            time.sleep(0.05)  # poll interval while the server is away

    def wait_accepted(self, n: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.accepted) < n:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"only {len(self.accepted)} of {n} events accepted")
                self._cond.wait(min(remaining, 0.1))

    def count(self) -> int:
        with self._cond:
            return len(self.accepted)


def wait_for_events(sink: Receiver, event_ids: set[str], timeout: float) -> float:
    """Wait until every id in `event_ids` has arrived at `sink`; return how long it took."""
    seen: set[str] = set()
    scanned = 0

    def all_arrived(reqs: list[ReceivedRequest]) -> bool:
        nonlocal scanned
        for req in reqs[scanned:]:
            seen.add(event_id_of(req))
        scanned = len(reqs)
        return event_ids <= seen

    started = time.monotonic()
    try:
        sink.wait_for(all_arrived, timeout, f"{len(event_ids)} events")
    except TimeoutError as exc:
        missing = sorted(event_ids - seen)
        raise AssertionError(f"{len(missing)} accepted event(s) never arrived: {missing[:20]} ({exc})") from None
    return time.monotonic() - started


def wait_all_delivered(tenant: Tenant, n: int, timeout: float) -> None:
    def delivered() -> bool:
        return len(tenant.client.list_all("/api/v1/messages", {"state": "delivered"})) == n

    try:
        wait_until(delivered, timeout, f"{n} messages to be delivered", interval=0.5)
    except TimeoutError as exc:
        states = Counter(m["state"] for m in tenant.client.list_all("/api/v1/messages"))
        raise AssertionError(f"{exc}; message states: {dict(states)}") from None


def test_sigkill_and_restart_mid_run_loses_no_accepted_event(spawn_herald: Callable[..., HeraldServer]) -> None:
    herald = spawn_herald(
        "crash",
        env={
            "HERALD_DELIVERY_LEASE_GRACE_SECS": str(CRASH_LEASE_GRACE_SECS),
            "HERALD_DELIVERY_FRESH_CONCURRENCY": str(CRASH_FRESH_CONCURRENCY),
            "HERALD_DELIVERY_RETRY_CONCURRENCY": str(CRASH_RETRY_CONCURRENCY),
        },
    )
    tenant = herald.new_tenant("crash")
    run = secrets.token_hex(4)
    events = [cloud_event(f"crash-{run}-{i:04d}", "crash.test", "/crash", {"n": i}) for i in range(CRASH_EVENTS)]
    with Receiver() as sink:
        subscribe(tenant, sink.url("/crash"), "crash.test", exponential(1, 2, max_attempts=20))
        publisher = Publisher(herald.base_url, tenant.api_key["token"], CRASH_PUBLISHERS)
        with ThreadPoolExecutor(CRASH_PUBLISHERS, thread_name_prefix="publisher") as pool:
            futures = [pool.submit(publisher.publish, e) for e in events]
            publisher.wait_accepted(CRASH_KILL_AFTER, 60)
            arrived_at_kill = sink.count()
            exit_code = herald.kill()
            accepted_at_kill = publisher.count()
            down = time.monotonic()
            herald.restart()
            restart_secs = time.monotonic() - down
            for f in futures:
                f.result()  # re-raises a publish that was refused or never accepted

        accepted = set(publisher.accepted)
        assert len(accepted) == CRASH_EVENTS, f"every event is accepted in the end: {len(accepted)}"
        waited = wait_for_events(sink, accepted, 150)
        wait_all_delivered(tenant, CRASH_EVENTS, CRASH_RECLAIM_SECS + 30)
        reqs = sink.requests

    by_webhook_id = Counter(webhook_ids(reqs))
    by_event_id = Counter(event_id_of(r) for r in reqs)
    duplicates = len(reqs) - len(by_webhook_id)
    report(
        "crash",
        [
            f"killed (exit {exit_code}) after {accepted_at_kill} accepted / {arrived_at_kill} delivered; "
            f"restarted on port {herald.port} in {restart_secs:.1f} s",
            f"publishes retried by the client: {publisher.retries}; answered duplicate: {publisher.duplicates_answered}",
            f"requests {len(reqs)}, distinct webhook-ids {len(by_webhook_id)}, duplicates {duplicates} "
            f"(bound {CRASH_DUPLICATE_BOUND}); all arrived {waited:.1f} s after the last publish",
        ],
    )
    assert exit_code == -signal.SIGKILL
    assert set(by_event_id) == accepted, f"unexpected event ids arrived: {sorted(set(by_event_id) - accepted)[:20]}"
    assert len(by_webhook_id) == CRASH_EVENTS, (
        f"one message (webhook-id) per event, the same on a redelivery: {len(by_webhook_id)} webhook-ids"
    )
    ids_of_event: dict[str, set[str | None]] = {}
    for r in reqs:
        ids_of_event.setdefault(event_id_of(r), set()).add(r.headers.get("webhook-id"))
    changed = {e: w for e, w in ids_of_event.items() if len(w) > 1}
    assert not changed, f"a redelivery keeps its webhook-id: {changed}"
    assert duplicates <= CRASH_DUPLICATE_BOUND, (
        f"{duplicates} duplicate deliveries, more than the {CRASH_DUPLICATE_BOUND} that could be in flight: "
        f"{[(w, n) for w, n in by_webhook_id.items() if n > 1][:20]}"
    )


def test_two_processes_on_one_postgres_database_deliver_each_event_once(
    spawn_herald: Callable[..., HeraldServer], fresh_database: TestDatabase
) -> None:
    if fresh_database.kind != "postgres":
        pytest.skip("several herald processes share one database only on PostgreSQL (set TEST_DATABASE_URL)")
    first = spawn_herald("node-1")
    second = spawn_herald("node-2")  # after the first has migrated the database
    tenant = first.new_tenant("two-nodes")
    clients = [first.client(tenant.api_key["token"]), second.client(tenant.api_key["token"])]
    run = secrets.token_hex(4)
    with Receiver() as sink:
        subscribe(tenant, sink.url("/two-nodes"), "two.nodes", exponential(1, 2, max_attempts=20))
        ids = set()
        for i in range(300):
            event_id = f"two-{run}-{i:03d}"
            publish(clients[i % 2], "two.nodes", event_id)
            ids.add(event_id)
        wait_for_events(sink, ids, 60)
        wait_all_delivered(tenant, 300, 30)
        reqs = sink.requests

    twice = {e: n for e, n in Counter(event_id_of(r) for r in reqs).items() if n > 1}
    assert not twice, f"no duplicate in a run without faults: {len(twice)} events delivered twice: {twice}"
    assert len(reqs) == 300
    assert len(set(webhook_ids(reqs))) == 300
    for server in (first, second):
        assert server.process is not None and server.process.poll() is None, f"{server.log_path} exited"


def test_sigterm_finishes_in_flight_deliveries_and_exits_0(
    spawn_herald: Callable[..., HeraldServer], receiver: Receiver
) -> None:
    grace = 10
    herald = spawn_herald("graceful", env={"HERALD_DELIVERY_LEASE_GRACE_SECS": str(grace)})
    tenant = herald.new_tenant("graceful")
    path, event_type = f"/{unique('slow')}", "graceful.test"
    receiver.answer(path, Answer(delay=1.0))
    subscribe(tenant, receiver.url(path), event_type, exponential(1, 2, max_attempts=5))
    message_ids = [publish(tenant.client, event_type) for _ in range(5)]

    receiver.wait_for_path(path, 1, timeout=15)
    sent = time.monotonic()
    herald.send_signal(signal.SIGTERM)
    code = herald.wait_exit(grace + 5)
    took = time.monotonic() - sent
    assert code is not None, f"herald did not exit within {grace + 5} s of SIGTERM:\n{herald.log_tail()}"
    assert code == 0, f"graceful shutdown exits 0, got {code}:\n{herald.log_tail()}"
    assert took <= grace + 1, f"exited {took:.1f} s after SIGTERM, beyond the {grace} s grace"
    in_flight = len(receiver.on_path(path))

    herald.restart()
    details = [wait_for_message(tenant, m, TERMINAL, timeout=30) for m in message_ids]
    reqs = receiver.on_path(path)
    report(
        "graceful",
        [f"exited {code} {took:.2f} s after SIGTERM with {in_flight} request(s) sent; {len(reqs)} in all"],
    )
    assert [d["state"] for d in details] == ["delivered"] * 5, [(d["id"], d["state"], d["attempts"]) for d in details]
    assert sorted(webhook_ids(reqs)) == sorted(message_ids), (
        f"each message is sent once: what was in flight was finished and recorded, the rest sent after "
        f"the restart: {Counter(webhook_ids(reqs))}"
    )
    assert [d["attempt_count"] for d in details] == [1] * 5, [attempt_summary(d) for d in details]
