//! Start-up configuration: defaults ← TOML file ← `PORTCULLIS_*` environment ← flags.
//! Unknown keys are errors.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use portcullis_shared::telemetry::LogFormat;
use serde::{Deserialize, Serialize};

#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address agents connect to; port 0 picks a free port.
    pub listen: SocketAddr,
    /// The control plane this gateway syncs from.
    pub control_plane_url: String,
    /// The deployment token (`svc_dt_…`).
    pub token: String,
    /// Holds the last-known-good snapshot.
    pub data_dir: PathBuf,
    /// The URL agents use to reach this gateway, when it differs from the deployment's.
    pub public_url: Option<String>,
    /// PEM certificate chain and key for TLS; plain HTTP when absent.
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// Bearer token `/metrics` asks for; without one, only callers on this host are answered.
    pub metrics_token: Option<String>,
    /// Largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// Request bodies all requests in flight may hold at once, in bytes; past it a request
    /// waits briefly for room, then is refused (503 `overloaded`).
    pub max_in_flight_body_bytes: usize,
    /// Seconds to wait for an upstream's response headers.
    pub upstream_timeout_secs: u64,
    /// Seconds in-flight requests get to finish on shutdown.
    pub shutdown_grace_secs: u64,
    /// Connections held at once; past it new ones are closed on accept.
    pub max_connections: usize,
    /// Connections held at once from one client address.
    pub max_connections_per_ip: usize,
    /// Runtime worker threads; 0 uses one per CPU.
    pub worker_threads: usize,
    /// Whether this gateway runs stdio tools' commands; off unless asked for.
    pub allow_stdio_tools: bool,
    /// Whether upstreams (models, tool servers, token endpoints) may be at loopback or
    /// private addresses; link-local and cloud metadata addresses are refused always.
    pub allow_private_targets: bool,
    /// Whether decisions are recorded and shipped to the control plane.
    pub audit: bool,
    /// Bound of the on-disk audit spool, in bytes; past it the oldest events are dropped.
    pub audit_spool_max_bytes: u64,
    /// `redis://…`: spend counters shared by every replica of the deployment; without it each
    /// replica counts alone (exact for one replica).
    pub spend_store: Option<String>,
    /// Refuse calls (503 `policy_stale`) once the snapshot sync has been failing for longer
    /// than this many seconds; 0 (the default) serves the current snapshot however long the
    /// control plane is away.
    pub max_policy_age_secs: u64,
    /// Whether models may use this gateway's own cloud identity (AWS default chain, Google
    /// application default credentials): only a self-hosted gateway in the customer's cloud.
    pub cloud_identity: bool,
    pub log_format: LogFormat,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("listen", &self.listen)
            .field("control_plane_url", &self.control_plane_url)
            .field("token", &"<set>")
            .field("data_dir", &self.data_dir)
            .field("public_url", &self.public_url)
            .field("tls", &self.tls_cert.is_some())
            .field("spend_store", &self.spend_store.is_some())
            .finish_non_exhaustive()
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 7780)),
            control_plane_url: "http://127.0.0.1:7700".to_string(),
            token: String::new(),
            data_dir: PathBuf::from(".portcullis/gateway"),
            public_url: None,
            tls_cert: None,
            tls_key: None,
            metrics_token: None,
            max_body_bytes: 16 * 1024 * 1024,
            max_in_flight_body_bytes: 64 * 1024 * 1024,
            upstream_timeout_secs: 300,
            shutdown_grace_secs: 30,
            max_connections: 10_000,
            max_connections_per_ip: 1_000,
            worker_threads: 0,
            allow_stdio_tools: false,
            allow_private_targets: false,
            audit: true,
            audit_spool_max_bytes: 256 * 1024 * 1024,
            spend_store: None,
            cloud_identity: false,
            max_policy_age_secs: 0,
            log_format: LogFormat::Text,
        }
    }
}

const ENV_KEYS: [&str; 23] = [
    "metrics_token",
    "max_in_flight_body_bytes",
    "max_connections",
    "max_connections_per_ip",
    "allow_stdio_tools",
    "allow_private_targets",
    "max_policy_age_secs",
    "cloud_identity",
    "spend_store",
    "audit",
    "audit_spool_max_bytes",
    "worker_threads",
    "listen",
    "control_plane_url",
    "token",
    "data_dir",
    "public_url",
    "tls_cert",
    "tls_key",
    "max_body_bytes",
    "upstream_timeout_secs",
    "shutdown_grace_secs",
    "log_format",
];

impl Config {
    /// Layers defaults, the file, the environment and the given flags.
    pub fn load(file: Option<&Path>, flags: &impl Serialize) -> Result<Self, Box<figment::Error>> {
        portcullis_shared::config::load(Config::default(), file, &ENV_KEYS, flags)
    }

    /// Checks what figment cannot: the token's form, the URL, the TLS pair.
    pub fn validate(&self) -> Result<(), String> {
        if portcullis_shared::keys::KeyKind::of(&self.token)
            != Some(portcullis_shared::keys::KeyKind::Deployment)
        {
            return Err(
                "token must be a deployment token (svc_dt_…); create one with \
                        `portcullis deployment create`"
                    .into(),
            );
        }
        let url = url::Url::parse(&self.control_plane_url)
            .map_err(|e| format!("control_plane_url: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err("control_plane_url must be http or https".into());
        }
        if self.audit && self.audit_spool_max_bytes < 64 * 1024 {
            return Err("audit_spool_max_bytes must be at least 65536".into());
        }
        if let Some(store) = &self.spend_store {
            let ok = url::Url::parse(store).is_ok_and(|u| matches!(u.scheme(), "redis" | "rediss"));
            if !ok {
                return Err("spend_store must be a redis:// or rediss:// URL".into());
            }
        }
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            return Err("tls_cert and tls_key go together".into());
        }
        Ok(())
    }

    pub fn upstream_timeout(&self) -> Duration {
        Duration::from_secs(self.upstream_timeout_secs.max(1))
    }
}
