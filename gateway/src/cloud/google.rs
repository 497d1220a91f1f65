//! Google bearer tokens for Vertex: a service-account key's JWT-bearer grant (RFC 7523) at the
//! key's own `token_uri`, signed RS256 by `jsonwebtoken`; or the gateway's own application
//! default credentials through `gcp_auth` (`GOOGLE_APPLICATION_CREDENTIALS`, the metadata
//! server, gcloud). Tokens are used until 60 s before they expire.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::cache::Expiring;
use crate::error::GatewayError;

/// The one scope Vertex calls need.
pub const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
/// A token is replaced this long before it expires.
pub const MARGIN: Duration = Duration::from_secs(60);
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// How long a token request may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// A service-account key, read once per snapshot; its tokens are cached per key and outlive
/// snapshots.
pub struct ServiceAccount {
    client_email: String,
    key_id: Option<String>,
    key: jsonwebtoken::EncodingKey,
    token_uri: String,
    tokens: Arc<Expiring<String>>,
}

#[derive(Deserialize)]
struct KeyFile {
    client_email: String,
    private_key: String,
    #[serde(default)]
    private_key_id: Option<String>,
    token_uri: String,
}

#[derive(Serialize)]
struct Claims<'a> {
    iss: &'a str,
    scope: &'a str,
    aud: &'a str,
    iat: i64,
    exp: i64,
}

#[derive(Deserialize)]
struct TokenReply {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

impl ServiceAccount {
    /// Reads a key file's JSON; `tokens` is its token cache.
    pub fn parse(json: &str, tokens: Arc<Expiring<String>>) -> Result<Self, String> {
        let key: KeyFile = serde_json::from_str(json)
            .map_err(|e| format!("service_account_json is not a service-account key file: {e}"))?;
        let pem = jsonwebtoken::EncodingKey::from_rsa_pem(key.private_key.as_bytes())
            .map_err(|_| "service_account_json: private_key is not an RSA PEM key".to_string())?;
        Ok(Self {
            client_email: key.client_email,
            key_id: key.private_key_id,
            key: pem,
            token_uri: key.token_uri,
            tokens,
        })
    }

    /// A bearer token, from the cache or the key's token endpoint.
    pub async fn token(&self, http: &reqwest::Client, model: &str) -> Result<String, GatewayError> {
        self.tokens.get(|| self.fetch(http, model)).await
    }

    async fn fetch(
        &self,
        http: &reqwest::Client,
        model: &str,
    ) -> Result<(String, Option<Duration>), GatewayError> {
        let failed = |why: String| {
            GatewayError::Upstream(format!(
                "model '{model}': no token for the service account {}: {why}",
                self.client_email
            ))
        };
        let now = chrono::Utc::now().timestamp();
        let claims = Claims {
            iss: &self.client_email,
            scope: SCOPE,
            aud: &self.token_uri,
            iat: now,
            exp: now + 3600,
        };
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
        header.kid = self.key_id.clone();
        let assertion = jsonwebtoken::encode(&header, &claims, &self.key)
            .map_err(|e| failed(format!("signing the assertion: {e}")))?;
        let response = http
            .post(&self.token_uri)
            .timeout(FETCH_TIMEOUT)
            .form(&[("grant_type", JWT_BEARER), ("assertion", &assertion)])
            .send()
            .await
            .map_err(|e| failed(format!("the token endpoint did not answer: {e}")))?;
        let status = response.status();
        if !status.is_success() {
            return Err(failed(format!("the token endpoint answered {status}")));
        }
        let reply: TokenReply = response
            .json()
            .await
            .map_err(|e| failed(format!("the token endpoint's answer is not a token: {e}")))?;
        let valid = Duration::from_secs(reply.expires_in.unwrap_or(3600));
        Ok((reply.access_token, Some(valid)))
    }
}

/// The gateway's own Google identity (only with `--cloud-identity`).
pub struct Ambient {
    provider: tokio::sync::OnceCell<Arc<dyn gcp_auth::TokenProvider>>,
    tokens: Expiring<String>,
}

impl Default for Ambient {
    fn default() -> Self {
        Self {
            provider: tokio::sync::OnceCell::new(),
            tokens: Expiring::new(MARGIN),
        }
    }
}

impl Ambient {
    pub async fn token(&self, model: &str) -> Result<String, GatewayError> {
        let failed = |why: String| {
            GatewayError::Upstream(format!(
                "model '{model}': the gateway's Google identity gave no token: {why}"
            ))
        };
        self.tokens
            .get(|| async {
                let provider = self
                    .provider
                    .get_or_try_init(gcp_auth::provider)
                    .await
                    .map_err(|e| failed(super::explain(&e)))?;
                let token = provider
                    .token(&[SCOPE])
                    .await
                    .map_err(|e| failed(super::explain(&e)))?;
                let left = (token.expires_at() - chrono::Utc::now())
                    .to_std()
                    .unwrap_or_default();
                Ok((token.as_str().to_string(), Some(left)))
            })
            .await
    }
}
