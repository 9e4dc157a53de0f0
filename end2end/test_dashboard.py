"""The dashboard, checked black-box in Debian's headless Chromium with
JavaScript disabled: every page is plain HTML and every form posts to a server function that
answers with a redirect to a page showing the result.

One herald process of this module's own (admin password known, small breaker thresholds) on a
fresh database, seeded through the REST API:
- customers `acme` and `globex`, dashboard users `alice` (acme) and `bob` (globex);
- acme subscribes a receiver path that answers 200 (one event, delivered), and two paths that
  answer 503 (one event each; after 4 failures each endpoint is `locked` and its message `held`):
  `down` stays locked for the whole module, `stuck` is the one the admin unlocks, so the tests do
  not depend on their order.

Screenshots of every page visited are kept in end2end/artifacts/screenshots/. Every wait polls, or
waits for a navigation, until a deadline.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from html.parser import HTMLParser
from typing import Any

import pytest
import requests
from playwright.sync_api import Browser, Page

from accessibility import serious_violations
from browser import SESSION_COOKIE, Tab, Tabs, open_tabs
from harness import (
    ARTIFACTS_DIR,
    ApiClient,
    HeraldServer,
    TestDatabase,
    cloud_event,
    describe,
    herald_binary,
    utc_stamp,
    wait_until,
)
from webhook_receiver import Answer, Receiver

ADMIN_PASSWORD = f"admin-{secrets.token_hex(8)}"
ALICE_PASSWORD = f"alice-{secrets.token_hex(8)}"
BOB_PASSWORD = f"bob-{secrets.token_hex(8)}"

# Small breaker thresholds: 2 failures disable the endpoint, a probe every second, and more than
# 3 consecutive failures (with no success ever) lock it, so the 4th failure locks it.
DASHBOARD_ENV = {
    "HERALD_ADMIN_PASSWORD": ADMIN_PASSWORD,
    "HERALD_ALLOW_PRIVATE_TARGETS": "true",
    "HERALD_BREAKER_DISABLE_CONSECUTIVE": "2",
    "HERALD_BREAKER_PROBE_SECS": "1",
    "HERALD_BREAKER_LOCK_CONSECUTIVE": "3",
    "HERALD_BREAKER_LOCK_SILENCE_SECS": "0",
}

# A retry every second, for long enough that only the breaker stops the tries.
EVERY_SECOND = {"kind": "exponential", "min_delay_secs": 1, "max_delay_secs": 1, "max_attempts": 50}
# A 400 is permanent under retry_on transient: the message is dead at once.
TRANSIENT_ONLY = {
    "kind": "exponential",
    "min_delay_secs": 1,
    "max_delay_secs": 1,
    "max_attempts": 5,
    "retry_on": "transient",
}

def utc_stamp_rfc3339(offset_secs: float = 0.0) -> str:
    """Now plus `offset_secs`, as the dashboard's time fields take it."""
    moment = datetime.now(timezone.utc) + timedelta(seconds=offset_secs)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


WAIT = 30.0  # seconds: deadline for a delivery or a state change seen through the REST API


def start_herald(db: TestDatabase, name: str) -> HeraldServer:
    log_path = ARTIFACTS_DIR / f"herald-{db.kind}-{utc_stamp()}-{os.getpid()}-dashboard-{name}.log"
    server = HeraldServer(herald_binary(), db.url, log_path=log_path, extra_env=DASHBOARD_ENV)
    return server.start()


# ---------------------------------------------------------------------------------------------
# The world the tests look at


@dataclass
class Failing:
    """A subscription whose receiver path answers 503: its endpoint is locked, its message held."""

    path: str
    sub: dict
    event_type: str
    message: str
    endpoint: dict  # as it was when locked


@dataclass
class World:
    server: HeraldServer
    receiver: Receiver
    acme: dict
    globex: dict
    acme_client: ApiClient
    ok_path: str
    ok_sub: dict
    ok_event_type: str
    ok_message: str
    catalog_type: str
    down: Failing  # stays locked
    stuck: Failing  # the admin unlocks it

    @property
    def base_url(self) -> str:
        return self.server.base_url


def message(client: ApiClient, message_id: str) -> dict:
    return client.get(f"/api/v1/messages/{message_id}", expect=200).json()


def wait_for_state(client: ApiClient, message_id: str, states: tuple[str, ...], timeout: float = WAIT) -> dict:
    last: dict = {}

    def reached() -> dict | None:
        nonlocal last
        last = message(client, message_id)
        return last if last["state"] in states else None

    try:
        return wait_until(reached, timeout, f"message {message_id} to be {'/'.join(states)}", interval=0.1)
    except TimeoutError as exc:
        raise AssertionError(f"{exc}; last seen: {last}") from None


def endpoint(client: ApiClient, endpoint_id: str) -> dict:
    for ep in client.list_all("/api/v1/endpoints"):
        if ep["id"] == endpoint_id:
            return ep
    raise AssertionError(f"endpoint {endpoint_id} is not in GET /api/v1/endpoints")


def subscribe(client: ApiClient, name: str, url: str, event_type: str, policy: dict) -> dict:
    body = {"name": name, "url": url, "event_types": [event_type], "retry_policy": policy}
    return client.post("/api/v1/subscriptions", json=body, expect=201).json()


def publish(client: ApiClient, event_type: str) -> str:
    """Publish one event; return the id of its one message."""
    body = client.publish(cloud_event(f"evt-{secrets.token_hex(6)}", event_type, source="/dashboard-e2e")).json()
    (message_id,) = body["events"][0]["message_ids"]
    return message_id


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    db = TestDatabase.create(os.environ.get("TEST_DATABASE_URL"))
    server: HeraldServer | None = None
    try:
        with Receiver() as receiver:
            server = start_herald(db, "main")
            admin = server.admin
            acme = server.create_customer("acme")
            globex = server.create_customer("globex")
            for username, password, customer in (("alice", ALICE_PASSWORD, acme), ("bob", BOB_PASSWORD, globex)):
                body = {"username": username, "password": password, "role": "customer", "customer_id": customer["id"]}
                admin.post("/api/v1/users", json=body, expect=201)
            acme_client = server.client(server.create_api_key(acme["id"], "acme-key")["token"])

            tag = secrets.token_hex(3)
            ok_path, ok_type = f"/acme/ok-{tag}", f"acme.order.created.{tag}"
            ok_sub = subscribe(acme_client, f"acme orders {tag}", receiver.url(ok_path), ok_type, EVERY_SECOND)
            ok_message = publish(acme_client, ok_type)
            # A type of the catalog with a schema and an example (no event of it is published).
            catalog = {"name": f"acme.catalog.{tag}", "description": "An order of acme's shop",
                       "schema": {"type": "object", "required": ["total"], "properties": {"total": {"type": "number"}}},
                       "example": {"total": 12.5}}
            acme_client.post("/api/v1/event-types", json=catalog, expect=201)

            started = []
            for kind, event_type in (("down", f"acme.invoice.paid.{tag}"), ("stuck", f"acme.refund.{tag}")):
                path = f"/acme/{kind}-{tag}"
                receiver.answer(path, 503)
                sub = subscribe(acme_client, f"acme {kind} {tag}", receiver.url(path), event_type, EVERY_SECOND)
                started.append((path, sub, event_type, publish(acme_client, event_type)))

            wait_for_state(acme_client, ok_message, ("delivered",))
            failing = []
            for path, sub, event_type, message_id in started:
                endpoint_id = message(acme_client, message_id)["endpoint_id"]
                locked = wait_until(
                    lambda: (ep := endpoint(acme_client, endpoint_id))["state"] == "locked" and ep,  # noqa: B023
                    WAIT,
                    f"endpoint {endpoint_id} ({path}, answering 503) to be locked",
                    interval=0.1,
                )
                wait_for_state(acme_client, message_id, ("held",))
                failing.append(Failing(path, sub, event_type, message_id, locked))

            yield World(
                server=server,
                receiver=receiver,
                acme=acme,
                globex=globex,
                acme_client=acme_client,
                ok_path=ok_path,
                ok_sub=ok_sub,
                ok_event_type=ok_type,
                ok_message=ok_message,
                catalog_type=catalog["name"],
                down=failing[0],
                stuck=failing[1],
            )
            if server.process is not None and server.process.poll() is not None:
                pytest.fail(f"herald exited during the tests; see {server.log_path}:\n{server.log_tail()}")
    finally:
        if server is not None:
            server.stop()
        db.drop()


