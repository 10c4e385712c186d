//! Readings of the later versions (docs/protocol.md, "A conflicting copy
//! cannot hide evidence"). Any version of an id may be the one the system
//! acted on, so every version is evidence: besides the rules' reading of
//! version 1, reading k (k = 2..16) evaluates them as if each conflicting
//! id's k-th version (its last, when it has fewer) were the one kept, and
//! the findings only such a reading yields are reported too.
//!
//! A reading swaps version numbers in `events`: the chosen version becomes
//! 1 and version 1 takes its number, so `ev` (first versions) and every
//! rule read it unchanged, loaded, in place and on a cluster.

use datafusion::arrow::array::{AsArray, Int32Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Int32Type, Int64Type};
use datafusion::error::Result;
use datafusion::prelude::SessionContext;
use std::collections::HashMap;
use std::sync::Arc;

pub use crate::report::model::ReadingsMade as Made;

/// Makes the session a reading runs in: the log's tables with `swaps`
/// applied, the built-in views' place (`Materialize`) its own.
pub trait Sessions: Sync {
    fn session<'a>(
        &'a self,
        swaps: &'a Swaps,
        reading: u32,
    ) -> futures::future::BoxFuture<'a, Result<(SessionContext, super::views::Materialize)>>;

    /// A session, in memory, over the rows of a [`Neighbourhood`] (the
    /// log's end fixed from the whole log; `ev` left to its view).
    fn reduced<'a>(
        &'a self,
        part: &'a Neighbourhood,
    ) -> futures::future::BoxFuture<'a, Result<SessionContext>>;
}

/// The rows of the log that a reading of later versions can read
/// differently, and all the built-in rules read beside them: the first 16
/// versions of the conflicting ids (a reading puts no later one in place); all events of the tasks they name, of those
/// tasks' parents and children, and of their parents' other children; all
/// events sharing a handoff token (or `jti`) with those; and, three steps
/// each way, the events their ids, causations, evidence entries and facts
/// name, or that name them. Both the reading of version 1 and the reading
/// of version k run over these rows alone: what they say differently is
/// what the whole log would say differently (a property test holds the
/// two ways to each other), at the cost of a few scans instead of the
/// whole rule set again.
#[derive(Default)]
pub struct Neighbourhood {
    pub events: Vec<RecordBatch>,
    pub evidence: Vec<RecordBatch>,
    /// `log_end` of the whole log (none when the rules do not read it).
    pub log_end: Vec<RecordBatch>,
}

impl Neighbourhood {
    /// The rows reading `swaps` exchanges, numbered both as the reading of
    /// version 1 numbers them and as this reading does: what tells whether
    /// a query can read this reading differently.
    pub fn swapped_rows(&self, swaps: &Swaps) -> Result<Vec<RecordBatch>> {
        let wanted: std::collections::HashSet<i64> = (swaps.iter())
            .flat_map(|&(first, chosen, _)| [first, chosen])
            .collect();
        let mut rows = rows_with_seqs(&self.events, &wanted)?;
        let swapped = swapped_batches(&rows, swaps);
        rows.extend(swapped);
        Ok(rows)
    }
}

/// The rows of `batches` (laid out as `events`) whose seq is in `seqs`;
/// batches with none left out.
fn rows_with_seqs(
    batches: &[RecordBatch],
    seqs: &std::collections::HashSet<i64>,
) -> Result<Vec<RecordBatch>> {
    use datafusion::arrow::array::BooleanArray;
    let mut rows = Vec::new();
    for b in batches {
        let seq = b.column_by_name("seq").expect("events have seq");
        let seq = datafusion::arrow::compute::cast(seq, &DataType::Int64)?;
        let mask: BooleanArray = (seq.as_primitive::<Int64Type>().values().iter())
            .map(|s| Some(seqs.contains(s)))
            .collect();
        if mask.true_count() > 0 {
            rows.push(datafusion::arrow::compute::filter_record_batch(b, &mask)?);
        }
    }
    Ok(rows)
}

