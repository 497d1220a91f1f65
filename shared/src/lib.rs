//! Shared by every Portcullis component: the wire types of the control-plane API, the
//! gateway snapshot, identifiers and key formats, and the Cedar schema.

pub mod adapter;
pub mod api;
pub mod audit;
pub mod canonical;
pub mod config;
pub mod conn_limit;
pub mod egress;
pub mod error;
#[cfg(test)]
mod fuzz;
pub mod guard;
pub mod jsonrpc;
pub mod keys;
pub mod mcp_client;
pub mod metrics_access;
pub mod policy;
pub mod prices;
pub mod private_files;
pub mod provider;
pub mod seal;
pub mod since;
pub mod snapshot;
pub mod sse;
pub mod telemetry;
pub mod ttl;
pub mod webhook;

pub use error::{Code, ConnectError};

/// The current Unix time in milliseconds (0 for a clock set before 1970).
pub fn unix_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
