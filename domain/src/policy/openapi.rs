//! What the OpenAPI document says of a retry policy: the ranges [`RetryPolicy::parse`] accepts.

use std::borrow::Cow;
use std::ops::RangeInclusive;

use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, SchemaType, Type};
use utoipa::{PartialSchema, ToSchema};

use super::decision::TRANSIENT_STATUSES;
use super::json::{
    DELAY_RANGE, FIXED_DELAY_RANGE, MAX_ATTEMPTS_RANGE, MAX_CODES, MAX_FIXED_DELAYS, MAX_JITTER, STATUS_RANGE,
    TTL_RANGE,
};
use super::{Preset, RetryPolicy};
use crate::request::openapi::{closed_object, enum_of, object_of};

fn integer(range: &RangeInclusive<u32>, nullable: bool) -> ObjectBuilder {
    object_of(Type::Integer, nullable).minimum(Some(*range.start())).maximum(Some(*range.end()))
}

/// A preset name, a preset with overrides, or a custom `exponential` or `schedule` policy. For
/// `exponential`, `min_delay_secs` must not exceed `max_delay_secs` (factor 2; linear when they
/// are equal). Null fields take their defaults.
impl PartialSchema for RetryPolicy {
    fn schema() -> RefOr<Schema> {
        let presets: Vec<&str> = Preset::ALL.iter().map(Preset::as_str).collect();
        let codes =
            ArrayBuilder::new().items(integer(&STATUS_RANGE, false)).min_items(Some(1)).max_items(Some(MAX_CODES));
        let transient: Vec<String> = TRANSIENT_STATUSES.iter().map(u16::to_string).collect();
        let retry_on = OneOfBuilder::new()
            .item(enum_of(&["all", "transient"], false))
            .item(codes)
            .item(ObjectBuilder::new().schema_type(Type::Null))
            .description(Some(format!(
                "`all`, `transient` ({}, timeouts and connection errors), or the status codes to retry",
                transient.join(", ")
            )))
            .build();
        let common = |kinds: &[&str]| {
            closed_object()
                .property("kind", enum_of(kinds, false))
                .property("max_attempts", integer(&MAX_ATTEMPTS_RANGE, true))
                .property("ttl_secs", integer(&TTL_RANGE, true))
                .property("retry_on", Schema::OneOf(retry_on.clone()))
                .required("kind")
        };
        let delays = ArrayBuilder::new()
            .items(integer(&FIXED_DELAY_RANGE, false))
            .min_items(Some(1))
            .max_items(Some(MAX_FIXED_DELAYS));
        let jitter = ObjectBuilder::new()
            .schema_type(SchemaType::from_iter([Type::Number, Type::Null]))
            .minimum(Some(0))
            .maximum(Some(MAX_JITTER));
        OneOfBuilder::new()
            .item(enum_of(&presets, false))
            .item(common(&presets))
            .item(
                common(&["exponential"])
                    .property("min_delay_secs", integer(&DELAY_RANGE, false))
                    .property("max_delay_secs", integer(&DELAY_RANGE, false))
                    .required("min_delay_secs")
                    .required("max_delay_secs"),
            )
            .item(
                common(&["schedule"])
                    .property("delays_secs", delays)
                    .property("jitter", jitter)
                    .required("delays_secs"),
            )
            .into()
    }
}

impl ToSchema for RetryPolicy {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("RetryPolicy")
    }
}
