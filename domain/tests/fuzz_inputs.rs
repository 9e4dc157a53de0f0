//! Property-based fuzzing of the parsers that see client input first: CloudEvents, subscription
//! target URLs with the address block list, and retry policies.
//!
//! Every parser must turn any input into a value or into errors naming a field, never panic, and
//! give back what it accepted when its output is parsed again. Case counts follow proptest's
//! defaults (`PROPTEST_CASES` overrides them).

use proptest::prelude::*;
use serde_json::{Map, Number, Value, json};

use domain::errors::FieldError;

/// Strings the parsers give a meaning to, so generated values hit the interesting branches.
const KEYWORDS: &[&str] = &[
    "",
    " ",
    "1.0",
    "0.3",
    "1.0 ",
    "\0",
    "a\0b",
    "all",
    "transient",
    "workfront",
    "event-grid",
    "eventarc",
    "exponential",
    "schedule",
    "Exponential",
    "2024-02-29T12:00:00Z",
    "2024-02-30T12:00:00Z",
    "1985-04-12T23:20:50.52+01:00",
    "yesterday",
    "AAEC",
    "AA==",
    "AA=",
    "====",
    "application/json",
    "text/plain",
    "application/cloudevents+json; charset=utf-8",
    "http://example.com/",
    "https://127.0.0.1/",
];

/// Arbitrary text, weighted towards the strings above and towards control characters.
fn text() -> BoxedStrategy<String> {
    prop_oneof![
        3 => prop::sample::select(KEYWORDS).prop_map(str::to_string),
        3 => ".{0,16}",
        1 => "[\\x00-\\x20\\x7f-\\u{a0}]{0,4}",
        1 => any::<String>(),
    ]
    .boxed()
}

fn number() -> BoxedStrategy<Value> {
    prop_oneof![
        (-3i64..1_000).prop_map(Value::from),
        prop::sample::select(vec![0u64, 1, 99, 100, 101, 599, 600, 601, 604_800, 604_801, u32::MAX as u64 + 1])
            .prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1.0..1.0f64).prop_map(|f| Value::Number(Number::from_f64(f).unwrap())),
        any::<f64>().prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
    ]
    .boxed()
}

/// Any JSON value: objects use `keys` (the parser's own field names, or arbitrary text).
fn json_value(keys: &'static [&'static str]) -> BoxedStrategy<Value> {
    let key = prop_oneof![3 => prop::sample::select(keys).prop_map(str::to_string), 1 => text()];
    let leaf =
        prop_oneof![Just(Value::Null), any::<bool>().prop_map(Value::Bool), number(), text().prop_map(Value::String)];
    leaf.prop_recursive(3, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..6).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
    .boxed()
}

/// Bytes that are sometimes JSON: the serialization of `valid` with a few bytes flipped,
/// dropped or inserted, or plain random bytes.
fn mangled_json(valid: BoxedStrategy<Value>) -> BoxedStrategy<Vec<u8>> {
    let edits = prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 0..4);
    prop_oneof![
        3 => (valid, edits).prop_map(|(value, edits)| {
            let mut bytes = serde_json::to_vec(&value).unwrap();
            for (at, byte, op) in edits {
                if bytes.is_empty() {
                    break;
                }
                let i = at.index(bytes.len());
                match op {
                    0 => bytes[i] = byte,
                    1 => {
                        bytes.remove(i);
                    }
                    _ => bytes.insert(i, byte),
                }
            }
            bytes
        }),
        1 => prop::collection::vec(any::<u8>(), 0..64),
    ]
    .boxed()
}

/// Every error names a field and says something.
fn assert_named(errors: &[FieldError]) -> Result<(), TestCaseError> {
    prop_assert!(!errors.is_empty(), "a rejection without any error");
    for e in errors {
        prop_assert!(!e.field.is_empty(), "an error without a field: {:?}", e);
        prop_assert!(!e.message.is_empty(), "an error without a message: {:?}", e);
    }
    Ok(())
}

/// The value as Herald receives it: serialized by the client, parsed from the request body.
fn as_received(value: Value) -> Value {
    serde_json::from_str(&value.to_string()).unwrap()
}

fn prefixed(prefix: &str, name: &str) -> String {
    if prefix.is_empty() { name.to_string() } else { format!("{prefix}.{name}") }
}

mod cloud_event {
    use super::*;
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use chrono::{FixedOffset, SecondsFormat};
    use domain::event::{CloudEvent, MAX_ATTRIBUTE_LEN};

    const REQUIRED: &[&str] = &["specversion", "id", "source", "type"];
    const CONTEXT: &[&str] =
        &["specversion", "id", "source", "type", "datacontenttype", "dataschema", "subject", "time"];
    /// Field names for generated objects: the context attributes, data, extensions, bad names.
    const NAMES: &[&str] = &[
        "specversion",
        "id",
        "source",
        "type",
        "datacontenttype",
        "dataschema",
        "subject",
        "time",
        "data",
        "data_base64",
        "traceparent",
        "partitionkey",
        "seq1",
        "abcdefghijklmnopqrst",
        "abcdefghijklmnopqrstu",
        "Upper",
        "with-dash",
        "",
    ];
    const PREFIXES: &[&str] = &["", "[0]", "[17]", "events[3]"];

    fn any_json() -> BoxedStrategy<Value> {
        json_value(NAMES)
    }

    /// How an attribute is named in an error: an empty name is shown quoted.
    fn shown_name(name: &str) -> &str {
        if name.is_empty() { "\"\"" } else { name }
    }

    /// CloudEvents strings: no control characters (U+0000-U+001F, U+007F-U+009F).
    fn is_cloud_string(s: &str) -> bool {
        !s.chars().any(|c| matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}'))
    }

    /// Text that is a valid optional string attribute: non-empty, no control characters.
    fn cloud_text() -> BoxedStrategy<String> {
        text().prop_filter("a valid CloudEvents string", |s| !s.is_empty() && is_cloud_string(s)).boxed()
    }

