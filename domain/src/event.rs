//! CloudEvents 1.0: parsing a published event at the edge, and rendering it for
//! the HTTP binding's structured and binary content modes.

use base64::Engine;
use serde_json::{Map, Value};

use super::errors::FieldError;
use super::operational;

/// The longest id, source or type Herald accepts.
pub const MAX_ATTRIBUTE_LEN: usize = 1024;

/// The most events one batch publishes.
pub const MAX_BATCH: usize = 1000;

/// The attributes every event has; the others are optional.
const REQUIRED_ATTRIBUTES: &[&str] = &["specversion", "id", "source", "type"];

const CONTEXT_ATTRIBUTES: &[&str] =
    &["specversion", "id", "source", "type", "datacontenttype", "dataschema", "subject", "time"];

/// A CloudEvent that passed validation. `raw` is the event exactly as published.
#[derive(Debug, Clone, PartialEq)]
pub struct CloudEvent {
    raw: Map<String, Value>,
}

impl CloudEvent {
    /// Validates a JSON value as a CloudEvent 1.0. Field names in errors are
    /// prefixed (`events[3].id` in a batch, `id` for a single event).
    pub fn parse(value: Value, prefix: &str) -> Result<CloudEvent, Vec<FieldError>> {
        let field = |name: &str| if prefix.is_empty() { name.to_string() } else { format!("{prefix}.{name}") };
        let Value::Object(mut raw) = value else {
            let name = if prefix.is_empty() { "body" } else { prefix };
            return Err(vec![FieldError::new(name, "a CloudEvent must be a JSON object")]);
        };
        // In the JSON format an optional attribute (an extension too) whose value is null is absent.
        if raw.values().any(Value::is_null) {
            raw.retain(|name, value| !value.is_null() || REQUIRED_ATTRIBUTES.contains(&name.as_str()) || is_data(name));
        }
        let mut errors = Vec::new();
        match raw.get("specversion") {
            Some(Value::String(v)) if v == "1.0" => {}
            Some(_) => errors.push(FieldError::new(field("specversion"), "must be \"1.0\"")),
            None => errors.push(FieldError::new(field("specversion"), "is required")),
        }
        for name in ["id", "source", "type"] {
            match raw.get(name) {
                Some(Value::String(v)) if v.len() > MAX_ATTRIBUTE_LEN => {
                    errors.push(FieldError::new(field(name), format!("must be at most {MAX_ATTRIBUTE_LEN} bytes")))
                }
                Some(Value::String(v)) => {
                    check_string(v, &field(name), &mut errors);
                }
                Some(_) => errors.push(FieldError::new(field(name), "must be a string")),
                None => errors.push(FieldError::new(field(name), "is required")),
            }
        }
        for name in ["datacontenttype", "dataschema", "subject"] {
            let Some(value) = raw.get(name) else { continue };
            let Value::String(text) = value else {
                errors.push(FieldError::new(field(name), "must be a string"));
                continue;
            };
            if check_string(text, &field(name), &mut errors) && name == "datacontenttype" && !is_media_type(text) {
                let why =
                    "must be a media type, type/subtype with optional parameters (application/json; charset=utf-8)";
                errors.push(FieldError::new(field(name), why));
            }
        }
        if let Some(time) = raw.get("time") {
            let valid = time.as_str().is_some_and(|t| chrono::DateTime::parse_from_rfc3339(t).is_ok());
            if !valid {
                errors.push(FieldError::new(field("time"), "must be an RFC 3339 timestamp"));
            }
        }
        if raw.contains_key("data") && raw.contains_key("data_base64") {
            errors.push(FieldError::new(field("data_base64"), "must not be given together with data"));
        }
        if let Some(encoded) = raw.get("data_base64") {
            let valid = encoded.as_str().is_some_and(|s| base64::engine::general_purpose::STANDARD.decode(s).is_ok());
            if !valid {
                errors.push(FieldError::new(field("data_base64"), "must be a base64 string"));
            }
        }
        for (name, value) in &raw {
            if CONTEXT_ATTRIBUTES.contains(&name.as_str()) || is_data(name) {
                continue;
            }
            // An empty name is shown quoted, so that the error still names a field.
            let shown = if name.is_empty() { field("\"\"") } else { field(name) };
            if !is_extension_name(name) {
                errors.push(FieldError::new(shown, "extension names are 1 to 20 lowercase letters or digits"));
            } else if let Value::String(text) = value {
                if text.chars().any(is_control) {
                    errors.push(FieldError::new(shown, "must not contain control characters"));
                }
            } else if !(value.is_number() || value.is_boolean()) {
                errors.push(FieldError::new(shown, "an extension value must be a string, number or boolean"));
            }
        }
        if errors.is_empty() { Ok(CloudEvent { raw }) } else { Err(errors) }
    }

