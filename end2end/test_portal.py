"""The customer portal, black-box in Debian's headless Chromium with JavaScript off: a product asks
Herald for a one-time link with its customer's API key and hands it to the customer, as a link or in
an iframe of its own page.

Two herald processes on fresh databases: `embedding`, configured so that one product origin may
frame the dashboard (the product page is served by this module, on 127.0.0.1), and `plain`, with the
default configuration, which no page may frame. The customer `acme` has a subscription whose
receiver answers 200, one delivered message and one dead one.

Screenshots of the customer's pages, at 1280 and 390 px wide, are kept in
end2end/artifacts/screenshots/.
"""

from __future__ import annotations

import http.server
import os
import secrets
import threading
from datetime import datetime, timezone
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import requests
from playwright.sync_api import Browser

from accessibility import serious_violations
from browser import Tabs, open_tabs
from harness import ARTIFACTS_DIR, ApiClient, HeraldServer, TestDatabase, cloud_event, herald_binary, utc_stamp, wait_until
from webhook_receiver import Receiver

WAIT = 30.0
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}


class ProductPage:
    """The product that embeds the portal: one page at `/settings/webhooks` whose iframe shows the
    link it was given, on 127.0.0.1 and a port of its own (another origin than Herald's)."""

    def __init__(self) -> None:
        self.frame_src = ""
        page = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the standard library's name
                body = (
                    "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Acme settings</title></head>"
                    "<body><h1>Webhooks</h1>"
                    f"<iframe title='Webhooks' src='{page.frame_src}' width='1200' height='700'></iframe>"
                    "</body></html>"
                ).encode()
                self.send_response(200)
                self.send_header("content-type", "text/html; charset=utf-8")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> ProductPage:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class World:
    embedding: HeraldServer
    plain: HeraldServer
    product: ProductPage
    acme: dict
    acme_client: ApiClient
    sub: dict
    delivered: str
    dead: str

    def link(self, **body: object) -> dict:
        path = f"/api/v1/customers/{self.acme['id']}/portal-links"
        return self.acme_client.post(path, json=body, expect=201).json()


def start(db: TestDatabase, name: str, env: dict[str, str]) -> HeraldServer:
    log_path = ARTIFACTS_DIR / f"herald-{db.kind}-{utc_stamp()}-{os.getpid()}-portal-{name}.log"
    env = {"HERALD_ALLOW_PRIVATE_TARGETS": "true", **env}
    return HeraldServer(herald_binary(), db.url, log_path=log_path, extra_env=env).start()


def publish(client: ApiClient, event_type: str) -> str:
    body = client.publish(cloud_event(f"evt-{secrets.token_hex(6)}", event_type, source="/portal-e2e")).json()
    (message_id,) = body["events"][0]["message_ids"]
    return message_id


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    databases = [TestDatabase.create(os.environ.get("TEST_DATABASE_URL")) for _ in range(2)]
    servers: list[HeraldServer] = []
    try:
        with Receiver() as receiver, ProductPage() as product:
            servers.append(start(databases[0], "embedding", {"HERALD_PORTAL_FRAME_ANCESTORS": product.origin}))
            servers.append(start(databases[1], "plain", {}))
            embedding = servers[0]
            acme = embedding.create_customer("acme")
            client = embedding.client(embedding.create_api_key(acme["id"], "acme-key")["token"])
            tag = secrets.token_hex(3)
            receiver.answer(f"/gone-{tag}", 400)
            policy = {"kind": "exponential", "min_delay_secs": 1, "max_delay_secs": 1, "max_attempts": 1}
            ok = client.post("/api/v1/subscriptions", expect=201, json={
                "name": f"acme orders {tag}", "url": receiver.url(f"/ok-{tag}"), "event_types": [f"order.created.{tag}"],
            }).json()
            client.post("/api/v1/subscriptions", expect=201, json={
                "name": f"acme refunds {tag}", "url": receiver.url(f"/gone-{tag}"),
                "event_types": [f"refund.created.{tag}"], "retry_policy": policy,
            })
            delivered = publish(client, f"order.created.{tag}")
            dead = publish(client, f"refund.created.{tag}")
            for message_id, state in ((delivered, "delivered"), (dead, "dead")):
                wait_until(
                    lambda: client.get(f"/api/v1/messages/{message_id}").json()["state"] == state,  # noqa: B023
                    WAIT,
                    f"message {message_id} to be {state}",
                    interval=0.1,
                )
            yield World(embedding, servers[1], product, acme, client, ok, delivered, dead)
    finally:
        for server in servers:
            server.stop()
        for db in databases:
            db.drop()


@pytest.fixture
def tabs(chromium: Browser, world: World, request: pytest.FixtureRequest) -> Iterator[Tabs]:  # noqa: F811
    yield from open_tabs(chromium, world.embedding.base_url, request)


def customer_paths(world: World) -> list[str]:
    return [
        "/",
        "/subscriptions",
        f"/subscriptions/{world.sub['id']}",
        "/messages",
        f"/messages/{world.delivered}",
        f"/messages/{world.dead}",
        "/events",
        "/event-types",
        "/endpoints",
        "/dead-letters",
    ]


