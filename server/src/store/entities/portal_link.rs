use domain::ids::{CustomerId, PortalLinkId};
use domain::states::PortalRole;
use sea_orm::entity::prelude::*;

/// A one-time link that opens the dashboard as a customer. Only its token's hash is kept.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "portal_links")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: PortalLinkId,
    pub token_hash: String,
    pub customer_id: CustomerId,
    pub role: PortalRole,
    pub return_url: Option<String>,
    /// How long the link, and the session it opens, lasts.
    pub ttl_secs: i64,
    pub expires_at: i64,
    /// When it was opened; a link opens once.
    pub used_at: Option<i64>,
    pub created_at: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
