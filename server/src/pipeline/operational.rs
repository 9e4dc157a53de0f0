//! Writing operational events (`domain::operational`): each is written in
//! the transaction of the change it reports, as an event of the customer with a
//! pending message for every subscription that names its type. So it is stored,
//! signed, retried and listed like any event, is never lost when the change
//! commits, and never sent for a change that rolled back. An event that no
//! subscription names is not stored.
//!
//! The caller sends the returned [`Announced`] to [`Announced::wake`] after
//! its commit; other processes are notified by the commit itself.

use domain::ids::{CustomerId, EndpointId, EventId, MessageId};
use foldhash::{HashMap, HashMapExt};
use sea_orm::{ConnectionTrait, DbErr};

use domain::operational::{self, EndpointReport, Report};
use domain::policy::DeadReason;

use domain::event::CloudEvent;
use domain::filter::Message;

use super::Pipeline;
use super::routes::StoredFilter;
use crate::ids;
use crate::store::entities::{event, message, subscription};
use crate::store::messages::{PAUSED, message_for};
use crate::store::subscriptions::{self, event_types, policy_of};
use crate::store::{bulk, messages};
use crate::telemetry;

/// The endpoints that operational events were stored for, to wake after the
/// commit, and the deaths to count then (`herald_dead_messages_total`): see
/// [`Due`](super::wakeup::Due).
#[derive(Debug, Default)]
#[must_use = "the lanes learn of the new messages only from Pipeline::commit_and_wake"]
pub struct Announced {
    pub(super) endpoints: Vec<EndpointId>,
    /// By reason, in the order of `DeadReason::ALL`.
    deaths: [u64; DeadReason::ALL.len()],
}

impl Announced {
    /// Counts the deaths, once committed; returns the endpoints to wake.
    pub(super) fn count_deaths(self) -> Vec<EndpointId> {
        for (reason, n) in DeadReason::ALL.iter().zip(self.deaths) {
            if n > 0 {
                telemetry::dead_messages(*reason).increment(n);
            }
        }
        self.endpoints
    }

    pub fn merge(&mut self, other: Announced) {
        self.endpoints.extend(other.endpoints);
        for (mine, theirs) in self.deaths.iter_mut().zip(other.deaths) {
            *mine += theirs;
        }
    }
}

/// The deaths among `died`, by reason (each model carries its new `dead_reason`).
fn deaths(died: &[&message::Model]) -> [u64; DeadReason::ALL.len()] {
    let mut counts = [0; DeadReason::ALL.len()];
    for m in died {
        if let Some(i) = DeadReason::ALL.iter().position(|r| Some(r.as_str()) == m.dead_reason.as_deref()) {
            counts[i] += 1;
        }
    }
    counts
}

/// Reports, inside `txn`, that these messages have become dead (each model
/// carrying its new `dead_reason`), and counts them at `wake`. Messages that
/// carried Herald's own events are counted, not reported.
pub async fn report_dead<'a>(
    pipeline: &Pipeline,
    txn: &impl ConnectionTrait,
    died: impl IntoIterator<Item = &'a message::Model>,
) -> Result<Announced, DbErr> {
    let died: Vec<&message::Model> = died.into_iter().collect();
    let mut announced = announce_dead(pipeline, txn, &died).await?;
    announced.deaths = deaths(&died);
    Ok(announced)
}

async fn announce_dead(
    pipeline: &Pipeline,
    txn: &impl ConnectionTrait,
    died: &[&message::Model],
) -> Result<Announced, DbErr> {
    let died: Vec<&message::Model> =
        died.iter().copied().filter(|m| !operational::is_herald_type(&m.event_type)).collect();
    if died.is_empty() {
        return Ok(Announced::default());
    }
    let mut customers: Vec<CustomerId> = died.iter().map(|m| m.customer_id.clone()).collect();
    customers.sort();
    customers.dedup();
    let listeners = subscriptions::naming_types(txn, customers, &[operational::MESSAGE_DEAD]).await?;
    if listeners.is_empty() {
        return Ok(Announced::default());
    }
    let ids: Vec<MessageId> = died
        .iter()
        .filter(|m| listeners.iter().any(|s| s.customer_id == m.customer_id))
        .map(|m| m.id.clone())
        .collect();
    let reports = messages::dead_reports(txn, &ids).await?;
    write(pipeline, txn, &listeners, reports.into_iter().map(|(customer, r)| (customer, Report::Dead(r)))).await
}

