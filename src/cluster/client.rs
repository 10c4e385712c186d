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

/// A client session whose queries run on the cluster at `url`.
pub async fn connect(url: &str) -> anyhow::Result<SessionContext> {
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
