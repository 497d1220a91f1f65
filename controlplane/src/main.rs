//! `portcullis-controlplane`: runs the control plane alone.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use mimalloc::MiMalloc;
use portcullis_controlplane::config::{Config, LogFormat};
use serde::Serialize;

#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

#[derive(Debug, Parser, Serialize)]
#[command(
    name = "portcullis-controlplane",
    version,
    about = "Runs the Portcullis control plane."
)]
struct Args {
    /// TOML configuration file.
    #[arg(long)]
    #[serde(skip)]
    config: Option<PathBuf>,
    /// Address to listen on (default 127.0.0.1:7700; port 0 picks a free port).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    listen: Option<SocketAddr>,
    /// Data directory (default ./.portcullis).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    data_dir: Option<PathBuf>,
    /// PEM certificate chain for HTTPS (with --tls-key).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    tls_cert: Option<PathBuf>,
    /// PEM private key for HTTPS.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    tls_key: Option<PathBuf>,
    /// PostgreSQL URL; SQLite in the data dir when omitted.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    database_url: Option<String>,
    /// Allow webhook deliveries to plain-http loopback and private addresses.
    #[arg(long)]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    allow_private_webhook_targets: bool,
    /// Allow every outbound fetch (webhooks, OAuth, client metadata documents, tool servers)
    /// to reach loopback and private addresses; link-local and cloud metadata stay refused.
    #[arg(long)]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    allow_private_targets: bool,
    /// Allow tool connections that run a local command (stdio) on the gateways; creating
    /// one still needs the admin-only permission tools.stdio.
    #[arg(long)]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    allow_stdio_tools: bool,
    /// Log format.
    #[arg(long, value_enum)]
    #[serde(skip_serializing_if = "Option::is_none")]
    log_format: Option<LogFormatArg>,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
enum LogFormatArg {
    Text,
    Json,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let config = Config::load(args.config.as_deref(), &args)?;
    portcullis_shared::telemetry::init(config.log_format);
    if config.log_format == LogFormat::Json {
        tracing::debug!("JSON logs enabled.");
    }
    let running = portcullis_controlplane::start(config).await?;
    running.bootstrap.announce();
    portcullis_shared::telemetry::shutdown_signal().await;
    tracing::info!("Shutting down.");
    running.shutdown().await
}
