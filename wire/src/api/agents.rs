//! Agents and their keys: `RegisterAgent` … `ListAgentKeys`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::common::{empty_as_none, Endpoints};
use super::scoped;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentStatus {
    Active,
    Suspended,
    Provisioned,
    Revoked,
}

impl AgentStatus {
    /// Whether the agent may be called: active or provisioned (not suspended or revoked).
    pub fn is_usable(self) -> bool {
        matches!(self, AgentStatus::Active | AgentStatus::Provisioned)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AgentStatus::Active => "active",
            AgentStatus::Suspended => "suspended",
            AgentStatus::Provisioned => "provisioned",
            AgentStatus::Revoked => "revoked",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            AgentStatus::Active,
            AgentStatus::Suspended,
            AgentStatus::Provisioned,
            AgentStatus::Revoked,
        ]
        .into_iter()
        .find(|m| m.as_str() == s)
    }
}

/// How the gateway verifies the end user an agent acts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActAsMethod {
    None,
    Oidc,
    Hmac,
    Bound,
}

impl ActAsMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            ActAsMethod::None => "none",
            ActAsMethod::Oidc => "oidc",
            ActAsMethod::Hmac => "hmac",
            ActAsMethod::Bound => "bound",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            ActAsMethod::None,
            ActAsMethod::Oidc,
            ActAsMethod::Hmac,
            ActAsMethod::Bound,
        ]
        .into_iter()
        .find(|m| m.as_str() == s)
    }
}

/// An agent as the API shows it. The HMAC secret is never returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Agent {
    pub agent_id: String,
    pub workspace_id: String,
    pub name: String,
    pub status: AgentStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    pub metadata: Map<String, Value>,
    pub token_ttl: String,
    pub allowed_pool_names: Vec<String>,
    pub allowed_direct_model_names: Vec<String>,
    pub allowed_tools: Vec<String>,
    pub allowed_gateway_ids: Vec<String>,
    pub actas_allowed_groups: Vec<String>,
    pub actas_allowed_emails: Vec<String>,
    pub actas_allowed_subjects: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actas_method: Option<ActAsMethod>,
    pub actas_required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actas_provider_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actas_oidc_url: Option<String>,
    pub actas_hmac_secret_set: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actas_config_name: Option<String>,
    pub interactive_access: bool,
    pub created_at: String,
    pub updated_at: String,
}

/// Every field but `name` is optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterAgentRequest {
    pub workspace_id: String,
    pub name: String,
    #[serde(default)]
    pub parent_id: Option<String>,
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
    #[serde(default)]
    pub token_ttl: Option<String>,
    #[serde(default)]
    pub allowed_pool_names: Option<Vec<String>>,
    #[serde(default)]
    pub allowed_direct_model_names: Option<Vec<String>>,
    #[serde(default)]
    pub allowed_tools: Option<Vec<String>>,
    #[serde(default)]
    pub allowed_gateway_ids: Option<Vec<String>>,
    #[serde(default)]
    pub actas_allowed_groups: Option<Vec<String>>,
    #[serde(default)]
    pub actas_allowed_emails: Option<Vec<String>>,
    #[serde(default)]
    pub actas_allowed_subjects: Option<Vec<String>>,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub actas_method: Option<ActAsMethod>,
    #[serde(default)]
    pub actas_required: Option<bool>,
    #[serde(default)]
    pub actas_provider_id: Option<String>,
    #[serde(default)]
    pub actas_oidc_url: Option<String>,
    #[serde(default)]
    pub actas_hmac_secret: Option<String>,
    #[serde(default)]
    pub actas_config_name: Option<String>,
    #[serde(default)]
    pub interactive_access: Option<bool>,
}

