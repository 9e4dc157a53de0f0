use domain::ids::{CustomerId, EndpointId, EventId, MessageId, SubscriptionId};
use domain::states::MessageState;
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, serde::Serialize)]
#[sea_orm(table_name = "messages")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: MessageId,
    pub customer_id: CustomerId,
    pub event_id: EventId,
    pub subscription_id: SubscriptionId,
    pub endpoint_id: EndpointId,
    pub event_type: String,
    pub state: MessageState,
    pub dead_reason: Option<String>,
    pub attempt_count: i32,
    pub attempt_base: i32,
    pub ttl_started_at: i64,
    pub expires_at: i64,
    pub next_attempt_at: Option<i64>,
    pub lease_token: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
    pub delivered_at: Option<i64>,
    pub last_status: Option<i32>,
    /// When the current series of attempts first failed (retries are due from it).
    pub first_failed_at: Option<i64>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

#[cfg(test)]
impl Model {
    /// A message leased for its first attempt, for unit tests.
    pub fn leased_sample(id: &str, endpoint_id: &str) -> Model {
        Model {
            id: id.into(),
            customer_id: "cus_1".into(),
            event_id: "evt_1".into(),
            subscription_id: "sub_1".into(),
            endpoint_id: endpoint_id.into(),
            event_type: "t".into(),
            state: MessageState::Delivering,
            dead_reason: None,
            attempt_count: 0,
            attempt_base: 0,
            ttl_started_at: 0,
            expires_at: 86_400_000,
            next_attempt_at: None,
            lease_token: Some(1),
            created_at: 0,
            updated_at: 0,
            delivered_at: None,
            last_status: None,
            first_failed_at: None,
        }
    }
}
