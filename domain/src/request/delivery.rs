//! What a subscription adds to each delivery for receivers behind a gateway: extra headers and
//! credentials. Both hold secrets, so neither prints its values (`Debug` masks them) and each
//! says which of its parts may be shown.

use serde_json::{Map, Value, json};

use super::FieldRule;
use crate::errors::FieldError;
use crate::input::Fields;
use crate::target::TargetUrl;

#[cfg(feature = "openapi")]
use super::openapi;

/// The most extra headers a subscription sends.
const MAX_EXTRA_HEADERS: usize = 20;
/// The longest value of an extra header, in bytes (each a visible ASCII character or a space).
pub const MAX_HEADER_VALUE_BYTES: usize = 4096;
/// The longest name of an extra header.
const MAX_HEADER_NAME_LEN: usize = 256;
/// What a masked secret reads as.
pub const MASK: &str = "•••";

/// Names Herald writes itself, or that `auth` sets: an extra header may not replace them.
const RESERVED_HEADERS: [&str; 9] = [
    "host",
    "content-type",
    "content-length",
    "transfer-encoding",
    "connection",
    "user-agent",
    "authorization",
    "traceparent",
    "tracestate",
];
/// Prefixes of names Herald writes itself (Standard Webhooks' and the CloudEvents binary mode's).
const RESERVED_PREFIXES: [&str; 2] = ["webhook-", "ce-"];

/// Whether an extra header may not carry this name (whatever its case).
fn is_reserved_header(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    RESERVED_HEADERS.contains(&lower.as_str()) || RESERVED_PREFIXES.iter().any(|prefix| lower.starts_with(prefix))
}

/// An HTTP token (RFC 9110 §5.6.2), as a field name must be.
fn is_token(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// A credential's text: 1 to `max` characters, none a control character (which would split or
/// end the header it goes in).
fn credential_text(value: &Value, name: &str, max: usize) -> Result<String, Vec<FieldError>> {
    let why = match value {
        Value::String(text) if text.is_empty() => "must not be empty".to_string(),
        Value::String(text) if text.chars().count() > max => format!("must be at most {max} characters"),
        Value::String(text) if text.chars().any(char::is_control) => "must not contain control characters".into(),
        Value::String(text) => return Ok(text.clone()),
        _ => "must be a string".into(),
    };
    Err(vec![FieldError::new(name, why)])
}

/// An extra header's value: 1 to [`MAX_HEADER_VALUE_BYTES`] visible ASCII characters or spaces, as
/// a header value is (RFC 9110 §5.5: no control characters; others only as obsolete text).
fn header_value(value: &Value, name: &str) -> Result<String, Vec<FieldError>> {
    let why = match value {
        Value::String(text) if text.is_empty() => "must not be empty".to_string(),
        Value::String(text) if text.len() > MAX_HEADER_VALUE_BYTES => {
            format!("must be at most {MAX_HEADER_VALUE_BYTES} bytes")
        }
        Value::String(text) if !text.bytes().all(|b| (0x20..0x7f).contains(&b)) => {
            "must be visible ASCII characters and spaces, without control characters".into()
        }
        Value::String(text) => return Ok(text.clone()),
        _ => "must be a string".into(),
    };
    Err(vec![FieldError::new(name, why)])
}

/// Up to [`MAX_EXTRA_HEADERS`] request headers `{name: value}` sent with every delivery, names
/// unique regardless of case and none of Herald's own. A form writes them one per line,
/// `Name: value`.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct ExtraHeaders(pub Vec<(String, String)>);

impl std::fmt::Debug for ExtraHeaders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.0.iter().map(|(name, _)| (name, MASK))).finish()
    }
}

impl ExtraHeaders {
    pub fn names(&self) -> Vec<&str> {
        self.0.iter().map(|(name, _)| name.as_str()).collect()
    }

    /// The headers with their values, as stored (sealed) and as a single read shows them.
    pub fn to_json(&self) -> Value {
        Value::Object(self.0.iter().map(|(name, value)| (name.clone(), Value::from(value.as_str()))).collect())
    }
}

