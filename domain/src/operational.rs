//! Operational events: the CloudEvents Herald publishes into a customer's own
//! stream when one of its endpoints changes state, one of its messages becomes
//! dead, or a receiver retires a subscription with `410 Gone` (the README's
//! "Operational events").
//!
//! They are Herald's own events: types under the reserved `herald.` prefix,
//! which a customer may not publish, and source `/herald`. A subscription
//! receives them only when its `event_types` names their type (`*` does not
//! match them), an event about an endpoint never goes to that endpoint, and
//! the death of a message that carried one of Herald's own events is not
//! reported (so a report can never cause another).

use serde::Serialize;
use serde_json::{Value, json};

use super::breaker::{BreakerConfig, Circuit, Transition};
use super::states::EndpointState;

/// The type prefix reserved for Herald's own events.
pub const RESERVED_PREFIX: &str = "herald.";
/// The `source` of every operational event.
pub const SOURCE: &str = "/herald";

pub const ENDPOINT_DISABLED: &str = "herald.endpoint.disabled";
pub const ENDPOINT_LOCKED: &str = "herald.endpoint.locked";
pub const ENDPOINT_CLOSED: &str = "herald.endpoint.closed";
pub const MESSAGE_DEAD: &str = "herald.message.dead";
pub const SUBSCRIPTION_PAUSED: &str = "herald.subscription.paused";

/// Why Herald paused a subscription: its receiver answered `410 Gone` ("this target is retired").
pub const PAUSED_GONE: &str = "gone";

/// Whether events of this type are Herald's own (operational events, the dashboard's test event).
pub fn is_herald_type(event_type: &str) -> bool {
    event_type.starts_with(RESERVED_PREFIX)
}

/// Whether a subscription listing `listed` among its event types receives events of `event_type`:
/// `*` matches every type but Herald's own, which must be named.
pub fn type_matches(listed: &str, event_type: &str) -> bool {
    listed == event_type || (listed == "*" && !is_herald_type(event_type))
}

/// The `data` of an endpoint's event: its circuit after the change, and why it changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EndpointReport {
    pub endpoint_id: String,
    pub url: String,
    pub state: EndpointState,
    pub consecutive_failures: u64,
    pub window_attempts: u64,
    pub window_failures: u64,
    pub reason: &'static str,
}

impl EndpointReport {
    /// The report of a circuit that has just made `transition` (or been unlocked, `reason` "unlocked").
    pub fn of(
        endpoint_id: &str,
        url: &str,
        circuit: &Circuit,
        reason: &'static str,
        now_ms: i64,
        cfg: &BreakerConfig,
    ) -> EndpointReport {
        let (window_attempts, window_failures) = circuit.window.totals(now_ms, cfg.window_ms);
        EndpointReport {
            endpoint_id: endpoint_id.to_string(),
            url: url.to_string(),
            state: circuit.state,
            consecutive_failures: circuit.consecutive_failures,
            window_attempts,
            window_failures,
            reason,
        }
    }

    /// The event type announcing the endpoint's new state.
    pub fn event_type(&self) -> &'static str {
        match self.state {
            EndpointState::Disabled => ENDPOINT_DISABLED,
            EndpointState::Locked => ENDPOINT_LOCKED,
            EndpointState::Closed => ENDPOINT_CLOSED,
        }
    }
}

/// The transitions of a circuit that are announced, with their reason; `None` for the others
/// (no change, a failed probe that leaves the endpoint disabled).
pub fn announced(transition: Transition, circuit: &Circuit, now_ms: i64, cfg: &BreakerConfig) -> Option<&'static str> {
    use EndpointState::{Closed, Disabled, Locked};
    match (transition.from, transition.to) {
        (Closed, Disabled) => {
            Some(if circuit.failure_rate_high(now_ms, cfg) { "failure_rate" } else { "consecutive_failures" })
        }
        (Closed | Disabled, Locked) => Some(if circuit.consecutive_failures >= cfg.lock_consecutive_any {
            "consecutive_failures"
        } else {
            "no_success_for_too_long"
        }),
        (Disabled, Closed) => Some("probe_succeeded"),
        _ => None,
    }
}

/// The `data` of `herald.message.dead`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeadReport {
    pub message_id: String,
    pub subscription_id: String,
    /// The CloudEvent id of the message's event, as published.
    pub event_id: String,
    pub event_source: String,
    pub dead_reason: Option<String>,
    pub attempt_count: i64,
    pub last_status: Option<i64>,
}

