"""Subscription filters (CEL), checked black-box against the built binary.

A subscription may carry a `filter`: a CEL expression over the event, the variable `message`. An
event reaches the subscription when its type is in `event_types` AND the filter gives `true`. These
tests show, over HTTP with a real receiver:

- a matching event is delivered and a non-matching one gets no message for that subscription
  (while a subscription without a filter still gets it);
- every kind of variable routes: each context attribute, `time` as a timestamp, extensions with
  their JSON type, `data` as JSON, text or bytes, and absent attributes;
- bad filters (do not parse, not boolean, over 4096 bytes) are refused with 422 naming `filter`,
  and a refused create or PATCH changes nothing; PATCH keeps, replaces or removes a filter;
- `POST /api/v1/subscriptions/filter-test` answers `{matches, error}` and stores nothing;
- a filter failing at run time does not match and counts in `herald_filter_errors_total`;
- a changed filter routes the very next publish, also in a second process on PostgreSQL;
- Herald's operational events (`herald.message.dead`) go through the filter;
- archive replay gives messages only to the events the filter accepts.

Routing is read from the publish answer (`message_ids`) and from the stored messages, which exist
as soon as the publish is answered; only deliveries and operational events are waited for.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import requests

from conftest import TwoProcesses
from harness import ApiClient, HeraldServer, Tenant, describe, exponential, unique, wait_until
from webhook_receiver import Receiver

MAX_FILTER_BYTES = 4096
# The filter of the contract's example.
EU_BIG_ORDERS = 'message.source.startsWith("/shop/eu") && message.data.total > 100'
WAIT = 30.0  # seconds: deliveries, operational events and metrics, across the process boundary


# ---------------------------------------------------------------------------------------------
# Helpers


def event(event_type: str = "filters.order", source: str = "/shop/eu/berlin", **fields: Any) -> dict:
    """A CloudEvent with a fresh id and only the attributes given (no data unless given); a field
    given as None is sent as JSON null."""
    return {"specversion": "1.0", "id": unique("evt"), "source": source, "type": event_type, **fields}


def json_event(total: Any, **fields: Any) -> dict:
    return event(datacontenttype="application/json", data={"total": total}, **fields)


def subscribe(
    tenant: Tenant,
    receiver: Receiver,
    filter: str | None = None,  # noqa: A002 - the API's field name
    event_types: tuple[str, ...] = ("*",),
    client: ApiClient | None = None,
    **extra: Any,
) -> dict:
    """A subscription of `tenant` to a path of its own on the receiver; `filter` is sent only when
    given, so None means "no filter"."""
    body = {"name": unique("filters"), "url": receiver.url(f"/{unique('hook')}"), "event_types": list(event_types)}
    if filter is not None:
        body["filter"] = filter
    body.update(extra)
    return (client or tenant.client).post("/api/v1/subscriptions", json=body, expect=201).json()


def path_of(sub: dict) -> str:
    return "/" + sub["url"].split("/", 3)[3]


def routed(client: ApiClient, ev: dict) -> list[str]:
    """Publishes one event; returns the ids of the messages it got."""
    resp = client.publish(ev)
    [entry] = resp.json()["events"]
    assert entry["duplicate"] is False, f"a fresh event: {describe(resp)}"
    return entry["message_ids"]


def subscription_of(client: ApiClient, message_id: str) -> str:
    return client.get(f"/api/v1/messages/{message_id}", expect=200).json()["subscription_id"]


def subscriptions_reached(client: ApiClient, event_id: str, source: str | None = None) -> set[str]:
    """The subscriptions that the stored event has messages for, read from GET /api/v1/events/{id}."""
    params = {"source": source} if source else None
    detail = client.get(f"/api/v1/events/{event_id}", params=params, expect=200).json()
    return {subscription_of(client, m) for m in detail["message_ids"]}


def get_subscription(client: ApiClient, sub_id: str) -> dict:
    return client.get(f"/api/v1/subscriptions/{sub_id}", expect=200).json()


def filter_error(resp: requests.Response) -> str:
    """The response is a 422 problem+json with an `errors` entry for the field `filter`; returns
    that entry's message."""
    assert resp.status_code == 422, f"expected 422: {describe(resp)}"
    assert resp.headers.get("content-type", "").split(";")[0].strip() == "application/problem+json", describe(resp)
    entries = [e for e in resp.json().get("errors") or [] if e.get("field") == "filter"]
    assert entries, f"an `errors` entry must name the field `filter`: {describe(resp)}"
    return entries[0].get("message", "")


