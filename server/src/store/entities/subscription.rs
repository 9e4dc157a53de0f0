use domain::ids::{CustomerId, EndpointId, SubscriptionId};
use domain::states::{ContentMode, SignatureScheme, SubscriptionStatus};
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "subscriptions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: SubscriptionId,
    pub customer_id: CustomerId,
    pub name: String,
    pub url: String,
    pub endpoint_id: EndpointId,
    pub event_types: String,
    pub retry_policy: String,
    pub timeout_ms: i32,
    pub content_mode: ContentMode,
    pub status: SubscriptionStatus,
    pub secret: String,
    pub previous_secret: Option<String>,
    pub previous_secret_expires_at: Option<i64>,
    /// A CEL expression the event must satisfy (see `domain::filter`).
    pub filter: Option<String>,
    /// The extra request headers, sealed as one JSON object (see `subscription_secrets`).
    pub headers: Option<String>,
    /// The receiver's credentials, sealed as one JSON object (see `subscription_secrets`).
    pub auth: Option<String>,
    /// The scheme `secret` signs with.
    pub signature: SignatureScheme,
    /// At most this many attempts a second to its endpoint (see `pipeline::endpoint_paces`).
    pub rate_limit_per_sec: Option<i32>,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
