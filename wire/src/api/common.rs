//! Types used across services: endpoints, references, enums and serde helpers.

use serde::de::{DeserializeOwned, Error as _, IntoDeserializer};
use serde::{Deserialize, Deserializer, Serialize};

/// The four call-ready values of a gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoints {
    /// `{public_base}/gateways/{gateway_id}`
    pub url: String,
    /// `{url}/mcp`
    pub mcp_url: String,
    /// `{url}/v1`
    pub openai_base_url: String,
    /// `{url}` (Anthropic SDKs append `/v1/messages` themselves)
    pub anthropic_base_url: String,
}

impl Endpoints {
    pub fn for_gateway(public_base: &str, gateway_id: &str) -> Self {
        let url = format!(
            "{}/gateways/{}",
            public_base.trim_end_matches('/'),
            gateway_id
        );
        Self {
            mcp_url: format!("{url}/mcp"),
            openai_base_url: format!("{url}/v1"),
            anthropic_base_url: url.clone(),
            url,
        }
    }
}

/// A named reference to another resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ref {
    pub id: String,
    pub name: String,
}

/// An empty reply.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Empty {}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AuthMethod {
    #[serde(rename = "none")]
    None,
    #[serde(rename = "api-key")]
    ApiKey,
    #[serde(rename = "oauth")]
    OAuth,
}

impl AuthMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMethod::None => "none",
            AuthMethod::ApiKey => "api-key",
            AuthMethod::OAuth => "oauth",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [AuthMethod::None, AuthMethod::ApiKey, AuthMethod::OAuth]
            .into_iter()
            .find(|m| m.as_str() == s)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CredentialType {
    #[serde(rename = "none")]
    None,
    #[serde(rename = "shared")]
    Shared,
    #[serde(rename = "per-user")]
    PerUser,
}

impl CredentialType {
    pub fn as_str(self) -> &'static str {
        match self {
            CredentialType::None => "none",
            CredentialType::Shared => "shared",
            CredentialType::PerUser => "per-user",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            CredentialType::None,
            CredentialType::Shared,
            CredentialType::PerUser,
        ]
        .into_iter()
        .find(|m| m.as_str() == s)
    }
}

/// Deserializes an optional enum where an empty string means "not given".
pub fn empty_as_none<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    match Option::<String>::deserialize(d)? {
        None => Ok(None),
        Some(s) if s.is_empty() => Ok(None),
        Some(s) => {
            let de: serde::de::value::StringDeserializer<serde::de::value::Error> =
                s.into_deserializer();
            T::deserialize(de).map(Some).map_err(D::Error::custom)
        }
    }
}

pub(crate) fn is_false(b: &bool) -> bool {
    !*b
}