    fn attribute_text() -> BoxedStrategy<String> {
        prop_oneof![
            3 => "[a-zA-Z0-9./:_-]{1,24}",
            2 => "[^\\x00-\\x1f\\x7f-\\u{9f}]{1,24}",
            1 => Just("x".repeat(MAX_ATTRIBUTE_LEN)),
            1 => Just("é".repeat(MAX_ATTRIBUTE_LEN / 2)),
        ]
        .boxed()
    }

    /// RFC 3339 timestamps from year 1970 to 9999, in any offset, with or without fractions.
    fn rfc3339() -> BoxedStrategy<String> {
        let formats = [SecondsFormat::Secs, SecondsFormat::Millis, SecondsFormat::Micros, SecondsFormat::Nanos];
        (
            86_400i64..253_402_000_000,
            0u32..1_000_000_000,
            -1439i32..=1439,
            any::<bool>(),
            prop::sample::select(formats.to_vec()),
        )
            .prop_map(|(secs, nanos, offset_min, use_z, format)| {
                let utc = chrono::DateTime::from_timestamp(secs, nanos).unwrap();
                let offset = FixedOffset::east_opt(offset_min * 60).unwrap();
                utc.with_timezone(&offset).to_rfc3339_opts(format, use_z)
            })
            .boxed()
    }

    fn extension_value() -> BoxedStrategy<Value> {
        let string = text().prop_filter("a valid CloudEvents string", |s| is_cloud_string(s));
        prop_oneof![string.prop_map(Value::String), number(), any::<bool>().prop_map(Value::Bool)]
            .prop_filter("null is not an extension value", |v| !v.is_null())
            .boxed()
    }

    /// Valid CloudEvents: required attributes, any optional ones, data or data_base64 or
    /// neither, extensions. Optional string attributes may hold any text.
    fn valid_event() -> BoxedStrategy<Map<String, Value>> {
        let content_type = prop_oneof![
            3 => prop::sample::select(vec!["application/json", "text/plain", "application/xml", "image/png",
                "application/vnd.api+json", "text/json; charset=utf-8"]).prop_map(str::to_string),
            1 => "[a-z]{1,8}/[a-z0-9.+-]{1,12}( *; *[a-z]{1,8}=([a-z0-9-]{1,8}|\"[a-z ;=/]{0,8}\"))?",
        ];
        let data = prop_oneof![
            Just(None),
            any_json().prop_map(|v| Some(("data", v))),
            prop::collection::vec(any::<u8>(), 0..24).prop_map(|b| Some(("data_base64", json!(STANDARD.encode(b))))),
        ];
        let extension_name = "[a-z0-9]{1,20}"
            .prop_filter("a reserved name", |n| !CONTEXT.contains(&n.as_str()) && n != "data" && n != "data_base64");
        let extensions = prop::collection::btree_map(extension_name, extension_value(), 0..4);
        (
            (attribute_text(), attribute_text(), attribute_text()),
            prop::option::of(content_type),
            prop::option::of(cloud_text()),
            prop::option::of(cloud_text()),
            prop::option::of(rfc3339()),
            data,
            extensions,
        )
            .prop_map(|((id, source, ty), content_type, schema, subject, time, data, extensions)| {
                let mut map = Map::new();
                map.insert("specversion".into(), json!("1.0"));
                map.insert("id".into(), json!(id));
                map.insert("source".into(), json!(source));
                map.insert("type".into(), json!(ty));
                let optional =
                    [("datacontenttype", content_type), ("dataschema", schema), ("subject", subject), ("time", time)];
                for (name, value) in optional {
                    if let Some(value) = value {
                        map.insert(name.into(), json!(value));
                    }
                }
                if let Some((name, value)) = data {
                    map.insert(name.into(), value);
                }
                map.extend(extensions);
                match as_received(Value::Object(map)) {
                    Value::Object(map) => map,
                    _ => unreachable!(),
                }
            })
            .boxed()
    }

    /// Whether setting `name` in an otherwise valid event keeps it valid, per the rules the
    /// parser documents; `None` where only the parser itself could tell (time).
    fn attribute_is_valid(event: &Map<String, Value>, name: &str) -> Option<bool> {
        let value = &event[name];
        let string = |v: &Value| v.as_str().is_some_and(|s| !s.is_empty() && is_cloud_string(s));
        let short_text = |v: &Value| string(v) && v.as_str().is_some_and(|s| s.len() <= MAX_ATTRIBUTE_LEN);
        // An optional attribute (an extension too) that is null is absent.
        let optional = !REQUIRED.contains(&name) && name != "data" && name != "data_base64";
        if value.is_null() && optional {
            return Some(true);
        }
        let valid = match name {
            "specversion" => value == "1.0",
            "id" | "source" | "type" => short_text(value),
            // Whether a text is a media type only the parser tells (its own tests say which are).
            "datacontenttype" if string(value) => return None,
            "datacontenttype" | "dataschema" | "subject" => string(value),
            "time" if !value.is_string() => false,
            "time" => return None,
            "data" => !event.contains_key("data_base64"),
            "data_base64" => !event.contains_key("data") && value.as_str().is_some_and(|s| STANDARD.decode(s).is_ok()),
            extension => {
                let well_named = (1..=20).contains(&extension.len())
                    && extension.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
                let string_ok = value.as_str().is_none_or(is_cloud_string);
                well_named && string_ok && (value.is_string() || value.is_number() || value.is_boolean())
            }
        };
        Some(valid)
    }

    /// Each error names `body` (or the batch item) for a non-object, else an attribute that
    /// was sent or is required.
    fn assert_names_sent_fields(value: &Value, prefix: &str, errors: &[FieldError]) -> Result<(), TestCaseError> {
        assert_named(errors)?;
        for e in errors {
            let named = match value {
                Value::Object(map) => map
                    .keys()
                    .map(String::as_str)
                    .chain(REQUIRED.iter().copied())
                    .any(|k| e.field == prefixed(prefix, shown_name(k))),
                _ => e.field == if prefix.is_empty() { "body" } else { prefix },
            };
            prop_assert!(named, "`{}` is not a field of {}", e.field, value);
        }
        Ok(())
    }

