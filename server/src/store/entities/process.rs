use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "herald_processes")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub number: i32,
    pub host: String,
    pub started_at: i64,
    pub heartbeat_at: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
