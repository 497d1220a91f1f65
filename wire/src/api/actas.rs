//! Act-as verification providers (`CreateActAsProvider` … `DeleteActAsProvider`): the
//! workspace's trusted OpenID issuers (or shared HMAC secrets) that agents name with
//! `actas_provider_id`, and the workspace's floor on act-as strength.

use serde::{Deserialize, Serialize};

use super::scoped;

/// How a provider verifies identities: an OpenID issuer's signed tokens, or a shared secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderMethod {
    Oidc,
    Hmac,
}

impl ProviderMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderMethod::Oidc => "oidc",
            ProviderMethod::Hmac => "hmac",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [ProviderMethod::Oidc, ProviderMethod::Hmac]
            .into_iter()
            .find(|m| m.as_str() == s)
    }
}

/// The weakest act-as identity a workspace admits (`actas_min_method`). `none` identities are
/// asserted by the agent; `hmac` and `oidc` ones are proven. Ordered weakest first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActAsStrength {
    #[default]
    None,
    Hmac,
    Oidc,
}

impl ActAsStrength {
    pub fn as_str(self) -> &'static str {
        match self {
            ActAsStrength::None => "none",
            ActAsStrength::Hmac => "hmac",
            ActAsStrength::Oidc => "oidc",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            ActAsStrength::None,
            ActAsStrength::Hmac,
            ActAsStrength::Oidc,
        ]
        .into_iter()
        .find(|m| m.as_str() == s)
    }
}

/// A verification provider as the API shows it; an HMAC secret is never returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActAsProvider {
    pub provider_id: String,
    pub workspace_id: String,
    pub name: String,
    pub method: ProviderMethod,
    /// `oidc`: the issuer (`iss`), also where discovery starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// `oidc`: the value a token's `aud` must contain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// `oidc`: the key set, when discovery is not to be used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks_url: Option<String>,
    pub email_claim: String,
    pub groups_claim: String,
    /// `oidc`: whether an email counts without `email_verified: true` in the token (for an
    /// issuer that only issues verified emails); false unless set.
    #[serde(default)]
    pub trust_unverified_email: bool,
    pub hmac_secret_set: bool,
    /// `oidc`: the client people sign in with for interactive access, where the issuer offers
    /// no dynamic registration (its secret is never returned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signin_client_id: Option<String>,
    #[serde(default)]
    pub signin_client_secret_set: bool,
    /// Agents that name this provider.
    pub agent_count: u64,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateActAsProviderRequest {
    pub workspace_id: String,
    pub name: String,
    /// `oidc` when left out.
    #[serde(default)]
    pub method: Option<ProviderMethod>,
    #[serde(default)]
    pub issuer: Option<String>,
    #[serde(default)]
    pub audience: Option<String>,
    #[serde(default)]
    pub jwks_url: Option<String>,
    /// The claim holding the email (default `email`).
    #[serde(default)]
    pub email_claim: Option<String>,
    /// The claim holding the group list (default `groups`).
    #[serde(default)]
    pub groups_claim: Option<String>,
    /// `oidc`: take a token's email even without `email_verified: true` (default false).
    #[serde(default)]
    pub trust_unverified_email: Option<bool>,
    #[serde(default)]
    pub hmac_secret: Option<String>,
    /// `oidc`: a client registered at the issuer for interactive sign-in, with redirect URI
    /// `{base_url}/oauth2/signin/callback` (without one, this service registers itself).
    #[serde(default)]
    pub signin_client_id: Option<String>,
    #[serde(default)]
    pub signin_client_secret: Option<String>,
}

/// Fields left out keep their value; `jwks_url: ""` clears it (back to discovery), and
/// `signin_client_id: ""` clears the sign-in client (back to dynamic registration).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateActAsProviderRequest {
    pub workspace_id: String,
    /// The provider's id or name.
    #[serde(alias = "provider")]
    pub provider_id: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub issuer: Option<String>,
    #[serde(default)]
    pub audience: Option<String>,
    #[serde(default)]
    pub jwks_url: Option<String>,
    #[serde(default)]
    pub email_claim: Option<String>,
    #[serde(default)]
    pub groups_claim: Option<String>,
    #[serde(default)]
    pub trust_unverified_email: Option<bool>,
    #[serde(default)]
    pub hmac_secret: Option<String>,
    #[serde(default)]
    pub signin_client_id: Option<String>,
    #[serde(default)]
    pub signin_client_secret: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActAsProviderRefRequest {
    pub workspace_id: String,
    /// The provider's id or name.
    #[serde(alias = "provider")]
    pub provider_id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListActAsProvidersRequest {
    pub workspace_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActAsProviderResponse {
    pub provider: ActAsProvider,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListActAsProvidersResponse {
    pub providers: Vec<ActAsProvider>,
}

scoped!(
    CreateActAsProviderRequest,
    ActAsProviderRefRequest,
    ListActAsProvidersRequest
);
scoped!(UpdateActAsProviderRequest, empty_is_a_value: ["jwks_url", "signin_client_id"]);
