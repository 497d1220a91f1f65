//! The engine the two binaries share: policy (Cedar), guards, catalog adapters, the MCP
//! client, sealing, prices, egress checks, configuration and telemetry. The wire types are the
//! `portcullis-wire` crate's, re-exported here under the same paths.

pub mod adapter;
pub mod config;
pub mod conn_limit;
pub mod egress;
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
pub mod sse;
pub mod telemetry;
pub mod webhook;

pub use portcullis_wire::{
    api, audit, canonical, error, since, snapshot, ttl, unix_millis, Code, ConnectError,
};
