//! The Portcullis Rust SDK. [`AgentClient`] calls a gateway as an agent (MCP tools, OpenAI
//! and Anthropic model calls) and reports refusals in the spec's error classes;
//! [`AgentRuntime`] keeps a long-running agent on short-lived tokens (start, shutdown);
//! [`AdminClient`] calls the control-plane API with a platform key; [`audit`] reads, tails and waits for audit events; [`act_as`] builds the header an agent
//! sends to act for a person; [`exchange_agent_key`] trades an agent key for a short-lived
//! token; [`time`] reads the times people type (`24h` back from now) as RFC 3339.

pub mod act_as;
pub mod admin;
pub mod agent;
pub mod audit;
pub mod error;
pub mod runtime;
pub mod time;

pub use admin::AdminClient;
pub use agent::AgentClient;
pub use error::{ClientError, GatewayError, GatewayErrorKind};
pub use runtime::AgentRuntime;

use portcullis_wire::api::agents::ExchangedToken;

/// `ExchangeAgentKey`: trades an agent API key for a short-lived token (the agent's
/// `token_ttl`) that `gateway_id`'s gateway accepts in its place; `gateway_id` may be `None`
/// when the agent reaches exactly one gateway.
pub async fn exchange_agent_key(
    control_plane_url: &str,
    agent_key: &str,
    gateway_id: Option<&str>,
) -> Result<ExchangedToken, ClientError> {
    AdminClient::new(control_plane_url, agent_key)?
        .exchange(None, gateway_id)
        .await
}

/// The spec's client defaults. The spec's audit batch size (100) and flush interval (5 s)
/// have no constant: the SDK records no audit events of its own (the gateway records every
/// call an agent makes, and ships them in batches itself), so it has nothing to batch.
pub mod defaults {
    use std::time::Duration;

    pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
    pub const TOOLS_LIST_CACHE_TTL: Duration = Duration::from_secs(30);
    /// How often an [`crate::AgentRuntime`] refreshes its snapshot of the agent's policy.
    pub const POLICY_SYNC_INTERVAL: Duration = Duration::from_secs(30);
    pub const AUDIT_WAIT_TIMEOUT: Duration = Duration::from_secs(30);
    pub const AUDIT_WAIT_INTERVAL: Duration = Duration::from_millis(500);
    pub const PAGE_SIZE: u32 = 50;
}
