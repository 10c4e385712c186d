//! Evaluating the catalog: its views and rules run as one dependency graph,
//! a few at once, the reading of version 1 first and then, where the log
//! has conflicting ids, the readings of their later versions.

use super::catalog::{self, Catalog};
use super::findings::{RuleRun, Window, resolve};
use super::jobs::{AbortOnDrop, Dependencies, Job, add_rows, jobs_at_once, outcome};
use super::readings;
use super::views::{Materialize, register_view};
use crate::finding_store::{FindingRow, Findings, Interner};
use datafusion::arrow::array::RecordBatch;
use datafusion::error::DataFusionError;
use datafusion::execution::memory_pool::MemoryLimit;
use datafusion::prelude::SessionContext;
use std::sync::{Arc, Mutex};

/// The reading of version 1: every view registered and every rule run,
/// before the readings of later versions ([`finish`]). The views stay
/// registered in the session for the caller's own queries until `finish`,
/// which lets them go when the readings run over the whole log.
pub struct FirstReading {
    strings: Arc<Mutex<Interner>>,
    evaluated: Evaluated,
}

/// Register the views and run every rule of the catalog (the reading of
/// version 1).
pub async fn first_reading(
    ctx: &SessionContext,
    catalog: &Catalog,
    materialize: &Materialize,
    progress: &indicatif::ProgressBar,
) -> FirstReading {
    // One copy of each task id, shared with the places looked up later.
    let strings = Arc::new(Mutex::new(Interner::default()));
    let all: Vec<u32> = (0..catalog.rules.len() as u32).collect();
    let evaluated = evaluate(ctx, catalog, &all, materialize, progress, &strings).await;
    progress.finish_and_clear();
    FirstReading { strings, evaluated }
}

/// Assemble sorted findings from the reading of version 1 and, where the
/// log holds conflicting ids, the findings only a reading of their later
/// versions yields (`readings`).
pub async fn finish(
    ctx: &SessionContext,
    catalog: &Catalog,
    first: FirstReading,
    window: Window,
    later: Option<&dyn readings::Sessions>,
) -> RuleRun {
    let FirstReading { strings, evaluated } = first;
    let Evaluated {
        mut rows,
        mut errors,
    } = evaluated;
    let mut made = None;
    if let Some(sessions) = later {
        match read_later_versions(ctx, catalog, sessions, &strings, &rows).await {
            Ok((added, note)) => {
                rows.extend(added.rows);
                // What failed in version 1's reading fails in every one:
                // said once.
                let failed: std::collections::HashSet<String> =
                    errors.iter().map(|(what, _)| what.clone()).collect();
                errors.extend(
                    added
                        .errors
                        .into_iter()
                        .filter(|(what, _)| !failed.contains(what)),
                );
                made = note;
            }
            Err(e) => errors.push(("(reading later versions)".into(), with_hint(&e.to_string()))),
        }
    }
    let strings = Arc::try_unwrap(strings)
        .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
        .unwrap_or_default();
    let started = std::time::Instant::now();
    let resolved = resolve(ctx, catalog, rows, strings, window).await;
    crate::progress::timing("resolve", "(locating events)", started);
    match resolved {
        Ok(findings) => RuleRun {
            outside_window: findings.outside_window,
            findings: findings.into(),
            errors,
            readings: made,
        },
        Err(e) => {
            errors.push(("(locating events)".into(), e.to_string()));
            RuleRun {
                findings: Findings::default(),
                errors,
                outside_window: 0,
                readings: made,
            }
        }
    }
}

/// What an evaluation of the rules gave: their rows, and what failed.
struct Evaluated {
    rows: Vec<FindingRow>,
    errors: Vec<(String, String)>,
}

