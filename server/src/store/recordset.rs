//! Batches as typed arrays, one per column (PostgreSQL). `unnest($1::text[],
//! $2::int8[], …)` turns them back into rows, so a bulk statement has the same
//! text for every batch size: it is parsed once per connection, not once per
//! batch, and one statement can carry rows for several tables. The arrays are
//! bound in PostgreSQL's binary format: the server parses no text for them,
//! neither to run the statement nor to estimate its rows while planning it (a
//! JSON batch was parsed twice, by its cast and by `json_to_recordset`).
//!
//! SeaORM binds an array only if none of its elements is NULL, so a table
//! with nullable columns gets one more array, a bit per nullable column and
//! row, and those columns read `CASE WHEN bit unset THEN value END`.

use sea_orm::sea_query::ArrayType;
use sea_orm::{EntityTrait, IdenStatic, Iterable, ModelTrait, Value};

/// A column as a batch carries it.
pub struct Column {
    pub name: &'static str,
    pub ty: Type,
    pub nullable: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    Text,
    Int8,
    Int4,
}

impl Type {
    fn sql(self) -> &'static str {
        match self {
            Type::Text => "text",
            Type::Int8 => "int8",
            Type::Int4 => "int4",
        }
    }

    fn array(self) -> ArrayType {
        match self {
            Type::Text => ArrayType::String,
            Type::Int8 => ArrayType::BigInt,
            Type::Int4 => ArrayType::Int,
        }
    }

    /// The value that stands in an array for a NULL.
    fn placeholder(self) -> Value {
        match self {
            Type::Text => Value::from(""),
            Type::Int8 => Value::from(0i64),
            Type::Int4 => Value::from(0i32),
        }
    }
}

pub const fn col(name: &'static str, ty: Type) -> Column {
    Column { name, ty, nullable: false }
}

pub const fn nullable(name: &'static str, ty: Type) -> Column {
    Column { name, ty, nullable: true }
}

/// A table's columns as the batch carries them, in the table's order.
pub type Columns = &'static [Column];

/// `a, b, c`: the column list of the INSERT.
pub fn names(columns: Columns) -> String {
    columns.iter().map(|c| c.name).collect::<Vec<_>>().join(", ")
}

/// How many parameters the batch of `columns` binds: one per column, and the nulls' if any is nullable.
pub fn parameters(columns: Columns) -> usize {
    columns.len() + usize::from(columns.iter().any(|c| c.nullable))
}

/// The rows of the arrays bound from parameter `first` on, as a FROM item
/// named `alias` whose columns are the columns' names.
pub fn rows(columns: Columns, first: usize, alias: &str) -> String {
    let mut arrays: Vec<String> =
        columns.iter().enumerate().map(|(i, c)| format!("${}::{}[]", first + i, c.ty.sql())).collect();
    if parameters(columns) == columns.len() {
        return format!("unnest({}) AS {alias}({})", arrays.join(", "), names(columns));
    }
    arrays.push(format!("${}::int8[]", first + columns.len()));
    let read: Vec<String> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| match c.nullable {
            true => format!("CASE WHEN nulls & {} = 0 THEN {name} END AS {name}", 1i64 << i, name = c.name),
            false => c.name.to_string(),
        })
        .collect();
    format!(
        "(SELECT {} FROM unnest({}) AS u({}, nulls)) AS {alias}",
        read.join(", "),
        arrays.join(", "),
        names(columns)
    )
}

/// The parameters of a batch: its columns' arrays, filled row by row.
pub struct Arrays {
    columns: Columns,
    cells: Vec<Vec<Value>>,
    nulls: Option<Vec<Value>>,
    next: usize,
    row_nulls: i64,
}

impl Arrays {
    /// Room for `rows` rows.
    pub fn new(columns: Columns, rows: usize) -> Arrays {
        let nulls = columns.iter().any(|c| c.nullable).then(|| Vec::with_capacity(rows));
        let cells = columns.iter().map(|_| Vec::with_capacity(rows)).collect();
        Arrays { columns, cells, nulls, next: 0, row_nulls: 0 }
    }

