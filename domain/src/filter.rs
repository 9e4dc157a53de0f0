//! Subscription filters: a CEL expression (the Common Expression Language, as
//! Eventarc Advanced's enrollments use) over the event, compiled once and
//! evaluated for each event whose type the subscription accepts.
//!
//! The event is the variable `message`: each attribute by name (`time` as a
//! timestamp), each extension with its JSON type, and `data` as the parsed JSON
//! when the data is JSON, a string when it is text, bytes otherwise. An absent
//! attribute is absent, so `has(message.subject)` is false. A filter that fails
//! on an event (a missing key, a type mismatch) does not match it.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use base64::Engine;
use cel::common::ast::{EntryExpr, Expr};
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use cel::objects::{Key, Map};
use cel::{Context, Env, ExecutionError, IdedExpr, Program, Value as Cel};
use serde_json::Value;

use crate::event::{CloudEvent, is_json_type};
pub use crate::request::MAX_FILTER_BYTES;

/// The name of the event in a filter.
const MESSAGE: &str = "message";

/// CEL's standard functions and macros, built once: a context made from it is cheap.
static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| Arc::new(Env::stdlib()));

/// A filter that parsed and gives a boolean.
pub struct Filter {
    program: Program,
}

impl std::fmt::Debug for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Filter")
    }
}

impl Filter {
    /// Compiles a filter, or says why it is refused: it does not parse (the parser's message and
    /// its line:column), it names a variable other than `message`, or it is seen not to give a
    /// boolean (evaluated on an event with no optional attribute and no data).
    pub fn compile(source: &str) -> Result<Filter, String> {
        if source.len() > MAX_FILTER_BYTES {
            return Err(format!("must be at most {MAX_FILTER_BYTES} bytes"));
        }
        if source.trim().is_empty() {
            return Err("must not be empty".into());
        }
        let program = Program::compile(source).map_err(|errors| parse_error(&errors))?;
        check_cost(program.expression())?;
        let filter = Filter { program };
        match filter.program.execute(&context(&Message::bare())) {
            Ok(Cel::Bool(_)) => Ok(filter),
            Ok(other) => Err(format!("must give a boolean; it gives {:?}", other.type_of().to_string())),
            Err(ExecutionError::UndeclaredReference(name)) if !is_function(&name) => {
                Err(format!("`{name}` is not a variable; the event is `{MESSAGE}`"))
            }
            // A run-time error on an event with nothing optional is expected of most filters.
            Err(_) => Ok(filter),
        }
    }

    /// Whether the event matches, or why the filter failed on it (which is no match).
    pub fn matches(&self, message: &Message) -> Result<bool, String> {
        match self.program.execute(&context(message)) {
            Ok(Cel::Bool(matches)) => Ok(matches),
            Ok(other) => Err(format!("the filter gave a {}, not a boolean", other.type_of())),
            Err(error) => Err(error.to_string()),
        }
    }
}

/// A context whose one variable, `message`, is borrowed from the event's conversion: evaluating
/// copies nothing of the event.
fn context(message: &Message) -> Context<'_, '_> {
    let mut context = Context::with_env(ENV.clone());
    context.set_variable_resolver(message);
    context
}

/// Comprehensions (`all`, `exists`, `exists_one`, `map`, `filter`) a filter may hold at most.
const MAX_COMPREHENSIONS: usize = 4;

/// Keeps a filter's evaluation linear in the event's size: a comprehension runs its body once per
/// element, so one inside another multiplies (ten nested loops over a ten-element list are 10¹⁰
/// steps, on the publish's path). Refused are nested comprehensions and more than
/// [`MAX_COMPREHENSIONS`].
fn check_cost(expression: &IdedExpr) -> Result<(), String> {
    let (mut count, mut deepest) = (0, 0);
    walk(expression, 0, &mut |depth| {
        count += 1;
        deepest = deepest.max(depth);
    });
    if deepest > 1 {
        return Err("must not nest a comprehension (all, exists, exists_one, map, filter) inside another".into());
    }
    if count > MAX_COMPREHENSIONS {
        return Err(format!(
            "must hold at most {MAX_COMPREHENSIONS} comprehensions (all, exists, exists_one, map, filter)"
        ));
    }
    Ok(())
}

/// Calls `found` with the nesting depth of every comprehension under `node`.
fn walk(node: &IdedExpr, depth: usize, found: &mut dyn FnMut(usize)) {
    match &node.expr {
        Expr::Comprehension(comprehension) => {
            found(depth + 1);
            walk(&comprehension.iter_range, depth, found);
            for part in
                [&comprehension.accu_init, &comprehension.loop_cond, &comprehension.loop_step, &comprehension.result]
            {
                walk(part, depth + 1, found);
            }
        }
        Expr::Call(call) => {
            for child in call.target.iter().map(|target| &**target).chain(&call.args) {
                walk(child, depth, found);
            }
        }
        Expr::List(list) => list.elements.iter().for_each(|element| walk(element, depth, found)),
        Expr::Select(select) => walk(&select.operand, depth, found),
        Expr::Map(map) => map.entries.iter().for_each(|entry| walk_entry(&entry.expr, depth, found)),
        Expr::Struct(object) => object.entries.iter().for_each(|entry| walk_entry(&entry.expr, depth, found)),
        _ => {}
    }
}

