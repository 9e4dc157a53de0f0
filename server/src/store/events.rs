use std::collections::HashSet;

use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel, QueryFilter, TryInsertResult,
};

use super::entities::event::{self, Column, Entity as Events};

/// Inserts the event unless `(customer, source, id)` exists; true when inserted.
pub async fn insert_new(db: &impl ConnectionTrait, row: event::Model) -> Result<bool, DbErr> {
    let result = Events::insert(row.into_active_model().reset_all())
        .on_conflict_do_nothing_on([Column::CustomerId, Column::Source, Column::CeId])
        .exec_without_returning(db)
        .await?;
    Ok(matches!(result, TryInsertResult::Inserted(n) if n > 0))
}

/// Inserts the events whose `(customer, source, id)` is new; returns the ids of those inserted.
pub async fn insert_new_many(db: &impl ConnectionTrait, rows: Vec<event::Model>) -> Result<HashSet<String>, DbErr> {
    let mut inserted = HashSet::with_capacity(rows.len());
    // In chunks: SQLite allows at most 32 766 bound values in one statement.
    for chunk in rows.chunks(INSERT_CHUNK) {
        let chunk = chunk.iter().cloned().map(|row| row.into_active_model().reset_all());
        let result = Events::insert_many(chunk)
            .on_conflict_do_nothing_on([Column::CustomerId, Column::Source, Column::CeId])
            .exec_with_returning_keys(db)
            .await?;
        if let TryInsertResult::Inserted(ids) = result {
            inserted.extend(ids);
        }
    }
    Ok(inserted)
}

/// Rows per INSERT: 7 columns each stay well under SQLite's limit on bound values.
const INSERT_CHUNK: usize = 1000;

pub async fn find_by_key(
    db: &impl ConnectionTrait,
    customer_id: &str,
    source: &str,
    ce_id: &str,
) -> Result<Option<event::Model>, DbErr> {
    Events::find()
        .filter(Column::CustomerId.eq(customer_id))
        .filter(Column::Source.eq(source))
        .filter(Column::CeId.eq(ce_id))
        .one(db)
        .await
}

pub async fn get(db: &impl ConnectionTrait, id: &str) -> Result<Option<event::Model>, DbErr> {
    Events::find_by_id(id.to_string()).one(db).await
}

pub async fn by_ids(db: &impl ConnectionTrait, ids: Vec<String>) -> Result<Vec<event::Model>, DbErr> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    Events::find().filter(Column::Id.is_in(ids)).all(db).await
}
