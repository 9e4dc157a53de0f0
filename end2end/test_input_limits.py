"""Hostile input at the API's edge, and secrets at rest, checked black-box against the binary.

- Malformed requests of every kind (oversized bodies and heads, deep JSON, NUL characters, bad
  encodings, wrong types and ranges, bad media types, unknown methods): every answer is a 4xx
  `application/problem+json`, naming the field where there is one, and the server stays healthy.
- The publish rate limit per API key answers 429 with `Retry-After`, and only for that key.
- A dump of the database and the server's log contains none of the signing secrets, API keys or
  session ids in plaintext; the generated key seals them and a restart opens them again; a wrong key
  is refused at start.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import standardwebhooks
from harness import (
    ARTIFACTS_DIR,
    HeraldServer,
    Tenant,
    TestDatabase,
    cloud_event,
    describe,
    herald_binary,
    utc_stamp,
    wait_until,
)
from webhook_receiver import Receiver

LIMITS_ENV = {
    "HERALD_LIMITS_MAX_BODY_BYTES": "65536",
    "HERALD_LIMITS_MAX_JSON_DEPTH": "16",
    "HERALD_LIMITS_MAX_HEADER_BYTES": "8192",
}


@pytest.fixture(scope="module")
def limited() -> Iterator[tuple[HeraldServer, Tenant]]:
    """A server of this module's own with small request limits, and one tenant."""
    db = TestDatabase.create(os.environ.get("TEST_DATABASE_URL"))
    log_path = ARTIFACTS_DIR / f"herald-{db.kind}-{utc_stamp()}-{os.getpid()}-limits.log"
    server = HeraldServer(herald_binary(), db.url, log_path=log_path, extra_env=LIMITS_ENV)
    try:
        server.start()
        yield server, server.new_tenant("limits")
    finally:
        server.stop()
        db.drop()


# --------------------------------------------------------------------------------------------
# Raw requests: http.client sends exactly the bytes given (requests would normalize URLs).


@dataclass
class Answer:
    status: int
    content_type: str
    body: bytes
    headers: dict[str, str]

    def json(self) -> Any:
        return json.loads(self.body)

    def __str__(self) -> str:
        return f"{self.status} {self.content_type!r}: {self.body[:500]!r}"