def filter_errors_total(server: HeraldServer) -> float:
    """The sum of `herald_filter_errors_total` on the server's /metrics (0 before it shows)."""
    session = requests.Session()
    session.trust_env = False
    text = session.get(f"{server.base_url}/metrics", timeout=10).text
    total = 0.0
    for line in text.splitlines():
        if re.match(r"herald_filter_errors_total(\{|\s)", line):
            total += float(line.rsplit(" ", 1)[1])
    return total


def filter_test(client: ApiClient, flt: str, ev: dict) -> requests.Response:
    return client.post("/api/v1/subscriptions/filter-test", json={"filter": flt, "event": ev})


@pytest.fixture
def tenant(herald: HeraldServer) -> Tenant:
    """A customer of this test only: its subscriptions, events and messages are its own."""
    return herald.new_tenant("filters")


# ---------------------------------------------------------------------------------------------
# (1) A matching and a non-matching event


def test_only_matching_events_reach_a_filtered_subscription(tenant: Tenant, receiver: Receiver) -> None:
    event_type = unique("order.created")
    filtered = subscribe(tenant, receiver, EU_BIG_ORDERS, (event_type,))
    unfiltered = subscribe(tenant, receiver, None, (event_type,))
    assert filtered["filter"] == EU_BIG_ORDERS, f"the filter is echoed back: {filtered}"
    assert "filter" in unfiltered and unfiltered["filter"] is None, f"no filter reads as null: {unfiltered}"

    match = json_event(150, event_type=event_type, source="/shop/eu/berlin")
    small = json_event(50, event_type=event_type, source="/shop/eu/berlin")
    elsewhere = json_event(500, event_type=event_type, source="/shop/us/boston")
    # The filter is true for it, but its type is not subscribed: type AND filter must hold.
    other_type = json_event(150, event_type=unique("order.deleted"), source="/shop/eu/berlin")
    both, only_unfiltered = {filtered["id"], unfiltered["id"]}, {unfiltered["id"]}
    resp = tenant.client.publish([match, small, elsewhere, other_type])
    counts = [len(e["message_ids"]) for e in resp.json()["events"]]
    assert counts == [2, 1, 1, 0], f"messages per event (match, small, elsewhere, other type): {describe(resp)}"

    assert subscriptions_reached(tenant.client, match["id"]) == both
    for ev in (small, elsewhere):
        assert subscriptions_reached(tenant.client, ev["id"]) == only_unfiltered, (
            f"{ev['id']} (source {ev['source']}, data {ev['data']}) must have no message for the filtered subscription"
        )
    assert subscriptions_reached(tenant.client, other_type["id"]) == set()

    # The filtered subscription has one message; once it is delivered, its path got that one event.
    [message] = tenant.client.list_all("/api/v1/messages", {"subscription_id": filtered["id"]})
    wait_until(
        lambda: tenant.client.get(f"/api/v1/messages/{message['id']}", expect=200).json()["state"] == "delivered",
        WAIT,
        "the filtered subscription's message to be delivered",
    )
    requests_ = receiver.on_path(path_of(filtered))
    assert [json.loads(r.body)["id"] for r in requests_] == [match["id"]], "only the matching event is delivered"


# ---------------------------------------------------------------------------------------------
# (2) Every kind of variable