impl FieldRule for ExtraHeaders {
    fn read(value: &Value, name: &str) -> Result<Self, Vec<FieldError>> {
        let Value::Object(object) = value else {
            return Err(vec![FieldError::new(name, "must be an object of header names to values")]);
        };
        if object.len() > MAX_EXTRA_HEADERS {
            return Err(vec![FieldError::new(name, format!("must have at most {MAX_EXTRA_HEADERS} headers"))]);
        }
        let (mut headers, mut errors) = (Vec::with_capacity(object.len()), Vec::new());
        for (header, value) in object {
            let field = format!("{name}.{header}");
            let refusal = if !is_token(header) || header.len() > MAX_HEADER_NAME_LEN {
                Some(format!(
                    "is not a header name (letters, digits and !#$%&'*+-.^_`|~, at most {MAX_HEADER_NAME_LEN})"
                ))
            } else if is_reserved_header(header) {
                Some("is set by Herald and cannot be replaced (authentication goes in `auth`)".to_string())
            } else if headers.iter().any(|(seen, _): &(String, String)| seen.eq_ignore_ascii_case(header)) {
                Some("repeats a name already given (names are compared regardless of case)".to_string())
            } else {
                None
            };
            match (refusal, header_value(value, &field)) {
                (Some(why), _) => errors.push(FieldError::new(field, why)),
                (None, Err(bad)) => errors.extend(bad),
                (None, Ok(text)) => headers.push((header.clone(), text)),
            }
        }
        if errors.is_empty() { Ok(ExtraHeaders(headers)) } else { Err(errors) }
    }

    /// One header a line, `Name: value`; no lines is `null` (none). A line without a colon is a
    /// name without a value, which is refused as such.
    fn form_value(text: &str) -> Value {
        let lines = text.lines().map(str::trim).filter(|line| !line.is_empty());
        let object: Map<String, Value> = lines
            .map(|line| match line.split_once(':') {
                Some((name, value)) => (name.trim().to_string(), Value::from(value.trim())),
                None => (line.to_string(), Value::from("")),
            })
            .collect();
        if object.is_empty() { Value::Null } else { Value::Object(object) }
    }

    #[cfg(feature = "openapi")]
    fn schema(nullable: bool) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, Type};
        let value = ObjectBuilder::new()
            .schema_type(Type::String)
            .min_length(Some(1))
            .max_length(Some(MAX_HEADER_VALUE_BYTES))
            .pattern(Some(r"^[\x20-\x7e]+$"));
        let mut object = openapi::object_of(Type::Object, nullable)
            .additional_properties(Some(AdditionalProperties::RefOr(value.into())))
            .max_properties(Some(MAX_EXTRA_HEADERS))
            .build();
        // Names: tokens, and none of Herald's own (a client can check this much alone).
        let names = json!({
            "pattern": "^(?![Ww][Ee][Bb][Hh][Oo][Oo][Kk]-|[Cc][Ee]-)(?!(?i:host|content-type|content-length|transfer-encoding|connection|user-agent|authorization|traceparent|tracestate)$)[A-Za-z0-9!#$%&'*+.^_`|~-]{1,256}$"
        });
        object.extensions.get_or_insert_with(Default::default).insert("propertyNames".into(), names);
        object.into()
    }
}

/// The longest token, password or client secret, in characters.
const MAX_SECRET_CHARS: usize = 4096;
/// The longest user name, client id or scope, in characters.
const MAX_NAME_CHARS: usize = 1024;

/// How Herald authenticates to the receiver: an `Authorization` header it writes.
#[derive(Clone, PartialEq, Eq)]
pub enum DeliveryAuth {
    /// `Authorization: Bearer <token>`.
    Bearer { token: String },
    /// `Authorization: Basic <base64 of user:password>` (RFC 7617).
    Basic { username: String, password: String },
    /// OAuth 2.0 client credentials (RFC 6749 §4.4): a token from `token_url`, kept until it ends.
    OAuth2 { token_url: TargetUrl, client_id: String, client_secret: String, scope: Option<String> },
}

impl std::fmt::Debug for DeliveryAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeliveryAuth({})", self.public_json())
    }
}

