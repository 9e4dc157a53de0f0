"""Shared helpers for Herald's black-box tests and scripts.

Everything here talks to Herald the way a user would: it starts the built binary as a subprocess
(and stops, kills and restarts it), and calls the REST API over HTTP; `webhook_receiver` receives the
webhooks on a real local HTTP server. Nothing here sleeps a fixed time: every wait polls (or waits
on a condition) until a deadline.
"""

from __future__ import annotations

import base64
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import requests

REPO_ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS_DIR = REPO_ROOT / "end2end" / "artifacts"
DEFAULT_DEBUG_BIN = REPO_ROOT / "target" / "debug" / "herald"
DEFAULT_RELEASE_BIN = REPO_ROOT / "target" / "release" / "herald"


def herald_binary() -> Path:
    """The binary under test: `HERALD_BIN` (relative to the repository), else the debug build."""
    value = os.environ.get("HERALD_BIN")
    if not value:
        return DEFAULT_DEBUG_BIN
    path = Path(value)
    return path if path.is_absolute() else REPO_ROOT / path

T = TypeVar("T")

# The key that seals subscription secrets, shared by every server of this test run: several
# processes on one PostgreSQL database must agree on it. A test that wants Herald to generate its
# own key passes `extra_env={"HERALD_SECRET_KEY": None}`.
SECRET_KEY = base64.b64encode(secrets.token_bytes(32)).decode()


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    return float(value) if value else default


# How long to wait for the server to answer /healthz, and for deliveries to arrive.
STARTUP_TIMEOUT = env_float("HERALD_E2E_STARTUP_TIMEOUT", 60.0)
DELIVERY_TIMEOUT = env_float("HERALD_E2E_DELIVERY_TIMEOUT", 60.0)
HTTP_TIMEOUT = env_float("HERALD_E2E_HTTP_TIMEOUT", 30.0)


# --------------------------------------------------------------------------------------------
# Waiting


def wait_until(
    predicate: Callable[[], T],
    timeout: float,
    description: str,
    interval: float = 0.05,
) -> T:
    """Call `predicate` until it returns something truthy, and return that; raise TimeoutError
    naming `description` when `timeout` seconds pass first. Connection errors count as "not yet"
    (the last one is chained for context); any other exception, such as a failed assertion about
    a response, propagates at once."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            result = predicate()
            if result:
                return result
            last_error = None
        except requests.RequestException as exc:
            last_error = exc
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {description}") from last_error
        time.sleep(interval)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def utc_stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S")


# --------------------------------------------------------------------------------------------
# Database


class TestDatabase:
    """A database that exists only for one run: a fresh PostgreSQL database on the server that
    `base_url` (a postgres:// URL) points at, or a temporary SQLite file."""

    __test__ = False  # not a pytest test class

    def __init__(self, url: str, kind: str, cleanup: Callable[[], None]):
        self.url = url
        self.kind = kind
        self._cleanup = cleanup

    @classmethod
    def create(cls, base_url: str | None) -> TestDatabase:
        if base_url and base_url.startswith(("postgres://", "postgresql://")):
            return cls._create_postgres(base_url)
        return cls._create_sqlite()

    @classmethod
    def _create_sqlite(cls) -> TestDatabase:
        directory = Path(tempfile.mkdtemp(prefix="herald-e2e-"))
        path = directory / "herald.db"
        return cls(f"sqlite://{path}?mode=rwc", "sqlite", lambda: shutil.rmtree(directory, ignore_errors=True))

    @classmethod
    def _create_postgres(cls, base_url: str) -> TestDatabase:
        import psycopg
        from psycopg import sql

        name = f"herald_e2e_{secrets.token_hex(6)}"
        with psycopg.connect(base_url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        parts = urlsplit(base_url)
        url = urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))

        def drop() -> None:
            with psycopg.connect(base_url, autocommit=True) as conn:
                try:
                    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
                except psycopg.errors.SyntaxError:  # PostgreSQL < 13 has no WITH (FORCE)
                    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))

        return cls(url, "postgres", drop)

    def drop(self) -> None:
        cleanup, self._cleanup = self._cleanup, (lambda: None)
        cleanup()

    def __enter__(self) -> TestDatabase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.drop()

    def __repr__(self) -> str:
        return f"TestDatabase({self.kind}: {self.url})"


# --------------------------------------------------------------------------------------------
# REST client


class ApiError(AssertionError):
    pass


def describe(resp: requests.Response) -> str:
    body = resp.text
    if len(body) > 2000:
        body = body[:2000] + "…"
    return f"{resp.request.method} {resp.url} -> {resp.status_code} {resp.headers.get('content-type')!r}: {body}"


