//! The servers of a cluster: `hvaudit scheduler` and `hvaudit executor`,
//! Ballista's own with the JSON functions added (for ad hoc SQL over
//! `payload`) and a scheduler that cancels its running jobs before it
//! removes a lost executor; and both started inside this process, for the
//! tests and for trying the cluster path on one machine.

use super::client::scheduler_address;
use datafusion::error::Result;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// A session state with the JSON functions, for our scheduler and executors;
/// an executor's, under its memory `limit`, also with the functions that
/// could build more than it refusing to (`amplifying_functions`).
fn state_with_json_functions(limit: Option<u64>) -> Result<datafusion::execution::SessionState> {
    let mut ctx = SessionContext::new_with_config_rt(SessionConfig::new(), object_stores()?);
    datafusion_functions_json::register_all(&mut ctx)?;
    crate::amplifying_functions::register(&ctx, limit)?;
    Ok(ctx.state())
}

/// A runtime whose object-store registry makes the s3://, gs://, az:// and
/// https:// stores on demand from this process's environment: the
/// scheduler lists the tables' objects and the executors read them.
fn object_stores() -> Result<Arc<datafusion::execution::runtime_env::RuntimeEnv>> {
    datafusion::execution::runtime_env::RuntimeEnvBuilder::new()
        .with_object_store_registry(Arc::new(crate::object_storage::UrlStores::default()))
        .build_arc()
}

/// Run a scheduler on `bind` until the process ends.
pub async fn run_scheduler(bind: SocketAddr, external_host: Option<String>) -> anyhow::Result<()> {
    run_scheduler_with(bind, external_host, EXECUTOR_TIMEOUT).await
}

/// How long a scheduler waits for an executor's heartbeat before it counts
/// the executor as lost: Ballista's default, three of a stock executor's
/// 60 s heartbeats (ours beat every `HEARTBEAT`).
pub const EXECUTOR_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(180);

/// How often `hvaudit executor` tells the scheduler it is alive.
const HEARTBEAT: u64 = 5;

/// Run a scheduler that counts an executor as lost after `executor_timeout`
/// without a heartbeat.
///
/// It never re-runs work for a job it has started (docs/cluster.md, "When an
/// executor dies"): Ballista 55 re-runs a stage whose input was lost without
/// withdrawing the output that the stage's earlier attempt had already
/// passed on, so the job's rows of re-run tasks reach the client twice. So
/// a failed task fails its stage and a failed stage (a `FetchPartitionError`
/// among them) fails its job (`task_max_failures` and `stage_max_failures`
/// 1), and before an executor is removed every running job is cancelled
/// (`CancelOnLoss`): the client sees those jobs fail and reports the audit
/// as disturbed. Jobs started afterwards run on the executors that are left.
pub async fn run_scheduler_with(
    bind: SocketAddr,
    external_host: Option<String>,
    executor_timeout: std::time::Duration,
) -> anyhow::Result<()> {
    use ballista_scheduler::cluster::BallistaCluster;
    use ballista_scheduler::config::SchedulerConfig;
    let timeout = executor_timeout.as_secs().max(2);
    let mut config = SchedulerConfig {
        bind_host: bind.ip().to_string(),
        bind_port: bind.port(),
        external_host: external_host.unwrap_or_else(|| bind.ip().to_string()),
        task_max_failures: 1,
        stage_max_failures: 1,
        executor_timeout_seconds: timeout,
        expire_dead_executor_interval_seconds: (timeout / 4).clamp(1, 15),
        no_executors_grace_period_seconds: timeout,
        ..Default::default()
    };
    let json = state_with_json_functions(None)?;
    config.override_session_builder = Some(Arc::new(move |cfg: SessionConfig| {
        Ok(SessionStateBuilder::new_from_existing(json.clone())
            .with_config(cfg)
            .build())
    }));
    config.validate()?;
    let memory = BallistaCluster::new_from_config(&config).await?;
    let scheduler = Arc::new(std::sync::OnceLock::new());
    let state = CancelOnLoss {
        inner: memory.cluster_state(),
        scheduler: Arc::clone(&scheduler),
    };
    let cluster = BallistaCluster::new(Arc::new(state), memory.job_state());
    let server = ballista_scheduler::scheduler_process::create_scheduler::<
        LogicalPlanNode,
        PhysicalPlanNode,
    >(cluster, Arc::new(config))
    .await?;
    let _ = scheduler.set(server.clone());
    eprintln!("hvaudit: Ballista scheduler listening on {bind} (df://{bind})");
    ballista_scheduler::scheduler_process::start_grpc_service(bind, server).await?;
    Ok(())
}

