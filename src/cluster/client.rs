//! The client side of a cluster: a session whose queries the scheduler at
//! `df://HOST:PORT` plans and its executors run.

use ballista::prelude::{SessionConfigExt, SessionContextExt};
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use std::sync::Arc;

/// The scheduler address of a `df://HOST:PORT` URL, checked.
pub fn scheduler_address(url: &str) -> std::result::Result<(String, u16), String> {
    let usage = || {
        format!("--cluster {url:?}: expected df://HOST:PORT, the address of a Ballista scheduler")
    };
    let rest = url.strip_prefix("df://").ok_or_else(usage)?;
    let rest = rest.trim_end_matches('/');
    let (host, port) = rest.rsplit_once(':').ok_or_else(usage)?;
    let port: u16 = port.parse().map_err(|_| usage())?;
    if host.is_empty() {
        return Err(usage());
    }
    Ok((host.to_string(), port))
}

/// How a cluster plans the queries over a store of `bytes` of Parquet
/// (None: not known, as for objects): one partition per 128 MiB, 1 to 16,
/// and hash joins up to 1 GiB. Ballista's defaults (16 partitions, sort-merge
/// joins even where a side is small) made the 1 GB log's audit of its 195 MB
/// store take 43 s on two one-slot executors; with 2 partitions and hash
/// joins, 21 s (docs/cluster.md). Past 1 GiB the sort-merge joins stay:
/// they spill where a hash join would fail an executor's memory limit.
/// `HVAUDIT_SESSION_SETTINGS` overrides both.
fn plan_settings(config: SessionConfig, bytes: Option<u64>) -> SessionConfig {
    const PER_PARTITION: u64 = 128 << 20;
    const HASH_JOINS_UP_TO: u64 = 1 << 30;
    let Some(bytes) = bytes else {
        return config;
    };
    let partitions = bytes.div_ceil(PER_PARTITION).clamp(1, 16) as usize;
    let mut config = config.with_target_partitions(partitions);
    config.options_mut().optimizer.prefer_hash_join = bytes <= HASH_JOINS_UP_TO;
    config
}

/// The bytes of the local files under `inputs`, or None when one is an
/// object's URL or cannot be read.
fn stored_bytes(inputs: &[std::path::PathBuf]) -> Option<u64> {
    let mut total = 0u64;
    for input in inputs {
        if input.to_str().is_some_and(crate::object_storage::is_url) {
            return None;
        }
        for entry in walkdir::WalkDir::new(input) {
            let entry = entry.ok()?;
            if entry.file_type().is_file() {
                total += entry.metadata().ok()?.len();
            }
        }
    }
    Some(total)
}

/// A client session whose queries run on the cluster at `url`, planned for
/// the store at `inputs`.
pub async fn connect(url: &str, inputs: &[std::path::PathBuf]) -> anyhow::Result<SessionContext> {
    let (host, port) = scheduler_address(url).map_err(anyhow::Error::msg)?;
    // Fail fast with a clear message when nothing listens there.
    let reachable = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        tokio::net::TcpStream::connect((host.as_str(), port)),
    )
    .await;
    if !matches!(reachable, Ok(Ok(_))) {
        anyhow::bail!(
            "no Ballista scheduler answers at {host}:{port}; start one (`hvaudit scheduler`) \
             or check --cluster"
        );
    }
    // Ballista 55's adaptive planner (its default) can loop forever in the
    // scheduler looking for a runnable stage of a multi-join rule plan, and
    // the job never ends; the static planner runs the same plans reliably.
    let config = SessionConfig::new_with_ballista()
        .with_information_schema(true)
        .with_ballista_adaptive_query_planner(false);
    let config = plan_settings(config, stored_bytes(inputs));
    // Sent to the scheduler with every job, as all of the session's settings.
    let config = crate::engine::with_extra_settings(config)?;
    let state = SessionStateBuilder::new()
        .with_default_features()
        .with_config(config)
        .build();
    let mut ctx = SessionContext::remote_with_state(&format!("df://{host}:{port}"), state).await?;
    // After the Ballista upgrade, which resets the function list.
    datafusion_functions_json::register_all(&mut ctx)?;
    // Ballista prefers sort-merge joins; the client optimizes the plan it
    // sends, so the key casts reach any scheduler.
    ctx.add_optimizer_rule(Arc::new(crate::engine::SortableJoinKeys));
    Ok(ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_follow_the_store_and_hash_joins_stop_at_a_gibibyte() {
        let planned = |bytes| {
            let c = plan_settings(SessionConfig::new_with_ballista(), bytes);
            (
                c.target_partitions(),
                c.options().optimizer.prefer_hash_join,
            )
        };
        assert_eq!(planned(Some(0)), (1, true));
        assert_eq!(planned(Some(195 << 20)), (2, true));
        assert_eq!(planned(Some(1 << 30)), (8, true));
        assert_eq!(planned(Some((1 << 30) + 1)), (9, false));
        assert_eq!(planned(Some(40 << 30)), (16, false));
        // Not known (objects): Ballista's own.
        let ballista = SessionConfig::new_with_ballista();
        assert_eq!(
            planned(None),
            (
                ballista.target_partitions(),
                ballista.options().optimizer.prefer_hash_join
            )
        );
    }
}
