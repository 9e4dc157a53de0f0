use domain::ids::{CustomerId, ReplayId};
use domain::states::{ReplayKind, ReplayState};
use sea_orm::entity::prelude::*;

/// A replay job: what it selects (`request`, as the API reads it), how far it got (`cursor`, the
/// last event or message id done) and how many it replayed.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "replays")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: ReplayId,
    /// The customer whose events or messages it replays; `None`: an admin's replay of every
    /// customer's dead messages.
    pub customer_id: Option<CustomerId>,
    pub kind: ReplayKind,
    pub state: ReplayState,
    pub request: String,
    pub replayed: i64,
    pub cursor: Option<String>,
    pub lease_token: Option<i64>,
    pub lease_until: i64,
    pub created_at: i64,
    pub updated_at: i64,
    pub finished_at: Option<i64>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
