//! AWS credentials for Bedrock and the SigV4 signature over the exact bytes sent
//! (`aws-sigv4`). Credentials are a connection's stored keys, or the gateway's own identity:
//! the default chain of `aws-config` (environment, profile, web identity, ECS and EC2 roles),
//! and with a `role_arn` a role assumed through `aws-sdk-sts`. Temporary credentials are
//! replaced five minutes before they expire.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_credential_types::provider::ProvideCredentials;
use aws_credential_types::Credentials;

use super::cache::Expiring;
use crate::error::GatewayError;

/// Temporary credentials are replaced this long before they expire.
pub const MARGIN: Duration = Duration::from_secs(300);
/// The service name Bedrock's signatures are scoped to.
pub const SERVICE: &str = "bedrock";

/// A role the gateway assumes; its credentials are cached per role and outlive snapshots.
pub struct Role {
    pub arn: String,
    pub external_id: Option<String>,
    pub credentials: Arc<Expiring<Credentials>>,
}

/// The gateway's own AWS identity (only with `--cloud-identity`).
pub struct Ambient {
    config: tokio::sync::OnceCell<aws_config::SdkConfig>,
    chain: Expiring<Credentials>,
}

impl Default for Ambient {
    fn default() -> Self {
        Self {
            config: tokio::sync::OnceCell::new(),
            chain: Expiring::new(MARGIN),
        }
    }
}

fn valid_for(credentials: &Credentials) -> Option<Duration> {
    credentials
        .expiry()
        .map(|at| at.duration_since(SystemTime::now()).unwrap_or_default())
}

impl Ambient {
    async fn config(&self) -> &aws_config::SdkConfig {
        self.config
            .get_or_init(|| async {
                let region = aws_config::meta::region::RegionProviderChain::default_provider()
                    .or_else("us-east-1");
                aws_config::defaults(aws_config::BehaviorVersion::latest())
                    .region(region)
                    .load()
                    .await
            })
            .await
    }

    /// The gateway's credentials, or those of `role` assumed with them.
    pub async fn credentials(
        &self,
        role: Option<&Role>,
        model: &str,
    ) -> Result<Credentials, GatewayError> {
        let failed = |why: String| {
            GatewayError::Upstream(format!(
                "model '{model}': the gateway's AWS identity gave no credentials: {why}"
            ))
        };
        let config = self.config().await;
        let base = self
            .chain
            .get(|| async {
                let provider = config
                    .credentials_provider()
                    .ok_or_else(|| failed("no credential provider is configured".into()))?;
                let c = provider
                    .provide_credentials()
                    .await
                    .map_err(|e| failed(super::explain(&e)))?;
                let valid = valid_for(&c);
                Ok((c, valid))
            })
            .await?;
        let Some(role) = role else {
            return Ok(base);
        };
        role.credentials.get(|| assume(config, role, model)).await
    }
}

/// `sts:AssumeRole` with the gateway's own credentials.
async fn assume(
    config: &aws_config::SdkConfig,
    role: &Role,
    model: &str,
) -> Result<(Credentials, Option<Duration>), GatewayError> {
    let failed = |why: String| {
        GatewayError::Upstream(format!(
            "model '{model}': assuming the role {} failed: {why}",
            role.arn
        ))
    };
    let out = aws_sdk_sts::Client::new(config)
        .assume_role()
        .role_arn(&role.arn)
        .role_session_name("portcullis-gateway")
        .set_external_id(role.external_id.clone())
        .send()
        .await
        .map_err(|e| failed(aws_sdk_sts::error::DisplayErrorContext(e).to_string()))?;
    let c = out
        .credentials()
        .ok_or_else(|| failed("STS returned no credentials".into()))?;
    let expires = SystemTime::try_from(*c.expiration()).ok();
    let credentials = Credentials::new(
        c.access_key_id(),
        c.secret_access_key(),
        Some(c.session_token().to_string()),
        expires,
        "sts-assume-role",
    );
    let valid = valid_for(&credentials);
    Ok((credentials, valid))
}

/// The SigV4 headers (`authorization`, `x-amz-date`, and `x-amz-security-token` for temporary
/// credentials) of a POST of `body` to `url` with `headers`, for Bedrock in `region`.
pub fn sign(
    credentials: &Credentials,
    region: &str,
    url: &reqwest::Url,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Vec<(String, String)>, GatewayError> {
    use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
    use aws_sigv4::sign::v4;
    let failed = |e: &dyn std::fmt::Display| GatewayError::Internal(format!("SigV4 signing: {e}"));
    let identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(SERVICE)
        .time(SystemTime::now())
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| failed(&e))?
        .into();
    let request = SignableRequest::new(
        "POST",
        url.as_str(),
        headers.iter().copied(),
        SignableBody::Bytes(body),
    )
    .map_err(|e| failed(&e))?;
    let (instructions, _) = sign(request, &params).map_err(|e| failed(&e))?.into_parts();
    Ok(instructions
        .headers()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect())
}
