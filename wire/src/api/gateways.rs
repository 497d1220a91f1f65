//! Gateways: lifecycle, memberships, access grants and endpoints.

use serde::{Deserialize, Serialize};

use super::common::Endpoints;
use super::scoped;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GatewayState {
    Active,
    Disabled,
}

impl GatewayState {
    pub fn as_str(self) -> &'static str {
        match self {
            GatewayState::Active => "active",
            GatewayState::Disabled => "disabled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [GatewayState::Active, GatewayState::Disabled]
            .into_iter()
            .find(|m| m.as_str() == s)
    }
}

/// What a gateway membership points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemberKind {
    /// A direct model connection.
    Model,
    /// A model pool.
    Pool,
    /// One discovered operation of a tool connection.
    Tool,
    /// A whole tool connection.
    ToolSource,
}

impl MemberKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MemberKind::Model => "model",
            MemberKind::Pool => "pool",
            MemberKind::Tool => "tool",
            MemberKind::ToolSource => "tool_source",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            MemberKind::Model,
            MemberKind::Pool,
            MemberKind::Tool,
            MemberKind::ToolSource,
        ]
        .into_iter()
        .find(|m| m.as_str() == s)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayMember {
    pub kind: MemberKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The model, pool or connection name.
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gateway {
    pub gateway_id: String,
    pub workspace_id: String,
    pub name: String,
    pub description: String,
    pub state: GatewayState,
    pub is_default: bool,
    pub members: Vec<GatewayMember>,
    /// Agents granted access one by one (the same relation as their `allowed_gateway_ids`).
    pub agent_ids: Vec<String>,
    /// Whether every agent of the workspace may reach this gateway.
    pub all_agents: bool,
    /// `None` until a gateway deployment with a public URL exists.
    pub endpoints: Option<Endpoints>,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateGatewayRequest {
    pub workspace_id: String,
    pub name: String,
    #[serde(default)]
    pub description: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateGatewayRequest {
    pub workspace_id: String,
    pub gateway_id: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayIdRequest {
    pub workspace_id: String,
    pub gateway_id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListGatewaysRequest {
    pub workspace_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetGatewayStateRequest {
    pub workspace_id: String,
    pub gateway_id: String,
    pub state: GatewayState,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddGatewayPoolRequest {
    pub workspace_id: String,
    pub gateway_id: String,
    pub pool_id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddGatewayModelRequest {
    pub workspace_id: String,
    pub gateway_id: String,
    pub connection_id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddGatewayToolRequest {
    pub workspace_id: String,
    pub gateway_id: String,
    pub connection_id: String,
    /// One discovered operation of the connection.
    pub tool: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddGatewayToolSourceRequest {
    pub workspace_id: String,
    pub gateway_id: String,
    pub connection_id: String,
}

/// Names exactly one membership: a pool, a model connection, or (with `tool`) one operation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoveGatewayMemberRequest {
    pub workspace_id: String,
    pub gateway_id: String,
    #[serde(default)]
    pub connection_id: Option<String>,
    #[serde(default)]
    pub tool: Option<String>,
    #[serde(default)]
    pub pool_id: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetGatewayAgentAccessRequest {
    pub workspace_id: String,
    pub gateway_id: String,
    pub agent_id: String,
    pub granted: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetGatewayAllAgentsAccessRequest {
    pub workspace_id: String,
    pub gateway_id: String,
    pub granted: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayResponse {
    pub gateway: Gateway,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListGatewaysResponse {
    pub gateways: Vec<Gateway>,
}

scoped!(UpdateGatewayRequest, empty_is_a_value: ["description"]);
scoped!(
    CreateGatewayRequest,
    GatewayIdRequest,
    ListGatewaysRequest,
    SetGatewayStateRequest,
    AddGatewayPoolRequest,
    AddGatewayModelRequest,
    AddGatewayToolRequest,
    AddGatewayToolSourceRequest,
    RemoveGatewayMemberRequest,
    SetGatewayAgentAccessRequest,
    SetGatewayAllAgentsAccessRequest,
);