    fn text(&self, name: &str) -> Option<&str> {
        self.raw.get(name).and_then(Value::as_str)
    }

    pub fn id(&self) -> &str {
        self.text("id").unwrap_or_default()
    }
    pub fn source(&self) -> &str {
        self.text("source").unwrap_or_default()
    }
    pub fn event_type(&self) -> &str {
        self.text("type").unwrap_or_default()
    }

    /// The event's attributes, extensions and data, as published.
    pub fn attributes(&self) -> &Map<String, Value> {
        &self.raw
    }

    /// The event as published.
    pub fn to_json(&self) -> Value {
        Value::Object(self.raw.clone())
    }

    /// The event as stored, and sent in the structured content mode: compact JSON, written
    /// straight from the parsed attributes (no copy of them is made).
    pub fn stored_text(&self) -> String {
        serde_json::to_string(&self.raw).expect("a JSON map serializes")
    }

    /// Rebuilds an event that was validated before it was stored.
    pub fn from_stored(value: Value) -> Option<CloudEvent> {
        match value {
            Value::Object(raw) => Some(CloudEvent { raw }),
            _ => None,
        }
    }

    /// Binary content mode: `ce-*` headers, the content type, and the data alone as the body.
    pub fn binary(&self) -> BinaryMessage {
        let mut headers = Vec::new();
        for (name, value) in &self.raw {
            if name == "data" || name == "data_base64" || name == "datacontenttype" {
                continue;
            }
            let text = match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            headers.push((format!("ce-{name}"), percent_encode_header(&text)));
        }
        let declared = self.text("datacontenttype").map(str::to_string);
        let (content_type, body) = if let Some(encoded) = self.text("data_base64") {
            let bytes = base64::engine::general_purpose::STANDARD.decode(encoded).unwrap_or_default();
            (declared.unwrap_or_else(|| "application/octet-stream".into()), bytes)
        } else {
            match self.raw.get("data") {
                None => (declared.unwrap_or_default(), Vec::new()),
                Some(Value::String(s)) if declared.as_deref().is_some_and(|ct| !is_json_type(ct)) => {
                    (declared.unwrap_or_default(), s.clone().into_bytes())
                }
                Some(data) => (
                    declared.unwrap_or_else(|| "application/json".into()),
                    serde_json::to_vec(data).unwrap_or_default(),
                ),
            }
        };
        BinaryMessage { headers, content_type, body }
    }
}

/// A CloudEvent in binary content mode.
#[derive(Debug, Clone, PartialEq)]
pub struct BinaryMessage {
    pub headers: Vec<(String, String)>,
    /// Empty when the event has neither data nor a declared content type.
    pub content_type: String,
    pub body: Vec<u8>,
}

/// CloudEvents strings are non-empty here and hold no control characters (U+0000–U+001F,
/// U+007F–U+009F), which could never travel in a binary-mode header.
/// Whether it is such a string; when not, the error is pushed.
fn check_string(value: &str, field: &str, errors: &mut Vec<FieldError>) -> bool {
    let why = if value.is_empty() {
        "must not be empty"
    } else if value.chars().any(is_control) {
        "must not contain control characters (such as NUL or a line break)"
    } else {
        return true;
    };
    errors.push(FieldError::new(field, why));
    false
}

fn is_control(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}')
}

/// The members that carry the event's data rather than an attribute.
fn is_data(name: &str) -> bool {
    name == "data" || name == "data_base64"
}

/// A byte of an HTTP token (RFC 9110), as media types and their parameters are written.
fn is_tchar(b: u8) -> bool {
    matches!(b, b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'!' | b'#'..=b'\'' | b'*' | b'+' | b'-' | b'.' | b'^'..=b'`' | b'|' | b'~')
}

