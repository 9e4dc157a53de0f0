//! Named facts about the database itself.

use sea_orm::{ActiveModelTrait, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel};

use super::entities::meta::{self, Column, Entity as Meta};

pub async fn get(db: &impl ConnectionTrait, name: &str) -> Result<Option<String>, DbErr> {
    Ok(Meta::find_by_id(name.to_string()).one(db).await?.map(|row| row.value))
}

/// Sets `name` unless it is set already (another process may race to set it), and returns the
/// value that is now stored.
pub async fn get_or_insert(db: &impl ConnectionTrait, name: &str, value: &str) -> Result<String, DbErr> {
    let row = meta::Model { name: name.to_string(), value: value.to_string() };
    Meta::insert(row.into_active_model().reset_all())
        .on_conflict_do_nothing_on([Column::Name])
        .exec_without_returning(db)
        .await?;
    Ok(get(db, name).await?.unwrap_or_else(|| value.to_string()))
}