/// The readings of the later versions of every conflicting id, each in a
/// session of its own: the rows no earlier reading gave (told apart by
/// rule, task, message and the ids they cite), marked with their reading.
async fn read_later_versions(
    ctx: &SessionContext,
    catalog: &Catalog,
    sessions: &dyn readings::Sessions,
    strings: &Arc<Mutex<Interner>>,
    first: &[FindingRow],
) -> datafusion::error::Result<(Evaluated, Option<readings::Made>)> {
    let conflicts = readings::Conflicts::of(ctx).await?;
    let mut added = Evaluated {
        rows: Vec::new(),
        errors: Vec::new(),
    };
    if conflicts.is_empty() {
        return Ok((added, None));
    }
    let first_of = conflicts.first_of();
    let key = |r: &FindingRow| {
        let mut seqs: Vec<i64> = r
            .seqs
            .iter()
            .map(|s| *first_of.get(s).unwrap_or(s))
            .collect();
        seqs.sort_unstable();
        seqs.dedup();
        (r.rule, r.task_id.clone(), r.message.clone(), seqs)
    };
    let mut seen: std::collections::HashSet<_> = first.iter().map(key).collect();
    // Only what reads `ev` can read otherwise (the integrity rule reads
    // every version, the same in every reading).
    let (reading_catalog, rule_index) = reading_ev(ctx, catalog);
    // The built-in rules read only a neighbourhood of the conflicting ids
    // differently: every reading and the reading of version 1 run over it
    // alone (`HVAUDIT_READINGS=full` runs them over the whole log, as rules
    // of the user's own always do), and a rule blind to what most ids'
    // versions differ in reads the other ids' alone (`differences`). One
    // neighbourhood serves every reading of a part: findings of two
    // readings are told apart by their text, which a narrower one could
    // change at its edge.
    let whole = std::env::var("HVAUDIT_READINGS").is_ok_and(|v| v == "full");
    let shipped = !whole && catalog.all_shipped();
    let all = Part {
        catalog: reading_catalog,
        labels: rule_index,
        conflicts: conflicts.clone(),
        left_out: readings::Conflicts::default(),
        by_row: false,
    };
    let (parts, fetched) = match shipped {
        true => split(ctx, sessions, all, &conflicts).await?,
        false => (vec![all], None),
    };
    // Every neighbourhood is asked for before a reading of the whole log
    // lets go of the session's views.
    let mut hoods = Vec::with_capacity(parts.len());
    for part in &parts {
        if !shipped {
            hoods.push(None);
            continue;
        }
        let started = std::time::Instant::now();
        let hood = match (part.by_row, &fetched) {
            (true, Some(rows)) => Some(readings::own_rows(ctx, &part.conflicts, rows).await?),
            _ => readings::neighbourhood(ctx, &part.conflicts).await?,
        };
        let what = match &hood {
            Some(p) => {
                let rows: usize = p.events.iter().map(|b| b.num_rows()).sum();
                format!("neighbourhood ({rows} events)")
            }
            None => "neighbourhood (most of the log: the whole log is read)".into(),
        };
        crate::progress::timing("reading", &what, started);
        hoods.push(hood);
    }
    // A reading's rows that no earlier one gave, and its errors.
    let note = |added: &mut Evaluated,
                seen: &mut std::collections::HashSet<_>,
                k: u32,
                rows: Vec<FindingRow>,
                errors: Vec<(String, String)>| {
        added.errors.extend(errors.into_iter().map(|(what, e)| {
            let e = format!("{e} (in the reading of version {k} of the conflicting ids)");
            (what, e)
        }));
        for mut row in rows {
            if seen.insert(key(&row)) {
                row.reading = Some(k);
                added.rows.push(row);
            }
        }
    };
    for (part, hood) in parts.iter().zip(&hoods) {
        let Some(hood) = hood else { continue };
        // Over a neighbourhood: the log's end is the whole log's, `ev` its
        // view over `events`, and every query planned once.
        let started = std::time::Instant::now();
        let mut reduced_catalog = part.catalog.clone();
        reduced_catalog.remove_embedded_view("log_end");
        reduced_catalog.restore_embedded_view("ev");
        let session = sessions.reduced(hood).await?;
        let mut swapped = Vec::new();
        for k in part.conflicts.readings() {
            swapped.extend(hood.swapped_rows(&part.conflicts.swaps(k))?);
        }
        let (planned, errors) =
            super::planned::Planned::new(session, hood, &reduced_catalog, &part.labels, &swapped)
                .await?;
        // Version 1 over the neighbourhood: what every reading is told
        // apart from (besides the whole log's own findings). What fails
        // here fails in every reading: said once.
        let first_run = planned.first(strings).await;
        crate::progress::timing("reading", "version 1 (planned once)", started);
        added.errors.extend(errors);
        added.errors.extend(first_run.errors);
        seen.extend(first_run.rows.iter().map(key));
        let failed: std::collections::HashSet<String> =
            added.errors.iter().map(|(what, _)| what.clone()).collect();
        for k in part.conflicts.readings() {
            let started = std::time::Instant::now();
            let mut run = planned
                .reading(hood, &part.conflicts.swaps(k), strings)
                .await?;
            let what = format!(
                "version {k} ({} of {} rules, {} views run)",
                run.rules_run,
                reduced_catalog.rules.len(),
                run.views_run
            );
            crate::progress::timing("reading", &what, started);
            part.move_seqs(k, &mut run.rows);
            let errors = (run.errors.into_iter())
                .filter(|(what, _)| !failed.contains(what))
                .collect();
            note(&mut added, &mut seen, k, run.rows, errors);
        }
    }
    if hoods.iter().any(Option::is_none) {
        // Each reading of the whole log computes its own views: the
        // version-1 session lets go of its own (and of `ev`) first, so
        // that two sets are never held at once (`resolve` reads `events`).
        for name in catalog.views.iter().map(|v| v.name.as_str()).chain(["ev"]) {
            ctx.deregister_table(name)?;
        }
    }
    let quiet = indicatif::ProgressBar::hidden();
    for (part, _) in parts.iter().zip(&hoods).filter(|(_, h)| h.is_none()) {
        for k in part.conflicts.readings() {
            let started = std::time::Instant::now();
            let swaps = part.conflicts.swaps(k);
            let (session, materialize) = sessions.session(&swaps, k).await?;
            let Evaluated { mut rows, errors } = evaluate(
                &session,
                &part.catalog,
                &part.labels,
                &materialize,
                &quiet,
                strings,
            )
            .await;
            let what = format!("version {k} ({} rules)", part.catalog.rules.len());
            crate::progress::timing("reading", &what, started);
            part.move_seqs(k, &mut rows);
            note(&mut added, &mut seen, k, rows, errors);
        }
    }
    let made = readings::Made {
        ids: conflicts.ids() as u64,
        readings: conflicts.readings().count() as u32,
        past_the_last: conflicts.past_the_last_reading() as u64,
    };
    Ok((added, Some(made)))
}

