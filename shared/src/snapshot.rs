//! The gateway snapshot: everything one workspace's gateways need to serve, at one revision,
//! as `svc.sync.v1.SyncService/GetSnapshot` returns it. It carries decrypted upstream secrets
//! and must only travel to an authenticated deployment.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::api::agents::{ActAsMethod, AgentStatus};
use crate::api::gateways::GatewayState;
use crate::api::pools::PoolStrategy;
use crate::api::rules::BundleScope;
use crate::api::tools::{HttpConfig, Protocol, StdioConfig, ToolStatus};
use crate::api::{AuthMethod, CredentialType, WorkspaceScoped};

/// Default and maximum long-poll wait.
pub const DEFAULT_WAIT_SECONDS: u32 = 25;
pub const MAX_WAIT_SECONDS: u32 = 60;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetSnapshotRequest {
    /// The token names the workspace; when given, this must match it.
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// The revision the caller holds; the call waits while it is still current.
    #[serde(default)]
    pub revision: Option<u64>,
    #[serde(default)]
    pub wait_seconds: Option<u32>,
}

impl WorkspaceScoped for GetSnapshotRequest {
    fn workspace_id(&self) -> Option<&str> {
        self.workspace_id.as_deref()
    }
}

/// `snapshot` is `None` when the caller's revision is still current after the wait.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GetSnapshotResponse {
    pub revision: u64,
    pub snapshot: Option<Snapshot>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub workspace_id: String,
    pub revision: u64,
    pub deployment_id: String,
    pub public_url: String,
    pub generated_at: String,
    pub gateways: Vec<SnapGateway>,
    pub models: Vec<SnapModel>,
    pub pools: Vec<SnapPool>,
    pub agents: Vec<SnapAgent>,
    pub bundles: Vec<SnapBundle>,
    #[serde(default)]
    pub tools: Vec<SnapTool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapGateway {
    pub gateway_id: String,
    pub name: String,
    pub state: GatewayState,
    pub is_default: bool,
    pub all_agents: bool,
    pub agent_ids: Vec<String>,
    pub model_ids: Vec<String>,
    pub pool_ids: Vec<String>,
    /// Whole tool connections attached.
    #[serde(default)]
    pub tool_sources: Vec<String>,
    /// Single operations attached.
    #[serde(default)]
    pub tools: Vec<SnapGatewayTool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapGatewayTool {
    pub connection_id: String,
    pub tool: String,
}

/// A tool connection with what the gateway needs to call it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapTool {
    pub connection_id: String,
    pub name: String,
    pub protocol: Protocol,
    #[serde(default)]
    pub http: Option<HttpConfig>,
    #[serde(default)]
    pub stdio: Option<StdioConfig>,
    pub auth_method: AuthMethod,
    pub credential_type: CredentialType,
    pub secret_values: Secrets,
    pub write_tools: Vec<String>,
    /// Every operation in the catalog, with its status. Operations an upstream offers that are
    /// not listed here are not served until discovery records them.
    pub catalog: Vec<SnapCatalogEntry>,
    /// Changes whenever anything that affects calling the upstream changes.
    pub fingerprint: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapCatalogEntry {
    pub name: String,
    pub status: ToolStatus,
    #[serde(default)]
    pub message: Option<String>,
}

/// Upstream secret values; `Debug` never prints them.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secrets(pub BTreeMap<String, String>);

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapModel {
    pub connection_id: String,
    pub name: String,
    pub provider: String,
    pub provider_config: Map<String, Value>,
    pub auth_method: AuthMethod,
    pub credential_type: CredentialType,
    pub secret_values: Secrets,
    pub attributes: BTreeMap<String, String>,
    pub filter_window_bytes: u64,
    pub filter_window_tokens: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapPoolMember {
    pub connection_id: String,
    pub weight: u32,
    pub priority: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapPool {
    pub pool_id: String,
    pub name: String,
    pub strategy: PoolStrategy,
    pub members: Vec<SnapPoolMember>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapAgent {
    pub agent_id: String,
    pub name: String,
    pub status: AgentStatus,
    pub parent_id: Option<String>,
    /// SHA-256 hex of each live API key.
    pub key_hashes: Vec<String>,
    pub token_ttl_secs: u64,
    pub actas_method: Option<ActAsMethod>,
    pub actas_required: bool,
    pub actas_provider_id: Option<String>,
    pub actas_oidc_url: Option<String>,
    pub actas_hmac_secret: Option<Secrets>,
}

/// One rule bundle's Cedar text; policy ids are already qualified and unique.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapBundle {
    pub bundle_id: String,
    /// What the policies' ids were qualified with (`agent/<id>`, `bundle/<id>`, `gateway`).
    pub id_prefix: String,
    pub scope: BundleScope,
    pub scope_id: Option<String>,
    pub managed: bool,
    pub policies: String,
}
