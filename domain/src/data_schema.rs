//! The event-type catalog's schemas: a JSON Schema (draft 2020-12) for the
//! `data` of the events of one type, compiled once and checked on every event
//! of that type that is published. No reference outside the schema is fetched.
//!
//! A `pattern` is matched by fancy-regex, which follows ECMAScript's look-around
//! and back-references by backtracking. Backtracking can take exponential time,
//! and every publish of the customer's events waits for its check, so a match
//! may take at most [`PATTERN_BACKTRACK_LIMIT`] steps: one that needs more is
//! undecided, and the data is refused with a message that says so. Patterns
//! without look-around or back-references run in linear time and never reach it.

use base64::Engine;
use jsonschema::{PatternOptions, Validator};
use serde_json::Value;

use crate::event::{CloudEvent, is_json_type};

/// Backtracking steps a `pattern` may take on one string; fancy-regex's own default, 1 000 000, is
/// a hundred times as long for each string of each event.
pub const PATTERN_BACKTRACK_LIMIT: usize = 10_000;

/// A schema that compiled.
pub struct DataSchema {
    validator: Validator,
}

impl std::fmt::Debug for DataSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DataSchema")
    }
}

impl DataSchema {
    /// Compiles a schema, or says why it is not valid JSON Schema draft 2020-12.
    pub fn compile(schema: &Value) -> Result<DataSchema, String> {
        if !(schema.is_object() || schema.is_boolean()) {
            return Err("must be a JSON Schema (draft 2020-12): an object or a boolean".into());
        }
        if let Err(error) = jsonschema::draft202012::meta::validate(schema) {
            return Err(format!("is not valid JSON Schema (draft 2020-12): {error} at {}", pointer(&error)));
        }
        jsonschema::draft202012::options()
            .offline()
            .with_pattern_options(PatternOptions::fancy_regex().backtrack_limit(PATTERN_BACKTRACK_LIMIT))
            .build(schema)
            .map(|validator| DataSchema { validator })
            .map_err(|error| format!("is not valid JSON Schema (draft 2020-12): {error}"))
    }

    /// Why `data` breaks the schema: one message per failing part, each naming its JSON pointer.
    pub fn check(&self, data: &Value) -> Vec<String> {
        let mut errors: Vec<String> = self
            .validator
            .iter_errors(data)
            .take(MAX_ERRORS + 1)
            .map(|error| shortened(format!("at {}: {error}", pointer(&error))))
            .collect();
        if errors.len() > MAX_ERRORS {
            errors.truncate(MAX_ERRORS);
            errors.push(format!("(only the first {MAX_ERRORS} failing parts are listed)"));
        }
        errors
    }

    /// Why the event's data breaks the schema. Data sent as base64 with a JSON `datacontenttype` is
    /// checked as the JSON it encodes; other base64 data (bytes, `application/octet-stream` when
    /// undeclared) as its base64 text, a JSON string; an event without data as `null`.
    pub fn check_event(&self, event: &CloudEvent) -> Vec<String> {
        let attributes = event.attributes();
        if let Some(data) = attributes.get("data") {
            return self.check(data);
        }
        let Some(encoded) = attributes.get("data_base64").and_then(Value::as_str) else {
            return self.check(&Value::Null);
        };
        let declared = attributes.get("datacontenttype").and_then(Value::as_str);
        let decoded = base64::engine::general_purpose::STANDARD.decode(encoded).ok();
        match decoded.and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok()) {
            Some(data) if declared.is_some_and(is_json_type) => self.check(&data),
            _ => self.check(&Value::String(encoded.to_string())),
        }
    }
}

/// Failing parts listed per event at most, so that a refusal stays small however large the data.
const MAX_ERRORS: usize = 10;
/// The longest message of one failing part (it quotes the failing value).
const MAX_MESSAGE: usize = 300;