/// A part of the readings: the rules it runs (and the labels their rows
/// carry), the conflicting ids whose versions it swaps, those it leaves
/// out, which only move the seqs its rows cite, and whether its rules all
/// read each event by itself, so that its neighbourhood is the swapped
/// events alone ([`differences`](super::differences)).
struct Part {
    catalog: Catalog,
    labels: Vec<u32>,
    conflicts: readings::Conflicts,
    left_out: readings::Conflicts,
    by_row: bool,
}

impl Part {
    /// The rows of reading `k` as the reading that swaps the ids left out
    /// too gives them.
    fn move_seqs(&self, k: u32, rows: &mut [FindingRow]) {
        if self.left_out.is_empty() {
            return;
        }
        let moved: std::collections::HashMap<i64, i64> = (self.left_out.swaps(k).into_iter())
            .map(|(first, chosen, _)| (first, chosen))
            .collect();
        super::differences::move_seqs(rows, &moved);
    }

    /// The part that runs the rules `keep` marks (one mark per rule, with
    /// what each reads), and only the views they read.
    fn rules(
        &self,
        keep: &[bool],
        read: &[super::differences::RuleReads],
        conflicts: readings::Conflicts,
        left_out: readings::Conflicts,
    ) -> Part {
        let mut catalog = self.catalog.clone();
        let mut marks = keep.iter();
        catalog.rules.retain(|_| *marks.next().unwrap_or(&true));
        catalog.drop_unread_views(&[]);
        let labels = (self.labels.iter().zip(keep))
            .filter(|(_, k)| **k)
            .map(|(l, _)| *l)
            .collect();
        let by_row = (keep.iter().zip(read)).all(|(k, r)| !k || r.row_by_row);
        Part {
            catalog,
            labels,
            conflicts,
            left_out,
            by_row,
        }
    }
}

