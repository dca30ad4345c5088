//! The one mechanism every table shares: a record type declares its Arrow
//! schema and pushes its values column by column; the writer owns the builders.

use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Float64Builder, StringBuilder, UInt32Builder, UInt64Builder, UInt8Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Fields, SchemaRef};

/// A record type written as one telemetry table.
pub trait TableRow {
    /// The table's directory under the output directory, also recorded as
    /// `netsim.table` in every part file.
    const TABLE: &'static str;

    /// The table's columns in order; units are part of the column names.
    fn schema() -> SchemaRef;

    /// Pushes this record's values into `row`, one call per column, in schema order.
    fn append(&self, row: &mut RowBuilder<'_>);
}

/// Receives one record's values, column by column in schema order.
///
/// Each method fills the next column. It panics if that column's Arrow type
/// differs from the method's, if an optional value goes into a non-nullable
/// column, or if there is no column left: the table's `append` disagrees with
/// its `schema`, a bug the table's first row reveals.
pub struct RowBuilder<'a> {
    table: &'static str,
    fields: &'a Fields,
    builders: &'a mut [ColumnBuilder],
    next: usize,
}

impl RowBuilder<'_> {
    /// Appends to a `Boolean` column.
    pub fn bool(&mut self, value: bool) {
        let cell = self.next_cell(false);
        match cell.builder {
            ColumnBuilder::Bool(b) => b.append_value(value),
            _ => cell.wrong_type("bool"),
        }
    }

    /// Appends to a `UInt8` column.
    pub fn u8(&mut self, value: u8) {
        let cell = self.next_cell(false);
        match cell.builder {
            ColumnBuilder::UInt8(b) => b.append_value(value),
            _ => cell.wrong_type("u8"),
        }
    }

    /// Appends to a `UInt32` column.
    pub fn u32(&mut self, value: u32) {
        let cell = self.next_cell(false);
        match cell.builder {
            ColumnBuilder::UInt32(b) => b.append_value(value),
            _ => cell.wrong_type("u32"),
        }
    }

    /// Appends to a nullable `UInt32` column; `None` is a null.
    pub fn opt_u32(&mut self, value: Option<u32>) {
        let cell = self.next_cell(true);
        match cell.builder {
            ColumnBuilder::UInt32(b) => b.append_option(value),
            _ => cell.wrong_type("Option<u32>"),
        }
    }

    /// Appends to a `UInt64` column.
    pub fn u64(&mut self, value: u64) {
        let cell = self.next_cell(false);
        match cell.builder {
            ColumnBuilder::UInt64(b) => b.append_value(value),
            _ => cell.wrong_type("u64"),
        }
    }

    /// Appends to a nullable `UInt64` column; `None` is a null.
    pub fn opt_u64(&mut self, value: Option<u64>) {
        let cell = self.next_cell(true);
        match cell.builder {
            ColumnBuilder::UInt64(b) => b.append_option(value),
            _ => cell.wrong_type("Option<u64>"),
        }
    }

    /// Appends to a `Float64` column.
    pub fn f64(&mut self, value: f64) {
        let cell = self.next_cell(false);
        match cell.builder {
            ColumnBuilder::Float64(b) => b.append_value(value),
            _ => cell.wrong_type("f64"),
        }
    }

    /// Appends to a nullable `Float64` column; `None` is a null.
    pub fn opt_f64(&mut self, value: Option<f64>) {
        let cell = self.next_cell(true);
        match cell.builder {
            ColumnBuilder::Float64(b) => b.append_option(value),
            _ => cell.wrong_type("Option<f64>"),
        }
    }

    /// Appends to a `Utf8` column.
    pub fn str(&mut self, value: &str) {
        let cell = self.next_cell(false);
        match cell.builder {
            ColumnBuilder::Utf8(b) => b.append_value(value),
            _ => cell.wrong_type("str"),
        }
    }

    /// Appends to a nullable `Utf8` column; `None` is a null.
    pub fn opt_str(&mut self, value: Option<&str>) {
        let cell = self.next_cell(true);
        match cell.builder {
            ColumnBuilder::Utf8(b) => b.append_option(value),
            _ => cell.wrong_type("Option<str>"),
        }
    }

    /// Claims the next column; `optional` says the value may be null.
    fn next_cell(&mut self, optional: bool) -> Cell<'_> {
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
            !optional || field.is_nullable(),
            "table {}: column `{}` is not nullable, but append pushed an optional value",
            self.table,
            field.name()
        );
        Cell {
            table: self.table,
            field,
            builder: &mut self.builders[index],
        }
    }
}

/// The column a [`RowBuilder`] method is filling.
struct Cell<'r> {
    table: &'static str,
    field: &'r Field,
    builder: &'r mut ColumnBuilder,
}

impl Cell<'_> {
    fn wrong_type(&self, pushed: &str) -> ! {
        panic!(
            "table {}: column `{}` has Arrow type {}, but append pushed a {pushed}",
            self.table,
            self.field.name(),
            self.field.data_type()
        )
    }
}

/// An Arrow builder for one column, typed so appending needs no downcast.
enum ColumnBuilder {
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