    /// A legal HTTP field value: no control characters other than tab.
    fn is_field_value(v: &str) -> bool {
        v.bytes().all(|b| b == b'\t' || (b >= 0x20 && b != 0x7f))
    }

    /// A legal HTTP field value that HTTP transports unchanged: also no leading or trailing
    /// whitespace, which HTTP trims.
    fn is_transparent_field_value(v: &str) -> bool {
        is_field_value(v) && v.trim_matches([' ', '\t']) == v
    }

    fn percent_decode(v: &str) -> Option<String> {
        let mut out = Vec::new();
        let bytes = v.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
        String::from_utf8(out).ok()
    }

    proptest! {
        /// Arbitrary JSON never panics the parser, and every rejection names a field that
        /// was sent or is required.
        #[test]
        fn arbitrary_json_is_accepted_or_rejected_by_field(
            value in any_json(),
            prefix in prop::sample::select(PREFIXES),
        ) {
            if let Err(errors) = CloudEvent::parse(value.clone(), prefix) {
                assert_names_sent_fields(&value, prefix, &errors)?;
            }
        }

        /// Whatever bytes arrive, decoding and parsing them never panics.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in mangled_json(valid_event().prop_map(Value::Object).boxed())) {
            if let Ok(value) = serde_json::from_slice::<Value>(&bytes)
                && let Err(errors) = CloudEvent::parse(value.clone(), "")
            {
                assert_names_sent_fields(&value, "", &errors)?;
            }
        }

        /// The generator's valid events are accepted, so the other properties test something.
        #[test]
        fn valid_events_are_accepted(event in valid_event(), prefix in prop::sample::select(PREFIXES)) {
            let parsed = CloudEvent::parse(Value::Object(event.clone()), prefix);
            prop_assert!(parsed.is_ok(), "{:?} for {}", parsed, Value::Object(event));
        }

        /// One attribute set to any value: accepted exactly when that value is valid, and a
        /// rejection names that attribute (`data_base64` for a data/data_base64 clash).
        #[test]
        fn one_bad_attribute_is_the_one_named(
            base in valid_event(),
            name in prop_oneof![3 => prop::sample::select(NAMES).prop_map(str::to_string), 1 => text()],
            value in prop_oneof![any_json(), text().prop_map(Value::String), number()],
            prefix in prop::sample::select(PREFIXES),
        ) {
            let mut event = base;
            event.insert(name.clone(), value);
            let expected = attribute_is_valid(&event, &name);
            match CloudEvent::parse(Value::Object(event.clone()), prefix) {
                Ok(_) => prop_assert!(expected != Some(false), "accepted {} = {}", name, event[&name]),
                Err(errors) => {
                    prop_assert!(expected != Some(true), "rejected valid {} = {}: {:?}", name, event[&name], errors);
                    assert_named(&errors)?;
                    for e in &errors {
                        let clash = name == "data" && e.field == prefixed(prefix, "data_base64");
                        prop_assert!(e.field == prefixed(prefix, shown_name(&name)) || clash, "{:?} for {}", e, name);
                    }
                }
            }
        }

        /// An accepted event is kept as published, and its stored and structured forms parse
        /// back to the same event (what the worker does with the stored payload).
        #[test]
        fn accepted_events_round_trip(event in valid_event()) {
            let parsed = CloudEvent::parse(Value::Object(event.clone()), "").unwrap();
            prop_assert_eq!(parsed.to_json(), Value::Object(event.clone()));
            prop_assert_eq!(parsed.id(), event["id"].as_str().unwrap());
            prop_assert_eq!(parsed.source(), event["source"].as_str().unwrap());
            prop_assert_eq!(parsed.event_type(), event["type"].as_str().unwrap());
            prop_assert_eq!(CloudEvent::parse(parsed.to_json(), ""), Ok(parsed.clone()));
            prop_assert_eq!(CloudEvent::from_stored(parsed.to_json()), Some(parsed.clone()));
            let stored: Value = serde_json::from_str(&parsed.to_json().to_string()).unwrap();
            prop_assert_eq!(CloudEvent::parse(stored, ""), Ok(parsed.clone()), "stored text");
            let body: Value = serde_json::from_str(&parsed.stored_text()).unwrap();
            prop_assert_eq!(CloudEvent::parse(body, ""), Ok(parsed), "structured body");
        }

