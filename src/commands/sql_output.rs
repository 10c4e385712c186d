//! `hvaudit sql` results in each format. Every type a query can return is
//! written: the JSON functions' union values as their JSON value (as the
//! value's text in a table or CSV), nested values (lists, structs, maps) as
//! JSON in CSV. Text from the log is made harmless for where it lands:
//! escaped for a terminal, defused for a spreadsheet.
//!
//! Several statements in one run make one document per format: json, an
//! array holding each statement's array of rows; ndjson, every statement's
//! rows one after another; csv, each statement's header and rows, a blank
//! line between two; table, one table each. A statement that returns no
//! columns (CREATE VIEW, SET) writes nothing but its `[]` in json. A
//! Parquet file holds one table: one statement of the run may return
//! columns (union values become their JSON text, nested types stay).

use crate::cli::SqlFormat;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray, UnionArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Schema, SchemaRef};
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::json::writer::{
    Encoder, EncoderFactory, EncoderOptions, NullableEncoder, make_encoder,
};
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::io::Write;
use std::sync::Arc;

/// The results of a run's statements, written one at a time into one
/// document.
pub struct Results {
    format: SqlFormat,
    /// More than one statement: json wraps their arrays in one.
    several: bool,
    /// Statements written so far, and those of them that had columns
    /// (csv's separator, parquet's one result).
    written: usize,
    with_columns: usize,
    /// Say "0 rows" under an empty table (the shell says it itself).
    note_empty: bool,
    /// The result a Parquet file gets, written at the end.
    parquet: Vec<RecordBatch>,
}

impl Results {
    /// For a run of `statements` statements.
    pub fn new(format: SqlFormat, statements: usize) -> Results {
        Results {
            format,
            several: statements > 1,
            written: 0,
            with_columns: 0,
            note_empty: true,
            parquet: Vec::new(),
        }
    }

    /// Without the "0 rows" line under an empty table.
    pub fn without_row_note(mut self) -> Results {
        self.note_empty = false;
        self
    }

    /// One statement's result (at least one batch, maybe empty).
    pub fn write(&mut self, batches: &[RecordBatch], out: &mut dyn Write) -> anyhow::Result<()> {
        let columns = batches.first().is_some_and(|b| b.num_columns() > 0);
        match self.format {
            SqlFormat::Json if self.several => {
                out.write_all(if self.written == 0 { b"[\n" } else { b",\n" })?;
                json_array(batches, out)?;
            }
            SqlFormat::Json => {
                json_array(batches, out)?;
                writeln!(out)?;
            }
            _ if !columns => {}
            SqlFormat::Parquet => {
                if self.with_columns > 0 {
                    anyhow::bail!(
                        "--format parquet holds one result, and statement {} is the second to \
                         return columns; run it on its own",
                        self.written + 1
                    );
                }
                self.parquet = batches
                    .iter()
                    .map(|b| convert(b, Target::Parquet))
                    .collect::<anyhow::Result<_>>()?;
            }
            SqlFormat::Csv => {
                if self.with_columns > 0 {
                    writeln!(out)?;
                }
                write_batches(batches, SqlFormat::Csv, out)?;
            }
            SqlFormat::Table if !self.note_empty => table(batches, false, out)?,
            format => write_batches(batches, format, out)?,
        }
        self.written += 1;
        self.with_columns += usize::from(columns);
        Ok(())
    }

    /// Close the document (json's outer array, the Parquet file).
    pub fn finish(&mut self, out: &mut dyn Write) -> anyhow::Result<()> {
        if self.format == SqlFormat::Json && self.several {
            if self.written == 0 {
                out.write_all(b"[")?;
            }
            out.write_all(b"\n]\n")?;
        }
        if self.format == SqlFormat::Parquet {
            let Some(first) = self.parquet.first() else {
                anyhow::bail!("--format parquet: no statement returned columns to write");
            };
            out.write_all(&parquet_file(first.schema(), &self.parquet)?)?;
        }
        Ok(())
    }
}

