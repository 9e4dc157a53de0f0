//! Reading a JSON object field by field at the edge, collecting an error per
//! bad field (named as the client spelled it) instead of stopping at the first.

use serde_json::{Map, Value};

use super::errors::FieldError;

pub struct Fields<'a> {
    object: &'a Map<String, Value>,
    prefix: String,
    known: Vec<&'static str>,
    pub errors: Vec<FieldError>,
}

impl<'a> Fields<'a> {
    /// `prefix` is empty for a top-level body.
    pub fn new(value: &'a Value, prefix: &str) -> Result<Fields<'a>, Vec<FieldError>> {
        match value {
            Value::Object(object) => {
                Ok(Fields { object, prefix: prefix.to_string(), known: Vec::new(), errors: Vec::new() })
            }
            _ => Err(vec![FieldError::new(if prefix.is_empty() { "body" } else { prefix }, "must be a JSON object")]),
        }
    }

    pub fn name(&self, field: &str) -> String {
        if self.prefix.is_empty() { field.to_string() } else { format!("{}.{field}", self.prefix) }
    }

    pub fn error(&mut self, field: &str, message: impl Into<String>) {
        let name = self.name(field);
        self.errors.push(FieldError::new(name, message));
    }

    /// Whether the field is given as `null` (`Some(true)`), given otherwise, or absent.
    pub fn given(&self, field: &str) -> Option<bool> {
        self.object.get(field).map(Value::is_null)
    }

    /// The raw value of a field; `null` counts as absent.
    pub fn value(&mut self, field: &'static str) -> Option<&'a Value> {
        self.known.push(field);
        self.object.get(field).filter(|v| !v.is_null())
    }

    /// The field read by `read`: `None` when it is absent or null (an error when `required`) or
    /// when `read` refuses it (its errors are kept).
    pub fn read_with<T>(
        &mut self,
        field: &'static str,
        required: bool,
        read: impl FnOnce(&'a Value, &str) -> Result<T, Vec<FieldError>>,
    ) -> Option<T> {
        let name = self.name(field);
        match self.value(field) {
            None => {
                if required {
                    self.error(field, "is required");
                }
                None
            }
            Some(value) => read(value, &name).map_err(|errors| self.errors.extend(errors)).ok(),
        }
    }

    /// A string of 1..=max_len characters without NUL.
    pub fn string(&mut self, field: &'static str, required: bool, max_len: usize) -> Option<String> {
        match self.value(field) {
            None => {
                if required {
                    self.error(field, "is required");
                }
                None
            }
            Some(Value::String(s)) => match check_text(s, max_len) {
                Ok(()) => Some(s.clone()),
                Err(message) => {
                    self.error(field, message);
                    None
                }
            },
            Some(_) => {
                self.error(field, "must be a string");
                None
            }
        }
    }

    /// An integer within `min..=max`.
    pub fn integer(&mut self, field: &'static str, min: i64, max: i64) -> Option<i64> {
        match self.value(field) {
            None => None,
            Some(v) => match whole_number(v).filter(|n| (min..=max).contains(n)) {
                Some(n) => Some(n),
                None => {
                    self.error(field, format!("must be an integer from {min} to {max}"));
                    None
                }
            },
        }
    }

    /// Ends reading: unknown fields are errors too.
    pub fn finish(mut self) -> Result<(), Vec<FieldError>> {
        let unknown: Vec<String> = self.object.keys().filter(|k| !self.known.contains(&k.as_str())).cloned().collect();
        for field in unknown {
            let name = self.name(&field);
            self.errors.push(FieldError::new(name, "is not a known field"));
        }
        if self.errors.is_empty() { Ok(()) } else { Err(self.errors) }
    }
}

/// Text the database can store and a person can read: not empty, no NUL, bounded.
/// A JSON number that is whole however it is written (`42`, `42.0`, `4.2e1`); beyond the `i64`
/// range it saturates, so a range check still refuses it.
pub fn whole_number(v: &Value) -> Option<i64> {
    v.as_i64()
        .or_else(|| v.as_u64().map(|_| i64::MAX))
        .or_else(|| v.as_f64().filter(|f| f.is_finite() && f.fract() == 0.0).map(|f| f as i64))
}

pub fn check_text(s: &str, max_len: usize) -> Result<(), String> {
    if s.trim().is_empty() {
        Err("must not be empty".into())
    } else if s.chars().count() > max_len {
        Err(format!("must be at most {max_len} characters"))
    } else if s.contains('\0') {
        Err("must not contain NUL characters".into())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn whole_numbers_are_whole_however_written() {
        let parse = |text: &str| whole_number(&serde_json::from_str(text).unwrap());
        assert_eq!(
            (parse("42"), parse("42.0"), parse("4.2e1"), parse("-3.0")),
            (Some(42), Some(42), Some(42), Some(-3))
        );
        assert_eq!((parse("42.5"), parse("\"42\""), parse("1e-300")), (None, None, None));
        assert_eq!((parse("18446744073709551615"), parse("1e300")), (Some(i64::MAX), Some(i64::MAX)));
    }

    #[test]
    fn collects_one_error_per_bad_field_including_unknown_ones() {
        let body = json!({"name": "", "timeout_ms": 5, "colour": "red", "url": 3});
        let mut f = Fields::new(&body, "").unwrap();
        assert_eq!(f.string("name", true, 10), None);
        assert_eq!(f.string("url", true, 10), None);
        assert_eq!(f.string("missing", true, 10), None);
        assert_eq!(f.integer("timeout_ms", 1000, 60000), None);
        let fields: Vec<String> = f.finish().unwrap_err().into_iter().map(|e| e.field).collect();
        assert_eq!(fields, vec!["name", "url", "missing", "timeout_ms", "colour"]);
    }

    #[test]
    fn a_field_read_with_a_function_keeps_its_errors() {
        let body = json!({"a": 1, "b": "x", "c": null});
        let mut f = Fields::new(&body, "outer").unwrap();
        let refuse = |_: &Value, name: &str| Err::<(), _>(vec![FieldError::new(name, "is wrong")]);
        assert_eq!(f.read_with("a", true, |v, _| Ok(v.as_i64())), Some(Some(1)));
        assert_eq!(f.read_with("b", false, refuse), None);
        assert_eq!(f.read_with("c", true, refuse), None);
        let errors: Vec<(String, String)> = f.finish().unwrap_err().into_iter().map(|e| (e.field, e.message)).collect();
        assert_eq!(errors, [("outer.b", "is wrong"), ("outer.c", "is required")].map(|(f, m)| (f.into(), m.into())));
    }

    #[test]
    fn nested_fields_carry_their_prefix() {
        let body = json!({"a": "x\u{0}"});
        let mut f = Fields::new(&body, "outer").unwrap();
        f.string("a", true, 10);
        assert_eq!(f.finish().unwrap_err()[0].field, "outer.a");
        assert_eq!(Fields::new(&json!([1]), "").err().unwrap()[0].field, "body");
    }
}
