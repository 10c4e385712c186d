//! Turning the rules' rows into findings: the events they cite looked up
//! as places, and the rows resolved, filtered to the window and sorted.

use super::catalog::Catalog;
use super::readings;
use crate::finding_store::{Compact, FindingRow, Findings, Interner, Place, Places, RuleLabel};
use crate::ingest::identity;
use chrono::{DateTime, Utc};
use datafusion::arrow::array::{Array, AsArray, BooleanArray, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::error::DataFusionError;
use datafusion::prelude::SessionContext;

/// What the rules produced.
pub struct RuleRun {
    pub findings: Findings,
    /// The readings of later versions made, when the log has conflicting ids.
    pub readings: Option<readings::Made>,
    /// (rule or view file, error) for everything that failed.
    pub errors: Vec<(String, String)>,
    /// Findings left out: none of the events they cite lies in the window.
    pub outside_window: u64,
}

/// Report only findings that cite an event in `[since, until]`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Window {
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
}

/// Look up the events every row cites, then resolve, filter and sort the
/// rows into findings.
pub(super) async fn resolve(
    ctx: &SessionContext,
    catalog: &Catalog,
    rows: Vec<FindingRow>,
    mut strings: Interner,
    window: Window,
) -> datafusion::error::Result<Compact> {
    let mut wanted: Vec<i64> = rows.iter().flat_map(|r| r.seqs.iter().copied()).collect();
    wanted.sort_unstable();
    wanted.dedup();
    let mut places = Places::new(wanted);
    lookup(ctx, &mut places, &mut strings).await?;
    let labels = catalog
        .rules
        .iter()
        .map(|r| RuleLabel {
            id: strings.get(&r.meta.id),
            family: strings.get(&r.meta.family),
        })
        .collect();
    Ok(Compact::new(
        labels,
        rows,
        places,
        window.since,
        window.until,
    ))
}

/// Up to this many seqs are fetched with one `IN` list (which prunes Parquet
/// row groups and stays small on a cluster); more are picked out of one scan.
const IN_LIST_SEQS: usize = 4096;

/// What a finding's place shows of an event, in the order of the
/// `bad_lines` half of [`lookup`]'s query; a loaded audit keeps these
/// columns whatever the rules read (`audit::let_go_of_unread_columns`).
pub const PLACE_COLUMNS: &str = "seq, id, type, task_id, src_file, src_line, created_us, \
     source, session_id, digest, CAST(NULL AS VARCHAR)";

/// Fetch id, type, task, file, line, instant, agent, session and content
/// (an event's digest, a rejected line's, or its reason and text when it
/// has none) for the wanted seqs from `events` and `bad_lines`.
async fn lookup(
    ctx: &SessionContext,
    places: &mut Places,
    strings: &mut Interner,
) -> datafusion::error::Result<()> {
    use futures::StreamExt;
    let wanted = places.wanted();
    if wanted.is_empty() {
        return Ok(());
    }
    let filter = if wanted.len() <= IN_LIST_SEQS {
        let list = wanted
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(",");
        format!("WHERE seq IN ({list})")
    } else {
        format!(
            "WHERE seq BETWEEN {} AND {}",
            wanted[0],
            wanted[wanted.len() - 1]
        )
    };
    let sql = format!(
        "SELECT {PLACE_COLUMNS} FROM events {filter} \
         UNION ALL SELECT seq, id, type, CAST(NULL AS VARCHAR), src_file, src_line, CAST(NULL AS BIGINT), \
         CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR), digest, concat(reason, chr(10), excerpt) \
         FROM bad_lines {filter}"
    );
    let mut batches = ctx.sql(&sql).await?.execute_stream().await?;
    let mut undigested = Vec::new();
    while let Some(b) = batches.next().await {
        add_places(&b?, places, strings, &mut undigested)?;
    }
    digest_from_columns(ctx, places, undigested).await
}