        /// Binary mode: every attribute but data travels in one `ce-` header whose value is a
        /// legal HTTP field value that HTTP does not alter (the binding percent-encodes space,
        /// `"`, `%` and everything outside printable ASCII), and decodes back to the attribute.
        #[test]
        fn binary_mode_headers_carry_the_attributes_unchanged(event in valid_event()) {
            let parsed = CloudEvent::parse(Value::Object(event.clone()), "").unwrap();
            let binary = parsed.binary();
            for (name, value) in &event {
                if ["data", "data_base64", "datacontenttype"].contains(&name.as_str()) {
                    continue;
                }
                let header = format!("ce-{name}");
                let sent: Vec<&String> = binary.headers.iter().filter(|(k, _)| *k == header).map(|(_, v)| v).collect();
                prop_assert_eq!(sent.len(), 1, "{}", header);
                prop_assert!(is_transparent_field_value(sent[0]), "{}: {:?}", header, sent[0]);
                prop_assert!(!sent[0].contains([' ', '"']), "{}: {:?}", header, sent[0]);
                let text = match value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                prop_assert_eq!(percent_decode(sent[0]), Some(text), "{}", header);
            }
            for (name, _) in &binary.headers {
                prop_assert!(name.starts_with("ce-") && event.contains_key(&name[3..]), "{}", name);
            }
            prop_assert!(
                is_field_value(&binary.content_type),
                "content-type {:?}", binary.content_type
            );
            if let Some(declared) = event.get("datacontenttype").and_then(Value::as_str) {
                prop_assert_eq!(&binary.content_type, declared);
            }
            if let Some(encoded) = event.get("data_base64").and_then(Value::as_str) {
                prop_assert_eq!(&binary.body, &STANDARD.decode(encoded).unwrap());
            }
        }
    }

    /// Regression: an attribute with an empty name is rejected with an empty field name, so
    /// the client cannot tell which member is wrong.
    #[test]
    fn an_empty_attribute_name_is_still_named() {
        let event = json!({"specversion": "1.0", "id": "e1", "source": "/s", "type": "t", "": 1});
        let errors = CloudEvent::parse(event, "").unwrap_err();
        assert!(errors.iter().all(|e| !e.field.is_empty()), "{errors:?}");
    }

    /// Regression: a number in `data` changes when the accepted event is stored as text and
    /// read back for delivery (serde_json's default float parsing is not exact).
    #[test]
    fn data_numbers_survive_storage() {
        let body = r#"{"specversion":"1.0","id":"a","source":"A","type":"A","data":{"n":2.5718207111631217e-136}}"#;
        let parsed = CloudEvent::parse(serde_json::from_str(body).unwrap(), "").unwrap();
        let stored = CloudEvent::from_stored(serde_json::from_str(&parsed.to_json().to_string()).unwrap()).unwrap();
        assert_eq!(stored, parsed);
    }

    /// CloudEvents 1.0 (type system): String values must not contain the control characters
    /// U+0000-U+001F and U+007F-U+009F; the parser only refuses NUL.
    #[test]
    fn control_characters_in_string_attributes_are_refused() {
        let base = json!({"specversion": "1.0", "id": "e1", "source": "/shop", "type": "order.created"});
        for (name, value) in [("id", "a\u{1}b"), ("source", "/shop\n"), ("type", "order\u{7f}"), ("subject", "x\r\ny")]
        {
            let mut event = base.clone();
            event[name] = json!(value);
            let errors = CloudEvent::parse(event, "").expect_err(&format!("{name} = {value:?} was accepted"));
            assert_eq!(errors.iter().map(|e| e.field.as_str()).collect::<Vec<_>>(), vec![name]);
        }
    }

    /// Regression: a datacontenttype holding CR LF is accepted and copied verbatim into the
    /// binary mode's content-type, which no HTTP client will send.
    #[test]
    fn datacontenttype_with_a_line_break_never_reaches_a_header() {
        let event = json!({"specversion": "1.0", "id": "e1", "source": "/s", "type": "t",
            "datacontenttype": "text/plain\r\nx-injected: 1", "data": "hi"});
        if let Ok(parsed) = CloudEvent::parse(event, "") {
            let content_type = parsed.binary().content_type;
            assert!(is_field_value(&content_type), "content-type {content_type:?}");
        }
    }

    /// Regression: spaces are not percent-encoded in `ce-` headers, so HTTP trims a leading or
    /// trailing space from the attribute (the HTTP binding requires `%20`).
    #[test]
    fn spaces_in_attributes_survive_binary_mode() {
        let event = json!({"specversion": "1.0", "id": " e1 ", "source": "/s", "type": "t", "subject": "a b"});
        let binary = CloudEvent::parse(event, "").unwrap().binary();
        let header = |n: &str| binary.headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
        assert_eq!(header("ce-id").as_deref(), Some("%20e1%20"));
        assert_eq!(header("ce-subject").as_deref(), Some("a%20b"));
    }
}

mod target_url {
    use super::*;
    use domain::target::{TargetUrl, is_forbidden_ip};
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

    /// URL-shaped strings: every part drawn from valid and invalid spellings.
    fn url_like() -> BoxedStrategy<String> {
        let scheme = prop::sample::select(vec![
            "http",
            "https",
            "HTTP",
            "HtTpS",
            "ftp",
            "file",
            "javascript",
            "ws",
            "",
            "http+unix",
            " http",
        ]);
        let separator = prop::sample::select(vec!["://", "://", "://", ":/", ":", ":///", ":\\\\", "://\\", "//"]);
        let userinfo = prop::sample::select(vec!["", "", "", "", "@", "user@", "user:pw@", ":@", "%40@", "a%00@"]);
        let host = prop_oneof![
            4 => "[a-zA-Z0-9-]{1,10}(\\.[a-zA-Z0-9-]{1,10}){0,3}\\.?",
            1 => "[a-zé日ßΣ0-9]{1,6}(\\.[a-z0-9]{1,6}){0,2}",
            2 => ipv4_spelling().prop_map(|(_, s)| s),
            2 => ipv6_spelling().prop_map(|(_, s)| format!("[{s}]")),
            1 => "[^/?#@]{0,12}",
            1 => prop::sample::select(vec!["", ".", "..", "a..b", "xn--", "xn--a", "%00", "%2e", "[::1", "::1",
                "1.2.3.4.5", "0x", "09", "1.2.3.08", "[v1.x]", "[::ffff:1.2.3]", "a b", "%zz", "localhost"])
                .prop_map(str::to_string),
        ];
        let port = prop::sample::select(vec![
            "", "", "", ":", ":0", ":00", ":80", ":443", ":8080", ":65535", ":65536", ":-1", ":x", ":00080",
        ]);
        let rest = prop_oneof![
            3 => "(/[a-zA-Z0-9%._~!$&'()*+,;=:@-]{0,8}){0,3}(\\?[a-z0-9=&%]{0,8})?(#[a-z0-9]{0,6})?",
            1 => "[/?#\\\\].{0,16}",
            1 => Just(String::new()),
        ];
        (scheme, separator, userinfo, host, port, rest)
            .prop_map(|(scheme, sep, user, host, port, rest)| format!("{scheme}{sep}{user}{host}{port}{rest}"))
            .boxed()
    }

    /// Replaces some characters by spellings the WHATWG host parser maps back: fullwidth
    /// digits and letters, ideographic and fullwidth full stops, percent-encoding.
    fn disguise(host: &str, mask: u64) -> String {
        let mut out = String::new();
        for (i, c) in host.chars().enumerate() {
            match (mask >> (2 * (i % 32))) & 3 {
                1 if c.is_ascii_alphanumeric() => out.push(char::from_u32(0xff10 + c as u32 - '0' as u32).unwrap()),
                2 if c == '.' => out.push('\u{3002}'),
                2 if c.is_ascii_alphanumeric() => out.push_str(&format!("%{:02X}", c as u32)),
                3 if c == '.' => out.push('\u{ff0e}'),
                _ => out.push(c),
            }
        }
        out
    }