type Scheduler =
    ballista_scheduler::scheduler_server::SchedulerServer<LogicalPlanNode, PhysicalPlanNode>;

/// The scheduler's executors and free task slots (Ballista's in-memory
/// state), with one change: an executor is removed only after every running
/// job has been cancelled.
///
/// The cancellations are queued on the scheduler's event loop before the
/// removal queues `ExecutorLost`, so the jobs end while their execution
/// graphs are intact: their running tasks are stopped and their slots given
/// back. Handled the other way round, `ExecutorLost` rolls back the stages
/// that read the lost executor's output (whose re-run delivers rows twice)
/// and loses the slots of the surviving executors' tasks in those stages, so
/// the executors left can run nothing: the jobs stall (docs/cluster.md).
struct CancelOnLoss {
    inner: Arc<dyn ballista_scheduler::cluster::ClusterState>,
    scheduler: Arc<std::sync::OnceLock<Scheduler>>,
}

mod delegate {
    use super::CancelOnLoss;
    use ballista_core::JobId;
    use ballista_core::error::Result;
    use ballista_core::serde::protobuf::ExecutorHeartbeat;
    use ballista_core::serde::scheduler::{ExecutorData, ExecutorMetadata};
    use ballista_scheduler::cluster::{
        BoundTask, ClusterState, ClusterStateEventStream, ExecutorSlot,
    };
    use ballista_scheduler::config::TaskDistributionPolicy;
    use ballista_scheduler::state::task_manager::JobInfoCache;
    use std::collections::{HashMap, HashSet};
    use std::sync::Arc;

    #[async_trait::async_trait]
    impl ClusterState for CancelOnLoss {
        async fn init(&self) -> Result<()> {
            self.inner.init().await
        }

        async fn bind_schedulable_tasks(
            &self,
            distribution: TaskDistributionPolicy,
            active_jobs: Arc<HashMap<JobId, JobInfoCache>>,
            executors: Option<HashSet<String>>,
        ) -> Result<Vec<BoundTask>> {
            self.inner
                .bind_schedulable_tasks(distribution, active_jobs, executors)
                .await
        }

        async fn unbind_tasks(&self, executor_slots: Vec<ExecutorSlot>) -> Result<()> {
            self.inner.unbind_tasks(executor_slots).await
        }

        async fn register_executor(
            &self,
            metadata: ExecutorMetadata,
            spec: ExecutorData,
        ) -> Result<()> {
            self.inner.register_executor(metadata, spec).await
        }

        async fn save_executor_metadata(&self, metadata: ExecutorMetadata) -> Result<()> {
            self.inner.save_executor_metadata(metadata).await
        }

        async fn get_executor_metadata(&self, executor_id: &str) -> Result<ExecutorMetadata> {
            self.inner.get_executor_metadata(executor_id).await
        }

        async fn registered_executor_metadata(&self) -> Vec<ExecutorMetadata> {
            self.inner.registered_executor_metadata().await
        }

        async fn save_executor_heartbeat(&self, heartbeat: ExecutorHeartbeat) -> Result<()> {
            self.inner.save_executor_heartbeat(heartbeat).await
        }

        async fn remove_executor(&self, executor_id: &str) -> Result<()> {
            // Only for an executor that was there (removals can repeat).
            let known = self.inner.get_executor_heartbeat(executor_id).is_some()
                || self.inner.get_executor_metadata(executor_id).await.is_ok();
            if let Some(scheduler) = self.scheduler.get().filter(|_| known) {
                let running = scheduler.state.task_manager.get_running_job_cache();
                for job_id in running.keys() {
                    log::warn!(
                        "executor {executor_id} lost: cancelling job {job_id} (a re-run of \
                         its lost work could deliver rows twice)"
                    );
                    if let Err(e) = scheduler.cancel_job(job_id.clone()).await {
                        log::error!("cannot cancel job {job_id}: {e}");
                    }
                }
            }
            self.inner.remove_executor(executor_id).await
        }

        fn executor_heartbeats(&self) -> HashMap<String, ExecutorHeartbeat> {
            self.inner.executor_heartbeats()
        }

        fn get_executor_heartbeat(&self, executor_id: &str) -> Option<ExecutorHeartbeat> {
            self.inner.get_executor_heartbeat(executor_id)
        }