fn shortened(mut message: String) -> String {
    if message.len() > MAX_MESSAGE {
        let mut end = MAX_MESSAGE;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    message
}

/// Where an error is, as a JSON pointer (`/items/0/price`); the whole value is `/`.
fn pointer(error: &jsonschema::ValidationError<'_>) -> String {
    let path = error.instance_path().as_str();
    if path.is_empty() { "/".to_string() } else { path.to_string() }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn order_schema() -> DataSchema {
        DataSchema::compile(&json!({
            "type": "object",
            "required": ["total"],
            "properties": {"total": {"type": "number"}, "items": {"type": "array", "items": {"type": "string"}}},
        }))
        .expect("a valid schema")
    }

    #[test]
    fn each_failing_part_is_named_by_its_pointer() {
        let schema = order_schema();
        assert!(schema.check(&json!({"total": 3})).is_empty());
        let errors = schema.check(&json!({"total": "x", "items": ["a", 2]}));
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors.iter().any(|e| e.starts_with("at /total:")), "{errors:?}");
        assert!(errors.iter().any(|e| e.starts_with("at /items/1:")), "{errors:?}");
        assert!(schema.check(&json!({}))[0].starts_with("at /:"), "a missing property is the object's");
    }

    #[test]
    fn a_refusal_stays_small() {
        let schema = DataSchema::compile(&json!({"type": "array", "items": {"type": "string"}})).unwrap();
        let errors = schema.check(&json!((0..50).collect::<Vec<_>>()));
        assert_eq!(errors.len(), MAX_ERRORS + 1, "ten parts, then a note: {errors:?}");
        let long = DataSchema::compile(&json!({"type": "number"})).unwrap().check(&json!("x".repeat(5000)));
        assert!(long[0].len() <= MAX_MESSAGE + 3, "{}", long[0].len());
    }

    #[test]
    fn what_is_not_json_schema_is_refused() {
        assert!(DataSchema::compile(&json!({"type": "not-a-type"})).unwrap_err().contains("JSON Schema"));
        assert!(DataSchema::compile(&json!({"minimum": "five"})).is_err());
        assert!(DataSchema::compile(&json!([1, 2])).is_err());
        assert!(DataSchema::compile(&json!(true)).is_ok());
    }

    #[test]
    fn a_pattern_that_backtracks_past_the_limit_is_undecided_and_refused() {
        // Proving that no `a`-run ends in `b` backtracks through every split of the run: ~2^n steps.
        let schema = DataSchema::compile(&json!({"type": "string", "pattern": "^(?!(a|aa)*(?=b))"})).unwrap();
        assert!(schema.check(&json!("a".repeat(8))).is_empty(), "a short run is decided: it matches");
        let errors = schema.check(&json!("a".repeat(22)));
        assert_eq!(errors.len(), 1, "a long run is not decided within the limit: {errors:?}");
        assert!(errors[0].contains("backtracking"), "{errors:?}");
    }

    #[test]
    fn a_remote_reference_is_not_fetched() {
        assert!(DataSchema::compile(&json!({"$ref": "https://example.com/order.json"})).is_err());
    }

    #[test]
    fn an_event_is_checked_by_its_data() {
        let schema = order_schema();
        let event = |extra: Value| {
            let mut e = json!({"specversion": "1.0", "id": "1", "source": "/s", "type": "order.created"});
            e.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            CloudEvent::parse(e, "").unwrap()
        };
        assert!(schema.check_event(&event(json!({"data": {"total": 1}}))).is_empty());
        assert!(!schema.check_event(&event(json!({}))).is_empty(), "no data is null, which is not an object");
        let encoded = base64::engine::general_purpose::STANDARD.encode(br#"{"total": 2}"#);
        let declared = json!({"data_base64": encoded, "datacontenttype": "application/json"});
        assert!(schema.check_event(&event(declared)).is_empty());
        assert!(!schema.check_event(&event(json!({"data_base64": encoded}))).is_empty(), "undeclared: bytes");
        assert!(!schema.check_event(&event(json!({"data_base64": "AQID"}))).is_empty(), "bytes are not an object");
        let anything = DataSchema::compile(&json!({})).unwrap();
        assert!(anything.check_event(&event(json!({"data_base64": "AQID"}))).is_empty(), "but are something");
    }
}
