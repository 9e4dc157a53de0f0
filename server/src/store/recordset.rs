//! Batches as one JSON parameter. `json_to_recordset` (PostgreSQL) turns the
//! parameter back into rows, so a bulk statement has the same text for every
//! batch size: it is parsed and planned once per connection, not once per
//! batch, and one statement can carry rows for several tables.

use serde::Serialize;

/// A table's columns as the batch carries them: (name, PostgreSQL type). The
/// JSON objects' keys are the column names (the models' field names).
pub type Columns = &'static [(&'static str, &'static str)];

/// `a, b, c`: the column list of the INSERT.
pub fn names(columns: Columns) -> String {
    columns.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", ")
}

/// `json_to_recordset($n::json) AS alias(a text, b int8, …)`: the rows of parameter `n`.
pub fn rows(columns: Columns, parameter: usize, alias: &str) -> String {
    let typed: Vec<String> = columns.iter().map(|(name, ty)| format!("{name} {ty}")).collect();
    format!("json_to_recordset(${parameter}::json) AS {alias}({})", typed.join(", "))
}

/// The rows as the JSON parameter.
pub fn json<T: Serialize>(rows: &[T]) -> String {
    serde_json::to_string(rows).expect("models serialize to JSON")
}

#[cfg(test)]
pub mod tests {
    use sea_orm::{EntityTrait, IdenStatic, Iterable};

    /// The batch's columns are exactly the entity's, in the entity's order.
    pub fn covers<E: EntityTrait>(columns: super::Columns) {
        let entity: Vec<&str> = E::Column::iter().map(|c| c.as_str()).collect();
        let batch: Vec<&str> = columns.iter().map(|(name, _)| *name).collect();
        assert_eq!(batch, entity);
    }
}