    /// An IPv4 address and one of the spellings the WHATWG parser accepts for it: 1 to 4
    /// parts, each decimal, octal (`0` prefix) or hex (`0x`), optional trailing dot.
    fn ipv4_spelling() -> BoxedStrategy<(Ipv4Addr, String)> {
        spell_ipv4(any_ipv4())
    }

    fn spell_ipv4(addresses: BoxedStrategy<Ipv4Addr>) -> BoxedStrategy<(Ipv4Addr, String)> {
        (
            addresses,
            1usize..=4,
            [0u8..3, 0u8..3, 0u8..3, 0u8..3],
            [0usize..3, 0usize..3, 0usize..3, 0usize..3],
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(addr, parts, radix, zeros, upper, trailing_dot)| {
                let [a, b, c, d] = addr.octets().map(u64::from);
                let numbers = match parts {
                    1 => vec![u64::from(u32::from(addr))],
                    2 => vec![a, (b << 16) | (c << 8) | d],
                    3 => vec![a, b, (c << 8) | d],
                    _ => vec![a, b, c, d],
                };
                let spelled: Vec<String> = numbers
                    .iter()
                    .enumerate()
                    .map(|(i, &n)| {
                        let pad = "0".repeat(zeros[i]);
                        match radix[i] {
                            0 => n.to_string(),
                            1 => format!("0{pad}{n:o}"),
                            _ if upper => format!("0X{pad}{n:X}"),
                            _ => format!("0x{pad}{n:x}"),
                        }
                    })
                    .collect();
                let dot = if trailing_dot { "." } else { "" };
                (addr, format!("{}{dot}", spelled.join(".")))
            })
            .boxed()
    }

    /// Mostly addresses in special-purpose blocks, where the block list has work to do.
    fn any_ipv4() -> BoxedStrategy<Ipv4Addr> {
        prop_oneof![1 => any::<u32>().prop_map(Ipv4Addr::from), 3 => special_ipv4()].boxed()
    }

    /// Addresses that must never be reached: loopback, private, this-network, link-local,
    /// CGNAT, multicast and reserved.
    fn special_ipv4() -> BoxedStrategy<Ipv4Addr> {
        let in_block = |net: [u8; 4], len: u32| {
            any::<u32>().prop_map(move |bits| {
                let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
                Ipv4Addr::from((u32::from_be_bytes(net) & mask) | (bits & !mask))
            })
        };
        prop_oneof![
            1 => in_block([127, 0, 0, 0], 8),
            1 => in_block([10, 0, 0, 0], 8),
            1 => in_block([0, 0, 0, 0], 8),
            1 => in_block([169, 254, 0, 0], 16),
            1 => in_block([172, 16, 0, 0], 12),
            1 => in_block([192, 168, 0, 0], 16),
            1 => in_block([100, 64, 0, 0], 10),
            1 => in_block([224, 0, 0, 0], 3),
        ]
        .boxed()
    }

    fn any_ipv6() -> BoxedStrategy<Ipv6Addr> {
        let in_block = |prefix: u128, len: u32| {
            any::<u128>().prop_map(move |bits| {
                let mask = u128::MAX.checked_shl(128 - len).unwrap_or(0);
                Ipv6Addr::from((prefix & mask) | (bits & !mask))
            })
        };
        prop_oneof![
            2 => any::<u128>().prop_map(Ipv6Addr::from),
            1 => any_ipv4().prop_map(|a| a.to_ipv6_mapped()),
            1 => any_ipv4().prop_map(|a| a.to_ipv6_compatible()),
            1 => any_ipv4().prop_map(|a| Ipv6Addr::from((0x64_ff9b_u128 << 96) | u128::from(u32::from(a)))),
            1 => (any_ipv4(), any::<u64>()).prop_map(|(a, low)| {
                Ipv6Addr::from((0x2002_u128 << 112) | (u128::from(u32::from(a)) << 80) | u128::from(low))
            }),
            1 => in_block(0xfc00 << 112, 7),
            1 => in_block(0xfe80 << 112, 10),
            1 => in_block(0xff00 << 112, 8),
            1 => (0u128..0x1_0000).prop_map(Ipv6Addr::from),
        ]
        .boxed()
    }

    /// An IPv6 address and a spelling: compressed, uppercase, all eight groups with leading
    /// zeros, or with the last 32 bits as a dotted quad.
    fn ipv6_spelling() -> BoxedStrategy<(Ipv6Addr, String)> {
        (any_ipv6(), 0u8..4, any::<bool>())
            .prop_map(|(ip, style, upper)| {
                let s = ip.segments();
                let text = match style {
                    0 => ip.to_string(),
                    1 => s.iter().map(|g| format!("{g:04x}")).collect::<Vec<_>>().join(":"),
                    2 => {
                        let [a, b, c, d] = ((u32::from(s[6]) << 16) | u32::from(s[7])).to_be_bytes();
                        let head: Vec<String> = s[..6].iter().map(|g| format!("{g:x}")).collect();
                        format!("{}:{a}.{b}.{c}.{d}", head.join(":"))
                    }
                    _ => s.iter().map(|g| format!("{g:x}")).collect::<Vec<_>>().join(":"),
                };
                (ip, if upper { text.to_uppercase() } else { text })
            })
            .boxed()
    }

    const FIELDS: &[&str] = &["url", "target", "subscriptions[2].url"];

