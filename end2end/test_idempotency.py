"""`Idempotency-Key`, black-box: a request sent again after a lost answer changes nothing.

- a publish and a subscription's creation repeated with their keys answer the first answers again
  (`Idempotent-Replayed: true`), and the receiver gets the event once;
- on PostgreSQL, the same key sent to two processes at once makes one change: every answer is the
  first one or a 409 with `Retry-After`;
- a key over 255 characters is refused with 400 naming `Idempotency-Key`, and nothing is made.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import pytest
import requests

from conftest import TwoProcesses
from harness import ApiClient, HeraldServer, Tenant, cloud_event, describe, unique, wait_until
from webhook_receiver import Receiver

WAIT = 30.0  # seconds


@pytest.fixture
def tenant(herald: HeraldServer) -> Tenant:
    return herald.new_tenant("idem")


def keyed(client: ApiClient, method: str, path: str, key: str, **kw) -> requests.Response:
    return client.request(method, path, headers={"Idempotency-Key": key, **kw.pop("headers", {})}, **kw)


def test_a_publish_and_a_subscription_sent_again_are_made_once(tenant: Tenant, receiver: Receiver) -> None:
    event_type = unique("idem.order")
    body = {"name": unique("idem"), "url": receiver.url(f"/{unique('idem')}"), "event_types": [event_type]}
    first = keyed(tenant.client, "POST", "/api/v1/subscriptions", "sub-1", json=body)
    again = keyed(tenant.client, "POST", "/api/v1/subscriptions", "sub-1", json=body)
    assert first.status_code == 201, describe(first)
    assert (again.status_code, again.text) == (201, first.text), describe(again)
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert "Idempotent-Replayed" not in first.headers
    named = [s for s in tenant.client.list_all("/api/v1/subscriptions") if s["name"] == body["name"]]
    assert len(named) == 1, f"one subscription for one key: {named}"

    event = cloud_event(unique("evt"), event_type)
    headers = {"content-type": "application/cloudevents+json"}
    sent = keyed(tenant.client, "POST", "/api/v1/events", "pub-1", json=event, headers=headers)
    resent = keyed(tenant.client, "POST", "/api/v1/events", "pub-1", json=event, headers=headers)
    assert sent.status_code == 202, describe(sent)
    assert (resent.status_code, resent.text) == (202, sent.text), describe(resent)
    assert resent.json()["events"][0]["duplicate"] is False, "the first answer, not a duplicate's"
    path = urlsplit(first.json()["url"]).path
    receiver.wait_for_path(path, 1, WAIT)
    message_id = sent.json()["events"][0]["message_ids"][0]

    def delivered() -> bool:
        return tenant.client.get(f"/api/v1/messages/{message_id}", expect=200).json()["state"] == "delivered"

    wait_until(delivered, WAIT, "the message to be recorded delivered")
    assert len(receiver.on_path(path)) == 1, "the event was delivered once"


def test_a_key_over_255_characters_is_refused_and_nothing_is_made(tenant: Tenant, receiver: Receiver) -> None:
    body = {"name": unique("idem-long"), "url": receiver.url("/long"), "event_types": ["t"]}
    refused = keyed(tenant.client, "POST", "/api/v1/subscriptions", "k" * 256, json=body)
    assert refused.status_code == 400, describe(refused)
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert [e["field"] for e in refused.json()["errors"]] == ["Idempotency-Key"]
    named = [s for s in tenant.client.list_all("/api/v1/subscriptions") if s["name"] == body["name"]]
    assert named == [], named


def test_one_key_sent_to_two_processes_at_once_makes_one_change(two_processes: TwoProcesses, receiver: Receiver) -> None:
    a, b = two_processes("idem")
    tenant = a.new_tenant("idem-two")
    token = tenant.api_key["token"]
    clients = [a.client(token), b.client(token), a.client(token), b.client(token)]
    rounds = 15
    with ThreadPoolExecutor(max_workers=len(clients)) as pool:
        for n in range(rounds):
            body = {"name": f"idem-{n}", "url": receiver.url(f"/idem-{n}"), "event_types": ["t"]}
            sends = [pool.submit(keyed, c, "POST", "/api/v1/subscriptions", f"key-{n}", json=body) for c in clients]
            answers = [f.result() for f in sends]
            statuses = sorted(r.status_code for r in answers)
            assert set(statuses) <= {201, 409}, [describe(r) for r in answers]
            made = [r for r in answers if r.status_code == 201]
            assert made and all(r.text == made[0].text for r in made), [describe(r) for r in answers]
            assert sum("Idempotent-Replayed" not in r.headers for r in made) == 1, [describe(r) for r in answers]
            assert all(r.headers.get("Retry-After") == "1" for r in answers if r.status_code == 409)
    names = sorted(s["name"] for s in tenant.client.list_all("/api/v1/subscriptions"))
    assert names == sorted(f"idem-{n}" for n in range(rounds)), f"one subscription per key: {names}"
