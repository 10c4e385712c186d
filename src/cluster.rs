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

use crate::InputSummary;
use crate::ingest::inputs::{self, Format, Skipped};
use crate::ingest::parquet::{OwnTable, describe_own};
use crate::ingest::schema::{BAD_LINES, EVENTS, EVIDENCE};
use ballista::prelude::{SessionConfigExt, SessionContextExt};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::DFSchema;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::SessionStateBuilder;
use datafusion::logical_expr::{EmptyRelation, LogicalPlan};
use datafusion::prelude::{DataFrame, SessionConfig, SessionContext};
use std::collections::BTreeMap;
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
    let state = SessionStateBuilder::new()
        .with_default_features()
        .with_config(config)
        .build();
    let mut ctx = SessionContext::remote_with_state(&format!("df://{host}:{port}"), state).await?;
    // After the Ballista upgrade, which resets the function list.
    datafusion_functions_json::register_all(&mut ctx)?;
    Ok(ctx)
}

/// `convert`'s files named on the command line, sorted by table, with the
/// accounting a local read of the same files would report.
#[derive(Debug, Default)]
pub struct ClusterInputs {
    pub tables: BTreeMap<&'static str, Vec<PathBuf>>,
    pub inputs: Vec<InputSummary>,
    pub skipped: Vec<Skipped>,
}

/// Find and describe the Parquet files under `paths`. Each must be
/// `convert`'s output, and files from different convert runs must not
/// share seqs (each shard converted with its own `--shard`).
pub fn scan_inputs(paths: &[PathBuf]) -> anyhow::Result<ClusterInputs> {
    let (found, skipped) = inputs::expand(paths)?;
    let mut out = ClusterInputs {
        skipped,
        ..Default::default()
    };
    let mut ranges: Vec<(Option<String>, (i64, i64), String)> = Vec::new();
    for input in &found {
        if input.format != Format::Parquet {
            anyhow::bail!(
                "{}: a cluster reads Parquet written by `hvaudit convert`, not {}; \
                 convert it first (hvaudit convert LOGS -o DIR) to storage every executor can read",
                input.display,
                input.format.name()
            );
        }
        let file = describe_own(input).map_err(|e| anyhow::anyhow!("{}: {e}", input.display))?;
        // Executors open the files themselves: give them absolute paths.
        let path = std::fs::canonicalize(&input.path)?;
        let table = match file.table {
            OwnTable::Events => "events",
            OwnTable::Evidence => "evidence",
            OwnTable::BadLines => "bad_lines",
        };
        out.tables.entry(table).or_default().push(path);
        if let (Some(seqs), OwnTable::Events | OwnTable::BadLines) = (file.seqs, file.table) {
            ranges.push((file.run.clone(), seqs, input.display.clone()));
        }
        out.inputs.push(file.summary);
    }
    check_seqs_disjoint(&ranges)?;
    Ok(out)
}

/// Seqs identify events in every rule; files of one run never share one,
/// but two runs without distinct `--shard` numbers would.
fn check_seqs_disjoint(ranges: &[(Option<String>, (i64, i64), String)]) -> anyhow::Result<()> {
    for (i, (run_a, (lo_a, hi_a), a)) in ranges.iter().enumerate() {
        for (run_b, (lo_b, hi_b), b) in &ranges[i + 1..] {
            if run_a != run_b && lo_a <= hi_b && lo_b <= hi_a {
                anyhow::bail!(
                    "{a} and {b} come from different convert runs with overlapping seqs; \
                     convert each shard with its own --shard N (0..2047) so events keep distinct seqs"
                );
            }
        }
    }
    Ok(())
}

/// Register the three tables over the files (an empty table when a run
/// wrote none, e.g. no rejected lines).
pub async fn register_tables(ctx: &SessionContext, files: &ClusterInputs) -> Result<()> {
    for (name, schema) in [
        ("events", EVENTS.clone()),
        ("evidence", EVIDENCE.clone()),
        ("bad_lines", BAD_LINES.clone()),
    ] {
        let paths = files.tables.get(name).cloned().unwrap_or_default();
        ctx.deregister_table(name)?;
        if paths.is_empty() {
            let empty = LogicalPlan::EmptyRelation(EmptyRelation {
                produce_one_row: false,
                schema: Arc::new(DFSchema::try_from(schema.as_ref().clone())?),
            });
            ctx.register_table(name, DataFrame::new(ctx.state(), empty).into_view())?;
            continue;
        }
        ctx.register_table(name, Arc::new(listing(&paths, schema)?))?;
    }
    Ok(())
}

fn listing(paths: &[PathBuf], schema: SchemaRef) -> Result<ListingTable> {
    let urls = paths
        .iter()
        .map(|p| {
            let text = p.to_str().ok_or_else(|| {
                DataFusionError::Plan(format!("{}: path is not UTF-8", p.display()))
            })?;
            ListingTableUrl::parse(text)
        })
        .collect::<Result<Vec<_>>>()?;
    let options =
        ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
    let config = ListingTableConfig::new_with_multi_paths(urls)
        .with_listing_options(options)
        .with_schema(schema);
    ListingTable::try_new(config)
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
