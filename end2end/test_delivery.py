"""The first slice, checked the way a new user would: against the built binary, over HTTP, with a
real webhook receiver, the Standard Webhooks reference verifier and the CloudEvents SDK.

Customer A subscribes a local receiver to `order.created` twice (structured and binary content
mode), publishes 20 `order.created` and 5 `order.deleted` events, and every delivery is checked:
signature, CloudEvents form, webhook-id, user agent, deduplication, the message log, tenant
isolation, input validation and the retry-policy preview.
"""

from __future__ import annotations

import base64
import json
import math
import re
import secrets
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest
import requests
import standardwebhooks
from cloudevents.core.bindings.http import HTTPMessage, from_http, from_structured
from cloudevents.core.formats.json import JSONFormat

from harness import (
    DELIVERY_TIMEOUT,
    ApiClient,
    HeraldServer,
    Tenant,
    cloud_event,
    describe,
    iter_pages,
    wait_until,
)
from webhook_receiver import ReceivedRequest, Receiver

EVENT_TYPE = "order.created"
OTHER_TYPE = "order.deleted"
SOURCE = "/shop"
N_CREATED = 20
N_OTHER = 5
STRUCTURED = "/structured"
BINARY = "/binary"
EXPECTED_REQUESTS = 2 * N_CREATED
# Subscriptions and events made only to provoke validation errors use this type, so that one
# wrongly accepted can never add messages or deliveries to the delivery scenario.
UNUSED_TYPE = "validation.never"

MESSAGE_FIELDS = {
    "id",
    "event_id",
    "subscription_id",
    "endpoint_id",
    "state",
    "dead_reason",
    "attempt_count",
    "next_attempt_at",
    "created_at",
    "delivered_at",
    "last_status",
}
ATTEMPT_FIELDS = {
    "number",
    "started_at",
    "duration_ms",
    "status_code",
    "error_kind",
    "outcome",
    "response_headers",
    "response_body",
}


# ---------------------------------------------------------------------------------------------
# Helpers


def media_type(headers: dict[str, str] | requests.structures.CaseInsensitiveDict) -> str:
    return headers.get("content-type", "").split(";")[0].strip().lower()


def assert_problem(resp: requests.Response, status: int | None = None) -> dict:
    """The response is an RFC 9457 problem (with `status` when given, else any 4xx)."""
    if status is not None:
        assert resp.status_code == status, f"expected HTTP {status}: {describe(resp)}"
    else:
        assert 400 <= resp.status_code < 500, f"expected a 4xx: {describe(resp)}"
    assert media_type(resp.headers) == "application/problem+json", (
        f"error responses must be application/problem+json: {describe(resp)}"
    )
    problem = resp.json()
    assert problem.get("status") == resp.status_code, f"problem `status` must equal the HTTP status: {describe(resp)}"
    assert problem.get("title"), f"problem must have a `title`: {describe(resp)}"
    assert "detail" in problem, f"problem must have a `detail`: {describe(resp)}"
    return problem


def names_field(problem: dict, *names: str) -> bool:
    """True when an `errors` entry (field or message) or the `detail` names one of `names`."""
    patterns = [re.compile(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])") for n in names]
    texts = []
    for entry in problem.get("errors") or []:
        texts.append(str(entry.get("field", "")))
        texts.append(str(entry.get("message", "")))
    texts.append(str(problem.get("detail", "")))
    return any(p.search(t) for p in patterns for t in texts)


def assert_rejects_field(resp: requests.Response, *names: str) -> None:
    problem = assert_problem(resp)
    assert names_field(problem, *names), (
        f"the problem should name the field {' or '.join(names)} in `errors` (or `detail`): {describe(resp)}"
    )


def ce_id(req: ReceivedRequest) -> str:
    """The CloudEvent id of a delivery, whatever its content mode."""
    if "ce-id" in req.headers:
        return req.headers["ce-id"]
    return json.loads(req.body)["id"]


def parse_cloudevent(req: ReceivedRequest, mode: str) -> Any:
    message = HTTPMessage(headers=dict(req.headers), body=req.body)
    if mode == "structured":
        # Structured mode MAY repeat attributes as ce-* headers, so read the body explicitly.
        return from_structured(message, JSONFormat())
    return from_http(message, JSONFormat())