@pytest.fixture
def tabs(chromium: Browser, world: World, request: pytest.FixtureRequest) -> Iterator[Tabs]:  # noqa: F811
    yield from open_tabs(chromium, world.base_url, request)


def logged_in(tabs: Tabs, username: str, password: str) -> Tab:
    tab = tabs.new(username)
    tab.login(username, password, step=f"login-{username}")
    assert tab.path == "/", f"{username}'s login should land on /, not {tab.page.url}; alerts: {tab.alerts()}"
    return tab


# ---------------------------------------------------------------------------------------------
# Page helpers


def fact(page: Page, label: str) -> str:
    """The text of a `<dl class="facts">` entry."""
    dd = page.locator(f"xpath=//dl[contains(@class,'facts')]/dt[normalize-space()='{label}']/following-sibling::dd[1]")
    return dd.first.inner_text().strip()


def revealed_secret(page: Page, label: str) -> str:
    """The secret of a facts entry, hidden until its reveal is opened (natively, without JavaScript)."""
    dd = page.locator(f"xpath=//dl[contains(@class,'facts')]/dt[normalize-space()='{label}']/following-sibling::dd[1]")
    code = dd.first.locator("code.secret")
    assert not code.is_visible(), "the secret is hidden until it is asked for"
    dd.first.locator("summary").click()
    assert code.is_visible(), "the reveal shows the secret"
    return code.inner_text().strip()


def table_row(page: Page, text: str):
    """The table body row that contains `text`."""
    return page.locator("tbody tr", has_text=text)


def table_with(page: Page, column: str):
    """The table with the column header `column`."""
    return page.locator("table", has=page.get_by_role("columnheader", name=column, exact=True))


def step_name(path: str) -> str:
    """A screenshot's step name for a page path: "/" is the overview."""
    return path.strip("/").replace("/", "-") or "overview"


def assert_no_alert(tab: Tab, what: str) -> None:
    alerts = tab.alerts()
    assert not alerts, f"{what}: the page shows an error {alerts} (screenshot of {tab.path})"


def assert_hides(html: str, secrets_: dict[str, str], what: str) -> None:
    shown = {name: value for name, value in secrets_.items() if value in html}
    assert not shown, f"{what} must show nothing of them, but its HTML contains {shown}"


# ---------------------------------------------------------------------------------------------
# Login


def test_bad_password_does_not_log_in_and_a_good_one_does(tabs: Tabs) -> None:
    anonymous = tabs.new("anonymous")
    response = anonymous.goto("/", "overview-anonymous")
    assert anonymous.path.startswith("/login"), f"/ without a session should lead to /login, not {anonymous.path}"
    assert response.status == 200

    for username, password in (("admin", "not-the-password"), ("nobody", ADMIN_PASSWORD)):
        tab = tabs.new(f"bad-{username}")
        tab.login(username, password, step=f"bad-login-{username}")
        assert tab.path.startswith("/login"), f"a bad login stays on /login, not {tab.path}"
        assert "Wrong username or password." in tab.alerts(), f"alerts: {tab.alerts()}"
        assert tab.page.locator('input[name="password"]').count() == 1, "the login form is shown again"
        assert tab.session_cookie() is None, f"a bad login sets no session cookie: {tab.context.cookies()}"
        tab.goto("/", "overview-after-bad-login")
        assert tab.path.startswith("/login"), "a bad login gives no access to /"

    tab = tabs.new("good")
    response = tab.login("admin", ADMIN_PASSWORD, step="good-login")
    assert tab.path == "/", f"a good login redirects to /, not {tab.page.url}"
    assert response.status == 200
    redirect = response.request.redirected_from
    assert redirect is not None and redirect.method == "POST", "the login form posts, then is redirected"
    assert redirect.response().status in (302, 303), redirect.response().status
    cookie = tab.session_cookie()
    assert cookie is not None, f"a good login sets {SESSION_COOKIE}: {tab.context.cookies()}"
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Lax", cookie
    nav = tab.page.get_by_role("navigation", name="Main")
    assert nav.get_by_role("link", name="Customers").count() == 1, "admin's nav links the admin pages"
    assert "admin" in tab.page.locator("header .who").inner_text()
    assert_no_alert(tab, "the overview after login")


# ---------------------------------------------------------------------------------------------
# A customer user: her own data, and nothing of the admin's


