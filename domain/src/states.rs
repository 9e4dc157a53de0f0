//! The named states and kinds of Herald's objects, stored as text and spoken as text in JSON.

use serde::{Deserialize, Serialize};

/// Declares a string-backed enum with `as_str`, `parse`, serde, its OpenAPI schema and (feature
/// `db`) its database column type in one place, so a stored state is read and written as the enum.
/// The schema is written out, not derived: utoipa's derive does not see serde renames passed
/// through a macro and would document `Pending` where the JSON says `pending`.
macro_rules! text_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[cfg_attr(feature = "db", derive(sea_orm::DeriveValueType), sea_orm(value_type = "String"))]
        pub enum $name { $(#[serde(rename = $text)] $variant),+ }

        impl std::str::FromStr for $name {
            type Err = UnknownText;
            fn from_str(text: &str) -> Result<Self, UnknownText> {
                $name::parse(text).ok_or_else(|| UnknownText { kind: stringify!($name), text: text.to_string() })
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::schema::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .enum_values(Some([$($text),+]))
                    .into()
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::ToSchema for $name {
            fn name() -> std::borrow::Cow<'static, str> {
                std::borrow::Cow::Borrowed(stringify!($name))
            }
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            pub fn as_str(&self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
            pub fn parse(text: &str) -> Option<Self> {
                match text { $($text => Some($name::$variant),)+ _ => None }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
pub(crate) use text_enum;

/// Stored text that names no variant of the enum it is read as.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a known {kind}")]
pub struct UnknownText {
    pub kind: &'static str,
    pub text: String,
}

text_enum!(
    /// Where a message is in its life.
    MessageState { Pending = "pending", Delivering = "delivering", Delivered = "delivered", Held = "held", Dead = "dead" }
);
text_enum!(
    /// How one attempt ended.
    Outcome { Success = "success", Retryable = "retryable", Permanent = "permanent" }
);
text_enum!(
    /// Why an attempt got no usable HTTP status (`auth`: the receiver's credentials could not be
    /// had, its OAuth 2.0 token endpoint failed).
    ErrorKind {
        Timeout = "timeout", Connect = "connect", Dns = "dns", Tls = "tls",
        BlockedTarget = "blocked_target", BodyTooLarge = "body_too_large", Auth = "auth", Other = "other",
    }
);
text_enum!(
    /// The circuit of one endpoint.
    EndpointState { Closed = "closed", Disabled = "disabled", Locked = "locked" }
);
text_enum!(
    /// How the event is put on the wire (CloudEvents HTTP binding).
    ContentMode { Structured = "structured", Binary = "binary" }
);
text_enum!(
    /// How deliveries are signed: `v1` HMAC-SHA256 with a shared secret, `v1a` Ed25519.
    SignatureScheme { V1 = "v1", V1a = "v1a" }
);
text_enum!(
    SubscriptionStatus { Active = "active", Paused = "paused" }
);
text_enum!(
    /// What a replay job replays: a window of kept events to a subscription, or dead messages.
    ReplayKind { Events = "events", Messages = "messages" }
);
text_enum!(
    /// Where a replay job is: `running` until every selected event or message is replayed
    /// (`done`), it is cancelled, or it cannot go on (`failed`: its subscription was deleted).
    ReplayState { Running = "running", Done = "done", Failed = "failed", Cancelled = "cancelled" }
);
text_enum!(
    /// A dashboard user's role: `customer` (the editor) acts for its customer, `viewer` sees
    /// what it sees and changes nothing.
    Role { Admin = "admin", Customer = "customer", Viewer = "viewer" }
);
text_enum!(
    /// What a portal link's holder may do: `viewer` reads, `editor` acts as the customer's own user.
    PortalRole { Viewer = "viewer", Editor = "editor" }
);

impl PortalRole {
    /// The dashboard role a link's session has: `editor` is the customer's own.
    pub fn role(self) -> Role {
        match self {
            PortalRole::Editor => Role::Customer,
            PortalRole::Viewer => Role::Viewer,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_round_trips_through_text_and_json() {
        for state in MessageState::ALL {
            assert_eq!(MessageState::parse(state.as_str()), Some(*state));
            let json = serde_json::to_string(state).unwrap();
            assert_eq!(json, format!("\"{}\"", state.as_str()));
        }
        assert_eq!(ErrorKind::parse("blocked_target"), Some(ErrorKind::BlockedTarget));
        assert_eq!(EndpointState::parse("open"), None);
    }
}