def order_data(i: int) -> dict:
    return {
        "order_id": i,
        "total": {"amount": f"{10 + i}.50", "currency": "EUR"},
        "items": [{"sku": f"SKU-{i:03d}", "qty": i % 3 + 1}],
        "note": "café ☕ – ünïcödé",
    }


def rfc3339(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


# ---------------------------------------------------------------------------------------------
# Shared setup


@dataclass
class Tenants:
    a: Tenant
    b: Tenant


@pytest.fixture(scope="module")
def tenants(herald: HeraldServer) -> Tenants:
    """Customers A and B, each with one API key, created by the admin."""
    return Tenants(a=herald.new_tenant("customer-a"), b=herald.new_tenant("customer-b"))


@pytest.fixture(scope="module")
def other(herald: HeraldServer) -> Tenant:
    """A third customer for validation and preview calls, kept apart from A and B."""
    return herald.new_tenant("customer-v")


@dataclass
class Delivery:
    subscriptions: dict[str, dict]  # receiver path -> subscription as created (with secret)
    modes: dict[str, str]  # receiver path -> content mode
    created: dict[str, dict]  # ce id -> published order.created event
    other: dict[str, dict]  # ce id -> published order.deleted event
    published: dict[str, dict]  # ce id -> its entry in the publish response

    def sub_id(self, path: str) -> str:
        return self.subscriptions[path]["id"]


def create_subscription(client: ApiClient, name: str, url: str, mode: str) -> dict:
    return client.post(
        "/api/v1/subscriptions",
        json={"name": name, "url": url, "event_types": [EVENT_TYPE], "content_mode": mode},
        expect=201,
    ).json()


@pytest.fixture(scope="module")
def delivery(tenants: Tenants, receiver: Receiver) -> Delivery:
    """A subscribes the receiver twice and publishes 20 order.created and 5 order.deleted events
    (ten one at a time, the rest in one batch); returns once the receiver has 40 requests."""
    a = tenants.a.client
    subscriptions = {
        STRUCTURED: create_subscription(a, "e2e structured", receiver.url(STRUCTURED), "structured"),
        BINARY: create_subscription(a, "e2e binary", receiver.url(BINARY), "binary"),
    }
    run = secrets.token_hex(4)
    created = {
        e["id"]: e
        for e in (cloud_event(f"ord-{run}-{i:02d}", EVENT_TYPE, SOURCE, order_data(i)) for i in range(N_CREATED))
    }
    other = {
        e["id"]: e
        for e in (cloud_event(f"del-{run}-{i:02d}", OTHER_TYPE, SOURCE, {"order_id": i}) for i in range(N_OTHER))
    }
    created_list = list(created.values())

    published: dict[str, dict] = {}

    def record(resp: requests.Response, sent: list[dict]) -> None:
        entries = resp.json().get("events")
        assert isinstance(entries, list) and len(entries) == len(sent), (
            f"the publish answer must list one entry per event: {describe(resp)}"
        )
        for entry in entries:
            published[entry["id"]] = entry

    # One at a time, with both accepted content types…
    for i, event in enumerate(created_list[:10]):
        content_type = "application/cloudevents+json" if i % 2 == 0 else "application/json"
        record(tenants.a.client.publish(event, content_type), [event])
    # …then the rest of order.created and every order.deleted in one batch.
    batch = created_list[10:] + list(other.values())
    record(tenants.a.client.publish(batch), batch)

    receiver.wait_for_count(EXPECTED_REQUESTS, DELIVERY_TIMEOUT)
    return Delivery(
        subscriptions=subscriptions,
        modes={STRUCTURED: "structured", BINARY: "binary"},
        created=created,
        other=other,
        published=published,
    )


def all_messages(tenant: Tenant, **params: Any) -> list[dict]:
    return tenant.client.list_all("/api/v1/messages", params)


def wait_until_settled(tenant: Tenant) -> list[dict]:
    """Poll A's message list until no message is pending or delivering; return the list."""

    def settled() -> list[dict] | None:
        messages = all_messages(tenant)
        busy = [m for m in messages if m["state"] in ("pending", "delivering")]
        return None if busy else messages

    return wait_until(settled, DELIVERY_TIMEOUT, "every message to leave pending/delivering")


@pytest.fixture(scope="module")
def settled(delivery: Delivery, tenants: Tenants) -> list[dict]:
    """A's messages once none is pending or delivering any more (the receiver sees a request just
    before Herald records its outcome)."""
    return wait_until_settled(tenants.a)


# ---------------------------------------------------------------------------------------------
# Customers, keys and subscriptions


def test_admin_creates_customers_with_api_keys(herald: HeraldServer, tenants: Tenants) -> None:
    for tenant in (tenants.a, tenants.b):
        assert {"id", "name", "created_at"} <= tenant.customer.keys(), f"customer fields: {tenant.customer}"
        assert {"id", "name", "token", "created_at"} <= tenant.api_key.keys(), f"API key fields: {tenant.api_key}"
        assert tenant.api_key["token"], "the API key token is shown at creation"
    assert tenants.a.id != tenants.b.id
    assert tenants.a.api_key["token"] != tenants.b.api_key["token"]
    listed = {c["id"] for c in herald.admin.list_all("/api/v1/customers")}
    assert {tenants.a.id, tenants.b.id} <= listed, "the admin's customer list shows both new customers"


def test_subscriptions_are_created_with_their_own_secret(delivery: Delivery, receiver: Receiver) -> None:
    for path, sub in delivery.subscriptions.items():
        assert sub.get("id"), f"subscription without id: {sub}"
        assert sub.get("url") == receiver.url(path), f"url echoed back: {sub}"
        assert sub.get("event_types") == [EVENT_TYPE], f"event_types echoed back: {sub}"
        assert sub.get("content_mode") == delivery.modes[path], f"content_mode echoed back: {sub}"
        secret = sub.get("secret", "")
        assert secret.startswith("whsec_"), f"secret must look like whsec_…: {secret!r}"
        assert len(base64.b64decode(secret[len("whsec_") :])) == 32, "secret is base64 of 32 random bytes"
    secrets_ = [s["secret"] for s in delivery.subscriptions.values()]
    assert len(set(secrets_)) == len(secrets_), "each subscription has its own secret"


# ---------------------------------------------------------------------------------------------
# Publishing and delivery


def test_publish_answers_one_message_per_matching_subscription(delivery: Delivery) -> None:
    assert set(delivery.published) == set(delivery.created) | set(delivery.other), (
        "the publish answers list exactly the published ids"
    )
    for event_id, entry in delivery.published.items():
        assert entry["source"] == SOURCE, f"{event_id}: source echoed back: {entry}"
        assert entry["duplicate"] is False, f"{event_id}: a first publish is not a duplicate: {entry}"
    for event_id in delivery.created:
        ids = delivery.published[event_id]["message_ids"]
        assert len(ids) == 2 and len(set(ids)) == 2, f"{event_id}: one message per subscription: {ids}"
    for event_id in delivery.other:
        assert delivery.published[event_id]["message_ids"] == [], f"{event_id}: no subscription wants {OTHER_TYPE}"
    all_ids = [m for e in delivery.published.values() for m in e["message_ids"]]
    assert len(all_ids) == len(set(all_ids)) == EXPECTED_REQUESTS, "message ids are unique"


def test_each_subscription_receives_exactly_the_created_events(
    delivery: Delivery, settled: list[dict], receiver: Receiver
) -> None:
    paths = Counter(r.path for r in receiver.requests)
    assert set(paths) <= {STRUCTURED, BINARY}, f"requests only go to subscribed URLs: {paths}"
    for path in (STRUCTURED, BINARY):
        reqs = receiver.on_path(path)
        assert all(r.method == "POST" for r in reqs), f"{path}: every delivery is a POST"
        ids = Counter(ce_id(r) for r in reqs)
        duplicates = {i: n for i, n in ids.items() if n > 1}
        assert not duplicates, f"{path}: events delivered more than once: {duplicates}"
        assert not set(ids) & set(delivery.other), f"{path}: {OTHER_TYPE} events must not be delivered"
        assert set(ids) == set(delivery.created), (
            f"{path}: expected the {N_CREATED} {EVENT_TYPE} events; "
            f"missing {sorted(set(delivery.created) - set(ids))}, unexpected {sorted(set(ids) - set(delivery.created))}"
        )


def test_every_request_verifies_with_standard_webhooks(
    delivery: Delivery, settled: list[dict], receiver: Receiver
) -> None:
    for path, sub in delivery.subscriptions.items():
        webhook = standardwebhooks.Webhook(sub["secret"])
        other_path = BINARY if path == STRUCTURED else STRUCTURED
        stranger = standardwebhooks.Webhook(delivery.subscriptions[other_path]["secret"])
        for req in receiver.on_path(path):
            try:
                webhook.verify(req.body, req.headers)
            except Exception as exc:  # noqa: BLE001 - turned into a readable failure
                pytest.fail(
                    f"{path} {req.headers.get('webhook-id')}: Standard Webhooks verification failed: {exc!r}; "
                    f"headers={req.headers} body={req.body[:300]!r}"
                )
            with pytest.raises(standardwebhooks.WebhookVerificationError):
                stranger.verify(req.body, req.headers)


def test_structured_requests_are_cloudevents(delivery: Delivery, settled: list[dict], receiver: Receiver) -> None:
    reqs = receiver.on_path(STRUCTURED)
    assert reqs, "no structured deliveries"
    for req in reqs:
        assert media_type(req.headers) == "application/cloudevents+json", (
            f"structured content type: {req.headers.get('content-type')!r}"
        )
        event = parse_cloudevent(req, "structured")
        published = delivery.created.get(event.get_id())
        assert published is not None, f"unknown event id {event.get_id()!r} in {req.body[:300]!r}"
        assert event.get_specversion() == "1.0"
        assert event.get_type() == EVENT_TYPE
        assert event.get_source() == SOURCE
        assert event.get_data() == published["data"], f"{event.get_id()}: data must arrive as published"


def test_binary_requests_are_cloudevents(delivery: Delivery, settled: list[dict], receiver: Receiver) -> None:
    reqs = receiver.on_path(BINARY)
    assert reqs, "no binary deliveries"
    for req in reqs:
        for header in ("ce-id", "ce-source", "ce-type", "ce-specversion"):
            assert header in req.headers, f"binary mode needs the {header} header: {req.headers}"
        assert req.headers["ce-specversion"] == "1.0"
        assert media_type(req.headers) == "application/json", (
            f"binary content type is the event's datacontenttype: {req.headers.get('content-type')!r}"
        )
        event = parse_cloudevent(req, "binary")
        published = delivery.created.get(event.get_id())
        assert published is not None, f"unknown event id {event.get_id()!r}: {req.headers}"
        assert event.get_type() == EVENT_TYPE
        assert event.get_source() == SOURCE
        assert json.loads(req.body) == published["data"], f"{event.get_id()}: the body is the event's data"
        assert event.get_data() == published["data"]


def test_webhook_id_is_the_message_id(
    delivery: Delivery, settled: list[dict], receiver: Receiver, tenants: Tenants
) -> None:
    by_event: dict[str, set[str]] = {}
    for path in (STRUCTURED, BINARY):
        sub_messages = {m["id"] for m in all_messages(tenants.a, subscription_id=delivery.sub_id(path))}
        for req in receiver.on_path(path):
            event_id = ce_id(req)
            webhook_id = req.headers.get("webhook-id")
            assert webhook_id in delivery.published[event_id]["message_ids"], (
                f"{path}: webhook-id {webhook_id!r} is not a message id returned for event {event_id}: "
                f"{delivery.published[event_id]['message_ids']}"
            )
            assert webhook_id in sub_messages, f"{path}: webhook-id {webhook_id!r} belongs to another subscription"
            by_event.setdefault(event_id, set()).add(webhook_id)
    for event_id, ids in by_event.items():
        assert ids == set(delivery.published[event_id]["message_ids"]), f"{event_id}: one message per subscription"


def test_requests_carry_user_agent_and_timestamp(delivery: Delivery, settled: list[dict], receiver: Receiver) -> None:
    for req in receiver.requests:
        agent = req.headers.get("user-agent", "")
        assert agent.startswith("Herald/"), f"user-agent must be Herald/<version>: {agent!r}"
        stamp = req.headers.get("webhook-timestamp", "")
        assert stamp.isdigit(), f"webhook-timestamp is unix seconds: {stamp!r}"
        assert abs(int(stamp) - req.received_at) < 300, f"webhook-timestamp {stamp} is not the attempt time"


def test_republishing_is_a_duplicate_and_delivers_nothing(
    delivery: Delivery, receiver: Receiver, tenants: Tenants
) -> None:
    for event in list(delivery.created.values())[:5]:
        entries = tenants.a.client.publish(event).json()["events"]
        assert len(entries) == 1 and entries[0]["id"] == event["id"], f"publish answer: {entries}"
        assert entries[0]["duplicate"] is True, f"{event['id']}: republishing must answer duplicate: true: {entries}"

    messages = wait_until_settled(tenants.a)
    states = Counter(m["state"] for m in messages)
    assert len(messages) == EXPECTED_REQUESTS, f"republishing creates no messages: {len(messages)} messages, {states}"
    assert states == {"delivered": EXPECTED_REQUESTS}, f"every message is delivered: {states}"
    assert receiver.count() == EXPECTED_REQUESTS, (
        f"nothing more reaches the receiver: {receiver.count()} requests, expected {EXPECTED_REQUESTS}"
    )


# ---------------------------------------------------------------------------------------------
# The message log


def test_delivered_messages_are_listed(delivery: Delivery, settled: list[dict], tenants: Tenants) -> None:
    delivered = all_messages(tenants.a, state="delivered")
    assert len(delivered) == EXPECTED_REQUESTS, f"expected {EXPECTED_REQUESTS} delivered messages, got {len(delivered)}"
    for m in delivered:
        assert m.keys() >= MESSAGE_FIELDS, f"message fields missing: {sorted(MESSAGE_FIELDS - m.keys())} in {m}"
        assert m["state"] == "delivered", m
        assert m["dead_reason"] is None, m
        assert m["attempt_count"] == 1, m
        assert m["delivered_at"], m
    for path in (STRUCTURED, BINARY):
        sub_id = delivery.sub_id(path)
        mine = all_messages(tenants.a, state="delivered", subscription_id=sub_id)
        assert len(mine) == N_CREATED, (
            f"{path}: expected {N_CREATED} messages for subscription {sub_id}, got {len(mine)}"
        )
        assert all(m["subscription_id"] == sub_id for m in mine), f"{path}: the subscription filter holds"


def test_message_detail_shows_the_event_and_one_successful_attempt(
    delivery: Delivery, settled: list[dict], tenants: Tenants
) -> None:
    event_of_message = {mid: eid for eid, e in delivery.published.items() for mid in e["message_ids"]}
    for m in all_messages(tenants.a, state="delivered"):
        resp = tenants.a.client.get(f"/api/v1/messages/{m['id']}", expect=200)
        detail = resp.json()
        assert detail["id"] == m["id"]
        event = detail.get("event") or {}
        assert event.get("id") == event_of_message[m["id"]], f"detail event is the published one: {describe(resp)}"
        assert event.get("type") == EVENT_TYPE and event.get("source") == SOURCE, describe(resp)
        attempts = detail.get("attempts")
        assert isinstance(attempts, list) and len(attempts) == 1, f"one attempt: {describe(resp)}"
        attempt = attempts[0]
        assert attempt.keys() >= ATTEMPT_FIELDS, f"attempt fields missing: {sorted(ATTEMPT_FIELDS - attempt.keys())}"
        assert attempt["number"] == 1, attempt
        assert attempt["status_code"] == 200, attempt
        assert attempt["outcome"] == "success", attempt
        assert attempt["error_kind"] is None, attempt


def test_message_list_pages_newest_first(delivery: Delivery, tenants: Tenants) -> None:
    pages = list(iter_pages(tenants.a.client, "/api/v1/messages", {}, limit=7))
    ids = [m["id"] for page in pages for m in page["data"]]
    assert all(len(page["data"]) <= 7 for page in pages), "a page holds at most `limit` items"
    assert len(ids) == len(set(ids)) == EXPECTED_REQUESTS, f"paging shows every message once: {len(ids)} ids"
    assert pages[-1]["next_cursor"] is None, "the last page has next_cursor null"
    created = [rfc3339(m["created_at"]) for page in pages for m in page["data"]]
    assert created == sorted(created, reverse=True), "messages are listed newest first"


# ---------------------------------------------------------------------------------------------
# Tenant isolation and authentication


def test_admin_reads_a_customer_with_customer_id(
    herald: HeraldServer, delivery: Delivery, settled: list[dict], tenants: Tenants
) -> None:
    subs = herald.admin.list_all("/api/v1/subscriptions", {"customer_id": tenants.a.id})
    assert {s["id"] for s in subs} == {s["id"] for s in delivery.subscriptions.values()}
    messages = herald.admin.list_all("/api/v1/messages", {"customer_id": tenants.a.id, "state": "delivered"})
    assert len(messages) == EXPECTED_REQUESTS


def test_other_customer_lists_nothing_of_a(delivery: Delivery, tenants: Tenants) -> None:
    assert tenants.b.client.list_all("/api/v1/subscriptions") == [], "B has no subscriptions and sees none of A's"
    assert tenants.b.client.list_all("/api/v1/messages") == [], "B has no messages and sees none of A's"


def test_other_customer_gets_404_for_a_ids(delivery: Delivery, tenants: Tenants) -> None:
    b = tenants.b.client
    sub = delivery.subscriptions[STRUCTURED]
    message_id = delivery.published[next(iter(delivery.created))]["message_ids"][0]
    assert_problem(b.get(f"/api/v1/subscriptions/{sub['id']}"), 404)
    assert_problem(b.get(f"/api/v1/messages/{message_id}"), 404)
    assert_problem(b.patch(f"/api/v1/subscriptions/{sub['id']}", json={"name": "taken over"}), 404)
    still = tenants.a.client.get(f"/api/v1/subscriptions/{sub['id']}", expect=200).json()
    assert still["name"] == sub["name"], "B's PATCH must not change A's subscription"


def test_customer_key_cannot_call_admin_routes(tenants: Tenants) -> None:
    a = tenants.a.client
    assert_problem(a.post("/api/v1/customers", json={"name": "sneaky"}), 403)
    own = a.get("/api/v1/audit-log", expect=200).text
    assert tenants.a.id in own and tenants.b.id not in own, "a customer's key reads only its own audit rows"
    assert_problem(a.post(f"/api/v1/customers/{tenants.a.id}/api-keys", json={"name": "sneaky"}), 403)


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer not-a-real-token", "Bearer ", "Basic YWRtaW46YWRtaW4="],
    ids=["no-token", "bad-token", "empty-token", "basic-auth"],
)
@pytest.mark.parametrize(
    "method,path",
    [
        ("GET", "/api/v1/subscriptions"),
        ("GET", "/api/v1/messages"),
        ("POST", "/api/v1/events"),
        ("POST", "/api/v1/customers"),
    ],
)
def test_missing_or_bad_token_is_401(herald: HeraldServer, authorization: str | None, method: str, path: str) -> None:
    headers = {"content-type": "application/json"}
    if authorization is not None:
        headers["authorization"] = authorization
    body = json.dumps(cloud_event("unauth-1", UNUSED_TYPE) if path.endswith("events") else {"name": "x"})
    anonymous = herald.client(None)  # sends only the headers given here
    resp = anonymous.request(method, path, headers=headers, data=body if method == "POST" else None)
    assert_problem(resp, 401)