/// Events read in place from `convert`'s Parquet of layouts 1 and 2 carry
/// no digest: theirs is made from their columns, as a loaded read of the
/// same files makes it (`dedup::digest_of_columns`).
async fn digest_from_columns(
    ctx: &SessionContext,
    places: &mut Places,
    mut seqs: Vec<i64>,
) -> datafusion::error::Result<()> {
    use crate::ingest::schema::EVENTS;
    use futures::StreamExt;
    seqs.sort_unstable();
    seqs.dedup();
    for some in seqs.chunks(IN_LIST_SEQS) {
        let list = some.iter().map(i64::to_string).collect::<Vec<_>>();
        let sql = format!("SELECT * FROM events WHERE seq IN ({})", list.join(","));
        let mut batches = ctx.sql(&sql).await?.execute_stream().await?;
        while let Some(b) = batches.next().await {
            let b = b?;
            // As the loaded read lays them out (the engine may hand text
            // back in another encoding).
            let (mut fields, mut columns) = (Vec::new(), Vec::new());
            for field in EVENTS.fields() {
                if let Some(c) = b.column_by_name(field.name()) {
                    columns.push(datafusion::arrow::compute::cast(c, field.data_type())?);
                    fields.push(field.as_ref().clone().with_nullable(true));
                }
            }
            let schema = std::sync::Arc::new(datafusion::arrow::datatypes::Schema::new(fields));
            let b = RecordBatch::try_new(schema, columns)?;
            let digests = crate::ingest::dedup::digest_of_columns(&b);
            let seq = b
                .column_by_name("seq")
                .map(|c| c.as_primitive::<Int64Type>().clone());
            for r in 0..b.num_rows() {
                if let Some(seq) = &seq {
                    places.set_content(
                        seq.value(r),
                        digests.value(r).try_into().unwrap_or_default(),
                    );
                }
            }
        }
    }
    Ok(())
}

/// The text at row `r`, if any.
fn text(a: &StringArray, r: usize) -> Option<&str> {
    (!a.is_null(r)).then(|| a.value(r))
}

/// Keep the rows of `b` whose seq is wanted as places.
fn add_places(
    b: &RecordBatch,
    places: &mut Places,
    strings: &mut Interner,
    undigested: &mut Vec<i64>,
) -> datafusion::error::Result<()> {
    let wanted = places.wanted();
    use datafusion::arrow::compute::{cast, filter_record_batch};
    let seq = cast(b.column(0), &DataType::Int64)?;
    let keep: BooleanArray = seq
        .as_primitive::<Int64Type>()
        .iter()
        .map(|s| Some(s.is_some_and(|s| wanted.binary_search(&s).is_ok())))
        .collect();
    let b = filter_record_batch(b, &keep)?;
    // The engine may hand text back as Utf8View; cast to the plain types.
    let i64s = |n: usize| -> datafusion::error::Result<_> {
        Ok(cast(b.column(n), &DataType::Int64)?
            .as_primitive::<Int64Type>()
            .clone())
    };
    let strs = |n: usize| -> datafusion::error::Result<_> {
        Ok(cast(b.column(n), &DataType::Utf8)?
            .as_string::<i32>()
            .clone())
    };
    let (seq, id, ty, task, file, line, us, source, session, note) = (
        i64s(0)?,
        strs(1)?,
        strs(2)?,
        strs(3)?,
        strs(4)?,
        i64s(5)?,
        i64s(6)?,
        strs(7)?,
        strs(8)?,
        strs(10)?,
    );
    let digest = b.column(9).as_fixed_size_binary_opt().ok_or_else(|| {
        DataFusionError::Plan("the events' digest must be 16 bytes (FixedSizeBinary(16))".into())
    })?;
    // What a place says: its digest, or (a rejected line too long to hold,
    // or stored before lines had one) its reason and text. An event stored
    // without one gets it made from its columns afterwards.
    let content = |r: usize| -> [u8; 16] {
        match digest.is_null(r) {
            false => digest.value(r).try_into().unwrap_or_default(),
            true => identity::digest(text(&note, r).unwrap_or_default().as_bytes()),
        }
    };
    for r in 0..b.num_rows() {
        if digest.is_null(r)
            && !us.is_null(r)
            && places.wanted().binary_search(&seq.value(r)).is_ok()
        {
            undigested.push(seq.value(r));
        }
        places.offer(seq.value(r), || Place {
            id: text(&id, r).map(Box::from),
            source: text(&source, r).map(|s| strings.get(s)),
            session_id: text(&session, r).map(|s| strings.get(s)),
            content: content(r),
            event_type: strings.get(text(&ty, r).unwrap_or_default()),
            task_id: text(&task, r).map(|s| strings.get(s)),
            file: strings.get(file.value(r)),
            line: line.value(r).max(0) as u64,
            at: (!us.is_null(r))
                .then(|| DateTime::from_timestamp_micros(us.value(r)))
                .flatten(),
        });
    }
    Ok(())
}