    /// What an accepted URL promises: http(s), a host, no userinfo or fragment, at most 2048
    /// bytes, a non-zero port, `host()` and `literal_ip()` agreeing with the URL.
    fn assert_well_formed(raw: &str, t: &TargetUrl) -> Result<(), TestCaseError> {
        let url = t.url();
        prop_assert!(["http", "https"].contains(&url.scheme()), "{} -> {}", raw, t);
        prop_assert!(t.as_str().starts_with(&format!("{}://", url.scheme())), "{} -> {}", raw, t);
        prop_assert!(url.host().is_some() && !t.host().is_empty(), "{} -> {}", raw, t);
        prop_assert!(url.username().is_empty() && url.password().is_none(), "{} -> {}", raw, t);
        prop_assert!(url.fragment().is_none(), "{} -> {}", raw, t);
        prop_assert!(t.as_str().len() <= 2048, "{} -> {} bytes", raw, t.as_str().len());
        prop_assert!(t.port() != 0, "{} -> {}", raw, t);
        let host_str = url.host_str().unwrap().trim_start_matches('[').trim_end_matches(']');
        match t.literal_ip() {
            Some(ip) => prop_assert_eq!(host_str.parse::<IpAddr>().ok(), Some(ip), "{} -> {}", raw, t),
            None => prop_assert_eq!(host_str, t.host(), "{} -> {}", raw, t),
        }
        let name = t.host().strip_suffix('.').unwrap_or(t.host());
        prop_assert!(!name.is_empty() && !name.split('.').any(str::is_empty), "{} -> {}", raw, t);
        prop_assert_eq!(t.literal_ip(), t.host().parse::<IpAddr>().ok(), "{} -> {}", raw, t);
        Ok(())
    }

    proptest! {
        /// Arbitrary text never panics the parser, a rejection names the caller's field, and
        /// anything accepted is a well-formed http(s) URL.
        #[test]
        fn arbitrary_text_is_parsed_or_rejected_by_field(
            raw in prop_oneof![url_like(), text(), any::<String>()],
            field in prop::sample::select(FIELDS),
        ) {
            match TargetUrl::parse(&raw, field) {
                Ok(t) => assert_well_formed(&raw, &t)?,
                Err(e) => {
                    prop_assert_eq!(&e.field, field);
                    prop_assert!(!e.message.is_empty());
                }
            }
        }

        /// Arbitrary bytes (as the lossy UTF-8 a handler might make of them) never panic.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..80)) {
            let raw = String::from_utf8_lossy(&bytes);
            for candidate in [raw.to_string(), format!("http://{raw}"), format!("https://a/{raw}")] {
                if let Ok(t) = TargetUrl::parse(&candidate, "url") {
                    assert_well_formed(&candidate, &t)?;
                }
            }
        }

        /// Normalization is idempotent: the normalized URL parses to itself, and the endpoint
        /// key (which names the circuit breaker) parses to a URL with the same key.
        #[test]
        fn accepted_urls_are_stable_under_reparsing(raw in url_like()) {
            if let Ok(t) = TargetUrl::parse(&raw, "url") {
                let again = TargetUrl::parse(t.as_str(), "url");
                prop_assert_eq!(again, Ok(t.clone()), "{} -> {}", raw, t);
                let key = t.endpoint_key();
                let keyed = TargetUrl::parse(&key, "url");
                prop_assert!(keyed.is_ok(), "{} -> key {} rejected: {:?}", raw, key, keyed);
                prop_assert_eq!(keyed.unwrap().endpoint_key(), key);
            }
        }

        /// Every WHATWG spelling of an IPv4 literal (`127.1`, `2130706433`, `0x7f000001`,
        /// `0177.0.0.1`, fullwidth or percent-encoded digits...) is accepted and yields that
        /// address, so a forbidden address cannot hide behind its spelling.
        #[test]
        fn every_ipv4_spelling_yields_the_address((addr, spelled) in ipv4_spelling(), mask in any::<u64>()) {
            for host in [spelled.clone(), disguise(&spelled, mask)] {
                let raw = format!("http://{host}/hook");
                let t = TargetUrl::parse(&raw, "url");
                prop_assert!(t.is_ok(), "{} rejected: {:?}", raw, t);
                let ip = t.unwrap().literal_ip();
                prop_assert_eq!(ip, Some(IpAddr::V4(addr)), "{}", raw);
                prop_assert_eq!(is_forbidden_ip(ip.unwrap()), is_forbidden_ip(IpAddr::V4(addr)));
            }
        }

        /// Forbidden IPv4 addresses (loopback, private, link-local, this-network, CGNAT,
        /// multicast) stay forbidden whatever their spelling.
        #[test]
        fn forbidden_ipv4_spellings_are_forbidden(
            (addr, spelled) in spell_ipv4(special_ipv4()),
            mask in any::<u64>(),
        ) {
            prop_assert!(is_forbidden_ip(IpAddr::V4(addr)), "{}", addr);
            for host in [spelled.clone(), disguise(&spelled, mask)] {
                let raw = format!("https://{host}:8443/");
                if let Ok(t) = TargetUrl::parse(&raw, "url") {
                    let ip = t.literal_ip();
                    prop_assert!(ip.is_some_and(is_forbidden_ip), "{} -> {:?} is allowed", raw, ip);
                }
            }
        }

        /// Every IPv6 spelling is accepted and yields that address.
        #[test]
        fn every_ipv6_spelling_yields_the_address((addr, spelled) in ipv6_spelling()) {
            let raw = format!("http://[{spelled}]:8080/");
            let t = TargetUrl::parse(&raw, "url");
            prop_assert!(t.is_ok(), "{} rejected: {:?}", raw, t);
            prop_assert_eq!(t.unwrap().literal_ip(), Some(IpAddr::V6(addr)), "{}", raw);
        }

        /// The socket layer treats `::ffff:a.b.c.d` as a.b.c.d, so the block list must too,
        /// whether the address is given directly or as a URL literal in either spelling.
        #[test]
        fn ipv4_mapped_addresses_decide_like_ipv4(addr in any_ipv4()) {
            let v4 = is_forbidden_ip(IpAddr::V4(addr));
            prop_assert_eq!(is_forbidden_ip(IpAddr::V6(addr.to_ipv6_mapped())), v4, "{}", addr);
            let [a, b, c, d] = addr.octets();
            let hex = format!("{:x}:{:x}", u16::from_be_bytes([a, b]), u16::from_be_bytes([c, d]));
            for raw in [format!("http://[::ffff:{addr}]/"), format!("http://[::FFFF:{hex}]/"),
                        format!("http://[0:0:0:0:0:ffff:{addr}]/")] {
                let ip = TargetUrl::parse(&raw, "url").unwrap().literal_ip().unwrap();
                prop_assert_eq!(is_forbidden_ip(ip), v4, "{}", raw);
            }
        }

