//! The dashboard over HTTP as a browser without JavaScript uses it: login,
//! the session cookie, roles, isolation and the cross-site guard.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{ADMIN_TOKEN, TestApp};
use reqwest::header::{ACCEPT, COOKIE, LOCATION, SET_COOKIE};
use reqwest::redirect::Policy;
use serde_json::json;

pub(crate) struct Browser {
    pub(crate) http: reqwest::Client,
    base: String,
    pub(crate) cookie: Option<String>,
}

impl Browser {
    pub(crate) fn new(app: &TestApp) -> Browser {
        let http = reqwest::Client::builder().redirect(Policy::none()).timeout(common::HTTP_TIMEOUT).build().unwrap();
        Browser { http, base: app.base.clone(), cookie: None }
    }

    pub(crate) async fn get(&self, path: &str) -> (u16, String, Option<String>) {
        let mut req = self.http.get(format!("{}{path}", self.base)).header(ACCEPT, "text/html");
        if let Some(c) = &self.cookie {
            req = req.header(COOKIE, c);
        }
        let resp = req.send().await.unwrap();
        let location = resp.headers().get(LOCATION).map(|v| v.to_str().unwrap().to_string());
        (resp.status().as_u16(), resp.text().await.unwrap(), location)
    }

    /// Submits the page's form whose action contains `fn_name`, as a same-origin browser would.
    pub(crate) async fn submit(
        &mut self,
        page: &str,
        fn_name: &str,
        fields: &[(&str, &str)],
        origin: Option<&str>,
    ) -> (u16, Option<String>) {
        let (_, html, _) = self.get(page).await;
        let action = html
            .split("action=\"")
            .skip(1)
            .map(|s| s.split('"').next().unwrap())
            .find(|a| a.contains(fn_name))
            .unwrap_or_else(|| panic!("no {fn_name} form on {page}"))
            .to_string();
        let origin = origin.map(str::to_string).unwrap_or_else(|| self.base.clone());
        let mut req = self
            .http
            .post(format!("{}{action}", self.base))
            .header(ACCEPT, "text/html")
            .header("origin", origin)
            .header("referer", format!("{}{page}", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(url::form_urlencoded::Serializer::new(String::new()).extend_pairs(fields).finish());
        if let Some(c) = &self.cookie {
            req = req.header(COOKIE, c);
        }
        let resp = req.send().await.unwrap();
        if let Some(set) = resp.headers().get(SET_COOKIE) {
            self.cookie = Some(set.to_str().unwrap().split(';').next().unwrap().to_string());
        }
        (resp.status().as_u16(), resp.headers().get(LOCATION).map(|v| v.to_str().unwrap().to_string()))
    }

    pub(crate) async fn login(&mut self, username: &str, password: &str) -> (u16, Option<String>) {
        self.submit("/login", "login", &[("username", username), ("password", password)], None).await
    }

    /// Calls a server function at `path` (as its `method` says) with `fields`, as the dashboard's
    /// own pages would, with this browser's session.
    pub(crate) async fn call(
        &self,
        path: &str,
        method: &reqwest::Method,
        fields: &[(&str, &str)],
    ) -> reqwest::Response {
        let body = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(fields).finish();
        let url = format!("{}{path}", self.base);
        let request = if *method == reqwest::Method::GET {
            self.http.get(format!("{url}?{body}"))
        } else {
            self.http.post(url).header("content-type", "application/x-www-form-urlencoded").body(body)
        };
        let cookie = self.cookie.as_deref().expect("logged in");
        request
            .header(COOKIE, cookie)
            .header("origin", &self.base)
            .header(ACCEPT, "application/json")
            .send()
            .await
            .unwrap()
    }

    /// Opens a link as a browser would: its answer's status, `Location` and headers; a session
    /// cookie it sets is kept.
    pub(crate) async fn open(&mut self, path: &str) -> (u16, Option<String>, reqwest::header::HeaderMap) {
        let mut req = self.http.get(format!("{}{path}", self.base)).header(ACCEPT, "text/html");
        if let Some(c) = &self.cookie {
            req = req.header(COOKIE, c);
        }
        let resp = req.send().await.unwrap();
        if let Some(set) = resp.headers().get(SET_COOKIE) {
            self.cookie = Some(set.to_str().unwrap().split(';').next().unwrap().to_string());
        }
        let location = resp.headers().get(LOCATION).map(|v| v.to_str().unwrap().to_string());
        (resp.status().as_u16(), location, resp.headers().clone())
    }
}

pub(crate) async fn customer_user(app: &TestApp, name: &str, username: &str) -> (String, String) {
    let (customer, key) = app.customer(name).await;
    let body = json!({"username": username, "password": "password-123", "role": "customer", "customer_id": customer});
    assert_eq!(app.post("/api/v1/users", ADMIN_TOKEN, body).await.0, 201);
    (customer, key)
}

#[tokio::test]
async fn a_bad_password_sets_no_session_and_a_good_one_does() {
    let app = TestApp::start().await;
    let mut browser = Browser::new(&app);
    assert_eq!(browser.get("/").await.2.as_deref(), Some("/login"), "anonymous visitors go to the login page");
    let (status, location) = browser.login("admin", "wrong").await;
    assert_eq!(status, 302);
    assert!(location.unwrap().contains("__err"), "the error comes back to the login page");
    assert!(browser.cookie.is_none(), "a failed login sets no session cookie");
    let (_, html, _) = browser.get("/login?__path=x&__err=eA").await;
    assert!(html.contains("name=\"username\"") && html.contains("name=\"password\""));

    let (status, location) = browser.login("admin", "admin-password").await;
    assert_eq!((status, location.as_deref()), (302, Some("/")));
    assert!(browser.cookie.as_ref().unwrap().starts_with("herald_session="));
    let (status, html, _) = browser.get("/").await;
    assert_eq!(status, 200);
    assert!(html.contains("Messages by state") && html.contains("/admin/customers"), "{html}");
}

#[tokio::test]
async fn the_session_id_changes_at_login_and_ends_at_logout() {
    let app = TestApp::start().await;
    let mut browser = Browser::new(&app);
    browser.login("admin", "admin-password").await;
    let first = browser.cookie.clone().unwrap();
    browser.login("admin", "admin-password").await;
    assert_ne!(browser.cookie.clone().unwrap(), first, "a new session id at every login");
    let (status, _) = browser.submit("/", "logout", &[], None).await;
    assert_eq!(status, 302);
    assert_eq!(browser.get("/").await.2.as_deref(), Some("/login"));
}

#[tokio::test]
async fn customers_see_only_their_own_data_and_no_admin_pages() {
    let app = TestApp::start().await;
    let (_, key_a) = customer_user(&app, "acme", "alice").await;
    customer_user(&app, "globex", "bob").await;
    let sub = app
        .subscribe(&key_a, json!({"name": "acme-orders", "url": "http://127.0.0.1:9/x", "event_types": ["*"]}))
        .await;
    let msg = app.publish(&key_a, "e1", "order.created").await["message_ids"][0].as_str().unwrap().to_string();

    let mut alice = Browser::new(&app);
    alice.login("alice", "password-123").await;
    let (status, html, _) = alice.get("/subscriptions").await;
    assert!(status == 200 && html.contains("acme-orders"));
    assert!(alice.get("/messages").await.1.contains(&msg));
    assert_eq!(alice.get(&format!("/messages/{msg}")).await.0, 200);
    for admin_page in ["/admin/customers", "/admin/audit"] {
        let (status, html, _) = alice.get(admin_page).await;
        assert_eq!(status, 404, "{admin_page}");
        assert!(!html.contains("globex"), "{admin_page} shows nothing");
    }

    let mut bob = Browser::new(&app);
    bob.login("bob", "password-123").await;
    assert!(!bob.get("/messages").await.1.contains(&msg));
    assert!(!bob.get("/subscriptions").await.1.contains("acme-orders"));
    for path in [format!("/messages/{msg}"), format!("/subscriptions/{}", sub["id"].as_str().unwrap())] {
        let (status, html, _) = bob.get(&path).await;
        assert_eq!(status, 404, "{path}");
        assert!(!html.contains("acme-orders") && !html.contains("order.created"), "{path} shows nothing");
    }
}

#[tokio::test]
async fn an_attempt_without_a_response_opens_no_response_box() {
    let app = TestApp::start().await;
    let (_, key) = customer_user(&app, "acme", "alice").await;
    app.subscribe(&key, json!({"name": "nobody listens", "url": "http://127.0.0.1:9/x", "event_types": ["*"]})).await;
    let msg = app.publish(&key, "e1", "order.created").await["message_ids"][0].as_str().unwrap().to_string();
    assert_eq!(app.deliver_fresh().await, 1);
    assert_eq!(app.message(&key, &msg).await["attempt_count"], 1);

    let mut alice = Browser::new(&app);
    alice.login("alice", "password-123").await;
    let (status, html, _) = alice.get(&format!("/messages/{msg}")).await;
    assert_eq!(status, 200);
    assert!(html.contains("no response") && html.contains("connect"), "the attempt says why: {html}");
    assert!(!html.contains("Response headers and body"), "no empty response box: {html}");
}

/// Another dashboard being built in the same process (a second server, or the
/// next test) never holds back the resources of a page being rendered.
#[tokio::test]
async fn pages_answer_while_another_dashboard_is_being_built() {
    let app = TestApp::start().await;
    app.customer("acme").await;
    let mut admin = Browser::new(&app);
    admin.login("admin", "admin-password").await;
    let stop = Arc::new(AtomicBool::new(false));
    let builder = {
        let (services, stop) = (app.services.clone(), stop.clone());
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let _inside = runtime.enter();
            let mut built = 0u32;
            while !stop.load(Ordering::Relaxed) {
                drop(herald::ui::router(services.clone()));
                built += 1;
            }
            built
        })
    };
    for round in 0..20 {
        let answer = tokio::time::timeout(Duration::from_secs(10), admin.get("/admin/customers")).await;
        let (status, html, _) = answer.unwrap_or_else(|_| panic!("page {round} did not answer in 10 s"));
        assert_eq!(status, 200);
        assert!(html.contains("acme"), "{html}");
    }
    stop.store(true, Ordering::Relaxed);
    assert!(builder.join().unwrap() > 0, "dashboards were built meanwhile");
}

