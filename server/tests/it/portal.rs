//! The customer portal: one-time links that open the dashboard as a customer, the `viewer`
//! role that changes nothing, and who may show the dashboard in a frame.

use crate::common;
use crate::dashboard::{Browser, customer_snapshot, customer_user};

use common::{ADMIN_TOKEN, TestApp};
use domain::ids::{CustomerId, EndpointId};
use herald::service::{
    Principal, ServiceError, customers, endpoint_health, endpoints, event_types, events, messages, portal, replays,
    subscriptions, users,
};
use sea_orm::{ConnectionTrait, Statement};
use serde_json::{Value, json};

async fn portal_link(app: &TestApp, token: &str, customer: &str, body: Value) -> (u16, Value) {
    app.post(&format!("/api/v1/customers/{customer}/portal-links"), token, body).await
}

/// The link's path on the dashboard.
fn path_of<'a>(app: &TestApp, link: &'a Value) -> &'a str {
    let url = link["url"].as_str().expect("the answer has a url");
    url.strip_prefix(app.base.as_str()).expect("the link starts with the address it was asked at")
}

async fn audit_rows(app: &TestApp, action: &str) -> Vec<Value> {
    let (_, page) = app.get(&format!("/api/v1/audit-log?action={action}&limit=100"), ADMIN_TOKEN).await;
    page["data"].as_array().unwrap().clone()
}

/// Every stored text of the portal links table, to look for a token in.
async fn stored_link_text(app: &TestApp) -> String {
    let db = &app.services.db;
    let sql = "SELECT id, token_hash, customer_id, role, return_url FROM portal_links";
    let rows = db.query_all_raw(Statement::from_string(db.get_database_backend(), sql)).await.unwrap();
    let mut text = String::new();
    for row in rows {
        for column in ["id", "token_hash", "customer_id", "role"] {
            text.push_str(&row.try_get::<String>("", column).unwrap());
        }
        text.push_str(&row.try_get::<Option<String>>("", "return_url").unwrap().unwrap_or_default());
    }
    text
}

/// The dashboard pages a customer sees, for one subscription, message and endpoint.
async fn customer_pages(app: &TestApp, key: &str) -> Vec<String> {
    let sub = app
        .subscribe(key, json!({"name": "acme-orders", "url": "http://127.0.0.1:9/refused", "event_types": ["*"]}))
        .await;
    let msg = app.publish(key, "e1", "order.created").await["message_ids"][0].as_str().unwrap().to_string();
    app.deliver_fresh().await;
    let (_, endpoints) = app.get("/api/v1/endpoints", key).await;
    let endpoint = endpoints["data"][0]["id"].as_str().unwrap().to_string();
    let sub = sub["id"].as_str().unwrap();
    ["/", "/subscriptions", "/messages", "/events", "/event-types", "/endpoints", "/dead-letters"]
        .into_iter()
        .map(String::from)
        .chain([format!("/subscriptions/{sub}"), format!("/messages/{msg}"), format!("/endpoints/{endpoint}")])
        .collect()
}

