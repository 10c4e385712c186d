//! Rows of a Parquet file from elsewhere as NDJSON lines, so that they go
//! through the same line checks as a log's lines (docs/threat-model.md):
//!
//! - A JSON-text column (`payload`, ...) whose cell holds one JSON value is
//!   spliced into the line as it is written, not re-parsed and written
//!   again: a key named twice stays twice (and the line is refused, as in
//!   NDJSON), a number keeps its digits.
//! - A map column shows every entry, a key named twice included; keys that
//!   are not text (`map<int32, ...>`) are written as JSON strings.
//! - A row that cannot be written as a line at all (a type JSON has no form
//!   for) is a bad line with its row number and the reason: it is counted,
//!   never dropped.

use super::canonical::{CanonicalError, Canonicalizer};
use datafusion::arrow::array::{Array, AsArray, MapArray, StringArray};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::json::writer::{
    Encoder, EncoderFactory, EncoderOptions, LineDelimitedWriter, NullableEncoder, WriterBuilder,
    make_encoder,
};
use datafusion::arrow::record_batch::RecordBatch;
use std::sync::Arc;

/// Consecutive rows of a batch, from row `offset` of it: written as lines,
/// or one row that cannot be.
#[derive(Debug, PartialEq)]
pub enum Lines {
    Written { offset: usize, data: Vec<u8> },
    Unwritable { offset: usize, reason: String },
}

/// The rows of `batch` as JSON object lines, the JSON-text columns named
/// in `json_columns` spliced in. When the batch cannot be written whole,
/// each row is tried alone, so that only the rows that cannot be written
/// are lost to the lines, each as a [`Lines::Unwritable`].
pub fn rows_as_lines(batch: &RecordBatch, json_columns: &[&str]) -> Vec<Lines> {
    if let Ok(data) = write(batch, json_columns) {
        return vec![Lines::Written { offset: 0, data }];
    }
    let mut out: Vec<Lines> = Vec::new();
    for row in 0..batch.num_rows() {
        match (write(&batch.slice(row, 1), json_columns), out.last_mut()) {
            (Ok(line), Some(Lines::Written { data, .. })) => data.extend(line),
            (Ok(data), _) => out.push(Lines::Written { offset: row, data }),
            (Err(e), _) => out.push(Lines::Unwritable {
                offset: row,
                reason: format!("this row cannot be written as a JSON line: {e}"),
            }),
        }
    }
    out
}

fn write(batch: &RecordBatch, json_columns: &[&str]) -> Result<Vec<u8>, ArrowError> {
    let spliced = batch
        .schema()
        .fields()
        .iter()
        .filter(|f| json_columns.contains(&f.name().as_str()))
        .cloned()
        .collect();
    let factory = Arc::new(LineCells { spliced });
    let mut buf = Vec::new();
    let mut w: LineDelimitedWriter<_> = WriterBuilder::new()
        .with_encoder_factory(factory)
        .build(&mut buf);
    w.write(batch)?;
    w.finish()?;
    drop(w);
    Ok(buf)
}

/// The encoders that differ from arrow's JSON writer.
#[derive(Debug)]
struct LineCells {
    /// The batch's own JSON-text fields (compared by identity, so that a
    /// nested field of the same name is written as text).
    spliced: Vec<FieldRef>,
}

impl EncoderFactory for LineCells {
    fn make_default_encoder<'a>(
        &self,
        field: &'a FieldRef,
        array: &'a dyn Array,
        options: &'a EncoderOptions,
    ) -> Result<Option<NullableEncoder<'a>>, ArrowError> {
        if self.spliced.iter().any(|f| Arc::ptr_eq(f, field)) && is_text(array.data_type()) {
            let text = cast(array, &DataType::Utf8)?.as_string::<i32>().clone();
            let nulls = text.nulls().cloned();
            let encoder = JsonText {
                text,
                check: Canonicalizer::default(),
            };
            return Ok(Some(NullableEncoder::new(Box::new(encoder), nulls)));
        }
        if let DataType::Map(..) = array.data_type()
            && !is_text(array.as_map().keys().data_type())
        {
            let map = array.as_map();
            return Ok(Some(NullableEncoder::new(
                Box::new(TextKeyMap::try_new(field, map, options)?),
                map.nulls().cloned(),
            )));
        }
        Ok(None)
    }
}

fn is_text(t: &DataType) -> bool {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => true,
        DataType::Dictionary(_, values) => is_text(values),
        _ => false,
    }
}

/// A JSON-text cell: spliced as written when it is one JSON value (a key
/// named twice included: the line reader refuses it as it refuses that
/// line in a log), else written as a JSON string.
struct JsonText {
    text: StringArray,
    check: Canonicalizer,
}

impl Encoder for JsonText {
    fn encode(&mut self, idx: usize, out: &mut Vec<u8>) {
        let cell = self.text.value(idx);
        let one_value = !matches!(self.check.canonical(cell), Err(CanonicalError::Malformed));
        if one_value {
            // White space between tokens may hold line breaks, which would
            // split the line; inside a JSON string they cannot occur.
            out.extend(
                cell.bytes()
                    .map(|b| if b == b'\n' || b == b'\r' { b' ' } else { b }),
            );
        } else {
            serde_json::to_writer(&mut *out, cell).expect("a string serializes");
        }
    }
}

/// A map whose keys are not text: every entry, each key as the JSON string
/// of its value (`1` as `"1"`), in the order stored.
struct TextKeyMap<'a> {
    offsets: OffsetBuffer<i32>,
    keys: NullableEncoder<'a>,
    values: NullableEncoder<'a>,
    key: Vec<u8>,
}

