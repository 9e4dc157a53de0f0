//! The pure retry rules: retry policies, their schedules, which failures may be
//! retried, and the decision after a failed attempt. No clock and no randomness here: the
//! caller passes the message's age and a jitter unit, so whole schedules test in microseconds.

use std::ops::RangeInclusive;

use serde_json::{Map, Value, json};

use crate::errors::FieldError;
use crate::input::whole_number;

/// The named schedules (the presets the README lists).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    Workfront,
    EventGrid,
    Eventarc,
}

impl Preset {
    pub const ALL: [Preset; 3] = [Preset::Workfront, Preset::EventGrid, Preset::Eventarc];

    pub fn as_str(&self) -> &'static str {
        match self {
            Preset::Workfront => "workfront",
            Preset::EventGrid => "event-grid",
            Preset::Eventarc => "eventarc",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

/// Which failures may be retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RetryOn {
    All,
    Transient,
    /// Sorted and without duplicates once parsed.
    Codes(Vec<u16>),
}

/// How long to wait between attempts.
#[derive(Debug, Clone, PartialEq)]
pub enum Schedule {
    Preset(Preset),
    Exponential {
        min_delay_secs: u32,
        max_delay_secs: u32,
    },
    /// JSON kind `"schedule"`: explicit delays, the last one repeating.
    Fixed {
        delays_secs: Vec<u32>,
        jitter: f64,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    pub schedule: Schedule,
    /// Attempts in total, the first one included.
    pub max_attempts: u32,
    pub ttl_secs: u32,
    pub retry_on: RetryOn,
}

/// What went wrong in one attempt (the worker builds this).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    Status(u16),
    Timeout,
    Connect,
    Dns,
    Tls,
    BlockedTarget,
    BodyTooLarge,
    Other,
}

/// Why a message is `dead` (stored as text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadReason {
    NonRetryable,
    AttemptsExhausted,
    Expired,
    SubscriptionDeleted,
}

impl DeadReason {
    pub const ALL: [DeadReason; 4] =
        [DeadReason::NonRetryable, DeadReason::AttemptsExhausted, DeadReason::Expired, DeadReason::SubscriptionDeleted];

    pub fn as_str(&self) -> &'static str {
        match self {
            DeadReason::NonRetryable => "non_retryable",
            DeadReason::AttemptsExhausted => "attempts_exhausted",
            DeadReason::Expired => "expired",
            DeadReason::SubscriptionDeleted => "subscription_deleted",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

/// The decision after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    RetryInMs(u64),
    Dead(DeadReason),
}

/// Statuses that `transient` retries; everything else with a status is permanent.
const TRANSIENT_STATUSES: [u16; 7] = [408, 409, 429, 500, 502, 503, 504];
/// Workfront: the delay after failed attempt n is 2^(n−1) × 84.8 s.
const WORKFRONT_UNIT_MS: u64 = 84_800;
/// Event Grid: these delays, then the last one forever.
const EVENT_GRID_DELAYS_SECS: [u32; 7] = [10, 30, 60, 300, 600, 1800, 3600];
const EVENT_GRID_JITTER: f64 = 0.10;
/// Eventarc: 1 s doubling, capped at 60 s.
const EVENTARC_CAP_MS: u64 = 60_000;

// Accepted ranges (documented in the OpenAPI document's retry policy schema).
const DELAY_RANGE: RangeInclusive<u32> = 1..=600;
const MAX_ATTEMPTS_RANGE: RangeInclusive<u32> = 1..=100;
const TTL_RANGE: RangeInclusive<u32> = 1..=604_800;
const FIXED_DELAY_RANGE: RangeInclusive<u32> = 1..=604_800;
const STATUS_RANGE: RangeInclusive<u32> = 100..=599;
const MAX_FIXED_DELAYS: usize = 100;
const MAX_CODES: usize = 50;
const MAX_JITTER: f64 = 0.5;

// Defaults for the custom kinds.
const CUSTOM_MAX_ATTEMPTS: u32 = 10;
const CUSTOM_TTL_SECS: u32 = 86_400;

impl RetryPolicy {
    /// The preset's numbers, as the README's retry policies state them.
    pub fn preset(p: Preset) -> Self {
        let (max_attempts, ttl_secs, retry_on) = match p {
            Preset::Workfront => (12, 180_000, RetryOn::All),
            Preset::EventGrid => (30, 86_400, RetryOn::All),
            Preset::Eventarc => (5, 86_400, RetryOn::Transient),
        };
        Self { schedule: Schedule::Preset(p), max_attempts, ttl_secs, retry_on }
    }

    pub fn default_policy() -> Self {
        Self::preset(Preset::EventGrid)
    }

    /// Parses the client's JSON `retry_policy`: a preset name, `{"kind": <preset>, …overrides}`,
    /// `{"kind":"exponential", …}` or `{"kind":"schedule", …}`. Every error is named under
    /// `prefix` (`retry_policy.min_delay_secs`), and all of them are reported at once.
    pub fn parse(value: &Value, prefix: &str) -> Result<RetryPolicy, Vec<FieldError>> {
        match value {
            Value::String(name) => match Preset::parse(name) {
                Some(p) => Ok(Self::preset(p)),
                None => err(prefix, format!("unknown preset `{name}`; {KIND_HINT}")),
            },
            Value::Object(map) => parse_object(map, prefix),
            _ => err(prefix, "must be a preset name or an object"),
        }
    }

    /// The canonical JSON form; `parse(to_json())` gives back the same policy.
    pub fn to_json(&self) -> Value {
        let mut v = match &self.schedule {
            Schedule::Preset(p) => json!({ "kind": p.as_str() }),
            Schedule::Exponential { min_delay_secs, max_delay_secs } => json!({
                "kind": "exponential",
                "min_delay_secs": min_delay_secs,
                "max_delay_secs": max_delay_secs,
            }),
            Schedule::Fixed { delays_secs, jitter } => json!({
                "kind": "schedule",
                "delays_secs": delays_secs,
                "jitter": jitter,
            }),
        };
        v["max_attempts"] = json!(self.max_attempts);
        v["ttl_secs"] = json!(self.ttl_secs);
        v["retry_on"] = match &self.retry_on {
            RetryOn::All => json!("all"),
            RetryOn::Transient => json!("transient"),
            RetryOn::Codes(codes) => json!(codes),
        };
        v
    }

