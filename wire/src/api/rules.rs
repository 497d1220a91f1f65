//! Rule bundles: admin-deployed Cedar policies and the managed bundles compiled from agents.

use serde::{Deserialize, Serialize};

use super::common::{empty_as_none, is_false};
use super::scoped;

/// Where a bundle applies: the whole workspace, one gateway, or one agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BundleScope {
    Workspace,
    Gateway,
    Agent,
}

impl BundleScope {
    pub fn as_str(self) -> &'static str {
        match self {
            BundleScope::Workspace => "workspace",
            BundleScope::Gateway => "gateway",
            BundleScope::Agent => "agent",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            BundleScope::Workspace,
            BundleScope::Gateway,
            BundleScope::Agent,
        ]
        .into_iter()
        .find(|m| m.as_str() == s)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleBundle {
    pub bundle_id: String,
    pub workspace_id: String,
    pub name: String,
    pub scope: BundleScope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope_id: Option<String>,
    /// Compiled from an agent's fields by the control plane; cannot be deployed or deleted.
    #[serde(default, skip_serializing_if = "is_false")]
    pub managed: bool,
    /// Cedar text.
    pub policies: String,
    /// The ids a denial reports as `determining_policy`.
    pub policy_ids: Vec<String>,
    pub created_at: String,
}

/// Deploying a bundle whose `name` already exists in the same scope replaces it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeployRuleBundleRequest {
    pub workspace_id: String,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub scope: Option<BundleScope>,
    #[serde(default)]
    pub scope_id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    pub policies: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListRuleBundlesRequest {
    pub workspace_id: String,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub scope: Option<BundleScope>,
    #[serde(default)]
    pub scope_id: Option<String>,
    /// Also list the managed bundles compiled from agents.
    #[serde(default)]
    pub include_managed: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeleteRuleBundleRequest {
    pub workspace_id: String,
    pub bundle_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleBundleResponse {
    pub bundle: RuleBundle,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListRuleBundlesResponse {
    pub bundles: Vec<RuleBundle>,
}

scoped!(
    DeployRuleBundleRequest,
    ListRuleBundlesRequest,
    DeleteRuleBundleRequest
);
