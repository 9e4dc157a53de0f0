//! An endpoint's health over the last day, from the tallies of its attempts:
//! success rate, time to deliver, attempts per hour, and failures grouped by
//! what went wrong. The store counts; this module only adds up.

use serde::{Deserialize, Serialize};

use super::dto::{Bucket, FailureGroup};
use super::states::ErrorKind;

/// The window the health looks back over.
pub const WINDOW_HOURS: u32 = 24;
pub const HOUR_MS: i64 = 3_600_000;

/// What went wrong in a failed attempt: the error when there was no usable
/// response, else the response's status code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FailureKind {
    Status(u16),
    Error(ErrorKind),
}

impl FailureKind {
    pub fn of(status_code: Option<u16>, error_kind: Option<ErrorKind>) -> Option<FailureKind> {
        match (error_kind, status_code) {
            (Some(kind), _) => Some(FailureKind::Error(kind)),
            (None, Some(status)) => Some(FailureKind::Status(status)),
            (None, None) => None,
        }
    }

    /// The kind as a form field carries it: `503`, `timeout`.
    pub fn key(&self) -> String {
        match self {
            FailureKind::Status(status) => status.to_string(),
            FailureKind::Error(kind) => kind.as_str().to_string(),
        }
    }

    pub fn parse(key: &str) -> Option<FailureKind> {
        match key.parse::<u16>() {
            Ok(status) if (100..=999).contains(&status) => Some(FailureKind::Status(status)),
            Ok(_) => None,
            Err(_) => ErrorKind::parse(key).map(FailureKind::Error),
        }
    }

    /// The kind as a person reads it.
    pub fn label(&self) -> String {
        match self {
            FailureKind::Status(status) => format!("HTTP {status}"),
            FailureKind::Error(kind) => kind.as_str().replace('_', " "),
        }
    }
}

/// Every value of [`attempt_class`]: status classes, then error kinds, `other` last.
pub const ATTEMPT_CLASSES: [&str; 13] = [
    "1xx",
    "2xx",
    "3xx",
    "4xx",
    "5xx",
    "timeout",
    "connect",
    "dns",
    "tls",
    "blocked_target",
    "body_too_large",
    "auth",
    "other",
];

/// How `herald_attempts_total` labels an attempt's answer: its status class (`2xx`, `4xx`, …),
/// or the error that left it without a usable status. A status outside 100–599 is `other`.
pub fn attempt_class(status_code: Option<u16>, error_kind: Option<ErrorKind>) -> &'static str {
    const STATUS_CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];
    match (error_kind, status_code) {
        (Some(kind), _) => kind.as_str(),
        (None, Some(status @ 100..=599)) => STATUS_CLASSES[usize::from(status / 100 - 1)],
        _ => ErrorKind::Other.as_str(),
    }
}

/// Attempts of one hour that ended alike, as the store counts them.
#[derive(Debug, Clone, PartialEq)]
pub struct Tally {
    /// Unix milliseconds / one hour.
    pub hour: i64,
    pub success: bool,
    /// `None` for a success.
    pub failure: Option<FailureKind>,
    pub count: u64,
    /// Of these, the attempts that were their message's last before it died.
    pub dead_last: u64,
    /// When the latest and the earliest of them started (unix milliseconds).
    pub latest_ms: i64,
    pub earliest_ms: i64,
}

/// The sums of a window's tallies.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub attempts: u64,
    pub succeeded: u64,
    /// When the earliest attempt counted started.
    pub earliest_ms: Option<i64>,
    /// One bucket per hour, `ago` 0 being the current hour.
    pub hourly: Vec<Bucket>,
    /// Most frequent first; the latest response is filled in by the caller.
    pub failures: Vec<FailureGroup>,
}

/// The first millisecond of the window that ends at `now_ms`: whole hours, so
/// the oldest bar of the chart is a full hour.
pub fn window_start(now_ms: i64) -> i64 {
    (now_ms.div_euclid(HOUR_MS) - (WINDOW_HOURS as i64 - 1)) * HOUR_MS
}

pub fn summarize(tallies: &[Tally], now_ms: i64) -> Summary {
    let this_hour = now_ms.div_euclid(HOUR_MS);
    let mut hourly: Vec<Bucket> = (0..WINDOW_HOURS).map(|ago| Bucket { ago, success: 0, failure: 0 }).collect();
    let mut failures: Vec<FailureGroup> = Vec::new();
    let (mut attempts, mut succeeded) = (0, 0);
    let earliest_ms = tallies.iter().map(|t| t.earliest_ms).min();
    for t in tallies {
        attempts += t.count;
        let ago = (this_hour - t.hour).clamp(0, WINDOW_HOURS as i64 - 1) as usize;
        if t.success {
            succeeded += t.count;
            hourly[ago].success += t.count;
            continue;
        }
        hourly[ago].failure += t.count;
        let Some(kind) = t.failure else { continue };
        let key = kind.key();
        match failures.iter_mut().find(|g| g.kind == key) {
            Some(group) => {
                group.count += t.count;
                group.dead_messages += t.dead_last;
                group.latest_ms = group.latest_ms.max(t.latest_ms);
            }
            None => failures.push(FailureGroup {
                kind: key,
                label: kind.label(),
                count: t.count,
                dead_messages: t.dead_last,
                latest_ms: t.latest_ms,
                latest_body: None,
                latest_message_id: None,
            }),
        }
    }
    failures.sort_by(|a, b| b.count.cmp(&a.count).then(b.latest_ms.cmp(&a.latest_ms)));
    Summary { attempts, succeeded, earliest_ms, hourly, failures }
}

