//! The Portcullis gateway: the data plane agents call. It never reads the database; it serves
//! from one immutable snapshot of its workspace, swapped in whole when the control plane
//! publishes a new revision.
//!
//! Request path: [`server`] (accept, TLS) → [`proxy`] (pingora phases) → [`route`] →
//! [`authn`] → [`actas`] → [`authz`] → [`llm`] (inbound API, members, translation, relay) or
//! [`mcp`] → [`respond`] (every reply and error, in the caller's shape).
//! Beside it: [`snapshot`] (compile, sync, last-known-good) and [`audit`] (spool, shipping).

pub mod actas;
pub mod app;
pub mod audit;
pub mod authn;
pub mod authz;
pub mod body;
pub mod cloud;
pub mod config;
pub mod control;
mod dispatch;
pub mod error;
#[cfg(test)]
mod fuzz;
#[doc(hidden)]
pub mod fuzzing;
pub mod guard;
pub mod interactive;
pub mod llm;
pub mod mcp;
pub mod metrics;
pub mod peruser;
pub mod request;
pub mod respond;
pub mod route;
pub mod server;
pub mod session;
pub mod snapshot;
pub mod spend;
pub use portcullis_shared::sse;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use arc_swap::ArcSwapOption;

pub use config::Config;
use snapshot::lkg::LastKnownGood;
use snapshot::Compiled;

/// Shared state of a running gateway.
pub struct Gateway {
    pub config: Config,
    pub snapshot: ArcSwapOption<Compiled>,
    pub runtime: snapshot::Runtime,
    pub lkg: LastKnownGood,
    pub metrics: metrics::Metrics,
    /// Upstream MCP sessions.
    pub upstreams: mcp::upstream::Pool,
    /// People's own credentials for per-user connections, briefly.
    pub credentials: peruser::Credentials,
    /// Callers' tool lists.
    pub tools_cache: mcp::ToolsCache,
    /// Connections discovered for calls the catalog could not answer yet.
    pub discovered_on_call: mcp::discovery::OnCall,
    /// Tool connection id → the fingerprint this process last reported.
    pub reported: std::sync::Mutex<std::collections::HashMap<String, String>>,
    /// Runs discovery and stdio tool processes, beside the request workers.
    pub background: tokio::runtime::Handle,
    /// Where decisions are recorded.
    pub audit: audit::Audit,
    /// Spend counters of the workspace's quotas (they outlive snapshots), when this replica
    /// counts alone.
    pub spend: spend::Spend,
    /// The shared counters, once connected (`spend_store`).
    pub redis_spend: std::sync::OnceLock<Arc<spend::redis::RedisSpend>>,
    /// Requests being answered now (shutdown waits for these, not for idle connections).
    pub in_flight: Arc<std::sync::atomic::AtomicUsize>,
    /// The gateway's own cloud identities, used only with `--cloud-identity`.
    pub cloud: Cloud,
    /// Since when (Unix ms) the snapshot sync has been failing; 0 while it succeeds.
    pub sync_failing_since: std::sync::atomic::AtomicI64,
    /// Request bodies held at once, in all.
    pub body_budget: body::Budget,
    /// The control plane's sync service.
    pub control: control::ControlPlane,
}

/// The gateway's own AWS and Google identities, loaded at first use.
#[derive(Default)]
pub struct Cloud {
    pub aws: cloud::aws::Ambient,
    pub google: cloud::google::Ambient,
}

thread_local! {
    /// Each worker thread's upstream client: its pooled connections live on that thread.
    static HTTP: std::cell::OnceCell<reqwest::Client> = const { std::cell::OnceCell::new() };
}

impl Gateway {
    /// A gateway with no snapshot yet. Call from inside a tokio runtime: its handle runs the
    /// background work (discovery, stdio tools).
    pub fn new(config: Config) -> Self {
        Gateway {
            lkg: LastKnownGood::new(&config.data_dir, &config.token),
            control: control::ControlPlane::new(&config.control_plane_url, &config.token),
            body_budget: body::Budget::new(config.max_in_flight_body_bytes),
            config,
            snapshot: ArcSwapOption::empty(),
            runtime: snapshot::Runtime::default(),
            metrics: metrics::Metrics::default(),
            upstreams: mcp::upstream::Pool::default(),
            credentials: peruser::Credentials::default(),
            tools_cache: mcp::ToolsCache::default(),
            discovered_on_call: mcp::discovery::OnCall::default(),
            reported: std::sync::Mutex::default(),
            background: tokio::runtime::Handle::current(),
            audit: audit::Audit::disabled(),
            in_flight: Arc::default(),
            spend: spend::Spend::default(),
            redis_spend: std::sync::OnceLock::new(),
            cloud: Cloud::default(),
            sync_failing_since: std::sync::atomic::AtomicI64::new(0),
        }
    }

    /// The snapshot this request sees, whole, for its whole life.
    pub fn current(&self) -> Option<Arc<Compiled>> {
        self.snapshot.load_full()
    }

    /// Refuses when `max_policy_age_secs` is set and the snapshot sync has been failing for
    /// longer: the rules this gateway holds may no longer be the workspace's.
    pub fn check_policy_age(&self) -> Result<(), error::GatewayError> {
        use std::sync::atomic::Ordering;
        let bound = self.config.max_policy_age_secs;
        let since = self.sync_failing_since.load(Ordering::Relaxed);
        if bound == 0 || since == 0 {
            return Ok(());
        }
        let failing = (chrono::Utc::now().timestamp_millis() - since).max(0) / 1000;
        match u64::try_from(failing) {
            Ok(secs) if secs >= bound => Err(error::GatewayError::PolicyStale(secs)),
            _ => Ok(()),
        }
    }