/// `all` split by what the versions differ in (`differences`): the rules
/// blind to what most ids differ in, reading the other ids' versions, and
/// the rest reading every id's; or `all` as it is, when that leaves
/// nothing out. A part with no rule or no id to read is left out. Beside,
/// the rows of the versions compared.
async fn split(
    ctx: &SessionContext,
    sessions: &dyn readings::Sessions,
    all: Part,
    conflicts: &readings::Conflicts,
) -> datafusion::error::Result<(Vec<Part>, Option<RecordBatch>)> {
    use super::differences;
    let started = std::time::Instant::now();
    let empty = sessions
        .reduced(&readings::Neighbourhood::default())
        .await?;
    let read = differences::columns_read(&empty, &all.catalog).await;
    crate::progress::timing("reading", "what each rule reads", started);
    let (differ, fetched) = differences::differences(ctx, conflicts).await?;
    let split = differences::Split::of(&differ, &read);
    let what = split
        .as_ref()
        .map_or("nothing to leave out".into(), |s| s.describe());
    crate::progress::timing(
        "reading",
        &format!("what the versions differ in: {what}"),
        started,
    );
    let Some(split) = split else {
        return Ok((vec![all], Some(fetched)));
    };
    let (within, others) = conflicts.split(&split.within);
    let seeing: Vec<bool> = split.blind.iter().map(|b| !b).collect();
    let parts = [
        all.rules(&split.blind, &read, others, within),
        all.rules(
            &seeing,
            &read,
            conflicts.clone(),
            readings::Conflicts::default(),
        ),
    ];
    let parts = (parts.into_iter())
        .filter(|p| !p.catalog.rules.is_empty() && !p.conflicts.is_empty())
        .collect();
    Ok((parts, Some(fetched)))
}

/// Register the catalog's views and run its rules, as one dependency
/// graph, a few at once: a view starts when the views it reads are
/// registered, a rule when its views are. Each query is mostly serial, so
/// two or three running side by side keep the cores busier than one query
/// split across them. `rule_index[i]` is the label rule `i`'s rows carry.
async fn evaluate(
    ctx: &SessionContext,
    catalog: &Catalog,
    rule_index: &[u32],
    materialize: &Materialize,
    progress: &indicatif::ProgressBar,
    strings: &Arc<Mutex<Interner>>,
) -> Evaluated {
    use futures::stream::{FuturesUnordered, StreamExt};
    let deps = Dependencies::of(ctx, catalog);
    let mut view_results: Vec<Option<datafusion::error::Result<()>>> =
        catalog.views.iter().map(|_| None).collect();
    let mut rule_results: Vec<Option<datafusion::error::Result<Vec<FindingRow>>>> =
        catalog.rules.iter().map(|_| None).collect();
    // Views first (rules wait on them), each list in catalog order.
    let mut pending: Vec<Job> = (0..catalog.views.len())
        .map(Job::View)
        .chain((0..catalog.rules.len()).map(Job::Rule))
        .collect();
    let mut running = FuturesUnordered::new();
    let limit = ctx.runtime_env().memory_pool.memory_limit();
    let at_once = jobs_at_once(matches!(limit, MemoryLimit::Finite(_)));
    loop {
        while running.len() < at_once {
            let ready = pending
                .iter()
                .position(|job| deps.of_job(*job).iter().all(|&v| view_results[v].is_some()));
            let Some(ready) = ready else { break };
            let job = pending.remove(ready);
            // A view it reads failed: it would only fail with "table not
            // found"; say which view instead.
            let failed_view = deps
                .of_job(job)
                .iter()
                .find(|&&v| matches!(view_results[v], Some(Err(_))));
            if let Some(&v) = failed_view {
                let e = DataFusionError::Plan(format!(
                    "not run: it reads view {}, which failed",
                    catalog.views[v].name
                ));
                match job {
                    Job::View(i) => view_results[i] = Some(Err(e)),
                    Job::Rule(i) => {
                        progress.inc(1);
                        rule_results[i] = Some(Err(e));
                    }
                }
                continue;
            }
            // A task of its own: a one-partition query runs entirely in the
            // task that polls it, so jobs polled together would share a core.
            let ctx = ctx.clone();
            let limit = catalog.timeout;
            let handle = match job {
                Job::View(i) => {
                    let view = catalog.views[i].clone();
                    let materialize = materialize.clone();
                    tokio::spawn(async move {
                        register_view(&ctx, &view, &materialize).await?;
                        Ok(Vec::new())
                    })
                }
                Job::Rule(i) => {
                    let rule = catalog.rules[i].clone();
                    let index = rule_index[i];
                    let strings = Arc::clone(strings);
                    tokio::spawn(async move {
                        let started = std::time::Instant::now();
                        let result = run_one(&ctx, &rule, index, &strings).await;
                        crate::progress::timing("rule", &rule.meta.id, started);
                        result
                    })
                }
            };
            let mut handle = AbortOnDrop(handle);
            running.push(async move { (job, outcome(limit, &mut handle).await) });
        }
        // Nothing runs and nothing can start: what is left waits on a cycle
        // of views.
        let Some((job, outcome)) = running.next().await else {
            break;
        };
        match job {
            Job::View(i) => view_results[i] = Some(outcome.map(drop)),
            Job::Rule(i) => {
                progress.set_message(catalog.rules[i].meta.id.clone());
                progress.inc(1);
                rule_results[i] = Some(outcome);
            }
        }
    }
    drop(running);
    let cycle = || DataFusionError::Plan("it reads views that read each other in a cycle".into());
    let mut errors = Vec::new();
    for (v, result) in catalog.views.iter().zip(view_results) {
        if let Err(e) = result.unwrap_or_else(|| Err(cycle())) {
            errors.push((v.file.clone(), with_hint(&e.to_string())));
        }
    }
    let mut rows = Vec::new();
    for (rule, result) in catalog.rules.iter().zip(rule_results) {
        match result.unwrap_or_else(|| Err(cycle())) {
            // The first rule with rows hands its vector over (no copy).
            Ok(added) if rows.is_empty() => rows = added,
            Ok(mut added) => rows.append(&mut added),
            Err(e) => errors.push((rule.meta.id.clone(), with_hint(&e.to_string()))),
        }
    }
    Evaluated { rows, errors }
}