        async fn cluster_state_events(&self) -> Result<ClusterStateEventStream> {
            self.inner.cluster_state_events().await
        }
    }
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
    let json = state_with_json_functions(opts.memory_limit)?;
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
        // A killed executor is noticed within the scheduler's timeout.
        executor_heartbeat_interval_seconds: HEARTBEAT,
        override_function_registry: Some(Arc::new((&json).into())),
        // Ballista's own runtime, with the object stores of the inputs.
        override_runtime_producer: Some(Arc::new({
            let work_dir = opts.work_dir.as_ref().map(|d| d.to_path_buf());
            move |_| {
                let mut runtime = datafusion::execution::runtime_env::RuntimeEnvBuilder::new()
                    .with_object_store_registry(Arc::new(
                        crate::object_storage::UrlStores::default(),
                    ));
                if let Some(dir) = &work_dir {
                    runtime = runtime.with_temp_file_path(dir.clone());
                }
                runtime.build_arc()
            }
        })),
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
    let url = start_scheduler_in_process(EXECUTOR_TIMEOUT).await?;
    let (_, scheduler_port) = scheduler_address(&url).map_err(anyhow::Error::msg)?;
    for _ in 0..executors {
        let work_dir = tempfile::tempdir()?.keep();
        serve_on_free_ports(2, |ports| {
            run_executor(ExecutorOptions {
                scheduler: ("127.0.0.1".into(), scheduler_port),
                bind_host: "127.0.0.1".into(),
                external_host: Some("127.0.0.1".into()),
                port: ports[0],
                grpc_port: ports[1],
                work_dir: Some(work_dir.clone()),
                vcores,
                memory_limit: None,
            })
        })
        .await?;
    }
    // Registration follows the listeners within a heartbeat's handshake.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    Ok(url)
}

/// A scheduler inside this process on a free 127.0.0.1 port, counting an
/// executor as lost after `executor_timeout` without a heartbeat; returns
/// its `df://` URL once it listens. Same runtime requirement as
/// `start_in_process`.
pub async fn start_scheduler_in_process(
    executor_timeout: std::time::Duration,
) -> anyhow::Result<String> {
    let ports = serve_on_free_ports(1, |ports| {
        let bind: SocketAddr = ([127, 0, 0, 1], ports[0]).into();
        run_scheduler_with(bind, None, executor_timeout)
    })
    .await?;
    Ok(format!("df://127.0.0.1:{}", ports[0]))
}

/// Start `serve` (a server on the `count` ports it is given) as a task and
/// wait until it listens on all of them; returns the ports. A port found
/// free can be taken by another process before the server binds it (tests
/// run side by side): the server then ends, and it is started again on
/// other ports, three times at most, the last error said.
async fn serve_on_free_ports<Serve, Fut>(count: usize, serve: Serve) -> anyhow::Result<Vec<u16>>
where
    Serve: Fn(Vec<u16>) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let ended = |r: Result<anyhow::Result<()>, tokio::task::JoinError>| match r {
        Ok(Err(e)) => e,
        Ok(Ok(())) => anyhow::anyhow!("the server stopped"),
        Err(e) => anyhow::anyhow!("the server's task failed: {e}"),
    };
    let mut last = anyhow::anyhow!("not started");
    for _ in 0..3 {
        let ports = (0..count)
            .map(|_| free_port())
            .collect::<std::io::Result<Vec<u16>>>()?;
        let mut task = tokio::spawn(serve(ports.clone()));
        tokio::select! {
            listening = wait_for_ports(&ports) => {
                listening?;
                // Ended already: what listens there is somebody else.
                if !task.is_finished() {
                    return Ok(ports);
                }
                last = ended(task.await);
            }
            result = &mut task => last = ended(result),
        }
    }
    Err(last.context("an in-process server did not start on free ports, three times"))
}

/// A port nothing listens on now.
pub fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_server_whose_port_was_taken_starts_again_on_others() {
        // The first start fails as a taken port does; the second listens.
        let starts = Arc::new(AtomicUsize::new(0));
        let ports = serve_on_free_ports(1, |ports| {
            let starts = Arc::clone(&starts);
            async move {
                if starts.fetch_add(1, Ordering::SeqCst) == 0 {
                    anyhow::bail!("Address already in use");
                }
                let listener = tokio::net::TcpListener::bind(("127.0.0.1", ports[0])).await?;
                loop {
                    listener.accept().await?;
                }
            }
        })
        .await
        .unwrap();
        assert_eq!(starts.load(Ordering::SeqCst), 2);
        assert!(
            tokio::net::TcpStream::connect(("127.0.0.1", ports[0]))
                .await
                .is_ok()
        );
        // One that never starts says why, after three tries.
        let never = AtomicUsize::new(0);
        let error = serve_on_free_ports(1, |_| {
            never.fetch_add(1, Ordering::SeqCst);
            async { anyhow::bail!("Address already in use") }
        })
        .await
        .unwrap_err();
        assert_eq!(never.load(Ordering::SeqCst), 3);
        assert!(
            format!("{error:#}").contains("Address already in use"),
            "{error:#}"
        );
    }
}
