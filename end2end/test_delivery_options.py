"""Per-subscription delivery options, black-box: extra request `headers`, credentials for the
receiver (`auth`: bearer, basic, OAuth 2.0 client credentials) and Ed25519 signatures (`v1a`).

- `v1a` signatures verify with the `public_key` shown (checked with `cryptography`), across a
  rotation (new key first, then the old one) and a switch back to `v1` (HMAC, then Ed25519);
- header values and credentials reach the receiver but are never readable again: not in the log,
  the database, the audit log or a list, and `•••` in the attempt's record;
- one OAuth 2.0 token, from a token endpoint run by the test, serves many deliveries;
- bad headers and credentials are refused with 422 naming the field, and change nothing.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
import requests
import standardwebhooks
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from harness import DELIVERY_TIMEOUT, HeraldServer, Tenant, TestDatabase, cloud_event, describe, unique, wait_until
from webhook_receiver import ReceivedRequest, Receiver

EVENT_TYPE = "options.order"
MASK = "•••"

# ---------------------------------------------------------------------------------------------
# Helpers


def subscribe(tenant: Tenant, receiver: Receiver, **options: Any) -> dict:
    """A subscription of `tenant` to EVENT_TYPE, on a path of its own on the receiver."""
    body = {"name": unique("options"), "url": receiver.url(f"/{unique('hook')}"), "event_types": [EVENT_TYPE]}
    return tenant.client.post("/api/v1/subscriptions", json={**body, **options}, expect=201).json()


def deliver(tenant: Tenant, receiver: Receiver, n: int = 1) -> list[ReceivedRequest]:
    """Publishes `n` events in one request (the tenant has one subscription to EVENT_TYPE) and
    waits for the receiver's request for each message, found by its webhook-id."""
    events = [cloud_event(unique("evt"), EVENT_TYPE) for _ in range(n)]
    resp = tenant.client.publish(events if n > 1 else events[0])
    ids = [message_id for entry in resp.json()["events"] for message_id in entry["message_ids"]]
    assert len(ids) == n, f"one message per event: {describe(resp)}"

    def arrived(reqs: list[ReceivedRequest]) -> list[ReceivedRequest] | None:
        by_id = {r.headers.get("webhook-id"): r for r in reqs}
        return [by_id[i] for i in ids] if all(i in by_id for i in ids) else None

    return receiver.wait_for(arrived, DELIVERY_TIMEOUT, f"the deliveries of {ids}")


def delivered(tenant: Tenant, message_id: str) -> dict:
    """The message's detail once it is delivered and its attempt recorded."""

    def done() -> dict | None:
        detail = tenant.client.get(f"/api/v1/messages/{message_id}", expect=200).json()
        return detail if detail["state"] == "delivered" and detail["attempts"] else None

    return wait_until(done, DELIVERY_TIMEOUT, f"message {message_id} to be recorded as delivered")


def public_key(sub: dict) -> Ed25519PublicKey:
    encoded = sub.get("public_key") or ""
    assert encoded.startswith("whpk_"), f"a v1a subscription shows its public_key, whpk_…: {sub}"
    raw = base64.b64decode(encoded[len("whpk_") :], validate=True)
    assert len(raw) == 32, f"an Ed25519 public key is 32 bytes: {encoded}"
    return Ed25519PublicKey.from_public_bytes(raw)


def signatures(req: ReceivedRequest) -> list[str]:
    return req.headers.get("webhook-signature", "").split(" ")


def verifies(key: Ed25519PublicKey, req: ReceivedRequest, entry: str) -> bool:
    """Whether `entry`, one `v1a,<base64>` of the webhook-signature header, is `key`'s signature
    of "{webhook-id}.{webhook-timestamp}.{body}"."""
    version, _, encoded = entry.partition(",")
    if version != "v1a":
        return False
    signature = base64.b64decode(encoded, validate=True)
    assert len(signature) == 64, f"an Ed25519 signature is 64 bytes: {entry}"
    signed = b".".join([req.headers["webhook-id"].encode(), req.headers["webhook-timestamp"].encode(), req.body])
    try:
        key.verify(signature, signed)
    except InvalidSignature:
        return False
    return True


def stored_bytes(database: TestDatabase) -> bytes:
    """What the database holds: the SQLite file and its write-ahead log, or on PostgreSQL every
    row of every table as text."""
    if database.kind == "sqlite":
        path = Path(database.url.removeprefix("sqlite://").split("?", 1)[0])
        return b"".join(f.read_bytes() for f in (path, path.with_name(f"{path.name}-wal")) if f.exists())
    import psycopg
    from psycopg import sql

    with psycopg.connect(database.url) as conn:
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
        query = sql.SQL("SELECT t::text FROM {} AS t")
        rows = [r[0] for t in tables for r in conn.execute(query.format(sql.Identifier(t)))]
    return "\n".join(rows).encode()