#[tokio::test]
async fn a_cross_site_post_is_refused() {
    let app = TestApp::start().await;
    let mut browser = Browser::new(&app);
    browser.login("admin", "admin-password").await;
    let (status, _) =
        browser.submit("/admin/customers", "create_customer", &[("name", "evil")], Some("http://evil.example")).await;
    assert_eq!(status, 403);
    let (status, location) = browser.submit("/admin/customers", "create_customer", &[("name", "good")], None).await;
    assert_eq!(status, 302);
    assert!(location.unwrap().starts_with("/admin/customers?created="));
    let (_, page) = app.get("/api/v1/customers", ADMIN_TOKEN).await;
    let names: Vec<&str> = page["data"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["good"]);
}

#[tokio::test]
async fn the_admin_unlocks_an_endpoint_from_the_endpoints_page() {
    let app = TestApp::start_with(|s| {
        s.breaker.disable_consecutive = 1;
        s.breaker.lock_consecutive = 1;
        s.breaker.lock_silence_secs = 0;
        s.breaker.probe_secs = 1;
    })
    .await;
    let (_, key) = customer_user(&app, "acme", "alice").await;
    app.subscribe(&key, json!({"name": "s", "url": "http://127.0.0.1:9/refused", "event_types": ["*"]})).await;
    let held = app.publish(&key, "e1", "t").await["message_ids"][0].as_str().unwrap().to_string();
    app.deliver_fresh().await;
    app.advance_secs(15.0);
    app.deliver_retries().await;
    let (_, endpoints) = app.get("/api/v1/endpoints", &key).await;
    assert_eq!(endpoints["data"][0]["state"], "locked");
    let endpoint_id = endpoints["data"][0]["id"].as_str().unwrap().to_string();

    let mut alice = Browser::new(&app);
    alice.login("alice", "password-123").await;
    let html = alice.get("/endpoints").await.1;
    assert!(html.contains("locked") && !html.contains("Unlock"), "customers see the state but no Unlock");

    let mut admin = Browser::new(&app);
    admin.login("admin", "admin-password").await;
    assert!(admin.get("/endpoints").await.1.contains(">Unlock<"));
    assert!(admin.get("/endpoints").await.1.contains("end them dead"), "the unlock offers the backlog's choices");
    let form = [("id", endpoint_id.as_str()), ("backlog", "dead"), ("older_than_minutes", "")];
    let (status, location) = admin.submit("/endpoints", "unlock_endpoint", &form, None).await;
    assert_eq!((status, location), (302, Some(format!("/endpoints?unlocked={endpoint_id}"))));
    let message = app.message(&key, &held).await;
    assert_eq!((message["state"].as_str(), message["dead_reason"].as_str()), (Some("dead"), Some("expired")));
    let html = admin.get(&format!("/endpoints?unlocked={endpoint_id}")).await.1;
    assert!(html.contains("is unlocked") && html.contains("badge-closed"));
    assert!(admin.get("/admin/audit").await.1.contains("endpoint.unlock"));
}

