//! From what the receiver answered to the attempt's outcome and the message's
//! next state, by the subscription's retry policy. No I/O.

use domain::policy::{DeadReason, Failure, Next, RetryPolicy};
use domain::states::{ErrorKind, MessageState, Outcome};

use super::send::http::Received;
use crate::store::entities::message;
use crate::store::messages::{Finish, PAUSED};

pub struct Decision {
    pub outcome: Outcome,
    pub finish: Finish,
}

/// A 2xx status line is a success once the answer is complete; an answer cut short (timeout,
/// reset) is a failure of that kind, since the receiver may not have finished with the event. A
/// body longer than Herald reads is no failure: the receiver has answered, Herald stops listening.
fn failure_of(received: &Received) -> Option<Failure> {
    match (received.status, &received.error) {
        (_, Some((ErrorKind::BlockedTarget, _))) => Some(Failure::BlockedTarget),
        (Some(status), None | Some((ErrorKind::BodyTooLarge, _))) if (200..300).contains(&status) => None,
        (Some(status), Some((kind, _))) if (200..300).contains(&status) => Some(failure_of_kind(*kind)),
        (Some(status), _) => Some(Failure::Status(status)),
        (None, Some((kind, _))) => Some(failure_of_kind(*kind)),
        (None, None) => Some(Failure::Other),
    }
}

fn failure_of_kind(kind: ErrorKind) -> Failure {
    match kind {
        ErrorKind::Timeout => Failure::Timeout,
        ErrorKind::Connect => Failure::Connect,
        ErrorKind::Dns => Failure::Dns,
        ErrorKind::Tls => Failure::Tls,
        ErrorKind::BodyTooLarge => Failure::BodyTooLarge,
        ErrorKind::BlockedTarget => Failure::BlockedTarget,
        ErrorKind::Auth => Failure::Auth,
        ErrorKind::Other => Failure::Other,
    }
}

/// `Retry-After` as delta seconds or an HTTP date, in milliseconds from now.
pub fn retry_after_ms(value: Option<&str>, now_ms: i64) -> Option<u64> {
    let value = value?.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(secs.saturating_mul(1000));
    }
    let at = chrono::DateTime::parse_from_rfc2822(value).ok()?.timestamp_millis();
    Some((at - now_ms).max(0) as u64)
}

/// An attempt whose event could not be rendered: its message ends `dead`
/// (`non_retryable`) at once, since the stored event will not change.
pub fn unrenderable(msg: &message::Model, now_ms: i64) -> Decision {
    Decision {
        outcome: Outcome::Permanent,
        finish: Finish {
            state: MessageState::Dead,
            dead_reason: Some(DeadReason::NonRetryable.as_str()),
            next_attempt_at: None,
            delivered_at: None,
            last_status: None,
            first_failed_at: msg.first_failed_at.or(Some(now_ms)),
        },
    }
}

/// `410 Gone`: the receiver says the target is retired (the CloudEvents HTTP webhook's meaning).
pub const GONE: u16 = 410;

/// A `410 Gone` pauses the subscription (the recorder does, in the same transaction); the message is
/// held with the pause, as a message published while it lasts is, and is due again when the
/// subscription resumes. It is a failure the circuit counts, and no attempt is wasted retrying it.
fn gone(msg: &message::Model, now_ms: i64) -> Decision {
    Decision {
        outcome: Outcome::Retryable,
        finish: Finish {
            state: MessageState::Held,
            dead_reason: None,
            next_attempt_at: Some(PAUSED),
            delivered_at: None,
            last_status: Some(i32::from(GONE)),
            first_failed_at: msg.first_failed_at.or(Some(now_ms)),
        },
    }
}