def assert_refused(resp: requests.Response, field: str) -> None:
    assert resp.status_code == 422, f"expected 422: {describe(resp)}"
    media_type = resp.headers.get("content-type", "").split(";")[0].strip()
    assert media_type == "application/problem+json", f"a problem+json answer: {describe(resp)}"
    errors = resp.json().get("errors") or []
    assert errors and errors[0].get("field") == field, f"errors[0].field must be {field!r}: {describe(resp)}"


class TokenEndpoint(ThreadingHTTPServer):
    """An OAuth 2.0 token endpoint on 127.0.0.1: every POST gets a new bearer token `tok-<n>` (the
    n-th call), valid for an hour; `calls` keeps each call's Authorization header and body."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), TokenHandler)
        self.calls: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.url = f"http://127.0.0.1:{self.server_address[1]}/oauth/token"


class TokenHandler(BaseHTTPRequestHandler):
    server: TokenEndpoint

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        body = self.rfile.read(int(self.headers.get("content-length") or 0)).decode()
        with self.server.lock:
            self.server.calls.append((self.headers.get("authorization", ""), body))
            n = len(self.server.calls)
        answer = json.dumps({"access_token": f"tok-{n}", "token_type": "Bearer", "expires_in": 3600}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass


@pytest.fixture
def token_endpoint() -> Iterator[TokenEndpoint]:
    with TokenEndpoint() as endpoint:
        threading.Thread(target=endpoint.serve_forever, name="token-endpoint", daemon=True).start()
        yield endpoint
        endpoint.shutdown()


@pytest.fixture
def tenant(herald: HeraldServer) -> Tenant:
    """A customer of this test only: its one subscription gets every EVENT_TYPE it publishes."""
    return herald.new_tenant("options")


# ---------------------------------------------------------------------------------------------
# Signatures, secrets and OAuth 2.0 tokens


def test_v1a_signatures_verify_with_the_public_key_across_a_rotation(tenant: Tenant, receiver: Receiver) -> None:
    sub = subscribe(tenant, receiver, signature="v1a")
    assert sub.get("signature") == "v1a" and "secret" not in sub, f"the secret key never leaves Herald: {sub}"
    first = public_key(sub)
    [req] = deliver(tenant, receiver)
    assert len(signatures(req)) == 1, f"one key, one signature: {req.headers}"
    assert verifies(first, req, signatures(req)[0]), f"the first key's signature: {req.headers}"

    rotated = tenant.client.post(f"/api/v1/subscriptions/{sub['id']}/rotate-secret", expect=200).json()
    assert rotated.get("public_key") != sub["public_key"] and "secret" not in rotated, f"a new key pair: {rotated}"
    second = public_key(rotated)
    [req] = deliver(tenant, receiver)
    entries = signatures(req)
    assert len(entries) == 2 and all(e.startswith("v1a,") for e in entries), f"both keys sign: {entries}"
    assert [verifies(second, req, e) for e in entries] == [True, False], f"the new key signs first: {entries}"
    assert [verifies(first, req, e) for e in entries] == [False, True], f"then the old key: {entries}"

    # Back to v1: a shared HMAC secret, and the Ed25519 key still signs beside it for a day.
    v1 = tenant.client.patch(f"/api/v1/subscriptions/{sub['id']}", json={"signature": "v1"}, expect=200).json()
    assert v1.get("signature") == "v1" and v1.get("secret", "").startswith("whsec_"), f"an HMAC secret: {v1}"
    assert "public_key" not in v1, f"v1 has no public key: {v1}"
    [req] = deliver(tenant, receiver)
    entries = signatures(req)
    assert [e.split(",")[0] for e in entries] == ["v1", "v1a"], f"HMAC first, then Ed25519: {entries}"
    assert verifies(second, req, entries[1]), f"the last Ed25519 key still signs: {entries}"
    standardwebhooks.Webhook(v1["secret"]).verify(req.body, req.headers)


def test_header_values_and_credentials_are_sent_but_never_readable(
    herald: HeraldServer, database: TestDatabase, tenant: Tenant, receiver: Receiver
) -> None:
    api_key, token, password = (f"e2e-secret-{secrets.token_hex(12)}" for _ in range(3))
    sub = subscribe(tenant, receiver, headers={"X-Api-Key": api_key}, auth={"kind": "bearer", "token": token})
    assert sub.get("headers") == {"X-Api-Key": api_key}, f"a single read shows the values: {sub}"
    assert sub.get("auth") == {"kind": "bearer"}, f"the token is never shown: {sub}"
    listed = [s for s in tenant.client.list_all("/api/v1/subscriptions") if s["id"] == sub["id"]]
    assert listed and listed[0].get("header_names") == ["X-Api-Key"], f"a list shows the names: {listed}"
    assert "headers" not in listed[0] and api_key not in json.dumps(listed), f"and not the values: {listed}"

    [req] = deliver(tenant, receiver)
    assert req.headers.get("x-api-key") == api_key, f"the extra header is sent: {req.headers}"
    assert req.headers.get("authorization") == f"Bearer {token}", f"the bearer token is sent: {req.headers}"
    detail = delivered(tenant, req.headers["webhook-id"])
    recorded = {k.lower(): v for k, v in detail["attempts"][0]["request_headers"].items()}
    assert recorded.get("authorization") == MASK and recorded.get("x-api-key") == MASK, f"masked: {recorded}"

    basic = {"kind": "basic", "username": "e2e", "password": password}
    changed = tenant.client.patch(f"/api/v1/subscriptions/{sub['id']}", json={"auth": basic}, expect=200)
    assert changed.json().get("auth") == {"kind": "basic", "username": "e2e"}, describe(changed)
    assert password not in changed.text and token not in changed.text, f"no credential is shown: {changed.text}"

    audit = herald.admin.list_all("/api/v1/audit-log")
    assert any(row.get("target") == sub["id"] for row in audit), "the subscription's changes are audited"
    database_bytes = stored_bytes(database)
    assert sub["id"].encode() in database_bytes, f"the {database.kind} database read is the server's"
    places = {
        "the server log": herald.log_path.read_bytes(),
        f"the {database.kind} database": database_bytes,
        "the audit log": json.dumps(audit).encode(),
        "the message detail": json.dumps(detail).encode(),
    }
    for place, content in places.items():
        for secret in (api_key, token, password):
            assert secret.encode() not in content, f"{secret} must not be readable in {place}"


def test_one_oauth2_token_serves_many_deliveries(
    tenant: Tenant, receiver: Receiver, token_endpoint: TokenEndpoint
) -> None:
    # Letters, digits and '-' only: the credentials are form-encoded before Basic (RFC 6749 §2.3.1).
    client_id, client_secret = unique("herald-client"), secrets.token_hex(16)
    auth = {"kind": "oauth2", "token_url": token_endpoint.url, "client_id": client_id}
    sub = subscribe(tenant, receiver, auth={**auth, "client_secret": client_secret, "scope": "events"})
    assert sub.get("auth") == {**auth, "scope": "events"}, f"what is not secret is shown: {sub}"
    assert client_secret not in json.dumps(sub), f"the client secret is never shown: {sub}"

    reqs = deliver(tenant, receiver, 5)
    assert [r.headers.get("authorization") for r in reqs] == ["Bearer tok-1"] * 5, "one token for all five"
    assert len(token_endpoint.calls) == 1, f"one token request for five deliveries: {token_endpoint.calls}"
    authorization, body = token_endpoint.calls[0]
    expected = "Basic " + base64.b64encode(f"{client_id}:{client_secret}".encode()).decode()
    assert authorization == expected, f"the client authenticates with HTTP Basic: {authorization!r}"
    assert parse_qs(body, strict_parsing=True) == {"grant_type": ["client_credentials"], "scope": ["events"]}, body


# ---------------------------------------------------------------------------------------------
# Bad input


# Herald's own header names (in any case) and prefixes: an extra header may not replace them.
RESERVED = (
    "host Content-Type content-length Transfer-Encoding connection User-Agent Authorization traceparent tracestate "
    "webhook-id Webhook-Signature webhook-anything ce-id CE-Type"
).split()
# (A private token_url is refused only where private targets are: the session's herald allows them.)
BAD_INPUT = [
    pytest.param({"headers": {f"X-H{i}": "v" for i in range(21)}}, "headers", id="21-headers"),
    pytest.param({"headers": {"X-Tenant": "bad\u0007value"}}, "headers.X-Tenant", id="control-character"),
    pytest.param({"auth": {"kind": "digest", "token": "t"}}, "auth.kind", id="unknown-auth-kind"),
    *(pytest.param({"headers": {name: "v"}}, f"headers.{name}", id=f"reserved-{name}") for name in RESERVED),
]


@pytest.fixture(scope="module")
def guarded(herald: HeraldServer, receiver: Receiver) -> tuple[Tenant, dict]:
    """A customer with one subscription that has headers and credentials, as created."""
    owner = herald.new_tenant("options-bad")
    auth = {"kind": "basic", "username": "u", "password": secrets.token_hex(8)}
    return owner, subscribe(owner, receiver, headers={"X-Tenant": "t1"}, auth=auth)


@pytest.mark.parametrize("change,field", BAD_INPUT)
def test_bad_headers_and_credentials_are_refused_and_change_nothing(
    guarded: tuple[Tenant, dict], change: dict, field: str
) -> None:
    owner, sub = guarded
    name = unique("refused")
    body = {"name": name, "url": sub["url"], "event_types": [EVENT_TYPE], **change}
    assert_refused(owner.client.post("/api/v1/subscriptions", json=body), field)
    assert_refused(owner.client.patch(f"/api/v1/subscriptions/{sub['id']}", json=change), field)

    after = owner.client.get(f"/api/v1/subscriptions/{sub['id']}", expect=200).json()
    kept = ("updated_at", "headers", "auth")
    assert {k: after.get(k) for k in kept} == {k: sub[k] for k in kept}, f"a refused PATCH changes nothing: {after}"
    created = [s for s in owner.client.list_all("/api/v1/subscriptions") if s["name"] == name]
    assert not created, f"a refused create stores nothing: {created}"