def test_alice_sees_her_subscriptions_messages_and_locked_endpoint_without_unlock(world: World, tabs: Tabs) -> None:
    tab = logged_in(tabs, "alice", ALICE_PASSWORD)
    page = tab.page
    nav = page.get_by_role("navigation", name="Main")
    assert nav.get_by_role("link", name="Customers").count() == 0, "a customer's nav has no admin links"
    assert nav.get_by_role("link", name="Audit log").count() == 0

    # Her subscriptions.
    assert tab.goto("/subscriptions", "subscriptions").status == 200
    assert_no_alert(tab, "/subscriptions")
    for sub in (world.ok_sub, world.down.sub):
        row = table_row(page, sub["name"])
        assert row.count() == 1, f"/subscriptions lists {sub['name']!r}"
        assert row.get_by_role("link", name=sub["name"]).get_attribute("href") == f"/subscriptions/{sub['id']}"

    # Her delivered message in the delivery log…
    assert tab.goto("/messages", "messages").status == 200
    assert_no_alert(tab, "/messages")
    row = table_row(page, world.ok_message)
    assert row.count() == 1, f"the delivery log lists the delivered message {world.ok_message}"
    assert row.locator(".badge").inner_text().strip() == "delivered"
    assert world.ok_event_type in row.inner_text()
    assert table_row(page, world.down.message).locator(".badge").inner_text().strip() == "held"

    # Found by the CloudEvent id she knows: that event's messages only.
    event_id = message(world.acme_client, world.ok_message)["event"]["id"]
    assert tab.goto(f"/messages?event_id={event_id}", "messages-by-event-id").status == 200
    assert table_row(page, world.ok_message).count() == 1
    assert page.locator("tbody tr").count() == 1, "only that event's message"
    assert page.get_by_label("Event id").input_value() == event_id
    assert tab.goto("/messages", "messages").status == 200
    row = table_row(page, world.ok_message)

    # …and its detail, with the attempt's 200.
    row.get_by_role("link", name=world.ok_message).click()
    page.wait_for_url(f"**/messages/{world.ok_message}")
    tab.shot("message-detail")
    assert_no_alert(tab, "the message detail")
    assert fact(page, "State").startswith("delivered")
    assert fact(page, "Event type") == world.ok_event_type
    attempts = page.locator("article.attempt")
    assert attempts.count() == 1, f"one attempt: {tab.main_text()}"
    status = attempts.first.locator(
        "xpath=.//dt[normalize-space()='Response status']/following-sibling::dd[1]"
    ).inner_text()
    assert status.strip() == "200", f"the attempt's response status: {status!r}"
    assert "success" in attempts.first.inner_text()

    # Her endpoint is locked, with no Unlock button for her.
    assert tab.goto("/endpoints", "endpoints").status == 200
    assert_no_alert(tab, "/endpoints")
    row = table_row(page, world.down.endpoint["url"])
    assert row.count() == 1, f"/endpoints lists {world.down.endpoint['url']}: {tab.main_text()}"
    badge = row.locator("span.badge")
    assert badge.inner_text().strip() == "locked", row.inner_text()
    assert page.get_by_role("button", name="Unlock").count() == 0, "a customer user has no Unlock button"
    assert "Unlock" not in tab.html()

    # No admin pages.
    for path in ("/admin/customers", "/admin/audit"):
        response = tab.goto(path, step_name(path))
        assert response.status == 404, f"{path} for a customer user: {response.status}"
        html = tab.html()
        assert_hides(
            html,
            {"globex": "globex", "globex id": world.globex["id"], "bob": "bob", "acme": "acme"},
            f"{path} for alice",
        )
        assert page.locator("table").count() == 0, f"{path} shows no table to alice"
        if path == "/admin/audit":
            assert "endpoint." not in html and "customer." not in html


def test_bob_sees_none_of_alices_messages_even_by_url(world: World, tabs: Tabs) -> None:
    tab = logged_in(tabs, "bob", BOB_PASSWORD)
    alices = {
        "message id": world.ok_message,
        "held message id": world.down.message,
        "event type": world.ok_event_type,
        "catalog type": world.catalog_type,
        "other event type": world.down.event_type,
        "subscription id": world.ok_sub["id"],
        "subscription name": world.ok_sub["name"],
        "receiver path": world.ok_path,
        "secret": world.ok_sub["secret"],
        "endpoint id": world.down.endpoint["id"],
        "endpoint url": world.down.endpoint["url"],
        "second held message id": world.stuck.message,
        "second endpoint id": world.stuck.endpoint["id"],
    }

    for path in ("/", "/messages", "/events", "/event-types", "/subscriptions", "/endpoints", "/dead-letters"):
        response = tab.goto(path, step_name(path))
        assert response.status == 200, f"{path}: {response.status}"
        assert_no_alert(tab, f"bob's {path}")
        assert_hides(tab.html(), alices, f"bob's {path}")
        if path == "/messages":
            assert "No messages yet." in tab.main_text(), "globex has no messages, and is told how to get some"

    # Even by URL (or filtered by her subscription).
    tab.goto(f"/messages?subscription_id={world.ok_sub['id']}", "messages-filtered-by-alices-subscription")
    assert_hides(tab.html(), {k: v for k, v in alices.items() if k != "subscription id"}, "bob's filtered log")
    assert tab.page.locator("tbody tr").count() == 0

    for path, step in (
        (f"/messages/{world.ok_message}", "alice-message"),
        (f"/messages/{world.down.message}", "alice-held-message"),
        (f"/subscriptions/{world.ok_sub['id']}", "alice-subscription"),
    ):
        response = tab.goto(path, step)
        assert response.status == 404, f"{path} for bob: {response.status}"
        main = tab.main_text()
        shown = {name: value for name, value in alices.items() if value in main}
        assert not shown, f"{path} for bob shows {shown}: {main!r}"
        # The HTML (serialized resources included) holds nothing of hers but the id in the URL.
        rest = {name: value for name, value in alices.items() if value not in path}
        assert_hides(tab.html(), rest, f"{path} for bob")
        assert tab.page.locator("dl.facts").count() == 0 and tab.page.locator("article.attempt").count() == 0


# ---------------------------------------------------------------------------------------------
# The admin: every customer, and the Unlock click


def test_admin_sees_all_customers_and_unlocks_the_locked_endpoint(world: World, tabs: Tabs) -> None:
    tab = logged_in(tabs, "admin", ADMIN_PASSWORD)
    page = tab.page

    assert tab.goto("/admin/customers", "customers").status == 200
    assert_no_alert(tab, "/admin/customers")
    customers = table_with(page, "Delivery log")
    for customer in (world.acme, world.globex):
        row = customers.locator("tbody tr", has_text=customer["id"])
        assert row.count() == 1, f"/admin/customers lists {customer['name']}"
        assert customer["name"] in row.inner_text()
    users = table_with(page, "Username")
    for username in ("admin", "alice", "bob"):
        assert users.locator("tbody tr", has_text=username).count() >= 1, f"the users table lists {username}"

    stuck = world.stuck
    endpoint_id = stuck.endpoint["id"]
    assert endpoint(world.acme_client, endpoint_id)["state"] == "locked", "still locked before the click"
    assert tab.goto("/endpoints", "endpoints-locked").status == 200
    row = table_row(page, stuck.endpoint["url"])
    assert row.count() == 1
    assert row.locator("span.badge").inner_text().strip() == "locked"
    unlock = row.get_by_role("button", name="Unlock")
    assert unlock.count() == 1, f"admin sees Unlock on the locked endpoint: {row.inner_text()}"
    for closed in page.locator("tbody tr", has=page.locator("span.badge", has_text="closed")).all():
        assert closed.get_by_role("button", name="Unlock").count() == 0, "no Unlock on a closed endpoint"
    down = table_row(page, world.down.endpoint["url"])
    assert down.get_by_role("button", name="Unlock").count() == 1, "every locked endpoint has its Unlock button"

    # The receiver is fixed; the admin clicks Unlock.
    world.receiver.answer(stuck.path, 200)
    before = len(world.receiver.on_path(stuck.path))
    response = tab.submit(unlock, "endpoints-unlocked")
    assert response.status == 200
    assert tab.path == f"/endpoints?unlocked={endpoint_id}", tab.path
    assert_no_alert(tab, "the page after Unlock")
    assert any("The endpoint is unlocked" in n for n in tab.notices()), f"notices: {tab.notices()}"
    row = table_row(page, stuck.endpoint["url"])
    assert row.locator("span.badge").inner_text().strip() == "closed", row.inner_text()
    assert row.get_by_role("button", name="Unlock").count() == 0
    assert table_row(page, world.down.endpoint["url"]).locator("span.badge").inner_text().strip() == "locked", (
        "the other locked endpoint stays locked"
    )

    # The held message is delivered, with the same id.
    delivered = wait_for_state(world.acme_client, stuck.message, ("delivered",))
    assert delivered["id"] == stuck.message
    got = world.receiver.wait_for_path(stuck.path, before + 1, timeout=WAIT)[before:]
    assert [r.headers.get("webhook-id") for r in got] == [stuck.message], "the held message once"
    assert endpoint(world.acme_client, endpoint_id)["state"] == "closed"

    tab.goto(f"/messages/{stuck.message}", "held-message-delivered")
    assert fact(page, "State").startswith("delivered")

    # The audit page shows the unlock.
    assert tab.goto("/admin/audit", "audit").status == 200
    assert_no_alert(tab, "/admin/audit")
    rows = page.locator("tbody tr", has=page.locator("td", has_text="endpoint.unlock"))
    assert rows.count() == 1, f"one endpoint.unlock row: {tab.main_text()}"
    text = rows.first.inner_text()
    assert endpoint_id in text and "admin" in text, text


