//! LLM spend quotas: `CreateLLMQuota`, `UpdateLLMQuota`, `ListLLMQuotas`, `DeleteLLMQuota`.
//! Limits are integer micro-USD (1,000,000 = 1 USD); windows are UTC days or months.

use serde::{Deserialize, Serialize};

use super::common::empty_as_none;
use super::scoped;

/// The largest quota limit: 2⁵³ − 1 micro-USD (about 9 billion USD), the largest integer every
/// JSON client holds exactly.
pub const MAX_LIMIT_MICROS: u64 = (1 << 53) - 1;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuotaSubject {
    #[default]
    Workspace,
    Agent,
    /// A verified end user, by OIDC `sub` (`subject_key`). The CLI spells it `act-as`.
    #[serde(alias = "act-as")]
    ActAs,
    Pool,
    Model,
    Gateway,
}

impl QuotaSubject {
    pub const ALL: [QuotaSubject; 6] = [
        QuotaSubject::Workspace,
        QuotaSubject::Agent,
        QuotaSubject::ActAs,
        QuotaSubject::Pool,
        QuotaSubject::Model,
        QuotaSubject::Gateway,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            QuotaSubject::Workspace => "workspace",
            QuotaSubject::Agent => "agent",
            QuotaSubject::ActAs => "act_as",
            QuotaSubject::Pool => "pool",
            QuotaSubject::Model => "model",
            QuotaSubject::Gateway => "gateway",
        }
    }

    /// Accepts `act-as` too.
    pub fn parse(s: &str) -> Option<Self> {
        let s = if s == "act-as" { "act_as" } else { s };
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuotaWindow {
    /// From UTC midnight.
    Daily,
    /// From the UTC start of the month.
    #[default]
    Monthly,
}

impl QuotaWindow {
    pub fn as_str(self) -> &'static str {
        match self {
            QuotaWindow::Daily => "daily",
            QuotaWindow::Monthly => "monthly",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [QuotaWindow::Daily, QuotaWindow::Monthly]
            .into_iter()
            .find(|w| w.as_str() == s)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LLMQuota {
    pub quota_id: String,
    pub workspace_id: String,
    pub subject_type: QuotaSubject,
    /// The agent, pool, model or gateway id (the workspace's id for `workspace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject_id: Option<String>,
    /// For `act_as`: the verified end user's OIDC `sub`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject_key: Option<String>,
    /// Model quotas only: the pool the quota is scoped to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_id: Option<String>,
    pub limit_micros: u64,
    pub window: QuotaWindow,
    pub name: String,
    pub enabled: bool,
    pub scope: String,
    pub per_caller: bool,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateLLMQuotaRequest {
    pub workspace_id: String,
    pub subject_type: QuotaSubject,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub subject_id: Option<String>,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub subject_key: Option<String>,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub pool_id: Option<String>,
    pub limit_micros: u64,
    /// Default `monthly`.
    #[serde(default)]
    pub window: Option<QuotaWindow>,
    #[serde(default)]
    pub name: Option<String>,
    /// Default `total`.
    #[serde(default, deserialize_with = "empty_as_none")]
    pub scope: Option<String>,
    #[serde(default)]
    pub per_caller: Option<bool>,
    /// Create without enforcing (`enabled=false`).
    #[serde(default)]
    pub disabled: Option<bool>,
}

/// Omitted fields keep their values. The subject fields are accepted only to refuse them
/// clearly: a quota's subject never changes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateLLMQuotaRequest {
    pub workspace_id: String,
    pub quota_id: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub limit_micros: Option<u64>,
    #[serde(default)]
    pub window: Option<QuotaWindow>,
    #[serde(default)]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject_type: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject_id: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject_key: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_id: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_caller: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListLLMQuotasRequest {
    pub workspace_id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeleteLLMQuotaRequest {
    pub workspace_id: String,
    pub quota_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaResponse {
    pub quota: LLMQuota,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListLLMQuotasResponse {
    pub quotas: Vec<LLMQuota>,
}

/// `SetGatewayQuota` (the MCP tool `svc_gateway_quota_set`): a spend quota on one gateway.
/// The gateway variants (`UpdateGatewayQuota`, `ListGatewayQuotas`, `RemoveGatewayQuota`) take
/// the LLM-quota requests and refuse quota ids of other subjects.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetGatewayQuotaRequest {
    pub workspace_id: String,
    pub gateway_id: String,
    pub limit_micros: u64,
    /// Default `monthly`.
    #[serde(default)]
    pub window: Option<QuotaWindow>,
    #[serde(default)]
    pub name: Option<String>,
    /// Create without enforcing (`enabled=false`).
    #[serde(default)]
    pub disabled: Option<bool>,
}

/// `ListGatewayQuotas`: the gateway quotas of the workspace, or of one gateway.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListGatewayQuotasRequest {
    pub workspace_id: String,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub gateway_id: Option<String>,
}

scoped!(
    SetGatewayQuotaRequest,
    ListGatewayQuotasRequest,
    CreateLLMQuotaRequest,
    UpdateLLMQuotaRequest,
    ListLLMQuotasRequest,
    DeleteLLMQuotaRequest,
);