#[tokio::test]
async fn a_portal_link_opens_the_customers_dashboard_once_and_changes_nothing() {
    let app = TestApp::start().await;
    let (acme, key) = app.customer("acme").await;
    let pages = customer_pages(&app, &key).await;
    let body = json!({"return_url": "http://127.0.0.1:3000/settings"});
    let (status, link) = portal_link(&app, &key, &acme, body).await;
    assert_eq!(status, 201, "{link}");
    let expires_at = chrono::DateTime::parse_from_rfc3339(link["expires_at"].as_str().unwrap()).unwrap();
    assert_eq!(expires_at.timestamp_millis(), app.now_ms() + 3_600_000, "an hour by default");
    let path = path_of(&app, &link).to_string();
    let token = path.strip_prefix("/portal/").unwrap();
    assert!(token.starts_with("hp_") && token.len() > 40, "{token}");
    let stored = stored_link_text(&app).await;
    assert!(stored.contains(&acme) && !stored.contains(token), "only the token's hash is stored: {stored}");

    let mut browser = Browser::new(&app);
    let (status, location, _) = browser.open(&path).await;
    assert_eq!((status, location.as_deref()), (303, Some("/")));
    assert!(browser.cookie.as_deref().unwrap().starts_with("herald_session="));
    let (_, home, _) = browser.get("/").await;
    assert!(home.contains("acme") && home.contains("(view only)"), "the portal names its customer: {home}");
    assert!(home.contains("href=\"http://127.0.0.1:3000/settings\"") && home.contains(">Back<"), "{home}");
    assert!(!home.contains("Log out") && !home.contains("/admin/"), "{home}");
    for page in &pages {
        let (status, html, _) = browser.get(page).await;
        assert_eq!(status, 200, "{page}: {html}");
        assert!(!html.contains("method=\"post\""), "{page} shows a form that changes state: {html}");
    }
    assert!(browser.get("/subscriptions").await.1.contains("acme-orders"));

    let mut second = Browser::new(&app);
    let (status, location, _) = second.open(&path).await;
    assert_eq!((status, location.as_deref()), (303, Some("/login?link=expired")), "a link opens once");
    assert!(second.cookie.is_none(), "a refused link starts no session");
    let (_, login, _) = second.get("/login?link=expired").await;
    assert!(login.contains("expired or was already used") && login.contains("name=\"password\""), "{login}");
    assert_eq!(browser.get("/").await.0, 200, "the first holder's session goes on");

    let created = audit_rows(&app, "portal_link.create").await;
    assert_eq!(created.len(), 1);
    assert_eq!(created[0]["detail"]["role"], "viewer");
    assert_eq!(created[0]["detail"]["expires_at"], link["expires_at"]);
    let used = audit_rows(&app, "portal_link.use").await;
    assert_eq!(used.len(), 1);
    assert_eq!(used[0]["target"], created[0]["target"]);
    assert_eq!(used[0]["actor"], format!("portal:{}", created[0]["target"].as_str().unwrap()));
    assert!(!created.iter().chain(&used).any(|row| row.to_string().contains(token)), "no token in the audit log");
}

#[tokio::test]
async fn an_expired_or_forged_link_shows_the_login_page_and_an_editor_link_acts_as_the_customer() {
    let app = TestApp::start().await;
    let (acme, key) = app.customer("acme").await;
    let sub = app.subscribe(&key, json!({"name": "s", "url": "http://127.0.0.1:9/x", "event_types": ["*"]})).await;
    let (_, short) = portal_link(&app, ADMIN_TOKEN, &acme, json!({"ttl_secs": 60})).await;
    let (_, editor) = portal_link(&app, ADMIN_TOKEN, &acme, json!({"role": "editor", "ttl_secs": 120})).await;
    app.clock.advance_ms(60_000);

    let mut browser = Browser::new(&app);
    for path in [path_of(&app, &short), "/portal/hp_forged"] {
        let (status, location, _) = browser.open(path).await;
        assert_eq!((status, location.as_deref()), (303, Some("/login?link=expired")), "{path}");
    }
    assert!(browser.cookie.is_none());

    let (status, location, _) = browser.open(path_of(&app, &editor)).await;
    assert_eq!((status, location.as_deref()), (303, Some("/")), "a link is good until its expiry");
    let sub_page = format!("/subscriptions/{}", sub["id"].as_str().unwrap());
    let (_, html, _) = browser.get(&sub_page).await;
    assert!(html.contains("Rotate secret") && !html.contains("(view only)"), "{html}");
    let (status, location) =
        browser.submit(&sub_page, "rotate_secret", &[("id", sub["id"].as_str().unwrap())], None).await;
    assert_eq!(status, 302, "{location:?}");
    assert!(!location.unwrap_or_default().contains("__err"), "the editor rotated the secret");
    let rotated = audit_rows(&app, "subscription.rotate_secret").await;
    assert!(rotated[0]["actor"].as_str().unwrap().starts_with("portal:prt_"), "{rotated:?}");

    app.clock.advance_ms(119_000);
    assert_eq!(browser.get("/").await.0, 200, "the session lasts the link's 120 s from its opening");
    app.clock.advance_ms(1_000);
    assert_eq!(browser.get("/").await.2.as_deref(), Some("/login"), "and ends then");
}

