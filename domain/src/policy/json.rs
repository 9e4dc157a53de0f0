//! A policy as JSON: the client's forms read with every error at once, and the canonical form stored.

use std::ops::RangeInclusive;

use serde_json::{Value, json};

use super::{Preset, RetryOn, RetryPolicy, Schedule};
use crate::errors::FieldError;
use crate::input::{Fields, whole_number};

// Accepted ranges (the OpenAPI document's retry policy schema states them too).
pub(super) const DELAY_RANGE: RangeInclusive<u32> = 1..=600;
pub(super) const MAX_ATTEMPTS_RANGE: RangeInclusive<u32> = 1..=100;
pub(super) const TTL_RANGE: RangeInclusive<u32> = 1..=604_800;
pub(super) const FIXED_DELAY_RANGE: RangeInclusive<u32> = 1..=604_800;
pub(super) const STATUS_RANGE: RangeInclusive<u32> = 100..=599;
pub(super) const MAX_FIXED_DELAYS: usize = 100;
pub(super) const MAX_CODES: usize = 50;
pub(super) const MAX_JITTER: f64 = 0.5;

// Defaults for the custom kinds.
const CUSTOM_MAX_ATTEMPTS: u32 = 10;
const CUSTOM_TTL_SECS: u32 = 86_400;

const KIND_HINT: &str = "expected workfront, event-grid, eventarc, exponential or schedule";

impl RetryPolicy {
    /// Parses the client's JSON `retry_policy`: a preset name, `{"kind": <preset>, …overrides}`,
    /// `{"kind":"exponential", …}` or `{"kind":"schedule", …}`. Every error is named under
    /// `prefix` (`retry_policy.min_delay_secs`), and all of them are reported at once.
    pub fn parse(value: &Value, prefix: &str) -> Result<RetryPolicy, Vec<FieldError>> {
        match value {
            Value::String(name) => match Preset::parse(name) {
                Some(p) => Ok(Self::preset(p)),
                None => err(prefix, format!("unknown preset `{name}`; {KIND_HINT}")),
            },
            Value::Object(_) => parse_object(value, prefix),
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
}

#[derive(Clone, Copy)]
enum Kind {
    Preset(Preset),
    Exponential,
    Fixed,
}

type Parsed<T> = Result<T, Vec<FieldError>>;

fn err<T>(field: &str, message: impl Into<String>) -> Parsed<T> {
    Err(vec![FieldError::new(field, message)])
}

fn parse_object(value: &Value, prefix: &str) -> Parsed<RetryPolicy> {
    let mut f = Fields::new(value, prefix)?;
    let kind = f.read_with("kind", true, parse_kind);
    // Presets keep their own numbers unless overridden; custom kinds get the generic defaults.
    let (default_attempts, default_ttl, default_retry_on) = match kind {
        Some(Kind::Preset(p)) => {
            let p = RetryPolicy::preset(p);
            (p.max_attempts, p.ttl_secs, p.retry_on)
        }
        _ => (CUSTOM_MAX_ATTEMPTS, CUSTOM_TTL_SECS, RetryOn::All),
    };
    // A field that breaks its rule leaves an error, so its default is never used.
    let max_attempts = f
        .read_with("max_attempts", false, |v, name| parse_int(v, name, MAX_ATTEMPTS_RANGE))
        .unwrap_or(default_attempts);
    let ttl_secs = f.read_with("ttl_secs", false, |v, name| parse_int(v, name, TTL_RANGE)).unwrap_or(default_ttl);
    let retry_on = f.read_with("retry_on", false, parse_retry_on).unwrap_or(default_retry_on);
    let schedule = match kind {
        Some(Kind::Preset(p)) => Some(Schedule::Preset(p)),
        Some(Kind::Exponential) => exponential(&mut f),
        Some(Kind::Fixed) => fixed(&mut f),
        // Without a kind, which fields belong is unknown: none is called unknown.
        None => return Err(f.errors),
    };
    match (schedule, f.finish()) {
        (Some(schedule), Ok(())) => Ok(RetryPolicy { schedule, max_attempts, ttl_secs, retry_on }),
        // A missing schedule left its error.
        (_, finished) => Err(finished.err().unwrap_or_default()),
    }
}

/// Both bounds are read before giving up, so that neither is called unknown.
fn exponential(f: &mut Fields) -> Option<Schedule> {
    let min = f.read_with("min_delay_secs", true, |v, name| parse_int(v, name, DELAY_RANGE));
    let max = f.read_with("max_delay_secs", true, |v, name| parse_int(v, name, DELAY_RANGE));
    let (min_delay_secs, max_delay_secs) = (min?, max?);
    if min_delay_secs > max_delay_secs {
        f.error("min_delay_secs", "must not be greater than max_delay_secs");
        return None;
    }
    Some(Schedule::Exponential { min_delay_secs, max_delay_secs })
}

/// Both fields are read before giving up, so that neither is called unknown.
fn fixed(f: &mut Fields) -> Option<Schedule> {
    let delays_secs = f.read_with("delays_secs", true, parse_delays);
    let jitter = f.read_with("jitter", false, parse_jitter).unwrap_or(0.0);
    Some(Schedule::Fixed { delays_secs: delays_secs?, jitter })
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

#[cfg(test)]
mod tests {
    use super::super::tests::{custom, policy_strategy};
    use super::*;
    use proptest::prelude::*;

    fn errors(value: Value) -> Vec<FieldError> {
        RetryPolicy::parse(&value, "retry_policy").expect_err("should be rejected")
    }

    fn error_fields(value: Value) -> Vec<String> {
        errors(value).into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn parses_a_bare_preset_name() {
        for &preset in Preset::ALL {
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
        assert_eq!(errors(v), vec![FieldError::new("retry_policy.factor", "is not a known field")]);
        // Without a kind, the other fields are neither known nor unknown.
        let v = json!({"kind": "linear", "min_delay_secs": 1, "factor": 3});
        assert_eq!(error_fields(v), vec!["retry_policy.kind"]);
        let v = json!({"max_attempts": 3, "factor": 3});
        assert_eq!(errors(v), vec![FieldError::new("retry_policy.kind", "is required")]);
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

    proptest! {
        #[test]
        fn json_round_trips(p in policy_strategy()) {
            prop_assert_eq!(RetryPolicy::parse(&p.to_json(), "retry_policy"), Ok(p));
        }
    }
}