/// An RFC 2046 media type as HTTP writes it: `type/subtype`, then parameters `; name=value`, each
/// value a token or a quoted string. Its pattern in the document is [`schema::MEDIA_TYPE`].
fn is_media_type(text: &str) -> bool {
    let mut rest = text;
    /// Takes a token from the start of `rest`; whether there was one.
    fn token(rest: &mut &str) -> bool {
        let end = rest.bytes().position(|b| !is_tchar(b)).unwrap_or(rest.len());
        *rest = &rest[end..];
        end > 0
    }
    if !token(&mut rest) || !rest.starts_with('/') {
        return false;
    }
    rest = &rest[1..];
    if !token(&mut rest) {
        return false;
    }
    loop {
        rest = rest.trim_start_matches(' ');
        let Some(after) = rest.strip_prefix(';') else { return rest.is_empty() };
        rest = after.trim_start_matches(' ');
        if !token(&mut rest) || !rest.starts_with('=') {
            return false;
        }
        rest = &rest[1..];
        if let Some(quoted) = rest.strip_prefix('"') {
            let mut chars = quoted.char_indices();
            let closed = loop {
                match chars.next() {
                    Some((i, '"')) => break Some(i),
                    Some((_, '\\')) => {
                        if chars.next().is_none() {
                            break None;
                        }
                    }
                    Some(_) => {}
                    None => break None,
                }
            };
            let Some(end) = closed else { return false };
            rest = &quoted[end + 1..];
        } else if !token(&mut rest) {
            return false;
        }
    }
}

fn is_extension_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 20 && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

pub(crate) fn is_json_type(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    essence == "application/json" || essence.ends_with("+json") || essence == "text/json"
}

