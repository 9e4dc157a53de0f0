"""pytest fixtures for Herald's end-to-end tests.

Environment:
  HERALD_BIN         the binary under test (default: target/debug/herald in the repo root)
  TEST_DATABASE_URL  postgres://… to run against a fresh PostgreSQL database created on that
                     server for this session (dropped at the end); otherwise a temp SQLite file
  HERALD_E2E_STARTUP_TIMEOUT / HERALD_E2E_DELIVERY_TIMEOUT   deadlines in seconds (60 / 60)
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import (  # noqa: E402
    ARTIFACTS_DIR,
    HeraldServer,
    TestDatabase,
    herald_binary,
    utc_stamp,
)
from browser import chromium, playwright_driver  # noqa: E402, F401 - one browser for the whole session
from webhook_receiver import Receiver  # noqa: E402


@pytest.fixture(scope="session")
def database() -> Iterator[TestDatabase]:
    """A database for this session only (fresh PostgreSQL database or temp SQLite file)."""
    db = TestDatabase.create(os.environ.get("TEST_DATABASE_URL"))
    try:
        yield db
    finally:
        db.drop()


@pytest.fixture(scope="session")
def herald(database: TestDatabase) -> Iterator[HeraldServer]:
    """`herald serve` on a free port with a random admin token, private targets allowed.

    Yields the HeraldServer: `.base_url`, `.admin_token`, `.admin` (ApiClient with the admin token),
    `.client(token)`, `.create_customer(name)`, `.create_api_key(customer_id)`, `.new_tenant(name)`,
    `.log_path`. Its log is written to end2end/artifacts/.
    """
    log_path = ARTIFACTS_DIR / f"herald-{database.kind}-{utc_stamp()}-{os.getpid()}.log"
    server = HeraldServer(herald_binary(), database.url, log_path=log_path)
    try:
        server.start()
        yield server
        if server.process is not None and server.process.poll() is not None:
            pytest.fail(
                f"herald exited during the tests with code {server.process.returncode}; "
                f"see {server.log_path}:\n{server.log_tail()}"
            )
    finally:
        server.stop()


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    """A local HTTP server that records every request (`.requests`, `.on_path(p)`, `.url(p)`,
    `.wait_for(predicate, timeout)`, `.wait_for_count(n)`) and answers 200, or as scripted per path
    (`.queue(path, 503, 503)`, `.answer(path, Answer(...))`)."""
    with Receiver() as recv:
        yield recv


@pytest.fixture
def fresh_database() -> Iterator[TestDatabase]:
    """A database for this test only, of the session's kind (fresh PostgreSQL database or temp
    SQLite file), for tests that run herald processes of their own."""
    db = TestDatabase.create(os.environ.get("TEST_DATABASE_URL"))
    try:
        yield db
    finally:
        db.drop()


@pytest.fixture
def sqlite_database() -> Iterator[TestDatabase]:
    """A SQLite file for this test only, whichever database the session uses: for the tests of
    what is SQLite's own (flushes, online backup, one process per file)."""
    db = TestDatabase.create(None)
    try:
        yield db
    finally:
        db.drop()


def herald_on(db: TestDatabase, name: str, **options: object) -> HeraldServer:
    """A HeraldServer (not yet started) on `db`, logging to end2end/artifacts/ under `name`;
    `options` go to HeraldServer (extra_env, wrapper)."""
    log_path = ARTIFACTS_DIR / f"herald-{db.kind}-{utc_stamp()}-{os.getpid()}-{name}.log"
    return HeraldServer(herald_binary(), db.url, log_path=log_path, **options)


SpawnHerald = Callable[..., HeraldServer]


@pytest.fixture
def spawn_herald(request: pytest.FixtureRequest, fresh_database: TestDatabase) -> Iterator[SpawnHerald]:
    """Starts `herald serve` processes of this test's own: `spawn_herald(name, env={...})` starts
    one on `fresh_database` (or `database=`) with the extra environment `env` (e.g. the breaker's
    thresholds), logging to end2end/artifacts/. Every process is stopped after the test, before
    the database is dropped."""
    servers: list[HeraldServer] = []
    test_name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)

    def spawn(name: str, env: dict[str, str] | None = None, database: TestDatabase | None = None) -> HeraldServer:
        db = database or fresh_database
        log_path = ARTIFACTS_DIR / f"herald-{db.kind}-{utc_stamp()}-{os.getpid()}-{test_name}-{name}.log"
        server = HeraldServer(herald_binary(), db.url, log_path=log_path, extra_env=env)
        servers.append(server)
        return server.start()

    try:
        yield spawn
    finally:
        for server in servers:
            server.stop()


TwoProcesses = Callable[[str], tuple[HeraldServer, HeraldServer]]


@pytest.fixture
def two_processes(spawn_herald: SpawnHerald, fresh_database: TestDatabase) -> TwoProcesses:
    """`two_processes(name)`: two `herald serve` processes sharing this test's own PostgreSQL
    database, the second started after the first has migrated it; the test is skipped on SQLite,
    which one process owns."""

    def start(name: str) -> tuple[HeraldServer, HeraldServer]:
        if fresh_database.kind != "postgres":
            pytest.skip("several processes share a PostgreSQL database only")
        first = spawn_herald(f"{name}-a")
        return first, spawn_herald(f"{name}-b")

    return start


def pytest_report_header(config: pytest.Config) -> list[str]:
    db = os.environ.get("TEST_DATABASE_URL") or "(unset: SQLite)"
    if "@" in db:  # hide any password in the URL
        scheme, _, rest = db.partition("://")
        userinfo, _, host = rest.rpartition("@")
        db = f"{scheme}://{userinfo.split(':')[0]}@{host}"
    return [f"herald binary: {herald_binary()}", f"TEST_DATABASE_URL: {db}"]
