"""A 202 means on disk, and a backup holds what was acknowledged, on the embedded SQLite database.

- The flush rule: Herald runs under strace, which timestamps every fsync/fdatasync of the
  database's write-ahead log. With `sqlite_synchronous = full` (the default) each publish, sent one
  after another, is answered only after a flush of the log that began after the request was sent;
  with `normal` most publishes are answered with no flush at all (the run that shows the check can
  fail). Only what is answered is flushed: each publish is delivered and its attempt recorded, and
  the threads that write the log (SQLite's, found by their writes) flush it only when it starts over
  after a checkpoint, never at each commit.
- `herald backup PATH` under a publishing load: the copy opens, passes `PRAGMA integrity_check`, and
  holds every event acknowledged before the backup started; it refuses an existing PATH and a
  PostgreSQL database.

These tests run Herald on SQLite files of their own, whichever database the session uses: the
flush rule and the online copy are SQLite's.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from conftest import herald_on
from harness import ARTIFACTS_DIR, HeraldServer, TestDatabase, cloud_event, herald_binary, unique, utc_stamp, wait_until

STRACE = shutil.which("strace")
PUBLISHES = 40


def herald_pid(server: HeraldServer) -> int:
    """The pid of `herald serve` itself when a wrapper (strace) started it, else the process's."""
    assert server.process is not None
    if not server.wrapper:
        return server.process.pid
    children = Path(f"/proc/{server.process.pid}/task/{server.process.pid}/children").read_text().split()
    assert children, "the wrapper has not started herald"
    return int(children[0])


def start(db: TestDatabase, name: str, env: dict[str, str] | None = None, wrapper: list[str] | None = None):
    return herald_on(db, f"durability-{name}", extra_env=env, wrapper=wrapper).start()


def stop_traced(server: HeraldServer) -> None:
    """SIGTERM to herald (strace detaches if signalled itself), then wait for strace to finish."""
    os.kill(herald_pid(server), signal.SIGTERM)
    assert server.wait_exit(30) is not None, "herald under strace did not stop"
    server.stop()


def wal_calls(trace: Path) -> list[tuple[int, float, str]]:
    """Each call on a `-wal` file in strace's output: thread, start time, and the call."""
    calls = []
    for line in trace.read_text(errors="replace").splitlines():
        match = re.match(r"\s*(\d+)\s+(\d+\.\d+)\s+(\w+)\((\d+)<([^>]*)>", line)
        if match and match.group(5).endswith("-wal"):
            calls.append((int(match.group(1)), float(match.group(2)), match.group(3)))
    return calls


def wal_flushes(calls: list[tuple[int, float, str]]) -> list[float]:
    """The start times of every fsync/fdatasync of the log."""
    return sorted(t for _, t, call in calls if call in ("fsync", "fdatasync"))


def writers_flushes(calls: list[tuple[int, float, str]]) -> list[float]:
    """The start times of the flushes made by the threads that write the log: SQLite's own, at a
    commit or when the log starts over after a checkpoint."""
    writers = {tid for tid, _, call in calls if call.startswith("pwrite")}
    return sorted(t for tid, t, call in calls if tid in writers and call in ("fsync", "fdatasync"))


def publish_one_at_a_time(server: HeraldServer, receiver) -> tuple[list[tuple[float, float]], float]:
    """Publishes PUBLISHES events to a subscription of `receiver`, each after the previous was
    answered; returns when each request was sent and when its 202 came back, and when every
    delivery had been recorded."""
    tenant = server.new_tenant("durable")
    subscription = {"name": unique("s"), "url": receiver.url("/durable"), "event_types": ["*"]}
    tenant.client.post("/api/v1/subscriptions", json=subscription, expect=201)
    windows = []
    for i in range(PUBLISHES):
        sent = time.time()
        tenant.client.publish(cloud_event(f"flush-{i}", "order.created"), expect=202)
        windows.append((sent, time.time()))
    wait_until(
        lambda: len(tenant.client.list_all("/api/v1/messages", {"state": "delivered"})) == PUBLISHES,
        30,
        "every delivery recorded",
    )
    return windows, time.time()


def answered_after_a_flush(windows: list[tuple[float, float]], flushes: list[float]) -> int:
    """How many publishes saw a flush of the log start between their request and their answer."""
    return sum(1 for sent, answered in windows if any(sent <= t <= answered for t in flushes))


