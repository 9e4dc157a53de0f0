//! Request bodies, each declared once: its fields, whether each is required,
//! and each field's rule, a type that both reads the JSON value and describes
//! it in the OpenAPI document (feature `openapi`). So a constraint is written
//! in one place, and a client generated from the document sends what the
//! server accepts. Reading collects one error per bad field, unknown fields
//! included, named as the client spelled them. Rules that tie fields together
//! stay with the use case that reads the body.
//!
//! A dashboard form is read by the same declaration: each field's text is taken
//! as its rule says (a number, a list, a policy written as JSON), so a form and
//! an API call are refused with the same words.

mod delivery;
#[cfg(feature = "openapi")]
pub mod openapi;
mod portal;
mod rules;
mod unlock;

use serde_json::Value;

use crate::errors::FieldError;
use crate::event::CloudEvent;
use crate::ids::{CustomerId, SubscriptionId};
use crate::input::Fields;
use crate::policy::RetryPolicy;
use crate::states::{ContentMode, PortalRole, Role, SignatureScheme, SubscriptionStatus};
use crate::target::TargetUrl;

pub use delivery::{DeliveryAuth, ExtraHeaders, MASK};
pub use portal::{DEFAULT_PORTAL_TTL_SECS, ReturnUrl};
pub use rules::*;
pub use unlock::{MAX_OLDER_THAN_SECS, UnlockBody};

/// A body read from JSON, or every error of its fields.
pub trait ReadBody: Sized {
    fn read(body: &Value) -> Result<Self, Vec<FieldError>>;

    /// The JSON value a form's text for `field` stands for.
    fn form_value(field: &str, text: &str) -> Value;

    /// Reads a form's fields, `(name, text)`, `None` for one left empty, by the same rules.
    fn read_form(fields: &[(&str, Option<String>)]) -> Result<Self, Vec<FieldError>> {
        let body = fields
            .iter()
            .filter_map(|(field, text)| Some((field.to_string(), Self::form_value(field, text.as_deref()?))))
            .collect();
        Self::read(&Value::Object(body))
    }
}