#[tokio::test]
async fn bad_portal_link_requests_name_their_field_and_change_nothing() {
    let app = TestApp::start().await;
    let (acme, key) = app.customer("acme").await;
    let (globex, _) = app.customer("globex").await;
    for (body, field, status) in [
        (json!({"ttl_secs": 59}), "ttl_secs", 422),
        (json!({"ttl_secs": 86_401}), "ttl_secs", 422),
        (json!({"role": "admin"}), "role", 422),
        (json!({"role": "owner"}), "role", 422),
        (json!({"return_url": "ftp://app.example.com/"}), "return_url", 422),
        (json!({"return_url": "http://app.example.com/"}), "return_url", 422),
        (json!({"return_url": "javascript:alert(1)"}), "return_url", 422),
        (json!({"expires": 1}), "expires", 422),
    ] {
        let (got, problem) = portal_link(&app, &key, &acme, body.clone()).await;
        assert_eq!(got, status, "{body}: {problem}");
        assert_eq!(problem["errors"][0]["field"], field, "{body}: {problem}");
    }
    let (got, problem) = portal_link(&app, &key, &globex, json!({})).await;
    assert_eq!((got, problem["errors"][0]["field"].as_str()), (404, Some("id")), "another customer's: {problem}");
    let (got, problem) = portal_link(&app, ADMIN_TOKEN, "cus_nobody", json!({})).await;
    assert_eq!((got, problem["errors"][0]["field"].as_str()), (404, Some("id")), "{problem}");
    assert!(audit_rows(&app, "portal_link.create").await.is_empty());
    assert!(stored_link_text(&app).await.is_empty(), "no link was stored");
    let (got, _) = portal_link(&app, &key, &acme, json!({})).await;
    assert_eq!(got, 201, "the customer's own key makes a link");
}

#[tokio::test]
async fn no_server_function_changes_anything_for_a_viewer() {
    let app = TestApp::start().await;
    let (acme, key) = customer_user(&app, "acme", "alice").await;
    let viewer = json!({"username": "vera", "password": "password-123", "role": "viewer", "customer_id": acme});
    assert_eq!(app.post("/api/v1/users", ADMIN_TOKEN, viewer).await.0, 201);
    let (status, problem) = app
        .post("/api/v1/users", ADMIN_TOKEN, json!({"username": "v2", "password": "password-123", "role": "viewer"}))
        .await;
    assert_eq!((status, problem["errors"][0]["field"].as_str()), (422, Some("customer_id")), "{problem}");
    customer_pages(&app, &key).await;
    let sub_id = app.get("/api/v1/subscriptions", &key).await.1["data"][0]["id"].as_str().unwrap().to_string();
    let sub = app.get(&format!("/api/v1/subscriptions/{sub_id}"), &key).await.1;
    let msg = app.get("/api/v1/messages", &key).await.1["data"][0]["id"].as_str().unwrap().to_string();
    let endpoint = app.get("/api/v1/endpoints", &key).await.1["data"][0]["id"].as_str().unwrap().to_string();
    let before = customer_snapshot(&app, &acme).await;

    let mut vera = Browser::new(&app);
    vera.login("vera", "password-123").await;
    let mut portal = Browser::new(&app);
    let (_, link) = portal_link(&app, &key, &acme, json!({})).await;
    portal.open(path_of(&app, &link)).await;
    let paths: Vec<(&str, _)> = leptos::server_fn::axum::server_fn_paths().collect();
    let writes: Vec<&str> = paths
        .iter()
        .map(|(path, _)| *path)
        .filter(|path| !path.contains("/get_") && !path.contains("login") && !path.contains("logout"))
        .collect();
    assert!(writes.len() >= 20, "every server function that changes state: {writes:?}");
    for browser in [&vera, &portal] {
        for (path, method) in &paths {
            if path.contains("login") || path.contains("logout") {
                continue;
            }
            for id in [&sub_id, &msg, &endpoint, &acme] {
                let fields = [
                    ("id", id.as_str()),
                    ("customer_id", acme.as_str()),
                    ("subscription_id", sub_id.as_str()),
                    ("key_id", "key_x"),
                    ("name", "changed"),
                    ("kind", "timeout"),
                    ("status", "paused"),
                    ("event_type", "order.created"),
                    ("event_types", "*"),
                    ("url", "http://127.0.0.1:9/changed"),
                    ("username", "mallory"),
                    ("password", "password-123"),
                    ("role", "admin"),
                ];
                let resp = browser.call(path, method, &fields).await;
                let status = resp.status().as_u16();
                if writes.contains(path) {
                    assert_eq!(status, 403, "{path} with {id}: {}", resp.text().await.unwrap());
                }
            }
        }
    }
    assert_eq!(customer_snapshot(&app, &acme).await, before, "the viewers changed nothing");
    let (_, own) = app.get(&format!("/api/v1/subscriptions/{sub_id}"), &key).await;
    assert_eq!(own["secret"], sub["secret"], "the secret was not rotated");
    let (_, users) = app.get("/api/v1/audit-log?action=user.create&limit=10", ADMIN_TOKEN).await;
    assert_eq!(users["data"].as_array().unwrap().len(), 2, "no user was made: {users}");
}

