"""Tenant isolation, generated from the OpenAPI document: every route × method, called with one
customer's key on another customer's ids, answers 404 (403 on admin routes, 405 for a method the
route does not take), shows none of the other customer's data, and changes none of its rows.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests
from harness import HeraldServer, Tenant, cloud_event, describe, wait_until
from webhook_receiver import Receiver

METHODS = ("GET", "POST", "PATCH", "PUT", "DELETE")


@dataclass
class Victim:
    """Customer A and the ids of everything it owns."""

    tenant: Tenant
    subscription_id: str
    secret: str
    delivered_message_id: str
    dead_message_id: str
    endpoint_id: str
    event_type: str  # a type of its catalog, with an example
    replay_id: str

    def ids(self) -> dict[str, str]:
        return {
            "customers": self.tenant.id,
            "subscriptions": self.subscription_id,
            "messages": self.dead_message_id,
            "endpoints": self.endpoint_id,
            "event-types": self.event_type,
            "replays": self.replay_id,
        }

    def secrets_and_ids(self) -> list[str]:
        return [
            self.tenant.id,
            self.subscription_id,
            self.secret,
            self.delivered_message_id,
            self.dead_message_id,
            self.endpoint_id,
            self.event_type,
            self.replay_id,
            self.tenant.api_key["id"],
        ]


def settled(tenant: Tenant, n: int) -> list[dict]:
    def done() -> list[dict] | None:
        messages = tenant.client.list_all("/api/v1/messages")
        return messages if len(messages) == n and all(m["state"] in ("delivered", "dead") for m in messages) else None

    return wait_until(done, 60, f"{n} messages of {tenant.id} to settle", interval=0.2)


@pytest.fixture(scope="module")
def world(herald: HeraldServer) -> Iterator[tuple[Victim, Tenant]]:
    a, b = herald.new_tenant("isolation-a"), herald.new_tenant("isolation-b")
    with Receiver() as sink:
        sink.answer("/a-dead", 400)
        ok = a.client.post(
            "/api/v1/subscriptions",
            json={"name": "a ok", "url": sink.url("/a-ok"), "event_types": ["iso.ok"]},
            expect=201,
        ).json()
        a.client.post(
            "/api/v1/subscriptions",
            json={
                "name": "a dead",
                "url": sink.url("/a-dead"),
                "event_types": ["iso.dead"],
                "retry_policy": {"kind": "exponential", "min_delay_secs": 1, "max_delay_secs": 1, "max_attempts": 3, "retry_on": "transient"},
            },
            expect=201,
        )
        b.client.post(
            "/api/v1/subscriptions",
            json={"name": "b", "url": sink.url("/b"), "event_types": ["iso.ok"]},
            expect=201,
        )
        catalog_type = f"iso.catalog.{secrets.token_hex(4)}"
        a.client.post("/api/v1/event-types", json={"name": catalog_type, "example": {"n": 1}}, expect=201)
        for event_type in ("iso.ok", "iso.dead"):
            a.client.publish(cloud_event(f"iso-{secrets.token_hex(6)}", event_type, "/isolation"))
        b.client.publish(cloud_event(f"iso-{secrets.token_hex(6)}", "iso.ok", "/isolation"))
        messages = settled(a, 2)
        settled(b, 1)
        by_state = {m["state"]: m for m in messages}
        endpoint = next(e for e in a.client.list_all("/api/v1/endpoints") if e["url"].endswith("/a-ok"))
        window = {"since": "2000-01-01T00:00:00Z", "until": "2000-12-31T00:00:00Z", "subscription_id": ok["id"]}
        replay = a.client.post("/api/v1/events/replay", json=window, expect=202).json()
        yield (
            Victim(
                a,
                ok["id"],
                ok["secret"],
                by_state["delivered"]["id"],
                by_state["dead"]["id"],
                endpoint["id"],
                catalog_type,
                replay["replay_id"],
            ),
            b,
        )


def snapshot(herald: HeraldServer, victim: Victim) -> dict[str, Any]:
    """Everything the admin can read of the victim customer."""
    admin, cid = herald.admin, {"customer_id": victim.tenant.id}
    subscriptions = admin.list_all("/api/v1/subscriptions", cid)
    messages = admin.list_all("/api/v1/messages", cid)
    return {
        "subscriptions": [admin.get(f"/api/v1/subscriptions/{s['id']}", expect=200).json() for s in subscriptions],
        "messages": [admin.get(f"/api/v1/messages/{m['id']}", expect=200).json() for m in messages],
        "endpoints": admin.list_all("/api/v1/endpoints", cid),
        "customers": [c for c in admin.list_all("/api/v1/customers") if c["id"] == victim.tenant.id],
        "event_types": admin.list_all("/api/v1/event-types", cid),
        "replay": admin.get(f"/api/v1/replays/{victim.replay_id}", expect=200).json(),
    }


def body_for(method: str, path: str, victim: Victim) -> dict[str, Any] | None:
    """A body that would be valid for the victim's own key, aimed at the victim's objects."""
    if method not in ("POST", "PATCH", "PUT"):
        return None
    if path == "/api/v1/events":
        return cloud_event(f"iso-{secrets.token_hex(6)}", "iso.ok", "/intruder") | {"customer_id": victim.tenant.id}
    if path == "/api/v1/events/replay":
        window = {"since": "2000-01-01T00:00:00Z", "until": "2000-12-31T00:00:00Z"}
        return window | {"subscription_id": victim.subscription_id}
    if path == "/api/v1/messages/replay":
        return {"subscription_id": victim.subscription_id, "state": "dead", "customer_id": victim.tenant.id}
    if path == "/api/v1/subscriptions/{id}/send-example":
        return {"event_type": victim.event_type}
    if path == "/api/v1/customers/{id}/portal-links":
        return {"role": "editor", "ttl_secs": 600}
    if path == "/api/v1/event-types/{name}":
        return {"description": "hijacked"}
    if path.startswith("/api/v1/subscriptions"):
        changes = {"name": "hijacked", "url": "http://127.0.0.1:9/hijacked", "event_types": ["iso.ok"], "status": "paused"}
        return changes if method == "PATCH" else changes | {"customer_id": victim.tenant.id}
    return {"name": "intruder", "customer_id": victim.tenant.id}


def expected_statuses(method: str, template: str, documented: set[str]) -> set[int]:
    if method not in documented:
        return {404, 405}
    if "{" in template:
        # Another customer's object does not exist for this key; admin-only routes say so first.
        return {403, 404}
    # Collections: the caller's own view (or a refusal); checked below to hold none of the victim's data.
    return {200, 201, 202, 400, 403, 404, 422}


def test_every_route_and_method_with_another_customers_ids(herald: HeraldServer, world: tuple[Victim, Tenant]) -> None:
    victim, intruder = world
    document = herald.admin.get("/api/openapi.json", expect=200).json()
    routes = {path: {m.upper() for m in ops} for path, ops in document["paths"].items() if path.startswith("/api/v1/")}
    assert len(routes) >= 12, f"the document lists the API: {sorted(routes)}"

    before = snapshot(herald, victim)
    session = requests.Session()
    session.trust_env = False
    failures: list[str] = []
    calls = 0
    for template, documented in sorted(routes.items()):
        kind = template.split("/")[3]
        path = re.sub(r"\{[^}]+\}", lambda _: victim.ids().get(kind, victim.subscription_id), template)
        for method in METHODS:
            body = body_for(method, template, victim)
            resp = session.request(
                method,
                herald.base_url + path,
                params={"customer_id": victim.tenant.id},
                data=json.dumps(body).encode() if body is not None else None,
                headers={
                    "authorization": f"Bearer {intruder.api_key['token']}",
                    "content-type": "application/cloudevents+json" if template == "/api/v1/events" else "application/json",
                },
                timeout=30,
            )
            calls += 1
            allowed = expected_statuses(method, template, documented)
            leaked = [value for value in victim.secrets_and_ids() if value in resp.text]
            if resp.status_code not in allowed or leaked:
                failures.append(f"{method} {template}: expected {sorted(allowed)}, leaked {leaked}: {describe(resp)}")
    assert calls >= 60, calls
    assert not failures, f"{len(failures)} of {calls} calls crossed the tenant boundary:\n" + "\n".join(failures)
    after = snapshot(herald, victim)
    for part in before:
        assert after[part] == before[part], f"the intruder changed the victim's {part}"


def test_the_victim_still_sees_its_own_objects(world: tuple[Victim, Tenant]) -> None:
    """The same calls with the owner's key succeed, so the 404s above are about ownership."""
    victim, _ = world
    client = victim.tenant.client
    assert client.get(f"/api/v1/subscriptions/{victim.subscription_id}", expect=200).json()["secret"] == victim.secret
    assert client.get(f"/api/v1/messages/{victim.dead_message_id}", expect=200).json()["state"] == "dead"
    assert any(e["id"] == victim.endpoint_id for e in client.list_all("/api/v1/endpoints"))