/// A query error with what to do when the cause is a full disk (spill
/// files and in-place views are written to the spill directory).
fn with_hint(e: &str) -> String {
    if e.contains("os error 28") || e.contains("No space left on device") {
        format!(
            "{e}; the disk holding the spill directory is full: free space there or choose \
             another with --spill-dir"
        )
    } else {
        e.to_string()
    }
}

/// The part of `catalog` that reads `ev` (directly or through views): what
/// a reading of later versions can change. Every view stays (the rules
/// kept may read any); each rule kept keeps its label, returned beside.
fn reading_ev(ctx: &SessionContext, catalog: &Catalog) -> (Catalog, Vec<u32>) {
    let state = ctx.state();
    let dialect = state.config().options().sql_parser.dialect;
    let tables = |sql: &str| -> Vec<String> {
        let Ok(statement) = state.sql_to_statement(sql, &dialect) else {
            // Unreadable: run it, and let it report its error.
            return vec!["ev".into()];
        };
        let refs = state
            .resolve_table_references(&statement)
            .unwrap_or_default();
        refs.iter().map(|t| t.table().to_string()).collect()
    };
    let view_tables: Vec<Vec<String>> = catalog.views.iter().map(|v| tables(&v.sql)).collect();
    let mut reading: std::collections::HashSet<String> = ["ev".to_string()].into();
    // Views that read ev, or a view that does, until nothing changes.
    loop {
        let before = reading.len();
        for (v, read) in catalog.views.iter().zip(&view_tables) {
            if read.iter().any(|t| reading.contains(t)) {
                reading.insert(v.name.clone());
            }
        }
        if reading.len() == before {
            break;
        }
    }
    let mut kept = catalog.clone();
    let mut labels = Vec::new();
    kept.rules.clear();
    for (i, rule) in catalog.rules.iter().enumerate() {
        if tables(&rule.sql).iter().any(|t| reading.contains(t)) {
            kept.rules.push(rule.clone());
            labels.push(i as u32);
        }
    }
    (kept, labels)
}

/// One rule's rows, turned into compact rows batch by batch as the query
/// streams them (a rule with a million findings is never held as batches).
async fn run_one(
    ctx: &SessionContext,
    rule: &catalog::Rule,
    index: u32,
    strings: &Mutex<Interner>,
) -> datafusion::error::Result<Vec<FindingRow>> {
    use futures::StreamExt;
    let mut batches = crate::read_only::plan(ctx, &rule.sql)
        .await?
        .execute_stream()
        .await?;
    let mut rows = Vec::new();
    while let Some(b) = batches.next().await {
        let mut strings = strings.lock().unwrap_or_else(|e| e.into_inner());
        add_rows(&b?, rule, index, &mut strings, &mut rows)?;
    }
    Ok(rows)
}