def page_paths(world: World) -> tuple[list[str], list[str]]:
    """Every page of the dashboard with something on it: (a customer's, the admin's)."""
    # A replay job of its own (a window of long ago: done at once, with nothing replayed).
    window = {"since": "2001-01-01T00:00:00Z", "until": "2001-01-02T00:00:00Z", "subscription_id": world.ok_sub["id"]}
    replay = world.acme_client.post("/api/v1/events/replay", json=window, expect=202).json()
    detail_paths = [
        f"/replays/{replay['replay_id']}",
        f"/subscriptions/{world.ok_sub['id']}",
        f"/messages/{world.ok_message}",
        f"/endpoints/{world.down.endpoint['id']}",
        f"/event-types?edit={world.catalog_type}&customer_id={world.acme['id']}",
        # The subscription form's "Test the filter", on the latest kept events of its types.
        f"/subscriptions/{world.ok_sub['id']}?filter_test=1&filter=has(message.data)&event_types={world.ok_event_type}",
    ]
    customer_paths = [
        "/", "/subscriptions", "/messages", "/events", "/event-types", "/endpoints", "/dead-letters", *detail_paths,
    ]
    return customer_paths, [*customer_paths, "/admin/customers", "/admin/audit"]


def test_every_page_renders_for_admin_and_alice(world: World, tabs: Tabs) -> None:
    customer_paths, admin_paths = page_paths(world)
    opened: dict[str, Tab] = {}
    for username, password, paths in (
        ("admin", ADMIN_PASSWORD, admin_paths),
        ("alice", ALICE_PASSWORD, customer_paths),
    ):
        tab = opened[username] = logged_in(tabs, username, password)
        for path in paths:
            response = tab.goto(path, step_name(path))
            assert response.status == 200, f"{username} {path}: {response.status}"
            assert tab.path == path, f"{username} {path} was redirected to {tab.path}"
            assert_no_alert(tab, f"{username} {path}")
            assert tab.page.locator("main h1").count() == 1, f"{path} has its title"
            assert tab.page.get_by_role("navigation", name="Main").count() == 1, f"{path} has the nav"
            assert tab.page.get_by_role("button", name="Log out").count() == 1
    # The overview shows the counts by state and the chart.
    tab = opened["admin"]
    tab.goto("/", "overview-again")
    assert tab.page.locator("figure.chart svg").count() == 1
    assert tab.page.locator("dl.counts .badge", has_text="delivered").count() == 1


def test_every_page_passes_axe_core(world: World, tabs: Tabs) -> None:
    """No serious or critical WCAG 2.1 A/AA violation (contrast included) on any page, for the
    admin and for a customer. axe runs in a tab with JavaScript on: the pages are the same
    server-rendered HTML either way."""
    customer_paths, admin_paths = page_paths(world)
    preview = "/subscriptions?preview=1&name=draft&retry_policy=workfront"
    found: dict[str, list[str]] = {}
    anonymous = tabs.new("axe-anonymous", javascript=True)
    anonymous.goto("/login", "axe-login")
    found["/login"] = serious_violations(anonymous.page)
    for username, password, paths in (
        ("admin", ADMIN_PASSWORD, admin_paths),
        ("alice", ALICE_PASSWORD, [*customer_paths, preview]),
    ):
        tab = tabs.new(f"axe-{username}", javascript=True)
        tab.login(username, password, step=f"axe-login-{username}")
        for path in paths:
            tab.goto(path, f"axe-{step_name(path)}")
            found[f"{username} {path}"] = serious_violations(tab.page)
    failing = {page: lines for page, lines in found.items() if lines}
    assert not failing, "serious accessibility violations:\n" + "\n".join(
        f"{page}: {line}" for page, lines in failing.items() for line in lines
    )


# ---------------------------------------------------------------------------------------------
# Replay


def test_alice_replays_a_dead_message_and_bulk_replays_dead_letters(world: World, tabs: Tabs) -> None:
    client, receiver = world.acme_client, world.receiver
    tag = secrets.token_hex(3)
    path, event_type = f"/acme/reject-{tag}", f"acme.reject.{tag}"
    receiver.answer(path, 400)
    sub = subscribe(client, f"acme rejects {tag}", receiver.url(path), event_type, TRANSIENT_ONLY)
    dead_id = publish(client, event_type)
    dead = wait_for_state(client, dead_id, ("dead",))
    assert dead["dead_reason"] == "non_retryable", dead

    tab = logged_in(tabs, "alice", ALICE_PASSWORD)
    page = tab.page
    assert tab.goto(f"/messages/{dead_id}", "dead-message").status == 200
    assert fact(page, "State").startswith("dead")
    replay = page.get_by_role("button", name="Replay")
    assert replay.count() == 1, "a dead message has a Replay button"

    receiver.answer(path, 200)
    response = tab.submit(replay, "replayed")
    assert response.status == 200
    assert tab.path == f"/messages/{dead_id}?replayed=1", tab.path
    assert_no_alert(tab, "the page after Replay")
    assert "Replayed: the message is due now, with the same id." in tab.notices(), tab.notices()
    assert fact(page, "Id") == dead_id
    shown = fact(page, "State").split()[0]
    assert shown in ("pending", "delivering", "delivered"), f"after the replay the state is {shown!r}"
    delivered = wait_for_state(client, dead_id, ("delivered",))
    assert delivered["id"] == dead_id and delivered["attempt_count"] == 2, delivered
    assert [r.headers.get("webhook-id") for r in receiver.on_path(path)] == [dead_id, dead_id]
    tab.goto(f"/messages/{dead_id}", "replayed-delivered")
    assert page.locator("article.attempt").count() == 2

    # Bulk replay of the dead letters of one subscription.
    bulk_path, bulk_type = f"/acme/bulk-{tag}", f"acme.bulk.{tag}"
    receiver.answer(bulk_path, 400)
    bulk_sub = subscribe(client, f"acme bulk {tag}", receiver.url(bulk_path), bulk_type, TRANSIENT_ONLY)
    bulk_ids = [publish(client, bulk_type) for _ in range(2)]
    for message_id in bulk_ids:
        wait_for_state(client, message_id, ("dead",))

    assert tab.goto(f"/dead-letters?subscription_id={bulk_sub['id']}", "dead-letters").status == 200
    assert_no_alert(tab, "/dead-letters")
    for message_id in bulk_ids:
        assert table_row(page, message_id).count() == 1, f"/dead-letters lists {message_id}"
    assert table_row(page, world.ok_message).count() == 0, "the filter keeps other subscriptions out"
    receiver.answer(bulk_path, 200)
    bulk = page.get_by_role("button", name=re.compile("Replay every dead message"))
    response = tab.submit(bulk, "dead-letters-replayed")
    assert response.status == 200
    # The replay is a job: its page says how it went (two messages: done before the answer).
    assert tab.path.startswith("/replays/rpl_"), tab.path
    assert "2 dead messages due again" in tab.main_text() and "done" in tab.main_text(), tab.main_text()
    for message_id in bulk_ids:
        assert wait_for_state(client, message_id, ("delivered",))["id"] == message_id
    assert message(client, dead_id)["state"] == "delivered", "the other subscription's message is untouched"
    assert sub["id"] != bulk_sub["id"]


