"""Recovery from a crash on the embedded SQLite database, checked black-box.

One `herald serve` owns a SQLite file: a second one on the same file refuses to start and names the
file. So the owner knows, at start, that every lease in the file belongs to a process that is gone,
and takes them back: after a SIGKILL in the middle of slow deliveries (leases of 90 s, the default),
a restart delivers every accepted event within 15 s.

On PostgreSQL, where several processes share the database, each beats every two seconds; the others
take back the leases of one silent for ten seconds, so a killed process's messages go out within
seconds, while a process whose deliveries merely stall keeps its leases. Those tests run on the
session's database and only on PostgreSQL; the SQLite ones run on SQLite files of their own.

A log written to a file, as the harness writes each process's, carries no colour codes.
"""

from __future__ import annotations

import json
import time

import pytest

from conftest import herald_on
from harness import HeraldServer, TestDatabase, cloud_event, unique, wait_until
from webhook_receiver import Answer, Receiver

EVENTS = 120
RECOVERY_SECS = 15


def event_ids(sink: Receiver) -> set[str]:
    ids = set()
    for request in sink.requests:
        if request.path == "/slow":
            ids.add(json.loads(request.body)["id"])
    return ids


def publish_slow_deliveries(server: HeraldServer, sink: Receiver, prefix: str) -> set[str]:
    """Publishes EVENTS events to `server` for a receiver that takes 0.5 s per request, and returns
    once the first have arrived: the rest are in flight or leased, waiting for the endpoint."""
    tenant = server.new_tenant(prefix)
    sink.answer("/slow", Answer(delay=0.5))
    subscription = {"name": unique("slow"), "url": sink.url("/slow"), "event_types": ["*"]}
    tenant.client.post("/api/v1/subscriptions", json=subscription, expect=201)
    batch = [cloud_event(f"{prefix}-{i:03d}", "order.created") for i in range(EVENTS)]
    tenant.client.publish(batch, expect=202)
    sink.wait_for_count(5)
    return {event["id"] for event in batch}


def test_a_second_herald_on_the_same_sqlite_file_refuses_to_start(sqlite_database: TestDatabase):
    first = herald_on(sqlite_database, "recovery-owner").start()
    second = herald_on(sqlite_database, "recovery-intruder")
    try:
        with pytest.raises(RuntimeError) as refused:
            second.start()
        path = sqlite_database.url.removeprefix("sqlite://").split("?")[0]
        assert "another herald process" in str(refused.value), str(refused.value)
        assert path in str(refused.value), str(refused.value)
        assert first.admin.get("/healthz").status_code == 200, "the first one serves on"
    finally:
        second.stop()
        first.stop()


def test_after_sigkill_a_restart_delivers_every_accepted_event_within_seconds(sqlite_database: TestDatabase):
    herald = herald_on(sqlite_database, "recovery-crash").start()
    try:
        with Receiver() as sink:
            expected = publish_slow_deliveries(herald, sink, "recovery")
            # The process dies holding the leases of the deliveries in flight and of those waiting.
            herald.kill()
            arrived_before = len(event_ids(sink))
            restarted = time.monotonic()
            herald.restart()
            wait_until(lambda: event_ids(sink) >= expected, 60, f"all {EVENTS} events to arrive after the restart")
            took = time.monotonic() - restarted
        assert arrived_before < EVENTS, "the crash came while deliveries were still to be made"
        assert took <= RECOVERY_SECS, f"the last event arrived {took:.1f} s after the restart"
    finally:
        herald.stop()


def two_processes(spawn_herald, fresh_database: TestDatabase) -> tuple[HeraldServer, HeraldServer]:
    if fresh_database.kind != "postgres":
        pytest.skip("several processes share a PostgreSQL database only")
    first = spawn_herald("node-1")
    second = spawn_herald("node-2")  # after the first has migrated the database
    return first, second


def test_the_leases_of_a_killed_process_are_taken_back_by_the_other_within_seconds(
    spawn_herald, fresh_database: TestDatabase
):
    doomed, survivor = two_processes(spawn_herald, fresh_database)
    with Receiver() as sink:
        # Published to the doomed process: its lanes lease the messages as it stores them.
        expected = publish_slow_deliveries(doomed, sink, "takeover")
        doomed.kill()
        killed = time.monotonic()
        wait_until(lambda: event_ids(sink) >= expected, 90, f"all {EVENTS} events to arrive after the kill")
        took = time.monotonic() - killed
    assert took <= RECOVERY_SECS, f"the last event arrived {took:.1f} s after the kill (leases last 90 s)"
    assert "fell silent" in survivor.log_tail(200)


def test_a_process_whose_deliveries_stall_keeps_its_leases(spawn_herald, fresh_database: TestDatabase):
    slow, other = two_processes(spawn_herald, fresh_database)
    tenant = slow.new_tenant("stalled")
    with Receiver() as sink:
        # Each delivery takes 14 s: longer than a silence that loses a process its leases.
        sink.answer("/stalled", Answer(delay=14))
        subscription = {
            "name": unique("stalled"),
            "url": sink.url("/stalled"),
            "event_types": ["*"],
            "timeout_ms": 30000,
        }
        tenant.client.post("/api/v1/subscriptions", json=subscription, expect=201)
        batch = [cloud_event(f"stalled-{i:03d}", "order.created") for i in range(10)]
        tenant.client.publish(batch, expect=202)
        expected = {event["id"] for event in batch}

        def answered() -> bool:
            done = [r for r in sink.on_path("/stalled") if r.received_at + 14 <= time.time()]
            return len(done) >= len(expected)

        wait_until(answered, 60, "every stalled delivery to be answered")
        webhook_ids = [r.headers.get("webhook-id") for r in sink.on_path("/stalled")]
    assert len(webhook_ids) == len(set(webhook_ids)) == len(expected), (
        f"a busy but alive process keeps its leases: {len(webhook_ids)} requests for {len(expected)} messages"
    )
    assert "fell silent" not in other.log_tail(400), other.log_tail(40)


def test_a_log_written_to_a_file_carries_no_colour_codes(herald: HeraldServer):
    """Herald colours its log on a terminal only: written to a file (as here) or a pipe, as a
    service manager or a collector reads it, its lines are plain text."""
    herald.admin.get("/healthz", expect=200)
    text = herald.log_path.read_text(errors="replace")
    assert "INFO" in text, text[:500]
    assert "\x1b[" not in text, f"escape codes in {herald.log_path}: {text[:300]!r}"
