//! The store: the control plane's only state, on SQLite (default) or PostgreSQL through one
//! set of portable queries. Every write runs in a [`WriteTx`] that bumps the workspace
//! revision and wakes gateways waiting for a new snapshot.

pub mod actas_providers;
pub mod agents;
pub mod audit;
pub mod bundles;
pub mod credentials;
mod db;
pub mod gateways;
pub mod guards;
pub mod interactive;
mod migrations;
pub mod models;
pub mod oauth_flows;
pub mod pools;
pub mod provision;
pub mod quotas;
pub mod token_keys;
pub mod tools;
pub mod webhooks;
pub mod workspaces;

pub use db::{corrupt, now_ms, Backend, Conn, SqliteSync, Store, StoreError, WriteTx};

/// Unix milliseconds as RFC 3339.
pub fn ts(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
