//! Catalog adapters: the REST services an administrator installs as `rest` tool connections,
//! and their install, upgrade and uninstall.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::common::{empty_as_none, CredentialType};
use super::scoped;
use super::tools::ToolConnection;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListCatalogServicesRequest {
    pub workspace_id: String,
}

/// One adapter, as its newest enabled version describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogService {
    pub slug: String,
    pub title: String,
    pub description: String,
    /// The version an install pins.
    pub version: u32,
    /// `none` or `api-key`.
    pub auth_method: String,
    /// The header the credential is sent in: the key of `secret_values` at install.
    pub auth_header_name: String,
    pub supports_per_user: bool,
    /// Its operations (the tools it offers).
    pub operations: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListCatalogServicesResponse {
    pub services: Vec<CatalogService>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstallCatalogConnectionRequest {
    pub workspace_id: String,
    pub slug: String,
    pub name: String,
    /// `{auth_header_name: value}`; empty for adapters with auth method `none` and for
    /// per-user installs.
    #[serde(default)]
    pub secret_values: Option<BTreeMap<String, String>>,
    /// `shared` (default) or `per-user` (only where the adapter supports it).
    #[serde(default, deserialize_with = "empty_as_none")]
    pub credential_type: Option<CredentialType>,
    /// The operations to offer; all when empty.
    #[serde(default)]
    pub tool_filter: Option<Vec<String>>,
    /// Replaces the adapter's base URL (a self-hosted service, such as GitHub Enterprise).
    #[serde(default)]
    pub base_url: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstallCatalogConnectionResponse {
    pub connection_id: String,
    pub tool: ToolConnection,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UpgradeCatalogConnectionResponse {
    pub tool: ToolConnection,
    pub from_version: u32,
    pub to_version: u32,
}

scoped!(ListCatalogServicesRequest, InstallCatalogConnectionRequest);
