"""Database outages, checked black-box: a real PostgreSQL server stopped and started, and a SQLite
file whose disk fills up.

Two `herald serve` processes share a PostgreSQL database while events are published to both and
`/healthz` and the dashboard are asked all the time. The server stops for ten seconds, then starts
again. Meanwhile every publish answers within 2 s (202 or 503 problem+json with `Retry-After`, never
a hang or a 500), `/healthz` answers 503 within 1 s and names the database, and the dashboard shows
its error page. Each process logs the outage once when it starts and once when it ends, and takes
no lease from the other for being silent during it. Within 5 s of the server's return both accept
events again, and every event they accepted arrives.

A `herald serve` started while its PostgreSQL server is still down waits for it, saying so once in
its log, and serves as soon as the server starts: no restart needed.

The server is a private one (initdb into a temporary directory, `pg_ctl` on a free port, removed
after): the shared server on 127.0.0.1:5432 is never stopped. Without the PostgreSQL server
binaries the test is skipped, saying so.

When the disk under a SQLite file fills up, publishing answers 503 (never 500, never a 202 for an
event that was not stored), the log says once that the database cannot be written and why, and
when space returns publishing and delivery resume by themselves. The disk is a small tmpfs, which
only root can mount: elsewhere that test is skipped, saying so.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from conftest import herald_on
from harness import TestDatabase, cloud_event, free_port, wait_until
from webhook_receiver import Receiver

OUTAGE_SECS = 10
API_ANSWER_SECS = 2.0
HEALTH_ANSWER_SECS = 1.0
RESUME_SECS = 5.0


def server_binaries() -> Path | None:
    """The directory holding initdb and pg_ctl, or None."""
    on_path = shutil.which("pg_ctl")
    candidates = [str(Path(on_path).parent)] if on_path else []
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for directory in candidates:
        if all(os.access(Path(directory) / tool, os.X_OK) for tool in ("initdb", "pg_ctl")):
            return Path(directory)
    return None


class PrivatePostgres:
    """A PostgreSQL server of this test's own, in a temporary directory, on a free port. PostgreSQL
    refuses to run as root, so as root it runs as the `postgres` user."""

    def __init__(self, binaries: Path):
        self.binaries = binaries
        self.root = Path(tempfile.mkdtemp(prefix="herald-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.as_root = os.geteuid() == 0
        if self.as_root:
            shutil.chown(self.root, "postgres", "postgres")

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.binaries / tool), *args]
        if self.as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=self.root)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")

    def init(self) -> None:
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"), "-o", options, "-w", "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def remove(self) -> None:
        try:
            self.stop()
        except RuntimeError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    binaries = server_binaries()
    if binaries is None:
        pytest.skip("the PostgreSQL server binaries (initdb, pg_ctl) are not installed: apt-get install postgresql")
    server = PrivatePostgres(binaries)
    try:
        server.init()
        server.start()
        yield server
    finally:
        server.remove()


def test_herald_started_before_its_postgres_server_waits_for_it(private_postgres: PrivatePostgres):
    database = TestDatabase(private_postgres.create_database("early"), "postgres", lambda: None)
    private_postgres.stop()
    server = herald_on(database, "early")
    failures: list[BaseException] = []

    def start() -> None:
        try:
            server.start()
        except BaseException as e:  # noqa: BLE001 - reported by the test's thread below
            failures.append(e)

    starting = threading.Thread(target=start)
    starting.start()
    try:
        waiting = "the database does not answer yet"
        log = server.log_path
        wait_until(lambda: log.exists() and waiting in log.read_text(errors="replace"), 20, "herald saying it waits")
        assert server.process is not None and server.process.poll() is None, "herald waits instead of exiting"
        private_postgres.start()
        starting.join(60)
        assert not starting.is_alive() and not failures, f"herald did not start: {failures}"
        tenant = server.new_tenant("early")
        tenant.client.publish(cloud_event("early-1", "order.created"))
        assert log.read_text(errors="replace").count(waiting) == 1, "said once"
    finally:
        starting.join(60)
        server.stop()


@dataclass(frozen=True)
class Answer:
    server: str
    event_id: str
    started: float
    seconds: float
    status: int | None  # None: no answer at all
    retry_after: str | None
    content_type: str


@dataclass(frozen=True)
class Check:
    path: str
    started: float
    seconds: float
    status: int | None
    body: str


def test_a_postgres_outage_gets_quick_honest_answers_and_everything_resumes(private_postgres: PrivatePostgres):
    database = TestDatabase(private_postgres.create_database("herald"), "postgres", lambda: None)
    servers = {"a": herald_on(database, "outage-a"), "b": herald_on(database, "outage-b")}
    answers: list[Answer] = []
    checks: list[Check] = []
    stop = threading.Event()
    try:
        for server in servers.values():
            server.start()
        with Receiver() as sink:
            tenant = servers["a"].new_tenant("outage")
            subscription = {"name": "all", "url": sink.url("/hook"), "event_types": ["*"]}
            tenant.client.post("/api/v1/subscriptions", json=subscription, expect=201)

            def publish(name: str) -> None:
                session = requests.Session()
                session.trust_env = False
                headers = {"authorization": f"Bearer {tenant.api_key['token']}", "content-type": "application/cloudevents+json"}
                url = servers[name].base_url + "/api/v1/events"
                for i in range(100_000):
                    if stop.is_set():
                        return
                    event = cloud_event(f"{name}-{i:05d}", "order.created")
                    started = time.monotonic()
                    try:
                        resp = session.post(url, json=event, headers=headers, timeout=10)
                        status, retry_after = resp.status_code, resp.headers.get("retry-after")
                        content_type = resp.headers.get("content-type", "")
                    except requests.RequestException:
                        status, retry_after, content_type = None, None, ""
                    answers.append(
                        Answer(name, event["id"], started, time.monotonic() - started, status, retry_after, content_type)
                    )
                    stop.wait(0.02)  # a steady publisher, not a flood

            def check() -> None:
                session = requests.Session()
                session.trust_env = False
                while not stop.is_set():
                    for path in ("/healthz", "/"):
                        started = time.monotonic()
                        try:
                            resp = session.get(servers["a"].base_url + path, timeout=10, allow_redirects=False)
                            status, body = resp.status_code, resp.text
                        except requests.RequestException:
                            status, body = None, ""
                        checks.append(Check(path, started, time.monotonic() - started, status, body))
                    stop.wait(0.1)

            threads = [threading.Thread(target=publish, args=(name,)) for name in servers]
            threads.append(threading.Thread(target=check))
            for thread in threads:
                thread.start()
            wait_until(lambda: sum(a.status == 202 for a in answers) >= 40, 60, "publishing before the outage")

            private_postgres.stop()
            stopped = time.monotonic()
            time.sleep(OUTAGE_SECS)  # the outage itself, while the threads keep asking
            private_postgres.start()
            back = time.monotonic()

            def accepted_after_return(name: str) -> Answer | None:
                return next((a for a in list(answers) if a.server == name and a.status == 202 and a.started >= back), None)

            for name in servers:
                wait_until(lambda: accepted_after_return(name), 60, f"a publish to {name} accepted after the return")
            stop.set()
            for thread in threads:
                thread.join(timeout=30)

            accepted = {a.event_id for a in answers if a.status == 202}
            sink.wait_for(
                lambda reqs: {r.headers.get("ce-id") or _event_id(r.body) for r in reqs} >= accepted,
                90,
                f"all {len(accepted)} accepted events",
            )
            resumed = {name: accepted_after_return(name).started - back for name in servers}  # type: ignore[union-attr]

        during = [a for a in answers if stopped <= a.started < back]
        refused = [a for a in during if a.status == 503]
        slowest = max(a.seconds for a in during)
        print(
            f"\noutage of {OUTAGE_SECS} s: {len(during)} publishes during it, {len(refused)} refused, slowest "
            f"answer {slowest:.3f} s; accepted again {resumed['a']:.2f} s (a) and {resumed['b']:.2f} s (b) after the "
            f"return; {len(accepted)} accepted events all delivered"
        )
        assert {a.status for a in answers} <= {202, 503}, sorted({a.status for a in answers}, key=str)
        assert len(refused) >= 10, "publishing went on during the outage"
        assert slowest < API_ANSWER_SECS, f"a publish took {slowest:.2f} s to answer during the outage"
        assert all(a.retry_after and a.content_type == "application/problem+json" for a in refused)
        assert max(resumed.values()) <= RESUME_SECS, resumed

        health_during = [c for c in checks if c.path == "/healthz" and stopped <= c.started < back]
        assert health_during, "/healthz was asked during the outage"
        assert all(c.status == 503 and c.seconds < HEALTH_ANSWER_SECS for c in health_during), [
            (c.status, round(c.seconds, 3)) for c in health_during if c.status != 503 or c.seconds >= HEALTH_ANSWER_SECS
        ]
        assert all(f"127.0.0.1:{private_postgres.port}/herald" in c.body for c in health_during)
        pages_during = [c for c in checks if c.path == "/" and stopped + 1 <= c.started < back]
        assert pages_during and all(c.status == 503 and c.seconds < API_ANSWER_SECS for c in pages_during)
        assert all("The database is unavailable" in c.body for c in pages_during)

        for name, server in servers.items():
            log = server.log_path.read_text(errors="replace")
            assert log.count("database unavailable:") == 1, f"{name}:\n{server.log_tail(40)}"
            assert log.count("database available again") == 1, f"{name}:\n{server.log_tail(40)}"
            assert "fell silent" not in log, f"{name} took the other's leases after the outage"
    finally:
        stop.set()
        for server in servers.values():
            server.stop()


class SmallDisk:
    """A tmpfs of a few megabytes, mounted on a temporary directory, that a filler file can fill."""

    def __init__(self, megabytes: int):
        self.path = Path(tempfile.mkdtemp(prefix="herald-disk-"))
        self.filler = self.path / "filler"
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(self.path)], capture_output=True, text=True
        )
        if done.returncode != 0:
            shutil.rmtree(self.path, ignore_errors=True)
            raise OSError(done.stderr.strip() or "mount failed")

    def fill(self) -> None:
        chunk = b"\0" * 65536
        with open(self.filler, "ab") as out:
            try:
                while True:
                    out.write(chunk)
                    out.flush()
            except OSError:
                pass
        # A few bytes may still fit the last page; take them too.
        with open(self.filler, "ab", buffering=0) as out:
            for _ in range(64):
                try:
                    out.write(b"\0" * 512)
                except OSError:
                    break

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def remove(self) -> None:
        subprocess.run(["umount", "-l", str(self.path)], capture_output=True)
        shutil.rmtree(self.path, ignore_errors=True)


@pytest.fixture
def small_disk() -> Iterator[SmallDisk]:
    if os.geteuid() != 0:
        pytest.skip("filling a disk needs a tmpfs of its own, which only root can mount")
    try:
        disk = SmallDisk(megabytes=16)
    except OSError as e:
        pytest.skip(f"cannot mount a tmpfs here: {e}")
    try:
        yield disk
    finally:
        disk.remove()


def test_a_full_disk_under_sqlite_gets_503s_and_publishing_resumes_when_space_returns(small_disk: SmallDisk):
    database = TestDatabase(f"sqlite://{small_disk.path}/herald.db?mode=rwc", "sqlite", lambda: None)
    server = herald_on(database, "disk-full")
    try:
        server.start()
        with Receiver() as sink:
            tenant = server.new_tenant("disk")
            subscription = {"name": "all", "url": sink.url("/hook"), "event_types": ["*"]}
            tenant.client.post("/api/v1/subscriptions", json=subscription, expect=201)
            padding = "x" * 2000
            answers: dict[str, int] = {}

            def publish_batch(prefix: str) -> requests.Response:
                batch = [cloud_event(f"{prefix}-{i:03d}", "order.created", data={"pad": padding}) for i in range(50)]
                resp = tenant.client.publish(batch, expect=None)
                for event in batch:
                    answers[event["id"]] = resp.status_code
                return resp

            assert publish_batch("before").status_code == 202
            small_disk.fill()
            # The write-ahead log reuses the room it has; publishing goes on until it needs more.
            batches = iter(range(10_000))
            # (A list, since a response with an error status is falsy.)
            [refused] = wait_until(
                lambda: (resp := publish_batch(f"full-{next(batches)}")).status_code != 202 and [resp],
                60,
                "a publish refused for want of disk space",
            )
            assert refused.status_code == 503, refused.text
            assert refused.headers.get("retry-after") and refused.headers["content-type"] == "application/problem+json"
            health = server.admin.get("/healthz")
            assert health.status_code == 503 and "full" in health.json()["error"], health.text
            assert {status for status in answers.values()} <= {202, 503}

            small_disk.free()
            freed = time.monotonic()
            wait_until(lambda: publish_batch(f"after-{next(batches)}").status_code == 202, 30, "publishing again")
            resumed = time.monotonic() - freed
            accepted = {event_id for event_id, status in answers.items() if status == 202}
            sink.wait_for(
                lambda reqs: {_event_id(r.body) for r in reqs} >= accepted, 90, f"all {len(accepted)} accepted events"
            )
        print(f"\ndisk full: {len(accepted)} accepted events all delivered; publishing resumed {resumed:.2f} s after space returned")
        assert resumed <= RESUME_SECS
        assert server.process is not None and server.process.poll() is None, "herald kept running"
        log = server.log_path.read_text(errors="replace")
        assert log.count("database unavailable:") == 1, server.log_tail(40)
        assert "database or disk is full" in log, server.log_tail(40)
        assert "panicked" not in log
    finally:
        server.stop()


def _event_id(body: bytes) -> str:
    import json

    try:
        return json.loads(body)["id"]
    except (ValueError, KeyError, TypeError):
        return ""
