//! The history written through the store's bulk insert: rows spread over the last 30 days, ids
//! in time order.

use domain::ids::{CustomerId, EventId, MessageId, PrefixedId};
use domain::states::{MessageState, Outcome};
use herald::ids::new_id;
use herald::store;
use herald::store::entities::{attempt, event, message};
use sea_orm::{DatabaseConnection, TransactionTrait};
use serde_json::json;

use super::{DAY_MS, DAYS, DEAD_EVERY, EVENT_TYPES, LOAD_BATCH, Loaded};
use crate::Result;

/// Writes `count` messages with their events and attempts: nine in ten for `main`, the rest
/// spread over the others, times spread evenly over the last 30 days, ids in time order.
pub(super) async fn load(db: &DatabaseConnection, customers: &[Loaded], main: &CustomerId, count: usize) -> Result<()> {
    let now = chrono::Utc::now().timestamp_millis();
    let layout = Layout::new(customers, main, now, count);
    let mut done = 0;
    while done < count {
        let n = LOAD_BATCH.min(count - done);
        let batch = Batch::build(&layout, done, n);
        batch.write(db, now).await?;
        done += n;
        if done % 100_000 < LOAD_BATCH {
            eprintln!("  {done} of {count}");
        }
    }
    Ok(())
}

/// Where the loaded rows fall: each row's time, and the customer it belongs to.
struct Layout<'a> {
    customers: &'a [Loaded],
    main_index: usize,
    others: Vec<usize>,
    first: i64,
    step: f64,
}

impl<'a> Layout<'a> {
    /// `count` rows over the 30 days before `now`, with `main` among `customers`.
    fn new(customers: &'a [Loaded], main: &CustomerId, now: i64, count: usize) -> Self {
        let first = now - DAYS * DAY_MS;
        let step = (DAYS * DAY_MS) as f64 / count.max(1) as f64;
        let main_index = customers.iter().position(|c| c.id == *main).expect("main is among them");
        let others: Vec<usize> = (0..customers.len()).filter(|&i| i != main_index).collect();
        Layout { customers, main_index, others, first, step }
    }

    /// The time of row `i`.
    fn at(&self, i: usize) -> i64 {
        self.first + (i as f64 * self.step) as i64
    }

    /// The customer of row `i`: every tenth goes to the others in turn, the rest to the main one.
    fn customer(&self, i: usize) -> &'a Loaded {
        if i.is_multiple_of(10) && !self.others.is_empty() {
            &self.customers[self.others[(i / 10) % self.others.len()]]
        } else {
            &self.customers[self.main_index]
        }
    }
}

/// The rows written in one transaction.
struct Batch {
    events: Vec<event::Model>,
    messages: Vec<message::Model>,
    attempts: Vec<attempt::Model>,
}

impl Batch {
    /// Rows `done..done + n` of the layout.
    fn build(layout: &Layout<'_>, done: usize, n: usize) -> Self {
        let mut batch =
            Batch { events: Vec::with_capacity(n), messages: Vec::with_capacity(n), attempts: Vec::with_capacity(n) };
        for i in done..done + n {
            let (event, message, attempt) = history_row(i, layout.at(i), layout.customer(i));
            batch.events.push(event);
            batch.messages.push(message);
            batch.attempts.push(attempt);
        }
        batch
    }

    /// Inserts the rows and counts their attempts, in one transaction.
    async fn write(&self, db: &DatabaseConnection, now: i64) -> Result<()> {
        // Counted as the engine counts them: every message, and the attempts of the last day.
        let since = (now / 60_000 - store::counts::ATTEMPT_MINUTES_KEPT) * 60_000;
        let recent = self.attempts.iter().filter(|a| a.started_at >= since).map(|a| store::counts::Attempted {
            customer_id: &a.customer_id,
            started_at: a.started_at,
            succeeded: a.outcome == Outcome::Success,
        });
        let txn = db.begin().await?;
        store::bulk::insert(&txn, &self.events).await?;
        store::messages::insert_many(&txn, &self.messages).await?;
        store::bulk::insert(&txn, &self.attempts).await?;
        store::counts::add_attempts(&txn, 0, recent).await?;
        txn.commit().await?;
        Ok(())
    }
}

/// Row `i` of the history at `at`: an event, its one message, and that message's one attempt,
/// delivered, or (one in `DEAD_EVERY`) refused and dead.
fn history_row(i: usize, at: i64, customer: &Loaded) -> (event::Model, message::Model, attempt::Model) {
    let (sub, endpoint_id) = &customer.routes[i % customer.routes.len()];
    let dead = i.is_multiple_of(DEAD_EVERY);
    let event_id: EventId = id_at(at);
    let message_id: MessageId = id_at(at);
    let types: Vec<String> = serde_json::from_str(&sub.event_types).unwrap_or_default();
    let event_type = types.into_iter().next().unwrap_or_else(|| EVENT_TYPES[0].to_string());
    let payload = json!({"specversion": "1.0", "id": format!("h-{i}"), "source": "/history",
        "type": event_type, "data": {"order": i, "amount": "99.90"}})
    .to_string();
    let event = event::Model {
        id: event_id.clone(),
        customer_id: customer.id.clone(),
        source: "/history".into(),
        ce_id: format!("h-{i}"),
        event_type: event_type.clone(),
        payload,
        created_at: at,
        message_ids: message_id.to_string(),
    };
    let status = if dead { 400 } else { 200 };
    let message = message::Model {
        id: message_id.clone(),
        customer_id: customer.id.clone(),
        event_id,
        subscription_id: sub.id.clone(),
        endpoint_id: endpoint_id.clone(),
        event_type,
        state: if dead { MessageState::Dead } else { MessageState::Delivered },
        dead_reason: dead.then(|| "non_retryable".into()),
        attempt_count: 1,
        attempt_base: 0,
        ttl_started_at: at,
        expires_at: at + DAY_MS,
        next_attempt_at: None,
        lease_token: None,
        created_at: at,
        updated_at: at + 20,
        delivered_at: (!dead).then_some(at + 20),
        last_status: Some(status),
        first_failed_at: dead.then_some(at),
    };
    let attempt = attempt::Model {
        message_id,
        customer_id: customer.id.clone(),
        number: 1,
        started_at: at + 5,
        duration_ms: 15,
        status_code: Some(status),
        error_kind: None,
        error_detail: None,
        outcome: if dead { Outcome::Permanent } else { Outcome::Success },
        request_headers: "{}".into(),
        response_headers: "{}".into(),
        response_body: Some(if dead { "bad request" } else { "ok" }.into()),
        trace_id: None,
    };
    (event, message, attempt)
}

/// A prefixed ULID made at `ms`, so the loaded ids sort by their time as published ones do.
fn id_at<Id: PrefixedId>(ms: i64) -> Id {
    let prefix = Id::PREFIX;
    let fresh = new_id(prefix);
    let random = ulid::Ulid::from_string(&fresh[prefix.len() + 1..]).map(|u| u.random()).unwrap_or_default();
    Id::from(format!("{prefix}_{}", ulid::Ulid::from_parts(ms as u64, random)))
}
