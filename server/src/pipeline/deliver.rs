//! One claimed or handed-over message, from its circuit's gate to its
//! recorded outcome: the gate, the request built and signed, the send, the
//! decision, and the record.

use std::sync::Arc;

use domain::breaker::Gate;
use domain::health::attempt_class;
use domain::policy::{DeadReason, RetryPolicy};
use domain::states::{EndpointState, ErrorKind, MessageState, Outcome};
use domain::trace::{EventTrace, MessageTrace, span_id};
use reqwest::header::AUTHORIZATION;
use sea_orm::TransactionTrait;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::Pipeline;
use super::decide::{decide, unrenderable};
use super::handoff::StartPermit;
use super::job::Job;
use super::operational::{Announced, report_dead};
use super::recorder::{AttemptRecord, Recorder};
use super::send::credentials::{Authorization, Credentials};
use super::send::destinations::{Destination, Destinations};
use super::send::http::{self, Outgoing, Received, headers_json, send};
use super::send::oauth::OAuthClient;
use super::send::request;
use super::spans::AttemptSpan;
use crate::store::endpoints::{gate_of, take_probe};
use crate::store::entities::{endpoint, event, message, subscription};
use crate::store::messages::{self, Finish, Lane};
use crate::store::subscriptions::policy_of;
use crate::{ids, telemetry};

/// The error of the attempt that ends a message whose event cannot be rendered.
const UNRENDERABLE: &str = "the stored event could not be rendered as a request";

/// A request as sent, and what came back.
struct Sent {
    request_headers: String,
    received: Received,
    /// Whether the event could be rendered as a request at all.
    rendered: bool,
    trace: MessageTrace,
    span: [u8; 8],
}

/// Why a message goes back without an attempt.
enum Release {
    Dead(DeadReason),
    DeferUntil(i64),
    Hold,
}

/// What both lanes send with: one HTTP client, the receivers' URLs and
/// secrets as last read, and the recorder.
pub struct Deliverer {
    pipeline: Pipeline,
    client: reqwest::Client,
    /// Attempts sent and waiting for their record to be committed.
    unrecorded: Arc<Semaphore>,
    recorder: Recorder,
    destinations: Destinations,
    credentials: Credentials,
}

impl Deliverer {
    pub fn new(pipeline: Pipeline) -> Deliverer {
        let delivery = &pipeline.settings.delivery;
        let allow_private = pipeline.settings.allow_private_targets;
        let client = http::client(allow_private, delivery.fresh_concurrency + delivery.retry_concurrency);
        // As many as both lanes send at once, so that a crash repeats at most twice the
        // lanes' concurrency, and the memory they hold is bounded while the database falls
        // behind the receivers.
        let unrecorded = Arc::new(Semaphore::new(delivery.fresh_concurrency + delivery.retry_concurrency));
        let recorder = Recorder::spawn(pipeline.clone());
        let destinations = Destinations::new(allow_private);
        let credentials = Credentials::new(pipeline.sealer.clone());
        Deliverer { pipeline, client, unrecorded, recorder, destinations, credentials }
    }

    /// Sends one message and records the attempt. The endpoint's permit and the
    /// lane's worker are freed as soon as the receiver has answered, so that
    /// the next message does not wait for this one's record to be committed.
    pub async fn deliver(&self, job: Job, permit: StartPermit) {
        let Job { message, subscription, event, endpoint } = job;
        let now = self.pipeline.now_ms();
        let Some((sub, event, policy)) = self.admit(&message, &subscription, &event, endpoint.as_deref(), now).await
        else {
            return;
        };
        let sent = self.send_one(sub, event, &message, now).await;
        let _unrecorded = self.free_worker(permit).await;
        let decision = if sent.rendered {
            decide(&policy, &message, &sent.received, self.pipeline.now_ms(), rand::random::<f64>() * 2.0 - 1.0)
        } else {
            unrenderable(&message, self.pipeline.now_ms())
        };
        self.observe(&message, sub, event, &sent, decision.outcome, now);
        let retry_at = decision.finish.next_attempt_at.filter(|_| decision.finish.state == MessageState::Pending);
        let Sent { request_headers, received, rendered, trace, .. } = sent;
        let trace_id = rendered.then(|| trace.trace_id_hex());
        let attempt = AttemptRecord {
            message,
            started_at: now,
            request_headers,
            trace_id,
            received,
            decision,
            charged: rendered,
        };
        self.record(attempt, retry_at).await;
    }

