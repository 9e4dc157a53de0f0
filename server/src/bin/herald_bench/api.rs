//! The few REST calls that set a run up: a customer, its key, subscriptions.

use serde_json::{Value, json};

use crate::Result;

/// A customer's view of the herald under test.
pub struct Api {
    pub client: reqwest::Client,
    pub base: String,
    pub token: String,
    /// The CEL filter every new subscription gets (`--filter`).
    pub filter: Option<String>,
    /// Fields every new subscription gets besides (`--subscription`).
    pub extra: serde_json::Map<String, Value>,
}

async fn call(req: reqwest::RequestBuilder, what: &str) -> Result<Value> {
    let resp = req.send().await?;
    let status = resp.status();
    let text = resp.text().await?;
    if !status.is_success() {
        return Err(format!("{what}: {status}: {text}").into());
    }
    Ok(serde_json::from_str(&text)?)
}

fn string(v: &Value, key: &str, what: &str) -> Result<String> {
    v[key].as_str().map(str::to_owned).ok_or_else(|| format!("{what}: no `{key}` in {v}").into())
}

impl Api {
    /// Creates a customer and an API key with the admin token.
    pub async fn new_customer(client: reqwest::Client, base: &str, admin_token: &str) -> Result<Api> {
        let customer = call(
            client.post(format!("{base}/api/v1/customers")).bearer_auth(admin_token).json(&json!({"name": "bench"})),
            "create customer",
        )
        .await?;
        let id = string(&customer, "id", "create customer")?;
        let key = call(
            client
                .post(format!("{base}/api/v1/customers/{id}/api-keys"))
                .bearer_auth(admin_token)
                .json(&json!({"name": "bench"})),
            "create API key",
        )
        .await?;
        Ok(Api {
            client,
            base: base.to_owned(),
            token: string(&key, "token", "create API key")?,
            filter: None,
            extra: Default::default(),
        })
    }

    /// A subscription to one event type, retried 1 s, 2 s, 4 s… up to 60 s apart.
    pub async fn subscribe(&self, url: &str, event_type: &str, timeout_ms: Option<u32>) -> Result<String> {
        self.subscribe_tried(url, event_type, timeout_ms, 20).await
    }

    /// A subscription to one event type paced at `per_sec` attempts a second.
    pub async fn subscribe_paced(&self, url: &str, event_type: &str, per_sec: u32) -> Result<String> {
        let body =
            json!({"name": "bench paced", "url": url, "event_types": [event_type], "rate_limit_per_sec": per_sec});
        let req = self.client.post(format!("{}/api/v1/subscriptions", self.base)).bearer_auth(&self.token).json(&body);
        string(&call(req, "create paced subscription").await?, "id", "create paced subscription")
    }

    /// A subscription to one event type whose messages die after `max_attempts` failed attempts.
    pub async fn subscribe_tried(
        &self,
        url: &str,
        event_type: &str,
        timeout_ms: Option<u32>,
        max_attempts: u32,
    ) -> Result<String> {
        let policy =
            json!({"kind": "exponential", "min_delay_secs": 1, "max_delay_secs": 60, "max_attempts": max_attempts});
        let mut body = json!({
            "name": format!("bench {event_type}"),
            "url": url,
            "event_types": [event_type],
            "retry_policy": policy,
        });
        if let Some(ms) = timeout_ms {
            body["timeout_ms"] = json!(ms);
        }
        if let Some(filter) = &self.filter {
            body["filter"] = json!(filter);
        }
        body.as_object_mut().expect("an object").extend(self.extra.clone());
        let req = self.client.post(format!("{}/api/v1/subscriptions", self.base)).bearer_auth(&self.token).json(&body);
        string(&call(req, "create subscription").await?, "id", "create subscription")
    }

    /// Adds the event type to the customer's catalog with a schema of ten properties that the bench's
    /// events keep (`--schema`): every published event's data is checked against it.
    pub async fn catalog_with_schema(&self, event_type: &str) -> Result<()> {
        let optional = ["customer", "currency", "country", "channel", "coupon", "notes", "tags", "total"];
        let mut properties = serde_json::Map::new();
        properties.insert("seq".into(), json!({"type": "integer", "minimum": 0}));
        properties.insert("text".into(), json!({"type": "string", "maxLength": 10000}));
        for (i, name) in optional.iter().enumerate() {
            let kind = if i % 2 == 0 { json!({"type": "string"}) } else { json!({"type": "number"}) };
            properties.insert((*name).into(), kind);
        }
        let schema = json!({"type": "object", "required": ["seq", "text"], "properties": properties});
        let body = json!({"name": event_type, "schema": schema});
        let req = self.client.post(format!("{}/api/v1/event-types", self.base)).bearer_auth(&self.token).json(&body);
        call(req, "create event type").await.map(drop)
    }

    /// A paused subscription to one event type: its messages are held, never sent.
    pub async fn subscribe_paused(&self, url: &str, event_type: &str) -> Result<String> {
        let body = json!({"name": "bench paused", "url": url, "event_types": [event_type], "status": "paused"});
        let req = self.client.post(format!("{}/api/v1/subscriptions", self.base)).bearer_auth(&self.token).json(&body);
        string(&call(req, "create paused subscription").await?, "id", "create paused subscription")
    }

    /// Starts replaying every kept event of the last day to the subscription; the job's id.
    pub async fn replay_window(&self, subscription_id: &str) -> Result<String> {
        let now = chrono::Utc::now();
        let body = json!({
            "subscription_id": subscription_id,
            "since": (now - chrono::Duration::days(1)).to_rfc3339(),
            "until": (now + chrono::Duration::minutes(10)).to_rfc3339(),
        });
        let req = self.client.post(format!("{}/api/v1/events/replay", self.base)).bearer_auth(&self.token).json(&body);
        string(&call(req, "start a replay").await?, "replay_id", "start a replay")
    }

    /// A replay job as `GET /api/v1/replays/{id}` answers it.
    pub async fn replay_job(&self, id: &str) -> Result<serde_json::Value> {
        let req = self.client.get(format!("{}/api/v1/replays/{id}", self.base)).bearer_auth(&self.token);
        call(req, "read a replay").await
    }

    /// Points a subscription (and its waiting messages) at another URL.
    pub async fn move_subscription(&self, id: &str, url: &str) -> Result<()> {
        let req = self
            .client
            .patch(format!("{}/api/v1/subscriptions/{id}", self.base))
            .bearer_auth(&self.token)
            .json(&json!({"url": url}));
        call(req, "update subscription").await.map(drop)
    }
}