/// Past this share of the log, the neighbourhood is not worth taking
/// apart: readings run over the whole log. Its rows (of the first 16
/// versions) are weighed against all the log's rows, every version: what a
/// reading of the whole log reads (16 k versions of one id make a
/// neighbourhood of 16 rows, not most of the log). The sets of ids, tasks, tokens
/// and facts it is found by are held to the same share, so that no query
/// names more values than the log has rows.
const MOST: f64 = 0.2;

/// Past this many conflicting ids, and this share of the log's rows, the
/// neighbourhood is not asked for: each id brings its tasks' families and
/// token holders, and in every log we generated so many ids' neighbourhood
/// was most of the log (on a 1 GB log with 1 % of its events in two
/// versions, finding that out took 1.4 s).
const MANY_IDS: (usize, f64) = (1000, 0.001);

/// The neighbourhood of `conflicts` in the log `ctx` holds (its views
/// registered), or None when it is most of the log.
pub async fn neighbourhood(
    ctx: &SessionContext,
    conflicts: &Conflicts,
) -> Result<Option<Neighbourhood>> {
    use std::collections::BTreeSet;
    let total = count(ctx, "SELECT count(*) FROM events".into()).await?;
    let most = (MOST * total as f64) as usize;
    let many = MANY_IDS.0.max((MANY_IDS.1 * total as f64) as usize);
    if conflicts.ids() > most.min(many) {
        return Ok(None);
    }
    let versions = conflicts.read_versions();
    let (mut tasks, mut tokens, mut ids, mut facts) = (
        BTreeSet::new(),
        BTreeSet::new(),
        BTreeSet::new(),
        BTreeSet::new(),
    );
    let texts = |sql: String| async move {
        let batches = collect(ctx, sql).await?;
        let mut out: Vec<Vec<Option<String>>> = Vec::new();
        for b in &batches {
            let columns: Vec<_> = (0..b.num_columns())
                .map(|c| {
                    datafusion::arrow::compute::cast(
                        b.column(c),
                        &datafusion::arrow::datatypes::DataType::Utf8,
                    )
                })
                .collect::<std::result::Result<_, _>>()?;
            for r in 0..b.num_rows() {
                out.push(
                    columns
                        .iter()
                        .map(|c| {
                            let s = c.as_string::<i32>();
                            (!datafusion::arrow::array::Array::is_null(s, r))
                                .then(|| s.value(r).to_string())
                        })
                        .collect(),
                );
            }
        }
        Ok::<_, datafusion::error::DataFusionError>(out)
    };
    // The conflicting rows themselves.
    for row in texts(format!(
        "SELECT id, task_id, parent_task_id, p_task_id, token_task_id, token_parent_task_id, \
         handoff_token, token_jti, causation_id, original_event_id, fact_id \
         FROM events WHERE seq IN ({})",
        numbers(&versions)
    ))
    .await?
    {
        ids.extend(row[0].clone());
        tasks.extend(row[1..6].iter().flatten().cloned());
        tokens.extend(row[6..8].iter().flatten().cloned());
        ids.extend(row[8..10].iter().flatten().cloned());
        facts.extend(row[10].clone());
    }
    // The conflicting ids' own tasks alone may be most of the log: then
    // nothing more is asked.
    if tasks.len() > most
        || count(
            ctx,
            format!(
                "SELECT count(*) FROM events WHERE task_id IN ({}) AND version <= {MAX_READING}",
                quoted(&tasks)
            ),
        )
        .await? as usize
            > most
    {
        return Ok(None);
    }
    // Their tasks' family: parents, children, and the parents' children.
    let parents: BTreeSet<String> = texts(format!(
        "SELECT DISTINCT parent_task_id FROM events WHERE task_id IN ({}) AND parent_task_id IS NOT NULL",
        quoted(&tasks)
    ))
    .await?
    .into_iter()
    .flat_map(|r| r[0].clone())
    .collect();
    let mut family = tasks.clone();
    family.extend(parents.iter().cloned());
    for row in texts(format!(
        "SELECT DISTINCT task_id FROM events WHERE parent_task_id IN ({}) AND task_id IS NOT NULL",
        quoted(&family)
    ))
    .await?
    {
        tasks.extend(row[0].clone());
    }
    tasks.extend(parents);
    if [tasks.len(), tokens.len(), ids.len(), facts.len()]
        .iter()
        .any(|&n| n > most)
        || (tasks.len() > most / 100 && family_events(ctx, &tasks).await? > most)
    {
        return Ok(None);
    }
    // The tokens the family issues or presents, and who else holds them.
    for row in texts(format!(
        "SELECT DISTINCT handoff_token, token_jti FROM events WHERE task_id IN ({})",
        quoted(&tasks)
    ))
    .await?
    {
        tokens.extend(row.into_iter().flatten());
    }
    if !tokens.is_empty() {
        for row in texts(format!(
            "SELECT DISTINCT task_id FROM events WHERE (handoff_token IN ({0}) OR token_jti IN ({0})) \
             AND task_id IS NOT NULL",
            quoted(&tokens)
        ))
        .await?
        {
            tasks.extend(row[0].clone());
        }
    }
    // With the token holders, the family's events may be most of the log.
    if family_events(ctx, &tasks).await? > most {
        return Ok(None);
    }
    // What the ids name and what names them, three steps each way.
    for _ in 0..3 {
        if [tasks.len(), tokens.len(), ids.len(), facts.len()]
            .iter()
            .any(|&n| n > most)
        {
            return Ok(None);
        }
        let before = (ids.len(), facts.len());
        let named = format!(
            "SELECT id, causation_id, original_event_id, fact_id FROM events \
             WHERE id IN ({0}) OR causation_id IN ({0}) OR original_event_id IN ({0}) \
             OR fact_id IN ({1})",
            quoted(&ids),
            quoted(&facts)
        );
        for row in texts(named).await? {
            ids.extend(row[0..3].iter().flatten().cloned());
            facts.extend(row[3].clone());
        }
        let entries = format!(
            "SELECT event_id, ref_id FROM evidence WHERE ref_id IN ({0}) OR event_id IN ({0})",
            quoted(&ids)
        );
        for row in texts(entries).await? {
            ids.extend(row.into_iter().flatten());
        }
        if (ids.len(), facts.len()) == before {
            break;
        }
    }
    if [tasks.len(), tokens.len(), ids.len(), facts.len()]
        .iter()
        .any(|&n| n > most)
    {
        return Ok(None);
    }
    let filter = format!(
        "(seq IN ({}) OR task_id IN ({tasks}) OR parent_task_id IN ({tasks}) OR id IN ({}) \
         OR handoff_token IN ({tokens}) OR token_jti IN ({tokens}) OR fact_id IN ({})) \
         AND version <= {MAX_READING}",
        numbers(&versions),
        quoted(&ids),
        quoted(&facts),
        tasks = quoted(&tasks),
        tokens = quoted(&tokens),
    );
    let part = count(ctx, format!("SELECT count(*) FROM events WHERE {filter}")).await?;
    if part as f64 > MOST * total as f64 {
        return Ok(None);
    }
    let events = collect(ctx, format!("SELECT * FROM events WHERE {filter}")).await?;
    let events = as_events(events)?;
    let seqs: BTreeSet<i64> = events
        .iter()
        .flat_map(|b| {
            let s = b
                .column(crate::ingest::schema::events_col("seq"))
                .as_primitive::<Int64Type>();
            s.values().to_vec()
        })
        .collect();
    let evidence = collect(
        ctx,
        format!(
            "SELECT * FROM evidence WHERE event_seq IN ({})",
            numbers(&seqs)
        ),
    )
    .await?;
    let evidence = as_layout(evidence, &crate::ingest::schema::EVIDENCE)?;
    // The whole log's end, when the rules read it (a narrowed run may not).
    let log_end = match ctx.table_exist("log_end")? {
        true => collect(ctx, "SELECT * FROM log_end".into()).await?,
        false => Vec::new(),
    };
    Ok(Some(Neighbourhood {
        events,
        evidence,
        log_end,
    }))
}