# ---------------------------------------------------------------------------------------------
# The subscription forms


def test_alice_creates_pauses_rotates_and_tests_a_subscription(world: World, tabs: Tabs) -> None:
    client, receiver = world.acme_client, world.receiver
    tag = secrets.token_hex(3)
    name, path, event_type = f"form sub {tag}", f"/acme/form-{tag}", f"acme.form.{tag}"

    tab = logged_in(tabs, "alice", ALICE_PASSWORD)
    page = tab.page
    tab.goto("/subscriptions", "subscriptions")
    form = page.locator("form", has=page.get_by_role("button", name="Create subscription"))
    assert form.locator('[name="customer_id"]').count() == 0, "a customer user does not pick a customer"
    form.get_by_label("Name").fill(name)
    form.get_by_label("URL").fill(receiver.url(path))
    form.get_by_label(re.compile("Event types")).fill(event_type)
    form.get_by_label(re.compile("Retry policy")).fill("eventarc")
    response = tab.submit(form.get_by_role("button", name="Create subscription"), "created")
    assert response.status == 200
    match = re.fullmatch(r"/subscriptions/([^/?]+)\?created=1", tab.path)
    assert match, f"a created subscription lands on its page: {tab.path}; alerts {tab.alerts()}"
    sub_id = match.group(1)
    assert "The subscription is created." in tab.notices(), tab.notices()
    assert fact(page, "Name") == name
    assert fact(page, "Status") == "active"
    assert "eventarc" in fact(page, "Retry policy")
    stored = client.get(f"/api/v1/subscriptions/{sub_id}", expect=200).json()
    assert (stored["name"], stored["url"], stored["event_types"]) == (name, receiver.url(path), [event_type]), stored
    assert stored["retry_policy"]["kind"] == "eventarc", stored
    secret = revealed_secret(page, "Signing secret (v1, HMAC-SHA256)")
    assert secret.startswith("whsec_"), secret

    tab.submit(page.get_by_role("button", name="Pause"), "paused")
    assert tab.path == f"/subscriptions/{sub_id}?saved=1", tab.path
    assert "Saved." in tab.notices()
    assert fact(page, "Status") == "paused"
    assert client.get(f"/api/v1/subscriptions/{sub_id}", expect=200).json()["status"] == "paused"

    tab.submit(page.get_by_role("button", name="Resume"), "resumed")
    assert fact(page, "Status") == "active"
    assert client.get(f"/api/v1/subscriptions/{sub_id}", expect=200).json()["status"] == "active"

    tab.submit(page.get_by_role("button", name="Rotate secret"), "rotated")
    assert tab.path == f"/subscriptions/{sub_id}?rotated=1", tab.path
    assert any("new secret" in n for n in tab.notices()), tab.notices()
    rotated = revealed_secret(page, "Signing secret (v1, HMAC-SHA256)")
    assert rotated.startswith("whsec_") and rotated != secret, f"the secret changes: {secret} -> {rotated}"

    tab.submit(page.get_by_role("button", name="Send a test event"), "test-event-sent")
    match = re.fullmatch(r"/messages/([^/?]+)\?sent=1", tab.path)
    assert match, f"a test event lands on its message's page: {tab.path}; alerts {tab.alerts()}"
    test_message = match.group(1)
    assert "A test event was published to this subscription." in tab.notices(), tab.notices()
    # The message names its subscription, and links it.
    assert fact(page, "Subscription") == name
    assert page.get_by_role("link", name=name).get_attribute("href") == f"/subscriptions/{sub_id}"
    assert fact(page, "Event type") == "herald.test"
    received = receiver.wait_for_path(path, 1, timeout=WAIT)
    assert received[0].headers.get("webhook-id") == test_message
    assert wait_for_state(client, test_message, ("delivered",))["subscription_id"] == sub_id

    # A bad URL: the form answers with an error naming the field.
    tab.goto("/subscriptions", "subscriptions-again")
    form = page.locator("form", has=page.get_by_role("button", name="Create subscription"))
    form.get_by_label("Name").fill(f"bad {tag}")
    form.get_by_label("URL").fill("ftp://x")
    form.get_by_label(re.compile("Event types")).fill(event_type)
    tab.submit(form.get_by_role("button", name="Create subscription"), "bad-url")
    assert tab.path.startswith("/subscriptions"), tab.path
    alerts = tab.alerts()
    assert any("url" in a.lower() for a in alerts), f"the error names the url field: {alerts}"
    names = [s["name"] for s in client.list_all("/api/v1/subscriptions")]
    assert f"bad {tag}" not in names, "nothing is created from a bad form"


# ---------------------------------------------------------------------------------------------
# Admin forms