#[tokio::test]
async fn the_overview_counts_states_and_charts_the_last_hour() {
    let app = TestApp::start().await;
    let rx = common::TestReceiver::start().await;
    let (_, key) = customer_user(&app, "acme", "alice").await;
    app.subscribe(&key, json!({"name": "s", "url": rx.url, "event_types": ["*"]})).await;
    rx.answer(500);
    app.publish(&key, "e1", "t").await;
    app.publish(&key, "e2", "t").await;
    app.deliver_fresh().await;
    let mut alice = Browser::new(&app);
    alice.login("alice", "password-123").await;
    let html = alice.get("/").await.1;
    assert!(html.contains("0 min ago: 1 succeeded, 1 failed"), "{html}");
    assert!(html.contains("badge-delivered"), "{html}");
}

/// Everything the admin API shows of one customer, to compare before and after.
pub(crate) async fn customer_snapshot(app: &TestApp, customer: &str) -> Vec<serde_json::Value> {
    let mut parts = Vec::new();
    for list in ["subscriptions", "messages", "endpoints"] {
        let (_, page) = app.get(&format!("/api/v1/{list}?customer_id={customer}&limit=1000"), ADMIN_TOKEN).await;
        for item in page["data"].as_array().unwrap() {
            let id = item["id"].as_str().unwrap();
            let detail = match list {
                "endpoints" => item.clone(),
                _ => app.get(&format!("/api/v1/{list}/{id}"), ADMIN_TOKEN).await.1,
            };
            parts.push(detail);
        }
    }
    let (_, keys) = app.get("/api/v1/customers?limit=1000", ADMIN_TOKEN).await;
    parts.push(keys);
    parts
}

