//! Multi-row INSERTs built straight from models: one `VALUES` row per model,
//! its values read column by column into one vector sized up front, the
//! statement's text written once. SeaORM's own bulk insert goes through an
//! active model and a query builder per row, and grows its buffers as it goes:
//! for the batches of messages and attempts that cost more than the database's work.

use std::fmt::Write;

use sea_orm::{
    ConnectionTrait, DbBackend, DbErr, EntityName, EntityTrait, IdenStatic, Iterable, ModelTrait, Statement,
};

/// Bound values per statement at most: SQLite allows 32 766.
const MOST_VALUES: usize = 30_000;

/// Inserts every row, in statements of as many rows as the bound values allow.
pub async fn insert<M: ModelTrait>(db: &impl ConnectionTrait, rows: &[M]) -> Result<(), DbErr> {
    let columns: Vec<<M::Entity as EntityTrait>::Column> = <M::Entity as EntityTrait>::Column::iter().collect();
    let names: Vec<String> = columns.iter().map(|c| format!("\"{}\"", c.as_str())).collect();
    let head = format!("INSERT INTO \"{}\" ({}) VALUES ", M::Entity::default().table_name(), names.join(", "));
    let backend = db.get_database_backend();
    for chunk in rows.chunks((MOST_VALUES / columns.len()).max(1)) {
        let mut values = Vec::with_capacity(chunk.len() * columns.len());
        // "($12, " at most per value.
        let mut sql = String::with_capacity(head.len() + chunk.len() * columns.len() * 8);
        sql.push_str(&head);
        for (i, row) in chunk.iter().enumerate() {
            sql.push_str(if i == 0 { "(" } else { ", (" });
            for (j, column) in columns.iter().enumerate() {
                if j > 0 {
                    sql.push_str(", ");
                }
                values.push(row.get(*column));
                match backend {
                    DbBackend::Postgres => write!(sql, "${}", values.len()).expect("writing to a String"),
                    _ => sql.push('?'),
                }
            }
            sql.push(')');
        }
        db.execute_raw(Statement::from_sql_and_values(backend, sql, values)).await?;
    }
    Ok(())
}
