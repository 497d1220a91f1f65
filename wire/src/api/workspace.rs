//! Identity, workspaces, platform keys, roles and permissions, and gateway deployments.

use serde::{Deserialize, Serialize};

use super::scoped;
use super::WorkspaceScoped;

/// A permission of the spec's table. The plural `gateways.*` spellings are accepted too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Permission {
    #[serde(rename = "gateway.view", alias = "gateways.view")]
    GatewayView,
    #[serde(rename = "gateway.manage", alias = "gateways.manage")]
    GatewayManage,
    #[serde(rename = "agents.view")]
    AgentsView,
    #[serde(rename = "agents.register")]
    AgentsRegister,
    #[serde(rename = "agents.suspend")]
    AgentsSuspend,
    #[serde(rename = "agents.revoke")]
    AgentsRevoke,
    #[serde(rename = "agents.delete")]
    AgentsDelete,
    #[serde(rename = "agentkeys.manage")]
    AgentKeysManage,
    #[serde(rename = "rules.deploy")]
    RulesDeploy,
    #[serde(rename = "eventing.view")]
    EventingView,
    #[serde(rename = "eventing.manage")]
    EventingManage,
    #[serde(rename = "eventing.replay")]
    EventingReplay,
    /// Platform keys and gateway deployments: admin only.
    #[serde(rename = "workspace.admin")]
    WorkspaceAdmin,
    /// Creating or changing a stdio tool's command, arguments, environment or directory,
    /// which run on every gateway host: admin only.
    #[serde(rename = "tools.stdio")]
    ToolsStdio,
}

impl Permission {
    pub const ALL: [Permission; 14] = [
        Permission::GatewayView,
        Permission::GatewayManage,
        Permission::AgentsView,
        Permission::AgentsRegister,
        Permission::AgentsSuspend,
        Permission::AgentsRevoke,
        Permission::AgentsDelete,
        Permission::AgentKeysManage,
        Permission::RulesDeploy,
        Permission::EventingView,
        Permission::EventingManage,
        Permission::EventingReplay,
        Permission::WorkspaceAdmin,
        Permission::ToolsStdio,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Permission::GatewayView => "gateway.view",
            Permission::GatewayManage => "gateway.manage",
            Permission::AgentsView => "agents.view",
            Permission::AgentsRegister => "agents.register",
            Permission::AgentsSuspend => "agents.suspend",
            Permission::AgentsRevoke => "agents.revoke",
            Permission::AgentsDelete => "agents.delete",
            Permission::AgentKeysManage => "agentkeys.manage",
            Permission::RulesDeploy => "rules.deploy",
            Permission::EventingView => "eventing.view",
            Permission::EventingManage => "eventing.manage",
            Permission::EventingReplay => "eventing.replay",
            Permission::WorkspaceAdmin => "workspace.admin",
            Permission::ToolsStdio => "tools.stdio",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        let s = match s {
            "gateways.view" => "gateway.view",
            "gateways.manage" => "gateway.manage",
            other => other,
        };
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }

    /// Whether a key holding `held` holds this permission: its own, or `tools.stdio` through
    /// `workspace.admin` (admin keys made before `tools.stdio` existed list only the older).
    pub fn held_in(self, held: &[Permission]) -> bool {
        held.contains(&self)
            || (self == Permission::ToolsStdio && held.contains(&Permission::WorkspaceAdmin))
    }

    fn is_admin_only(self) -> bool {
        matches!(self, Permission::WorkspaceAdmin | Permission::ToolsStdio)
    }

    fn is_view(self) -> bool {
        matches!(
            self,
            Permission::GatewayView | Permission::AgentsView | Permission::EventingView
        )
    }
}

/// A platform key's role: every role views; `admin` and `operator` manage; only `admin`
/// administers the workspace (platform keys, deployments) and sets what stdio tools run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Admin,
    Operator,
    Viewer,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Operator => "operator",
            Role::Viewer => "viewer",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Role::Admin, Role::Operator, Role::Viewer]
            .into_iter()
            .find(|r| r.as_str() == s)
    }

    pub fn permissions(self) -> Vec<Permission> {
        Permission::ALL
            .into_iter()
            .filter(|p| match self {
                Role::Admin => true,
                Role::Operator => !p.is_admin_only(),
                Role::Viewer => p.is_view(),
            })
            .collect()
    }
}

