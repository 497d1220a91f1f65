//! MCP tool connections, their egress headers, the catalog of discovered operations, and
//! block / deprecate / restore.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::common::{empty_as_none, AuthMethod, CredentialType, Ref};
use super::scoped;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Protocol {
    #[serde(rename = "streamable-http")]
    StreamableHttp,
    #[serde(rename = "stdio")]
    Stdio,
    /// Catalog-installed REST adapters only.
    #[serde(rename = "rest")]
    Rest,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::StreamableHttp => "streamable-http",
            Protocol::Stdio => "stdio",
            Protocol::Rest => "rest",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Protocol::StreamableHttp, Protocol::Stdio, Protocol::Rest]
            .into_iter()
            .find(|p| p.as_str() == s)
    }
}

/// Where an egress header's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeaderSource {
    /// `value` is sent as is.
    Literal,
    /// `value` names a key of the connection's `secret_values`.
    Secret,
    /// The caller's verified act-as assertion is forwarded.
    Actas,
}

/// An egress header sent to a streamable-http upstream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeaderEntry {
    pub name: String,
    pub source: HeaderSource,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// `protocol_config` of a streamable-http connection.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub headers: Vec<HeaderEntry>,
}

/// `protocol_config` of a stdio connection: a local command the gateway runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StdioConfig {
    #[serde(default)]
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// A tool connection as the API shows it; secret values never appear.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolConnection {
    pub connection_id: String,
    pub workspace_id: String,
    pub name: String,
    pub protocol: Protocol,
    pub protocol_config: Value,
    pub auth_method: AuthMethod,
    pub credential_type: CredentialType,
    pub auth_config: Map<String, Value>,
    pub secret_keys: Vec<String>,
    pub has_credential: bool,
    pub field_classifications: Value,
    pub write_tools: Vec<String>,
    pub gateways: Vec<Ref>,
    /// Operations in the catalog, blocked ones included.
    pub tool_count: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth_state: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateMCPServerConnectionRequest {
    pub workspace_id: String,
    pub name: String,
    pub protocol: String,
    #[serde(default)]
    pub protocol_config: Option<Value>,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub auth_method: Option<AuthMethod>,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub credential_type: Option<CredentialType>,
    #[serde(default)]
    pub auth_config: Option<Map<String, Value>>,
    #[serde(default)]
    pub secret_values: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub field_classifications: Option<Value>,
    #[serde(default)]
    pub write_tools: Option<Vec<String>>,
}

/// `protocol`, `protocol_config`, `field_classifications` and `write_tools` are overwritten
/// with what is sent (an omitted `protocol_config` clears the URL and headers); an empty
/// `auth_method`, `credential_type`, `auth_config` or `name` keeps the stored one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateMCPServerConnectionRequest {
    pub workspace_id: String,
    pub connection_id: String,
    #[serde(default)]
    pub protocol: Option<String>,
    #[serde(default)]
    pub protocol_config: Option<Value>,
    #[serde(default)]
    pub field_classifications: Option<Value>,
    #[serde(default)]
    pub write_tools: Option<Vec<String>>,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub auth_method: Option<AuthMethod>,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub credential_type: Option<CredentialType>,
    #[serde(default)]
    pub auth_config: Option<Map<String, Value>>,
    /// Non-empty replaces the stored secret values.
    #[serde(default)]
    pub secret_values: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub name: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolConnectionIdRequest {
    pub workspace_id: String,
    pub connection_id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSubjectRequest {
    pub workspace_id: String,
    pub connection_id: String,
    /// The administrator's act-as subject, for per-user tools.
    #[serde(default)]
    pub act_as_sub: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListMCPServerConnectionsRequest {
    pub workspace_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolConnectionResponse {
    pub tool: ToolConnection,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreateMCPServerConnectionResponse {
    pub connection_id: String,
    pub tool: ToolConnection,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListMCPServerConnectionsResponse {
    pub tools: Vec<ToolConnection>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Active,
    Deprecated,
    Blocked,
}

impl ToolStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Active => "active",
            ToolStatus::Deprecated => "deprecated",
            ToolStatus::Blocked => "blocked",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            ToolStatus::Active,
            ToolStatus::Deprecated,
            ToolStatus::Blocked,
        ]
        .into_iter()
        .find(|t| t.as_str() == s)
    }
}

/// One discovered operation in the catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CatalogEntry {
    pub name: String,
    pub description: String,
    pub status: ToolStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    /// Whether a gateway has seen the operation upstream (false for one blocked in advance).
    pub discovered: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListConnectionToolsRequest {
    pub workspace_id: String,
    pub connection_id: String,
    #[serde(default)]
    pub with_schema: bool,
    #[serde(default)]
    pub include_blocked: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListConnectionToolsResponse {
    pub tools: Vec<CatalogEntry>,
}

/// Block, deprecate or restore one operation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolStatusRequest {
    pub workspace_id: String,
    pub connection_id: String,
    pub tool: String,
    #[serde(default)]
    pub message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CatalogEntryResponse {
    pub tool: CatalogEntry,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyncToolsResponse {
    pub tools: Vec<CatalogEntry>,
}

/// What a gateway reports after listing a connection's operations upstream.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportToolsRequest {
    #[serde(default)]
    pub workspace_id: Option<String>,
    pub connection_id: String,
    pub tools: Vec<DiscoveredTool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiscoveredTool {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub input_schema: Option<Value>,
}

impl DiscoveredTool {
    /// The tools of an MCP `tools/list` result (entries without a name are left out).
    pub fn from_listed(tools: &[Value]) -> Vec<Self> {
        tools
            .iter()
            .filter_map(|t| {
                Some(DiscoveredTool {
                    name: t.get("name")?.as_str()?.to_string(),
                    description: t
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    input_schema: t.get("inputSchema").cloned(),
                })
            })
            .collect()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReportToolsResponse {
    /// Operations new to the catalog.
    pub added: u64,
    /// The catalog entries of the operations reported (without schemas), as now stored: new
    /// ones `active`, known ones with the status an administrator gave them.
    #[serde(default)]
    pub catalog: Vec<CatalogEntry>,
}

impl super::WorkspaceScoped for ReportToolsRequest {
    fn workspace_id(&self) -> Option<&str> {
        self.workspace_id.as_deref()
    }
}

scoped!(
    CreateMCPServerConnectionRequest,
    UpdateMCPServerConnectionRequest,
    ToolConnectionIdRequest,
    ToolSubjectRequest,
    ListMCPServerConnectionsRequest,
    ListConnectionToolsRequest,
    ToolStatusRequest,
);