pub fn decide(
    policy: &RetryPolicy,
    msg: &message::Model,
    received: &Received,
    now_ms: i64,
    jitter_unit: f64,
) -> Decision {
    let status = received.status.map(i32::from);
    let Some(failure) = failure_of(received) else {
        return Decision {
            outcome: Outcome::Success,
            finish: Finish {
                state: MessageState::Delivered,
                dead_reason: None,
                next_attempt_at: None,
                delivered_at: Some(now_ms),
                last_status: status,
                first_failed_at: msg.first_failed_at,
            },
        };
    };
    if received.status == Some(GONE) {
        return gone(msg, now_ms);
    }
    let outcome = if policy.is_retryable(failure) { Outcome::Retryable } else { Outcome::Permanent };
    let attempts_in_series = (msg.attempt_count - msg.attempt_base + 1).max(1) as u32;
    let age_ms = (now_ms - msg.ttl_started_at).max(0) as u64;
    let retry_after = retry_after_ms(received.header("retry-after"), now_ms);
    // The first failure of a series starts its schedule.
    let first_failed_at = if attempts_in_series == 1 { Some(now_ms) } else { msg.first_failed_at };
    let since_first_failure = first_failed_at.map(|at| (now_ms - at).max(0) as u64);
    let next = policy.after_failure(failure, attempts_in_series, age_ms, since_first_failure, retry_after, jitter_unit);
    let finish = match next {
        Next::RetryInMs(delay) => Finish {
            state: MessageState::Pending,
            dead_reason: None,
            next_attempt_at: Some(now_ms + delay as i64),
            delivered_at: None,
            last_status: status,
            first_failed_at,
        },
        Next::Dead(reason) => Finish {
            state: MessageState::Dead,
            dead_reason: Some(reason.as_str()),
            next_attempt_at: None,
            delivered_at: None,
            last_status: status,
            first_failed_at,
        },
    };
    Decision { outcome, finish }
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::policy::Preset;

    fn message() -> message::Model {
        message::Model::leased_sample("msg_1", "ep_1")
    }

    fn status(code: u16, headers: &[(&str, &str)]) -> Received {
        Received {
            status: Some(code),
            headers: headers
                .iter()
                .map(|(k, v)| (k.parse().expect("a header name"), v.parse().expect("a header value")))
                .collect(),
            ..Received::default()
        }
    }

    #[test]
    fn a_2xx_is_delivered() {
        let d = decide(&RetryPolicy::default_policy(), &message(), &status(204, &[]), 5, 0.0);
        assert_eq!(
            (d.outcome, d.finish.state, d.finish.delivered_at),
            (Outcome::Success, MessageState::Delivered, Some(5))
        );
    }

    #[test]
    fn a_2xx_cut_short_is_a_failure_but_a_long_2xx_body_is_not() {
        let policy = RetryPolicy::preset(Preset::Eventarc);
        for (kind, outcome) in [
            (ErrorKind::Timeout, Outcome::Retryable),
            (ErrorKind::Other, Outcome::Retryable),
            (ErrorKind::BodyTooLarge, Outcome::Success),
        ] {
            let received = Received { error: Some((kind, "x".into())), ..status(200, &[]) };
            assert_eq!(decide(&policy, &message(), &received, 0, 0.0).outcome, outcome, "{kind:?}");
        }
        let over_cap = Received { error: Some((ErrorKind::BodyTooLarge, "x".into())), ..status(503, &[]) };
        assert_eq!(decide(&policy, &message(), &over_cap, 0, 0.0).outcome, Outcome::Retryable);
    }

    #[test]
    fn a_failure_is_retried_by_the_schedule_and_a_redirect_is_a_failure() {
        let policy = RetryPolicy::preset(Preset::Eventarc);
        let d = decide(&policy, &message(), &status(503, &[]), 1_000, 0.0);
        assert_eq!(
            (d.outcome, d.finish.state, d.finish.next_attempt_at),
            (Outcome::Retryable, MessageState::Pending, Some(2_000))
        );
        let d = decide(&RetryPolicy::default_policy(), &message(), &status(308, &[("location", "http://x/")]), 0, 0.0);
        assert_eq!(d.finish.state, MessageState::Pending);
    }

    #[test]
    fn a_permanent_failure_is_dead_at_once() {
        let d = decide(&RetryPolicy::preset(Preset::Eventarc), &message(), &status(400, &[]), 0, 0.0);
        assert_eq!(
            (d.outcome, d.finish.state, d.finish.dead_reason),
            (Outcome::Permanent, MessageState::Dead, Some("non_retryable"))
        );
        let blocked = Received { error: Some((ErrorKind::BlockedTarget, "x".into())), ..Received::default() };
        let d = decide(&RetryPolicy::default_policy(), &message(), &blocked, 0, 0.0);
        assert_eq!((d.outcome, d.finish.dead_reason), (Outcome::Permanent, Some("non_retryable")));
    }

    #[test]
    fn retry_after_is_honoured_for_429() {
        let d = decide(
            &RetryPolicy::preset(Preset::Eventarc),
            &message(),
            &status(429, &[("Retry-After", "3")]),
            10_000,
            0.0,
        );
        assert_eq!(d.finish.next_attempt_at, Some(13_000));
        assert_eq!(retry_after_ms(Some("Thu, 01 Jan 1970 00:00:20 GMT"), 5_000), Some(15_000));
        assert_eq!(retry_after_ms(Some("soon"), 0), None);
    }

    #[test]
    fn a_410_holds_the_message_with_its_subscriptions_pause_whatever_the_policy() {
        for preset in [Preset::EventGrid, Preset::Eventarc] {
            let d = decide(&RetryPolicy::preset(preset), &message(), &status(410, &[]), 1_000, 0.5);
            assert_eq!((d.outcome, d.finish.state), (Outcome::Retryable, MessageState::Held));
            assert_eq!((d.finish.next_attempt_at, d.finish.last_status), (Some(PAUSED), Some(410)));
        }
    }

    #[test]
    fn a_replayed_message_counts_attempts_from_its_replay() {
        let policy = RetryPolicy::preset(Preset::Eventarc);
        let mut msg = message();
        msg.attempt_count = 5;
        let d = decide(&policy, &msg, &status(503, &[]), 0, 0.0);
        assert_eq!(d.finish.dead_reason, Some("attempts_exhausted"));
        msg.attempt_base = 5;
        let d = decide(&policy, &msg, &status(503, &[]), 0, 0.0);
        assert_eq!(d.finish.state, MessageState::Pending);
    }
}