# ---------------------------------------------------------------------------------------------
# Input validation


def subscription_body(**overrides: Any) -> dict:
    body = {"name": "invalid", "url": "https://example.com/hook", "event_types": [UNUSED_TYPE]}
    body.update(overrides)
    return body


def test_subscription_url_must_be_http(other: Tenant) -> None:
    resp = other.client.post("/api/v1/subscriptions", json=subscription_body(url="ftp://example.com/x"))
    assert_rejects_field(resp, "url")


def test_retry_policy_min_delay_above_max_is_rejected(other: Tenant) -> None:
    policy = {
        "kind": "exponential",
        "min_delay_secs": 10,
        "max_delay_secs": 5,
        "max_attempts": 5,
        "ttl_secs": 3600,
        "retry_on": "all",
    }
    resp = other.client.post("/api/v1/subscriptions", json=subscription_body(retry_policy=policy))
    assert_rejects_field(resp, "min_delay_secs", "max_delay_secs")


@pytest.mark.parametrize(
    "path,content_type,body",
    [
        ("/api/v1/subscriptions", "application/json", b'{"name": "cut", "url": "https://example.com/h'),
        ("/api/v1/events", "application/cloudevents+json", b'{"specversion": "1.0", "id": "cut-1", "sour'),
        ("/api/v1/events", "application/cloudevents-batch+json", b'[{"specversion": "1.0", "id": "cut-2"'),
    ],
    ids=["subscription", "event", "batch"],
)
def test_truncated_json_is_400(other: Tenant, path: str, content_type: str, body: bytes) -> None:
    assert_problem(other.client.post(path, data=body, headers={"content-type": content_type}), 400)


