//! The ids of Herald's objects, one type per kind: a prefix, `_`, then a ULID (`msg_01J…`), so
//! they sort by creation time and say what they name. Rows carry them typed (feature `db`), so a
//! message id handed where a subscription id is wanted does not compile. New ones are made by the
//! server (`herald::ids::new`); an id a client names is any text, and one that is no such id
//! simply finds nothing.
//!
//! ```compile_fail,E0308
//! use domain::ids::{MessageId, SubscriptionId};
//! fn subscription(_: &SubscriptionId) {}
//! subscription(&MessageId::from("msg_01J"));
//! ```

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;

use serde::{Deserialize, Serialize};

/// What every kind of id shares.
pub trait PrefixedId: From<String> + AsRef<str> {
    /// What the kind's ids begin with, before the `_`.
    const PREFIX: &'static str;
}

macro_rules! prefixed_id {
    ($($(#[$meta:meta])* $name:ident = $prefix:literal;)+) => {$(
        $(#[$meta])*
        #[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        #[cfg_attr(feature = "db", derive(sea_orm::DeriveValueType))]
        pub struct $name(String);

        /// Keys are made by Herald, never counted up by the database.
        #[cfg(feature = "db")]
        impl sea_orm::TryFromU64 for $name {
            fn try_from_u64(_: u64) -> Result<Self, sea_orm::DbErr> {
                Err(sea_orm::DbErr::ConvertFromU64(stringify!($name)))
            }
        }

        impl PrefixedId for $name {
            const PREFIX: &'static str = $prefix;
        }

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl From<String> for $name {
            fn from(text: String) -> Self {
                $name(text)
            }
        }

        impl From<&str> for $name {
            fn from(text: &str) -> Self {
                $name(text.to_string())
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }
    )+};
}

prefixed_id! {
    /// A customer, the owner of subscriptions, keys and events (`cus_`).
    CustomerId = "cus";
    /// A subscription (`sub_`).
    SubscriptionId = "sub";
    /// An endpoint: the circuit of one target URL of a customer (`ep_`).
    EndpointId = "ep";
    /// An event as Herald keeps it (`evt_`); not the CloudEvent `id` its publisher chose.
    EventId = "evt";
    /// One event's delivery to one subscription (`msg_`).
    MessageId = "msg";
    /// An API key (`key_`).
    ApiKeyId = "key";
    /// A dashboard user (`usr_`).
    UserId = "usr";
    /// A row of the audit log (`aud_`).
    AuditId = "aud";
    /// A type of a customer's event-type catalog (`ety_`); the API names it by its name.
    EventTypeId = "ety";
    /// A replay job (`rpl_`).
    ReplayId = "rpl";
    /// A customer portal link (`prt_`); its token is another, secret, value.
    PortalLinkId = "prt";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_reads_as_its_text_and_keeps_its_kind() {
        let id = MessageId::from("msg_01J");
        assert_eq!((id.as_str(), id.len(), id.to_string()), ("msg_01J", 7, "msg_01J".to_string()));
        assert_eq!(id, "msg_01J");
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"msg_01J\"");
        assert_eq!(serde_json::from_str::<MessageId>("\"msg_01J\"").unwrap(), id);
        assert_eq!(format!("{id:?}"), "\"msg_01J\"");
        assert_eq!((MessageId::PREFIX, SubscriptionId::PREFIX, EndpointId::PREFIX), ("msg", "sub", "ep"));
    }
}