/// The `data` of `herald.subscription.paused`: the subscription Herald paused, its URL, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PausedReport {
    pub subscription_id: String,
    pub url: String,
    pub reason: &'static str,
}

/// What Herald reports, for one customer.
#[derive(Debug, Clone, PartialEq)]
pub enum Report {
    Endpoint(EndpointReport),
    Dead(DeadReport),
    Paused(PausedReport),
}

impl Report {
    pub fn event_type(&self) -> &'static str {
        match self {
            Report::Endpoint(report) => report.event_type(),
            Report::Dead(_) => MESSAGE_DEAD,
            Report::Paused(_) => SUBSCRIPTION_PAUSED,
        }
    }

    /// The endpoint the report is about, which never receives it.
    pub fn about_endpoint(&self) -> Option<&str> {
        match self {
            Report::Endpoint(report) => Some(&report.endpoint_id),
            Report::Dead(_) | Report::Paused(_) => None,
        }
    }

    /// The report as a CloudEvent 1.0 with the given id and time (RFC 3339).
    pub fn cloud_event(&self, id: &str, time: &str) -> Value {
        let data = match self {
            Report::Endpoint(report) => serde_json::to_value(report),
            Report::Dead(report) => serde_json::to_value(report),
            Report::Paused(report) => serde_json::to_value(report),
        }
        .expect("reports serialize to JSON");
        json!({
            "specversion": "1.0",
            "id": id,
            "source": SOURCE,
            "type": self.event_type(),
            "time": time,
            "datacontenttype": "application/json",
            "data": data,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::CloudEvent;

    #[test]
    fn a_star_matches_every_type_but_heralds_own() {
        assert!(type_matches("*", "order.created"));
        assert!(!type_matches("*", MESSAGE_DEAD));
        assert!(!type_matches("*", "herald.test"));
        assert!(type_matches(MESSAGE_DEAD, MESSAGE_DEAD));
        assert!(!type_matches(ENDPOINT_LOCKED, ENDPOINT_DISABLED));
    }

    fn cfg() -> BreakerConfig {
        BreakerConfig { disable_consecutive: 3, lock_consecutive: 5, lock_silence_ms: 0, ..BreakerConfig::default() }
    }

    #[test]
    fn the_circuits_changes_are_announced_with_their_reason() {
        let cfg = cfg();
        let mut circuit = Circuit::closed();
        let mut reasons = Vec::new();
        for n in 0..6 {
            let transition = circuit.record(false, 1_000 * n, &cfg);
            reasons.push(announced(transition, &circuit, 1_000 * n, &cfg));
        }
        assert_eq!(
            reasons,
            [None, None, Some("consecutive_failures"), None, None, Some("no_success_for_too_long")],
            "disabled at the third failure, a failed probe is not announced, locked after the fifth"
        );
        let mut probing = Circuit::closed();
        for n in 0..3 {
            probing.record(false, n, &cfg);
        }
        let closed = probing.record(true, 10, &cfg);
        assert_eq!(announced(closed, &probing, 10, &cfg), Some("probe_succeeded"));
    }

    #[test]
    fn a_report_is_a_valid_cloud_event_of_its_type_with_its_data() {
        let mut circuit = Circuit::closed();
        for n in 0..3 {
            circuit.record(false, n, &cfg());
        }
        let report = Report::Endpoint(EndpointReport::of("ep_1", "https://x.test/h", &circuit, "x", 3, &cfg()));
        let event = CloudEvent::parse(report.cloud_event("evt_1", "2026-01-01T00:00:00Z"), "").expect("valid");
        assert_eq!((event.source(), event.event_type()), (SOURCE, ENDPOINT_DISABLED));
        let data = &event.to_json()["data"];
        assert_eq!((data["state"].as_str(), data["consecutive_failures"].as_u64()), (Some("disabled"), Some(3)));
        assert_eq!(report.about_endpoint(), Some("ep_1"));

        let dead = Report::Dead(DeadReport {
            message_id: "msg_1".into(),
            subscription_id: "sub_1".into(),
            event_id: "order-1".into(),
            event_source: "/shop".into(),
            dead_reason: Some("non_retryable".into()),
            attempt_count: 1,
            last_status: Some(410),
        });
        let value = dead.cloud_event("evt_2", "2026-01-01T00:00:00Z");
        assert_eq!(value["type"], MESSAGE_DEAD);
        assert_eq!(value["data"]["last_status"], 410);
        assert_eq!(dead.about_endpoint(), None);
    }
}