#[tokio::test]
async fn no_server_function_acts_on_another_customers_objects() {
    let app = TestApp::start().await;
    let (acme, key_a) = customer_user(&app, "acme", "alice").await;
    customer_user(&app, "globex", "bob").await;
    let sub = app
        .subscribe(&key_a, json!({"name": "acme-orders", "url": "http://127.0.0.1:9/refused", "event_types": ["*"]}))
        .await;
    let sub_id = sub["id"].as_str().unwrap().to_string();
    let secret = sub["secret"].as_str().unwrap().to_string();
    let msg = app.publish(&key_a, "e1", "order.created").await["message_ids"][0].as_str().unwrap().to_string();
    app.deliver_fresh().await;
    let (_, endpoints) = app.get("/api/v1/endpoints", &key_a).await;
    let endpoint_id = endpoints["data"][0]["id"].as_str().unwrap().to_string();
    let (_, key_page) =
        app.post(&format!("/api/v1/customers/{acme}/api-keys"), ADMIN_TOKEN, json!({"name": "k"})).await;
    let key_id = key_page["id"].as_str().unwrap().to_string();
    let before = customer_snapshot(&app, &acme).await;

    let mut bob = Browser::new(&app);
    bob.login("bob", "password-123").await;
    let victims = [&sub_id, &msg, &endpoint_id, &acme, &key_id];
    let paths: Vec<(&str, _)> = leptos::server_fn::axum::server_fn_paths().collect();
    assert!(paths.len() >= 20, "the server functions are registered: {paths:?}");
    let mut calls = 0;
    for (path, method) in &paths {
        if path.contains("login") || path.contains("logout") {
            continue;
        }
        for victim in victims {
            let fields = [
                ("id", victim.as_str()),
                ("customer_id", acme.as_str()),
                ("key_id", key_id.as_str()),
                ("subscription_id", sub_id.as_str()),
                ("filter[subscription_id]", sub_id.as_str()),
                ("name", "hijacked"),
                ("url", "http://127.0.0.1:9/hijacked"),
                ("event_types", "*"),
                ("status", "paused"),
                ("state", "dead"),
            ];
            let resp = bob.call(path, method, &fields).await;
            calls += 1;
            let text = resp.text().await.unwrap();
            for secret_or_id in [&secret, &sub_id, &msg, &endpoint_id, &acme, &key_id, &"acme-orders".to_string()] {
                assert!(!text.contains(secret_or_id.as_str()), "{path} with {victim} showed {secret_or_id}: {text}");
            }
        }
    }
    assert!(calls >= 100, "{calls}");
    assert_eq!(customer_snapshot(&app, &acme).await, before, "bob changed nothing of acme's");
    let (_, own) = app.get(&format!("/api/v1/subscriptions/{sub_id}"), &key_a).await;
    assert_eq!(own["secret"], secret.as_str(), "the secret was not rotated");
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).unwrap().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[tokio::test]
async fn the_delivery_log_names_what_each_message_belongs_to() {
    let app = TestApp::start().await;
    let (_, key_a) = customer_user(&app, "acme", "alice").await;
    let (_, key_b) = customer_user(&app, "globex", "bob").await;
    let url = "http://127.0.0.1:9/acme/a-rather-long-path/that-goes-on-and-on/and-on?with=query&and=more";
    let sub = app.subscribe(&key_a, json!({"name": "acme-orders", "url": url, "event_types": ["*"]})).await;
    let sub_id = sub["id"].as_str().unwrap();
    app.subscribe(&key_b, json!({"name": "globex-bills", "url": "http://127.0.0.1:9/g", "event_types": ["*"]})).await;
    app.publish(&key_a, "order-1234", "order.created").await;
    app.publish(&key_b, "bill-1", "bill.sent").await;

    let mut alice = Browser::new(&app);
    alice.login("alice", "password-123").await;
    let html = alice.get("/messages").await.1;
    assert!(html.contains(">acme-orders</a>"), "the subscription by name: {html}");
    let text = html.replace("<wbr>", "");
    assert!(text.contains(&html_escape::encode_text(url).to_string()), "the endpoint's URL: {html}");
    assert!(!html.contains("globex") && !html.contains(">Customer<"), "a customer sees no customer column");
    // The subscription filter is a select of names.
    assert!(html.contains(&format!("<option value=\"{sub_id}\">acme-orders</option>")), "{html}");
    assert!(!html.contains("globex-bills"), "another customer's subscription is not offered");
    let html = alice.get("/messages?event_id=order-1234").await.1;
    assert!(html.contains("order.created"));
    let html = alice.get("/messages?event_id=bill-1").await.1;
    assert!(!html.contains("bill.sent") && html.contains("No messages match"), "{html}");

    let mut admin = Browser::new(&app);
    admin.login("admin", "admin-password").await;
    let html = admin.get("/messages").await.1;
    assert!(html.contains(">Customer<") && html.contains(">acme</td>") && html.contains(">globex</td>"), "{html}");
    assert!(html.contains("acme-orders · acme"), "the admin's choices name the customer: {html}");
}

