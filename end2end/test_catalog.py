"""The event-type catalog, checked black-box against the built binary.

A customer keeps a catalog of its event types (`/api/v1/event-types`): a CloudEvents type name
with an optional description, a JSON Schema (draft 2020-12) for the events' `data`, and an
example. These tests show, over HTTP:

- create, read, list (newest first, cursor paging), PATCH (null removes, absent keeps) and DELETE,
  the admin acting for a customer with `customer_id`, a taken name answering 409;
- bad input refused with 422 naming the field (`name` with the `herald.` prefix, a `schema` that
  is not JSON Schema, an `example` that breaks the schema, also when a PATCH would leave the stored
  example breaking a new schema), and a refused request changes nothing;
- publishing checks `data` against the type's schema: one `errors` entry per failing part naming
  `data` (`[i].data` in a batch) and its JSON pointer; a refused batch stores none of its events;
  types outside the catalog, or without a schema, publish as before;
- a schema created, changed or removed applies to the very next publish, also in a second process
  on PostgreSQL;
- `send-example` publishes the type's example to one subscription only, delivered to a receiver;
- each customer's catalog is its own, and its changes are in the audit log.

What publishing stores is read back through the API as soon as the publish is answered; only the
delivery of `send-example`'s event is waited for.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests

from conftest import TwoProcesses
from harness import ApiClient, HeraldServer, Tenant, describe, unique
from webhook_receiver import Receiver

TYPES = "/api/v1/event-types"
WAIT = 30.0  # seconds: the delivery of send-example's event, across the process boundary

ORDER_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["total"],
    "properties": {"total": {"type": "number"}, "items": {"type": "array", "items": {"type": "string"}}},
}
ORDER_EXAMPLE = {"total": 12.5, "items": ["book"]}
TYPE_FIELDS = {"id", "name", "customer_id", "description", "schema", "example", "created_at", "updated_at"}


# ---------------------------------------------------------------------------------------------
# Helpers


def create_type(client: ApiClient, name: str, **fields: Any) -> dict:
    return client.post(TYPES, json={"name": name, **fields}, expect=201).json()


def get_type(client: ApiClient, name: str, expect: int | None = 200) -> requests.Response:
    return client.get(f"{TYPES}/{name}", expect=expect)


def order(event_type: str, data: Any, event_id: str | None = None) -> dict:
    """A CloudEvent of `event_type` with JSON `data` and a fresh id (unless given)."""
    return {
        "specversion": "1.0",
        "id": event_id or unique("evt"),
        "source": "/shop",
        "type": event_type,
        "datacontenttype": "application/json",
        "data": data,
    }


def field_errors(resp: requests.Response, status: int = 422) -> list[dict]:
    """The response is a problem+json with status `status`; returns its `errors` entries."""
    assert resp.status_code == status, f"expected {status}: {describe(resp)}"
    content_type = resp.headers.get("content-type", "").split(";")[0].strip()
    assert content_type == "application/problem+json", describe(resp)
    return resp.json().get("errors") or []


def error_for(resp: requests.Response, field: str, status: int = 422) -> str:
    """The problem names `field` (and only it); returns the message of its entry."""
    entries = field_errors(resp, status)
    assert [e.get("field") for e in entries] == [field], f"one `errors` entry naming {field!r}: {describe(resp)}"
    return entries[0].get("message", "")


def accepted(client: ApiClient, ev: dict | list[dict], content_type: str | None = None) -> list[dict]:
    """Publishes; the answer is 202 and every event is new (so none was stored before)."""
    resp = client.publish(ev, content_type=content_type, expect=None)
    assert resp.status_code == 202, describe(resp)
    entries = resp.json()["events"]
    assert all(e["duplicate"] is False for e in entries), f"not stored before: {describe(resp)}"
    return entries


def refused(client: ApiClient, ev: dict | list[dict], content_type: str | None = None) -> requests.Response:
    resp = client.publish(ev, content_type=content_type, expect=None)
    assert resp.status_code == 422, f"the schema must refuse {ev}: {describe(resp)}"
    return resp


def stored(client: ApiClient, ev: dict) -> bool:
    resp = client.get(f"/api/v1/events/{ev['id']}", params={"source": ev["source"]})
    assert resp.status_code in (200, 404), describe(resp)
    return resp.status_code == 200


def path_of(sub: dict) -> str:
    return "/" + sub["url"].split("/", 3)[3]


@pytest.fixture
def tenant(herald: HeraldServer) -> Tenant:
    """A customer of this test only: its catalog, events and messages are its own."""
    return herald.new_tenant("catalog")


# ---------------------------------------------------------------------------------------------
# (1) The catalog's routes


def test_create_read_list_and_delete(tenant: Tenant) -> None:
    name = unique("order.created")
    body = {"description": "An order was placed", "schema": ORDER_SCHEMA, "example": ORDER_EXAMPLE}
    created = create_type(tenant.client, name, **body)
    assert set(created) == TYPE_FIELDS, f"the type's fields: {created}"
    assert (created["name"], created["customer_id"]) == (name, tenant.id), created
    assert {k: created[k] for k in body} == body, "description, schema and example are kept as sent"
    assert get_type(tenant.client, name).json() == created

    bare = create_type(tenant.client, unique("order.paid"))
    assert (bare["description"], bare["schema"], bare["example"]) == (None, None, None), bare
    # The same name again is a conflict, whatever else differs.
    taken = tenant.client.post(TYPES, json={"name": name, "description": "again"})
    assert taken.status_code == 409, describe(taken)

    tenant.client.delete(f"{TYPES}/{name}", expect=204)
    assert get_type(tenant.client, name, expect=None).status_code == 404, "a deleted type is gone"
    assert [t["name"] for t in tenant.client.list_all(TYPES)] == [bare["name"]]
    # Its name is free again.
    create_type(tenant.client, name)


def test_the_list_is_newest_first_with_cursor_paging(tenant: Tenant) -> None:
    names = [unique(f"paged.{i}") for i in range(3)]
    for name in names:
        create_type(tenant.client, name)
    first = tenant.client.get(TYPES, params={"limit": 2}, expect=200).json()
    assert [t["name"] for t in first["data"]] == names[:0:-1], f"the two newest, newest first: {first}"
    assert first["next_cursor"], f"a second page: {first}"
    second = tenant.client.get(TYPES, params={"limit": 2, "cursor": first["next_cursor"]}, expect=200).json()
    assert [t["name"] for t in second["data"]] == names[:1] and not second["next_cursor"], second


def test_the_admin_names_the_customer(herald: HeraldServer, tenant: Tenant) -> None:
    admin, name = herald.admin, unique("admin.made")
    error_for(admin.post(TYPES, json={"name": name}), "customer_id")
    created = admin.post(TYPES, json={"name": name, "customer_id": tenant.id}, expect=201).json()
    assert created["customer_id"] == tenant.id, "the admin's type is the customer's"
    assert get_type(tenant.client, name).json()["name"] == name

    # Without `customer_id` the admin's call is refused, naming it; with it, it acts.
    url, ours = f"{TYPES}/{name}", {"customer_id": tenant.id}
    error_for(admin.get(url), "customer_id")
    error_for(admin.patch(url, json={"description": "x"}), "customer_id")
    error_for(admin.delete(url), "customer_id")
    assert get_type(tenant.client, name).json()["description"] is None, "the refused PATCH changed nothing"
    assert admin.get(url, params=ours, expect=200).json()["id"] == created["id"]
    admin.patch(url, params=ours, json={"description": "by the admin"}, expect=200)
    assert get_type(tenant.client, name).json()["description"] == "by the admin"
    admin.delete(url, params=ours, expect=204)
    assert get_type(tenant.client, name, expect=None).status_code == 404


def test_patch_null_removes_and_absent_keeps(tenant: Tenant) -> None:
    name = unique("patched")
    create_type(tenant.client, name, description="first", schema=ORDER_SCHEMA, example=ORDER_EXAMPLE)
    url = f"{TYPES}/{name}"

    kept = tenant.client.patch(url, json={"description": "second"}, expect=200).json()
    assert (kept["description"], kept["schema"], kept["example"]) == ("second", ORDER_SCHEMA, ORDER_EXAMPLE), kept
    assert tenant.client.patch(url, json={}, expect=200).json()["description"] == "second", "an empty PATCH keeps"
    removed = tenant.client.patch(url, json={"description": None, "example": None}, expect=200).json()
    assert (removed["description"], removed["schema"], removed["example"]) == (None, ORDER_SCHEMA, None), removed
    gone = tenant.client.patch(url, json={"schema": None}, expect=200).json()
    assert gone["schema"] is None, gone
    assert get_type(tenant.client, name).json() == gone, "the PATCH answer is what is stored"


# ---------------------------------------------------------------------------------------------
# (2) Bad input is refused, naming the field, and changes nothing


BAD_TYPES = [
    pytest.param({"name": "herald.message.dead"}, "name", id="herald-prefix"),
    pytest.param({"name": "herald.mine"}, "name", id="herald-prefix-made-up"),
    pytest.param({"name": "bad.schema", "schema": {"type": "not-a-type"}}, "schema", id="schema-unknown-type"),
    pytest.param({"name": "bad.schema", "schema": {"minimum": "zero"}}, "schema", id="schema-keyword-of-wrong-kind"),
    pytest.param({"name": "bad.schema", "schema": {"required": "total"}}, "schema", id="schema-required-not-array"),
    pytest.param({"name": "bad.schema", "schema": 42}, "schema", id="schema-a-number"),
    pytest.param({"name": "bad.example", "schema": ORDER_SCHEMA, "example": {"total": "x"}}, "example", id="example"),
    pytest.param({"name": "bad.example", "schema": ORDER_SCHEMA, "example": {}}, "example", id="example-no-total"),
]


@pytest.mark.parametrize("body,field", BAD_TYPES)
def test_a_bad_type_is_refused_and_nothing_is_stored(tenant: Tenant, body: dict, field: str) -> None:
    error_for(tenant.client.post(TYPES, json=body), field)
    assert tenant.client.list_all(TYPES) == [], "a refused create stores nothing"


def test_a_patch_breaking_the_example_is_refused_and_changes_nothing(tenant: Tenant) -> None:
    name = unique("kept")
    before = create_type(tenant.client, name, description="kept", schema=ORDER_SCHEMA, example=ORDER_EXAMPLE)
    url = f"{TYPES}/{name}"
    needs_currency = {"type": "object", "required": ["currency"]}

    # The stored example has no currency: the new schema would leave it broken.
    message = error_for(tenant.client.patch(url, json={"schema": needs_currency, "description": "x"}), "example")
    assert message, "the refusal says why"
    # An example that breaks the stored schema, likewise.
    error_for(tenant.client.patch(url, json={"example": {"total": "many"}}), "example")
    error_for(tenant.client.patch(url, json={"schema": {"type": "nope"}}), "schema")
    assert get_type(tenant.client, name).json() == before, "the refused PATCHes changed nothing"

    # The schema in force is still the stored one: data with a currency but no total is refused.
    refused(tenant.client, order(name, {"currency": "EUR"}))
    # A schema and an example that agree, changed together, are accepted.
    both = {"schema": needs_currency, "example": {"currency": "EUR"}}
    assert tenant.client.patch(url, json=both, expect=200).json()["schema"] == needs_currency


# ---------------------------------------------------------------------------------------------
# (3) Publishing checks data against the schema


@pytest.mark.parametrize("content_type", ["application/cloudevents+json", "application/json"])
def test_a_single_event_breaking_the_schema_is_refused_and_not_stored(tenant: Tenant, content_type: str) -> None:
    name = unique("order.created")
    create_type(tenant.client, name, schema=ORDER_SCHEMA)
    bad = order(name, {"total": "x"})
    message = error_for(refused(tenant.client, bad, content_type), "data")
    assert "/total" in message, f"the message gives the JSON pointer of the failing part: {message!r}"
    assert not stored(tenant.client, bad), "a refused event is not stored"
    accepted(tenant.client, order(name, {"total": 3}), content_type)


def test_each_failing_part_is_one_error_with_its_pointer(tenant: Tenant) -> None:
    name = unique("order.created")
    create_type(tenant.client, name, schema=ORDER_SCHEMA)
    entries = field_errors(refused(tenant.client, order(name, {"total": "x", "items": ["a", 3]})))
    assert [e["field"] for e in entries] == ["data", "data"], f"one entry per failing part: {entries}"
    messages = sorted(e["message"] for e in entries)
    assert messages[0].startswith("at /items/1") and messages[1].startswith("at /total"), messages
    # A missing required property fails at the root.
    [root] = field_errors(refused(tenant.client, order(name, {"items": []})))
    assert root["field"] == "data" and root["message"].startswith("at /"), root


def test_a_batch_with_one_bad_event_is_refused_whole(tenant: Tenant) -> None:
    name, unlisted = unique("order.created"), unique("order.unlisted")
    create_type(tenant.client, name, schema=ORDER_SCHEMA)
    batch = [order(name, {"total": 1}), order(unlisted, "anything"), order(name, {"total": "x"}), order(name, {})]
    entries = field_errors(refused(tenant.client, batch))
    assert [e["field"] for e in entries] == ["[2].data", "[3].data"], f"each bad event by its place: {entries}"
    assert "/total" in entries[0]["message"], entries
    for ev in batch:
        assert not stored(tenant.client, ev), f"{ev['id']}: nothing of a refused batch is stored"
    assert tenant.client.list_all("/api/v1/events") == []
    # The good events alone publish, as new events: they were not stored before.
    accepted(tenant.client, batch[:2])


def test_types_outside_the_catalog_or_without_schema_publish_as_before(tenant: Tenant) -> None:
    checked, plain, unlisted = unique("checked"), unique("plain"), unique("unlisted")
    create_type(tenant.client, checked, schema=ORDER_SCHEMA)
    create_type(tenant.client, plain, description="no schema")
    # The same data: refused for the type with a schema, published for the others.
    data = {"total": "x"}
    refused(tenant.client, order(checked, data))
    accepted(tenant.client, [order(plain, data), order(unlisted, data)])
    accepted(tenant.client, order(plain, "text"))


# ---------------------------------------------------------------------------------------------
# (4) A change applies to the very next publish


def check_changes_apply_at_once(writer: ApiClient, publisher: ApiClient) -> None:
    """The type is created, changed and removed through `writer`; every publish goes through
    `publisher` right after the change, with no wait."""
    name = unique("order.created")
    url = f"{TYPES}/{name}"
    text_total = {"type": "object", "properties": {"total": {"type": "string"}}}
    # Published first, so the publisher has the customer's routing in hand before any schema.
    accepted(publisher, order(name, {"total": "before"}))

    writer.post(TYPES, json={"name": name, "schema": ORDER_SCHEMA}, expect=201)
    text, number = order(name, {"total": "x"}), order(name, {"total": 1})
    refused(publisher, text)
    writer.patch(url, json={"schema": text_total}, expect=200)
    refused(publisher, number)  # the changed schema, not merely none
    accepted(publisher, text)
    writer.patch(url, json={"schema": None}, expect=200)
    accepted(publisher, number)

    writer.patch(url, json={"schema": ORDER_SCHEMA}, expect=200)
    again = order(name, {"total": "x"})
    refused(publisher, again)
    writer.delete(url, expect=204)
    accepted(publisher, again)


def test_a_schema_change_applies_to_the_next_publish(tenant: Tenant) -> None:
    check_changes_apply_at_once(tenant.client, tenant.client)


def test_a_schema_changed_through_one_process_applies_to_the_next_publish_through_another(
    two_processes: TwoProcesses,
) -> None:
    a, b = two_processes("catalog")
    tenant = a.new_tenant("catalog-two")
    check_changes_apply_at_once(tenant.client, b.client(tenant.api_key["token"]))


# ---------------------------------------------------------------------------------------------
# (5) send-example


def subscribe(tenant: Tenant, receiver: Receiver) -> dict:
    body = {"name": unique("catalog"), "url": receiver.url(f"/{unique('hook')}"), "event_types": ["*"]}
    return tenant.client.post("/api/v1/subscriptions", json=body, expect=201).json()


def send_example(client: ApiClient, sub: dict, event_type: str) -> requests.Response:
    return client.post(f"/api/v1/subscriptions/{sub['id']}/send-example", json={"event_type": event_type})


def test_send_example_delivers_the_example_to_one_subscription_only(tenant: Tenant, receiver: Receiver) -> None:
    name = unique("order.created")
    create_type(tenant.client, name, schema=ORDER_SCHEMA, example=ORDER_EXAMPLE)
    chosen, other = subscribe(tenant, receiver), subscribe(tenant, receiver)

    resp = send_example(tenant.client, chosen, name)
    assert resp.status_code == 202, describe(resp)
    [published] = resp.json()["events"]
    assert set(published) == {"id", "source", "duplicate", "message_ids"}, f"answered like a publish: {describe(resp)}"
    assert (published["source"], published["duplicate"], len(published["message_ids"])) == (
        "/herald/example",
        False,
        1,
    ), describe(resp)

    [delivered] = receiver.wait_for_path(path_of(chosen), 1, WAIT)
    body = json.loads(delivered.body)
    assert body["data"] == ORDER_EXAMPLE, f"the example is the event's data: {body}"
    assert (body["id"], body["source"], body["type"]) == (published["id"], "/herald/example", name), body
    assert body["datacontenttype"] == "application/json", body
    # The event was for the chosen subscription only: the other has no message, and got nothing.
    chosen_messages = tenant.client.list_all("/api/v1/messages", {"subscription_id": chosen["id"]})
    assert [m["id"] for m in chosen_messages] == published["message_ids"]
    assert tenant.client.list_all("/api/v1/messages", {"subscription_id": other["id"]}) == []
    assert receiver.on_path(path_of(other)) == []
    assert len(receiver.on_path(path_of(chosen))) == 1, "exactly one request at the chosen path"


def test_send_example_refusals(herald: HeraldServer, tenant: Tenant, receiver: Receiver) -> None:
    other = herald.new_tenant("catalog-other")
    sub = subscribe(tenant, receiver)
    without, theirs = unique("no.example"), unique("theirs")
    create_type(tenant.client, without, schema=ORDER_SCHEMA)
    create_type(other.client, theirs, example={"total": 1})
    create_type(tenant.client, unique("mine"), example={"total": 1})

    resp = send_example(tenant.client, sub, without)
    assert resp.status_code == 409, f"the type has no example: {describe(resp)}"
    # Not in the caller's catalog, whether no one's or another customer's.
    for name in (unique("nowhere"), theirs):
        error_for(send_example(tenant.client, sub, name), "event_type", status=404)
    # Another customer's subscription is not found, even with a type of its own catalog.
    resp = send_example(other.client, sub, theirs)
    assert resp.status_code == 404, describe(resp)
    assert tenant.client.list_all("/api/v1/messages", {"subscription_id": sub["id"]}) == [], "nothing was sent"


# ---------------------------------------------------------------------------------------------
# (6) Each customer's catalog is its own


def test_another_customer_never_sees_changes_or_deletes_a_type(herald: HeraldServer, tenant: Tenant) -> None:
    other = herald.new_tenant("catalog-other")
    name = unique("order.created")
    mine = create_type(tenant.client, name, schema=ORDER_SCHEMA, example=ORDER_EXAMPLE)
    url = f"{TYPES}/{name}"

    assert get_type(other.client, name, expect=None).status_code == 404
    assert other.client.patch(url, json={"schema": None}).status_code == 404
    assert other.client.delete(url).status_code == 404
    # Naming the owner as `customer_id` does not help a customer key.
    assert other.client.get(url, params={"customer_id": tenant.id}).status_code in (403, 404, 422)
    assert other.client.list_all(TYPES) == []
    assert get_type(tenant.client, name).json() == mine, "the owner's type is untouched"

    # The schema checks its owner's publishes only.
    bad = {"total": "x"}
    accepted(other.client, order(name, bad))
    refused(tenant.client, order(name, bad))
    # The other customer may have a type of the same name, without schema: still not checked.
    create_type(other.client, name, description="theirs")
    accepted(other.client, order(name, bad))
    refused(tenant.client, order(name, bad))
    other.client.delete(url, expect=204)
    assert get_type(tenant.client, name).json() == mine, "their delete removed their own type only"


# ---------------------------------------------------------------------------------------------
# (7) Audit


def test_changes_are_in_the_audit_log(tenant: Tenant) -> None:
    name = unique("audited")
    create_type(tenant.client, name, schema=ORDER_SCHEMA)
    tenant.client.patch(f"{TYPES}/{name}", json={"description": "changed"}, expect=200)
    tenant.client.delete(f"{TYPES}/{name}", expect=204)

    rows = tenant.client.list_all("/api/v1/audit-log", limit=100)
    actions = [r["action"] for r in rows if r["action"].startswith("event_type.")]
    # Newest first: the delete, the update, the create.
    assert actions == ["event_type.delete", "event_type.update", "event_type.create"], rows
    assert all(name in json.dumps(r) for r in rows if r["action"].startswith("event_type.")), rows