def test_event_without_id_is_rejected(other: Tenant) -> None:
    event = cloud_event("will-be-removed", UNUSED_TYPE)
    del event["id"]
    resp = other.client.publish(event, expect=None)
    assert_rejects_field(resp, "id")


# ---------------------------------------------------------------------------------------------
# Retry-policy preview


WORKFRONT = [((2**n) - 1) * 84.8 for n in range(12)]
EVENTARC = [0, 1, 3, 7, 15]
EVENT_GRID = [0, 10, 40, 100, 400, 1000, 2800, 6400] + [6400 + 3600 * k for k in range(1, 23)]


def preview(client: ApiClient, policy: Any) -> dict:
    return client.post("/api/v1/retry-policies/preview", json={"retry_policy": policy}, expect=200).json()


def assert_offsets(result: dict, expected: list[float]) -> None:
    attempts = result.get("attempts")
    assert isinstance(attempts, list), f"preview must list attempts: {result}"
    assert [a["attempt"] for a in attempts] == list(range(1, len(attempts) + 1)), f"attempt numbers: {attempts}"
    offsets = [a["offset_secs"] for a in attempts]
    assert len(offsets) == len(expected), f"expected {len(expected)} attempts, got {len(offsets)}: {offsets}"
    for n, (got, want) in enumerate(zip(offsets, expected, strict=True), start=1):
        assert math.isclose(got, want, rel_tol=0, abs_tol=1e-6), f"attempt {n}: offset {got}, expected {want}"