        /// Deprecated IPv4-compatible addresses (`::a.b.c.d`, inside ::/96) are all refused.
        #[test]
        fn ipv4_compatible_addresses_are_forbidden(addr in any_ipv4()) {
            prop_assert!(is_forbidden_ip(IpAddr::V6(addr.to_ipv6_compatible())), "::{}", addr);
        }
    }
}

mod retry_policy {
    use super::*;
    use domain::policy::{RetryOn, RetryPolicy, Schedule};

    const FIELDS: &[&str] = &[
        "kind",
        "max_attempts",
        "ttl_secs",
        "retry_on",
        "min_delay_secs",
        "max_delay_secs",
        "delays_secs",
        "jitter",
        "factor",
    ];
    const PRESETS: &[&str] = &["workfront", "event-grid", "eventarc"];
    const PREFIXES: &[&str] = &["retry_policy", "subscriptions[4].retry_policy"];

    fn any_json() -> BoxedStrategy<Value> {
        json_value(FIELDS)
    }

    /// Present, explicitly null, or absent (`None`).
    fn optional(value: BoxedStrategy<Value>) -> BoxedStrategy<Option<Value>> {
        prop_oneof![2 => value.prop_map(Some), 1 => Just(Some(Value::Null)), 2 => Just(None)].boxed()
    }

    /// Valid policies as a client might write them: bare preset names, presets with
    /// overrides, exponential and fixed schedules; status lists unsorted and with duplicates.
    fn valid_policy_json() -> BoxedStrategy<Value> {
        let retry_on = prop_oneof![
            Just(json!("all")),
            Just(json!("transient")),
            prop::collection::vec(100u32..=599, 1..=50).prop_map(|codes| json!(codes)),
        ];
        let common = (
            optional((1u32..=100).prop_map(Value::from).boxed()),
            optional((1u32..=604_800).prop_map(Value::from).boxed()),
            optional(retry_on.boxed()),
        );
        let kind = prop_oneof![
            prop::sample::select(PRESETS).prop_map(|p| vec![("kind", json!(p))]),
            (1u32..=600, 1u32..=600).prop_map(|(a, b)| vec![
                ("kind", json!("exponential")),
                ("min_delay_secs", json!(a.min(b))),
                ("max_delay_secs", json!(a.max(b))),
            ]),
            (
                prop::collection::vec(1u32..=604_800, 1..=100),
                optional(prop_oneof![(0.0..=0.5f64).prop_map(|j| json!(j)), Just(json!(0)), Just(json!(0.5))].boxed()),
            )
                .prop_map(|(delays, jitter)| {
                    let mut fields = vec![("kind", json!("schedule")), ("delays_secs", json!(delays))];
                    fields.extend(jitter.map(|j| ("jitter", j)));
                    fields
                }),
        ];
        prop_oneof![
            1 => prop::sample::select(PRESETS).prop_map(|p| json!(p)),
            4 => (kind, common).prop_map(|(fields, (attempts, ttl, retry_on))| {
                let mut map = Map::new();
                for (k, v) in fields {
                    map.insert(k.into(), v);
                }
                for (k, v) in [("max_attempts", attempts), ("ttl_secs", ttl), ("retry_on", retry_on)] {
                    if let Some(v) = v {
                        map.insert(k.into(), v);
                    }
                }
                Value::Object(map)
            }),
        ]
        .prop_map(as_received)
        .boxed()
    }

    /// The documented ranges hold for every accepted policy.
    fn assert_in_range(p: &RetryPolicy) -> Result<(), TestCaseError> {
        prop_assert!((1..=100).contains(&p.max_attempts), "{:?}", p);
        prop_assert!((1..=604_800).contains(&p.ttl_secs), "{:?}", p);
        match &p.schedule {
            Schedule::Preset(_) => {}
            Schedule::Exponential { min_delay_secs, max_delay_secs } => {
                prop_assert!(1 <= *min_delay_secs && min_delay_secs <= max_delay_secs && *max_delay_secs <= 600);
            }
            Schedule::Fixed { delays_secs, jitter } => {
                prop_assert!((1..=100).contains(&delays_secs.len()), "{:?}", p);
                prop_assert!(delays_secs.iter().all(|d| (1..=604_800).contains(d)), "{:?}", p);
                prop_assert!((0.0..=0.5).contains(jitter), "{:?}", p);
            }
        }
        if let RetryOn::Codes(codes) = &p.retry_on {
            prop_assert!((1..=50).contains(&codes.len()), "{:?}", p);
            prop_assert!(codes.windows(2).all(|w| w[0] < w[1]), "sorted, no duplicates: {:?}", codes);
            prop_assert!(codes.iter().all(|c| (100..=599).contains(c)), "{:?}", codes);
        }
        Ok(())
    }

    /// Each error names the policy itself (not an object), a key that was sent, or a required
    /// key, optionally indexed into a sent list.
    fn assert_names_sent_fields(value: &Value, prefix: &str, errors: &[FieldError]) -> Result<(), TestCaseError> {
        assert_named(errors)?;
        for e in errors {
            let named = match value {
                Value::Object(map) => {
                    let required = ["kind", "min_delay_secs", "max_delay_secs", "delays_secs"].map(String::from);
                    map.keys().chain(required.iter()).any(|k| {
                        let name = prefixed(prefix, k);
                        let index = e.field.strip_prefix(&name).and_then(|rest| rest.strip_prefix('['));
                        let index = index.and_then(|i| i.strip_suffix(']')).and_then(|i| i.parse::<usize>().ok());
                        let len = map.get(k).and_then(Value::as_array).map_or(0, Vec::len);
                        e.field == name || index.is_some_and(|i| i < len)
                    })
                }
                _ => e.field == prefix,
            };
            prop_assert!(named, "`{}` is not a field of {}", e.field, value);
        }
        Ok(())
    }

    /// The canonical JSON, as stored: serialized to text, read back, parsed again.
    fn reparsed(p: &RetryPolicy) -> Result<RetryPolicy, Vec<FieldError>> {
        let text = p.to_json().to_string();
        RetryPolicy::parse(&serde_json::from_str(&text).unwrap(), "retry_policy")
    }