/// The rows of the first 16 versions of the conflicting ids alone, taken
/// from `fetched` (which holds them), and the whole log's end: the
/// neighbourhood of rules that read each event by itself
/// (`differences::RuleReads::row_by_row`), whose rows a reading can change
/// only for the events it swaps.
pub async fn own_rows(
    ctx: &SessionContext,
    conflicts: &Conflicts,
    fetched: &RecordBatch,
) -> Result<Neighbourhood> {
    let versions = conflicts.read_versions().into_iter().collect();
    let events = rows_with_seqs(std::slice::from_ref(fetched), &versions)?;
    let log_end = match ctx.table_exist("log_end")? {
        true => collect(ctx, "SELECT * FROM log_end".into()).await?,
        false => Vec::new(),
    };
    Ok(Neighbourhood {
        events: as_events(events)?,
        evidence: Vec::new(),
        log_end,
    })
}

/// The rows of `events` whose `column` holds one of `values`: a join with
/// them, unnested from one list value (a cluster is sent it as it is),
/// where a list of tens of thousands of values in a query's text, or as
/// many rows of VALUES, took most of a second to plan.
pub(super) async fn matching(
    ctx: &SessionContext,
    column: &str,
    values: &std::collections::BTreeSet<i64>,
) -> Result<datafusion::dataframe::DataFrame> {
    use datafusion::arrow::array::ListArray;
    use datafusion::common::{JoinType, ScalarValue};
    use datafusion::logical_expr::lit;
    let list = ListArray::from_iter_primitive::<Int64Type, _, _>([Some(
        values.iter().map(|v| Some(*v)).collect::<Vec<_>>(),
    )]);
    // The values have no statistics the engine could weigh: it would
    // build its table of the events, or hash both sides into partitions
    // (a copy of every event). Planned as written instead: one table of
    // the values, the events' partitions streaming past it.
    let mut state = ctx.state();
    let optimizer = &mut state.config_mut().options_mut().optimizer;
    optimizer.join_reordering = false;
    optimizer.repartition_joins = false;
    let ctx = &SessionContext::new_with_state(state);
    let values = (ctx.read_empty()?)
        .select(vec![
            lit(ScalarValue::List(Arc::new(list))).alias("hvaudit_value"),
        ])?
        .unnest_columns(&["hvaudit_value"])?;
    // The few values are the side the join builds its table of (the
    // left); the events stream past it.
    let events = ctx.table("events").await?;
    values.join(
        events,
        JoinType::RightSemi,
        &["hvaudit_value"],
        &[column],
        None,
    )
}

