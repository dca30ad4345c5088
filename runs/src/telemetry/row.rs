//! The one mechanism every table shares: a record type declares its Arrow
//! schema and pushes its values column by column; the writer owns the builders.

use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Float64Builder, StringBuilder, UInt32Builder, UInt64Builder, UInt8Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Fields, SchemaRef};

/// A record type written as one telemetry table.
///
/// Implement it with [`table_row!`](crate::telemetry::table_row), which
/// derives the schema and `append` from one list of columns so the two cannot
/// disagree.
pub trait TableRow {
    /// The table's directory under the output directory, also recorded as
    /// `netsim.table` in every part file.
    const TABLE: &'static str;

    /// The table's columns in order; units are part of the column names.
    fn schema() -> SchemaRef;

    /// Pushes this record's values into `row`, one call per column, in schema order.
    fn append(&self, row: &mut RowBuilder<'_>);
}

/// Implements [`TableRow`] for a record type from one declaration of its
/// columns, in order: each column's name and Rust value type, read from the
/// record's field of that name, or from the expression after `=` (with the
/// record bound to the name given in `|record|`). The value type fixes the
/// column's Arrow type and nullability (see [`CellValue`]), so the schema and
/// the append are generated from the same list and cannot disagree.
///
/// ```ignore
/// table_row! {
///     FaultRecord => "faults", |r| {
///         time_ns: u64,
///         target: &str = &r.target,
///         // Null unless the fault sets a rate.
///         value_gbps: Option<f64>,
///     }
/// }
/// ```
macro_rules! table_row {
    (
        $record:ty => $table:literal, |$r:ident| {
            $($column:ident: $value_type:ty $(= $value:expr)?,)+
        }
    ) => {
        impl $crate::telemetry::TableRow for $record {
            const TABLE: &'static str = $table;

            fn schema() -> ::arrow_schema::SchemaRef {
                ::std::sync::Arc::new(::arrow_schema::Schema::new(vec![
                    $($crate::telemetry::column::<$value_type>(stringify!($column)),)+
                ]))
            }

            fn append(&self, row: &mut $crate::telemetry::RowBuilder<'_>) {
                let $r = self;
                $(row.push::<$value_type>(table_row!(@value $r.$column $(= $value)?));)+
            }
        }
    };
    // A column's value: the record's field of its name unless given.
    (@value $r:ident.$column:ident) => {
        $r.$column
    };
    (@value $r:ident.$column:ident = $value:expr) => {
        $value
    };
}
pub(crate) use table_row;

/// The schema field of a column named `name` holding `T`s.
pub fn column<T: CellValue>(name: &str) -> Field {
    Field::new(name, T::DATA_TYPE, T::NULLABLE)
}

/// A Rust value that fills one cell: its Arrow type, whether it may be null,
/// and how it enters that type's builder.
pub trait CellValue {
    /// The Arrow type of a column of these values.
    const DATA_TYPE: DataType;
    /// Whether a column of these values is nullable (the `Option`s are).
    const NULLABLE: bool;
    /// The type's name in panic messages.
    const NAME: &'static str;

    /// Appends `self` to `builder`; false if the builder is of another type.
    fn append_to(self, builder: &mut ColumnBuilder) -> bool;
}

/// Implements [`CellValue`] for a type filling `ColumnBuilder::$variant` by
/// `$append` (`append_value`, or `append_option` for the nullable ones).
macro_rules! cell_value {
    ($value_type:ty, $variant:ident, $data_type:ident, $nullable:literal, $append:ident) => {
        impl CellValue for $value_type {
            const DATA_TYPE: DataType = DataType::$data_type;
            const NULLABLE: bool = $nullable;
            const NAME: &'static str = stringify!($value_type);

            fn append_to(self, builder: &mut ColumnBuilder) -> bool {
                match builder {
                    ColumnBuilder::$variant(b) => b.$append(self),
                    _ => return false,
                }
                true
            }
        }
    };
}

cell_value!(bool, Bool, Boolean, false, append_value);
cell_value!(u8, UInt8, UInt8, false, append_value);
cell_value!(u32, UInt32, UInt32, false, append_value);
cell_value!(Option<u32>, UInt32, UInt32, true, append_option);
cell_value!(u64, UInt64, UInt64, false, append_value);
cell_value!(Option<u64>, UInt64, UInt64, true, append_option);
cell_value!(f64, Float64, Float64, false, append_value);
cell_value!(Option<f64>, Float64, Float64, true, append_option);
cell_value!(&str, Utf8, Utf8, false, append_value);
cell_value!(Option<&str>, Utf8, Utf8, true, append_option);

/// Receives one record's values, column by column in schema order.
///
/// Each [`RowBuilder::push`] fills the next column. It panics if that
/// column's Arrow type differs from the value's, if an optional value goes
/// into a non-nullable column, or if there is no column left: the table's
/// `append` disagrees with its `schema`, a bug the table's first row reveals.
pub struct RowBuilder<'a> {
    table: &'static str,
    fields: &'a Fields,
    builders: &'a mut [ColumnBuilder],
    next: usize,
}

