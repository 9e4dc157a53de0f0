use domain::ids::{CustomerId, EventTypeId};
use sea_orm::entity::prelude::*;

/// A type of the customer's event-type catalog; `schema` and `example` are JSON text.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "event_types")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: EventTypeId,
    pub customer_id: CustomerId,
    pub name: String,
    pub description: Option<String>,
    pub schema: Option<String>,
    pub example: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
