use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "messages")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub customer_id: String,
    pub event_id: String,
    pub subscription_id: String,
    pub endpoint_id: String,
    pub event_type: String,
    pub state: String,
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
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