/// The HTTP binding's header encoding: printable ASCII except space, `"` and `%` stays,
/// everything else is percent-encoded as UTF-8 (so HTTP cannot trim a leading or trailing space).
fn percent_encode_header(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if (0x21..0x7f).contains(&byte) && byte != b'"' && byte != b'%' {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// What the OpenAPI document says of a published event: the rules [`CloudEvent::parse`] applies.
/// A publish's body: one event, or a batch when `batch` is set (the body must then be an array).
/// Every bad field of every event is named, by its place in the batch.
pub fn read_publish(body: Value, batch: bool) -> Result<Vec<CloudEvent>, Vec<FieldError>> {
    let items = match (body, batch) {
        (Value::Array(items), _) => {
            if items.len() > MAX_BATCH {
                return Err(vec![FieldError::new("body", "a batch holds at most 1000 events")]);
            }
            items
        }
        (_, true) => return Err(vec![FieldError::new("body", "a batch must be a JSON array of events")]),
        (single, false) => return Ok(vec![publishable(single, "")?]),
    };
    let mut parsed = Vec::with_capacity(items.len());
    let mut errors: Vec<FieldError> = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        match publishable(item, &format!("[{i}]")) {
            Ok(event) => parsed.push(event),
            Err(e) => errors.extend(e),
        }
    }
    if errors.is_empty() { Ok(parsed) } else { Err(errors) }
}

/// A valid CloudEvent whose type is not one of Herald's own (`herald.` is reserved).
fn publishable(value: Value, prefix: &str) -> Result<CloudEvent, Vec<FieldError>> {
    let event = CloudEvent::parse(value, prefix)?;
    if operational::is_herald_type(event.event_type()) {
        let field = if prefix.is_empty() { "type".to_string() } else { format!("{prefix}.type") };
        let reason = format!("the prefix {:?} is reserved for Herald's own events", operational::RESERVED_PREFIX);
        return Err(vec![FieldError::new(field, reason)]);
    }
    Ok(event)
}

#[cfg(feature = "openapi")]
pub mod schema {
    use std::borrow::Cow;

    use utoipa::openapi::schema::{ArrayBuilder, KnownFormat, ObjectBuilder, Schema, SchemaFormat, SchemaType, Type};
    use utoipa::openapi::{Ref, RefOr};
    use utoipa::{PartialSchema, ToSchema};

    use super::{MAX_ATTRIBUTE_LEN, MAX_BATCH};
    use crate::request::openapi::enum_of;

    /// A CloudEvent 1.0 in JSON: `specversion`, `id`, `source`, `type`, optional attributes, `data` or
    /// `data_base64` (not both), and extension attributes (names of 1 to 20 lowercase letters or digits,
    /// values string, number or boolean).
    pub struct CloudEventBody;

    /// Not empty, no control characters (U+0000–U+001F, U+007F–U+009F): see `check_string`.
    const NO_CONTROL: &str = r"^[^\x00-\x1f\x7f-\x9f]+$";

    /// A media type (see `is_media_type`): tokens `type/subtype`, then `; name=value` parameters
    /// whose value is a token or a quoted string.
    pub const MEDIA_TYPE: &str = concat!(
        r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+/[!#$%&'*+.^_`|~0-9A-Za-z-]+",
        r#"( *; *[!#$%&'*+.^_`|~0-9A-Za-z-]+=([!#$%&'*+.^_`|~0-9A-Za-z-]+|"([^"\\\x00-\x1f\x7f-\x9f]|\\[^\x00-\x1f\x7f-\x9f])*"))* *$"#,
    );

    impl PartialSchema for CloudEventBody {
        fn schema() -> RefOr<Schema> {
            let string =
                || ObjectBuilder::new().schema_type(Type::String).min_length(Some(1)).pattern(Some(NO_CONTROL));
            let attribute = || string().max_length(Some(MAX_ATTRIBUTE_LEN));
            // An optional attribute, an extension too, may be null: it is then absent.
            let optional = || {
                ObjectBuilder::new()
                    .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
                    .min_length(Some(1))
                    .pattern(Some(NO_CONTROL))
            };
            let extension = ObjectBuilder::new()
                .schema_type(SchemaType::from_iter([Type::String, Type::Number, Type::Boolean, Type::Null]))
                .pattern(Some(r"^[^\x00-\x1f\x7f-\x9f]*$"));
            let names = r"^(specversion|id|source|type|datacontenttype|dataschema|subject|time|data|data_base64|[a-z0-9]{1,20})$";
            let mut event = ObjectBuilder::new()
                .schema_type(Type::Object)
                .property("specversion", enum_of(&["1.0"], false))
                .property(
                    "id",
                    attribute().description(Some("At most 1024 bytes; `(source, id)` is unique per customer")),
                )
                .property("source", attribute().description(Some("At most 1024 bytes")))
                .property(
                    "type",
                    attribute().description(Some(
                        "At most 1024 bytes; the prefix `herald.` is reserved for Herald's operational events",
                    )),
                )
                .property(
                    "datacontenttype",
                    ObjectBuilder::new()
                        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
                        .pattern(Some(MEDIA_TYPE))
                        .description(Some("A media type: type/subtype, parameters allowed")),
                )
                .property("dataschema", optional())
                .property("subject", optional())
                .property(
                    "time",
                    ObjectBuilder::new()
                        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
                        .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
                        .description(Some("RFC 3339")),
                )
                .property(
                    "data",
                    ObjectBuilder::new().schema_type(SchemaType::AnyValue).description(Some("Any JSON value")),
                )
                .property(
                    "data_base64",
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Byte))),
                )
                .required("specversion")
                .required("id")
                .required("source")
                .required("type")
                .property_names(Some(ObjectBuilder::new().schema_type(Type::String).pattern(Some(names))))
                .additional_properties(Some(extension))
                .build();
            // utoipa's Object has no `not`: added as a raw keyword.
            let not_both = serde_json::json!({"required": ["data", "data_base64"]});
            event.extensions.get_or_insert_with(Default::default).insert("not".into(), not_both);
            event.into()
        }
    }

    impl ToSchema for CloudEventBody {
        fn name() -> Cow<'static, str> {
            Cow::Borrowed("CloudEventBody")
        }
    }

    /// The batch form of publishing: `application/cloudevents-batch+json`.
    pub struct CloudEventBatch;

    impl PartialSchema for CloudEventBatch {
        fn schema() -> RefOr<Schema> {
            let event = RefOr::Ref(Ref::from_schema_name("CloudEventBody"));
            ArrayBuilder::new().items(event).max_items(Some(MAX_BATCH)).into()
        }
    }

    impl ToSchema for CloudEventBatch {
        fn name() -> Cow<'static, str> {
            Cow::Borrowed("CloudEventBatch")
        }
        fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
            schemas.push((CloudEventBody::name().into(), CloudEventBody::schema()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_media_type_is_type_and_subtype_with_optional_parameters() {
        for valid in [
            "application/json",
            "application/vnd.acme+json",
            "text/plain; charset=utf-8",
            "text/plain;charset=\"utf-8\"",
            "multipart/mixed; boundary=\"a;b=c\" ; x=y ",
            "text/plain; q=\"a\\\"b\"",
        ] {
            assert!(is_media_type(valid), "{valid}");
        }
        for invalid in [
            "json",
            "text/",
            "/plain",
            "text/plain;",
            "text/plain; charset",
            "text/plain; a=\"open",
            "a b/c",
            "text/plain x",
        ] {
            assert!(!is_media_type(invalid), "{invalid}");
        }
    }

    #[test]
    fn a_null_optional_attribute_is_absent() {
        let event = json!({"specversion": "1.0", "id": "1", "source": "/s", "type": "t", "subject": null,
            "time": null, "partitionkey": null, "data": null});
        let parsed = CloudEvent::parse(event, "").unwrap();
        let kept = json!({"specversion": "1.0", "id": "1", "source": "/s", "type": "t", "data": null});
        assert_eq!(parsed.to_json(), kept, "data stays as published, null included");
        let required = CloudEvent::parse(json!({"specversion": "1.0", "id": null, "source": "/s", "type": "t"}), "");
        assert_eq!(required.unwrap_err()[0].field, "id", "a required attribute is not made absent");
        let bad = json!({"specversion": "1.0", "id": "1", "source": "/s", "type": "t", "data_base64": null});
        assert_eq!(CloudEvent::parse(bad, "").unwrap_err()[0].field, "data_base64", "data_base64 is not an attribute");
    }

    fn event(extra: Value) -> Value {
        let mut base = json!({"specversion":"1.0","id":"e1","source":"/shop","type":"order.created"});
        base.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        base
    }

    /// The worker sends the stored payload (`stored_text`) as the structured body.
    #[test]
    fn the_stored_form_read_back_is_the_structured_body_byte_for_byte() {
        let raw = event(json!({"data": {"z": 1.5, "a": [1e-7, -0.0, 12345678901234567890u64], "s": "\u{2028}é\"\n"}}));
        let ce = CloudEvent::parse(raw, "").expect("valid");
        let stored = ce.stored_text();
        assert_eq!(stored, ce.to_json().to_string(), "the JSON value's own text");
        let read_back = CloudEvent::from_stored(serde_json::from_str(&stored).unwrap()).unwrap();
        assert_eq!(read_back.stored_text(), stored);
    }

    fn fields(result: Result<CloudEvent, Vec<FieldError>>) -> Vec<String> {
        result.unwrap_err().into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn a_minimal_event_parses_and_keeps_its_attributes() {
        let ev = CloudEvent::parse(event(json!({"data":{"n":1}})), "").unwrap();
        assert_eq!((ev.id(), ev.source(), ev.event_type()), ("e1", "/shop", "order.created"));
        assert_eq!(ev.to_json()["data"], json!({"n":1}));
    }

    #[test]
    fn missing_and_wrong_attributes_are_named() {
        let mut without_id = event(json!({}));
        without_id.as_object_mut().unwrap().remove("id");
        assert_eq!(fields(CloudEvent::parse(without_id, "")), vec!["id"]);
        assert_eq!(fields(CloudEvent::parse(event(json!({"specversion":"0.3"})), "")), vec!["specversion"]);
        assert_eq!(fields(CloudEvent::parse(event(json!({"type": 5})), "events[2]")), vec!["events[2].type"]);
        assert_eq!(fields(CloudEvent::parse(event(json!({"time":"yesterday"})), "")), vec!["time"]);
        assert_eq!(fields(CloudEvent::parse(event(json!({"Bad-Ext":"x"})), "")), vec!["Bad-Ext"]);
        assert_eq!(fields(CloudEvent::parse(event(json!({"id":"a\u{0}b"})), "")), vec!["id"]);
        assert_eq!(fields(CloudEvent::parse(event(json!({"data":1,"data_base64":"AA=="})), "")), vec!["data_base64"]);
        assert_eq!(fields(CloudEvent::parse(json!([1]), "")), vec!["body"]);
    }

    #[test]
    fn binary_mode_puts_attributes_in_headers_and_data_in_the_body() {
        let ev = CloudEvent::parse(event(json!({"data":{"n":1},"traceparent":"00-x","subject":"café"})), "").unwrap();
        let bin = ev.binary();
        assert_eq!(bin.content_type, "application/json");
        assert_eq!(bin.body, br#"{"n":1}"#);
        let header = |n: &str| bin.headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
        assert_eq!(header("ce-id"), Some("e1"));
        assert_eq!(header("ce-specversion"), Some("1.0"));
        assert_eq!(header("ce-traceparent"), Some("00-x"));
        assert_eq!(header("ce-subject"), Some("caf%C3%A9"));
        assert_eq!(header("ce-data"), None);
    }

    #[test]
    fn binary_mode_sends_text_and_base64_data_as_raw_bytes() {
        let text = CloudEvent::parse(event(json!({"datacontenttype":"text/plain","data":"hi"})), "").unwrap();
        assert_eq!((text.binary().content_type.as_str(), text.binary().body), ("text/plain", b"hi".to_vec()));
        let bytes = CloudEvent::parse(event(json!({"data_base64":"AAEC"})), "").unwrap();
        assert_eq!(bytes.binary().body, vec![0, 1, 2]);
        assert_eq!(bytes.binary().content_type, "application/octet-stream");
    }
}
