//! `portcullis up`: the control plane (SQLite in the data dir) and one gateway in one process.
//! The first start bootstraps the `default` workspace and gateway and an admin key
//! (`DATA_DIR/admin.key`); every start writes `DATA_DIR/endpoints.json`.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use portcullis_controlplane::bootstrap::write_private;
use portcullis_controlplane::store::{workspaces, Store};
use portcullis_shared::keys;
use portcullis_shared::telemetry::{self, LogFormat};
use serde_json::json;

#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// Data directory: database, keys, gateway state.
    #[arg(long, default_value = ".portcullis")]
    pub data_dir: PathBuf,
    /// Control-plane address (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:7700")]
    pub control_listen: SocketAddr,
    /// Gateway address (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:7780")]
    pub gateway_listen: SocketAddr,
    /// Allow webhook deliveries to plain-http loopback and private addresses.
    #[arg(long)]
    pub allow_private_webhook_targets: bool,
    /// Allow every outbound fetch (models, tool servers, OAuth, webhooks) to reach loopback
    /// and private addresses; link-local and cloud metadata addresses stay refused.
    #[arg(long, env = "PORTCULLIS_ALLOW_PRIVATE_TARGETS")]
    pub allow_private_targets: bool,
    /// Allow tool connections that run a local command (stdio) on this machine; creating one
    /// still needs an admin key.
    #[arg(long, env = "PORTCULLIS_ALLOW_STDIO_TOOLS")]
    pub allow_stdio_tools: bool,
    /// Log format: text or json.
    #[arg(long, default_value = "text")]
    pub log_format: String,
    /// Let Bedrock and Vertex models with auth method `none` use this machine's own AWS and
    /// Google identity (the default credential chain, GOOGLE_APPLICATION_CREDENTIALS, the
    /// metadata server).
    #[arg(long, env = "PORTCULLIS_CLOUD_IDENTITY")]
    pub cloud_identity: bool,
}

const DEPLOYMENT: &str = "embedded";

/// Reuses the embedded gateway's deployment token, or creates one (the old row, if its token
/// was lost, is replaced).
async fn deployment_token(
    store: &Store,
    workspace_id: &str,
    data_dir: &Path,
) -> anyhow::Result<(String, String)> {
    let path = data_dir.join("gateway.token");
    let mut tx = store.write(workspace_id).await?;
    if let Ok(token) = std::fs::read_to_string(&path) {
        let token = token.trim().to_string();
        if let Some(row) = workspaces::deployment_by_hash(tx.conn(), &keys::hash(&token)).await? {
            return Ok((row.id, token));
        }
    }
    for row in workspaces::list_deployments(tx.conn(), workspace_id).await? {
        if row.name == DEPLOYMENT {
            workspaces::delete_deployment(tx.conn(), workspace_id, &row.id).await?;
        }
    }
    let (row, token) =
        portcullis_controlplane::api::new_deployment(workspace_id, DEPLOYMENT, "http://127.0.0.1");
    workspaces::insert_deployment(tx.conn(), &row).await?;
    write_private(&path, &format!("{token}\n"))
        .with_context(|| format!("writing {}", path.display()))?;
    tx.commit().await?;
    Ok((row.id, token))
}

fn reachable(addr: SocketAddr) -> String {
    if addr.ip().is_unspecified() {
        format!("http://127.0.0.1:{}", addr.port())
    } else {
        format!("http://{addr}")
    }
}

pub async fn run(args: UpArgs) -> anyhow::Result<()> {
    let log_format = match args.log_format.as_str() {
        "json" => LogFormat::Json,
        "text" => LogFormat::Text,
        other => anyhow::bail!("--log-format must be text or json, not {other}"),
    };
    telemetry::init(log_format);
    portcullis_shared::private_files::private_dir(&args.data_dir)
        .with_context(|| format!("creating {}", args.data_dir.display()))?;
    let cp_config = portcullis_controlplane::Config {
        listen: args.control_listen,
        data_dir: args.data_dir.clone(),
        database_url: None,
        master_key: std::env::var("PORTCULLIS_MASTER_KEY").ok(),
        allow_private_webhook_targets: args.allow_private_webhook_targets,
        allow_private_targets: args.allow_private_targets,
        allow_stdio_tools: args.allow_stdio_tools,
        log_format,
        ..portcullis_controlplane::Config::default()
    };
    let cp = portcullis_controlplane::start(cp_config).await?;
    let boot = cp.bootstrap.clone();
    boot.announce();
    let store = cp.app.store.clone();
    let (deployment_id, token) =
        deployment_token(&store, &boot.workspace_id, &args.data_dir).await?;

    let gw_config = portcullis_gateway::Config {
        listen: args.gateway_listen,
        control_plane_url: reachable(cp.addr),
        token,
        data_dir: args.data_dir.join("gateway"),
        log_format,
        cloud_identity: args.cloud_identity,
        allow_stdio_tools: args.allow_stdio_tools,
        allow_private_targets: args.allow_private_targets,
        ..portcullis_gateway::Config::default()
    };
    let gw = portcullis_gateway::start(gw_config).await?;
    let gateway_base = reachable(gw.addr);
    let mut tx = store.write(&boot.workspace_id).await?;
    workspaces::set_deployment_url(tx.conn(), &deployment_id, &gateway_base).await?;
    tx.commit().await?;

    let endpoints = json!({
        "control_url": reachable(cp.addr),
        "gateway_base_url": gateway_base,
        "workspace_id": boot.workspace_id,
        "default_gateway_id": boot.default_gateway_id,
    });
    let path = args.data_dir.join("endpoints.json");
    std::fs::write(&path, serde_json::to_string_pretty(&endpoints)?)
        .with_context(|| format!("writing {}", path.display()))?;
    tracing::info!(control_url = %reachable(cp.addr), gateway_base_url = %gateway_base, "Portcullis is up.");
    if std::io::stdout().is_terminal() {
        println!("Portcullis is up.");
        println!("  control plane:   {}", reachable(cp.addr));
        println!(
            "  default gateway: {gateway_base}/gateways/{}",
            boot.default_gateway_id
        );
        println!("  admin key file:  {}", boot.admin_key_path.display());
    }

    telemetry::shutdown_signal().await;
    tracing::info!("Shutting down.");
    gw.shutdown().await;
    cp.shutdown().await
}