class ApiClient:
    """A thin requests wrapper carrying one bearer token (or none)."""

    def __init__(self, base_url: str, token: str | None):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.session = requests.Session()
        self.session.trust_env = False  # never go through an HTTP proxy from the environment

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        data: bytes | str | None = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        expect: int | None = None,
    ) -> requests.Response:
        all_headers = {"accept": "application/json"}
        if self.token is not None:
            all_headers["authorization"] = f"Bearer {self.token}"
        all_headers.update(headers or {})
        resp = self.session.request(
            method,
            self.base_url + path,
            json=json,
            data=data,
            params=params,
            headers=all_headers,
            timeout=HTTP_TIMEOUT,
        )
        if expect is not None and resp.status_code != expect:
            raise ApiError(f"expected HTTP {expect}, got: {describe(resp)}")
        return resp

    def get(self, path: str, **kw: Any) -> requests.Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> requests.Response:
        return self.request("POST", path, **kw)

    def patch(self, path: str, **kw: Any) -> requests.Response:
        return self.request("PATCH", path, **kw)

    def delete(self, path: str, **kw: Any) -> requests.Response:
        return self.request("DELETE", path, **kw)

    def list_all(self, path: str, params: dict[str, Any] | None = None, limit: int = 1000) -> list[dict]:
        """Every item of a paged list (`{"data":[…],"next_cursor":…}`), following next_cursor."""
        items: list[dict] = []
        query = dict(params or {})
        query["limit"] = limit
        for _page in range(10_000):
            body = self.get(path, params=query, expect=200).json()
            items.extend(body["data"])
            cursor = body.get("next_cursor")
            if not cursor:
                return items
            query["cursor"] = cursor
        raise ApiError(f"{path}: next_cursor never ended")

    def publish(
        self, event: dict | list[dict], content_type: str | None = None, expect: int | None = 202
    ) -> requests.Response:
        """POST /api/v1/events with one CloudEvent (dict) or a batch (list)."""
        import json as jsonlib

        if content_type is None:
            content_type = (
                "application/cloudevents-batch+json" if isinstance(event, list) else "application/cloudevents+json"
            )
        return self.post(
            "/api/v1/events",
            data=jsonlib.dumps(event).encode(),
            headers={"content-type": content_type},
            expect=expect,
        )


def unique(name: str) -> str:
    """`name` with a random suffix, for ids and event types no other test uses."""
    return f"{name}-{secrets.token_hex(3)}"


def exponential(
    min_delay: int, max_delay: int, max_attempts: int, ttl_secs: int = 3600, retry_on: Any = "all"
) -> dict:
    """A custom exponential retry policy."""
    return {
        "kind": "exponential",
        "min_delay_secs": min_delay,
        "max_delay_secs": max_delay,
        "max_attempts": max_attempts,
        "ttl_secs": ttl_secs,
        "retry_on": retry_on,
    }


def cloud_event(event_id: str, event_type: str, source: str = "/shop", data: Any = None, **extra: Any) -> dict:
    """A CloudEvents 1.0 event in structured JSON form."""
    event = {
        "specversion": "1.0",
        "id": event_id,
        "source": source,
        "type": event_type,
        "datacontenttype": "application/json",
        "data": data if data is not None else {"id": event_id},
    }
    event.update(extra)
    return event


@dataclass
class Tenant:
    """A customer with one API key and a client that uses it."""

    customer: dict
    api_key: dict
    client: ApiClient

    @property
    def id(self) -> str:
        return self.customer["id"]


# --------------------------------------------------------------------------------------------
# The server under test


