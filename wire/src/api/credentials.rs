//! People's own credentials for per-user connections (tools and models): which exist, and
//! deleting one. The values are never returned.

use serde::{Deserialize, Serialize};

use super::scoped;

/// A tool or model connection's id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserCredentialsRequest {
    pub workspace_id: String,
    pub connection_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserCredential {
    /// The person's verified act-as `sub`.
    pub subject: String,
    pub updated_at: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListUserCredentialsResponse {
    pub credentials: Vec<UserCredential>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeleteUserCredentialRequest {
    pub workspace_id: String,
    pub connection_id: String,
    pub subject: String,
}

scoped!(UserCredentialsRequest, DeleteUserCredentialRequest);