#[tokio::test]
async fn an_endpoint_page_shows_its_health_and_replays_a_kind_of_failure() {
    let app = TestApp::start().await;
    let rx = common::TestReceiver::start().await;
    let (_, key) = customer_user(&app, "acme", "alice").await;
    customer_user(&app, "globex", "bob").await;
    let policy = json!({"kind": "exponential", "min_delay_secs": 1, "max_delay_secs": 1, "max_attempts": 3, "retry_on": "transient"});
    app.subscribe(&key, json!({"name": "orders", "url": rx.url, "event_types": ["*"], "retry_policy": policy})).await;
    // Three delivered, one dead of a 400 (permanent under retry_on transient), one failing with a 503.
    for status in [200, 400, 200, 503, 200] {
        rx.answer(status);
    }
    let mut ids = Vec::new();
    for n in 0..5 {
        ids.push(
            app.publish(&key, &format!("e{n}"), "order.created").await["message_ids"][0].as_str().unwrap().to_string(),
        );
        app.advance_secs(1.0);
        app.deliver_fresh().await;
    }
    let dead = ids[1].clone();
    assert_eq!(app.message(&key, &dead).await["state"], "dead");
    let endpoint_id = app.message(&key, &dead).await["endpoint_id"].as_str().unwrap().to_string();
    let page = format!("/endpoints/{endpoint_id}");

    let mut alice = Browser::new(&app);
    alice.login("alice", "password-123").await;
    let (status, html, _) = alice.get(&page).await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("<dt>Attempts</dt><dd>5</dd>"), "{html}");
    assert!(html.contains("<dt>Success rate</dt><dd>60.0 %</dd>"), "{html}");
    assert!(html.contains("over 3 deliveries"), "{html}");
    assert!(html.contains("0 h ago: 3 succeeded, 2 failed"), "the hourly chart: {html}");
    assert!(html.contains("HTTP 400") && html.contains("HTTP 503"), "failures grouped by status: {html}");
    assert!(html.contains("<pre class=\"body\">ok</pre>"), "the latest response body: {html}");
    assert!(html.contains("Replay its 1 dead message"), "{html}");
    assert!(!html.contains(">Unlock<"), "customers do not unlock");

    let (status, location) =
        alice.submit(&page, "replay_failures", &[("id", &endpoint_id), ("kind", "teapot")], None).await;
    assert_eq!(status, 302);
    assert!(location.unwrap().contains("__err"), "an unknown kind is refused with a message");
    let (status, location) =
        alice.submit(&page, "replay_failures", &[("id", &endpoint_id), ("kind", "400")], None).await;
    let job = location.unwrap_or_default();
    assert!(status == 302 && job.starts_with("/replays/rpl_"), "the replay's page: {status} {job}");
    let html = alice.get(&job).await.1;
    assert!(html.contains(">done<") && html.contains("1 dead messages due again"), "{html}");
    assert!(html.contains("&quot;failure&quot;: &quot;400&quot;") || html.contains("\"failure\": \"400\""), "{html}");
    assert_eq!(app.message(&key, &dead).await["state"], "pending");

    let mut bob = Browser::new(&app);
    bob.login("bob", "password-123").await;
    let (status, html, _) = bob.get(&page).await;
    assert_eq!(status, 404);
    assert!(!html.contains(&rx.url), "another customer's endpoint shows nothing");
}

#[tokio::test]
async fn a_subscription_shows_its_schedule_and_the_form_previews_one_without_saving() {
    let app = TestApp::start().await;
    let (_, key) = customer_user(&app, "acme", "alice").await;
    let policy = json!({"kind": "exponential", "min_delay_secs": 85, "max_delay_secs": 85, "max_attempts": 3});
    let sub = app
        .subscribe(
            &key,
            json!({"name": "orders", "url": "http://127.0.0.1:9/o", "event_types": ["*"], "retry_policy": policy}),
        )
        .await;
    let mut alice = Browser::new(&app);
    alice.login("alice", "password-123").await;
    let html = alice.get(&format!("/subscriptions/{}", sub["id"].as_str().unwrap())).await.1;
    for cell in ["<td>at once</td>", "<td>+1 min 25 s</td>", "<td>+2 min 50 s</td>"] {
        assert!(html.contains(cell), "{cell}: {html}");
    }
    assert!(!html.contains("Preview only"));

    let custom = r#"{"kind":"schedule","delays_secs":[10,3600]}"#;
    let query = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs([("name", "draft"), ("url", "http://127.0.0.1:9/d"), ("retry_policy", custom), ("preview", "1")])
        .finish();
    let html = alice.get(&format!("/subscriptions?{query}")).await.1;
    assert!(html.contains("Preview only"), "{html}");
    assert!(html.contains("<td>+10 s</td>") && html.contains("<td>+1 h</td>"), "{html}");
    assert!(html.contains("value=\"draft\""), "the form keeps what was typed: {html}");
    let html = alice.get("/subscriptions?preview=1&retry_policy=%7B%22kind%22%3A%22nope%22%7D").await.1;
    assert!(html.contains("role=\"alert\"") && html.contains("retry_policy"), "a bad policy is named: {html}");
    let (_, list) = app.get("/api/v1/subscriptions", &key).await;
    assert_eq!(list["data"].as_array().unwrap().len(), 1, "a preview saves nothing");
}