    /// The rows of models, their columns in the entity's order.
    pub fn of_models<'a, M: ModelTrait + 'a, I>(columns: Columns, rows: I) -> Vec<Value>
    where
        I: IntoIterator<Item = &'a M>,
        I::IntoIter: ExactSizeIterator,
    {
        let rows = rows.into_iter();
        let mut arrays = Arrays::new(columns, rows.len());
        for row in rows {
            for column in <M::Entity as EntityTrait>::Column::iter() {
                arrays.push(column.as_str(), row.get(column));
            }
        }
        arrays.into_values()
    }

    /// The value of `name`, the next column of the current row; a row wraps to
    /// the first column. Naming the column checks, in debug builds, the order the caller fills in.
    pub fn push(&mut self, name: &str, value: Value) {
        let i = self.next;
        let column = &self.columns[i];
        debug_assert_eq!(name, column.name, "column {i} of the batch");
        let cell = match (column.ty, value) {
            (Type::Text, Value::String(Some(text))) => Value::from(text),
            (Type::Int8, Value::BigInt(Some(n))) => Value::from(n),
            (Type::Int8, Value::Int(Some(n))) => Value::from(i64::from(n)),
            (Type::Int4, Value::Int(Some(n))) => Value::from(n),
            (ty, value) if column.nullable && !value.is_some() => {
                self.row_nulls |= 1 << i;
                ty.placeholder()
            }
            (ty, value) => unreachable!("column {} ({ty:?}) cannot hold {value:?}", column.name),
        };
        self.cells[i].push(cell);
        self.next = (i + 1) % self.columns.len();
        if self.next == 0 {
            if let Some(nulls) = &mut self.nulls {
                nulls.push(Value::from(self.row_nulls));
            }
            self.row_nulls = 0;
        }
    }

    pub fn into_values(self) -> Vec<Value> {
        let types = self.columns.iter().map(|c| c.ty.array()).chain(self.nulls.is_some().then_some(ArrayType::BigInt));
        let arrays = self.cells.into_iter().chain(self.nulls);
        types.zip(arrays).map(|(ty, cells)| Value::Array(ty, Some(Box::new(cells)))).collect()
    }
}

#[cfg(test)]
pub mod tests {
    use sea_orm::{ColumnTrait, EntityTrait, IdenStatic, Iterable};

    use super::*;

    /// The batch's columns are exactly the entity's, in the entity's order, nullable where it is.
    pub fn covers<E: EntityTrait>(columns: super::Columns) {
        let entity: Vec<(&str, bool)> = E::Column::iter().map(|c| (c.as_str(), c.def().is_null())).collect();
        let batch: Vec<(&str, bool)> = columns.iter().map(|c| (c.name, c.nullable)).collect();
        assert_eq!(batch, entity);
    }

    const TWO: Columns = &[col("a", Type::Text), nullable("b", Type::Int8)];

    fn array(value: &Value) -> Vec<Value> {
        match value {
            Value::Array(_, Some(cells)) => cells.to_vec(),
            other => panic!("not an array: {other:?}"),
        }
    }

    #[test]
    fn each_column_is_one_array_and_nulls_are_a_bit_per_row() {
        let mut arrays = Arrays::new(TWO, 2);
        arrays.push("a", "x".into());
        arrays.push("b", 7i64.into());
        arrays.push("a", "y".into());
        arrays.push("b", Option::<i64>::None.into());
        let values = arrays.into_values();
        assert_eq!(values.len(), parameters(TWO));
        assert_eq!(array(&values[0]), [Value::from("x"), Value::from("y")]);
        assert_eq!(array(&values[1]), [Value::from(7i64), Value::from(0i64)]);
        assert_eq!(array(&values[2]), [Value::from(0i64), Value::from(2i64)]);
        assert!(matches!(values[1], Value::Array(ArrayType::BigInt, _)));
    }

    #[test]
    #[should_panic(expected = "column 0 of the batch")]
    fn a_value_pushed_out_of_the_columns_order_is_refused() {
        Arrays::new(TWO, 1).push("b", 7i64.into());
    }

    #[test]
    fn nullable_columns_read_their_bit() {
        assert_eq!(
            rows(TWO, 3, "r"),
            "(SELECT a, CASE WHEN nulls & 2 = 0 THEN b END AS b FROM unnest($3::text[], $4::int8[], $5::int8[]) \
             AS u(a, b, nulls)) AS r"
        );
        const ONE: Columns = &[col("a", Type::Int4)];
        assert_eq!(rows(ONE, 1, "r"), "unnest($1::int4[]) AS r(a)");
    }
}