KINDS = [
    # (the event's fields beyond specversion/id/source/type, a filter that is true for it)
    pytest.param({}, 'message.id.startsWith("evt-")', id="id"),
    pytest.param({"source": "/shop/eu/berlin"}, 'message.source.startsWith("/shop/eu")', id="source"),
    pytest.param({"type": "order.created"}, 'message.type == "order.created"', id="type"),
    pytest.param({}, 'message.specversion == "1.0"', id="specversion"),
    pytest.param({"subject": "orders/42"}, 'message.subject == "orders/42"', id="subject"),
    pytest.param({}, "!has(message.subject)", id="absent-subject"),
    pytest.param({"subject": None}, "!has(message.subject)", id="null-subject-is-absent"),
    pytest.param({}, "!has(message.data) && !has(message.time)", id="absent-data-and-time"),
    pytest.param(
        {"time": "2026-03-01T12:00:00Z"}, 'message.time > timestamp("2026-01-01T00:00:00Z")', id="time-is-a-timestamp"
    ),
    # Equal as instants, not as strings: the offset is read.
    pytest.param(
        {"time": "2026-03-01T13:00:00+01:00"}, 'message.time == timestamp("2026-03-01T12:00:00Z")', id="time-offset"
    ),
    pytest.param(
        {"datacontenttype": "application/json", "data": {}},
        'message.datacontenttype == "application/json"',
        id="datacontenttype",
    ),
    pytest.param(
        {"dataschema": "https://example.com/schemas/order.json"},
        'message.dataschema.endsWith("/order.json")',
        id="dataschema",
    ),
    pytest.param({"tenant": "eu"}, 'message.tenant == "eu"', id="extension-string"),
    pytest.param({"priority": 5}, "message.priority > 3", id="extension-number"),
    pytest.param({"vip": True}, "message.vip == true", id="extension-boolean"),
    pytest.param(
        {"datacontenttype": "application/json", "data": {"total": 150, "items": [{"sku": "A"}, {"sku": "B"}]}},
        'message.data.total > 100 && size(message.data.items) == 2 && message.data.items[1].sku == "B"',
        id="data-json",
    ),
    pytest.param(
        {"source": "/shop/eu/paris", "datacontenttype": "application/json", "data": {"total": 101}},
        EU_BIG_ORDERS,
        id="contract-example",
    ),
    pytest.param(
        {"datacontenttype": "text/plain", "data": "hello"}, 'message.data.startsWith("hel")', id="data-text"
    ),
    # Text that looks like JSON stays text.
    pytest.param(
        {"datacontenttype": "text/plain", "data": '{"total": 5}'},
        'message.data == "{\\"total\\": 5}"',
        id="data-text-not-parsed",
    ),
    pytest.param(
        {"datacontenttype": "application/octet-stream", "data_base64": "YWJj"},  # b"abc"
        'message.data == b"abc" && size(message.data) == 3',
        id="data-bytes",
    ),
]


@pytest.mark.parametrize("fields,true_filter", KINDS)
def test_each_kind_of_variable_routes(tenant: Tenant, receiver: Receiver, fields: dict, true_filter: str) -> None:
    # Two subscriptions: the filter, and its negation. An evaluation error matches neither, so the
    # event reaching exactly the first shows the filter gave `true` (not an error, not false).
    yes = subscribe(tenant, receiver, true_filter)
    no = subscribe(tenant, receiver, f"!({true_filter})")
    ev = event(**fields)
    message_ids = routed(tenant.client, ev)
    assert [subscription_of(tenant.client, m) for m in message_ids] == [yes["id"]], (
        f"the event {ev} must reach only the subscription whose filter is true: {true_filter}"
    )


# ---------------------------------------------------------------------------------------------
# (3) Bad filters are refused, and change nothing


TOO_LONG_ASCII = 'message.id == "' + "x" * MAX_FILTER_BYTES + '"'
# Fewer than 4096 characters, but more than 4096 bytes in UTF-8: the limit is on bytes.
TOO_LONG_UTF8 = 'message.id == "' + "é" * 3000 + '"'
BAD_FILTERS = [
    pytest.param("message.source ==", id="parse-incomplete"),
    pytest.param('message.type == "a" &&& message.id == "b"', id="parse-operator"),
    pytest.param("1 + 2", id="int"),
    pytest.param("message.source", id="string-attribute"),
    pytest.param('"yes"', id="string-literal"),
    pytest.param(TOO_LONG_ASCII, id="over-4096-bytes"),
    pytest.param(TOO_LONG_UTF8, id="over-4096-bytes-utf8"),
]