    /// The message's subscription, event and policy when it may be sent now; otherwise it is
    /// released (dead, deferred or held) and `None`.
    async fn admit<'a>(
        &self,
        msg: &message::Model,
        subscription: &'a Option<Arc<subscription::Model>>,
        event: &'a Option<Arc<event::Model>>,
        endpoint: Option<&endpoint::Model>,
        now: i64,
    ) -> Option<(&'a subscription::Model, &'a event::Model, Arc<RetryPolicy>)> {
        let (Some(sub), Some(event)) = (subscription, event) else {
            self.release(msg, Release::Dead(DeadReason::SubscriptionDeleted)).await;
            return None;
        };
        let policy = policy_of(sub);
        if policy.is_expired((now - msg.ttl_started_at).max(0) as u64) {
            self.release(msg, Release::Dead(DeadReason::Expired)).await;
            return None;
        }
        if let Some(endpoint) = endpoint {
            let health = &self.pipeline.health;
            match health.through_outage("reading a circuit", || self.pass_gate(endpoint, now)).await {
                Ok(None) => {}
                Ok(Some(release)) => {
                    self.release(msg, release).await;
                    return None;
                }
                // Logged by the health; the message is tried again when its lease ends.
                Err(_) => return None,
            }
        }
        Some((sub, event, policy))
    }

    /// Builds, signs and sends the request. An event that cannot be rendered never will be: its
    /// message ends with an attempt that says so, which the endpoint's circuit does not count
    /// (the receiver is not at fault).
    async fn send_one(&self, sub: &subscription::Model, event: &event::Model, msg: &message::Model, now: i64) -> Sent {
        let trace = MessageTrace::of(
            EventTrace::of_stored(&event.payload),
            ids::id_bits(&event.id).unwrap_or_default(),
            ids::id_bits(&msg.id).unwrap_or_else(ids::random_bytes),
        );
        let span = span_id(rand::random());
        let keys = self.credentials.of(sub, now);
        let Some(outgoing) = request::build(sub, &keys, &event.payload, &msg.id, now, (&trace, span)) else {
            tracing::error!(message_id = %msg.id, event_id = %event.id, "the stored event cannot be rendered");
            let received = Received::failed(ErrorKind::Other, UNRENDERABLE);
            return Sent { request_headers: String::from("{}"), received, rendered: false, trace, span };
        };
        let (request_headers, received) = match keys.authorization() {
            Authorization::OAuth2(oauth) => self.send_with_token(&sub.url, outgoing, oauth).await,
            _ => (headers_json(&outgoing.headers), self.send_to(&sub.url, outgoing).await),
        };
        Sent { request_headers, received, rendered: true, trace, span }
    }

    async fn send_to(&self, url: &str, outgoing: Outgoing) -> Received {
        match self.destinations.of(url) {
            Destination::Send(url) => send(&self.client, url, outgoing).await,
            Destination::Blocked => {
                Received::failed(ErrorKind::BlockedTarget, "the URL is a private or reserved address")
            }
            Destination::Invalid(detail) => Received::failed(ErrorKind::Other, &detail),
        }
    }

    /// Sends with an OAuth 2.0 token, all within the subscription's one deadline: the token (kept
    /// or fetched), the request, and after a 401 a new token and the request once more, whose
    /// answer is the attempt's. The request's headers as recorded come first.
    async fn send_with_token(&self, url: &str, mut outgoing: Outgoing, oauth: &OAuthClient) -> (String, Received) {
        let deadline = Instant::now() + outgoing.timeout;
        let left = || deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        match oauth.bearer(&self.client, &self.destinations, left(), None).await {
            Ok(token) => drop(outgoing.headers.insert(AUTHORIZATION, token)),
            Err(detail) => return (headers_json(&outgoing.headers), Received::failed(ErrorKind::Auth, &detail)),
        }
        let request_headers = headers_json(&outgoing.headers);
        outgoing.timeout = left();
        let mut again =
            Outgoing { headers: outgoing.headers.clone(), body: outgoing.body.clone(), timeout: outgoing.timeout };
        let received = self.send_to(url, outgoing).await;
        if received.status != Some(401) {
            return (request_headers, received);
        }
        let refused = again.headers.get(AUTHORIZATION).cloned();
        let received = match oauth.bearer(&self.client, &self.destinations, left(), refused.as_ref()).await {
            Ok(token) => {
                again.headers.insert(AUTHORIZATION, token);
                again.timeout = left();
                self.send_to(url, again).await
            }
            Err(detail) => Received::failed(ErrorKind::Auth, &detail),
        };
        (request_headers, received)
    }

    /// The receiver has answered: the lane's worker moves on to the next send while this attempt
    /// waits for its group commit, once it has a permit among the attempts sent and not yet
    /// recorded (which bounds what a crash repeats).
    async fn free_worker(&self, permit: StartPermit) -> OwnedSemaphorePermit {
        let worker = permit.release_endpoint(&self.pipeline.wake);
        let unrecorded = self.unrecorded.clone().acquire_owned().await.expect("never closed");
        // A lane out of workers learns that one is free; otherwise it has no reason to check.
        let lane_was_full = worker.semaphore().available_permits() == 0;
        drop(worker);
        if lane_was_full {
            self.pipeline.wake.permits_freed();
        }
        unrecorded
    }

    /// The attempt's metrics, and its span when spans are exported.
    fn observe(
        &self,
        msg: &message::Model,
        sub: &subscription::Model,
        event: &event::Model,
        sent: &Sent,
        outcome: Outcome,
        started_ms: i64,
    ) {
        let metrics = telemetry::hot();
        let received = &sent.received;
        let class = attempt_class(received.status, received.error.as_ref().map(|(kind, _)| *kind));
        metrics.attempts(outcome, class).increment(1);
        if sent.rendered
            && let Some(spans) = &self.pipeline.spans
        {
            spans.attempt(AttemptSpan {
                message: msg,
                event,
                trace: &sent.trace,
                span_id: sent.span,
                url: &sub.url,
                started_ms,
                received,
                outcome: outcome.as_str(),
            });
        }
        if outcome == Outcome::Success {
            let latency = (self.pipeline.now_ms() - msg.created_at).max(0) as f64 / 1000.0;
            metrics.delivery_latency.record(latency);
        }
    }

    /// Records the attempt; the retry lane claims again when a retry is due, and a closed circuit
    /// frees waiting messages now.
    async fn record(&self, attempt: AttemptRecord, retry_at: Option<i64>) {
        let message_id = attempt.message.id.clone();
        match self.recorder.record(attempt).await {
            Ok(Some(transition)) => {
                if let Some(at) = retry_at {
                    self.pipeline.wake.retry_at(at);
                }
                if transition.changed() && transition.to == EndpointState::Closed {
                    self.pipeline.wake.of(Lane::Retry).notify_one();
                }
            }
            Ok(None) => tracing::warn!(%message_id, "lease lost before the attempt was recorded"),
            Err(e) => {
                tracing::error!(%message_id, error = %e, "recording an attempt failed; it is retried after the lease")
            }
        }
    }

    /// `None` when the message may be sent now (normally, or as the probe).
    async fn pass_gate(&self, endpoint: &endpoint::Model, now: i64) -> Result<Option<Release>, sea_orm::DbErr> {
        let probe_ms = self.pipeline.settings.breaker.config().probe_ms;
        Ok(match gate_of(endpoint, now) {
            Gate::Send => None,
            Gate::Hold => Some(Release::Hold),
            Gate::Defer { until_ms } => Some(Release::DeferUntil(until_ms)),
            Gate::Probe if take_probe(&self.pipeline.db, &endpoint.id, now, probe_ms).await? => {
                tracing::info!(endpoint_id = %endpoint.id, "probing a disabled endpoint");
                None
            }
            Gate::Probe => Some(Release::DeferUntil(now + probe_ms)),
        })
    }

    async fn release(&self, msg: &message::Model, why: Release) {
        let now = self.pipeline.now_ms();
        let token = msg.lease_token.unwrap_or_default();
        let db = &self.pipeline.db;
        let (state, dead_reason, next_attempt_at) = match why {
            // Never past the TTL: a message waiting for a probe that comes later is due just after
            // its TTL ends, and then ends `expired` rather than waiting for the probe.
            Release::DeferUntil(until) => (MessageState::Pending, None, until.min(msg.expires_at + 1)),
            Release::Dead(reason) => (MessageState::Dead, Some(reason.as_str()), 0),
            Release::Hold => (MessageState::Held, None, msg.expires_at),
        };
        let next_held_at = (state == MessageState::Held).then_some(next_attempt_at);
        let finish = Finish {
            state,
            dead_reason,
            next_attempt_at: next_held_at,
            delivered_at: None,
            last_status: None,
            first_failed_at: msg.first_failed_at,
        };
        let release = || {
            let finish = finish.clone();
            async move {
                match state {
                    MessageState::Pending => messages::defer(db, &msg.id, token, next_attempt_at, now).await.map(drop),
                    MessageState::Dead => {
                        // Its death is reported in the same transaction.
                        let txn = db.begin().await?;
                        let released = messages::release_unattempted(&txn, &msg.id, token, now, finish).await?;
                        let announced = if released {
                            let died = message::Model { dead_reason: dead_reason.map(str::to_string), ..msg.clone() };
                            report_dead(&self.pipeline, &txn, [&died]).await?
                        } else {
                            Announced::default()
                        };
                        self.pipeline.commit_and_wake(txn, announced.into()).await
                    }
                    _ => messages::release_unattempted(db, &msg.id, token, now, finish).await.map(drop),
                }
            }
        };
        // A failure is logged by the health; the message is then tried again when its lease ends.
        let _ = self.pipeline.health.through_outage("releasing a message", release).await;
    }
}