/// Render query results (at least one batch, maybe empty) in `format`.
pub fn write_batches(
    batches: &[RecordBatch],
    format: SqlFormat,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    use datafusion::arrow::{csv, json};
    match format {
        SqlFormat::Table => table(batches, true, out)?,
        SqlFormat::Csv => {
            let mut w = csv::WriterBuilder::new().with_header(true).build(out);
            for b in batches {
                w.write(&convert(b, Target::Csv)?)?;
            }
        }
        SqlFormat::Json => {
            json_array(batches, out)?;
            writeln!(out)?;
        }
        SqlFormat::Parquet => {
            let converted = batches
                .iter()
                .map(|b| convert(b, Target::Parquet))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let schema = match converted.first() {
                Some(b) => b.schema(),
                None => anyhow::bail!("no result to write as Parquet"),
            };
            out.write_all(&parquet_file(schema, &converted)?)?;
        }
        SqlFormat::Ndjson => {
            let json = for_json(batches)?;
            let refs: Vec<&RecordBatch> = json.iter().collect();
            let mut w = json::WriterBuilder::new()
                .with_encoder_factory(Arc::new(RawJson))
                .build::<_, json::writer::LineDelimited>(&mut *out);
            w.write_batches(&refs)?;
            w.finish()?;
        }
    }
    Ok(())
}

/// The batches as one Parquet file (zstd), in memory: the writer needs an
/// output it can own, and the result is held in memory already.
fn parquet_file(schema: SchemaRef, batches: &[RecordBatch]) -> anyhow::Result<Vec<u8>> {
    use datafusion::parquet::arrow::ArrowWriter;
    let props = hvaudit::parquet_output::properties().build();
    let mut w = ArrowWriter::try_new(Vec::new(), schema, Some(props))?;
    for b in batches {
        w.write(b)?;
    }
    Ok(w.into_inner()?)
}

fn table(batches: &[RecordBatch], note_empty: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    let shown = batches
        .iter()
        .map(|b| convert(b, Target::Table))
        .collect::<Result<Vec<_>, _>>()?;
    writeln!(
        out,
        "{}",
        datafusion::arrow::util::pretty::pretty_format_batches(&shown)?
    )?;
    if note_empty && shown.iter().all(|b| b.num_rows() == 0) {
        writeln!(out, "0 rows")?;
    }
    Ok(())
}

fn for_json(batches: &[RecordBatch]) -> anyhow::Result<Vec<RecordBatch>> {
    batches.iter().map(|b| convert(b, Target::Json)).collect()
}

/// The rows as one JSON array (`[]` when there are none), no newline.
fn json_array(batches: &[RecordBatch], out: &mut dyn Write) -> anyhow::Result<()> {
    use datafusion::arrow::json;
    let json = for_json(batches)?;
    let refs: Vec<&RecordBatch> = json.iter().collect();
    let mut w = json::WriterBuilder::new()
        .with_encoder_factory(Arc::new(RawJson))
        .build::<_, json::writer::JsonArray>(&mut *out);
    w.write_batches(&refs)?;
    w.finish()?;
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    Table,
    Csv,
    Json,
    /// Unions as their JSON text (Parquet has no union type); everything
    /// else as it is.
    Parquet,
}

/// Field metadata marking a text column that holds JSON to be written as it
/// is (a union value converted for the JSON writers).
const RAW_JSON: &str = "hvaudit.raw_json";

/// The batch as `target` can write it.
fn convert(batch: &RecordBatch, target: Target) -> anyhow::Result<RecordBatch> {
    if batch.num_columns() == 0 {
        return Ok(batch.clone()); // CREATE VIEW, SET: nothing to convert
    }
    let mut fields = Vec::with_capacity(batch.num_columns());
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(batch.num_columns());
    for (field, col) in batch.schema().fields().iter().zip(batch.columns()) {
        let (f, c) = column(field, col, target)?;
        fields.push(f);
        cols.push(c);
    }
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)?)
}

fn column(field: &FieldRef, col: &ArrayRef, target: Target) -> anyhow::Result<(Field, ArrayRef)> {
    let text_field = |meta: Option<&str>| {
        let f = Field::new(field.name(), DataType::Utf8, true);
        match meta {
            Some(k) => f.with_metadata(HashMap::from([(k.to_string(), "true".to_string())])),
            None => f,
        }
    };
    if let DataType::Union(..) = col.data_type() {
        let union = col.as_any().downcast_ref::<UnionArray>().expect("a union");
        return Ok(match target {
            Target::Json => (
                text_field(Some(RAW_JSON)),
                Arc::new(union_text(union, true)?),
            ),
            Target::Parquet => (text_field(None), Arc::new(union_text(union, true)?)),
            Target::Table => (
                text_field(None),
                Arc::new(shown(&union_text(union, false)?)),
            ),
            Target::Csv => (
                text_field(None),
                Arc::new(defused(&union_text(union, false)?)),
            ),
        });
    }
    if matches!(target, Target::Json | Target::Parquet) {
        return Ok((field.as_ref().clone(), Arc::clone(col)));
    }
    if is_text(col.data_type()) {
        let text = datafusion::arrow::compute::cast(col, &DataType::Utf8)?;
        let text = text.as_string::<i32>();
        let mapped = match target {
            Target::Table => shown(text),
            _ => defused(text),
        };
        return Ok((text_field(None), Arc::new(mapped)));
    }
    if target == Target::Csv && col.data_type().is_nested() {
        return Ok((text_field(None), Arc::new(defused(&as_json(field, col)?))));
    }
    Ok((field.as_ref().clone(), Arc::clone(col)))
}

