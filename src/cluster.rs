//! The same audit and SQL on an Apache DataFusion Ballista cluster.
//!
//! The work splits in three: `convert` ingests and normalizes (per shard, on
//! any machine) into Parquet on storage every executor can read; the client
//! here registers those files as the `events`, `evidence` and `bad_lines`
//! tables and plans the same rule SQL, which the cluster executes; the
//! report is rendered on the client. The rules use built-in functions only,
//! so stock scheduler and executor binaries run them. `hvaudit scheduler`
//! and `hvaudit executor` are the same servers with the JSON functions added,
//! for ad hoc SQL over `payload` on the cluster.

pub use crate::ingest::in_place::{ParquetInputs, register_tables, scan_inputs};
use ballista::prelude::{SessionConfigExt, SessionContextExt};
use datafusion::error::Result;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use std::net::SocketAddr;
use std::path::PathBuf;
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

/// A session state with the JSON functions, for our scheduler and executors.
fn state_with_json_functions() -> Result<datafusion::execution::SessionState> {
    let mut ctx = SessionContext::new();
    datafusion_functions_json::register_all(&mut ctx)?;
    Ok(ctx.state())
}

/// Run a scheduler on `bind` until the process ends.
pub async fn run_scheduler(bind: SocketAddr, external_host: Option<String>) -> anyhow::Result<()> {
    use ballista_scheduler::cluster::BallistaCluster;
    use ballista_scheduler::config::SchedulerConfig;
    let mut config = SchedulerConfig {
        bind_host: bind.ip().to_string(),
        bind_port: bind.port(),
        external_host: external_host.unwrap_or_else(|| bind.ip().to_string()),
        ..Default::default()
    };
    let json = state_with_json_functions()?;
    config.override_session_builder = Some(Arc::new(move |cfg: SessionConfig| {
        Ok(SessionStateBuilder::new_from_existing(json.clone())
            .with_config(cfg)
            .build())
    }));
    let cluster = BallistaCluster::new_from_config(&config).await?;
    eprintln!("hvaudit: Ballista scheduler listening on {bind} (df://{bind})");
    ballista_scheduler::scheduler_process::start_server(cluster, bind, Arc::new(config)).await?;
    Ok(())
}

/// What an executor needs to join a cluster.
#[derive(Debug, Clone)]
pub struct ExecutorOptions {
    pub scheduler: (String, u16),
    pub bind_host: String,
    pub external_host: Option<String>,
    pub port: u16,
    pub grpc_port: u16,
    pub work_dir: Option<PathBuf>,
    pub vcores: usize,
    pub memory_limit: Option<u64>,
}

/// Run an executor until the process ends.
pub async fn run_executor(opts: ExecutorOptions) -> anyhow::Result<()> {
    use ballista_executor::executor_process::{ExecutorProcessConfig, start_executor_process};
    let json = state_with_json_functions()?;
    let config = ExecutorProcessConfig {
        scheduler_host: opts.scheduler.0.clone(),
        scheduler_port: opts.scheduler.1,
        bind_host: opts.bind_host.clone(),
        external_host: opts.external_host.clone(),
        port: opts.port,
        grpc_port: opts.grpc_port,
        work_dir: opts
            .work_dir
            .as_ref()
            .map(|d| d.to_string_lossy().into_owned()),
        vcores: opts.vcores,
        memory_pool_size: opts.memory_limit,
        // Wait for a scheduler that starts at the same time.
        scheduler_connect_timeout_seconds: 30,
        override_function_registry: Some(Arc::new((&json).into())),
        ..Default::default()
    };
    eprintln!(
        "hvaudit: Ballista executor on {}:{} joining scheduler {}:{}",
        opts.bind_host, opts.port, opts.scheduler.0, opts.scheduler.1
    );
    start_executor_process(Arc::new(config)).await?;
    Ok(())
}

/// A scheduler and `executors` executors inside this process, the same
/// servers as `hvaudit scheduler` and `hvaudit executor`, on free 127.0.0.1
/// ports; returns the `df://` URL once every executor has joined. For tests
/// and for trying the cluster path on one machine. Must be called within a
/// multi-threaded Tokio runtime that outlives the cluster's use.
pub async fn start_in_process(executors: usize, vcores: usize) -> anyhow::Result<String> {
    let free_port = || -> std::io::Result<u16> {
        Ok(std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port())
    };
    let bind: SocketAddr = ([127, 0, 0, 1], free_port()?).into();
    tokio::spawn(run_scheduler(bind, None));
    wait_for_ports(&[bind.port()]).await?;
    let mut ports = Vec::new();
    for _ in 0..executors {
        let work_dir = tempfile::tempdir()?.keep();
        let (port, grpc_port) = (free_port()?, free_port()?);
        ports.extend([port, grpc_port]);
        tokio::spawn(run_executor(ExecutorOptions {
            scheduler: ("127.0.0.1".into(), bind.port()),
            bind_host: "127.0.0.1".into(),
            external_host: Some("127.0.0.1".into()),
            port,
            grpc_port,
            work_dir: Some(work_dir),
            vcores,
            memory_limit: None,
        }));
    }
    wait_for_ports(&ports).await?;
    // Registration follows the listeners within a heartbeat's handshake.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    Ok(format!("df://127.0.0.1:{}", bind.port()))
}

/// Wait (up to 60 s) until something listens on every port.
async fn wait_for_ports(ports: &[u16]) -> anyhow::Result<()> {
    for port in ports {
        let mut tries = 0;
        while tokio::net::TcpStream::connect(("127.0.0.1", *port))
            .await
            .is_err()
        {
            tries += 1;
            if tries > 600 {
                anyhow::bail!("nothing listens on 127.0.0.1:{port} after 60 s");
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
    Ok(())
}