fn walk_entry(entry: &EntryExpr, depth: usize, found: &mut dyn FnMut(usize)) {
    match entry {
        EntryExpr::StructField(field) => walk(&field.value, depth, found),
        EntryExpr::MapEntry(pair) => {
            walk(&pair.key, depth, found);
            walk(&pair.value, depth, found);
        }
    }
}

/// The first of the parser's errors, with where it is.
fn parse_error(errors: &cel::ParseErrors) -> String {
    match errors.errors.first() {
        Some(error) => format!("does not parse: {} at {}:{}", error.msg, error.pos.0, error.pos.1),
        None => "does not parse".into(),
    }
}

/// A name that is one of CEL's functions rather than a variable (a call the stdlib lacks is
/// reported the same way, and is a parse-time mistake too).
fn is_function(name: &str) -> bool {
    name.contains('(')
}

/// An event as a filter sees it, converted once per event into the interpreter's values and lent
/// to every filter evaluated on it.
#[derive(Debug)]
pub struct Message(Box<dyn Val>);

impl VariableResolver for Message {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        (variable == MESSAGE).then(|| CowVal::Borrowed(&*self.0))
    }
}

impl Message {
    pub fn of(event: &CloudEvent) -> Message {
        let raw = event.attributes();
        let mut map: HashMap<Key, Cel> = HashMap::with_capacity(raw.len());
        for (name, value) in raw {
            let converted = match name.as_str() {
                "data" | "data_base64" => continue,
                "time" => time(value),
                _ => json(value),
            };
            map.insert(Key::from(name.clone()), converted);
        }
        if let Some(data) = data(event) {
            map.insert(Key::from("data".to_string()), data);
        }
        let converted = Cel::Map(Map { map: Arc::new(map) }).try_into();
        Message(converted.expect("JSON values and timestamps convert to the interpreter's values"))
    }

    /// An event with the required attributes only, which a filter is tried on when compiled.
    fn bare() -> Message {
        let event = serde_json::json!({"specversion": "1.0", "id": "example", "source": "/example", "type": "example"});
        Message::of(&CloudEvent::from_stored(event).expect("an object"))
    }
}

fn time(value: &Value) -> Cel {
    match value.as_str().and_then(|text| chrono::DateTime::parse_from_rfc3339(text).ok()) {
        Some(time) => Cel::Timestamp(time),
        None => json(value),
    }
}

/// `data` as the parsed JSON when the event's data is JSON, a string for text, bytes otherwise.
fn data(event: &CloudEvent) -> Option<Cel> {
    let declared = event.attributes().get("datacontenttype").and_then(Value::as_str);
    let json_data = declared.is_none_or(is_json_type);
    if let Some(data) = event.attributes().get("data") {
        return Some(json(data));
    }
    let encoded = event.attributes().get("data_base64").and_then(Value::as_str)?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(encoded).ok()?;
    if declared.is_some()
        && json_data
        && let Ok(parsed) = serde_json::from_slice::<Value>(&bytes)
    {
        return Some(json(&parsed));
    }
    if declared.is_some_and(|ct| ct.get(..5).is_some_and(|t| t.eq_ignore_ascii_case("text/")))
        && let Ok(text) = std::str::from_utf8(&bytes)
    {
        return Some(Cel::String(Arc::new(text.to_string())));
    }
    Some(Cel::Bytes(Arc::new(bytes)))
}

