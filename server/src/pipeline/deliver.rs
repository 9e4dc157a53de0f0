//! One claimed or handed-over message, from its circuit's gate to its
//! recorded outcome: the gate, the request built and signed, the send, the
//! decision, and the record.

use std::sync::Arc;

use domain::breaker::Gate;
use domain::health::attempt_class;
use domain::policy::DeadReason;
use domain::states::{EndpointState, ErrorKind, MessageState, Outcome};
use domain::trace::{EventTrace, MessageTrace, span_id};
use sea_orm::TransactionTrait;
use tokio::sync::Semaphore;

use super::Pipeline;
use super::decide::{decide, unrenderable};
use super::handoff::StartPermit;
use super::job::Job;
use super::operational::{Announced, report_dead};
use super::recorder::{AttemptRecord, Recorder};
use super::send::destinations::{Destination, Destinations};
use super::send::http::{self, Received, headers_json, send};
use super::send::request;
use super::send::signing_keys::SigningKeys;
use super::spans::AttemptSpan;
use crate::store::endpoints::{gate_of, take_probe};
use crate::store::entities::{endpoint, message};
use crate::store::messages::{self, Finish, Lane};
use crate::store::subscriptions::policy_of;
use crate::{ids, telemetry};

/// The error of the attempt that ends a message whose event cannot be rendered.
const UNRENDERABLE: &str = "the stored event could not be rendered as a request";

/// Why a message goes back without an attempt.
enum Release {
    Dead(DeadReason),
    DeferUntil(i64),
    Hold,
}

/// What both lanes send with: one HTTP client, the receivers' URLs and
/// signing keys as last read, and the recorder.
pub struct Deliverer {
    pipeline: Pipeline,
    client: reqwest::Client,
    /// Attempts sent and waiting for their record to be committed.
    unrecorded: Arc<Semaphore>,
    recorder: Recorder,
    destinations: Destinations,
    signing_keys: SigningKeys,
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
        let signing_keys = SigningKeys::new(pipeline.sealer.clone());
        Deliverer { pipeline, client, unrecorded, recorder, destinations, signing_keys }
    }

    /// Sends one message and records the attempt. The endpoint's permit and the
    /// lane's worker are freed as soon as the receiver has answered, so that
    /// the next message does not wait for this one's record to be committed.
    pub async fn deliver(&self, job: Job, permit: StartPermit) {
        let Job { message, subscription, event, endpoint } = job;
        let msg = &message;
        let (Some(sub), Some(event)) = (&subscription, &event) else {
            return self.release(msg, Release::Dead(DeadReason::SubscriptionDeleted)).await;
        };
        let policy = policy_of(sub);
        let now = self.pipeline.now_ms();
        if policy.is_expired((now - msg.ttl_started_at).max(0) as u64) {
            return self.release(msg, Release::Dead(DeadReason::Expired)).await;
        }
        if let Some(endpoint) = &endpoint {
            let health = &self.pipeline.health;
            match health.through_outage("reading a circuit", || self.pass_gate(endpoint, now)).await {
                Ok(None) => {}
                Ok(Some(release)) => return self.release(msg, release).await,
                // Logged by the health; the message is tried again when its lease ends.
                Err(_) => return,
            }
        }
        let started_at = now;
        let trace = MessageTrace::of(
            EventTrace::of_stored(&event.payload),
            ids::id_bits(&event.id).unwrap_or_default(),
            ids::id_bits(&msg.id).unwrap_or_else(ids::random_bytes),
        );
        let span = span_id(rand::random());
        // An event that cannot be rendered never will be: its message ends with an attempt that
        // says so, which the endpoint's circuit does not count (the receiver is not at fault).
        let (request_headers, received, rendered) =
            match request::build(sub, &self.signing_keys, &event.payload, &msg.id, started_at, (&trace, span)) {
                Some(outgoing) => {
                    let request_headers = headers_json(&outgoing.headers);
                    let received = match self.destinations.of(&sub.url) {
                        Destination::Send(url) => send(&self.client, url, outgoing).await,
                        Destination::Blocked => {
                            Received::failed(ErrorKind::BlockedTarget, "the URL is a private or reserved address")
                        }
                        Destination::Invalid(detail) => Received::failed(ErrorKind::Other, &detail),
                    };
                    (request_headers, received, true)
                }
                None => {
                    tracing::error!(message_id = %msg.id, event_id = %event.id, "the stored event cannot be rendered");
                    (String::from("{}"), Received::failed(ErrorKind::Other, UNRENDERABLE), false)
                }
            };
        let worker = permit.release_endpoint(&self.pipeline.wake);
        // The receiver has answered: the lane's worker moves on to the next send while
        // this attempt waits for its group commit, once it has a permit among the
        // attempts sent and not yet recorded (which bounds what a crash repeats).
        let _unrecorded = self.unrecorded.clone().acquire_owned().await.expect("never closed");
        // A lane out of workers learns that one is free; otherwise it has no reason to check.
        let lane_was_full = worker.semaphore().available_permits() == 0;
        drop(worker);
        if lane_was_full {
            self.pipeline.wake.permits_freed();
        }
        let decision = if rendered {
            decide(&policy, msg, &received, self.pipeline.now_ms(), rand::random::<f64>() * 2.0 - 1.0)
        } else {
            unrenderable(msg, self.pipeline.now_ms())
        };
        let metrics = telemetry::hot();
        let class = attempt_class(received.status, received.error.as_ref().map(|(kind, _)| *kind));
        metrics.attempts(decision.outcome, class).increment(1);
        if rendered && let Some(spans) = &self.pipeline.spans {
            let outcome = decision.outcome.as_str();
            spans.attempt(AttemptSpan {
                message: msg,
                event,
                trace: &trace,
                span_id: span,
                url: &sub.url,
                started_ms: started_at,
                received: &received,
                outcome,
            });
        }
        if decision.outcome == Outcome::Success {
            let latency = (self.pipeline.now_ms() - msg.created_at).max(0) as f64 / 1000.0;
            metrics.delivery_latency.record(latency);
        }
        let retry_at = decision.finish.next_attempt_at.filter(|_| decision.finish.state == MessageState::Pending);
        let message_id = msg.id.clone();
        let trace_id = rendered.then(|| trace.trace_id_hex());
        let attempt =
            AttemptRecord { message, started_at, request_headers, trace_id, received, decision, charged: rendered };
        match self.recorder.record(attempt).await {
            Ok(Some(transition)) => {
                // The retry lane claims again when the retry is due; a closed circuit frees waiting messages now.
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
                        txn.commit().await?;
                        announced.wake(&self.pipeline);
                        Ok(())
                    }
                    _ => messages::release_unattempted(db, &msg.id, token, now, finish).await.map(drop),
                }
            }
        };
        // A failure is logged by the health; the message is then tried again when its lease ends.
        let _ = self.pipeline.health.through_outage("releasing a message", release).await;
    }
}