impl RowBuilder<'_> {
    /// Appends `value` to the next column; an `Option`'s `None` is a null.
    pub fn push<T: CellValue>(&mut self, value: T) {
        let index = self.next;
        assert!(
            index < self.builders.len(),
            "table {}: append pushed more values than its {} columns",
            self.table,
            self.builders.len()
        );
        self.next += 1;
        let field = &self.fields[index];
        assert!(
            !T::NULLABLE || field.is_nullable(),
            "table {}: column `{}` is not nullable, but append pushed an optional value",
            self.table,
            field.name()
        );
        assert!(
            value.append_to(&mut self.builders[index]),
            "table {}: column `{}` has Arrow type {}, but append pushed a {}",
            self.table,
            field.name(),
            field.data_type(),
            T::NAME
        );
    }
}

/// An Arrow builder for one column, typed so appending needs no downcast.
pub enum ColumnBuilder {
    Bool(BooleanBuilder),
    UInt8(UInt8Builder),
    UInt32(UInt32Builder),
    UInt64(UInt64Builder),
    Float64(Float64Builder),
    Utf8(StringBuilder),
}

impl ColumnBuilder {
    fn new(field: &Field, rows: usize) -> Self {
        match field.data_type() {
            DataType::Boolean => Self::Bool(BooleanBuilder::with_capacity(rows)),
            DataType::UInt8 => Self::UInt8(UInt8Builder::with_capacity(rows)),
            DataType::UInt32 => Self::UInt32(UInt32Builder::with_capacity(rows)),
            DataType::UInt64 => Self::UInt64(UInt64Builder::with_capacity(rows)),
            DataType::Float64 => Self::Float64(Float64Builder::with_capacity(rows)),
            // Short labels such as "pause"; the buffer grows if they are longer.
            DataType::Utf8 => Self::Utf8(StringBuilder::with_capacity(rows, rows * 8)),
            other => panic!(
                "column `{}`: Arrow type {other} has no builder yet; add a ColumnBuilder variant",
                field.name()
            ),
        }
    }

    /// Takes the buffered values as an array and leaves the builder empty.
    fn finish(&mut self) -> ArrayRef {
        match self {
            Self::Bool(b) => Arc::new(b.finish()),
            Self::UInt8(b) => Arc::new(b.finish()),
            Self::UInt32(b) => Arc::new(b.finish()),
            Self::UInt64(b) => Arc::new(b.finish()),
            Self::Float64(b) => Arc::new(b.finish()),
            Self::Utf8(b) => Arc::new(b.finish()),
        }
    }
}

/// The rows of one table not yet written, one builder per column.
pub(super) struct Columns {
    table: &'static str,
    schema: SchemaRef,
    builders: Vec<ColumnBuilder>,
    rows: usize,
}

impl Columns {
    /// Builders for `schema` (`R`'s columns, perhaps with metadata added), sized for `rows` rows.
    pub(super) fn new<R: TableRow>(schema: SchemaRef, rows: usize) -> Self {
        let builders = schema
            .fields()
            .iter()
            .map(|field| ColumnBuilder::new(field, rows))
            .collect();
        Columns {
            table: R::TABLE,
            schema,
            builders,
            rows: 0,
        }
    }

    /// Buffers one record.
    pub(super) fn push<R: TableRow>(&mut self, record: &R) {
        let mut row = RowBuilder {
            table: self.table,
            fields: self.schema.fields(),
            builders: &mut self.builders,
            next: 0,
        };
        record.append(&mut row);
        let filled = row.next;
        assert_eq!(
            filled,
            self.builders.len(),
            "table {}: append filled {filled} of {} columns",
            self.table,
            self.builders.len()
        );
        self.rows += 1;
    }

    /// The table's schema.
    pub(super) fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Rows buffered since the last [`Columns::take_batch`].
    pub(super) fn rows(&self) -> usize {
        self.rows
    }

    /// Takes the buffered rows as a record batch and empties the builders.
    pub(super) fn take_batch(&mut self) -> RecordBatch {
        let arrays = self
            .builders
            .iter_mut()
            .map(ColumnBuilder::finish)
            .collect();
        self.rows = 0;
        RecordBatch::try_new(self.schema.clone(), arrays)
            .expect("builders are made from the schema and nulls only enter nullable columns")
    }
}