/// Declares a request body: a struct of its fields (a required one as its rule's type, an
/// optional one as an `Option`), `read` from JSON, and its schema. Given `patch`, it also declares
/// the body that changes such an object: the same fields, each optional, less those after `;`
/// (set only when the object is created, required or not); a `clearable` field is `Some(None)` in a change that
/// sets it to `null`, and optional on creation. Given `schema then f`, `f` adds to the schema what ties
/// fields together (their rule is the use case's).
macro_rules! request_body {
    (
        $(#[$meta:meta])* $name:ident, patch $(#[$patch_meta:meta])* $patch:ident {
            $($(#[doc = $doc:literal])* $kind:ident $field:ident: $rule:ty),+ ;
            $($(#[doc = $create_doc:literal])* $create_kind:ident $create_only:ident: $create_only_rule:ty),* $(,)?
        }
    ) => {
        request_body! {
            $(#[$meta])* $name {
                $($(#[doc = $doc])* $kind $field: $rule,)+
                $($(#[doc = $create_doc])* $create_kind $create_only: $create_only_rule,)*
            }
        }
        request_body! {
            $(#[$patch_meta])* $patch { $($(#[doc = $doc])* $kind / patch $field: $rule,)+ }
        }
    };
    (
        $(#[$meta:meta])* $name:ident $(, schema then $finish:path)? {
            $($(#[doc = $doc:literal])* $kind:ident $(/ $in_patch:ident)? $field:ident: $rule:ty),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone)]
        pub struct $name { $($(#[doc = $doc])* pub $field: request_body!(@type [$kind $($in_patch)?] $rule)),+ }

        impl ReadBody for $name {
            fn read(body: &Value) -> Result<$name, Vec<FieldError>> {
                let mut f = Fields::new(body, "")?;
                $(let $field = request_body!(@read f [$kind $($in_patch)?] $field $rule);)+
                f.finish()?;
                Ok($name { $($field: request_body!(@take [$kind $($in_patch)?] $field)),+ })
            }

            fn form_value(field: &str, text: &str) -> Value {
                match field {
                    $(stringify!($field) => <$rule as FieldRule>::form_value(text),)+
                    _ => Value::String(text.to_string()),
                }
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                let mut object = openapi::closed_object()
                    $(.property(stringify!($field), openapi::describe(
                        <$rule as FieldRule>::schema(!request_body!(@required [$kind $($in_patch)?])),
                        &[$($doc),*],
                    )))+;
                $(if request_body!(@required [$kind $($in_patch)?]) { object = object.required(stringify!($field)); })+
                #[allow(unused_mut)]
                let mut object = object.build();
                $($finish(&mut object);)?
                object.into()
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::ToSchema for $name {
            fn name() -> std::borrow::Cow<'static, str> {
                std::borrow::Cow::Borrowed(stringify!($name))
            }
        }
    };
    (@type [required] $rule:ty) => { $rule };
    (@type [clearable patch] $rule:ty) => { Option<Option<$rule>> };
    (@type [$($kind:ident)+] $rule:ty) => { Option<$rule> };
    (@required [required]) => { true };
    (@required [$($kind:ident)+]) => { false };
    (@read $f:ident [clearable patch] $field:ident $rule:ty) => { $f.clearable::<$rule>(stringify!($field)) };
    (@read $f:ident [$($kind:ident)+] $field:ident $rule:ty) => {
        $f.rule::<$rule>(stringify!($field), request_body!(@required [$($kind)+]))
    };
    (@take [required] $field:ident) => { $field.expect("a required field is present when there are no errors") };
    (@take [$($kind:ident)+] $field:ident) => { $field };
}

request_body! {
    /// `{"name"}` of a customer or an API key.
    NameBody { required name: Text<200> }
}

request_body! {
    /// `{"retry_policy"}` to preview.
    PreviewBody { required retry_policy: RetryPolicy }
}

request_body! {
    /// A subscription to create. The admin names the customer in `customer_id`; a customer's key
    /// may leave it out (it is ignored).
    SubscriptionBody,
    patch
    /// The fields to change; absent or null fields stay as they are, and an empty body changes nothing.
    SubscriptionPatch {
        required name: Text<200>,
        required url: TargetUrl,
        /// Event types to deliver: exact types, or `*` for all but Herald's operational events
        /// (`herald.endpoint.disabled`, `herald.endpoint.locked`, `herald.endpoint.closed`,
        /// `herald.message.dead`, `herald.subscription.paused`), which are received only when named
        required event_types: EventTypes,
        /// Default `event-grid`
        optional retry_policy: RetryPolicy,
        optional timeout_ms: Integer<1000, 60000>,
        optional content_mode: ContentMode,
        optional status: SubscriptionStatus,
        /// A CEL expression over the event, `message`, that must be true for an event to reach the
        /// subscription (`message.source.startsWith("/shop/eu") && message.data.total > 100`); at
        /// most 4096 bytes. `null` removes it.
        clearable filter: FilterText,
        /// Up to 20 request headers `{name: value}` sent with every delivery (an API key for a
        /// gateway, a tenant id). Names are unique regardless of case; Herald's own are refused
        /// (`host`, `content-type`, `content-length`, `transfer-encoding`, `connection`,
        /// `user-agent`, `authorization`, `traceparent`, `tracestate`, `webhook-*`, `ce-*`). Values
        /// (at most 4096 bytes) are sealed at rest; a list shows only the names. `null` removes them.
        clearable headers: ExtraHeaders,
        /// How Herald authenticates to the receiver: `bearer`, `basic`, or `oauth2` (client
        /// credentials). Secrets are sealed at rest and never shown; `null` removes it.
        clearable auth: DeliveryAuth,
        /// `v1` (HMAC-SHA256 with the `whsec_` secret, the default) or `v1a` (Ed25519: the receiver
        /// verifies with `public_key`). A change of scheme is a rotation: the previous key keeps
        /// signing for 24 hours.
        optional signature: SignatureScheme,
        /// At most this many attempts a second to the subscription's endpoint (1 to 10000); messages
        /// beyond it wait their turn without spending an attempt. `null` removes the pace.
        clearable rate_limit_per_sec: Integer<1, 10000>;
        optional customer_id: CustomerId,
    }
}

request_body! {
    /// A filter to try on an event; nothing is stored.
    FilterTestBody {
        /// A CEL expression over the event, `message`
        required filter: FilterText,
        required event: CloudEvent,
    }
}

request_body! {
    /// A filter tried on a customer's latest kept events of some types (the dashboard's "Test the
    /// filter"); the admin names the customer, or the subscription whose customer it is.
    FilterPreviewBody {
        required filter: FilterText,
        required event_types: EventTypes,
        optional customer_id: CustomerId,
        optional subscription_id: SubscriptionId,
    }
}

request_body! {
    /// A type of the customer's event-type catalog. The admin names the customer in `customer_id`; a
    /// customer's key may leave it out (it is ignored).
    EventTypeBody,
    patch
    /// The fields to change; `null` removes a description, a schema or an example.
    EventTypePatch {
        clearable description: Text<1000>,
        /// A JSON Schema (draft 2020-12) for the `data` of the type's events: publishing one whose data
        /// breaks it is refused (422). A `pattern` match may backtrack at most 10 000 steps (look-around
        /// and back-references backtrack); one that needs more is undecided, and refused
        clearable schema: JsonSchemaDocument,
        /// An event's `data` that `send-example` publishes; it must validate against `schema`
        clearable example: AnyJson;
        /// A CloudEvents type, unique in the customer's catalog; the prefix `herald.` is reserved
        required name: EventTypeName,
        optional customer_id: CustomerId,
    }
}

request_body! {
    /// The catalog's type whose example to send.
    SendExampleBody { required event_type: EventTypeName }
}

request_body! {
    /// Replays every `dead` message that matches. With the admin token, `customer_id` limits it to one
    /// customer (all customers when absent).
    BulkReplayBody {
        required state: DeadState,
        optional subscription_id: SubscriptionId,
        optional event_type: Text<200>,
        /// RFC 3339
        optional since: Time,
        /// RFC 3339
        optional until: Time,
        optional customer_id: CustomerId,
    }
}

request_body! {
    /// A window of kept events to send again to one subscription: every event published in
    /// `[since, until)` (at most 366 days) that the subscription accepts, narrowed by `event_types`
    /// and `source`, gets a new message for it.
    ReplayWindowBody {
        /// RFC 3339
        required since: Time,
        /// RFC 3339; after `since`, at most 366 days later
        required until: Time,
        required subscription_id: SubscriptionId,
        optional event_types: EventTypes,
        optional source: Text<1024>,
    }
}

request_body! {
    /// A dashboard user: a `customer` user names its customer, an `admin` does not.
    UserBody, schema then openapi::customer_names_customer {
        required username: Text<100>,
        required password: Password,
        required role: Role,
        optional customer_id: CustomerId,
    }
}

request_body! {
    /// A one-time link that opens the dashboard as the customer, without a password.
    PortalLinkBody {
        /// `viewer` (the default) sees the customer's pages and changes nothing; `editor` acts as
        /// the customer's own user.
        optional role: PortalRole,
        /// How long the link (and the session it opens) lasts, in seconds; 3600 when absent.
        optional ttl_secs: Integer<60, 86400>,
        /// Where the portal's "Back" link leads: https, or http on a loopback host.
        optional return_url: ReturnUrl,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::dto::Backlog;

    #[test]
    fn a_body_is_read_with_every_bad_field_named() {
        assert_eq!(NameBody::read(&json!({"name": "Acme"})).unwrap().name, Text("Acme".into()));
        let fields =
            |body: Value| -> Vec<String> { NameBody::read(&body).unwrap_err().into_iter().map(|e| e.field).collect() };
        assert_eq!(fields(json!({})), ["name"]);
        assert_eq!(fields(json!({"name": null})), ["name"]);
        assert_eq!(fields(json!({"name": " ", "colour": "red"})), ["name", "colour"]);
        assert_eq!(fields(json!({"name": "x".repeat(201)})), ["name"]);
        assert_eq!(fields(json!([])), ["body"]);
        let policy = PreviewBody::read(&json!({"retry_policy": {"kind": "schedule", "delays_secs": [0]}}));
        let fields: Vec<String> = policy.unwrap_err().into_iter().map(|e| e.field).collect();
        assert_eq!(fields, ["retry_policy.delays_secs[0]"], "a rule's own errors keep their path");
        let window = ReplayWindowBody::read(&json!({"since": "yesterday", "until": 5, "subscription_id": "sub_1"}));
        let fields: Vec<String> = window.unwrap_err().into_iter().map(|e| e.field).collect();
        assert_eq!(fields, ["since", "until"], "both times are named at once");
        let window = ReplayWindowBody::read(&json!({
            "since": "2026-01-31T12:00:00Z", "until": "2026-01-31T13:00:00+01:00", "subscription_id": "sub_1",
        }));
        let window = window.unwrap();
        assert_eq!((window.until.ms - window.since.ms, window.until.text.as_str()), (0, "2026-01-31T13:00:00+01:00"));
        let bulk: Vec<String> =
            BulkReplayBody::read(&json!({"state": "held"})).unwrap_err().into_iter().map(|e| e.message).collect();
        assert_eq!(bulk, ["must be dead"]);
        let user = UserBody::read(&json!({"username": "ann", "password": "ééééééé", "role": "root"})).unwrap_err();
        let named: Vec<(&str, &str)> = user.iter().map(|e| (e.field.as_str(), e.message.as_str())).collect();
        let expected = [("password", "must be at least 8 characters"), ("role", "must be admin, customer or viewer")];
        assert_eq!(named, expected, "seven characters are too few, however many bytes they take");
    }

    #[test]
    fn a_form_is_read_by_the_same_rules() {
        let form = |timeout: &str| {
            SubscriptionPatch::read_form(&[
                ("event_types", Some("a, b\nc".into())),
                ("retry_policy", Some(" eventarc ".into())),
                ("timeout_ms", Some(timeout.into())),
                ("name", None),
            ])
        };
        let patch = form("5000").unwrap();
        assert_eq!(patch.event_types, Some(EventTypes(vec!["a".into(), "b".into(), "c".into()])));
        assert_eq!((patch.timeout_ms, patch.name), (Some(Integer(5000)), None));
        assert!(patch.retry_policy.is_some());
        let named: Vec<String> = form("soon").unwrap_err().into_iter().map(|e| e.to_string()).collect();
        assert_eq!(named, ["timeout_ms: must be an integer from 1000 to 60000"]);
        let custom =
            PreviewBody::read_form(&[("retry_policy", Some(r#"{"kind": "schedule", "delays_secs": [0]}"#.into()))]);
        let fields: Vec<String> = custom.unwrap_err().into_iter().map(|e| e.field).collect();
        assert_eq!(fields, ["retry_policy.delays_secs[0]"], "a policy typed as JSON is read as one");
        let unlock = UnlockBody::read_form(&[
            ("backlog", Some("dead_older_than".into())),
            ("older_than_secs", Some("60".into())),
        ]);
        assert_eq!(unlock.unwrap().0, Backlog::DeadOlderThan { secs: 60 });
    }

    #[test]
    fn an_unlock_reads_its_two_fields_together() {
        let read = |body: Value| UnlockBody::read(&body).map(|b| b.0);
        assert_eq!(read(json!({})), Ok(Backlog::Deliver));
        assert_eq!(read(json!({"backlog": "dead"})), Ok(Backlog::Dead));
        let older = read(json!({"backlog": "dead_older_than", "older_than_secs": 60.0}));
        assert_eq!(older, Ok(Backlog::DeadOlderThan { secs: 60 }));
        let named = |body: Value| -> Vec<(String, String)> {
            read(body).unwrap_err().into_iter().map(|e| (e.field, e.message)).collect()
        };
        let one = |field: &str, message: &str| vec![(field.to_string(), message.to_string())];
        assert_eq!(
            named(json!({"backlog": "dead_older_than"})),
            one("older_than_secs", "is required when backlog is dead_older_than")
        );
        assert_eq!(
            named(json!({"older_than_secs": 60})),
            one("older_than_secs", "is only for backlog dead_older_than")
        );
        assert_eq!(
            named(json!({"backlog": 5, "older_than_secs": 60})),
            one("backlog", "must be deliver, dead or dead_older_than"),
            "a bad choice is named alone"
        );
        assert_eq!(
            named(json!({"backlog": "dead_older_than", "older_than_secs": 0})),
            one("older_than_secs", "must be an integer from 1 to 316224000")
        );
    }

    #[cfg(feature = "openapi")]
    #[test]
    fn a_body_describes_its_fields_as_it_reads_them() {
        use utoipa::PartialSchema;
        let schema = serde_json::to_value(NameBody::schema()).unwrap();
        let expected = json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": TEXT_PATTERN}},
            "required": ["name"],
        });
        assert_eq!(schema, expected);
        let preview = serde_json::to_value(PreviewBody::schema()).unwrap();
        assert_eq!(preview["properties"]["retry_policy"], json!({"$ref": "#/components/schemas/RetryPolicy"}));
    }
}