@pytest.mark.skipif(STRACE is None, reason="needs strace (Debian: apt-get install strace)")
@pytest.mark.parametrize("mode", ["full", "normal"])
def test_each_publish_is_answered_only_after_its_commit_is_flushed(
    sqlite_database: TestDatabase, receiver, mode: str
):
    trace = ARTIFACTS_DIR / f"strace-durability-{mode}-{utc_stamp()}-{os.getpid()}.txt"
    trace.parent.mkdir(parents=True, exist_ok=True)
    wrapper = [STRACE, "-f", "-qq", "-ttt", "-y", "-e", "trace=fsync,fdatasync,pwrite64", "-e", "signal=none"]
    server = start(sqlite_database, mode, {"HERALD_SQLITE_SYNCHRONOUS": mode}, [*wrapper, "-o", str(trace)])
    try:
        windows, settled = publish_one_at_a_time(server, receiver)
    finally:
        stop_traced(server)
    calls = wal_calls(trace)
    flushed = answered_after_a_flush(windows, wal_flushes(calls))
    if mode == "full":
        assert flushed == PUBLISHES, f"{PUBLISHES - flushed} publishes were answered before any flush of the log"
        # The commits themselves (publishes, claims, attempt records) do not wait for the disk: the
        # writer flushes the log only when it starts over after a checkpoint (one every 200 ms at most),
        # where a flush at every commit would make two or more per publish.
        began = windows[0][0]
        by_writer = sum(1 for t in writers_flushes(calls) if began <= t <= settled)
        allowed = int((settled - began) / 0.2) + 2
        assert by_writer <= allowed, f"the writer flushed the log {by_writer} times for {PUBLISHES} publishes"
    else:
        # Only a background checkpoint (every 200 ms) flushes the log: most answers precede any flush.
        assert flushed < PUBLISHES / 2, f"with normal, {flushed} of {PUBLISHES} publishes still saw a flush"


class Publisher(threading.Thread):
    """Publishes events one after another until stopped; remembers each acknowledged event and
    when its 202 arrived."""

    def __init__(self, server: HeraldServer):
        super().__init__(daemon=True)
        self.client = server.new_tenant("backup").client
        self.acknowledged: list[tuple[str, float]] = []
        self.stopped = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        i = 0
        try:
            while not self.stopped.is_set():
                event_id = f"backup-{i}"
                batch = [cloud_event(f"{event_id}-{j}", "order.created") for j in range(10)]
                self.client.publish(batch, expect=202)
                answered = time.time()
                self.acknowledged.extend((event["id"], answered) for event in batch)
                i += 1
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc


def test_a_backup_under_load_opens_intact_and_holds_every_acknowledged_event(
    sqlite_database: TestDatabase, receiver, tmp_path: Path
):
    server = start(sqlite_database, "backup")
    publisher = Publisher(server)
    tenant_sub = {"name": unique("s"), "url": receiver.url("/backup"), "event_types": ["*"]}
    publisher.client.post("/api/v1/subscriptions", json=tenant_sub, expect=201)
    try:
        publisher.start()
        wait_until(lambda: len(publisher.acknowledged) >= 500, 60, "a publishing load")
        started = time.time()
        copy = tmp_path / "copy.db"
        done = server.run_command("backup", str(copy))
        assert done.returncode == 0, done.stderr
        assert "herald.key" in done.stdout or "secret_key" in done.stdout, done.stdout
        finished = time.time()
        wait_until(
            lambda: publisher.error or publisher.acknowledged[-1][1] > finished, 30, "a publish after the backup"
        )
    finally:
        publisher.stopped.set()
        publisher.join(timeout=30)
        server.stop()
    assert publisher.error is None, publisher.error
    before = {event_id for event_id, answered in publisher.acknowledged if answered < started}
    assert len(before) >= 500

    with sqlite3.connect(f"file:{copy}?mode=ro", uri=True) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        kept = {row[0] for row in conn.execute("SELECT ce_id FROM events")}
    missing = before - kept
    assert not missing, f"{len(missing)} events acknowledged before the backup are not in it, e.g. {sorted(missing)[:3]}"


def test_a_backup_never_overwrites_and_points_postgresql_at_pg_dump(sqlite_database: TestDatabase, tmp_path: Path):
    server = start(sqlite_database, "backup-refusals")
    try:
        existing = tmp_path / "existing.db"
        existing.write_bytes(b"keep me")
        refused = server.run_command("backup", str(existing))
        assert refused.returncode != 0
        assert "exists" in refused.stderr, refused.stderr
        assert existing.read_bytes() == b"keep me"
    finally:
        server.stop()
    on_postgres = HeraldServer(
        herald_binary(),
        "postgres://postgres@127.0.0.1:1/herald",
        log_path=ARTIFACTS_DIR / "unused.log",
    )
    refused = on_postgres.run_command("backup", str(tmp_path / "pg.db"))
    assert refused.returncode != 0
    assert "pg_dump" in refused.stderr, refused.stderr
    assert not (tmp_path / "pg.db").exists()