    /// Whether setting `key` to `value` in a valid policy of `kind` keeps it valid; `None`
    /// where it depends on more than the value (kind, min/max order).
    fn field_is_valid(kind: &str, key: &str, value: &Value) -> Option<bool> {
        let int_in = |lo: u64, hi: u64| value.as_u64().is_some_and(|n| (lo..=hi).contains(&n));
        let list_of = |max: usize, lo: u64, hi: u64| {
            value.as_array().is_some_and(|items| {
                (1..=max).contains(&items.len())
                    && items.iter().all(|v| v.as_u64().is_some_and(|n| (lo..=hi).contains(&n)))
            })
        };
        let valid = match (key, kind) {
            ("kind", _) | ("min_delay_secs" | "max_delay_secs", "exponential") => return None,
            ("max_attempts", _) => value.is_null() || int_in(1, 100),
            ("ttl_secs", _) => value.is_null() || int_in(1, 604_800),
            ("retry_on", _) => value.is_null() || value == "all" || value == "transient" || list_of(50, 100, 599),
            ("delays_secs", "schedule") => list_of(100, 1, 604_800),
            ("jitter", "schedule") => value.is_null() || value.as_f64().is_some_and(|j| (0.0..=0.5).contains(&j)),
            _ => false,
        };
        Some(valid)
    }

    proptest! {
        /// Arbitrary JSON never panics the validator; a rejection names a field that was sent
        /// or is required; an acceptance is within the documented ranges.
        #[test]
        fn arbitrary_json_is_accepted_or_rejected_by_field(
            value in prop_oneof![any_json(), any_json().prop_map(|v| json!({"kind": "schedule", "x": v}))],
            prefix in prop::sample::select(PREFIXES),
        ) {
            match RetryPolicy::parse(&value, prefix) {
                Ok(p) => assert_in_range(&p)?,
                Err(errors) => assert_names_sent_fields(&value, prefix, &errors)?,
            }
        }

        /// Whatever bytes arrive, decoding and validating them never panics.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in mangled_json(valid_policy_json())) {
            if let Ok(value) = serde_json::from_slice::<Value>(&bytes) {
                match RetryPolicy::parse(&value, "retry_policy") {
                    Ok(p) => assert_in_range(&p)?,
                    Err(errors) => assert_names_sent_fields(&value, "retry_policy", &errors)?,
                }
            }
        }

        /// Valid policies are accepted with the values given, and survive being stored:
        /// validate, serialize to text, read back and validate again gives the same policy
        /// (the worker falls back to the default policy when a stored one fails to parse).
        #[test]
        fn valid_policies_round_trip(value in valid_policy_json()) {
            let parsed = RetryPolicy::parse(&value, "retry_policy");
            prop_assert!(parsed.is_ok(), "{} rejected: {:?}", value, parsed);
            let p = parsed.unwrap();
            assert_in_range(&p)?;
            for (key, got) in [("max_attempts", p.max_attempts), ("ttl_secs", p.ttl_secs)] {
                if let Some(given) = value.get(key).and_then(Value::as_u64) {
                    prop_assert_eq!(u64::from(got), given, "{}", key);
                }
            }
            prop_assert_eq!(RetryPolicy::parse(&p.to_json(), "retry_policy"), Ok(p.clone()));
            prop_assert_eq!(reparsed(&p), Ok(p.clone()), "through text: {}", p.to_json());
            prop_assert_eq!(reparsed(&p).unwrap().to_json(), p.to_json(), "canonical form");
        }

        /// One field of a valid policy set to any value: accepted exactly when the value is
        /// valid there, and a rejection names that field (or min_delay_secs when min > max).
        #[test]
        fn one_bad_field_is_the_one_named(
            base in valid_policy_json().prop_filter("an object", Value::is_object),
            key in prop_oneof![3 => prop::sample::select(FIELDS).prop_map(str::to_string), 1 => text()],
            value in prop_oneof![any_json(), number()],
            prefix in prop::sample::select(PREFIXES),
        ) {
            let kind = base["kind"].as_str().unwrap().to_string();
            let mut policy = base;
            policy[key.as_str()] = value;
            let policy = as_received(policy);
            let value = policy[key.as_str()].clone();
            let expected = field_is_valid(&kind, &key, &value);
            match RetryPolicy::parse(&policy, prefix) {
                Ok(p) => {
                    prop_assert!(expected != Some(false), "accepted {} = {} in {}", key, value, policy);
                    assert_in_range(&p)?;
                    prop_assert_eq!(reparsed(&p), Ok(p.clone()), "through text: {}", p.to_json());
                }
                Err(errors) => {
                    prop_assert!(expected != Some(true), "rejected {}: {:?}", policy, errors);
                    assert_names_sent_fields(&policy, prefix, &errors)?;
                    if key != "kind" {
                        let name = prefixed(prefix, &key);
                        for e in &errors {
                            let own = e.field == name || e.field.starts_with(&format!("{name}["));
                            let order = key == "max_delay_secs" && e.field == prefixed(prefix, "min_delay_secs");
                            prop_assert!(own || order, "{:?} after setting {}", e, key);
                        }
                    }
                }
            }
        }

        /// Any accepted policy can be previewed without panicking, within its limits.
        #[test]
        fn accepted_policies_preview(value in valid_policy_json()) {
            let p = RetryPolicy::parse(&value, "retry_policy").unwrap();
            let preview = p.preview();
            prop_assert!(!preview.is_empty() && preview.len() <= p.max_attempts as usize);
        }
    }

    /// Regression: a jitter read from a client's JSON changes when the validated policy is
    /// stored as text and read back (serde_json's default float parsing is not exact).
    #[test]
    fn jitter_survives_storage() {
        let body = r#"{"kind":"schedule","delays_secs":[1],"jitter":4.5210055942820874e-105}"#;
        let p = RetryPolicy::parse(&serde_json::from_str(body).unwrap(), "retry_policy").unwrap();
        assert_eq!(reparsed(&p), Ok(p));
    }
}
