//! How a run on a cluster ends without a result of its own: it stalls
//! (nothing finished within `--timeout`) or the cluster is disturbed (an
//! executor lost, a task failed). Built with or without the `cluster`
//! feature: an audit's error and `hvaudit sql` name these.

/// A cluster audit during which an executor was lost or a task failed.
#[derive(Debug, thiserror::Error)]
#[error(
    "the cluster at {url} was disturbed during the audit, so there is no report: an executor \
     was lost or a task failed while the rules ran, and Ballista's re-run of the lost work can \
     deliver rows twice; run the audit again once every executor runs (docs/cluster.md, \
     \"When an executor dies\"). Cause: {cause}"
)]
pub struct Disturbed {
    pub url: String,
    pub cause: String,
}

/// `work` on the cluster at `url`, given up after `timeout`: on a cluster
/// without executors, or whose executors are all lost, or with a stuck job,
/// the job stays queued or running and Ballista's client waits forever.
pub async fn within<F: std::future::Future>(
    url: &str,
    timeout: std::time::Duration,
    work: F,
) -> std::result::Result<F::Output, Stalled> {
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| Stalled {
            url: url.to_string(),
            timeout,
        })
}

/// A cluster run that did not finish within its `--timeout`.
#[derive(Debug, thiserror::Error)]
#[error(
    "the cluster at {url} did not finish within {} (--timeout): no executor may have joined \
     the scheduler, all executors may be lost, or a job is stuck; check that `hvaudit executor` \
     processes run and the scheduler's log, then run again (a larger log may need a longer --timeout)",
    humanize(.timeout)
)]
pub struct Stalled {
    pub url: String,
    pub timeout: std::time::Duration,
}

/// The timeout as it was likely written: 90 s, 5 min, 2 h.
pub fn humanize(d: &std::time::Duration) -> String {
    let s = d.as_secs();
    if s == 0 {
        format!("{} ms", d.as_millis())
    } else if s.is_multiple_of(3600) {
        format!("{} h", s / 3600)
    } else if s.is_multiple_of(60) {
        format!("{} min", s / 60)
    } else {
        format!("{s} s")
    }
}

/// Whether a query error on a cluster says that the cluster was disturbed
/// while the job ran, rather than that the query cannot run: Ballista 55's
/// words for a job cancelled (`hvaudit scheduler` cancels the running jobs
/// when it loses an executor), a task or stage that failed as often as the
/// scheduler allows (a `FetchPartitionError` among them: shuffle output
/// lost with its executor), executors lost, and results that cannot be
/// fetched from an executor that is gone.
pub fn disturbance(error: &str) -> bool {
    const SIGNS: [&str; 8] = [
        "failed: Cancelled",
        "times, most recent failure reason",
        "times, fail the stage",
        "FetchPartitionError",
        "FetchFailed",
        "ResultLost",
        "executors were lost",
        "GrpcConnectionError",
    ];
    SIGNS.iter().any(|sign| error.contains(sign))
}