#[tokio::test]
async fn the_event_archive_links_each_event_to_its_messages_and_replays_a_window() {
    let app = TestApp::start().await;
    let (acme, key) = customer_user(&app, "acme", "alice").await;
    customer_user(&app, "globex", "bob").await;
    let start = app.now_ms();
    app.publish(&key, "order-1234", "order.created").await;
    app.advance_secs(1.0);
    let later = app
        .subscribe(&key, json!({"name": "late-comer", "url": "http://127.0.0.1:9/l", "event_types": ["order.created"]}))
        .await;
    let later_id = later["id"].as_str().unwrap();

    let mut alice = Browser::new(&app);
    alice.login("alice", "password-123").await;
    let html = alice.get("/events").await.1;
    assert!(html.contains("order-1234") && html.contains("order.created"), "{html}");
    assert!(html.contains("<span class=\"muted\">none</span>"), "no subscription took it then: {html}");
    assert!(alice.get("/events?event_id=order-1234").await.1.contains("order-1234"));
    assert!(alice.get("/events?type=other").await.1.contains("No kept event matches"));

    let fields =
        [("since", rfc3339(start - 1000)), ("until", rfc3339(app.now_ms())), ("subscription_id", later_id.to_string())];
    let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (status, _) = alice.submit("/events", "replay_window", &fields, Some("http://evil.example")).await;
    assert_eq!(status, 403, "a cross-site replay is refused");
    let (status, location) = alice.submit("/events", "replay_window", &fields, None).await;
    let job = location.unwrap_or_default();
    assert!(status == 302 && job.starts_with("/replays/rpl_"), "the replay's page: {status} {job}");
    let html = alice.get(&job).await.1;
    assert!(html.contains(">done<") && html.contains("1 new messages for the window"), "{html}");
    assert!(!html.contains("Cancel the replay"), "a job that ended cannot be cancelled: {html}");
    let html = alice.get("/events").await.1;
    assert!(html.contains("/messages?event_id=order-1234\">1 message</a>"), "{html}");
    let html = alice.get("/messages?event_id=order-1234").await.1;
    assert!(html.contains(">late-comer</a>"), "{html}");

    let mut bob = Browser::new(&app);
    bob.login("bob", "password-123").await;
    assert!(!bob.get("/events").await.1.contains("order-1234"), "another customer's events are not listed");
    assert!(!bob.get("/events?event_id=order-1234").await.1.contains("order.created"));
    let (status, _) = bob.submit("/events", "replay_window", &fields, None).await;
    assert_eq!(status, 404, "another customer's subscription is not found");
    let (_, messages) = app.get("/api/v1/messages", &key).await;
    assert_eq!(messages["data"].as_array().unwrap().len(), 1, "and nothing is replayed to it");

    let mut admin = Browser::new(&app);
    admin.login("admin", "admin-password").await;
    let html = admin.get("/events").await.1;
    assert!(html.contains(">acme</td>"), "the admin sees whose event it is: {html}");
    assert!(html.contains(&format!("customer_id={acme}")), "its messages' link names the customer: {html}");
    assert!(
        admin.get("/events?event_id=order-1234").await.1.contains("customer_id"),
        "the admin is asked to name the customer"
    );
}

#[tokio::test]
async fn a_search_that_stops_at_its_budget_says_how_far_back_it_read() {
    let app = TestApp::start().await;
    let (customer, _) = customer_user(&app, "acme", "alice").await;
    crate::search::rare_under_common(&app, &customer).await;
    let mut alice = Browser::new(&app);
    alice.login("alice", "password-123").await;
    for page in ["/messages?event_type=rare", "/events?type=rare"] {
        let (status, html, _) = alice.get(page).await;
        assert_eq!(status, 200, "{html}");
        assert!(html.contains("searched the ") && html.contains("stopped there"), "{page}: {html}");
        assert!(html.contains("rel=\"next\""), "the next page searches on: {html}");
        assert!(!html.contains("No messages match") && !html.contains("No kept event matches"), "{html}");
    }
    let (_, html, _) = alice.get("/messages?event_type=common").await;
    assert!(!html.contains("stopped there"), "a page filled within the budget: {html}");
}

#[tokio::test]
async fn the_subscription_form_saves_a_filter_and_tests_it_on_the_latest_events() {
    let app = TestApp::start().await;
    let (_, key) = customer_user(&app, "acme", "alice").await;
    for (id, total) in [("small", 5), ("big", 500)] {
        let event = json!({"specversion": "1.0", "id": id, "source": "/shop", "type": "order.created", "data": {"total": total}});
        assert_eq!(app.post("/api/v1/events", &key, event).await.0, 202);
    }
    let mut alice = Browser::new(&app);
    alice.login("alice", "password-123").await;
    let form = [
        ("name", "big orders"),
        ("url", "http://127.0.0.1:9/o"),
        ("event_types", "order.created"),
        ("retry_policy", "event-grid"),
        ("timeout_ms", "30000"),
        ("content_mode", "structured"),
        ("filter", "message.data.total > 100"),
    ];
    let (status, location) = alice.submit("/subscriptions", "create_subscription", &form, None).await;
    assert_eq!(status, 302, "{location:?}");
    let page = location.unwrap().replace("?created=1", "");
    let html = alice.get(&page).await.1;
    assert!(html.contains("<code>message.data.total &gt; 100</code>"), "the page shows the filter: {html}");

    let query = |filter: &str| {
        let fields = [("filter_test", "1"), ("filter", filter), ("event_types", "order.created")];
        format!("{page}?{}", url::form_urlencoded::Serializer::new(String::new()).extend_pairs(fields).finish())
    };
    let html = alice.get(&query("message.data.total > 100")).await.1;
    assert!(html.contains("The filter matches 1 of the latest 2 kept events"), "{html}");
    let html = alice.get(&query("message.data.missing")).await.1;
    assert!(html.contains("no: the filter failed"), "a run-time error shows on its event: {html}");
    let html = alice.get(&query("1 + 2")).await.1;
    assert!(html.contains("role=\"alert\"") && html.contains("boolean"), "a bad filter is named: {html}");

    let id = page.trim_start_matches("/subscriptions/");
    let mut cleared = form.to_vec();
    cleared[6] = ("filter", "");
    cleared.push(("id", id));
    let (status, _) = alice.submit(&page, "update_subscription", &cleared, None).await;
    assert_eq!(status, 302);
    let (_, sub) = app.get(&format!("/api/v1/subscriptions/{id}"), &key).await;
    assert_eq!(sub["filter"], serde_json::Value::Null, "an empty filter field removes it");
}