    /// Milliseconds to wait after failed attempt `failed_attempt` (1-based; 0 counts as 1)
    /// before the next one, before jitter. Saturates rather than overflowing for large n.
    pub fn base_delay_ms(&self, failed_attempt: u32) -> u64 {
        let n = failed_attempt.max(1);
        match &self.schedule {
            Schedule::Preset(Preset::Workfront) => doubled(WORKFRONT_UNIT_MS, n),
            Schedule::Preset(Preset::EventGrid) => secs_ms(repeat_last(&EVENT_GRID_DELAYS_SECS, n)),
            Schedule::Preset(Preset::Eventarc) => doubled(1_000, n).min(EVENTARC_CAP_MS),
            Schedule::Exponential { min_delay_secs, max_delay_secs } => {
                doubled(secs_ms(*min_delay_secs), n).min(secs_ms(*max_delay_secs))
            }
            Schedule::Fixed { delays_secs, .. } => secs_ms(repeat_last(delays_secs, n)),
        }
    }

    /// The fraction by which each delay may randomly vary.
    pub fn jitter_fraction(&self) -> f64 {
        match &self.schedule {
            Schedule::Preset(Preset::EventGrid) => EVENT_GRID_JITTER,
            Schedule::Fixed { jitter, .. } => *jitter,
            _ => 0.0,
        }
    }

    /// Whether this failure may be retried under `retry_on`.
    pub fn is_retryable(&self, failure: Failure) -> bool {
        match failure {
            // Retrying cannot make a refused address acceptable.
            Failure::BlockedTarget => false,
            Failure::Status(code) => match &self.retry_on {
                RetryOn::All => true,
                RetryOn::Transient => TRANSIENT_STATUSES.contains(&code),
                RetryOn::Codes(codes) => codes.contains(&code),
            },
            // An oversized answer will be oversized again; only `all` retries it.
            Failure::BodyTooLarge => self.retry_on == RetryOn::All,
            // Timeouts and connection-level errors stay retryable under every `retry_on`.
            Failure::Timeout | Failure::Connect | Failure::Dns | Failure::Tls | Failure::Other => true,
        }
    }

    /// Expired when the age is strictly greater than `ttl_secs`.
    pub fn is_expired(&self, age_ms: u64) -> bool {
        age_ms > self.ttl_ms()
    }

    /// The decision after a failed attempt; `attempts_made` includes the one that just failed,
    /// `age_ms` is the message's age now, `jitter_unit` a number in [-1, 1] from the caller.
    ///
    /// Retry n is due at the series' first failure plus the delays of retries 1 to n (the last
    /// one jittered): `since_first_failure_ms` is the time since then (0 when this attempt is the
    /// first failure), so slow attempts do not push the schedule later, and a retry whose time
    /// has passed is due at once. `None` (a series from before first failures were recorded)
    /// waits the delay from now. A `Retry-After` on a 429 or 503 can only lengthen the wait, and
    /// never past the TTL; the policy's own time past the TTL ends the message.
    pub fn after_failure(
        &self,
        failure: Failure,
        attempts_made: u32,
        age_ms: u64,
        since_first_failure_ms: Option<u64>,
        retry_after_ms: Option<u64>,
        jitter_unit: f64,
    ) -> Next {
        if !self.is_retryable(failure) {
            return Next::Dead(DeadReason::NonRetryable);
        }
        if attempts_made >= self.max_attempts {
            return Next::Dead(DeadReason::AttemptsExhausted);
        }
        if self.is_expired(age_ms) {
            return Next::Dead(DeadReason::Expired);
        }
        let remaining_ms = self.ttl_ms() - age_ms;
        let step = jittered(self.base_delay_ms(attempts_made), self.jitter_fraction(), jitter_unit);
        let wait = match since_first_failure_ms {
            Some(since) => self.offset_ms(attempts_made - 1).saturating_add(step).saturating_sub(since),
            None => step,
        };
        if let (Some(asked), Failure::Status(429 | 503)) = (retry_after_ms, failure) {
            return Next::RetryInMs(wait.max(asked).min(remaining_ms));
        }
        if wait > remaining_ms { Next::Dead(DeadReason::Expired) } else { Next::RetryInMs(wait) }
    }

    /// The delays before retries 1 to `retries`, summed, without jitter: retry `retries` is due
    /// this long after the first failure (0 for none).
    pub fn offset_ms(&self, retries: u32) -> u64 {
        (1..=retries).fold(0u64, |sum, n| sum.saturating_add(self.base_delay_ms(n)))
    }

    /// `(attempt_number, offset_ms)` of every attempt if all failed instantly, without jitter,
    /// stopping at `max_attempts` and before any attempt later than the TTL. Starts with `(1, 0)`.
    pub fn preview(&self) -> Vec<(u32, u64)> {
        let mut out = vec![(1, 0)];
        let mut offset: u64 = 0;
        for attempt in 2..=self.max_attempts {
            offset = offset.saturating_add(self.base_delay_ms(attempt - 1));
            if offset > self.ttl_ms() {
                break;
            }
            out.push((attempt, offset));
        }
        out
    }

    fn ttl_ms(&self) -> u64 {
        secs_ms(self.ttl_secs)
    }
}

fn secs_ms(secs: u32) -> u64 {
    u64::from(secs) * 1_000
}

/// `unit × 2^(n−1)`, saturating.
fn doubled(unit: u64, n: u32) -> u64 {
    let factor = 1u64.checked_shl(n - 1).unwrap_or(u64::MAX);
    unit.saturating_mul(factor)
}

/// The delay after failed attempt n from a list whose last entry repeats (0 if empty).
fn repeat_last(delays: &[u32], n: u32) -> u32 {
    let i = (n as usize - 1).min(delays.len().saturating_sub(1));
    delays.get(i).copied().unwrap_or(0)
}

/// `base × (1 + fraction × unit)`, rounded; a unit outside [-1, 1] (or NaN) is clamped.
fn jittered(base: u64, fraction: f64, unit: f64) -> u64 {
    let unit = if unit.is_nan() { 0.0 } else { unit.clamp(-1.0, 1.0) };
    // Float-to-int `as` saturates, so huge bases stay huge instead of wrapping.
    (base as f64 * (1.0 + fraction * unit)).round() as u64
}

// ---------------------------------------------------------------------------------------------
// Parsing

const KIND_HINT: &str = "expected workfront, event-grid, eventarc, exponential or schedule";
const COMMON_FIELDS: [&str; 4] = ["kind", "max_attempts", "ttl_secs", "retry_on"];

#[derive(Clone, Copy)]
enum Kind {
    Preset(Preset),
    Exponential,
    Fixed,
}

impl Kind {
    /// Fields this kind accepts besides the common ones.
    fn own_fields(self) -> &'static [&'static str] {
        match self {
            Kind::Preset(_) => &[],
            Kind::Exponential => &["min_delay_secs", "max_delay_secs"],
            Kind::Fixed => &["delays_secs", "jitter"],
        }
    }
}