def raw(server: HeraldServer, method: str, path: str, body: bytes | None = None, **headers: str) -> Answer:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        for name, value in headers.items():
            conn.putheader(name.replace("_", "-"), value)
        if body is not None:
            conn.putheader("content-length", str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        data = resp.read()
        return Answer(resp.status, resp.getheader("content-type") or "", data, {k.lower(): v for k, v in resp.getheaders()})
    finally:
        conn.close()


def nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def event_json(**overrides: Any) -> bytes:
    event = cloud_event(f"evt-{secrets.token_hex(6)}", "limits.test", "/limits")
    event.update(overrides)
    return json.dumps(event).encode()


def subscription_json(**overrides: Any) -> bytes:
    body: dict[str, Any] = {"name": "limits", "url": "http://127.0.0.1:9/hook", "event_types": ["limits.test"]}
    body.update(overrides)
    return json.dumps(body).encode()


CE = "application/cloudevents+json"
JSON = "application/json"

# (label, method, path, body, content type, extra headers, expected status or None for any 4xx,
#  the field the problem must name or None)
MALFORMED: list[tuple[str, str, str, bytes | None, str | None, dict[str, str], int | None, str | None]] = [
    ("event body over the size limit", "POST", "/api/v1/events", event_json(data={"x": "a" * 100_000}), CE, {}, 413, None),
    ("subscription body over the size limit", "POST", "/api/v1/subscriptions", subscription_json(name="a" * 100_000), JSON, {}, 413, None),
    ("JSON nested 10 000 deep", "POST", "/api/v1/events", b'{"data":' + b"[" * 10_000 + b"]" * 10_000 + b"}", CE, {}, 400, "body"),
    ("JSON one level deeper than the limit", "POST", "/api/v1/subscriptions", nested(17).encode(), JSON, {}, 400, "body"),
    ("a 20 KB header", "GET", "/api/v1/messages", None, None, {"x-filler": "a" * 20_000}, 431, None),
    ("a 20 KB query", "GET", "/api/v1/messages?event_type=" + "a" * 20_000, None, None, {}, 431, None),
    ("NUL in a path id", "GET", "/api/v1/subscriptions/sub_%00", None, None, {}, 400, "path"),
    ("invalid UTF-8 in a path id", "GET", "/api/v1/messages/%FF%FE", None, None, {}, 400, "path"),
    ("NUL in a query filter", "GET", "/api/v1/messages?event_type=a%00b", None, None, {}, 400, "query"),
    ("invalid UTF-8 in a query filter", "GET", "/api/v1/messages?state=%C3%28", None, None, {}, 400, "query"),
    ("NUL in a CloudEvent id", "POST", "/api/v1/events", event_json(id="a\u0000b"), CE, {}, 422, "id"),
    ("NUL in a CloudEvent source", "POST", "/api/v1/events", event_json(source="/a\u0000"), CE, {}, 422, "source"),
    ("NUL in a CloudEvent type", "POST", "/api/v1/events", event_json(type="t\u0000"), CE, {}, 422, "type"),
    ("NUL in a subscription name", "POST", "/api/v1/subscriptions", subscription_json(name="n\u0000"), JSON, {}, 422, "name"),
    ("NUL in an event type filter", "POST", "/api/v1/subscriptions", subscription_json(event_types=["a\u0000"]), JSON, {}, 422, "event_types[0]"),
    ("NUL in a URL", "POST", "/api/v1/subscriptions", subscription_json(url="http://a\u0000.example/"), JSON, {}, 422, "url"),
    ("truncated JSON", "POST", "/api/v1/subscriptions", b'{"name": "x", "url": ', JSON, {}, 400, "body"),
    ("invalid UTF-8 in a JSON body", "POST", "/api/v1/subscriptions", b'{"name": "\xff\xfe"}', JSON, {}, 400, "body"),
    ("a lone surrogate escape", "POST", "/api/v1/events", event_json(id="x").replace(b'"x"', b'"\\ud800"'), CE, {}, 400, "body"),
    ("null as a subscription", "POST", "/api/v1/subscriptions", b"null", JSON, {}, None, None),
    ("an array as a subscription", "POST", "/api/v1/subscriptions", b"[]", JSON, {}, None, None),
    ("a number as an event", "POST", "/api/v1/events", b"123", CE, {}, None, None),
    ("text/plain event", "POST", "/api/v1/events", b"hello", "text/plain", {}, 415, None),
    ("XML subscription", "POST", "/api/v1/subscriptions", b"<subscription/>", "application/xml", {}, 415, None),
    ("timeout_ms as a string", "POST", "/api/v1/subscriptions", subscription_json(timeout_ms="30000"), JSON, {}, 422, "timeout_ms"),
    ("timeout_ms beyond any float", "POST", "/api/v1/subscriptions", subscription_json().replace(b"}", b', "timeout_ms": 1e400}'), JSON, {}, None, None),
    ("negative timeout_ms", "POST", "/api/v1/subscriptions", subscription_json(timeout_ms=-1), JSON, {}, 422, "timeout_ms"),
    ("timeout_ms of 2^64", "POST", "/api/v1/subscriptions", subscription_json(timeout_ms=2**64), JSON, {}, 422, "timeout_ms"),
    ("101 event types", "POST", "/api/v1/subscriptions", subscription_json(event_types=[f"t{i}" for i in range(101)]), JSON, {}, 422, "event_types"),
    ("a 10 000-character name", "POST", "/api/v1/subscriptions", subscription_json(name="n" * 10_000), JSON, {}, 422, "name"),
    ("a javascript: URL", "POST", "/api/v1/subscriptions", subscription_json(url="javascript:alert(1)"), JSON, {}, 422, "url"),
    ("a 5 000-character URL", "POST", "/api/v1/subscriptions", subscription_json(url="http://a.example/" + "p" * 5000), JSON, {}, 422, "url"),
    ("an unknown policy kind", "POST", "/api/v1/subscriptions", subscription_json(retry_policy={"kind": "bogus"}), JSON, {}, 422, "retry_policy.kind"),
    ("a billion attempts", "POST", "/api/v1/subscriptions", subscription_json(retry_policy={"kind": "exponential", "min_delay_secs": 1, "max_delay_secs": 2, "max_attempts": 10**9}), JSON, {}, 422, "retry_policy.max_attempts"),
    ("an unknown content mode", "POST", "/api/v1/subscriptions", subscription_json(content_mode="xml"), JSON, {}, 422, "content_mode"),
    ("limit=0", "GET", "/api/v1/messages?limit=0", None, None, {}, None, "limit"),
    ("limit=abc", "GET", "/api/v1/messages?limit=abc", None, None, {}, None, "limit"),
    ("limit=1001", "GET", "/api/v1/messages?limit=1001", None, None, {}, None, "limit"),
    ("a forged cursor", "GET", "/api/v1/messages?cursor=not-a-cursor!!", None, None, {}, None, "cursor"),
    ("since is not a time", "GET", "/api/v1/messages?since=yesterday", None, None, {}, None, "since"),
    ("an unknown state", "GET", "/api/v1/messages?state=bogus", None, None, {}, None, "state"),
    ("a datacontenttype that is not a media type", "POST", "/api/v1/events", event_json(datacontenttype="json"), CE, {}, 422, "datacontenttype"),
    ("a batch of numbers", "POST", "/api/v1/events", b"[1, 2]", "application/cloudevents-batch+json", {}, None, None),
    ("specversion 0.3", "POST", "/api/v1/events", event_json(specversion="0.3"), CE, {}, 422, "specversion"),
    ("data_base64 that is not base64", "POST", "/api/v1/events", json.dumps({k: v for k, v in json.loads(event_json(data_base64="!!!")).items() if k != "data"}).encode(), CE, {}, 422, "data_base64"),
    ("an empty CloudEvent id", "POST", "/api/v1/events", event_json(id=""), CE, {}, 422, "id"),
    ("PUT on the events route", "PUT", "/api/v1/events", event_json(), CE, {}, 405, None),
    ("a 1 KB bearer token", "GET", "/api/v1/messages", None, None, {"authorization": "Bearer " + "t" * 1024}, 401, None),
    ("rotate an unknown subscription", "POST", "/api/v1/subscriptions/sub_01NOTTHERE/rotate-secret", None, None, {}, 404, None),
]


def problem_fields(problem: dict) -> set[str]:
    return {str(e.get("field")) for e in problem.get("errors") or []}


def test_malformed_requests_get_a_4xx_problem_and_the_server_stays_healthy(
    limited: tuple[HeraldServer, Tenant],
) -> None:
    server, tenant = limited
    token = tenant.api_key["token"]
    failures: list[str] = []
    for label, method, path, body, content_type, extra, status, field in MALFORMED:
        headers = {"authorization": f"Bearer {token}", "accept": "application/json"}
        if content_type:
            headers["content-type"] = content_type
        headers.update(extra)
        answer = raw(server, method, path, body, **headers)
        media = answer.content_type.split(";")[0].strip()
        problems = []
        if not 400 <= answer.status < 500 or (status is not None and answer.status != status):
            problems.append(f"status {answer.status}, expected {status or '4xx'}")
        if media != "application/problem+json":
            problems.append("not application/problem+json")
        else:
            problem = answer.json()
            if problem.get("status") != answer.status or not problem.get("title") or "detail" not in problem:
                problems.append("not a complete problem (status, title, detail)")
            if field is not None and field not in problem_fields(problem):
                problems.append(f"does not name the field {field!r} in errors")
        if problems:
            failures.append(f"{label}: {'; '.join(problems)} — {answer}")
    assert len(MALFORMED) >= 40
    assert not failures, f"{len(failures)} of {len(MALFORMED)} malformed requests were mishandled:\n" + "\n".join(failures)

    assert raw(server, "GET", "/healthz").status == 200, "healthy after the malformed requests"
    created = tenant.client.post("/api/v1/subscriptions", data=subscription_json(), headers={"content-type": JSON})
    assert created.status_code == 201, f"the API still works: {describe(created)}"
    assert server.process is not None and server.process.poll() is None, "the process is still running"
    assert " panicked at " not in server.log_path.read_text(errors="replace"), "no handler panicked"


def test_a_body_at_the_limit_is_accepted_and_one_byte_over_is_not(limited: tuple[HeraldServer, Tenant]) -> None:
    server, tenant = limited
    limit = int(LIMITS_ENV["HERALD_LIMITS_MAX_BODY_BYTES"])
    base = event_json(data={"pad": ""})
    padded = base.replace(b'"pad": ""', b'"pad": "' + b"a" * (limit - len(base)) + b'"')
    assert len(padded) == limit
    headers = {"authorization": f"Bearer {tenant.api_key['token']}", "content-type": CE}
    assert raw(server, "POST", "/api/v1/events", padded, **headers).status == 202
    over = padded.replace(b'"pad": "', b'"pad": "a', 1)
    answer = raw(server, "POST", "/api/v1/events", over, **headers)
    assert answer.status == 413 and answer.content_type.startswith("application/problem+json"), str(answer)


# --------------------------------------------------------------------------------------------
# Publish rate limit


def test_the_publish_rate_limit_is_per_api_key_with_retry_after(spawn_herald: Any) -> None:
    server = spawn_herald("rate", env={"HERALD_LIMITS_PUBLISH_PER_SEC": "0.5", "HERALD_LIMITS_PUBLISH_BURST": "3"})
    limited_tenant, other_tenant = server.new_tenant("rate-a"), server.new_tenant("rate-b")

    def publish(tenant: Tenant) -> requests.Response:
        return tenant.client.publish(cloud_event(f"evt-{secrets.token_hex(6)}", "rate.test"), expect=None)

    burst = [publish(limited_tenant).status_code for _ in range(3)]
    assert burst == [202, 202, 202], f"the burst is accepted: {burst}"
    refused = publish(limited_tenant)
    assert refused.status_code == 429, describe(refused)
    assert refused.headers["content-type"].startswith("application/problem+json")
    retry_after = int(refused.headers["retry-after"])
    assert 1 <= retry_after <= 2, f"one token every 2 s: Retry-After {retry_after}"
    assert publish(other_tenant).status_code == 202, "another key has its own bucket"
    reads = limited_tenant.client.get("/api/v1/messages", expect=200)
    assert reads.status_code == 200, "reading is not rate limited"
    later = wait_until(lambda: publish(limited_tenant).status_code == 202, 10, "the bucket to refill", interval=0.5)
    assert later


# --------------------------------------------------------------------------------------------
# Secrets at rest


def dump_database(db: TestDatabase) -> bytes:
    """Everything the database holds, as bytes: the SQLite files, or every row of every table."""
    if db.kind == "sqlite":
        path = Path(db.url.removeprefix("sqlite://").split("?")[0])
        return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
    import psycopg
    from psycopg import sql

    out: list[str] = []
    with psycopg.connect(db.url) as conn:
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
        for table in tables:
            query = sql.SQL("SELECT t::text FROM {} t").format(sql.Identifier(table))
            out.extend(row[0] for row in conn.execute(query))
    assert len(tables) >= 10, f"the dump saw the schema: {tables}"
    return "\n".join(out).encode()


def login_session(server: HeraldServer, username: str, password: str) -> str:
    """Logs in through the dashboard's form (no JavaScript) and returns the session cookie's value."""
    session = requests.Session()
    session.trust_env = False
    page = session.get(f"{server.base_url}/login", timeout=30).text
    action = re.search(r'<form[^>]*action="([^"]+)"[^>]*>(?:(?!</form>).)*name="password"', page, re.S)
    assert action, f"the login page has a form: {page[:1000]}"
    resp = session.post(
        server.base_url + action.group(1),
        data={"username": username, "password": password},
        headers={"origin": server.base_url},
        timeout=30,
    )
    assert resp.status_code < 400, describe(resp)
    cookie = session.cookies.get("herald_session")
    assert cookie, f"logged in: {describe(resp)}"
    return cookie


def test_secrets_keys_and_sessions_are_not_stored_in_plaintext(
    spawn_herald: Any, fresh_database: TestDatabase, tmp_path: Path
) -> None:
    # No configured key: Herald generates one (beside a SQLite file) and seals secrets with it.
    env = {"HERALD_SECRET_KEY": None, "HERALD_ADMIN_PASSWORD": "admin-password-at-rest"}
    if fresh_database.kind == "postgres":
        env["HERALD_DATA_DIR"] = str(tmp_path)
    server = spawn_herald("at-rest", env=env)
    tenant = server.new_tenant("at-rest")
    with Receiver() as sink:
        body = {"name": "at rest", "url": sink.url("/at-rest"), "event_types": ["rest.test"]}
        sub = tenant.client.post("/api/v1/subscriptions", json=body, expect=201).json()
        rotated_body = body | {"name": "rotated", "url": sink.url("/at-rest-rotated")}
        other = tenant.client.post("/api/v1/subscriptions", json=rotated_body, expect=201).json()
        rotated = tenant.client.post(f"/api/v1/subscriptions/{other['id']}/rotate-secret", expect=200).json()
        session_id = login_session(server, "admin", "admin-password-at-rest")
        plaintexts = {
            "secret": sub["secret"],
            "secret before rotation": other["secret"],
            "secret after rotation": rotated["secret"],
            "API key": tenant.api_key["token"],
            "session id": session_id,
        }
        for name, value in list(plaintexts.items()):
            if value.startswith("whsec_"):
                plaintexts[f"{name} (key bytes)"] = value.removeprefix("whsec_")

        # A restart opens the sealed secret again: deliveries are signed with the secret shown.
        server.stop()
        server.restart()
        tenant.client.publish(cloud_event(f"evt-{secrets.token_hex(6)}", "rest.test"))
        (request,) = sink.wait_for_path("/at-rest", 1)
        standardwebhooks.Webhook(sub["secret"]).verify(request.body, dict(request.headers))
        (request,) = sink.wait_for_path("/at-rest-rotated", 1)
        for secret in (rotated["secret"], other["secret"]):  # the old one signs too, for 24 h
            standardwebhooks.Webhook(secret).verify(request.body, dict(request.headers))

    server.stop()
    dump = dump_database(fresh_database)
    log = server.log_path.read_bytes()
    assert sub["id"].encode() in dump, "the dump holds the rows"
    for name, value in plaintexts.items():
        assert value.encode() not in dump, f"the database holds the {name} in plaintext"
        assert value.encode() not in log, f"the log holds the {name} in plaintext"

    key_dir = Path(env.get("HERALD_DATA_DIR") or Path(fresh_database.url.removeprefix("sqlite://").split("?")[0]).parent)
    key_file = key_dir / "herald.key"
    assert key_file.is_file(), f"the generated key is kept in {key_dir}"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600, "only its owner may read the key"
    assert base64.b64decode(key_file.read_text().strip()) and len(base64.b64decode(key_file.read_text().strip())) == 32

    # Another key cannot open these secrets: Herald refuses to start rather than sign with garbage.
    wrong = HeraldServer(
        herald_binary(),
        fresh_database.url,
        log_path=ARTIFACTS_DIR / f"herald-{fresh_database.kind}-{utc_stamp()}-{os.getpid()}-wrong-key.log",
        extra_env={"HERALD_SECRET_KEY": base64.b64encode(os.urandom(32)).decode()},
        startup_timeout=15,
    )
    with pytest.raises(RuntimeError):
        wrong.start()
    wrong.stop()
    assert "secret_key" in wrong.log_tail(), wrong.log_tail()