    /// This thread's pooled upstream client.
    pub fn http(&self) -> reqwest::Client {
        let allow_private = self.config.allow_private_targets;
        HTTP.with(|cell| cell.get_or_init(|| upstream_client(allow_private)).clone())
    }

    /// How MCP requests reach upstreams over HTTP.
    pub fn mcp_link(&self) -> portcullis_shared::mcp_client::Link {
        portcullis_shared::mcp_client::Link {
            http: self.http(),
            timeout: self.config.upstream_timeout(),
            client_name: mcp::upstream::GATEWAY_CLIENT,
            allow_private: self.config.allow_private_targets,
        }
    }
}

/// Upstreams are reached under the egress policy (DESIGN §24): names resolved to addresses
/// the policy refuses are not connected to (checked once per new connection, so pooled
/// calls pay nothing) and redirects are never followed, so an upstream cannot send the
/// request, its credential or its prompt to another host. Egress proxies come from the
/// standard environment variables (the proxy then resolves names); without any, the client
/// skips per-request proxy matching.
fn upstream_client(allow_private: bool) -> reqwest::Client {
    let mut builder = reqwest::Client::builder()
        .dns_resolver(portcullis_shared::egress::resolver(allow_private))
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(10))
        .pool_max_idle_per_host(1024)
        .pool_idle_timeout(Duration::from_secs(90))
        .tcp_nodelay(true)
        .user_agent(concat!("portcullis-gateway/", env!("CARGO_PKG_VERSION")));
    let proxied = [
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some());
    if !proxied {
        builder = builder.no_proxy();
    }
    builder.build().unwrap_or_else(|e| {
        tracing::error!(error = %e, "Building the upstream client failed; using defaults.");
        reqwest::Client::new()
    })
}

pub struct Running {
    pub addr: SocketAddr,
    pub gateway: Arc<Gateway>,
    stop: tokio::sync::watch::Sender<bool>,
    workers: Vec<std::thread::JoinHandle<()>>,
    sync: tokio::task::JoinHandle<()>,
    audit: Option<audit::AuditTasks>,
}

impl Running {
    /// Stops accepting, lets in-flight requests finish (up to the grace period), stops syncing.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let workers = self.workers;
        let _ = tokio::task::spawn_blocking(move || {
            for w in workers {
                let _ = w.join();
            }
        })
        .await;
        let _ = self.sync.await;
        // After the last request: write what is queued and try once more to ship it.
        if let Some(audit) = self.audit {
            audit.finish().await;
        }
    }
}

/// Installs the process's rustls crypto provider (once; later calls do nothing).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Loads the last-known-good snapshot, binds, serves and syncs in the background.
pub async fn start(config: Config) -> anyhow::Result<Running> {
    install_crypto_provider();
    config.validate().map_err(|e| anyhow::anyhow!(e))?;
    portcullis_shared::private_files::private_dir(&config.data_dir)
        .with_context(|| format!("creating data dir {}", config.data_dir.display()))?;
    let mut gateway = Gateway::new(config);
    let audit_tasks = if gateway.config.audit {
        let (audit, tasks) = audit::Audit::start(
            &gateway.config.data_dir,
            gateway.config.audit_spool_max_bytes,
            gateway.control.clone(),
        )
        .context("opening the audit spool")?;
        gateway.audit = audit;
        Some(tasks)
    } else {
        tracing::warn!("Audit is off: gateway decisions are not recorded, and spend reaches the control plane's record with the audit events, so quotas are enforced from this process's memory only.");
        None
    };
    let gateway = Arc::new(gateway);
    if let Some(snap) = gateway.lkg.load() {
        if snapshot::sync::apply(&gateway, &snap) {
            if let Some(current) = gateway.current() {
                mcp::discovery::discover_changed(
                    &gateway,
                    &current.tools,
                    current.gateways.values().map(|g| &g.tools),
                );
            }
            tracing::info!(
                revision = snap.revision,
                "Serving the last-known-good snapshot until the control plane answers."
            );
        }
    }
    let tls = match (&gateway.config.tls_cert, &gateway.config.tls_key) {
        (Some(cert), Some(key)) => Some(server::tls(
            &cert.to_string_lossy(),
            &key.to_string_lossy(),
        )?),
        _ => None,
    };
    let workers = match gateway.config.worker_threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let open_files = portcullis_shared::conn_limit::raise_open_files();
    tracing::debug!(open_files, "Open-file limit.");
    let (addr, sockets) = server::bind(gateway.config.listen, workers)
        .with_context(|| format!("binding {}", gateway.config.listen))?;
    let app = Arc::new(app::App {
        gw: gateway.clone(),
    });
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let grace = Duration::from_secs(gateway.config.shutdown_grace_secs);
    let shared = server::Shared {
        app,
        stop: stop_rx.clone(),
        grace,
        in_flight: gateway.in_flight.clone(),
        gate: portcullis_shared::conn_limit::Gate::new(
            gateway.config.max_connections,
            gateway.config.max_connections_per_ip,
        ),
    };
    let workers = server::spawn_workers(sockets, tls, shared).context("starting worker threads")?;
    tokio::spawn(spend::seed::run(gateway.clone(), stop_rx.clone()));
    let sync = tokio::spawn(snapshot::sync::run(gateway.clone(), stop_rx));
    tracing::info!(%addr, tls = gateway.config.tls_cert.is_some(), "listening");
    Ok(Running {
        addr,
        gateway,
        stop,
        workers,
        sync,
        audit: audit_tasks,
    })
}
