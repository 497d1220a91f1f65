//! The Portcullis control plane: the only writer of state. It serves the management API
//! (Connect unary JSON), compiles rule bundles, and hands gateways their snapshots.
//!
//! Request path: [`doors`] (one router for every door) → [`api`] (route, authenticate, parse,
//! authorize) → handler → [`store`] (one write transaction per mutation, bumping the workspace
//! revision) → [`api::sync`] wakes gateways waiting on that revision.

pub mod api;
pub mod audit;
pub mod bootstrap;
pub mod catalog;
pub mod config;
pub mod doors;
pub mod error;
pub mod guard_rows;
pub mod interactive;
pub mod mcp_admin;
pub mod metrics;
pub mod oauth;
pub(crate) mod pages;
pub mod peer;
pub mod per_user;
pub mod provision;
pub mod rules;
mod server;
pub(crate) mod signin;
pub mod snapshot;
pub mod store;
pub(crate) mod token_signing;
pub mod validate;
pub mod webhooks;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;

pub use api::new_platform_key;
pub use bootstrap::Bootstrap;
pub use config::Config;

/// Shared state of the running service.
pub struct App {
    pub store: store::Store,
    pub registry: api::Registry,
    pub metrics: metrics::Metrics,
    pub audit: audit::Hub,
    pub config: Config,
    pub webhooks: webhooks::Hooks,
    /// The OAuth client of upstream providers.
    pub oauth: oauth::OAuth,
    /// Where people reach this service (links in replies start with it).
    pub base_url: String,
}

/// A running control plane.
pub struct Running {
    pub addr: SocketAddr,
    pub bootstrap: Bootstrap,
    pub app: Arc<App>,
    shutdown: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    workers: webhooks::Workers,
    retention: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Stops accepting, finishes in-flight requests, and closes the database.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        let _ = self.shutdown.send(true);
        self.task.await.context("server task")??;
        self.workers.stop().await;
        self.retention.await.context("retention task")?;
        self.app.store.close().await;
        Ok(())
    }

    /// Waits until the server stops on its own (it only does on error).
    pub async fn join(&mut self) -> anyhow::Result<()> {
        (&mut self.task).await.context("server task")??;
        Ok(())
    }
}

/// Opens the store, bootstraps on first start, binds, and serves in the background.
pub async fn start(config: Config) -> anyhow::Result<Running> {
    let open_files = portcullis_shared::conn_limit::raise_open_files();
    tracing::debug!(open_files, "Open-file limit.");
    portcullis_shared::private_files::private_dir(&config.data_dir)
        .with_context(|| format!("creating data dir {}", config.data_dir.display()))?;
    let cipher = bootstrap::master_cipher(config.master_key.as_deref(), &config.data_dir)?;
    let store = store::Store::open(&config.database_url(), cipher, config.sqlite_synchronous)
        .await
        .context("opening the database")?;
    if config.database_url.is_none() {
        for file in ["portcullis.db", "portcullis.db-wal", "portcullis.db-shm"] {
            portcullis_shared::private_files::private_file(&config.data_dir.join(file))
                .with_context(|| format!("making {file} private"))?;
        }
    }
    let bootstrap = bootstrap::ensure(&store, &config.data_dir).await?;
    let tls = match (&config.tls_cert, &config.tls_key) {
        (Some(cert), Some(key)) => Some(server::tls(cert, key)?),
        (None, None) => None,
        _ => anyhow::bail!("tls_cert and tls_key go together: give both or neither"),
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    let addr = listener.local_addr()?;
    let settings = webhooks::Settings::from_config(&config).map_err(anyhow::Error::msg)?;
    let hub = audit::Hub::default();
    let hooks = webhooks::Hooks::new(settings, hub.stored());
    let oauth = oauth::OAuth::new(config.allow_private_targets);
    validate::allow_private_targets(config.allow_private_targets);
    let app = Arc::new(App {
        store,
        registry: api::Registry::new(),
        metrics: metrics::Metrics::default(),
        audit: hub,
        base_url: config
            .public_url
            .clone()
            .map(|u| u.trim_end_matches('/').to_string())
            .unwrap_or_else(|| format!("{scheme}://{addr}")),
        config,
        webhooks: hooks,
        oauth,
    });
    let (shutdown, stop) = tokio::sync::watch::channel(false);
    let retention = audit::spawn_retention(
        app.store.clone(),
        app.config.audit_retention_days,
        shutdown.subscribe(),
    );
    let workers = webhooks::Workers::start(
        app.store.clone(),
        app.webhooks.settings.clone(),
        app.webhooks.wake.clone(),
    );
    let router = doors::router(app.clone()).layer(axum::middleware::from_fn(peer::scope));
    let gate = portcullis_shared::conn_limit::Gate::new(
        app.config.max_connections,
        app.config.max_connections_per_ip,
    );
    let task = tokio::spawn(server::serve(listener, router, tls, gate, stop));
    tracing::info!(%addr, backend = ?app.store.backend(), "listening");
    Ok(Running {
        addr,
        bootstrap,
        app,
        shutdown,
        task,
        workers,
        retention,
    })
}