def test_admin_creates_a_customer_an_api_key_shown_once_and_a_user(world: World, tabs: Tabs) -> None:
    tag = secrets.token_hex(3)
    tab = logged_in(tabs, "admin", ADMIN_PASSWORD)
    page = tab.page

    def section(heading: str):
        return page.locator("section", has=page.get_by_role("heading", name=heading))

    tab.goto("/admin/customers", "customers")
    customer_name = f"initech-{tag}"
    form = section("New customer")
    form.get_by_label("Name").fill(customer_name)
    tab.submit(form.get_by_role("button", name="Create customer"), "customer-created")
    match = re.fullmatch(r"/admin/customers\?created=([^&]+)", tab.path)
    assert match, f"{tab.path}; alerts {tab.alerts()}"
    customer_id = match.group(1)
    assert f"Customer {customer_id} created." in tab.notices(), tab.notices()
    assert customer_name in table_with(page, "Delivery log").locator("tbody tr", has_text=customer_id).inner_text()

    form = section("New API key")
    form.locator('select[name="customer_id"]').select_option(value=customer_id)
    form.get_by_label("Key name").fill(f"key-{tag}")
    tab.submit(form.get_by_role("button", name="Create API key"), "key-created")
    assert re.fullmatch(r"/admin/customers\?key=[^&]+", tab.path), f"{tab.path}; alerts {tab.alerts()}"
    shown = page.locator(".notice code.secret")
    assert shown.count() == 1, f"the new key's token is shown: {tab.notices()}"
    token = shown.inner_text().strip()
    assert len(token) >= 20, token
    key_client = world.server.client(token)
    key_client.get("/api/v1/subscriptions", expect=200)  # the token works, for that customer
    assert key_client.get(f"/api/v1/subscriptions/{world.ok_sub['id']}").status_code == 404
    once = tab.path
    tab.goto(once, "key-page-reloaded")
    assert page.locator(".notice code.secret").count() == 0, "the token is shown only once"
    assert token not in tab.html(), "a second load of the same URL does not show the token"

    form = section("New dashboard user")
    username = f"carol-{tag}"
    password = f"pw-{secrets.token_hex(6)}"
    form.get_by_label("Username").fill(username)
    form.get_by_label(re.compile("Password")).fill(password)
    form.get_by_label("Role").select_option("customer")
    form.locator('select[name="customer_id"]').select_option(value=customer_id)
    tab.submit(form.get_by_role("button", name="Create user"), "user-created")
    assert tab.path == f"/admin/customers?user={username}", f"{tab.path}; alerts {tab.alerts()}"
    assert f"User {username} created." in tab.notices(), tab.notices()
    users = table_with(page, "Username")
    row = users.locator("tbody tr", has_text=username)
    assert row.count() == 1 and customer_name in row.inner_text(), f"the user's customer by name: {users.inner_text()}"

    carol = logged_in(tabs, username, password)
    assert username in carol.page.locator("header .who").inner_text()
    carol.goto("/subscriptions", "carol-subscriptions")
    assert "No subscriptions yet" in carol.main_text()


# ---------------------------------------------------------------------------------------------
# Cross-site requests, sessions across a restart, logout (plain HTTP with `requests`)


# ---------------------------------------------------------------------------------------------
# The console: find an event, see an endpoint's health, preview a schedule, replay a window


def publish_event(client: ApiClient, event_type: str) -> tuple[str, str | None]:
    """Publish one event; return its CloudEvent id and the id of its one message (None when no
    subscription takes it)."""
    event_id = f"order-{secrets.token_hex(6)}"
    body = client.publish(cloud_event(event_id, event_type, source="/dashboard-e2e")).json()
    message_ids = body["events"][0]["message_ids"]
    assert len(message_ids) <= 1, body
    return event_id, (message_ids[0] if message_ids else None)


def test_alice_finds_an_event_by_its_id_and_sees_names_not_ids(world: World, tabs: Tabs) -> None:
    client, receiver = world.acme_client, world.receiver
    tag = secrets.token_hex(3)
    # A long URL and a long event type must wrap inside their cells, not widen the page.
    path = f"/acme/{'very-long-segment-' * 12}{tag}"
    event_type = f"acme.{'deeply.nested.' * 8}order.{tag}"
    sub = subscribe(client, f"acme long {tag}", receiver.url(path), event_type, EVERY_SECOND)
    event_id, message_id = publish_event(client, event_type)
    wait_for_state(client, message_id, ("delivered",))

    tab = logged_in(tabs, "alice", ALICE_PASSWORD)
    page = tab.page
    tab.goto("/events", "events")
    assert_no_alert(tab, "/events")
    tab.page.locator('form[role="search"] input[name="event_id"]').fill(event_id)
    tab.submit(page.locator('form[role="search"]').get_by_role("button", name="Filter"), "events-by-id")
    row = table_row(page, event_id)
    assert row.count() == 1, f"/events?event_id= finds {event_id}: {tab.main_text()}"
    assert event_type in row.inner_text()
    tab.submit(row.get_by_role("link", name="1 message"), "event-messages")
    assert tab.path.startswith("/messages?event_id="), tab.path
    row = table_row(page, message_id)
    assert row.count() == 1 and page.locator("tbody tr").count() == 1, tab.main_text()
    assert row.get_by_role("link", name=sub["name"]).get_attribute("href") == f"/subscriptions/{sub['id']}"
    assert receiver.url(path) in row.inner_text(), "the endpoint's URL is in the row"

    # The subscription filter is a select of names.
    tab.goto("/messages", "messages-all")
    page.locator('select[name="subscription_id"]').select_option(label=sub["name"])
    tab.submit(page.locator('form[role="search"]').get_by_role("button", name="Filter"), "messages-by-subscription")
    assert f"subscription_id={sub['id']}" in tab.path, tab.path
    # Each row's id is short to the eye and whole in its link's title.
    assert [a.get_attribute("title") for a in page.locator("tbody tr td:first-child a").all()] == [message_id]

    # Bob knows the event id but finds nothing of Alice's.
    bob = logged_in(tabs, "bob", BOB_PASSWORD)
    bob.goto(f"/events?event_id={event_id}", "bob-events-by-id")
    assert event_id not in bob.main_text() and event_type not in bob.html()
    bob.goto(f"/messages?event_id={event_id}", "bob-messages-by-event")
    assert message_id not in bob.html() and sub["name"] not in bob.html()

    # Nothing overflows the viewport sideways (measured in a tab that runs JavaScript).
    wide = tabs.new("alice-layout", javascript=True)
    wide.login("alice", ALICE_PASSWORD, step="layout-login")
    for where in (
        f"/messages?event_id={event_id}",
        f"/events?event_id={event_id}",
        "/subscriptions",
        f"/subscriptions/{sub['id']}",
        "/endpoints",
        f"/endpoints/{message(client, message_id)['endpoint_id']}",
    ):
        wide.goto(where, f"layout-{step_name(where.split('?')[0])}")
        width = wide.page.evaluate("document.documentElement.scrollWidth")
        assert width <= 1280, f"{where} is {width}px wide in a 1280px window: long text breaks the layout"
        # A table that may scroll inside its box on a phone fits without scrolling here.
        overflowing = wide.page.evaluate(
            "[...document.querySelectorAll('.table-scroll')].filter(e => e.scrollWidth > e.clientWidth).length"
        )
        assert overflowing == 0, f"{where}: a table is wider than the page's column"


