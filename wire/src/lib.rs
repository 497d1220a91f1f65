//! The wire types every Portcullis component and the SDK exchange: control-plane API messages
//! ([`api`]), the audit event ([`audit`]), the gateway snapshot ([`snapshot`]), catalog adapter
//! definitions ([`adapter`]), canonical JSON ([`canonical`]), durations ([`ttl`], [`since`])
//! and the Connect error ([`error`]). Serde and a few small helpers only: what evaluates
//! policy, guards or adapters lives in the engine crate (`portcullis-shared`).

pub mod adapter;
pub mod api;
pub mod audit;
pub mod canonical;
pub mod error;
pub mod since;
pub mod snapshot;
pub mod ttl;

pub use error::{Code, ConnectError};

/// The current Unix time in milliseconds (0 for a clock set before 1970).
pub fn unix_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
