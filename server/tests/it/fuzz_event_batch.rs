//! Property-based fuzzing of the publish body parser, `domain::event::read_publish`: one
//! CloudEvent, or a batch of up to 1000 whose errors are named by index (`[3].id`).
//!
//! Case counts follow proptest's defaults (`PROPTEST_CASES` overrides them).

use domain::errors::FieldError;
use domain::event::{CloudEvent, MAX_BATCH, read_publish};
use herald::service::ServiceError;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const NAMES: &[&str] = &[
    "specversion",
    "id",
    "source",
    "type",
    "datacontenttype",
    "subject",
    "time",
    "data",
    "data_base64",
    "traceparent",
    "Bad-Name",
];
const REQUIRED: &[&str] = &["specversion", "id", "source", "type"];

fn text() -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        prop::sample::select(vec!["", "1.0", "\0", "2024-01-01T00:00:00Z", "AAEC", "AA=", "x"])
            .prop_map(str::to_string),
        ".{0,12}",
    ]
}

/// Any JSON value; objects mostly use CloudEvent attribute names.
fn any_json() -> BoxedStrategy<Value> {
    let key = prop_oneof![3 => prop::sample::select(NAMES).prop_map(str::to_string), 1 => text()];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1e6..1e6f64).prop_map(Value::from),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 40, 5, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..6).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
    .boxed()
}

fn valid_event() -> impl Strategy<Value = Value> {
    ("[a-zA-Z0-9-]{1,12}", "/[a-z/]{0,12}", "[a-z.]{1,16}", prop::option::of(any_json()), any::<bool>()).prop_map(
        |(id, source, ty, data, ext)| {
            let mut event = json!({"specversion": "1.0", "id": id, "source": source, "type": ty});
            if let Some(data) = data {
                event["data"] = data;
            }
            if ext {
                event["traceparent"] = json!("00-abc-01");
            }
            event
        },
    )
}

/// Whether an event object holds the attribute an error names: an empty name is shown quoted
/// (`""`), which is also how a name of two quote marks shows.
fn holds(event: &Map<String, Value>, shown: &str) -> bool {
    event.contains_key(shown) || (shown == "\"\"" && event.contains_key(""))
}

/// The item index an error names (`[3]` or `[3].id`), with the attribute if any.
fn item_of(field: &str) -> Option<(usize, Option<&str>)> {
    let rest = field.strip_prefix('[')?;
    let (index, rest) = rest.split_once(']')?;
    let index = index.parse().ok()?;
    match rest {
        "" => Some((index, None)),
        _ => Some((index, Some(rest.strip_prefix('.')?))),
    }
}

/// Each error names the body, or an item of the batch and one of its attributes that was
/// sent or is required.
fn assert_named_by_item(body: &Value, errors: &[FieldError]) -> Result<(), TestCaseError> {
    prop_assert!(!errors.is_empty(), "a rejection without any error");
    for e in errors {
        prop_assert!(!e.message.is_empty(), "{:?}", e);
        if e.field == "body" {
            continue;
        }
        let Some(items) = body.as_array() else {
            // A single event names its attributes without an index.
            let sent = body.as_object().is_some_and(|m| holds(m, &e.field));
            prop_assert!(sent || REQUIRED.contains(&e.field.as_str()), "{:?} for {}", e, body);
            continue;
        };
        let (index, attribute) = item_of(&e.field).ok_or_else(|| TestCaseError::fail(format!("{e:?}")))?;
        prop_assert!(index < items.len(), "{:?} for {} items", e, items.len());
        if let Some(name) = attribute {
            let sent = items[index].as_object().is_some_and(|m| holds(m, name));
            prop_assert!(sent || REQUIRED.contains(&name), "{:?} for {}", e, items[index]);
        } else {
            prop_assert!(!items[index].is_object(), "{:?} for an object", e);
        }
    }
    Ok(())
}

/// An event as kept: an optional attribute (an extension too) that is null is absent.
fn as_kept(item: &Value) -> Value {
    let mut kept = item.clone();
    if let Value::Object(map) = &mut kept {
        map.retain(|name, value| {
            !value.is_null() || REQUIRED.contains(&name.as_str()) || name == "data" || name == "data_base64"
        });
    }
    kept
}