/// A JSON value as CEL's: whole numbers as `int` (`uint` beyond its range), others as `double`.
fn json(value: &Value) -> Cel {
    match value {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Cel::Int(i),
            (None, Some(u)) => Cel::UInt(u),
            _ => Cel::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(items) => Cel::List(Arc::new(items.iter().map(json).collect())),
        Value::Object(fields) => {
            let map: HashMap<Key, Cel> = fields.iter().map(|(k, v)| (Key::from(k.clone()), json(v))).collect();
            Cel::Map(Map { map: Arc::new(map) })
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn event(extra: Value) -> CloudEvent {
        let mut fields = json!({"specversion": "1.0", "id": "e1", "source": "/shop/eu/1", "type": "order.created"});
        fields.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        CloudEvent::parse(fields, "").expect("a valid event")
    }

    fn matches(filter: &str, extra: Value) -> Result<bool, String> {
        Filter::compile(filter).expect("compiles").matches(&Message::of(&event(extra)))
    }

    #[test]
    fn every_attribute_is_a_field_of_message() {
        let all = json!({
            "subject": "orders/1", "time": "2026-03-01T10:00:00+01:00", "datacontenttype": "application/json",
            "dataschema": "https://example.com/order", "data": {"total": 150, "items": [1, 2]},
        });
        for filter in [
            r#"message.id == "e1" && message.specversion == "1.0""#,
            r#"message.source.startsWith("/shop/eu") && message.type == "order.created""#,
            r#"message.subject == "orders/1" && message.dataschema.endsWith("/order")"#,
            r#"message.time == timestamp("2026-03-01T09:00:00Z")"#,
            r#"message.datacontenttype == "application/json""#,
            "message.data.total > 100 && size(message.data.items) == 2",
        ] {
            assert_eq!(matches(filter, all.clone()), Ok(true), "{filter}");
        }
        assert_eq!(matches("message.data.total > 200", all), Ok(false));
    }

    #[test]
    fn extensions_keep_their_json_type() {
        let extra = json!({"tenant": "eu", "priority": 5, "urgent": true, "ratio": 0.5});
        let filter = r#"message.tenant == "eu" && message.priority > 3 && message.urgent && message.ratio < 1.0"#;
        assert_eq!(matches(filter, extra), Ok(true));
    }

    #[test]
    fn text_data_is_a_string_and_binary_data_bytes() {
        let text = json!({"datacontenttype": "text/plain", "data": "hello"});
        assert_eq!(matches(r#"message.data.startsWith("hel")"#, text), Ok(true));
        let binary = json!({"datacontenttype": "application/octet-stream", "data_base64": "AQID"});
        assert_eq!(matches(r#"message.data == b"\x01\x02\x03""#, binary.clone()), Ok(true));
        assert_eq!(matches("size(message.data) == 3", binary), Ok(true));
        let encoded_json = json!({"datacontenttype": "application/json", "data_base64": "eyJ0b3RhbCI6IDd9"});
        assert_eq!(matches("message.data.total == 7", encoded_json), Ok(true));
    }

    #[test]
    fn an_absent_attribute_is_absent() {
        assert_eq!(matches("has(message.subject)", json!({})), Ok(false));
        assert_eq!(matches("has(message.data)", json!({})), Ok(false));
        assert_eq!(matches("has(message.subject)", json!({"subject": "s"})), Ok(true));
    }

    #[test]
    fn a_run_time_error_is_no_match_with_its_reason() {
        let error = matches("message.data.total > 1", json!({"data": {"count": 1}})).unwrap_err();
        assert!(error.contains("total"), "{error}");
        assert!(matches(r#"message.data.total > 1"#, json!({"data": {"total": "many"}})).is_err());
    }

    #[test]
    fn a_filter_that_does_not_parse_is_refused_with_its_position() {
        let error = Filter::compile("message.source ==").unwrap_err();
        assert!(error.starts_with("does not parse:") && error.contains(" at 1:"), "{error}");
    }

    #[test]
    fn a_filter_that_is_not_a_boolean_is_refused() {
        let error = Filter::compile("1 + 2").unwrap_err();
        assert!(error.contains("boolean") && error.contains("int"), "{error}");
        assert!(Filter::compile(r#"message.source"#).is_err());
        // Fails on the bare event, so it cannot be seen not to give a boolean: accepted.
        assert!(Filter::compile("message.data.total > 100").is_ok());
    }

    #[test]
    fn a_variable_other_than_message_is_refused() {
        let error = Filter::compile("event.type == \"x\"").unwrap_err();
        assert!(error.contains("`event`"), "{error}");
    }

    #[test]
    fn a_filter_whose_cost_could_multiply_is_refused() {
        let nested = "[1, 2].all(a, [1, 2].all(b, true))";
        assert!(Filter::compile(nested).unwrap_err().contains("nest"), "a loop in a loop");
        let many = "[1].all(a, true) && [1].all(b, true) && [1].all(c, true) && [1].all(d, true) && [1].all(e, true)";
        assert!(Filter::compile(many).unwrap_err().contains("at most 4"));
        let guarded = "has(message.data) && message.data.items.exists(i, i.price > 10)";
        assert_eq!(matches(guarded, json!({"data": {"items": [{"price": 5}, {"price": 20}]}})), Ok(true));
        assert!(Filter::compile("{\"k\": [1].map(x, [2].map(y, y))}").is_err(), "inside a map literal too");
    }

    #[test]
    fn a_filter_is_at_most_4096_bytes() {
        let long = format!("message.id == \"{}\"", "x".repeat(MAX_FILTER_BYTES));
        assert!(Filter::compile(&long).unwrap_err().contains("4096"));
        assert!(Filter::compile("  ").is_err());
    }
}