def test_an_endpoint_page_shows_health_groups_failures_and_replays_a_group(world: World, tabs: Tabs) -> None:
    client, receiver = world.acme_client, world.receiver
    tag = secrets.token_hex(3)
    path, event_type = f"/acme/flaky-{tag}", f"acme.flaky.{tag}"
    receiver.queue(path, 200, 200, Answer(status=400, body=b'{"error":"order 1234 is unknown"}'))
    sub = subscribe(client, f"acme flaky {tag}", receiver.url(path), event_type, TRANSIENT_ONLY)
    ids = []
    for _ in range(3):
        _, message_id = publish_event(client, event_type)
        ids.append(message_id)
        wait_for_state(client, message_id, ("delivered", "dead"))
    dead = [m for m in ids if message(client, m)["state"] == "dead"]
    assert len(dead) == 1, [message(client, m) for m in ids]
    endpoint_id = message(client, ids[0])["endpoint_id"]

    tab = logged_in(tabs, "alice", ALICE_PASSWORD)
    page = tab.page
    tab.goto("/endpoints", "endpoints")
    tab.submit(page.get_by_role("link", name=receiver.url(path)), "endpoint")
    assert tab.path == f"/endpoints/{endpoint_id}", tab.path
    assert_no_alert(tab, "the endpoint page")
    assert fact(page, "State") == "closed"
    assert sub["name"] in fact(page, "Subscriptions")
    counts = dict(zip(page.locator("dl.counts dt").all_inner_texts(), page.locator("dl.counts dd").all_inner_texts()))
    assert counts["Attempts"] == "3" and counts["Success rate"] == "66.7 %", counts
    assert counts["Time to deliver, p50"] != "—" and counts["Time to deliver, p95"] != "—", counts
    assert page.locator("figure.chart svg rect.failed").count() >= 1, "the hourly chart shows the failure"
    group = page.locator("article.group", has_text="HTTP 400")
    assert group.count() == 1, tab.main_text()
    assert "1 attempt" in group.inner_text()
    assert "order 1234 is unknown" in (group.locator("pre.body").text_content() or ""), "the latest response body"
    assert page.get_by_role("button", name="Unlock").count() == 0, "customers do not unlock"

    receiver.answer(path, 200)
    tab.submit(group.get_by_role("button", name="Replay its 1 dead message"), "group-replayed")
    assert tab.path.startswith("/replays/rpl_"), tab.path
    assert "1 dead messages due again" in tab.main_text() and "done" in tab.main_text(), tab.main_text()
    wait_for_state(client, dead[0], ("delivered",))

    # Bob may not see it, even by its address; the admin sees it with Unlock where it is locked.
    bob = logged_in(tabs, "bob", BOB_PASSWORD)
    response = bob.goto(f"/endpoints/{endpoint_id}", "bob-endpoint")
    assert response.status == 404 and receiver.url(path) not in bob.html()
    admin = logged_in(tabs, "admin", ADMIN_PASSWORD)
    admin.goto(f"/endpoints/{world.down.endpoint['id']}", "admin-locked-endpoint")
    assert fact(admin.page, "State") == "locked"
    assert fact(admin.page, "Customer") == "acme"
    assert admin.page.get_by_role("button", name="Unlock").count() == 1
    assert admin.page.locator("select[name=backlog] option").count() == 3, "with the backlog's choices"
    groups = admin.page.locator("article.group", has_text="HTTP 503")
    assert groups.count() == 1 and "attempts" in groups.inner_text(), admin.main_text()


def test_a_subscription_shows_its_schedule_and_the_form_previews_before_saving(world: World, tabs: Tabs) -> None:
    tab = logged_in(tabs, "alice", ALICE_PASSWORD)
    page = tab.page
    tab.goto(f"/subscriptions/{world.ok_sub['id']}", "subscription-schedule")
    schedule = page.locator("table.schedule")
    assert schedule.count() == 1
    rows = [r.split("\t") for r in schedule.locator("tbody tr").all_inner_texts()]
    assert rows[0] == ["1", "at once"] and rows[1] == ["2", "+1 s"] and rows[4] == ["5", "+4 s"], rows[:5]

    before = len(world.acme_client.list_all("/api/v1/subscriptions"))
    tag = secrets.token_hex(3)
    tab.goto("/subscriptions", "subscriptions-form")
    form = page.locator("form.stacked")
    form.locator('input[name="name"]').fill(f"acme preview {tag}")
    form.locator('input[name="url"]').fill(world.receiver.url(f"/acme/preview-{tag}"))
    form.locator('input[name="event_types"]').fill(f"acme.preview.{tag}")
    form.locator('input[name="retry_policy"]').fill('{"kind": "schedule", "delays_secs": [85, 3600], "max_attempts": 4}')
    tab.submit(form.get_by_role("button", name="Preview the schedule"), "previewed")
    assert tab.path.startswith("/subscriptions?"), tab.path
    assert "Preview only: nothing is saved until you press the save button." in tab.notices()
    rows = [r.split("\t") for r in page.locator("section.preview table.schedule tbody tr").all_inner_texts()]
    assert rows == [["1", "at once"], ["2", "+1 min 25 s"], ["3", "+1 h 1 min"], ["4", "+2 h 1 min"]], rows
    assert len(world.acme_client.list_all("/api/v1/subscriptions")) == before, "a preview saves nothing"
    form = page.locator("form.stacked")
    assert form.locator('input[name="name"]').input_value() == f"acme preview {tag}", "the form keeps its values"

    tab.submit(form.get_by_role("button", name="Create subscription"), "created-after-preview")
    assert "The subscription is created." in tab.notices(), tab.notices()
    assert fact(page, "Name") == f"acme preview {tag}"
    assert len(world.acme_client.list_all("/api/v1/subscriptions")) == before + 1


def test_alice_replays_a_time_window_of_the_archive_to_a_new_subscription(world: World, tabs: Tabs) -> None:
    client, receiver = world.acme_client, world.receiver
    tag = secrets.token_hex(3)
    event_type = f"acme.archived.{tag}"
    since = utc_stamp_rfc3339(-60)
    event_id, _ = publish_event(client, event_type)  # no subscription takes it yet
    path = f"/acme/late-{tag}"
    late = subscribe(client, f"acme late {tag}", receiver.url(path), event_type, EVERY_SECOND)

    tab = logged_in(tabs, "alice", ALICE_PASSWORD)
    page = tab.page
    tab.goto(f"/events?type={event_type}", "archive-by-type")
    row = table_row(page, event_id)
    assert row.count() == 1 and "none" in row.inner_text(), tab.main_text()
    form = page.locator("form", has=page.get_by_role("button", name="Replay the window"))
    form.locator('select[name="subscription_id"]').select_option(label=late["name"])
    form.locator('input[name="since"]').fill(since)
    form.locator('input[name="until"]').fill(utc_stamp_rfc3339(60))
    form.locator('input[name="event_types"]').fill(event_type)
    tab.submit(form.get_by_role("button", name="Replay the window"), "window-replayed")
    assert tab.path.startswith("/replays/rpl_"), tab.path
    assert "1 new messages for the window" in tab.main_text() and "done" in tab.main_text(), tab.main_text()
    wait_until(lambda: receiver.on_path(path), WAIT, f"the replayed event at {path}", interval=0.1)
    (delivery,) = receiver.on_path(path)
    assert delivery.headers.get("ce-id") == event_id or event_id.encode() in delivery.body
    tab.goto(f"/events?event_id={event_id}", "archive-after-replay")
    assert table_row(page, event_id).get_by_role("link", name="1 message").count() == 1

    # A bad window is refused with a message naming the field, and replays nothing.
    form = page.locator("form", has=page.get_by_role("button", name="Replay the window"))
    form.locator('input[name="since"]').fill(utc_stamp_rfc3339(60))
    form.locator('input[name="until"]').fill(since)
    tab.submit(form.get_by_role("button", name="Replay the window"), "window-refused")
    assert any("until" in alert for alert in tab.alerts()), tab.alerts()
    assert len(receiver.on_path(path)) == 1