async fn count(ctx: &SessionContext, sql: String) -> Result<u64> {
    let batches = collect(ctx, sql).await?;
    let n = batches
        .iter()
        .find(|b| b.num_rows() > 0)
        .map(|b| b.column(0).as_primitive::<Int64Type>().value(0))
        .unwrap_or(0);
    Ok(n.max(0) as u64)
}

/// Batches laid out as `schema` (the engine may hand text back in another
/// encoding).
fn as_layout(
    batches: Vec<RecordBatch>,
    schema: &datafusion::arrow::datatypes::SchemaRef,
) -> Result<Vec<RecordBatch>> {
    batches
        .into_iter()
        .filter(|b| b.num_rows() > 0)
        .map(|b| {
            let columns = (schema.fields().iter())
                .map(|f| {
                    let c = b.column_by_name(f.name()).ok_or_else(|| {
                        datafusion::error::DataFusionError::Plan(format!("no column {}", f.name()))
                    })?;
                    Ok(datafusion::arrow::compute::cast(c, f.data_type())?)
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(RecordBatch::try_new(schema.clone(), columns)?)
        })
        .collect()
}

fn as_events(batches: Vec<RecordBatch>) -> Result<Vec<RecordBatch>> {
    as_layout(batches, &crate::ingest::schema::EVENTS)
}

/// A SQL list of the texts (a null when empty, so that `IN` holds for none).
fn quoted(texts: &std::collections::BTreeSet<String>) -> String {
    if texts.is_empty() {
        return "NULL".into();
    }
    let list: Vec<String> = texts.iter().map(|t| sql_text(t)).collect();
    list.join(",")
}

fn numbers(seqs: &std::collections::BTreeSet<i64>) -> String {
    if seqs.is_empty() {
        return "NULL".into();
    }
    let list: Vec<String> = seqs.iter().map(i64::to_string).collect();
    list.join(",")
}

/// Readings past the 16th version are not made: an id with more versions
/// is itself a critical finding (`integrity.conflicting_duplicate`).
pub use crate::report::model::MAX_READING;

/// The ids with more than one version, by their seqs.
#[derive(Debug, Default, Clone)]
pub struct Conflicts {
    /// Per id: the seqs of its versions, version 1 first.
    ids: Vec<Vec<i64>>,
}

/// One reading's swaps: (seq of version 1, seq of the version read instead,
/// the chosen version's number).
pub type Swaps = Vec<(i64, i64, i32)>;

impl Conflicts {
    /// The conflicting ids of `events` (one scan of `version`; with no
    /// later version, nothing more).
    pub async fn of(ctx: &SessionContext) -> Result<Conflicts> {
        let later = collect(
            ctx,
            "SELECT id, seq, version FROM events WHERE version > 1".into(),
        )
        .await?;
        if later.iter().all(|b| b.num_rows() == 0) {
            return Ok(Conflicts::default());
        }
        let mut by_id: HashMap<String, Vec<(i32, i64)>> = HashMap::new();
        for b in &later {
            let (ids, seqs, versions) = columns(b);
            for r in 0..b.num_rows() {
                let id = ids.value(r).to_string();
                by_id
                    .entry(id)
                    .or_default()
                    .push((versions.value(r), seqs.value(r)));
            }
        }
        // Their first versions, looked up by id (few).
        let list: Vec<String> = by_id.keys().map(|id| sql_text(id)).collect();
        for some in list.chunks(4096) {
            let sql = format!(
                "SELECT id, seq, version FROM events WHERE version = 1 AND id IN ({})",
                some.join(",")
            );
            for b in collect(ctx, sql).await? {
                let (ids, seqs, versions) = columns(&b);
                for r in 0..b.num_rows() {
                    if let Some(v) = by_id.get_mut(ids.value(r)) {
                        v.push((versions.value(r), seqs.value(r)));
                    }
                }
            }
        }
        let mut ids: Vec<Vec<i64>> = by_id
            .into_values()
            .map(|mut v| {
                v.sort_unstable();
                v.into_iter().map(|(_, seq)| seq).collect()
            })
            // An id whose first version is missing (a file left out) has
            // nothing to swap with.
            .filter(|seqs: &Vec<i64>| seqs.len() > 1)
            .collect();
        ids.sort_unstable();
        Ok(Conflicts { ids })
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The conflicting ids.
    pub fn ids(&self) -> usize {
        self.ids.len()
    }

    /// Per conflicting id, the seqs of its versions, version 1 first.
    pub fn versions(&self) -> &[Vec<i64>] {
        &self.ids
    }

    /// The seqs of the versions a reading can put in place of the first
    /// (each id's first 16; past the sixteenth, none: only the integrity
    /// rule reads them, the same in every reading), and the first ones.
    pub fn read_versions(&self) -> std::collections::BTreeSet<i64> {
        (self.ids.iter())
            .flat_map(|v| v.iter().take(MAX_READING as usize))
            .copied()
            .collect()
    }

    /// The ids `keep` marks (one mark per id, in the order of
    /// [`Conflicts::versions`]), and the others.
    pub fn split(&self, keep: &[bool]) -> (Conflicts, Conflicts) {
        let (mut kept, mut others) = (Conflicts::default(), Conflicts::default());
        for (versions, &k) in self.ids.iter().zip(keep) {
            match k {
                true => kept.ids.push(versions.clone()),
                false => others.ids.push(versions.clone()),
            }
        }
        (kept, others)
    }

    /// Ids with more versions than readings are made for.
    pub fn past_the_last_reading(&self) -> usize {
        let max = MAX_READING as usize;
        self.ids.iter().filter(|v| v.len() > max).count()
    }

    /// The readings to make: 2..=the most versions of an id (at most 16).
    pub fn readings(&self) -> std::ops::RangeInclusive<u32> {
        let most = self.ids.iter().map(Vec::len).max().unwrap_or(1) as u32;
        2..=most.min(MAX_READING)
    }

    /// Reading k: every conflicting id's k-th version (its last, when it
    /// has fewer) in place of its first.
    pub fn swaps(&self, k: u32) -> Swaps {
        self.ids
            .iter()
            .map(|seqs| {
                let chosen = (k as usize).min(seqs.len());
                (seqs[0], seqs[chosen - 1], chosen as i32)
            })
            .collect()
    }

    /// For every later version's seq, the seq of its id's first version:
    /// what tells a finding of a reading from one of version 1.
    pub fn first_of(&self) -> HashMap<i64, i64> {
        let mut out = HashMap::new();
        for seqs in &self.ids {
            for &later in &seqs[1..] {
                out.insert(later, seqs[0]);
            }
        }
        out
    }
}

/// How many rows of the first 16 versions (those a neighbourhood holds)
/// belong to `tasks` or name one of them as parent. Asked
/// once the family is complete, and before the token holders join it when
/// it already names many tasks (the set only grows, so the answer is the
/// same; a family that is most of the log is given up three scans sooner).
async fn family_events(
    ctx: &SessionContext,
    tasks: &std::collections::BTreeSet<String>,
) -> Result<usize> {
    let sql = format!(
        "SELECT count(*) FROM events WHERE (task_id IN ({0}) OR parent_task_id IN ({0})) \
         AND version <= {MAX_READING}",
        quoted(tasks)
    );
    Ok(count(ctx, sql).await? as usize)
}

async fn collect(ctx: &SessionContext, sql: String) -> Result<Vec<RecordBatch>> {
    let started = std::time::Instant::now();
    let batches = ctx.sql(&sql).await?.collect().await;
    // HVAUDIT_TIMING=1: each query of the readings, by its first words.
    let words: String = sql.chars().take(72).collect();
    crate::progress::timing("reading", &words, started);
    batches
}

/// (id, seq, version) of a result batch, in the types the engine gave.
fn columns(
    b: &RecordBatch,
) -> (
    datafusion::arrow::array::StringArray,
    datafusion::arrow::array::Int64Array,
    Int32Array,
) {
    use datafusion::arrow::compute::cast;
    use datafusion::arrow::datatypes::DataType;
    let text = cast(b.column(0), &DataType::Utf8).expect("an id casts to text");
    let seq = cast(b.column(1), &DataType::Int64).expect("a seq is an integer");
    let version = cast(b.column(2), &DataType::Int32).expect("a version is an integer");
    (
        text.as_string::<i32>().clone(),
        seq.as_primitive::<Int64Type>().clone(),
        version.as_primitive::<Int32Type>().clone(),
    )
}

/// A SQL string literal of `text`.
fn sql_text(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// `events` batches as reading `swaps` sees them: the version numbers of
/// each swapped pair exchanged (only batches holding one are copied).
pub fn swapped_batches(batches: &[RecordBatch], swaps: &Swaps) -> Vec<RecordBatch> {
    let at = crate::ingest::schema::events_col;
    let mut new_version: HashMap<i64, i32> = HashMap::new();
    for &(first, chosen, version) in swaps {
        new_version.insert(first, version);
        new_version.insert(chosen, 1);
    }
    batches
        .iter()
        .map(|b| {
            let seqs = b.column(at("seq")).as_primitive::<Int64Type>();
            if !seqs.values().iter().any(|s| new_version.contains_key(s)) {
                return b.clone();
            }
            let versions = b.column(at("version")).as_primitive::<Int32Type>();
            let swapped: Int32Array = (0..b.num_rows())
                .map(|r| {
                    let v = new_version.get(&seqs.value(r)).copied();
                    Some(v.unwrap_or_else(|| versions.value(r)))
                })
                .collect();
            let mut columns = b.columns().to_vec();
            columns[at("version")] = Arc::new(swapped);
            RecordBatch::try_new(b.schema(), columns).expect("same types as before")
        })
        .collect()
}

/// The SQL of `events` as reading `swaps` sees it, over the stored table
/// `stored` (in place and on a cluster): every column as stored but
/// `version`, exchanged for each swapped pair. One `IN` list per version
/// given (at most 16), each a hash lookup per row: a `CASE seq WHEN ..`
/// branch per seq compared every row with every swapped seq, and 20 k
/// conflicting ids made each scan of `events` take minutes.
pub fn swapped_view(stored: &str, swaps: &Swaps) -> String {
    use std::collections::BTreeMap;
    let mut by_version: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for &(first, chosen, version) in swaps {
        by_version.entry(version).or_default().push(first);
        by_version.entry(1).or_default().push(chosen);
    }
    let mut cases = String::new();
    for (version, seqs) in &by_version {
        let list: Vec<String> = seqs.iter().map(i64::to_string).collect();
        cases.push_str(&format!(" WHEN seq IN ({}) THEN {version}", list.join(",")));
    }
    let version = if cases.is_empty() {
        "version".to_string()
    } else {
        format!("CAST(CASE{cases} ELSE version END AS INT) AS version")
    };
    let columns: Vec<String> = crate::ingest::schema::EVENTS
        .fields()
        .iter()
        .map(|f| match f.name().as_str() {
            "version" => version.clone(),
            name => format!("\"{name}\""),
        })
        .collect();
    format!("SELECT {} FROM {stored}", columns.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conflicts(ids: &[&[i64]]) -> Conflicts {
        Conflicts {
            ids: ids.iter().map(|v| v.to_vec()).collect(),
        }
    }

    #[test]
    fn each_reading_takes_the_kth_version_or_the_last() {
        let c = conflicts(&[&[10, 20], &[30, 40, 50]]);
        assert_eq!(c.readings(), 2..=3);
        assert_eq!(c.swaps(2), [(10, 20, 2), (30, 40, 2)]);
        assert_eq!(c.swaps(3), [(10, 20, 2), (30, 50, 3)]);
        assert_eq!(c.first_of()[&50], 30);
    }

    #[test]
    fn readings_stop_at_the_sixteenth_version() {
        let many: Vec<i64> = (0..40).collect();
        let c = conflicts(&[&many, &[100, 200]]);
        assert_eq!(c.readings(), 2..=16);
        assert_eq!(c.past_the_last_reading(), 1);
        assert_eq!(c.swaps(16)[0], (0, 15, 16));
        assert!(conflicts(&[]).readings().is_empty());
    }

    /// The events are never held for the join: its table is built of the
    /// values, and the events (many rows, their count known) stream past.
    #[tokio::test]
    async fn matching_builds_its_table_of_the_values() {
        use datafusion::arrow::array::Int64Array;
        use datafusion::arrow::datatypes::{Field, Schema};
        let ctx = SessionContext::new();
        let schema = Arc::new(Schema::new(vec![Field::new("seq", DataType::Int64, false)]));
        let seqs = Int64Array::from_iter_values(0..100_000);
        let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(seqs)]).unwrap();
        let table = datafusion::datasource::MemTable::try_new(schema, vec![vec![batch]]).unwrap();
        ctx.register_table("events", Arc::new(table)).unwrap();
        let wanted = [5, 70_000, 200_000].into_iter().collect();
        let rows = matching(&ctx, "seq", &wanted).await.unwrap();
        let plan = rows.clone().create_physical_plan().await.unwrap();
        let shown = datafusion::physical_plan::displayable(plan.as_ref())
            .indent(false)
            .to_string();
        let join = shown
            .lines()
            .position(|l| l.contains("HashJoinExec"))
            .unwrap();
        let join_line = shown.lines().nth(join).unwrap();
        assert!(
            join_line.contains("mode=CollectLeft, join_type=RightSemi"),
            "{shown}"
        );
        // The build side (the first input) unnests the values.
        let build = shown
            .lines()
            .skip(join + 1)
            .take(3)
            .collect::<Vec<_>>()
            .join("\n");
        assert!(build.contains("Unnest"), "{shown}");
        let found: Vec<i64> = (rows.collect().await.unwrap().iter())
            .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
            .collect();
        assert_eq!(found.len(), 2);
    }

    #[test]
    fn the_view_exchanges_only_the_swapped_versions() {
        let sql = swapped_view("events_stored", &vec![(1, 9, 2), (3, 5, 2), (7, 8, 3)]);
        assert!(sql.contains(
            "CASE WHEN seq IN (9,5,8) THEN 1 WHEN seq IN (1,3) THEN 2 WHEN seq IN (7) THEN 3 \
             ELSE version END"
        ));
        assert!(sql.starts_with("SELECT \"seq\", "));
        assert!(sql.ends_with(" FROM events_stored"));
    }
}