/// The refusal lives in the use cases: each one that changes state refuses a viewer, whoever calls it.
#[tokio::test]
async fn every_use_case_that_changes_state_refuses_a_viewer() {
    use domain::request::*;
    let app = TestApp::start().await;
    let (acme, _) = app.customer("acme").await;
    let s = &app.services;
    let who = Principal::Viewer { customer_id: acme.as_str().into(), actor: "user:vera".into() };
    let sub = subscriptions::create(s, &Principal::Admin { actor: "t".into() }, {
        let body = json!({"name": "s", "url": "http://127.0.0.1:9/x", "event_types": ["*"], "customer_id": acme});
        SubscriptionBody::read(&body).unwrap()
    })
    .await
    .unwrap();
    let sub_id = sub.id.as_str().into();
    let name = || NameBody::read(&json!({"name": "n"})).unwrap();
    let event =
        domain::event::CloudEvent::parse(json!({"specversion": "1.0", "id": "e", "source": "s", "type": "t"}), "")
            .unwrap();
    let window = json!({"since": "2026-01-01T00:00:00Z", "until": "2026-01-02T00:00:00Z", "subscription_id": sub.id});
    // Each call, whatever its arguments name, is refused before it reads anything.
    macro_rules! refused {
        ($call:expr) => {{
            let result = $call.await.map(drop);
            assert!(matches!(result, Err(ServiceError::ReadOnly)), "{}: {result:?}", stringify!($call));
        }};
    }
    let (customer, endpoint) = (CustomerId::from(acme.as_str()), EndpointId::from("ep_x"));
    refused!(customers::create(s, &who, name()));
    refused!(customers::create_api_key(s, &who, &customer, name()));
    refused!(customers::revoke_api_key(s, &who, &customer, &"key_x".into()));
    refused!(endpoint_health::replay_failures(s, &who, &endpoint, "timeout"));
    refused!(endpoints::unlock(s, &who, &endpoint, domain::dto::Backlog::Deliver));
    refused!(event_types::create(s, &who, EventTypeBody::read(&json!({"name": "a.b"})).unwrap()));
    refused!(event_types::update(s, &who, None, "a.b", EventTypePatch::read(&json!({})).unwrap()));
    refused!(event_types::delete(s, &who, None, "a.b"));
    refused!(events::publish(s, &who, None, vec![event], false));
    refused!(events::send_test(s, &who, &sub_id));
    refused!(events::send_example(s, &who, &sub_id, SendExampleBody::read(&json!({"event_type": "a.b"})).unwrap()));
    refused!(messages::replay_one(s, &who, &"msg_x".into()));
    refused!(replays::start_events(s, &who, ReplayWindowBody::read(&window).unwrap()));
    refused!(replays::start_messages(s, &who, BulkReplayBody::read(&json!({"state": "dead"})).unwrap()));
    refused!(replays::start_listed(s, &who, (customer.clone(), "ep_x"), "timeout", vec![]));
    refused!(replays::cancel(s, &who, &"rpl_x".into()));
    let other = json!({"name": "s", "url": "http://127.0.0.1:9/y", "event_types": ["*"]});
    refused!(subscriptions::create(s, &who, SubscriptionBody::read(&other).unwrap()));
    refused!(subscriptions::update(s, &who, &sub_id, SubscriptionPatch::read(&json!({"status": "paused"})).unwrap()));
    refused!(subscriptions::delete(s, &who, &sub_id));
    refused!(subscriptions::rotate_secret(s, &who, &sub_id));
    let admin = json!({"username": "m", "password": "password-123", "role": "admin"});
    refused!(users::create(s, &who, UserBody::read(&admin).unwrap()));
    refused!(portal::create_link(s, &who, &customer, PortalLinkBody::read(&json!({})).unwrap(), "http://x"));
    let typed = EventTypeBody::read(&json!({"name": "a.b", "customer_id": acme})).unwrap();
    event_types::create(s, &Principal::Admin { actor: "t".into() }, typed).await.unwrap();
    let read = event_types::get(s, &who, None, "a.b").await.expect("a viewer reads its customer's event type");
    assert_eq!(read.name, "a.b");
    let reads = subscriptions::get(s, &who, &sub_id).await.expect("a viewer reads its customer's subscription");
    assert_eq!(reads.secret, sub.secret);
}

