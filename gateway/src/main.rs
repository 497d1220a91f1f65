//! `portcullis-gateway`: runs one gateway replica.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use portcullis_gateway::Config;
use serde::Serialize;

#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser, Serialize)]
#[command(
    name = "portcullis-gateway",
    version,
    about = "Runs a Portcullis gateway replica."
)]
struct Args {
    /// TOML configuration file.
    #[arg(long)]
    #[serde(skip)]
    config: Option<PathBuf>,
    /// Control-plane URL (default http://127.0.0.1:7700).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    control_plane_url: Option<String>,
    /// Deployment token (svc_dt_…); prefer PORTCULLIS_TOKEN so it stays out of `ps`.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<String>,
    /// Address to listen on (default 127.0.0.1:7780; port 0 picks a free port).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    listen: Option<SocketAddr>,
    /// Data directory for the last-known-good snapshot.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    data_dir: Option<PathBuf>,
    /// The URL agents reach this gateway at.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    public_url: Option<String>,
    /// PEM certificate chain for TLS.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    tls_cert: Option<PathBuf>,
    /// PEM private key for TLS.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    tls_key: Option<PathBuf>,
    /// redis://… to share spend counters with the deployment's other replicas.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    spend_store: Option<String>,
    /// Log format: text or json.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    log_format: Option<String>,
    /// Use this gateway's own AWS and Google identity for Bedrock and Vertex models whose
    /// auth method is `none` (the default credential chain, GOOGLE_APPLICATION_CREDENTIALS, the
    /// metadata server). Without it such models answer 403 cloud_identity_unavailable.
    #[arg(long)]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    cloud_identity: bool,
    /// Run the commands of stdio tool connections (as this gateway's user, with an empty
    /// environment plus the connection's own variables).
    #[arg(long)]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    allow_stdio_tools: bool,
    /// Let upstreams (models, tool servers, token endpoints) be at loopback or private
    /// addresses; link-local and cloud metadata addresses stay refused.
    #[arg(long)]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    allow_private_targets: bool,
    /// Refuse calls (503 policy_stale) once the control plane has been unreachable for this
    /// many seconds (default 0: keep serving the last snapshot).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    max_policy_age_secs: Option<u64>,
}

fn main() -> anyhow::Result<()> {
    portcullis_gateway::install_crypto_provider();
    let args = Args::parse();
    let config = Config::load(args.config.as_deref(), &args)?;
    portcullis_shared::telemetry::init(config.log_format);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let running = portcullis_gateway::start(config).await?;
        portcullis_shared::telemetry::shutdown_signal().await;
        tracing::info!("Shutting down; finishing in-flight requests.");
        running.shutdown().await;
        Ok(())
    })
}
