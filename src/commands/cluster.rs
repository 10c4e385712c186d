//! `hvaudit scheduler` and `hvaudit executor`: Ballista's servers with the
//! JSON functions added (see src/cluster/servers.rs).

use crate::cli::{ExecutorArgs, SchedulerArgs};
use hvaudit::cluster::{self, ExecutorOptions};

pub fn scheduler(args: SchedulerArgs) -> anyhow::Result<u8> {
    init_logging();
    serve(cluster::run_scheduler(args.bind, args.external_host))
}

pub fn executor(args: ExecutorArgs) -> anyhow::Result<u8> {
    init_logging();
    let url = if args.scheduler.starts_with("df://") {
        args.scheduler.clone()
    } else {
        format!("df://{}", args.scheduler)
    };
    let scheduler = cluster::scheduler_address(&url)
        .map_err(|_| anyhow::anyhow!("--scheduler {:?}: expected HOST:PORT", args.scheduler))?;
    serve(cluster::run_executor(ExecutorOptions {
        scheduler,
        bind_host: args.bind_host,
        external_host: args.external_host,
        port: args.port,
        grpc_port: args.grpc_port,
        work_dir: args.work_dir,
        vcores: args.vcores,
        memory_limit: args.memory_limit,
    }))
}

/// Ballista logs through `log`; RUST_LOG picks the level (default info).
fn init_logging() {
    let env = env_logger::Env::default().default_filter_or("info");
    let _ = env_logger::Builder::from_env(env).try_init();
}

fn serve(server: impl std::future::Future<Output = anyhow::Result<()>>) -> anyhow::Result<u8> {
    hvaudit::audit::block_on(server)?;
    Ok(0)
}