#[tokio::test]
async fn nothing_frames_the_dashboard_unless_the_portal_names_who_may() {
    let app = TestApp::start().await;
    let mut browser = Browser::new(&app);
    for path in ["/login", "/no-such-page", "/portal/hp_forged"] {
        let (_, _, headers) = browser.open(path).await;
        assert_eq!(headers["content-security-policy"], "frame-ancestors 'none'", "{path}");
        assert_eq!(headers["x-frame-options"], "DENY", "{path}");
    }
    let (_, session) = login_cookie(&app).await;
    assert!(session.contains("SameSite=Lax") && !session.contains("Secure"), "{session}");

    let origins = "https://app.example.com http://127.0.0.1:3000";
    let app = TestApp::start_with(|s| s.portal.frame_ancestors = origins.into()).await;
    let mut browser = Browser::new(&app);
    let (_, _, headers) = browser.open("/login").await;
    assert_eq!(headers["content-security-policy"], format!("frame-ancestors {origins}"));
    assert!(headers.get("x-frame-options").is_none());
    let (acme, key) = app.customer("acme").await;
    let (_, link) = portal_link(&app, &key, &acme, json!({"ttl_secs": 600})).await;
    let (_, _, headers) = browser.open(path_of(&app, &link)).await;
    let cookie = headers["set-cookie"].to_str().unwrap();
    for attribute in ["HttpOnly", "SameSite=None", "Secure", "Path=/"] {
        assert!(cookie.contains(attribute), "{attribute}: {cookie}");
    }
    let max_age: i64 = cookie.split("Max-Age=").nth(1).unwrap().split(';').next().unwrap().parse().unwrap();
    assert!((590..=600).contains(&max_age), "the session lasts the link's time: {cookie}");
}

/// The `Set-Cookie` of an admin's login.
async fn login_cookie(app: &TestApp) -> (u16, String) {
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let html = http.get(format!("{}/login", app.base)).send().await.unwrap().text().await.unwrap();
    let action = html.split("action=\"").nth(1).unwrap().split('"').next().unwrap().to_string();
    let resp = http
        .post(format!("{}{action}", app.base))
        .header("origin", &app.base)
        .header("content-type", "application/x-www-form-urlencoded")
        .body("username=admin&password=admin-password")
        .send()
        .await
        .unwrap();
    let cookie = resp.headers().get("set-cookie").map(|c| c.to_str().unwrap().to_string()).unwrap_or_default();
    (resp.status().as_u16(), cookie)
}

#[tokio::test]
async fn opening_a_link_is_answered_as_a_write_is_after_the_logs_flush() {
    use herald::store::wal_flush::WroteOnSafeMethod;
    use tower::ServiceExt;
    let app = TestApp::start().await;
    let (acme, key) = app.customer("acme").await;
    let (_, link) = portal_link(&app, &key, &acme, json!({})).await;
    // The link opens (it is used, a session starts); a forged one is refused: each answer is marked.
    for path in [path_of(&app, &link), "/portal/hp_forged"] {
        let request = axum::http::Request::get(path).body(axum::body::Body::empty()).unwrap();
        let response = herald::ui::router(app.services.clone()).oneshot(request).await.unwrap();
        assert_eq!(response.status(), 303, "{path}");
        assert!(response.extensions().get::<WroteOnSafeMethod>().is_some(), "{path} waits for the flush");
    }
}