/// The publish's refusal as the API answers it.
fn parse(body: Value, batch: bool) -> Result<Vec<CloudEvent>, ServiceError> {
    read_publish(body, batch).map_err(ServiceError::Invalid)
}

proptest! {
    /// Any body never panics the parser; a refusal is a validation error naming the body or
    /// an item and attribute; an accepted array yields one event per item, in order.
    #[test]
    fn any_body_is_parsed_or_refused_by_field(
        body in prop_oneof![any_json(), prop::collection::vec(any_json(), 0..6).prop_map(Value::Array)],
        batch in any::<bool>(),
    ) {
        match parse(body.clone(), batch) {
            Ok(events) => match &body {
                Value::Array(items) => {
                    prop_assert_eq!(events.len(), items.len());
                    for (event, item) in events.iter().zip(items) {
                        prop_assert_eq!(event.to_json(), as_kept(item));
                    }
                }
                single => {
                    prop_assert!(!batch, "a batch that is not an array was accepted");
                    prop_assert_eq!(events.len(), 1);
                    prop_assert_eq!(events[0].to_json(), as_kept(single));
                }
            },
            Err(ServiceError::Invalid(errors)) => assert_named_by_item(&body, &errors)?,
            Err(other) => prop_assert!(false, "unexpected error {:?}", other),
        }
    }

    /// Valid events are accepted, alone or as a batch, each exactly as CloudEvent::parse does.
    #[test]
    fn valid_batches_are_accepted(events in prop::collection::vec(valid_event(), 1..8), batch in any::<bool>()) {
        let parsed = parse(Value::Array(events.clone()), batch);
        prop_assert!(parsed.is_ok(), "{:?}", parsed.err());
        for (event, raw) in parsed.unwrap().iter().zip(&events) {
            prop_assert_eq!(Ok(event.clone()), CloudEvent::parse(raw.clone(), ""));
        }
        let single = parse(events[0].clone(), false);
        prop_assert!(single.is_ok_and(|e| e.len() == 1));
    }

    /// One item of a valid batch replaced by anything: if refused, every error names that
    /// item, so clients can find the bad event among a thousand.
    #[test]
    fn one_bad_item_is_the_one_named(
        events in prop::collection::vec(valid_event(), 1..8),
        at in any::<prop::sample::Index>(),
        replacement in any_json(),
    ) {
        let mut items = events;
        let index = at.index(items.len());
        items[index] = replacement;
        let body = Value::Array(items);
        match parse(body.clone(), true) {
            Ok(parsed) => prop_assert_eq!(parsed.len(), body.as_array().unwrap().len()),
            Err(ServiceError::Invalid(errors)) => {
                assert_named_by_item(&body, &errors)?;
                for e in &errors {
                    prop_assert_eq!(item_of(&e.field).map(|(i, _)| i), Some(index), "{:?}", e);
                }
            }
            Err(other) => prop_assert!(false, "unexpected error {:?}", other),
        }
    }

    /// A batch must be a JSON array: anything else is refused as `body`.
    #[test]
    fn a_batch_that_is_not_an_array_is_refused(body in any_json().prop_filter("an array", |v| !v.is_array())) {
        match parse(body, true) {
            Err(ServiceError::Invalid(errors)) => {
                prop_assert_eq!(errors.len(), 1);
                prop_assert_eq!(errors[0].field.as_str(), "body");
            }
            other => prop_assert!(false, "{:?}", other.map(|e| e.len())),
        }
    }
}

/// An empty batch and MAX_BATCH are accepted; MAX_BATCH + 1 events are refused as `body`.
#[test]
fn batch_size_limits() {
    let event = json!({"specversion": "1.0", "id": "e", "source": "/s", "type": "t"});
    for (size, ok) in [(0, true), (1, true), (MAX_BATCH, true), (MAX_BATCH + 1, false)] {
        let body = Value::Array(vec![event.clone(); size]);
        match parse(body, true) {
            Ok(events) => assert!(ok && events.len() == size, "{size} events accepted"),
            Err(ServiceError::Invalid(errors)) => {
                assert!(!ok, "{size} events refused: {errors:?}");
                assert_eq!(errors.iter().map(|e| e.field.as_str()).collect::<Vec<_>>(), vec!["body"]);
            }
            Err(other) => panic!("{other:?}"),
        }
    }
}
