//! Model connections: `CreateLLMModelConnection` … `DisconnectLLMOAuth`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::common::{empty_as_none, AuthMethod, CredentialType, Ref};
use super::scoped;

/// A model connection as the API shows it. Secret values are never included; `secret_keys`
/// names which are stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelConnection {
    pub connection_id: String,
    pub workspace_id: String,
    pub name: String,
    pub provider: String,
    pub provider_config: Map<String, Value>,
    pub auth_method: AuthMethod,
    pub credential_type: CredentialType,
    pub secret_keys: Vec<String>,
    pub has_credential: bool,
    /// Calls authenticate with the gateway's own cloud identity (Vertex or Bedrock with auth
    /// method `none`): only gateways started with `--cloud-identity` can call it.
    #[serde(default)]
    pub uses_gateway_identity: bool,
    pub attributes: BTreeMap<String, String>,
    pub filter_window_bytes: u64,
    pub filter_window_tokens: u64,
    pub gateways: Vec<Ref>,
    pub pools: Vec<Ref>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth_state: Option<String>,
    /// OAuth client settings, without the secret (`client_secret_set` says one is stored).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub auth_config: Map<String, Value>,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateLLMModelConnectionRequest {
    pub workspace_id: String,
    pub name: String,
    pub provider: String,
    #[serde(default)]
    pub provider_config: Option<Map<String, Value>>,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub auth_method: Option<AuthMethod>,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub credential_type: Option<CredentialType>,
    #[serde(default)]
    pub secret_values: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub attributes: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub filter_window_bytes: Option<u64>,
    #[serde(default)]
    pub filter_window_tokens: Option<u64>,
    /// OAuth client settings (with `auth_method: oauth`); found by discovery where omitted.
    #[serde(default)]
    pub auth_config: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreateLLMModelConnectionResponse {
    pub connection_id: String,
    pub model: ModelConnection,
}

/// Omitted fields keep their stored values; `provider_config` replaces the whole object;
/// secrets, attributes and the filter window change only with their `*_provided` flag.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateLLMModelConnectionRequest {
    pub workspace_id: String,
    pub connection_id: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub provider: Option<String>,
    #[serde(default)]
    pub provider_config: Option<Map<String, Value>>,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub auth_method: Option<AuthMethod>,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub credential_type: Option<CredentialType>,
    #[serde(default)]
    pub secret_values: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub secret_values_provided: bool,
    #[serde(default)]
    pub attributes: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub attributes_provided: bool,
    #[serde(default)]
    pub filter_window_bytes: Option<u64>,
    #[serde(default)]
    pub filter_window_tokens: Option<u64>,
    #[serde(default)]
    pub filter_window_provided: bool,
    /// OAuth client settings; an empty value keeps the stored ones.
    #[serde(default)]
    pub auth_config: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConnectionIdRequest {
    pub workspace_id: String,
    pub connection_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelConnectionResponse {
    pub model: ModelConnection,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListLLMModelConnectionsRequest {
    pub workspace_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListLLMModelConnectionsResponse {
    pub models: Vec<ModelConnection>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BeginOAuthConnectResponse {
    pub consent_url: String,
    pub expires_at: String,
}

scoped!(
    CreateLLMModelConnectionRequest,
    UpdateLLMModelConnectionRequest,
    ModelConnectionIdRequest,
    ListLLMModelConnectionsRequest,
);