fn is_text(t: &DataType) -> bool {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => true,
        DataType::Dictionary(_, v) => is_text(v),
        _ => false,
    }
}

/// Log values shown in a terminal: controls and invisible characters escaped.
fn shown(text: &StringArray) -> StringArray {
    text.iter()
        .map(|v| v.map(|v| hvaudit::escape::hidden_escaped(v).into_owned()))
        .collect()
}

/// A spreadsheet runs a cell that starts with `=`, `+`, `-`, `@`, a tab or a
/// carriage return as a formula (`=HYPERLINK(...)` from a hostile log line):
/// such a cell gets a leading `'`, as OWASP advises for CSV exports.
fn defused(text: &StringArray) -> StringArray {
    text.iter()
        .map(|v| {
            v.map(|v| {
                if v.starts_with(['=', '+', '-', '@', '\t', '\r']) {
                    format!("'{v}")
                } else {
                    v.to_string()
                }
            })
        })
        .collect()
}

/// Each value of a nested column as JSON text.
fn as_json(field: &FieldRef, col: &ArrayRef) -> Result<StringArray, ArrowError> {
    let options = EncoderOptions::default();
    let mut encoder = make_encoder(field, col.as_ref(), &options)?;
    let mut buf = Vec::new();
    Ok((0..col.len())
        .map(|i| {
            (!col.is_null(i)).then(|| {
                buf.clear();
                encoder.encode(i, &mut buf);
                String::from_utf8_lossy(&buf).into_owned()
            })
        })
        .collect())
}

/// A union's values as text: its JSON value (`json`), or for a text member
/// the text itself and for JSON text members that text (for tables and CSV).
/// A member of type Null is null.
fn union_text(union: &UnionArray, json: bool) -> Result<StringArray, ArrowError> {
    let DataType::Union(members, _) = union.data_type() else {
        unreachable!("a union's type is a union")
    };
    let options = EncoderOptions::default();
    let mut encoders = HashMap::new();
    let mut buf = Vec::new();
    let mut out = Vec::with_capacity(union.len());
    for i in 0..union.len() {
        let type_id = union.type_id(i);
        let Some((_, member)) = members.iter().find(|(id, _)| *id == type_id) else {
            out.push(None);
            continue;
        };
        let child = union.child(type_id);
        let at = union.value_offset(i);
        if child.is_null(at) || member.data_type() == &DataType::Null {
            out.push(None);
            continue;
        }
        // The JSON functions keep arrays and objects as JSON text.
        let is_json_text = member
            .metadata()
            .get("is_json")
            .is_some_and(|v| v == "true");
        let value = match child.data_type() {
            DataType::Utf8 if is_json_text || !json => {
                child.as_string::<i32>().value(at).to_string()
            }
            _ => {
                let encoder = match encoders.entry(type_id) {
                    Entry::Occupied(e) => e.into_mut(),
                    Entry::Vacant(e) => e.insert(make_encoder(member, child.as_ref(), &options)?),
                };
                buf.clear();
                encoder.encode(at, &mut buf);
                String::from_utf8_lossy(&buf).into_owned()
            }
        };
        out.push(Some(value));
    }
    Ok(out.into_iter().collect())
}

/// Writes a column marked [`RAW_JSON`] as the JSON it holds.
#[derive(Debug)]
struct RawJson;

impl EncoderFactory for RawJson {
    fn make_default_encoder<'a>(
        &self,
        field: &'a FieldRef,
        array: &'a dyn Array,
        _options: &'a EncoderOptions,
    ) -> Result<Option<NullableEncoder<'a>>, ArrowError> {
        if !field.metadata().contains_key(RAW_JSON) {
            return Ok(None);
        }
        let text = array.as_string::<i32>();
        let nulls = text.nulls().cloned();
        Ok(Some(NullableEncoder::new(Box::new(Verbatim(text)), nulls)))
    }
}

struct Verbatim<'a>(&'a StringArray);

impl Encoder for Verbatim<'_> {
    fn encode(&mut self, idx: usize, out: &mut Vec<u8>) {
        out.extend_from_slice(self.0.value(idx).as_bytes());
    }
}
