//! Start-up configuration: defaults ← TOML file ← `PORTCULLIS_*` environment ← flags.
//! Unknown keys are errors.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

pub use portcullis_shared::telemetry::LogFormat;
use serde::{Deserialize, Serialize};

#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address the API listens on; port 0 picks a free port.
    pub listen: SocketAddr,
    /// Holds the SQLite database, `admin.key` and `master.key`.
    pub data_dir: PathBuf,
    /// PEM certificate chain and key for HTTPS; plain HTTP when absent.
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// `postgres://…` to use PostgreSQL; SQLite in the data dir otherwise.
    pub database_url: Option<String>,
    /// Base64 of 32 bytes; otherwise `master.key` in the data dir (created on first start).
    pub master_key: Option<String>,
    /// Lets webhook deliveries go to plain-http loopback and private addresses.
    pub allow_private_webhook_targets: bool,
    /// Lets every outbound fetch (webhooks, OAuth and OpenID providers, client metadata
    /// documents, tool servers) reach loopback and private addresses (DESIGN §24).
    pub allow_private_targets: bool,
    /// Whether tool connections may run local commands (stdio) on the gateways; off unless
    /// asked for, since such a command runs on every gateway host.
    pub allow_stdio_tools: bool,
    /// Bearer token `/metrics` asks for; without one, only callers on this host are answered.
    pub metrics_token: Option<String>,
    /// Days audit events are kept.
    pub audit_retention_days: u32,
    /// Connections held at once; past it new ones are closed on accept.
    pub max_connections: usize,
    /// Connections held at once from one client address.
    pub max_connections_per_ip: usize,
    /// How SQLite syncs commits: `normal` (nothing acknowledged is lost when the process
    /// dies; a power cut can roll back the last commits) or `full` (every commit synced).
    pub sqlite_synchronous: crate::store::SqliteSync,
    /// Days webhook bodies are kept for replay.
    pub webhook_body_retention_days: u32,
    /// The wait before each webhook attempt, comma-separated (`0s,5s,5m,…`); after the last
    /// failed attempt a delivery goes to `dlq`.
    pub webhook_retry_schedule: String,
    pub log_format: LogFormat,
    /// A directory of catalog adapter definitions (`<slug>/v<N>.json`) beside the shipped
    /// ones: a deployment's own REST services, or newer versions of shipped adapters.
    pub catalog_dir: Option<PathBuf>,
    /// The URL people reach this control plane at, for the links it hands out (provision
    /// pages); `http://<listen address>` when left out.
    pub public_url: Option<String>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("listen", &self.listen)
            .field("data_dir", &self.data_dir)
            .field("database", &self.database_url.as_ref().map(|_| "<set>"))
            .field("master_key", &self.master_key.as_ref().map(|_| "<set>"))
            .field(
                "allow_private_webhook_targets",
                &self.allow_private_webhook_targets,
            )
            .field("allow_private_targets", &self.allow_private_targets)
            .field("log_format", &self.log_format)
            .finish()
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 7700)),
            data_dir: PathBuf::from(".portcullis"),
            tls_cert: None,
            tls_key: None,
            database_url: None,
            master_key: None,
            allow_private_webhook_targets: false,
            allow_private_targets: false,
            allow_stdio_tools: false,
            metrics_token: None,
            audit_retention_days: 30,
            max_connections: 10_000,
            max_connections_per_ip: 1_000,
            sqlite_synchronous: crate::store::SqliteSync::default(),
            webhook_body_retention_days: 7,
            webhook_retry_schedule: DEFAULT_WEBHOOK_SCHEDULE.to_string(),
            log_format: LogFormat::Text,
            catalog_dir: None,
            public_url: None,
        }
    }
}

/// The environment variables this daemon reads (others, such as the CLI's, are ignored).
/// Longest life of an access token issued to a person's MCP client (interactive access); a
/// gateway keeps revoked grants in its snapshot at least this long.
pub const MAX_INTERACTIVE_ACCESS_SECS: i64 = 3600;

/// When a webhook delivery is attempted, from its event: the first attempt at once (DESIGN
/// §8).
pub const DEFAULT_WEBHOOK_SCHEDULE: &str = "0s,5s,5m,30m,2h,5h,10h,10h";

const ENV_KEYS: [&str; 19] = [
    "tls_cert",
    "tls_key",
    "metrics_token",
    "max_connections",
    "max_connections_per_ip",
    "catalog_dir",
    "public_url",
    "audit_retention_days",
    "sqlite_synchronous",
    "webhook_body_retention_days",
    "webhook_retry_schedule",
    "allow_stdio_tools",
    "listen",
    "data_dir",
    "database_url",
    "master_key",
    "allow_private_webhook_targets",
    "allow_private_targets",
    "log_format",
];

impl Config {
    /// Layers the configuration sources; `flags` holds only the flags given.
    /// Layers defaults, the file, the environment and the given flags.
    pub fn load(file: Option<&Path>, flags: &impl Serialize) -> Result<Self, Box<figment::Error>> {
        portcullis_shared::config::load(Config::default(), file, &ENV_KEYS, flags)
    }

    pub fn database_url(&self) -> String {
        match &self.database_url {
            Some(url) => url.clone(),
            None => format!(
                "sqlite://{}?mode=rwc",
                self.data_dir.join("portcullis.db").display()
            ),
        }
    }
}