type Parsed<T> = Result<T, Vec<FieldError>>;

fn err<T>(field: &str, message: impl Into<String>) -> Parsed<T> {
    Err(vec![FieldError::new(field, message)])
}

fn parse_object(map: &Map<String, Value>, prefix: &str) -> Parsed<RetryPolicy> {
    let mut r = Reader { map, prefix, errors: Vec::new() };
    let kind = r.field("kind", None, parse_kind);
    if let Some(kind) = kind {
        r.reject_unknown(kind.own_fields());
    }
    // Presets keep their own numbers unless overridden; custom kinds get the generic defaults.
    let (default_attempts, default_ttl, default_retry_on) = match kind {
        Some(Kind::Preset(p)) => {
            let p = RetryPolicy::preset(p);
            (p.max_attempts, p.ttl_secs, p.retry_on)
        }
        _ => (CUSTOM_MAX_ATTEMPTS, CUSTOM_TTL_SECS, RetryOn::All),
    };
    let max_attempts = r.field("max_attempts", Some(default_attempts), |v, f| parse_int(v, f, MAX_ATTEMPTS_RANGE));
    let ttl_secs = r.field("ttl_secs", Some(default_ttl), |v, f| parse_int(v, f, TTL_RANGE));
    let retry_on = r.field("retry_on", Some(default_retry_on), parse_retry_on);
    let schedule = match kind {
        Some(Kind::Preset(p)) => Some(Schedule::Preset(p)),
        Some(Kind::Exponential) => r.exponential(),
        Some(Kind::Fixed) => r.fixed(),
        None => None,
    };
    match (schedule, max_attempts, ttl_secs, retry_on) {
        (Some(schedule), Some(max_attempts), Some(ttl_secs), Some(retry_on)) if r.errors.is_empty() => {
            Ok(RetryPolicy { schedule, max_attempts, ttl_secs, retry_on })
        }
        _ => Err(r.errors),
    }
}

/// Reads the fields of one JSON object, collecting every error instead of stopping at the first.
struct Reader<'a> {
    map: &'a Map<String, Value>,
    prefix: &'a str,
    errors: Vec<FieldError>,
}

impl Reader<'_> {
    fn name(&self, key: &str) -> String {
        if self.prefix.is_empty() { key.to_string() } else { format!("{}.{key}", self.prefix) }
    }

    /// The parsed field, or `default` when it is absent or null. `None` means an error was
    /// recorded (invalid, or required and missing).
    fn field<T>(&mut self, key: &str, default: Option<T>, parse: impl FnOnce(&Value, &str) -> Parsed<T>) -> Option<T> {
        let name = self.name(key);
        match self.map.get(key).filter(|v| !v.is_null()) {
            None => {
                if default.is_none() {
                    self.errors.push(FieldError::new(name, "is required"));
                }
                default
            }
            Some(v) => parse(v, &name).map_err(|e| self.errors.extend(e)).ok(),
        }
    }

    fn reject_unknown(&mut self, own_fields: &[&str]) {
        let known = |k: &str| COMMON_FIELDS.contains(&k) || own_fields.contains(&k);
        let unknown: Vec<FieldError> =
            (self.map.keys()).filter(|k| !known(k)).map(|k| FieldError::new(self.name(k), "unknown field")).collect();
        self.errors.extend(unknown);
    }

    fn exponential(&mut self) -> Option<Schedule> {
        let min = self.field("min_delay_secs", None, |v, f| parse_int(v, f, DELAY_RANGE));
        let max = self.field("max_delay_secs", None, |v, f| parse_int(v, f, DELAY_RANGE));
        let (min_delay_secs, max_delay_secs) = (min?, max?);
        if min_delay_secs > max_delay_secs {
            let message = "must not be greater than max_delay_secs";
            self.errors.push(FieldError::new(self.name("min_delay_secs"), message));
            return None;
        }
        Some(Schedule::Exponential { min_delay_secs, max_delay_secs })
    }

    fn fixed(&mut self) -> Option<Schedule> {
        let delays_secs = self.field("delays_secs", None, parse_delays);
        let jitter = self.field("jitter", Some(0.0), parse_jitter);
        Some(Schedule::Fixed { delays_secs: delays_secs?, jitter: jitter? })
    }
}

fn parse_kind(v: &Value, field: &str) -> Parsed<Kind> {
    let kind = match v.as_str() {
        Some("exponential") => Kind::Exponential,
        Some("schedule") => Kind::Fixed,
        Some(name) => match Preset::parse(name) {
            Some(p) => Kind::Preset(p),
            None => return err(field, format!("unknown kind `{name}`; {KIND_HINT}")),
        },
        None => return err(field, "must be a string"),
    };
    Ok(kind)
}

fn parse_int(v: &Value, field: &str, range: RangeInclusive<u32>) -> Parsed<u32> {
    // Negative numbers become u64::MAX, out of every range.
    let n = whole_number(v).map(|n| u64::try_from(n).unwrap_or(u64::MAX));
    match n {
        Some(n) if u32::try_from(n).is_ok_and(|n| range.contains(&n)) => Ok(n as u32),
        Some(_) => err(field, format!("must be between {} and {}", range.start(), range.end())),
        None if v.is_number() => err(field, "must be a whole number"),
        None => err(field, "must be an integer"),
    }
}

fn parse_jitter(v: &Value, field: &str) -> Parsed<f64> {
    match v.as_f64() {
        Some(j) if (0.0..=MAX_JITTER).contains(&j) => Ok(j),
        Some(_) => err(field, "must be between 0.0 and 0.5"),
        None => err(field, "must be a number"),
    }
}