/// The nearest-rank percentile (`p` from 0 to 100) of sorted values.
pub fn percentile(sorted: &[i64], p: u32) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p as usize * sorted.len()).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attempt_is_classed_by_its_error_else_its_status_class() {
        assert_eq!(attempt_class(Some(204), None), "2xx");
        assert_eq!(attempt_class(Some(302), None), "3xx");
        assert_eq!(attempt_class(Some(404), None), "4xx");
        assert_eq!(attempt_class(Some(599), None), "5xx");
        assert_eq!(attempt_class(Some(200), Some(ErrorKind::BodyTooLarge)), "body_too_large");
        assert_eq!(attempt_class(None, Some(ErrorKind::Timeout)), "timeout");
        assert_eq!((attempt_class(Some(99), None), attempt_class(Some(600), None)), ("other", "other"));
        assert_eq!(attempt_class(None, None), "other");
        for kind in ErrorKind::ALL {
            assert!(ATTEMPT_CLASSES.contains(&attempt_class(None, Some(*kind))), "{kind} is listed");
        }
        assert_eq!(ATTEMPT_CLASSES.last(), Some(&"other"));
    }

    fn tally(hour: i64, failure: Option<FailureKind>, count: u64, dead_last: u64, latest_ms: i64) -> Tally {
        Tally { hour, success: failure.is_none(), failure, count, dead_last, latest_ms, earliest_ms: hour * HOUR_MS }
    }

    #[test]
    fn kinds_round_trip_through_their_keys() {
        for kind in [FailureKind::Status(503), FailureKind::Status(404), FailureKind::Error(ErrorKind::BlockedTarget)] {
            assert_eq!(FailureKind::parse(&kind.key()), Some(kind));
        }
        assert_eq!(FailureKind::parse("99"), None);
        assert_eq!(
            FailureKind::parse("799"),
            Some(FailureKind::Status(799)),
            "any three-digit status a receiver sends"
        );
        assert_eq!(FailureKind::parse("nonsense"), None);
        assert_eq!(
            FailureKind::of(Some(502), Some(ErrorKind::BodyTooLarge)),
            Some(FailureKind::Error(ErrorKind::BodyTooLarge))
        );
        assert_eq!(FailureKind::Error(ErrorKind::BlockedTarget).label(), "blocked target");
    }

    #[test]
    fn tallies_add_up_per_hour_and_per_kind() {
        let now = 100 * HOUR_MS + 5;
        let s503 = Some(FailureKind::Status(503));
        let timeout = Some(FailureKind::Error(ErrorKind::Timeout));
        let tallies = [
            tally(100, None, 7, 0, now),
            tally(100, s503, 2, 1, now - 10),
            tally(98, s503, 3, 0, 98 * HOUR_MS + 1),
            tally(77, timeout, 4, 4, 77 * HOUR_MS),
            // Older than the window (a clock step): counted in the oldest hour.
            tally(50, None, 1, 0, 50 * HOUR_MS),
        ];
        let s = summarize(&tallies, now);
        assert_eq!((s.attempts, s.succeeded, s.earliest_ms), (17, 8, Some(50 * HOUR_MS)));
        assert_eq!(s.hourly.len(), 24);
        assert_eq!((s.hourly[0].success, s.hourly[0].failure), (7, 2));
        assert_eq!((s.hourly[2].success, s.hourly[2].failure), (0, 3));
        assert_eq!((s.hourly[23].success, s.hourly[23].failure), (1, 4));
        let groups: Vec<_> =
            s.failures.iter().map(|g| (g.kind.as_str(), g.count, g.dead_messages, g.latest_ms)).collect();
        assert_eq!(groups, [("503", 5, 1, now - 10), ("timeout", 4, 4, 77 * HOUR_MS)]);
    }

    #[test]
    fn the_window_starts_on_the_hour_a_day_back() {
        assert_eq!(window_start(100 * HOUR_MS + 59), 77 * HOUR_MS);
    }

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let values: Vec<i64> = (1..=20).collect();
        assert_eq!(percentile(&values, 50), Some(10));
        assert_eq!(percentile(&values, 95), Some(19));
        assert_eq!(percentile(&values, 100), Some(20));
        assert_eq!(percentile(&[42], 95), Some(42));
        assert_eq!(percentile(&[], 50), None);
    }
}