impl DeliveryAuth {
    pub fn kind(&self) -> &'static str {
        match self {
            DeliveryAuth::Bearer { .. } => "bearer",
            DeliveryAuth::Basic { .. } => "basic",
            DeliveryAuth::OAuth2 { .. } => "oauth2",
        }
    }

    /// Every part, secrets included: what is sealed and stored.
    pub fn to_json(&self) -> Value {
        let mut json = self.public_json();
        match self {
            DeliveryAuth::Bearer { token } => json["token"] = json!(token),
            DeliveryAuth::Basic { password, .. } => json["password"] = json!(password),
            DeliveryAuth::OAuth2 { client_secret, .. } => json["client_secret"] = json!(client_secret),
        }
        json
    }

    /// The kind and the parts that are not secret: what the API, the dashboard and the audit show.
    pub fn public_json(&self) -> Value {
        match self {
            DeliveryAuth::Bearer { .. } => json!({"kind": "bearer"}),
            DeliveryAuth::Basic { username, .. } => json!({"kind": "basic", "username": username}),
            DeliveryAuth::OAuth2 { token_url, client_id, scope, .. } => json!({
                "kind": "oauth2", "token_url": token_url.as_str(), "client_id": client_id, "scope": scope,
            }),
        }
    }

    fn read_kind(f: &mut Fields, kind: &str) -> Option<DeliveryAuth> {
        let secret = |f: &mut Fields, field: &'static str, max: usize| {
            f.read_with(field, true, |value, name| credential_text(value, name, max))
        };
        match kind {
            "bearer" => Some(DeliveryAuth::Bearer { token: secret(f, "token", MAX_SECRET_CHARS)? }),
            "basic" => {
                let username = f.read_with("username", true, |value, name| {
                    let username = credential_text(value, name, MAX_NAME_CHARS)?;
                    match username.contains(':') {
                        true => Err(vec![FieldError::new(name, "must not contain a colon (RFC 7617)")]),
                        false => Ok(username),
                    }
                });
                let password = secret(f, "password", MAX_SECRET_CHARS);
                Some(DeliveryAuth::Basic { username: username?, password: password? })
            }
            _ => {
                let token_url = f.rule::<TargetUrl>("token_url", true);
                let client_id = secret(f, "client_id", MAX_NAME_CHARS);
                let client_secret = secret(f, "client_secret", MAX_SECRET_CHARS);
                let scope = f.read_with("scope", false, |value, name| credential_text(value, name, MAX_NAME_CHARS));
                Some(DeliveryAuth::OAuth2 {
                    token_url: token_url?,
                    client_id: client_id?,
                    client_secret: client_secret?,
                    scope,
                })
            }
        }
    }
}

const AUTH_KINDS: [&str; 3] = ["bearer", "basic", "oauth2"];

impl FieldRule for DeliveryAuth {
    fn read(value: &Value, name: &str) -> Result<Self, Vec<FieldError>> {
        let mut f = Fields::new(value, name)?;
        let kind = match f.value("kind") {
            Some(Value::String(kind)) if AUTH_KINDS.contains(&kind.as_str()) => kind.clone(),
            Some(_) => {
                f.error("kind", format!("must be {}", super::rules::one_of(&AUTH_KINDS)));
                return Err(f.errors);
            }
            None => {
                f.error("kind", "is required");
                return Err(f.errors);
            }
        };
        let auth = DeliveryAuth::read_kind(&mut f, &kind);
        f.finish()?;
        Ok(auth.expect("every part is read when there are no errors"))
    }

    /// A form sends the whole of it as JSON text.
    fn form_value(text: &str) -> Value {
        if text.trim().is_empty() { Value::Null } else { serde_json::from_str(text).unwrap_or(Value::from(text)) }
    }