/// Who the calling platform key is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub key_id: String,
    pub key_name: String,
    pub role: Role,
    pub permissions: Vec<Permission>,
    pub workspace_id: String,
    pub workspace_name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workspace {
    pub workspace_id: String,
    pub name: String,
    pub plan: String,
    /// The weakest act-as identity admitted: `none` (asserted by the agent, the default),
    /// `hmac` or `oidc`.
    #[serde(default)]
    pub actas_min_method: super::actas::ActAsStrength,
    /// Streamed output held back for the output guards, at least (a model's or a request's
    /// larger setting wins): at most 1 MiB and 4,096 tokens.
    #[serde(default)]
    pub filter_window_bytes: u64,
    #[serde(default)]
    pub filter_window_tokens: u64,
    pub revision: u64,
    pub created_at: String,
}

/// `GetIdentity` and `ListWorkspaces` may omit `workspace_id`: they are how a client learns it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OptionalWorkspaceRequest {
    #[serde(default)]
    pub workspace_id: Option<String>,
}

impl WorkspaceScoped for OptionalWorkspaceRequest {
    fn workspace_id(&self) -> Option<&str> {
        self.workspace_id.as_deref()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdentityResponse {
    pub identity: Identity,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListWorkspacesResponse {
    pub workspaces: Vec<Workspace>,
}

/// `UpdateWorkspace`: the workspace's plan (`free` or `pro`; cost quotas need `pro`), the
/// weakest act-as identity it admits and its streamed-output filter window.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateWorkspaceRequest {
    pub workspace_id: String,
    #[serde(default)]
    pub plan: Option<String>,
    #[serde(default)]
    pub actas_min_method: Option<super::actas::ActAsStrength>,
    #[serde(default)]
    pub filter_window_bytes: Option<u64>,
    #[serde(default)]
    pub filter_window_tokens: Option<u64>,
}

impl WorkspaceScoped for UpdateWorkspaceRequest {
    fn workspace_id(&self) -> Option<&str> {
        Some(&self.workspace_id)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceResponse {
    pub workspace: Workspace,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlatformKey {
    pub key_id: String,
    pub workspace_id: String,
    pub name: String,
    pub role: Role,
    pub permissions: Vec<Permission>,
    /// The token's first characters, safe to show.
    pub prefix: String,
    pub created_at: String,
}

/// `permissions`, when given, narrows the role to exactly that list (each must belong to the
/// role).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreatePlatformKeyRequest {
    pub workspace_id: String,
    pub name: String,
    pub role: Role,
    #[serde(default)]
    pub permissions: Option<Vec<Permission>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatePlatformKeyResponse {
    pub platform_key: PlatformKey,
    /// Shown once.
    pub token: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListPlatformKeysRequest {
    pub workspace_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListPlatformKeysResponse {
    pub platform_keys: Vec<PlatformKey>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RevokePlatformKeyRequest {
    pub workspace_id: String,
    pub key_id: String,
}

/// A gateway deployment: one or more gateway replicas sharing a token and a public URL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deployment {
    pub deployment_id: String,
    pub workspace_id: String,
    pub name: String,
    pub public_url: String,
    pub prefix: String,
    pub created_at: String,
    /// When a gateway holding this token last fetched a snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen_at: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateDeploymentRequest {
    pub workspace_id: String,
    pub name: String,
    pub public_url: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateDeploymentResponse {
    pub deployment: Deployment,
    /// `svc_dt_…`, shown once.
    pub token: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListDeploymentsRequest {
    pub workspace_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListDeploymentsResponse {
    pub deployments: Vec<Deployment>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RevokeDeploymentRequest {
    pub workspace_id: String,
    pub deployment_id: String,
}

scoped!(
    CreatePlatformKeyRequest,
    ListPlatformKeysRequest,
    RevokePlatformKeyRequest,
    CreateDeploymentRequest,
    ListDeploymentsRequest,
    RevokeDeploymentRequest,
);