fn parse_delays(v: &Value, field: &str) -> Parsed<Vec<u32>> {
    let items = parse_list(v, field, MAX_FIXED_DELAYS, "delay")?;
    parse_each(items, field, |v, f| parse_int(v, f, FIXED_DELAY_RANGE))
}

fn parse_retry_on(v: &Value, field: &str) -> Parsed<RetryOn> {
    match v.as_str() {
        Some("all") => Ok(RetryOn::All),
        Some("transient") => Ok(RetryOn::Transient),
        _ if v.is_array() => {
            let items = parse_list(v, field, MAX_CODES, "status code")?;
            let mut codes = parse_each(items, field, |v, f| parse_int(v, f, STATUS_RANGE))?;
            codes.sort_unstable();
            codes.dedup();
            // STATUS_RANGE keeps every code within u16.
            Ok(RetryOn::Codes(codes.into_iter().map(|c| c as u16).collect()))
        }
        _ => err(field, r#"must be "all", "transient" or a list of status codes"#),
    }
}

/// A non-empty JSON array of at most `max` items.
fn parse_list<'v>(v: &'v Value, field: &str, max: usize, what: &str) -> Parsed<&'v Vec<Value>> {
    match v.as_array() {
        None => err(field, format!("must be a list of {what}s")),
        Some(items) if items.is_empty() => err(field, format!("must list at least one {what}")),
        Some(items) if items.len() > max => err(field, format!("must list at most {max} {what}s")),
        Some(items) => Ok(items),
    }
}

/// Parses every item, naming errors `field[i]`.
fn parse_each<T>(items: &[Value], field: &str, parse: impl Fn(&Value, &str) -> Parsed<T>) -> Parsed<Vec<T>> {
    let mut out = Vec::with_capacity(items.len());
    let mut errors = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match parse(item, &format!("{field}[{i}]")) {
            Ok(t) => out.push(t),
            Err(e) => errors.extend(e),
        }
    }
    if errors.is_empty() { Ok(out) } else { Err(errors) }
}

/// What the OpenAPI document says of a retry policy: the ranges [`RetryPolicy::parse`] accepts.
#[cfg(feature = "openapi")]
mod schema {
    use std::borrow::Cow;
    use std::ops::RangeInclusive;

