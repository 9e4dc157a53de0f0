//! Multi-row INSERTs built straight from models: one `VALUES` row per model,
//! its values read column by column into one vector sized up front, the
//! statement's text written once. SeaORM's own bulk insert goes through an
//! active model and a query builder per row, and grows its buffers as it goes:
//! for the batches of messages and attempts that cost more than the database's work.

use std::fmt::Write;

use sea_orm::{
    ConnectionTrait, DbBackend, DbErr, EntityName, EntityTrait, IdenStatic, Iterable, ModelTrait, Statement, Value,
};

/// Bound values per statement at most: SQLite allows 32 766.
const MOST_VALUES: usize = 30_000;

fn columns<M: ModelTrait>() -> Vec<<M::Entity as EntityTrait>::Column> {
    <M::Entity as EntityTrait>::Column::iter().collect()
}

/// Rows of `M` per statement, so that its bound values stay within the limit
/// (with a few to spare for a statement's own parameters).
pub fn rows_per_statement<M: ModelTrait>() -> usize {
    (MOST_VALUES / columns::<M>().len()).max(1)
}

/// `(?, ?, …), (?, ?, …)`: one row of placeholders per model, its columns in the
/// entity's order, and the values they bind; PostgreSQL's are numbered from `$1`.
pub fn values<'a, M: ModelTrait + 'a>(
    backend: DbBackend,
    rows: impl ExactSizeIterator<Item = &'a M>,
) -> (String, Vec<Value>) {
    let columns = columns::<M>();
    let mut values = Vec::with_capacity(rows.len() * columns.len());
    // "($12, " at most per value.
    let mut sql = String::with_capacity(rows.len() * columns.len() * 8);
    for (i, row) in rows.enumerate() {
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
    (sql, values)
}

/// Inserts every row, in statements of as many rows as the bound values allow.
pub async fn insert<M: ModelTrait>(db: &impl ConnectionTrait, rows: &[M]) -> Result<(), DbErr> {
    super::execute_all(db, insert_statements(db.get_database_backend(), rows)).await
}

/// The statements of [`insert`].
pub fn insert_statements<M: ModelTrait>(backend: DbBackend, rows: &[M]) -> Vec<Statement> {
    let names: Vec<String> = columns::<M>().iter().map(|c| format!("\"{}\"", c.as_str())).collect();
    let table = M::Entity::default().table_name().to_string();
    let chunks = rows.chunks(rows_per_statement::<M>());
    chunks
        .map(|chunk| {
            let (rows, values) = values(backend, chunk.iter());
            let sql = format!("INSERT INTO \"{table}\" ({}) VALUES {rows}", names.join(", "));
            Statement::from_sql_and_values(backend, sql, values)
        })
        .collect()
}