def test_a_link_opens_the_customers_dashboard_once_without_a_control_that_changes_state(
    world: World, tabs: Tabs
) -> None:
    link = world.link(return_url="http://127.0.0.1:9/settings")
    assert link["url"].startswith(world.embedding.base_url + "/portal/hp_"), link

    tab = tabs.new("portal")
    tab.goto(link["url"], "open-link")
    assert tab.path == "/", f"the link leads to the overview, not {tab.page.url}; alerts: {tab.alerts()}"
    header = tab.page.locator("header.top")
    assert "acme" in header.inner_text(), header.inner_text()
    assert header.get_by_role("link", name="Back").get_attribute("href") == "http://127.0.0.1:9/settings"
    assert header.get_by_role("button", name="Log out").count() == 0, "a portal session has no Log out"
    cookie = tab.session_cookie()
    assert cookie is not None and cookie["httpOnly"], cookie

    for width, viewport in (("1280", DESKTOP), ("390", PHONE)):
        tab.page.set_viewport_size(viewport)
        for path in customer_paths(world):
            tab.goto(path, f"{width}px-{path.strip('/').split('/')[0] or 'overview'}")
            assert tab.alerts() == [], f"{path}: {tab.alerts()}"
            posting = tab.page.locator("form[method='post']")
            assert posting.count() == 0, f"{path} shows a form that changes state: {posting.all_inner_texts()}"
            assert tab.page.get_by_role("button", name="Replay").count() == 0, path
            overflow = tab.page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 0, f"{path} at {width} px is {overflow} px wider than the screen"

    again = tabs.new("second-use")
    again.goto(link["url"], "second-use")
    assert again.path == "/login?link=expired", again.page.url
    assert any("expired or was already used" in alert for alert in again.alerts()), again.alerts()
    assert again.page.locator("input[name='password']").count() == 1
    assert again.session_cookie() is None, "a used link starts no session"

    forged = tabs.new("forged")
    forged.goto("/portal/hp_" + secrets.token_urlsafe(32), "forged")
    assert forged.path == "/login?link=expired", forged.page.url


def test_an_expired_link_shows_the_login_page(world: World, tabs: Tabs) -> None:
    """A link of 60 s, the shortest: it is refused once its expiry has passed (a real minute)."""
    link = world.link(ttl_secs=60)
    expires_at = link["expires_at"]
    wait_until(lambda: utc_now_after(expires_at), 75.0, f"the link's expiry {expires_at} to pass", interval=0.5)
    tab = tabs.new("expired")
    tab.goto(link["url"], "expired")
    assert tab.path == "/login?link=expired", tab.page.url


def utc_now_after(stamp: str) -> bool:
    return datetime.now(timezone.utc) > datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def test_the_portal_pages_pass_axe_core(world: World, tabs: Tabs) -> None:
    link = world.link()
    tab = tabs.new("axe-portal", javascript=True)
    tab.goto(link["url"], "axe-open")
    found = {}
    for path in customer_paths(world):
        tab.goto(path, f"axe-{path.strip('/').split('/')[0] or 'overview'}")
        found[path] = serious_violations(tab.page)
    failing = {page: lines for page, lines in found.items() if lines}
    assert not failing, "serious accessibility violations:\n" + "\n".join(
        f"{page}: {line}" for page, lines in failing.items() for line in lines
    )


def test_the_product_embeds_the_portal_and_other_pages_cannot(world: World, tabs: Tabs) -> None:
    link = world.link(role="viewer", ttl_secs=600)
    world.product.frame_src = link["url"]
    tab = tabs.new("product")
    tab.goto(world.product.origin + "/settings/webhooks", "product-page")
    frame = tab.page.frame_locator("iframe[title='Webhooks']")
    frame.locator("header.top").wait_for()
    assert "acme" in frame.locator("header.top").inner_text()
    assert frame.locator("main h1").inner_text() == "Overview"
    cookie = tab.session_cookie()
    assert cookie is not None, "the frame's session cookie was kept"
    assert (cookie["sameSite"], cookie["secure"], cookie["httpOnly"]) == ("None", True, True), cookie

    embedded = requests.get(world.embedding.base_url + "/login", timeout=5)
    assert embedded.headers["content-security-policy"] == f"frame-ancestors {world.product.origin}"
    assert "x-frame-options" not in embedded.headers

    plain = requests.get(world.plain.base_url + "/login", timeout=5)
    assert plain.headers["content-security-policy"] == "frame-ancestors 'none'"
    assert plain.headers["x-frame-options"] == "DENY"
    admin = world.plain.admin
    customer = world.plain.create_customer("globex")
    plain_link = admin.post(f"/api/v1/customers/{customer['id']}/portal-links", json={}, expect=201).json()
    world.product.frame_src = plain_link["url"]
    blocked = tabs.new("blocked")
    blocked.goto(world.product.origin + "/settings/webhooks", "framing-refused")
    frame = blocked.page.frame_locator("iframe[title='Webhooks']")
    assert frame.locator("header.top").count() == 0, "the default configuration lets no page frame the dashboard"