@pytest.mark.parametrize("form", ["name", "object"])
@pytest.mark.parametrize(
    "preset,expected,ttl",
    [
        pytest.param("workfront", WORKFRONT, 180000, id="workfront"),
        pytest.param("eventarc", EVENTARC, 86400, id="eventarc"),
        pytest.param("event-grid", EVENT_GRID, 86400, id="event-grid"),
    ],
)
def test_preview_preset(other: Tenant, preset: str, expected: list[float], ttl: int, form: str) -> None:
    result = preview(other.client, preset if form == "name" else {"kind": preset})
    assert_offsets(result, expected)
    assert result.get("ttl_secs") == ttl, f"{preset}: ttl_secs {result.get('ttl_secs')}, expected {ttl}"


def test_preview_workfront_matches_the_documented_figures(other: Tenant) -> None:
    offsets = [a["offset_secs"] for a in preview(other.client, "workfront")["attempts"]]
    assert offsets[:3] == pytest.approx([0, 84.8, 254.4], abs=1e-6)
    assert offsets[-1] == pytest.approx(173585.6, abs=1e-6), "retry 11 at ≈ 48.2 h"


def test_preview_event_grid_stays_within_its_ttl(other: Tenant) -> None:
    offsets = [a["offset_secs"] for a in preview(other.client, "event-grid")["attempts"]]
    assert len(offsets) == 30
    assert offsets[:9] == pytest.approx([0, 10, 40, 100, 400, 1000, 2800, 6400, 10000], abs=1e-6)
    assert all(o <= 86400 for o in offsets), f"every attempt within ttl_secs 86400: {offsets}"


def test_preview_linear_custom_policy(other: Tenant) -> None:
    policy = {
        "kind": "exponential",
        "min_delay_secs": 5,
        "max_delay_secs": 5,
        "max_attempts": 4,
        "ttl_secs": 3600,
        "retry_on": "all",
    }
    assert_offsets(preview(other.client, policy), [0, 5, 10, 15])