@pytest.mark.parametrize("bad", BAD_FILTERS)
def test_a_bad_filter_is_refused_on_create_and_creates_nothing(tenant: Tenant, receiver: Receiver, bad: str) -> None:
    if bad == TOO_LONG_UTF8:
        assert len(bad) < MAX_FILTER_BYTES < len(bad.encode())
    body = {"name": "bad", "url": receiver.url("/never"), "event_types": ["*"], "filter": bad}
    filter_error(tenant.client.post("/api/v1/subscriptions", json=body))
    assert tenant.client.list_all("/api/v1/subscriptions") == [], "a refused create stores no subscription"


@pytest.mark.parametrize("bad", BAD_FILTERS)
def test_a_bad_filter_is_refused_on_patch_and_changes_nothing(tenant: Tenant, receiver: Receiver, bad: str) -> None:
    kept = 'message.type == "kept"'
    sub = subscribe(tenant, receiver, kept)
    # A valid change of name in the same PATCH is refused with it.
    filter_error(tenant.client.patch(f"/api/v1/subscriptions/{sub['id']}", json={"name": "renamed", "filter": bad}))
    after = get_subscription(tenant.client, sub["id"])
    assert (after["filter"], after["name"]) == (kept, sub["name"]), f"a refused PATCH changes nothing: {after}"


def test_a_parse_error_gives_the_parsers_message_and_its_line_and_column(tenant: Tenant, receiver: Receiver) -> None:
    # The mistake is on the second line.
    bad = 'message.type == "order.created" &&\n  message.id == == "b"'
    body = {"name": "bad", "url": receiver.url("/never"), "event_types": ["*"], "filter": bad}
    message = filter_error(tenant.client.post("/api/v1/subscriptions", json=body))
    assert re.search(r"(?<![0-9])2:[0-9]+", message), f"the message gives the line:column of the error: {message!r}"
    tested = filter_test(tenant.client, bad, event())
    assert re.search(r"(?<![0-9])2:[0-9]+", filter_error(tested)), describe(tested)


def test_a_filter_of_exactly_4096_bytes_is_accepted(tenant: Tenant, receiver: Receiver) -> None:
    head = 'message.id != "'
    longest = head + "x" * (MAX_FILTER_BYTES - len(head) - 1) + '"'
    assert len(longest.encode()) == MAX_FILTER_BYTES
    sub = subscribe(tenant, receiver, longest)
    assert get_subscription(tenant.client, sub["id"])["filter"] == longest
    assert [subscription_of(tenant.client, m) for m in routed(tenant.client, event())] == [sub["id"]]


def test_patch_keeps_replaces_and_removes_the_filter(tenant: Tenant, receiver: Receiver) -> None:
    first, second = 'message.subject == "a"', 'message.subject == "b"'
    sub = subscribe(tenant, receiver, first)
    url = f"/api/v1/subscriptions/{sub['id']}"

    renamed = tenant.client.patch(url, json={"name": "renamed"}, expect=200).json()
    assert renamed["filter"] == first, f"a PATCH without `filter` keeps it: {renamed}"
    replaced = tenant.client.patch(url, json={"filter": second}, expect=200).json()
    assert replaced["filter"] == second, replaced
    listed = {s["id"]: s for s in tenant.client.list_all("/api/v1/subscriptions")}
    assert listed[sub["id"]]["filter"] == second, f"the list shows the filter: {listed[sub['id']]}"
    removed = tenant.client.patch(url, json={"filter": None}, expect=200).json()
    assert "filter" in removed and removed["filter"] is None, f'"filter": null removes it: {removed}'
    assert get_subscription(tenant.client, sub["id"])["filter"] is None
    added = tenant.client.patch(url, json={"filter": first}, expect=200).json()
    assert get_subscription(tenant.client, sub["id"])["filter"] == added["filter"] == first


# ---------------------------------------------------------------------------------------------
# (4) The filter-test route


