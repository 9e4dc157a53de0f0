use sea_orm::entity::prelude::*;

/// A caller's `Idempotency-Key` and the answer kept for it (`state` `running` until answered).
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "idempotency_keys")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub caller: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub key: String,
    /// SHA-256 of the method, the path and the body, in hex.
    pub fingerprint: String,
    pub state: String,
    /// The running request that holds the key (random); only it may answer.
    pub owner: i64,
    pub locked_until: i64,
    pub status: Option<i32>,
    pub content_type: Option<String>,
    /// Sealed (bound to the caller and the key): an answer may hold a secret.
    pub body: Option<String>,
    pub created_at: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
