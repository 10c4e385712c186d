//! An audit on a cluster: the views' scratch place, the client session
//! and the `--timeout` around the run, and the errors that say the cluster
//! was disturbed while the rules ran. The rules themselves run as in place
//! (`crate::audit`, over the session this gives it).

use super::{Disturbed, Scratch, Stalled, disturbance, within};
use crate::report::model::Report;
use datafusion::prelude::SessionContext;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// An audit's error, as a cluster audit makes and reads it.
pub trait AuditFailure: From<Stalled> + From<Disturbed> {
    /// The views' place or the client session could not be made.
    fn setup(e: anyhow::Error) -> Self;
    /// The query engine's message, when the query engine failed.
    fn engine_message(&self) -> Option<String>;
}

/// Run the rules on the cluster at `url` over `convert`'s Parquet:
/// `rules` over a client session whose views the executors write to a
/// scratch place (in `spill_dir`, or near the first of `inputs`); the
/// report is assembled here. A run that has not finished after `timeout`
/// is given up (`Stalled`), and one during which the cluster was disturbed
/// gives no report (`Disturbed`).
pub async fn audit<E: AuditFailure>(
    url: &str,
    timeout: std::time::Duration,
    spill_dir: Option<&Path>,
    inputs: &[PathBuf],
    rules: impl AsyncFnOnce(SessionContext, Arc<Scratch>) -> Result<Report, E>,
) -> Result<Report, E> {
    let views = Arc::new(super::scratch(spill_dir, inputs).map_err(E::setup)?);
    let run = async {
        let ctx = super::connect(url, inputs).await.map_err(E::setup)?;
        rules(ctx, Arc::clone(&views)).await
    };
    let disturbed = |cause: &str| Disturbed {
        url: url.to_string(),
        cause: cause.chars().take(400).collect(),
    };
    match within(url, timeout, run).await? {
        Ok(report) => match report.rule_errors.iter().find(|(_, e)| disturbance(e)) {
            Some((rule, e)) => Err(disturbed(&format!("{rule}: {e}")).into()),
            None => Ok(report),
        },
        Err(e) => match e.engine_message() {
            Some(message) if disturbance(&message) => Err(disturbed(&message).into()),
            _ => Err(e),
        },
    }
}

/// A client session of the cluster at `url` and a scratch place for what
/// its executors read back (in `spill_dir`, or near the first of
/// `inputs`), made in that order: a later reading's, or a `sql` session's.
pub async fn session(
    url: &str,
    spill_dir: Option<&Path>,
    inputs: &[PathBuf],
) -> anyhow::Result<(SessionContext, Arc<Scratch>)> {
    let ctx = super::connect(url, inputs).await?;
    let scratch = super::scratch(spill_dir, inputs)?;
    Ok((ctx, Arc::new(scratch)))
}