def test_filter_test_answers_whether_an_event_matches_and_stores_nothing(tenant: Tenant) -> None:
    big, small, no_total = json_event(150), json_event(50), event(datacontenttype="application/json", data={"n": 1})
    cases = [(big, {"matches": True, "error": None}), (small, {"matches": False, "error": None})]
    for ev, expected in cases:
        resp = filter_test(tenant.client, EU_BIG_ORDERS, ev)
        assert resp.status_code == 200 and resp.json() == expected, f"{ev['data']}: {describe(resp)}"

    # A run-time error (no `total`) is no match, with the reason.
    resp = filter_test(tenant.client, EU_BIG_ORDERS, no_total)
    assert resp.status_code == 200, describe(resp)
    answer = resp.json()
    assert answer["matches"] is False and isinstance(answer["error"], str) and answer["error"], describe(resp)

    for ev in (big, small, no_total):
        assert tenant.client.get(f"/api/v1/events/{ev['id']}").status_code == 404, "a tested event is not stored"
    assert tenant.client.list_all("/api/v1/events") == []
    assert tenant.client.list_all("/api/v1/subscriptions") == []
    assert tenant.client.list_all("/api/v1/messages") == []


@pytest.mark.parametrize("bad", ["1 + 2", "message.source ==", TOO_LONG_ASCII], ids=["int", "parse", "too-long"])
def test_filter_test_refuses_a_bad_filter(tenant: Tenant, bad: str) -> None:
    filter_error(filter_test(tenant.client, bad, json_event(150)))


def test_filter_test_refuses_a_bad_event_naming_its_fields_under_event(tenant: Tenant) -> None:
    ev = json_event(150)
    del ev["id"]
    resp = filter_test(tenant.client, EU_BIG_ORDERS, ev)
    assert resp.status_code == 422, describe(resp)
    assert resp.headers.get("content-type", "").startswith("application/problem+json"), describe(resp)
    fields = [e.get("field") for e in resp.json().get("errors") or []]
    assert "event.id" in fields, f"the missing id is named event.id: {describe(resp)}"


# ---------------------------------------------------------------------------------------------
# (5) Run-time errors


def test_a_filter_failing_at_run_time_does_not_match_and_is_counted(
    herald: HeraldServer, tenant: Tenant, receiver: Receiver
) -> None:
    sub = subscribe(tenant, receiver, "message.data.total > 1")
    before = filter_errors_total(herald)
    missing_key = event(datacontenttype="application/json", data={"count": 3})
    type_mismatch = json_event("many")
    for ev in (missing_key, type_mismatch):
        assert routed(tenant.client, ev) == [], f"a filter that fails on {ev['data']} does not match"
    # The same filter matches where it can be evaluated: the failures above are the data's.
    assert [subscription_of(tenant.client, m) for m in routed(tenant.client, json_event(5))] == [sub["id"]]
    wait_until(
        lambda: filter_errors_total(herald) >= before + 2,
        WAIT,
        f"herald_filter_errors_total to grow by 2 from {before}",
    )


# ---------------------------------------------------------------------------------------------
# (6) A changed filter routes the very next publish


def check_changes_take_effect_at_once(writer: ApiClient, publisher: ApiClient, tenant: Tenant, receiver: Receiver) -> None:
    """A subscription made and changed through `writer`; every publish goes through `publisher`
    right after the change, with no wait."""
    sub = subscribe(tenant, receiver, None, client=writer)
    url = f"/api/v1/subscriptions/{sub['id']}"

    def reached(n: int) -> bool:
        ids = routed(publisher, event(datacontenttype="application/json", data={"n": n}))
        assert all(subscription_of(publisher, m) == sub["id"] for m in ids), ids
        return len(ids) == 1

    # Published first, so the publisher has the subscription's routing in hand.
    assert reached(1), "no filter yet: every event"
    writer.patch(url, json={"filter": "message.data.n == 2"}, expect=200)
    assert (reached(1), reached(2)) == (False, True), "a filter added by PATCH routes the next publish"
    writer.patch(url, json={"filter": "message.data.n == 1"}, expect=200)
    assert (reached(2), reached(1)) == (False, True), "a filter replaced by PATCH routes the next publish"
    writer.patch(url, json={"name": "renamed"}, expect=200)
    assert (reached(2), reached(1)) == (False, True), "a PATCH without `filter` keeps it"
    writer.patch(url, json={"filter": None}, expect=200)
    assert reached(3), "a filter removed by PATCH lets the next publish through"


