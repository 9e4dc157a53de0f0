use domain::ids::{CustomerId, MessageId};
use domain::states::{ErrorKind, Outcome};
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, serde::Serialize)]
#[sea_orm(table_name = "attempts")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub message_id: MessageId,
    pub customer_id: CustomerId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub number: i32,
    pub started_at: i64,
    pub duration_ms: i64,
    pub status_code: Option<i32>,
    pub error_kind: Option<ErrorKind>,
    pub error_detail: Option<String>,
    pub outcome: Outcome,
    pub request_headers: String,
    pub response_headers: String,
    pub response_body: Option<String>,
    /// The W3C trace the request carried, as 32 lower-case hex digits.
    pub trace_id: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
