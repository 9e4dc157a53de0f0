"""Recovery from a crash on the embedded SQLite database, checked black-box.

One `herald serve` owns a SQLite file: a second one on the same file refuses to start and names the
file. So the owner knows, at start, that every lease in the file belongs to a process that is gone,
and takes them back: after a SIGKILL in the middle of slow deliveries (leases of 90 s, the default),
a restart delivers every accepted event within 15 s.

These tests run Herald on SQLite files of their own, whichever database the session uses.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from conftest import _binary
from harness import ARTIFACTS_DIR, HeraldServer, TestDatabase, cloud_event, unique, utc_stamp, wait_until
from webhook_receiver import Answer, Receiver

EVENTS = 120
RECOVERY_SECS = 15


def server_on(db: TestDatabase, name: str) -> HeraldServer:
    log_path = ARTIFACTS_DIR / f"herald-sqlite-{utc_stamp()}-{os.getpid()}-recovery-{name}.log"
    return HeraldServer(_binary(), db.url, log_path=log_path)


def event_ids(sink: Receiver) -> set[str]:
    ids = set()
    for request in sink.requests:
        if request.path == "/slow":
            ids.add(json.loads(request.body)["id"])
    return ids


def test_a_second_herald_on_the_same_sqlite_file_refuses_to_start(sqlite_database: TestDatabase):
    first = server_on(sqlite_database, "owner").start()
    second = server_on(sqlite_database, "intruder")
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
    herald = server_on(sqlite_database, "crash").start()
    try:
        tenant = herald.new_tenant("recovery")
        with Receiver() as sink:
            sink.answer("/slow", Answer(delay=0.5))
            subscription = {"name": unique("slow"), "url": sink.url("/slow"), "event_types": ["*"]}
            tenant.client.post("/api/v1/subscriptions", json=subscription, expect=201)
            batch = [cloud_event(f"recovery-{i:03d}", "order.created") for i in range(EVENTS)]
            tenant.client.publish(batch, expect=202)
            # Deliveries are in flight (each takes 0.5 s): the process dies holding their leases.
            sink.wait_for_count(5)
            herald.kill()
            arrived_before = len(event_ids(sink))
            restarted = time.monotonic()
            herald.restart()
            expected = {event["id"] for event in batch}
            wait_until(lambda: event_ids(sink) >= expected, 60, f"all {EVENTS} events to arrive after the restart")
            took = time.monotonic() - restarted
        assert arrived_before < EVENTS, "the crash came while deliveries were still to be made"
        assert took <= RECOVERY_SECS, f"the last event arrived {took:.1f} s after the restart"
    finally:
        herald.stop()