def test_a_patched_filter_routes_the_next_publish(tenant: Tenant, receiver: Receiver) -> None:
    check_changes_take_effect_at_once(tenant.client, tenant.client, tenant, receiver)


def test_a_filter_patched_through_one_process_routes_the_next_publish_through_another(
    two_processes: TwoProcesses, receiver: Receiver
) -> None:
    a, b = two_processes("filters")
    tenant = a.new_tenant("filters-two")
    check_changes_take_effect_at_once(tenant.client, b.client(tenant.api_key["token"]), tenant, receiver)


# ---------------------------------------------------------------------------------------------
# (7) Operational events


def test_operational_events_go_through_the_filter(tenant: Tenant, receiver: Receiver) -> None:
    # A message refused with 400 under retry_on "transient" is dead at once: herald.message.dead.
    doomed_type = unique("doomed")
    doomed = subscribe(tenant, receiver, None, (doomed_type,), retry_policy=exponential(1, 1, 5, retry_on="transient"))
    receiver.answer(path_of(doomed), 400)
    dead = ("herald.message.dead",)
    # Its data: message_id, subscription_id, event_id, event_source, dead_reason, attempt_count, last_status.
    taker = subscribe(
        tenant, receiver, 'message.source == "/herald" && message.data.dead_reason == "non_retryable"', dead
    )
    wrong_type = subscribe(tenant, receiver, 'message.type == "nothing"', dead)
    wrong_reason = subscribe(tenant, receiver, 'message.data.dead_reason == "expired"', dead)
    wrong_source = subscribe(tenant, receiver, 'message.data.event_source == "/elsewhere"', dead)

    failed = event(doomed_type, source="/shop/eu/berlin")
    assert len(routed(tenant.client, failed)) == 1
    [report] = receiver.wait_for_path(path_of(taker), 1, WAIT)
    operational = json.loads(report.body)
    assert (operational["type"], operational["data"]["event_id"]) == ("herald.message.dead", failed["id"])

    reached = subscriptions_reached(tenant.client, operational["id"], source="/herald")
    assert reached == {taker["id"]}, (
        f"the operational event has a message only for the subscription whose filter is true: {reached}; "
        f"false filters: {[s['id'] for s in (wrong_type, wrong_reason, wrong_source)]}"
    )
    for sub in (wrong_type, wrong_reason, wrong_source):
        assert tenant.client.list_all("/api/v1/messages", {"subscription_id": sub["id"]}) == [], sub["filter"]


# ---------------------------------------------------------------------------------------------
# (8) Archive replay


def test_replay_gives_messages_only_to_events_the_filter_accepts(tenant: Tenant, receiver: Receiver) -> None:
    event_type = unique("archived")
    since = datetime.now(timezone.utc) - timedelta(minutes=1)
    archived = [json_event(total, event_type=event_type) for total in (50, 150, 250)]
    for ev in archived:
        assert routed(tenant.client, ev) == [], "published before any subscription"
    until = datetime.now(timezone.utc) + timedelta(minutes=1)
    late = subscribe(tenant, receiver, "message.data.total > 100", (event_type,))

    window = {"since": since.isoformat(), "until": until.isoformat(), "subscription_id": late["id"]}
    replayed = tenant.client.post("/api/v1/events/replay", json=window, expect=202).json()
    assert (replayed["state"], replayed["replayed"]) == ("done", 2), f"only the two events over 100: {replayed}"
    small, *big = archived
    assert subscriptions_reached(tenant.client, small["id"]) == set(), "the filtered-out event gets no message"
    for ev in big:
        assert subscriptions_reached(tenant.client, ev["id"]) == {late["id"]}
    reqs = receiver.wait_for_path(path_of(late), 2, WAIT)
    assert sorted(json.loads(r.body)["id"] for r in reqs) == sorted(ev["id"] for ev in big)
