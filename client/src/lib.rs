//! The Portcullis Rust SDK. [`AdminClient`] calls the control-plane API with a platform key;
//! [`audit`] reads, tails and waits for audit events; the agent side (gateway calls,
//! tools-list cache) joins it as those features land.

pub mod admin;
pub mod audit;
pub mod error;

pub use admin::AdminClient;
pub use error::ClientError;

/// The spec's client defaults.
pub mod defaults {
    use std::time::Duration;

    pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
    pub const TOOLS_LIST_CACHE_TTL: Duration = Duration::from_secs(30);
    pub const POLICY_SYNC_INTERVAL: Duration = Duration::from_secs(30);
    pub const AUDIT_BATCH_SIZE: usize = 100;
    pub const AUDIT_FLUSH_INTERVAL: Duration = Duration::from_secs(5);
    pub const AUDIT_WAIT_TIMEOUT: Duration = Duration::from_secs(30);
    pub const AUDIT_WAIT_INTERVAL: Duration = Duration::from_millis(500);
    pub const PAGE_SIZE: u32 = 50;
}