    #[cfg(feature = "openapi")]
    fn schema(nullable: bool) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, SchemaType, Type};
        let text = |max: usize| {
            ObjectBuilder::new()
                .schema_type(Type::String)
                .min_length(Some(1))
                .max_length(Some(max))
                .pattern(Some(r"^[^\x00-\x1f\x7f-\x9f]+$"))
        };
        let kind = |kind: &str| ObjectBuilder::new().schema_type(Type::String).enum_values(Some([kind]));
        let bearer =
            openapi::closed_object().property("kind", kind("bearer")).property("token", text(MAX_SECRET_CHARS));
        let basic = openapi::closed_object()
            .property("kind", kind("basic"))
            .property("username", text(MAX_NAME_CHARS).pattern(Some(r"^[^\x00-\x1f\x7f-\x9f:]+$")))
            .property("password", text(MAX_SECRET_CHARS));
        let oauth2 = openapi::closed_object()
            .property("kind", kind("oauth2"))
            .property("token_url", TargetUrl::schema(false))
            .property("client_id", text(MAX_NAME_CHARS))
            .property("client_secret", text(MAX_SECRET_CHARS))
            .property("scope", text(MAX_NAME_CHARS).schema_type(SchemaType::from_iter([Type::String, Type::Null])))
            .description(Some("OAuth 2.0 client credentials: the token is requested from `token_url` and kept until `expires_in` less 30 s"));
        let mut one_of = OneOfBuilder::new()
            .item(bearer.required("kind").required("token"))
            .item(basic.required("kind").required("username").required("password"))
            .item(oauth2.required("kind").required("token_url").required("client_id").required("client_secret"));
        if nullable {
            one_of = one_of.item(ObjectBuilder::new().schema_type(Type::Null));
        }
        one_of.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusals(rule: Result<impl std::fmt::Debug, Vec<FieldError>>) -> Vec<(String, String)> {
        rule.unwrap_err().into_iter().map(|e| (e.field, e.message)).collect()
    }

    #[test]
    fn every_reserved_header_is_refused_by_name_whatever_its_case() {
        for name in ["Host", "content-type", "Content-Length", "transfer-encoding", "connection", "User-Agent"]
            .into_iter()
            .chain(["Authorization", "traceparent", "tracestate", "Webhook-Signature", "webhook-x", "ce-id", "CE-type"])
        {
            let errors = refusals(ExtraHeaders::read(&json!({ name: "v" }), "headers"));
            assert_eq!(errors.len(), 1, "{name}");
            assert_eq!(errors[0].0, format!("headers.{name}"));
            assert!(errors[0].1.contains("set by Herald"), "{errors:?}");
        }
        let ok = ExtraHeaders::read(&json!({"X-Api-Key": "k", "x-tenant": "t 1"}), "headers").unwrap();
        assert_eq!(ok.names(), vec!["X-Api-Key", "x-tenant"]);
        assert_eq!(format!("{ok:?}"), "{\"X-Api-Key\": \"•••\", \"x-tenant\": \"•••\"}", "values never print");
    }

    #[test]
    fn bad_headers_are_named_one_by_one() {
        let many: Map<String, Value> = (0..21).map(|i| (format!("x-{i}"), json!("v"))).collect();
        assert_eq!(refusals(ExtraHeaders::read(&Value::Object(many), "headers"))[0].0, "headers");
        let errors = refusals(ExtraHeaders::read(
            &json!({"x-a": "line\nbreak", "bad name": "v", "x-e": "café", "x-b": 1, "X-C": "v", "x-c": "v", "x-d": "a".repeat(4097)}),
            "headers",
        ));
        let fields: Vec<&str> = errors.iter().map(|(field, _)| field.as_str()).collect();
        assert_eq!(
            fields,
            vec!["headers.bad name", "headers.x-a", "headers.x-b", "headers.x-c", "headers.x-d", "headers.x-e"]
        );
        assert!(errors.iter().any(|(f, m)| f == "headers.x-c" && m.contains("repeats")), "{errors:?}");
    }

    #[test]
    fn a_form_writes_headers_one_a_line() {
        assert_eq!(
            ExtraHeaders::form_value("X-A: 1\n\n  x-b :two: parts \n"),
            json!({"X-A": "1", "x-b": "two: parts"})
        );
        assert_eq!(ExtraHeaders::form_value("  \n"), Value::Null);
        let read = ExtraHeaders::read(&ExtraHeaders::form_value("X-A: 1\nx-b: 2"), "headers").unwrap();
        assert_eq!(read.to_json(), json!({"X-A": "1", "x-b": "2"}));
    }

    #[test]
    fn auth_reads_each_kind_and_shows_only_what_is_not_secret() {
        let bearer = DeliveryAuth::read(&json!({"kind": "bearer", "token": "t0k"}), "auth").unwrap();
        assert_eq!(bearer.public_json(), json!({"kind": "bearer"}));
        assert_eq!(DeliveryAuth::read(&bearer.to_json(), "auth").unwrap(), bearer, "what is stored reads back");
        let basic = DeliveryAuth::read(&json!({"kind": "basic", "username": "u", "password": "p"}), "auth").unwrap();
        assert_eq!(basic.public_json(), json!({"kind": "basic", "username": "u"}));
        let oauth =
            json!({"kind": "oauth2", "token_url": "https://id.example/token", "client_id": "c", "client_secret": "s"});
        let oauth = DeliveryAuth::read(&oauth, "auth").unwrap();
        assert_eq!(
            oauth.public_json(),
            json!({"kind": "oauth2", "token_url": "https://id.example/token", "client_id": "c", "scope": null})
        );
        assert!(!format!("{oauth:?}").contains("\"s\""), "the secret never prints");
    }

    #[test]
    fn bad_auth_is_named_by_its_part() {
        let errors = |value: Value| refusals(DeliveryAuth::read(&value, "auth"));
        assert_eq!(errors(json!({"kind": "digest"}))[0].0, "auth.kind");
        assert_eq!(errors(json!({"token": "t"}))[0].0, "auth.kind");
        assert_eq!(errors(json!({"kind": "bearer"}))[0].0, "auth.token");
        assert_eq!(errors(json!({"kind": "bearer", "token": "t", "password": "p"}))[0].0, "auth.password");
        assert_eq!(errors(json!({"kind": "basic", "username": "a:b", "password": "p"}))[0].0, "auth.username");
        let oauth = errors(json!({"kind": "oauth2", "token_url": "ftp://x", "client_id": "c", "client_secret": "s\r"}));
        let fields: Vec<&str> = oauth.iter().map(|(field, _)| field.as_str()).collect();
        assert_eq!(fields, vec!["auth.token_url", "auth.client_secret"]);
    }
}