/// Reports, inside `txn`, endpoints' changes of state, each with its customer's id.
pub async fn report_endpoints(
    pipeline: &Pipeline,
    txn: &impl ConnectionTrait,
    reports: Vec<(CustomerId, EndpointReport)>,
) -> Result<Announced, DbErr> {
    report(pipeline, txn, reports.into_iter().map(|(customer, r)| (customer, Report::Endpoint(r))).collect()).await
}

/// Reports, inside `txn`, what happened to a customer (an endpoint's change, a subscription's pause).
pub async fn report(
    pipeline: &Pipeline,
    txn: &impl ConnectionTrait,
    reports: Vec<(CustomerId, Report)>,
) -> Result<Announced, DbErr> {
    if reports.is_empty() {
        return Ok(Announced::default());
    }
    let mut customers: Vec<CustomerId> = reports.iter().map(|(customer, _)| customer.clone()).collect();
    customers.sort();
    customers.dedup();
    let mut types: Vec<&str> = reports.iter().map(|(_, r)| r.event_type()).collect();
    types.sort();
    types.dedup();
    let listeners = subscriptions::naming_types(txn, customers, &types).await?;
    write(pipeline, txn, &listeners, reports.into_iter()).await
}

/// A subscription that names an operational event's type, with what it takes read once.
struct Listener<'a> {
    sub: &'a subscription::Model,
    types: Vec<String>,
    filter: Option<StoredFilter>,
}

/// Stores each report that a listener takes (its types name it and its filter, if any, passes it),
/// with one message per listener.
async fn write(
    pipeline: &Pipeline,
    txn: &impl ConnectionTrait,
    listeners: &[subscription::Model],
    reports: impl Iterator<Item = (CustomerId, Report)>,
) -> Result<Announced, DbErr> {
    let mut of_customer: HashMap<&CustomerId, Vec<Listener>> = HashMap::new();
    for sub in listeners {
        let listener = Listener {
            sub,
            types: event_types(&sub.event_types),
            filter: sub.filter.as_deref().map(StoredFilter::compile),
        };
        of_customer.entry(&sub.customer_id).or_default().push(listener);
    }
    let now = pipeline.now_ms();
    let time = crate::clock::to_utc(now).to_rfc3339();
    let (mut events, mut new_messages) = (Vec::new(), Vec::new());
    for (customer_id, report) in reports {
        let event_type = report.event_type();
        let id: EventId = ids::new();
        let event = CloudEvent::from_stored(report.cloud_event(&id, &time)).expect("an operational event is an object");
        let mut message = None;
        let takers = of_customer.get(&customer_id).into_iter().flatten().filter(|listener| {
            listener.types.iter().any(|t| operational::type_matches(t, event_type))
                && report.about_endpoint() != Some(listener.sub.endpoint_id.as_str())
                && listener
                    .filter
                    .as_ref()
                    .is_none_or(|f| f.matches(message.get_or_insert_with(|| Message::of(&event))))
        });
        let mut row = event::Model {
            id: id.clone(),
            customer_id,
            source: operational::SOURCE.into(),
            ce_id: id.to_string(),
            event_type: event_type.into(),
            payload: event.stored_text(),
            created_at: now,
            message_ids: String::new(),
        };
        for Listener { sub, .. } in takers {
            let msg = message_for(&row, sub, policy_of(sub).ttl_secs as i64 * 1000, now);
            row.add_message_id(&msg.id);
            new_messages.push(msg);
        }
        if !row.message_ids.is_empty() {
            events.push(row);
        }
    }
    if events.is_empty() {
        return Ok(Announced::default());
    }
    bulk::insert(txn, &events).await?;
    messages::insert_many(txn, &new_messages).await?;
    let mut endpoints: Vec<EndpointId> =
        new_messages.into_iter().filter(|m| m.next_attempt_at != Some(PAUSED)).map(|m| m.endpoint_id).collect();
    endpoints.sort();
    endpoints.dedup();
    Ok(Announced { endpoints, ..Announced::default() })
}
