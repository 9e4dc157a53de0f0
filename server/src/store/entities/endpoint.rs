use domain::ids::{CustomerId, EndpointId};
use domain::states::EndpointState;
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "endpoints")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: EndpointId,
    pub customer_id: CustomerId,
    pub url: String,
    pub state: EndpointState,
    pub consecutive_failures: i64,
    pub window_buckets: String,
    pub last_success_at: Option<i64>,
    pub last_failure_at: Option<i64>,
    pub next_probe_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
