//! An unlock's body: what becomes of the messages the lock held. Its two
//! fields go together, so it is read, and described, as a whole.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ReadBody;
use super::rules::{FieldRule, Integer, one_of, text_enum_rule};
use crate::dto::Backlog;
use crate::errors::FieldError;
use crate::input::Fields;
use crate::states::{UnknownText, text_enum};

#[cfg(feature = "openapi")]
use super::openapi;

/// The longest `older_than_secs` an unlock takes: ten years.
pub const MAX_OLDER_THAN_SECS: i64 = 10 * 366 * 86_400;

/// What an unlock does with the messages the lock held: `deliver` them (the default), end them
/// `dead` (`dead_reason` `expired`), or `dead_older_than` ends those created more than
/// `older_than_secs` ago and delivers the rest. Its two fields go together, so its schema is a
/// `oneOf` of the two shapes it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnlockBody(pub Backlog);

text_enum!(
    /// The choice `backlog` names.
    BacklogChoice { Deliver = "deliver", Dead = "dead", DeadOlderThan = "dead_older_than" }
);
text_enum_rule!(BacklogChoice);

type OlderThanSecs = Integer<1, MAX_OLDER_THAN_SECS>;

/// Both fields are optional (an empty body delivers the backlog), and `older_than_secs` goes with
/// `dead_older_than` only.
impl ReadBody for UnlockBody {
    fn read(body: &Value) -> Result<UnlockBody, Vec<FieldError>> {
        let mut f = Fields::new(body, "")?;
        let choice = f.rule::<BacklogChoice>("backlog", false);
        let older_than = f.rule::<OlderThanSecs>("older_than_secs", false);
        let named_badly = |f: &Fields, field: &str| f.errors.iter().any(|e| e.field == field);
        let backlog = match (choice, older_than) {
            (None | Some(BacklogChoice::Deliver), None) => Backlog::Deliver,
            (Some(BacklogChoice::Dead), None) => Backlog::Dead,
            (Some(BacklogChoice::DeadOlderThan), Some(Integer(secs))) => Backlog::DeadOlderThan { secs },
            (Some(BacklogChoice::DeadOlderThan), None) => {
                if !named_badly(&f, "older_than_secs") {
                    f.error("older_than_secs", "is required when backlog is dead_older_than");
                }
                Backlog::Deliver
            }
            (None | Some(BacklogChoice::Deliver | BacklogChoice::Dead), Some(_)) => {
                if !named_badly(&f, "backlog") {
                    f.error("older_than_secs", "is only for backlog dead_older_than");
                }
                Backlog::Deliver
            }
        };
        f.finish()?;
        Ok(UnlockBody(backlog))
    }

    fn form_value(field: &str, text: &str) -> Value {
        match field {
            "older_than_secs" => OlderThanSecs::form_value(text),
            _ => Value::String(text.to_string()),
        }
    }
}

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for UnlockBody {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::OneOfBuilder;
        let with_secs = openapi::closed_object()
            .property("backlog", openapi::enum_of(&[BacklogChoice::DeadOlderThan.as_str()], false))
            .property("older_than_secs", OlderThanSecs::schema(false))
            .required("backlog")
            .required("older_than_secs");
        let without = openapi::closed_object().property(
            "backlog",
            openapi::enum_of(&[BacklogChoice::Deliver.as_str(), BacklogChoice::Dead.as_str()], false),
        );
        OneOfBuilder::new().item(without).item(with_secs).into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for UnlockBody {
    fn name() -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed("UnlockBody")
    }
}