class HeraldServer:
    """`herald serve` running as a subprocess on a free port, logging to a file. It can be stopped
    (SIGTERM), killed (SIGKILL) and restarted on the same port and database; every start appends to
    the same log."""

    def __init__(
        self,
        binary: Path,
        database_url: str,
        *,
        log_path: Path,
        extra_env: dict[str, str | None] | None = None,
        startup_timeout: float = STARTUP_TIMEOUT,
        wrapper: list[str] | None = None,
    ):
        self.binary = Path(binary)
        # A command that runs `herald serve` (e.g. strace with its options), or None.
        self.wrapper = list(wrapper or [])
        self.database_url = database_url
        self.log_path = Path(log_path)
        self.extra_env = dict(extra_env or {})
        self.startup_timeout = startup_timeout
        # 40 characters of [0-9a-f]: comfortably above the 32-character minimum.
        self.admin_token = secrets.token_hex(20)
        self.port = 0
        self.base_url = ""
        self.process: subprocess.Popen | None = None
        self._workdir: Path | None = None

    # -- lifecycle --------------------------------------------------------------------------

    def start(self, port: int | None = None) -> HeraldServer:
        """Start on `port`, or on a free port when it is None."""
        if not self.binary.is_file():
            raise FileNotFoundError(
                f"Herald binary not found at {self.binary}; build it with `cargo build -p server` "
                "or point HERALD_BIN at it"
            )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self._workdir is None:
            self._workdir = Path(tempfile.mkdtemp(prefix="herald-e2e-cwd-"))
        # A free port can be taken between our probe and the server's bind: try a few ports. A
        # given port (a restart) may still be held for a moment by the process that just died.
        tries = 3 if port is None else 20
        for _try in range(tries):
            self.port = free_port() if port is None else port
            self.base_url = f"http://127.0.0.1:{self.port}"
            self._spawn()
            if self._wait_healthy():
                return self
            if "in use" not in self.log_tail().lower():
                break
            if port is not None:
                time.sleep(0.25)  # poll interval while the old socket goes away
        raise RuntimeError(f"herald did not start; see {self.log_path}:\n{self.log_tail()}")

    def restart(self) -> HeraldServer:
        """Start again on the same port and database (after `kill` or an exit)."""
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError("herald is still running; stop or kill it first")
        self.process = None
        return self.start(port=self.port)

    def environment(self) -> dict[str, str]:
        """The environment every command of this server runs with: its port, database, admin
        token and secret key, and the test's extra variables."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("HERALD_") and k != "DATABASE_URL"}
        env.setdefault("RUST_LOG", "info")
        env.setdefault("RUST_BACKTRACE", "1")
        env.update(
            {
                "HERALD_LISTEN": f"127.0.0.1:{self.port}",
                "DATABASE_URL": self.database_url,
                "HERALD_ADMIN_TOKEN": self.admin_token,
                "HERALD_ALLOW_PRIVATE_TARGETS": "true",
                "HERALD_SECRET_KEY": SECRET_KEY,
            }
        )
        for name, value in self.extra_env.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        return env

    def run_command(self, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
        """`herald ARGS…` as a one-off command beside this server (same database and settings)."""
        return subprocess.run(
            [str(self.binary), *args],
            env=self.environment(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def _spawn(self) -> None:
        env = self.environment()
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child for its lifetime
        log.write(f"\n=== {utc_stamp()} {self.binary} serve on {self.base_url} ({self.database_url})\n".encode())
        log.flush()
        try:
            self.process = subprocess.Popen(
                [*self.wrapper, str(self.binary), "serve"],
                env=env,
                cwd=self._workdir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        finally:
            log.close()

    def _wait_healthy(self) -> bool:
        assert self.process is not None
        deadline = time.monotonic() + self.startup_timeout
        session = requests.Session()
        session.trust_env = False
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                if session.get(self.base_url + "/healthz", timeout=2).status_code == 200:
                    return True
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(
            f"herald did not answer 200 on /healthz within {self.startup_timeout:.0f}s; "
            f"see {self.log_path}:\n{self.log_tail()}"
        )

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM, then SIGKILL if it has not exited by the deadline. Returns the exit code."""
        process, self.process = self.process, None
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=timeout)
        return process.returncode

    def kill(self) -> int:
        """SIGKILL: the process dies at once, with whatever it has in flight. Returns the exit code
        (-9). `restart` brings it back on the same port."""
        process, self.process = self.process, None
        assert process is not None, "herald is not running"
        process.kill()
        return process.wait(timeout=15)

    def send_signal(self, sig: int) -> None:
        assert self.process is not None, "herald is not running"
        self.process.send_signal(sig)

    def wait_exit(self, timeout: float) -> int | None:
        """The exit code once the process has exited, or None if it still runs after `timeout`."""
        assert self.process is not None, "herald was not started"
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def log_tail(self, lines: int = 60) -> str:
        return self._log_lines(lambda _: True, lines)

    def log_warnings(self, lines: int = 40) -> str:
        """The last `lines` warnings and errors of the log (what a failed check needs to explain it)."""
        return self._log_lines(lambda line: " WARN " in line or " ERROR " in line, lines) or "(none)"

    def _log_lines(self, keep: Callable[[str], bool], lines: int) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join([line for line in text.splitlines() if keep(line)][-lines:])

    def __enter__(self) -> HeraldServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- API helpers --------------------------------------------------------------------------

    @property
    def admin(self) -> ApiClient:
        return ApiClient(self.base_url, self.admin_token)

    def client(self, token: str | None) -> ApiClient:
        return ApiClient(self.base_url, token)

    def create_customer(self, name: str) -> dict:
        return self.admin.post("/api/v1/customers", json={"name": name}, expect=201).json()

    def create_api_key(self, customer_id: str, name: str = "e2e") -> dict:
        return self.admin.post(f"/api/v1/customers/{customer_id}/api-keys", json={"name": name}, expect=201).json()

    def new_tenant(self, name: str) -> Tenant:
        """A new customer named `name` (made unique) with one API key."""
        customer = self.create_customer(f"{name}-{secrets.token_hex(3)}")
        key = self.create_api_key(customer["id"], f"{name}-key")
        return Tenant(customer=customer, api_key=key, client=self.client(key["token"]))


def iter_pages(client: ApiClient, path: str, params: dict[str, Any], limit: int) -> Iterator[dict]:
    """Each page body of a paged list, following next_cursor."""
    query = dict(params)
    query["limit"] = limit
    while True:
        body = client.get(path, params=query, expect=200).json()
        yield body
        if not body.get("next_cursor"):
            return
        query["cursor"] = body["next_cursor"]