/// Omitted fields keep their values; a list, when present, replaces the stored list; an empty
/// `token_ttl` resets it to the default; an empty string clears an optional text field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateAgentRequest {
    pub workspace_id: String,
    /// The agent's id or name.
    pub agent_id: String,
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
    #[serde(default)]
    pub token_ttl: Option<String>,
    #[serde(default)]
    pub allowed_pool_names: Option<Vec<String>>,
    #[serde(default)]
    pub allowed_direct_model_names: Option<Vec<String>>,
    #[serde(default)]
    pub allowed_tools: Option<Vec<String>>,
    #[serde(default)]
    pub allowed_gateway_ids: Option<Vec<String>>,
    #[serde(default)]
    pub actas_allowed_groups: Option<Vec<String>>,
    #[serde(default)]
    pub actas_allowed_emails: Option<Vec<String>>,
    #[serde(default)]
    pub actas_allowed_subjects: Option<Vec<String>>,
    /// `""` clears the method.
    #[serde(default)]
    pub actas_method: Option<String>,
    #[serde(default)]
    pub actas_required: Option<bool>,
    #[serde(default)]
    pub actas_provider_id: Option<String>,
    #[serde(default)]
    pub actas_oidc_url: Option<String>,
    #[serde(default)]
    pub actas_hmac_secret: Option<String>,
    #[serde(default)]
    pub actas_config_name: Option<String>,
    #[serde(default)]
    pub interactive_access: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetAgentRequest {
    pub workspace_id: String,
    /// The agent's id or name.
    pub agent_id: String,
    /// Needed for endpoints when the agent reaches more than one gateway.
    #[serde(default)]
    pub gateway_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentResponse {
    pub agent: Agent,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GetAgentResponse {
    pub agent: Agent,
    /// The gateway the endpoints are for, when one could be chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoints: Option<Endpoints>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListAgentsRequest {
    pub workspace_id: String,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub status: Option<AgentStatus>,
    /// Default 100, at most 1000.
    #[serde(default)]
    pub limit: Option<u32>,
    #[serde(default)]
    pub offset: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListAgentsResponse {
    pub agents: Vec<Agent>,
    /// Agents matching the filter, across all pages.
    pub total: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentLifecycleRequest {
    pub workspace_id: String,
    pub agent_id: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub cascade: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReactivateAgentRequest {
    pub workspace_id: String,
    pub agent_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentLifecycleResponse {
    pub agent: Agent,
    /// Every agent whose status changed, the named one first.
    pub affected_agent_ids: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteAgentResponse {
    pub deleted_agent_ids: Vec<String>,
}

/// An agent API key as listed; the secret is never returned after creation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentKey {
    pub key_id: String,
    pub agent_id: String,
    pub name: String,
    pub prefix: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_id: Option<String>,
    pub created_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotated_at: Option<String>,
    /// The end user every call with this key acts for (agents with act-as method `bound`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_subject: Option<BoundSubject>,
}

/// The end user a key is bound to: set by an administrator, never by the caller.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoundSubject {
    pub sub: String,
    #[serde(default)]
    pub email: String,
    #[serde(default)]
    pub groups: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateAgentKeyRequest {
    pub workspace_id: String,
    /// The agent's id or name.
    #[serde(alias = "agent")]
    pub agent_id: String,
    /// The key's name, unique per agent.
    #[serde(alias = "key_name")]
    pub name: String,
    #[serde(default)]
    pub gateway_id: Option<String>,
    /// Binds the key to one end user (for agents whose act-as method is `bound`).
    #[serde(default)]
    pub bound_subject: Option<BoundSubject>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RotateAgentKeyRequest {
    pub workspace_id: String,
    #[serde(alias = "agent")]
    pub agent_id: String,
    pub key_name: String,
    #[serde(default)]
    pub gateway_id: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RevokeAgentKeyRequest {
    pub workspace_id: String,
    #[serde(alias = "agent")]
    pub agent_id: String,
    pub key_name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListAgentKeysRequest {
    pub workspace_id: String,
    #[serde(alias = "agent")]
    pub agent_id: String,
}

/// `ExchangeAgentKey`: the bearer is the agent key itself, or a platform key holding
/// `agentkeys.manage` with the agent key in `agent_key`. `gateway_id` may be left out only when
/// the agent reaches exactly one gateway.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExchangeAgentKeyRequest {
    #[serde(default)]
    pub workspace_id: Option<String>,
    #[serde(default)]
    pub gateway_id: Option<String>,
    /// The agent key to exchange, when the bearer is a platform key (the admin client's
    /// form); absent when the bearer is the agent key itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_key: Option<String>,
}

impl crate::api::WorkspaceScoped for ExchangeAgentKeyRequest {
    fn workspace_id(&self) -> Option<&str> {
        self.workspace_id.as_deref()
    }
}

/// A short-lived JWT the gateway named in it accepts in place of the agent key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExchangedToken {
    pub access_token: String,
    pub token_type: String,
    /// RFC 3339.
    pub expires_at: String,
    pub expires_in: u64,
    pub gateway_id: String,
    pub endpoints: Option<Endpoints>,
}

/// The reply of create, ensure and rotate: the token is shown this once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IssuedAgentKey {
    pub key: AgentKey,
    pub token: String,
    pub gateway_id: Option<String>,
    pub endpoints: Option<Endpoints>,
    /// For `EnsureAgentKey`: whether the key was created (true) or rotated (false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListAgentKeysResponse {
    pub keys: Vec<AgentKey>,
}

/// `ListToolReach`: every agent and the tools it reaches.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListToolReachRequest {
    pub workspace_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListToolReachResponse {
    pub agents: Vec<AgentReach>,
}

/// One agent's reach: the tools offered on a gateway it may use, in the catalog and not
/// blocked, that its allow list names (an agent that is not active reaches none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentReach {
    pub agent_id: String,
    pub name: String,
    pub status: AgentStatus,
    pub tools: Vec<ReachedTool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReachedTool {
    /// `connection/tool`, as agents call it.
    pub tool: String,
    pub connection_id: String,
    /// `active` or `deprecated`.
    pub status: String,
    /// The gateways that offer it to this agent.
    pub gateway_ids: Vec<String>,
}

scoped!(
    UpdateAgentRequest,
    empty_is_a_value: [
        "token_ttl",
        "actas_method",
        "actas_provider_id",
        "actas_oidc_url",
        "actas_hmac_secret",
        "actas_config_name",
    ]
);
scoped!(
    ListToolReachRequest,
    RegisterAgentRequest,
    GetAgentRequest,
    ListAgentsRequest,
    AgentLifecycleRequest,
    ReactivateAgentRequest,
    CreateAgentKeyRequest,
    RotateAgentKeyRequest,
    RevokeAgentKeyRequest,
    ListAgentKeysRequest,
);