class _Forms(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict[str, Any]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "form":
            self.forms.append({k: v or "" for k, v in attrs})


def forms(html: str) -> list[dict[str, Any]]:
    parser = _Forms()
    parser.feed(html)
    return parser.forms


class Dashboard:
    """The dashboard over plain HTTP, as a browser without JavaScript would use it."""

    def __init__(self, base_url: str):
        self.base_url = base_url
        self.http = requests.Session()
        self.http.trust_env = False

    def get(self, path: str) -> requests.Response:
        return self.http.get(self.base_url + path, allow_redirects=False, timeout=30)

    def post_form(self, action: str, data: dict[str, str], headers: dict[str, str] | None = None) -> requests.Response:
        all_headers = {"accept": "text/html", "referer": self.base_url + "/"}
        all_headers.update(headers or {})
        return self.http.post(self.base_url + action, data=data, headers=all_headers, allow_redirects=False, timeout=30)

    def action(self, path: str, **match: str) -> str:
        page = self.get(path)
        assert page.status_code == 200, describe(page)
        for form in forms(page.text):
            if all(form.get(k) == v for k, v in match.items()):
                return form["action"]
        raise AssertionError(f"no form {match} on {path}: {forms(page.text)}")

    def login(self, username: str, password: str) -> requests.Response:
        action = self.action("/login", method="post")
        assert re.fullmatch(r"/api/login\d+", action), action
        return self.post_form(
            action,
            {"username": username, "password": password},
            {"origin": self.base_url, "sec-fetch-site": "same-origin", "referer": self.base_url + "/login"},
        )

    def logged_in(self) -> bool:
        """GET / answers the overview with the nav (True), or a redirect to /login (False)."""
        resp = self.get("/")
        if resp.status_code in (302, 303, 307) and "/login" in resp.headers.get("location", ""):
            return False
        assert resp.status_code == 200, describe(resp)
        return 'aria-label="Main"' in resp.text and "Log out" in resp.text


def test_cross_site_posts_are_refused(world: World) -> None:
    dash = Dashboard(world.base_url)

    # A cross-site login attempt is refused and sets no session.
    action = dash.action("/login", method="post")
    evil_login = dash.post_form(
        action, {"username": "admin", "password": ADMIN_PASSWORD}, {"origin": "http://evil.example"}
    )
    assert evil_login.status_code == 403, describe(evil_login)
    assert SESSION_COOKIE not in dash.http.cookies, "a refused login sets no session"

    resp = dash.login("admin", ADMIN_PASSWORD)
    assert resp.status_code in (302, 303) and resp.headers["location"] == "/", describe(resp)
    set_cookie = resp.headers.get("set-cookie", "")
    assert set_cookie.startswith(f"{SESSION_COOKIE}=") and "HttpOnly" in set_cookie, set_cookie
    assert "SameSite=Lax" in set_cookie, set_cookie
    assert dash.logged_in()

    logout = dash.action("/", **{"class": "logout"})
    assert logout == "/logout", logout
    for headers in (
        {"origin": "http://evil.example"},
        {"origin": "null"},
        {"sec-fetch-site": "cross-site"},
        {"sec-fetch-site": "same-site"},
        {"sec-fetch-site": "cross-site", "origin": world.base_url},
    ):
        refused = dash.post_form(logout, {}, headers)
        assert refused.status_code == 403, f"{headers}: {describe(refused)}"
        assert dash.logged_in(), f"a refused POST ({headers}) changes nothing: the session is still there"

    # The console's forms are guarded alike; a refused one changes nothing.
    for page_path, fn_name, data in (
        ("/events", "replay_window", {"since": "2020-01-01T00:00:00Z", "until": "2020-02-01T00:00:00Z"}),
        (f"/endpoints/{world.down.endpoint['id']}", "unlock_endpoint", {"id": world.down.endpoint["id"]}),
    ):
        html = dash.get(page_path).text
        action = next((f["action"] for f in forms(html) if fn_name in f.get("action", "")), None)
        assert action, f"no {fn_name} form on {page_path}"
        refused = dash.post_form(action, data, {"origin": "http://evil.example"})
        assert refused.status_code == 403, f"{fn_name}: {describe(refused)}"
    assert endpoint(world.acme_client, world.down.endpoint["id"])["state"] == "locked", "the refused unlock did nothing"

    accepted = dash.post_form(logout, {}, {"origin": world.base_url, "sec-fetch-site": "same-origin"})
    assert accepted.status_code == 302, describe(accepted)
    assert accepted.headers["location"].endswith("/login"), describe(accepted)
    assert not dash.logged_in(), "the accepted logout ends the session"


def test_a_session_survives_a_restart() -> None:
    with TestDatabase.create(os.environ.get("TEST_DATABASE_URL")) as db:
        server = start_herald(db, "restart")
        try:
            dash = Dashboard(server.base_url)
            resp = dash.login("admin", ADMIN_PASSWORD)
            assert resp.status_code == 302 and resp.headers["location"] == "/", describe(resp)
            assert dash.logged_in()
            cookie = dash.http.cookies.get(SESSION_COOKIE)
            assert cookie, dash.http.cookies

            server.stop()
            server.restart()  # the same port and database
            resp = dash.get("/")
            assert resp.status_code == 200, f"after a restart the same cookie still logs in: {describe(resp)}"
            assert 'aria-label="Main"' in resp.text and "admin" in resp.text
            assert dash.http.cookies.get(SESSION_COOKIE) == cookie
        finally:
            server.stop()


def test_logout_ends_the_session(world: World, tabs: Tabs) -> None:
    tab = logged_in(tabs, "admin", ADMIN_PASSWORD)
    cookie = tab.session_cookie()
    assert cookie is not None
    tab.submit(tab.page.get_by_role("button", name="Log out"), "logged-out")
    assert tab.path.startswith("/login"), tab.path
    tab.goto("/", "overview-after-logout")
    assert tab.path.startswith("/login"), f"after logout / leads to /login, not {tab.path}"
    tab.goto("/admin/customers", "customers-after-logout")
    assert tab.path.startswith("/login") or tab.page.locator("tbody tr").count() == 0

    # The old cookie is dead on the server too, not only dropped by the browser.
    old = Dashboard(world.base_url)
    old.http.cookies.set(SESSION_COOKIE, cookie["value"])
    assert not old.logged_in(), "the session id from before the logout no longer logs in"