    use utoipa::openapi::RefOr;
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, SchemaType, Type};
    use utoipa::{PartialSchema, ToSchema};

    use super::*;
    use crate::request::openapi::{closed_object, enum_of, object_of};

    fn integer(range: &RangeInclusive<u32>, nullable: bool) -> ObjectBuilder {
        object_of(Type::Integer, nullable).minimum(Some(*range.start())).maximum(Some(*range.end()))
    }

    /// A preset name, a preset with overrides, or a custom `exponential` or `schedule` policy. For
    /// `exponential`, `min_delay_secs` must not exceed `max_delay_secs` (factor 2; linear when they
    /// are equal). Null fields take their defaults.
    impl PartialSchema for RetryPolicy {
        fn schema() -> RefOr<Schema> {
            let presets: Vec<&str> = Preset::ALL.iter().map(Preset::as_str).collect();
            let codes =
                ArrayBuilder::new().items(integer(&STATUS_RANGE, false)).min_items(Some(1)).max_items(Some(MAX_CODES));
            let transient: Vec<String> = TRANSIENT_STATUSES.iter().map(u16::to_string).collect();
            let retry_on = OneOfBuilder::new()
                .item(enum_of(&["all", "transient"], false))
                .item(codes)
                .item(ObjectBuilder::new().schema_type(Type::Null))
                .description(Some(format!(
                    "`all`, `transient` ({}, timeouts and connection errors), or the status codes to retry",
                    transient.join(", ")
                )))
                .build();
            let common = |kinds: &[&str]| {
                closed_object()
                    .property("kind", enum_of(kinds, false))
                    .property("max_attempts", integer(&MAX_ATTEMPTS_RANGE, true))
                    .property("ttl_secs", integer(&TTL_RANGE, true))
                    .property("retry_on", Schema::OneOf(retry_on.clone()))
                    .required("kind")
            };
            let delays = ArrayBuilder::new()
                .items(integer(&FIXED_DELAY_RANGE, false))
                .min_items(Some(1))
                .max_items(Some(MAX_FIXED_DELAYS));
            let jitter = ObjectBuilder::new()
                .schema_type(SchemaType::from_iter([Type::Number, Type::Null]))
                .minimum(Some(0))
                .maximum(Some(MAX_JITTER));
            OneOfBuilder::new()
                .item(enum_of(&presets, false))
                .item(common(&presets))
                .item(
                    common(&["exponential"])
                        .property("min_delay_secs", integer(&DELAY_RANGE, false))
                        .property("max_delay_secs", integer(&DELAY_RANGE, false))
                        .required("min_delay_secs")
                        .required("max_delay_secs"),
                )
                .item(
                    common(&["schedule"])
                        .property("delays_secs", delays)
                        .property("jitter", jitter)
                        .required("delays_secs"),
                )
                .into()
        }
    }

    impl ToSchema for RetryPolicy {
        fn name() -> Cow<'static, str> {
            Cow::Borrowed("RetryPolicy")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const S: u64 = 1_000;

    fn offsets_secs_x10(policy: &RetryPolicy) -> Vec<u64> {
        // Tenths of a second, so workfront's 84.8 s steps compare exactly.
        policy.preview().iter().map(|&(_, ms)| ms / 100).collect()
    }

    fn custom(schedule: Schedule, max_attempts: u32, ttl_secs: u32, retry_on: RetryOn) -> RetryPolicy {
        RetryPolicy { schedule, max_attempts, ttl_secs, retry_on }
    }

    fn with_retry_on(retry_on: RetryOn) -> RetryPolicy {
        RetryPolicy { retry_on, ..RetryPolicy::default_policy() }
    }

    fn error_fields(value: Value) -> Vec<String> {
        let errors = RetryPolicy::parse(&value, "retry_policy").expect_err("should be rejected");
        errors.into_iter().map(|e| e.field).collect()
    }

    // --- presets -------------------------------------------------------------------------

    #[test]
    fn workfront_preview_is_doubling_84_8_seconds() {
        let p = RetryPolicy::preset(Preset::Workfront);
        assert_eq!(
            offsets_secs_x10(&p),
            vec![0, 848, 2544, 5936, 12720, 26288, 53424, 107696, 216240, 433328, 867504, 1735856]
        );
        let preview = p.preview();
        assert_eq!(preview.last(), Some(&(12, 2047 * 84_800)));
        assert_eq!((p.max_attempts, p.ttl_secs, &p.retry_on), (12, 180_000, &RetryOn::All));
        assert_eq!(p.jitter_fraction(), 0.0);
    }

    #[test]
    fn event_grid_preview_matches_spec() {
        let p = RetryPolicy::default_policy();
        assert_eq!(p, RetryPolicy::preset(Preset::EventGrid));
        let preview = p.preview();
        let first: Vec<u64> = preview.iter().take(10).map(|&(_, ms)| ms).collect();
        let want = [0, 10, 40, 100, 400, 1000, 2800, 6400, 10_000, 13_600];
        assert_eq!(first, want.map(|s| s * S).to_vec());
        assert_eq!(preview.len(), 30);
        assert_eq!(preview.last(), Some(&(30, 85_600 * S)));
        assert!(preview.last().unwrap().1 <= 86_400 * S);
        assert_eq!(p.base_delay_ms(100), 3_600 * S, "then every hour");
        assert_eq!(p.jitter_fraction(), 0.10);
        assert_eq!((p.max_attempts, p.ttl_secs, &p.retry_on), (30, 86_400, &RetryOn::All));
    }

    #[test]
    fn eventarc_preview_doubles_from_one_second_capped_at_sixty() {
        let p = RetryPolicy::preset(Preset::Eventarc);
        assert_eq!(p.preview(), vec![(1, 0), (2, S), (3, 3 * S), (4, 7 * S), (5, 15 * S)]);
        assert_eq!(p.base_delay_ms(6), 32 * S);
        assert_eq!(p.base_delay_ms(7), 60 * S);
        assert_eq!(p.base_delay_ms(1_000), 60 * S);
        assert_eq!((p.max_attempts, p.ttl_secs, &p.retry_on), (5, 86_400, &RetryOn::Transient));
    }

    #[test]
    fn exponential_is_linear_when_min_equals_max() {
        let exp = Schedule::Exponential { min_delay_secs: 30, max_delay_secs: 30 };
        let p = custom(exp, 5, 3_600, RetryOn::All);
        let want = vec![(1, 0), (2, 30 * S), (3, 60 * S), (4, 90 * S), (5, 120 * S)];
        assert_eq!(p.preview(), want);
    }

    #[test]
    fn exponential_doubles_then_caps_and_saturates() {
        let exp = Schedule::Exponential { min_delay_secs: 2, max_delay_secs: 10 };
        let p = custom(exp, 100, 604_800, RetryOn::All);
        let delays: Vec<u64> = (1..=6).map(|n| p.base_delay_ms(n)).collect();
        assert_eq!(delays, [2, 4, 8, 10, 10, 10].map(|s| s * S).to_vec());
        assert_eq!(p.base_delay_ms(u32::MAX), 10 * S);
        let wf = RetryPolicy::preset(Preset::Workfront);
        assert_eq!(wf.base_delay_ms(100), u64::MAX);
        assert_eq!(wf.base_delay_ms(0), wf.base_delay_ms(1));
    }

    #[test]
    fn fixed_schedule_repeats_its_last_delay_and_stops_at_ttl() {
        let fixed = Schedule::Fixed { delays_secs: vec![5, 60], jitter: 0.2 };
        let p = custom(fixed, 10, 150, RetryOn::All);
        assert_eq!(p.preview(), vec![(1, 0), (2, 5 * S), (3, 65 * S), (4, 125 * S)]);
        assert_eq!(p.jitter_fraction(), 0.2);
    }

    #[test]
    fn preview_keeps_an_attempt_exactly_at_the_ttl() {
        let fixed = Schedule::Fixed { delays_secs: vec![50], jitter: 0.0 };
        let p = custom(fixed, 10, 100, RetryOn::All);
        assert_eq!(p.preview(), vec![(1, 0), (2, 50 * S), (3, 100 * S)]);
    }

    // --- classification ------------------------------------------------------------------

    #[test]
    fn classification_table() {
        use Failure::*;
        let all = with_retry_on(RetryOn::All);
        let transient = with_retry_on(RetryOn::Transient);
        let codes = with_retry_on(RetryOn::Codes(vec![409, 503]));
        let table: &[(&RetryPolicy, Failure, bool)] = &[
            (&all, Status(500), true),
            (&all, Status(400), true),
            (&all, Status(404), true),
            (&all, Status(301), true),
            (&all, Timeout, true),
            (&all, Connect, true),
            (&all, Dns, true),
            (&all, Tls, true),
            (&all, Other, true),
            (&all, BodyTooLarge, true),
            (&all, BlockedTarget, false),
            (&transient, Status(408), true),
            (&transient, Status(409), true),
            (&transient, Status(429), true),
            (&transient, Status(500), true),
            (&transient, Status(502), true),
            (&transient, Status(503), true),
            (&transient, Status(504), true),
            (&transient, Status(501), false),
            (&transient, Status(505), false),
            (&transient, Status(400), false),
            (&transient, Status(401), false),
            (&transient, Status(404), false),
            (&transient, Status(410), false),
            (&transient, Status(422), false),
            (&transient, Status(301), false),
            (&transient, Status(302), false),
            (&transient, Status(307), false),
            (&transient, Timeout, true),
            (&transient, Connect, true),
            (&transient, Dns, true),
            (&transient, Tls, true),
            (&transient, Other, true),
            (&transient, BodyTooLarge, false),
            (&transient, BlockedTarget, false),
            (&codes, Status(409), true),
            (&codes, Status(503), true),
            (&codes, Status(500), false),
            (&codes, Status(429), false),
            (&codes, Status(404), false),
            (&codes, Status(302), false),
            (&codes, Timeout, true),
            (&codes, Connect, true),
            (&codes, Dns, true),
            (&codes, Tls, true),
            (&codes, Other, true),
            (&codes, BodyTooLarge, false),
            (&codes, BlockedTarget, false),
        ];
        for (policy, failure, want) in table {
            assert_eq!(policy.is_retryable(*failure), *want, "{:?} {failure:?}", policy.retry_on);
        }
    }

    #[test]
    fn dead_reason_text_round_trips() {
        for r in DeadReason::ALL {
            assert_eq!(DeadReason::parse(r.as_str()), Some(r));
        }
        assert_eq!(DeadReason::NonRetryable.as_str(), "non_retryable");
        assert_eq!(DeadReason::AttemptsExhausted.as_str(), "attempts_exhausted");
        assert_eq!(DeadReason::parse("nope"), None);
    }

    // --- after_failure -------------------------------------------------------------------

    #[test]
    fn non_retryable_wins_over_exhausted_and_expired() {
        let p = RetryPolicy::preset(Preset::Eventarc);
        let next = p.after_failure(Failure::Status(400), 5, 90_000 * S, None, None, 0.0);
        assert_eq!(next, Next::Dead(DeadReason::NonRetryable));
        let next = p.after_failure(Failure::BlockedTarget, 1, 0, None, None, 0.0);
        assert_eq!(next, Next::Dead(DeadReason::NonRetryable));
    }

    #[test]
    fn exhausted_exactly_at_max_attempts_and_before_expired() {
        let p = RetryPolicy::preset(Preset::Eventarc);
        assert_eq!(p.after_failure(Failure::Timeout, 4, 0, None, None, 0.0), Next::RetryInMs(8 * S));
        let exhausted = Next::Dead(DeadReason::AttemptsExhausted);
        assert_eq!(p.after_failure(Failure::Timeout, 5, 0, None, None, 0.0), exhausted);
        assert_eq!(p.after_failure(Failure::Timeout, 6, 90_000 * S, None, None, 0.0), exhausted);
    }

    #[test]
    fn ttl_expiry() {
        let fixed = Schedule::Fixed { delays_secs: vec![10], jitter: 0.0 };
        let p = custom(fixed, 10, 100, RetryOn::All);
        let expired = Next::Dead(DeadReason::Expired);
        // Landing exactly on the TTL is still allowed; one millisecond later is not.
        assert_eq!(p.after_failure(Failure::Connect, 1, 90 * S, None, None, 0.0), Next::RetryInMs(10 * S));
        assert_eq!(p.after_failure(Failure::Connect, 1, 90 * S + 1, None, None, 0.0), expired);
        assert_eq!(p.after_failure(Failure::Connect, 1, 100 * S + 1, None, Some(0), 0.0), expired);
        assert!(!p.is_expired(100 * S));
        assert!(p.is_expired(100 * S + 1));
    }

    #[test]
    fn retry_after_is_honoured_for_429_and_503_and_clamped_to_the_ttl() {
        let p = RetryPolicy::default_policy();
        let ttl = 86_400 * S;
        let next = p.after_failure(Failure::Status(503), 1, 0, None, Some(20 * S), 1.0);
        assert_eq!(next, Next::RetryInMs(20 * S));
        let next = p.after_failure(Failure::Status(429), 1, ttl - 5 * S, None, Some(60 * S), 0.0);
        assert_eq!(next, Next::RetryInMs(5 * S));
        // Ignored for any other status: the schedule applies.
        let next = p.after_failure(Failure::Status(500), 1, 0, None, Some(60 * S), 0.0);
        assert_eq!(next, Next::RetryInMs(10 * S));
        let next = p.after_failure(Failure::Timeout, 2, 0, None, Some(60 * S), 0.0);
        assert_eq!(next, Next::RetryInMs(30 * S));
    }

    #[test]
    fn retry_after_only_lengthens_the_wait() {
        let p = RetryPolicy::default_policy();
        assert_eq!(p.after_failure(Failure::Status(503), 1, 0, Some(0), Some(0), 0.0), Next::RetryInMs(10 * S));
        assert_eq!(p.after_failure(Failure::Status(429), 2, 0, None, Some(5 * S), 0.0), Next::RetryInMs(30 * S));
        assert_eq!(p.after_failure(Failure::Status(429), 2, 0, None, Some(45 * S), 0.0), Next::RetryInMs(45 * S));
    }

    #[test]
    fn retries_are_due_from_the_first_failure_however_long_the_attempts_took() {
        let p = RetryPolicy::preset(Preset::Workfront);
        let unit = WORKFRONT_UNIT_MS;
        // The first failure starts the schedule: retry 1 is one unit later.
        assert_eq!(p.after_failure(Failure::Timeout, 1, 0, Some(0), None, 0.0), Next::RetryInMs(unit));
        // Retry 3 is due 7 units after the first failure; retry 2, due 3 units after it, took 50 s
        // to fail, which does not move retry 3.
        let since = 3 * unit + 50 * S;
        assert_eq!(
            p.after_failure(Failure::Timeout, 3, since, Some(since), None, 0.0),
            Next::RetryInMs(7 * unit - since)
        );
        // A retry whose time has passed is due at once.
        let late = 8 * unit;
        assert_eq!(p.after_failure(Failure::Timeout, 3, late, Some(late), None, 0.0), Next::RetryInMs(0));
    }

    #[test]
    fn retry_after_does_not_revive_a_non_retryable_status() {
        let p = with_retry_on(RetryOn::Codes(vec![500]));
        let next = p.after_failure(Failure::Status(429), 1, 0, None, Some(S), 0.0);
        assert_eq!(next, Next::Dead(DeadReason::NonRetryable));
    }

    #[test]
    fn event_grid_jitter_is_ten_percent_either_way() {
        let p = RetryPolicy::default_policy();
        assert_eq!(p.after_failure(Failure::Other, 1, 0, None, None, -1.0), Next::RetryInMs(9 * S));
        assert_eq!(p.after_failure(Failure::Other, 1, 0, None, None, 1.0), Next::RetryInMs(11 * S));
        assert_eq!(p.after_failure(Failure::Other, 1, 0, None, None, 0.5), Next::RetryInMs(10_500));
        assert_eq!(p.after_failure(Failure::Other, 7, 0, None, None, 1.0), Next::RetryInMs(3_960 * S));
        // Out-of-range units are clamped rather than trusted.
        assert_eq!(p.after_failure(Failure::Other, 1, 0, None, None, 7.0), Next::RetryInMs(11 * S));
        assert_eq!(p.after_failure(Failure::Other, 1, 0, None, None, f64::NAN), Next::RetryInMs(10 * S));
    }

    // --- parsing -------------------------------------------------------------------------

    #[test]
    fn parses_a_bare_preset_name() {
        for preset in Preset::ALL {
            let parsed = RetryPolicy::parse(&json!(preset.as_str()), "retry_policy");
            assert_eq!(parsed, Ok(RetryPolicy::preset(preset)));
        }
        assert_eq!(error_fields(json!("hourly")), vec!["retry_policy"]);
        assert_eq!(error_fields(json!(5)), vec!["retry_policy"]);
    }

    #[test]
    fn preset_object_with_overrides() {
        let v = json!({"kind": "workfront", "max_attempts": 3, "retry_on": [503, 409, 503]});
        let p = RetryPolicy::parse(&v, "retry_policy").unwrap();
        assert_eq!(p.schedule, Schedule::Preset(Preset::Workfront));
        assert_eq!((p.max_attempts, p.ttl_secs), (3, 180_000));
        assert_eq!(p.retry_on, RetryOn::Codes(vec![409, 503]));
        let p = RetryPolicy::parse(&json!({"kind": "eventarc"}), "p").unwrap();
        assert_eq!(p, RetryPolicy::preset(Preset::Eventarc));
        // Presets take no schedule fields.
        assert_eq!(error_fields(json!({"kind": "eventarc", "jitter": 0.1})), vec!["retry_policy.jitter"]);
    }

    #[test]
    fn custom_kinds_get_defaults() {
        let v = json!({"kind": "exponential", "min_delay_secs": 1, "max_delay_secs": 60});
        let p = RetryPolicy::parse(&v, "retry_policy").unwrap();
        assert_eq!((p.max_attempts, p.ttl_secs, &p.retry_on), (10, 86_400, &RetryOn::All));
        let v = json!({"kind": "schedule", "delays_secs": [1, 2], "retry_on": "transient"});
        let p = RetryPolicy::parse(&v, "retry_policy").unwrap();
        assert_eq!(p.schedule, Schedule::Fixed { delays_secs: vec![1, 2], jitter: 0.0 });
        assert_eq!(p.retry_on, RetryOn::Transient);
    }

    #[test]
    fn min_greater_than_max_is_an_error_on_min() {
        let v = json!({"kind": "exponential", "min_delay_secs": 60, "max_delay_secs": 10});
        assert_eq!(error_fields(v), vec!["retry_policy.min_delay_secs"]);
    }

    #[test]
    fn unknown_kind_and_wrong_kind_type() {
        assert_eq!(error_fields(json!({"kind": "linear"})), vec!["retry_policy.kind"]);
        assert_eq!(error_fields(json!({"kind": 3})), vec!["retry_policy.kind"]);
        assert_eq!(error_fields(json!({"max_attempts": 3})), vec!["retry_policy.kind"]);
    }

    #[test]
    fn string_where_a_number_belongs() {
        let v = json!({"kind": "exponential", "min_delay_secs": "1", "max_delay_secs": 1.5});
        assert_eq!(error_fields(v), vec!["retry_policy.min_delay_secs", "retry_policy.max_delay_secs"]);
    }

    #[test]
    fn unknown_field() {
        let v = json!({"kind": "schedule", "delays_secs": [1], "factor": 3});
        assert_eq!(error_fields(v), vec!["retry_policy.factor"]);
    }

    #[test]
    fn out_of_range_values() {
        let base = || json!({"kind": "schedule", "delays_secs": [1]});
        let cases = [
            ("jitter", json!(0.6)),
            ("jitter", json!(-0.1)),
            ("max_attempts", json!(0)),
            ("max_attempts", json!(101)),
            ("max_attempts", json!(-1)),
            ("ttl_secs", json!(604_801)),
            ("ttl_secs", json!(0)),
            ("retry_on", json!([])),
            ("retry_on", json!("sometimes")),
            ("delays_secs", json!([])),
            ("delays_secs", json!(5)),
        ];
        for (key, bad) in cases {
            let mut v = base();
            v[key] = bad.clone();
            assert_eq!(error_fields(v), vec![format!("retry_policy.{key}")], "{key} = {bad}");
        }
        let mut v = base();
        v["max_attempts"] = json!(100);
        v["ttl_secs"] = json!(604_800);
        v["jitter"] = json!(0.5);
        assert!(RetryPolicy::parse(&v, "retry_policy").is_ok(), "bounds are inclusive");
    }

    #[test]
    fn list_items_are_named_by_index_and_all_errors_are_collected() {
        let v = json!({
            "kind": "schedule",
            "delays_secs": [10, 20, 0, "x"],
            "jitter": 0.6,
            "retry_on": [200, 99, 600],
            "extra": true
        });
        let mut fields = error_fields(v);
        fields.sort();
        assert_eq!(
            fields,
            vec![
                "retry_policy.delays_secs[2]",
                "retry_policy.delays_secs[3]",
                "retry_policy.extra",
                "retry_policy.jitter",
                "retry_policy.retry_on[1]",
                "retry_policy.retry_on[2]",
            ]
        );
        let too_many = json!({"kind": "schedule", "delays_secs": vec![1; 101]});
        assert_eq!(error_fields(too_many), vec!["retry_policy.delays_secs"]);
        let too_many = json!({"kind": "eventarc", "retry_on": (100..151).collect::<Vec<u16>>()});
        assert_eq!(error_fields(too_many), vec!["retry_policy.retry_on"]);
    }

    #[test]
    fn missing_required_fields() {
        let v = json!({"kind": "exponential", "max_delay_secs": 10});
        assert_eq!(error_fields(v), vec!["retry_policy.min_delay_secs"]);
        assert_eq!(error_fields(json!({"kind": "schedule"})), vec!["retry_policy.delays_secs"]);
    }

    #[test]
    fn canonical_json_and_round_trip() {
        let wf = RetryPolicy::preset(Preset::Workfront);
        assert_eq!(
            wf.to_json(),
            json!({"kind": "workfront", "max_attempts": 12, "ttl_secs": 180_000, "retry_on": "all"})
        );
        let policies = [
            wf,
            RetryPolicy::default_policy(),
            RetryPolicy::preset(Preset::Eventarc),
            custom(
                Schedule::Exponential { min_delay_secs: 3, max_delay_secs: 90 },
                7,
                600,
                RetryOn::Codes(vec![429, 503]),
            ),
            custom(Schedule::Fixed { delays_secs: vec![1, 30, 300], jitter: 0.25 }, 100, 604_800, RetryOn::Transient),
        ];
        for p in policies {
            assert_eq!(RetryPolicy::parse(&p.to_json(), "retry_policy"), Ok(p));
        }
    }

    // --- properties ----------------------------------------------------------------------

    fn retry_on_strategy() -> impl Strategy<Value = RetryOn> {
        prop_oneof![
            Just(RetryOn::All),
            Just(RetryOn::Transient),
            prop::collection::btree_set(100u16..=599, 1..=50)
                .prop_map(|codes| RetryOn::Codes(codes.into_iter().collect())),
        ]
    }

    fn exponential_strategy() -> impl Strategy<Value = RetryPolicy> {
        (1u32..=600, 1u32..=600, 1u32..=100, 1u32..=604_800, retry_on_strategy()).prop_map(
            |(a, b, max_attempts, ttl_secs, retry_on)| {
                let schedule = Schedule::Exponential { min_delay_secs: a.min(b), max_delay_secs: a.max(b) };
                custom(schedule, max_attempts, ttl_secs, retry_on)
            },
        )
    }

    fn fixed_strategy() -> impl Strategy<Value = RetryPolicy> {
        let delays = prop::collection::vec(1u32..=604_800, 1..=100);
        (delays, 0.0..=0.5f64, 1u32..=100, 1u32..=604_800, retry_on_strategy()).prop_map(
            |(delays_secs, jitter, max_attempts, ttl_secs, retry_on)| {
                custom(Schedule::Fixed { delays_secs, jitter }, max_attempts, ttl_secs, retry_on)
            },
        )
    }

    fn policy_strategy() -> impl Strategy<Value = RetryPolicy> {
        prop_oneof![exponential_strategy(), fixed_strategy()]
    }

    fn failure_strategy() -> impl Strategy<Value = Failure> {
        prop_oneof![
            (100u16..=599).prop_map(Failure::Status),
            Just(Failure::Status(429)),
            Just(Failure::Status(503)),
            Just(Failure::Timeout),
            Just(Failure::Connect),
            Just(Failure::Other),
        ]
    }

    proptest! {
        #[test]
        fn preview_respects_max_attempts_and_ttl(p in policy_strategy()) {
            let preview = p.preview();
            prop_assert!(preview.len() <= p.max_attempts as usize);
            prop_assert_eq!(preview[0], (1, 0));
            for (i, &(attempt, offset)) in preview.iter().enumerate() {
                prop_assert_eq!(attempt as usize, i + 1);
                prop_assert!(offset <= u64::from(p.ttl_secs) * 1_000);
            }
        }

        #[test]
        fn exponential_delays_never_shrink(p in exponential_strategy()) {
            for n in 1..150 {
                prop_assert!(p.base_delay_ms(n) <= p.base_delay_ms(n + 1));
            }
        }

        #[test]
        fn never_retries_once_attempts_are_spent(
            p in policy_strategy(),
            failure in failure_strategy(),
            extra in 0u32..5,
            age_ms in 0u64..700_000_000,
            retry_after_ms in prop::option::of(0u64..1_000_000_000),
            unit in -1.0..=1.0f64,
        ) {
            let next = p.after_failure(failure, p.max_attempts + extra, age_ms, None, retry_after_ms, unit);
            prop_assert!(!matches!(next, Next::RetryInMs(_)));
        }

        #[test]
        fn retry_delay_is_jittered_base_or_clamped_retry_after(
            p in policy_strategy(),
            failure in failure_strategy(),
            attempts_made in 1u32..100,
            age_ms in 0u64..700_000_000,
            retry_after_ms in prop::option::of(0u64..1_000_000_000),
            unit in -1.0..=1.0f64,
        ) {
            let Next::RetryInMs(delay) =
                p.after_failure(failure, attempts_made, age_ms, None, retry_after_ms, unit)
            else {
                return Ok(());
            };
            let ttl_ms = u64::from(p.ttl_secs) * 1_000;
            prop_assert!(age_ms + delay <= ttl_ms, "never past the TTL");
            let honoured = matches!(failure, Failure::Status(429 | 503));
            let base = p.base_delay_ms(attempts_made) as f64;
            let spread = base * p.jitter_fraction() + 0.5;
            match retry_after_ms {
                Some(wait) if honoured => {
                    let remaining = ttl_ms - age_ms;
                    prop_assert!(delay >= wait.min(remaining), "Retry-After only lengthens the wait");
                    prop_assert!(delay as f64 >= (base - spread).min(remaining as f64), "nor shortens the policy's");
                }
                _ => prop_assert!((delay as f64 - base).abs() <= spread, "{} vs {}", delay, base),
            }
        }

        #[test]
        fn a_retry_is_due_at_the_first_failure_plus_the_delays_so_far(
            p in policy_strategy(),
            attempts_made in 1u32..60,
            since_first_failure_ms in 0u64..400_000_000,
            unit in -1.0..=1.0f64,
        ) {
            let next = p.after_failure(
                Failure::Timeout, attempts_made, since_first_failure_ms, Some(since_first_failure_ms), None, unit,
            );
            let Next::RetryInMs(delay) = next else { return Ok(()) };
            let base = p.base_delay_ms(attempts_made) as f64;
            let spread = base * p.jitter_fraction() + 0.5;
            let due = (p.offset_ms(attempts_made - 1) as f64 + base, spread);
            if delay > 0 {
                let at = (since_first_failure_ms + delay) as f64;
                prop_assert!((at - due.0).abs() <= due.1, "due {} after the first failure, not {}", at, due.0);
            } else {
                prop_assert!(since_first_failure_ms as f64 >= due.0 - due.1, "due at once only when its time has passed");
            }
        }

        #[test]
        fn json_round_trips(p in policy_strategy()) {
            prop_assert_eq!(RetryPolicy::parse(&p.to_json(), "retry_policy"), Ok(p));
        }
    }
}