#[tokio::test]
async fn the_event_types_page_adds_changes_and_removes_types() {
    let app = TestApp::start().await;
    let (_, key) = customer_user(&app, "acme", "alice").await;
    let mut alice = Browser::new(&app);
    alice.login("alice", "password-123").await;
    let schema = r#"{"type": "object", "required": ["total"]}"#;
    let form =
        [("name", "order.created"), ("description", "An order"), ("schema", schema), ("example", r#"{"total": 3}"#)];
    let (status, location) = alice.submit("/event-types", "create_event_type", &form, None).await;
    assert_eq!((status, location.as_deref()), (302, Some("/event-types?created=order.created")));
    let html = alice.get("/event-types").await.1;
    assert!(html.contains("order.created") && html.contains("\"required\""), "{html}");
    assert!(alice.get("/subscriptions").await.1.contains("<option value=\"order.created\">"), "offered in the form");

    let bad = [("name", "order.paid"), ("schema", r#"{"type": 5}"#)];
    assert_eq!(alice.submit("/event-types", "create_event_type", &bad, None).await.0, 302);
    let (_, listed) = app.get("/api/v1/event-types", &key).await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 1, "a bad schema adds nothing: {listed}");

    let html = alice.get("/event-types?edit=order.created").await.1;
    assert!(html.contains("Change order.created") && html.contains("An order"), "{html}");
    let change = [("name", "order.created"), ("description", ""), ("schema", schema), ("example", r#"{"total": 4}"#)];
    let (status, _) = alice.submit("/event-types?edit=order.created", "update_event_type", &change, None).await;
    assert_eq!(status, 302);
    let (_, changed) = app.get("/api/v1/event-types/order.created", &key).await;
    assert_eq!((&changed["description"], &changed["example"]), (&serde_json::Value::Null, &json!({"total": 4})));

    let (status, _) = alice.submit("/event-types", "delete_event_type", &[("name", "order.created")], None).await;
    assert_eq!(status, 302);
    assert_eq!(app.get("/api/v1/event-types/order.created", &key).await.0, 404);
}

#[tokio::test]
async fn the_subscription_page_sends_a_catalog_example_to_it_alone() {
    let app = TestApp::start().await;
    let (_, key) = customer_user(&app, "acme", "alice").await;
    let sub = app.subscribe(&key, json!({"name": "s", "url": "http://127.0.0.1:9/s", "event_types": ["*"]})).await;
    let other = app.subscribe(&key, json!({"name": "o", "url": "http://127.0.0.1:9/o", "event_types": ["*"]})).await;
    let example = json!({"order": 7});
    app.post("/api/v1/event-types", &key, json!({"name": "order.created", "example": example})).await;
    let mut alice = Browser::new(&app);
    alice.login("alice", "password-123").await;
    let page = format!("/subscriptions/{}", sub["id"].as_str().unwrap());
    assert!(alice.get(&page).await.1.contains("<option value=\"order.created\">"), "the example is offered");

    let form = [("id", sub["id"].as_str().unwrap()), ("event_type", "order.created")];
    let (status, location) = alice.submit(&page, "send_example", &form, None).await;
    assert_eq!(status, 302);
    let message_id = location.unwrap().trim_start_matches("/messages/").trim_end_matches("?sent=1").to_string();
    let message = app.message(&key, &message_id).await;
    assert_eq!((&message["subscription_id"], &message["event"]["data"]), (&sub["id"], &example), "{message}");
    let (_, theirs) =
        app.get(&format!("/api/v1/messages?subscription_id={}", other["id"].as_str().unwrap()), &key).await;
    assert!(theirs["data"].as_array().unwrap().is_empty(), "the other subscription got nothing");
}

#[tokio::test]
async fn the_delivery_form_sets_headers_credentials_and_signature_without_showing_a_secret() {
    let app = TestApp::start().await;
    let (_, key) = customer_user(&app, "acme", "alice").await;
    let (_, bob_key) = customer_user(&app, "globex", "bob").await;
    let new = json!({"name": "s", "url": "http://127.0.0.1:9/o", "event_types": ["*"]});
    let sub = app.subscribe(&key, new.clone()).await;
    let bobs = app.subscribe(&bob_key, new).await;
    let id = sub["id"].as_str().unwrap().to_string();
    let page = format!("/subscriptions/{id}");
    let mut alice = Browser::new(&app);
    alice.login("alice", "password-123").await;
    let form = [
        ("id", id.as_str()),
        ("headers", "X-Api-Key: key-sekret\nX-Tenant: t1"),
        ("signature", "v1a"),
        ("auth_kind", "bearer"),
        ("auth_token", "tok-sekret"),
    ];
    let (status, location) = alice.submit(&page, "update_delivery", &form, None).await;
    assert_eq!((status, location.as_deref()), (302, Some(format!("{page}?saved=1#delivery").as_str())));
    let (_, sub) = app.get(&format!("/api/v1/subscriptions/{id}"), &key).await;
    assert_eq!(
        (sub["header_names"].clone(), sub["auth"]["kind"].as_str()),
        (json!(["X-Api-Key", "X-Tenant"]), Some("bearer"))
    );
    let html = alice.get(&page).await.1;
    assert!(html.contains(sub["public_key"].as_str().unwrap()), "the page shows the public key: {html}");
    assert!(html.contains("X-Api-Key, X-Tenant") && html.contains(">bearer<"), "{html}");
    assert!(!html.contains("tok-sekret"), "a credential is never shown back: {html}");

    // "keep" leaves the credentials, "none" removes them; an empty headers field removes them too.
    let keep = [("id", id.as_str()), ("headers", ""), ("signature", "v1a"), ("auth_kind", "keep")];
    assert_eq!(alice.submit(&page, "update_delivery", &keep, None).await.0, 302);
    let (_, kept) = app.get(&format!("/api/v1/subscriptions/{id}"), &key).await;
    assert_eq!((kept["header_names"].clone(), kept["auth"]["kind"].as_str()), (json!([]), Some("bearer")));
    let bad = [("id", id.as_str()), ("headers", "Authorization: x"), ("auth_kind", "none")];
    let (_, location) = alice.submit(&page, "update_delivery", &bad, None).await;
    assert!(location.unwrap().contains("__err"), "a reserved header is refused");
    let none = [("id", id.as_str()), ("auth_kind", "none")];
    assert_eq!(alice.submit(&page, "update_delivery", &none, None).await.0, 302);
    assert_eq!(app.get(&format!("/api/v1/subscriptions/{id}"), &key).await.1["auth"], json!(null));

    let mut bob = Browser::new(&app);
    bob.login("bob", "password-123").await;
    let bobs_page = format!("/subscriptions/{}", bobs["id"].as_str().unwrap());
    let (_, location) = bob.submit(&bobs_page, "update_delivery", &form, None).await;
    assert!(location.unwrap().contains("__err"), "another customer's subscription is not changed");
    assert_eq!(app.get(&format!("/api/v1/subscriptions/{id}"), &key).await.1["header_names"], json!([]));
}

#[tokio::test]
async fn a_messages_attempts_are_grouped_by_series_and_the_log_keeps_ids_short_and_dates_whole() {
    let app = TestApp::start().await;
    let (_, key) = customer_user(&app, "acme", "alice").await;
    let once = json!({"kind": "exponential", "min_delay_secs": 1, "max_delay_secs": 1, "max_attempts": 1});
    let url = "http://127.0.0.1:9/refused-path";
    let sub = app.subscribe(&key, json!({"name": "s", "url": url, "event_types": ["*"], "retry_policy": once})).await;
    let msg = app.publish(&key, "e1", "order.created").await["message_ids"][0].as_str().unwrap().to_string();
    app.deliver_fresh().await;
    for _ in 0..2 {
        assert_eq!(app.message(&key, &msg).await["state"], "dead");
        let (status, body) = app.post(&format!("/api/v1/messages/{msg}/replay"), &key, json!({})).await;
        assert_eq!(status, 200, "{body}");
        app.deliver_fresh().await;
        app.deliver_retries().await;
    }
    let (_, detail) = app.get(&format!("/api/v1/messages/{msg}"), &key).await;
    let series: Vec<u64> =
        detail["attempts"].as_array().unwrap().iter().map(|a| a["series"].as_u64().unwrap()).collect();
    assert_eq!(series, [0, 1, 2], "{detail}");

    let mut alice = Browser::new(&app);
    alice.login("alice", "password-123").await;
    let page = alice.get(&format!("/messages/{msg}")).await.1;
    let headings: Vec<usize> = ["First delivery · 1 attempt", "Replay 1 · 1 attempt", "Replay 2 · 1 attempt"]
        .iter()
        .map(|h| page.find(h).unwrap())
        .collect();
    assert!(headings.windows(2).all(|w| w[0] < w[1]), "the series in order: {page}");
    let sub_link = format!("href=\"/subscriptions/{}\">s</a>", sub["id"].as_str().unwrap());
    assert!(page.contains(&sub_link) && page.contains("refused-<wbr"), "names, not ids: {page}");

    let log = alice.get("/messages").await.1;
    let short = format!("msg_…{}", &msg[msg.len() - 8..]);
    assert!(
        log.contains(&short) && log.contains(&format!("title=\"{msg}\"")),
        "a short id, the whole in its title: {log}"
    );
    assert!(log.contains("\u{a0}UTC"), "a date keeps to one line: {log}");
    assert!(log.contains("refused-<wbr"), "a URL wraps after its separators: {log}");
}