impl<'a> TextKeyMap<'a> {
    fn try_new(
        field: &'a FieldRef,
        map: &'a MapArray,
        options: &'a EncoderOptions,
    ) -> Result<Self, ArrowError> {
        let keys = make_encoder(field, map.keys().as_ref(), options)?;
        if keys.has_nulls() {
            return Err(ArrowError::InvalidArgumentError(
                "a map key is null".to_string(),
            ));
        }
        Ok(TextKeyMap {
            offsets: map.offsets().clone(),
            keys,
            values: make_encoder(field, map.values().as_ref(), options)?,
            key: Vec::new(),
        })
    }
}

impl Encoder for TextKeyMap<'_> {
    fn encode(&mut self, idx: usize, out: &mut Vec<u8>) {
        let (start, end) = (self.offsets[idx] as usize, self.offsets[idx + 1] as usize);
        out.push(b'{');
        for entry in start..end {
            if entry > start {
                out.push(b',');
            }
            self.key.clear();
            self.keys.encode(entry, &mut self.key);
            if self.key.first() == Some(&b'"') {
                out.extend_from_slice(&self.key);
            } else {
                let text = String::from_utf8_lossy(&self.key);
                serde_json::to_writer(&mut *out, text.as_ref()).expect("a string serializes");
            }
            out.push(b':');
            if self.values.is_null(entry) {
                out.extend_from_slice(b"null");
            } else {
                self.values.encode(entry, out);
            }
        }
        out.push(b'}');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::parquet_rows::tests::batch;
    use datafusion::arrow::array::{ArrayRef, Int32Array, Int32Builder, MapBuilder, StringBuilder};
    use datafusion::arrow::datatypes::Field;

    fn text(lines: &[Lines]) -> String {
        match lines {
            [Lines::Written { offset: 0, data }] => String::from_utf8(data.clone()).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn json_text_is_spliced_as_written_and_other_text_stays_a_string() {
        let payload: ArrayRef = Arc::new(StringArray::from(vec![
            Some(r#"{"task_id":"pt","task_id":"other"}"#),
            Some(r#"{"n":1e400,"big":123456789012345678901234567890}"#),
            Some("{\n\"a\":1}"),
            Some("not json"),
            Some(r#"{"a":1} , "id":"forged""#),
            None,
        ]));
        let b = batch(vec![("payload", payload.clone()), ("note", payload)]);
        let lines = text(&rows_as_lines(&b, &["payload"]));
        let lines: Vec<&str> = lines.lines().collect();
        assert_eq!(
            lines[0],
            r#"{"payload":{"task_id":"pt","task_id":"other"},"note":"{\"task_id\":\"pt\",\"task_id\":\"other\"}"}"#
        );
        assert!(
            lines[1].starts_with(r#"{"payload":{"n":1e400,"big":123456789012345678901234567890},"#)
        );
        assert!(
            lines[2].starts_with(r#"{"payload":{ "a":1},"#),
            "{}",
            lines[2]
        );
        assert!(lines[3].starts_with(r#"{"payload":"not json","#));
        // Text that is not one value cannot add members to the line.
        assert!(lines[4].starts_with(r#"{"payload":"{\"a\":1} , \"id\":\"forged\"","#));
        assert_eq!(lines[5], "{}");
        assert_eq!(lines.len(), 6);
    }

    #[test]
    fn a_map_with_integer_keys_shows_every_entry() {
        let mut m = MapBuilder::new(None, Int32Builder::new(), StringBuilder::new());
        m.keys().append_value(1);
        m.values().append_value("a");
        m.keys().append_value(1);
        m.values().append_value("b");
        m.append(true).unwrap();
        let id: ArrayRef = Arc::new(StringArray::from(vec!["e1"]));
        let b = batch(vec![("id", id), ("m", Arc::new(m.finish()))]);
        assert_eq!(
            text(&rows_as_lines(&b, &[])),
            "{\"id\":\"e1\",\"m\":{\"1\":\"a\",\"1\":\"b\"}}\n"
        );
    }

    #[test]
    fn rows_that_cannot_be_written_are_named_and_the_rest_kept() {
        use datafusion::arrow::array::UnionArray;
        use datafusion::arrow::buffer::ScalarBuffer;
        use datafusion::arrow::datatypes::UnionFields;
        // A union column: JSON has no form for it in arrow's writer.
        let fields =
            UnionFields::try_new(vec![0], vec![Field::new("i", DataType::Int32, false)]).unwrap();
        let union: ArrayRef = Arc::new(
            UnionArray::try_new(
                fields,
                ScalarBuffer::from(vec![0i8, 0]),
                None,
                vec![Arc::new(Int32Array::from(vec![1, 2]))],
            )
            .unwrap(),
        );
        let id: ArrayRef = Arc::new(StringArray::from(vec!["e1", "e2"]));
        let b = batch(vec![("id", id), ("u", union)]);
        let lines = rows_as_lines(&b, &[]);
        assert_eq!(lines.len(), 2, "{lines:?}");
        for (row, l) in lines.iter().enumerate() {
            match l {
                Lines::Unwritable { offset, reason } => {
                    assert_eq!(*offset, row);
                    assert!(
                        reason.contains("cannot be written as a JSON line"),
                        "{reason}"
                    );
                }
                other => panic!("{other:?}"),
            }
        }
    }
}
