//! Interactive access (DESIGN §15): people allow-listed on an agent sign in from an MCP client
//! and use the agent. Each authorization is a grant; refresh tokens are issued beneath it.

use serde::{Deserialize, Serialize};

use super::scoped;

/// `ListInteractiveGrants`: a person's own grants, or with `all_users` (implied by
/// `agent_id`) everyone's. Platform keys hold no personal grants, so they ask for all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListInteractiveGrantsRequest {
    pub workspace_id: String,
    #[serde(default)]
    pub all_users: bool,
    /// The agent's id or name; implies `all_users`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListInteractiveGrantsResponse {
    pub grants: Vec<InteractiveGrant>,
}

/// One person's authorization of one MCP client to use one agent on one gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InteractiveGrant {
    pub grant_id: String,
    pub agent_id: String,
    pub agent_name: String,
    pub gateway_id: String,
    /// The MCP client that was authorized, and the name it registered with.
    pub client_id: String,
    pub client_name: String,
    /// The person: their verified OIDC `sub` and email.
    pub subject: String,
    pub email: String,
    pub created_at: String,
    /// When the client last obtained a token under the grant.
    pub last_used_at: String,
    /// Refresh tokens outstanding under the grant.
    pub refresh_tokens: u64,
}

/// `RevokeInteractiveGrant`: ends the grant and every refresh token under it at once; access
/// tokens already issued stop working when gateways next sync (within seconds).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RevokeInteractiveGrantRequest {
    pub workspace_id: String,
    pub grant_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevokeInteractiveGrantResponse {
    pub grant_id: String,
    pub revoked: bool,
    /// Refresh tokens revoked with the grant.
    pub refresh_tokens_revoked: u64,
}

scoped!(ListInteractiveGrantsRequest, RevokeInteractiveGrantRequest);
