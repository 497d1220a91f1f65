//! Compiling one model connection: where its calls go (its provider's API at its base URL, or
//! the cloud's regional endpoint) and how they are authenticated (stored headers, SigV4 with
//! stored keys or the gateway's AWS identity, a Google token from a service-account key or the
//! gateway's Google identity); then the pools of them and what each gateway offers.

use std::collections::HashMap;
use std::sync::Arc;

use http::{HeaderName, HeaderValue};
use portcullis_shared::api::{AuthMethod, CredentialType};
use portcullis_shared::policy::{self, Kind};
use portcullis_shared::prices;
use portcullis_shared::provider::{self, Api, Cloud, Provider};
use portcullis_shared::snapshot::{SnapGateway, SnapModel, Snapshot};

use super::table::{
    AwsSource, Credential, Endpoint, GatewayModels, GoogleSource, ModelEntry, ModelRuntime,
    PoolEntry, PoolMember, Target,
};
use crate::cloud::{aws, google};

/// The workspace's models and pools, by connection and pool id.
pub struct Models<'a> {
    models: HashMap<&'a str, Arc<ModelEntry>>,
    pools: HashMap<&'a str, Arc<PoolEntry>>,
}

/// Every model and pool of `snap`; each one's error in `errors`.
pub fn models<'a>(
    snap: &'a Snapshot,
    runtime: &ModelRuntime,
    errors: &mut Vec<String>,
) -> Models<'a> {
    // The workspace's window is every model's floor.
    let floor = filter_window(snap.filter_window_bytes, snap.filter_window_tokens);
    let mut models = HashMap::new();
    for m in &snap.models {
        match model_entry(m, runtime, floor) {
            Ok(entry) => {
                models.insert(m.connection_id.as_str(), Arc::new(entry));
            }
            Err(e) => errors.push(format!("model {}: {e}", m.name)),
        }
    }
    let mut pools = HashMap::new();
    for p in &snap.pools {
        let mut members = Vec::new();
        for m in &p.members {
            match models.get(m.connection_id.as_str()) {
                Some(model) => members.push(PoolMember {
                    model: Arc::clone(model),
                    weight: m.weight,
                    priority: m.priority,
                }),
                None => errors.push(format!(
                    "pool {}: member {} is not in the snapshot",
                    p.name, m.connection_id
                )),
            }
        }
        let pool = PoolEntry {
            id: p.pool_id.clone(),
            name: p.name.clone(),
            strategy: p.strategy,
            members,
            uid: policy::uid(Kind::Pool, &p.name),
            cursor: runtime.cursor(&p.pool_id),
        };
        pools.insert(p.pool_id.as_str(), Arc::new(pool));
    }
    Models { models, pools }
}

impl Models<'_> {
    /// What gateway `g` offers: its pools and direct models by name, each with the decision
    /// slot `next_slot` gives it.
    pub fn gateway(
        &self,
        g: &SnapGateway,
        next_slot: &mut impl FnMut() -> usize,
        errors: &mut Vec<String>,
    ) -> GatewayModels {
        let mut out = GatewayModels::default();
        for id in &g.pool_ids {
            match self.pools.get(id.as_str()) {
                Some(p) => out.add(&p.name, Target::Pool(Arc::clone(p)), next_slot()),
                None => errors.push(format!(
                    "gateway {}: pool {id} is not in the snapshot",
                    g.name
                )),
            }
        }
        for id in &g.model_ids {
            match self.models.get(id.as_str()) {
                Some(m) => out.add(&m.name, Target::Model(Arc::clone(m)), next_slot()),
                None => errors.push(format!(
                    "gateway {}: model {id} is not in the snapshot",
                    g.name
                )),
            }
        }
        out.target_names.sort();
        out
    }
}

fn model_entry(m: &SnapModel, runtime: &ModelRuntime, floor: usize) -> Result<ModelEntry, String> {
    let provider =
        provider::find(&m.provider).ok_or_else(|| format!("unknown provider {}", m.provider))?;
    let config = Config(m);
    let upstream_model = config
        .text("model")
        .ok_or("provider_config.model is missing")?
        .to_string();
    let endpoint = endpoint(m, provider, &config, &upstream_model)?;
    let credential = credential(m, provider, &config, runtime)?;
    let price = prices::resolve(m.provider_config.get("pricing"), &upstream_model);
    Ok(ModelEntry {
        id: m.connection_id.clone(),
        name: m.name.clone(),
        provider,
        price,
        upstream_model,
        endpoint,
        credential,
        secret_values: crate::error::scrub_list(m.secret_values.0.values()),
        uid: policy::uid(Kind::Model, &m.name),
        health: runtime.health(&m.connection_id),
        filter_window: filter_window(m.filter_window_bytes, m.filter_window_tokens).max(floor),
        oauth_grant: m.oauth_grant,
        anthropic_betas: config.names("anthropic_betas"),
        server_tools: config.names("server_tools"),
    })
}

/// Bytes of streamed output held back for the guards: the larger of the model's two settings,
/// a token counted as four bytes.
pub fn filter_window(bytes: u64, tokens: u64) -> usize {
    usize::try_from(bytes.max(tokens.saturating_mul(4))).unwrap_or(usize::MAX)
}

/// A model's `provider_config` text fields.
struct Config<'a>(&'a SnapModel);

impl Config<'_> {
    /// An array of names (an allow list); none when absent.
    fn names(&self, key: &str) -> Vec<String> {
        self.0
            .provider_config
            .get(key)
            .and_then(|v| v.as_array())
            .map(|names| {
                names
                    .iter()
                    .filter_map(|n| n.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn text(&self, key: &str) -> Option<&str> {
        self.0
            .provider_config
            .get(key)
            .and_then(|v| v.as_str())
            .filter(|s| !s.is_empty())
    }
}

fn parse(url: &str) -> Result<reqwest::Url, String> {
    reqwest::Url::parse(url).map_err(|e| format!("URL {url}: {e}"))
}

/// What a path segment keeps as it is: letters, digits, `*-._`, and `@` (Vertex model
/// versions); everything else is percent-encoded (a Bedrock model id or ARN holds `:` and `/`).
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'*')
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'@');

/// A path segment as URLs carry it.
fn segment(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, SEGMENT).to_string()
}

/// Where a model's calls go: its provider's API at its base URL.
fn endpoint(
    m: &SnapModel,
    provider: &'static Provider,
    config: &Config<'_>,
    model: &str,
) -> Result<Endpoint, String> {
    let configured = config.text("base_url").map(|b| b.trim_end_matches('/'));
    let pair = |whole: String, stream: String| Ok::<_, String>((parse(&whole)?, parse(&stream)?));
    Ok(match provider.api {
        Api::Gemini => {
            let base = provider.base_url(configured).unwrap_or_default();
            let at = format!("{base}/v1beta/models/{}", segment(model));
            let (whole, stream) = pair(
                format!("{at}:generateContent"),
                format!("{at}:streamGenerateContent?alt=sse"),
            )?;
            Endpoint::Gemini { whole, stream }
        }
        Api::Vertex => vertex(m, config, configured, model)?,
        Api::Bedrock => {
            let region = config.text("region").unwrap_or("us-east-1");
            let default = format!("https://bedrock-runtime.{region}.amazonaws.com");
            let at = format!(
                "{}/model/{}",
                configured.unwrap_or(&default),
                segment(model)
            );
            let (whole, stream) = pair(format!("{at}/converse"), format!("{at}/converse-stream"))?;
            Endpoint::Bedrock { whole, stream }
        }
        Api::AnthropicMessages => {
            let base = provider.base_url(configured).unwrap_or_default();
            // `https://api.anthropic.com`, or a base that already ends in `/v1`.
            let path = if base.ends_with("/v1") {
                "/messages"
            } else {
                "/v1/messages"
            };
            Endpoint::AnthropicMessages(parse(&format!("{base}{path}"))?)
        }
        Api::Custom => {
            let base = configured.ok_or("custom needs provider_config.base_url")?;
            Endpoint::Custom {
                chat: parse(&format!("{base}/chat/completions"))?,
                messages: parse(&format!("{base}/messages"))?,
            }
        }
        Api::OpenAiChat => match provider.base_url(configured) {
            Some(base) => Endpoint::OpenAiChat(parse(&format!(
                "{}/chat/completions",
                base.trim_end_matches('/')
            ))?),
            None => Endpoint::Unsupported(format!("model '{}' has no base_url configured", m.name)),
        },
    })
}

/// Vertex: Gemini models by `generateContent`, Claude models by `rawPredict`, both under the
/// project and location.
fn vertex(
    m: &SnapModel,
    config: &Config<'_>,
    configured: Option<&str>,
    model: &str,
) -> Result<Endpoint, String> {
    let (Some(project), Some(location)) = (config.text("project"), config.text("location")) else {
        return Ok(Endpoint::Unsupported(format!(
            "model '{}' needs provider_config.project and location",
            m.name
        )));
    };
    let default = match location {
        "global" => "https://aiplatform.googleapis.com".to_string(),
        region => format!("https://{region}-aiplatform.googleapis.com"),
    };
    let base = configured.unwrap_or(&default);
    let publisher = if model.starts_with("claude") {
        "anthropic"
    } else {
        "google"
    };
    let at = format!(
        "{base}/v1/projects/{}/locations/{}/publishers/{publisher}/models/{}",
        segment(project),
        segment(location),
        segment(model)
    );
    Ok(if publisher == "anthropic" {
        Endpoint::VertexAnthropic {
            whole: parse(&format!("{at}:rawPredict"))?,
            stream: parse(&format!("{at}:streamRawPredict"))?,
        }
    } else {
        Endpoint::Gemini {
            whole: parse(&format!("{at}:generateContent"))?,
            stream: parse(&format!("{at}:streamGenerateContent?alt=sse"))?,
        }
    })
}

/// How a model's upstream is authenticated.
fn credential(
    m: &SnapModel,
    provider: &'static Provider,
    config: &Config<'_>,
    runtime: &ModelRuntime,
) -> Result<Credential, String> {
    let secrets = &m.secret_values.0;
    Ok(match (m.auth_method, m.credential_type) {
        (AuthMethod::None, _) if provider.cloud.is_some() => {
            gateway_identity(provider, config, runtime)
        }
        (AuthMethod::None, _) => Credential::None,
        (AuthMethod::ApiKey, CredentialType::Shared) if secrets.is_empty() => {
            Credential::Unavailable(format!(
                "model '{}' has no stored credential; an administrator must set its secret_values",
                m.name
            ))
        }
        (AuthMethod::ApiKey, CredentialType::Shared) => match provider.cloud {
            // A Bedrock API key is a bearer header like any other.
            Some(Cloud::Aws) if !secrets.contains_key("Authorization") => Credential::Aws {
                region: config.text("region").unwrap_or("us-east-1").to_string(),
                source: AwsSource::Keys(aws_keys(secrets)?),
            },
            Some(Cloud::Google) => {
                let json = secrets
                    .get("service_account_json")
                    .ok_or("vertex needs secret_values.service_account_json")?;
                let tokens = runtime.google_tokens(json);
                match google::ServiceAccount::parse(json, tokens) {
                    Ok(sa) => Credential::Google(GoogleSource::ServiceAccount(Arc::new(sa))),
                    Err(why) => Credential::Unavailable(format!("model '{}': {why}", m.name)),
                }
            }
            _ => Credential::Headers(headers(secrets)?),
        },
        (AuthMethod::OAuth, CredentialType::Shared) => Credential::SharedOAuth,
        // Each person's own key or grant is fetched when they call (`crate::peruser`).
        (AuthMethod::ApiKey | AuthMethod::OAuth, _) => Credential::PerUser,
    })
}

/// The gateway's own cloud identity, with the role to assume for Bedrock.
fn gateway_identity(
    provider: &Provider,
    config: &Config<'_>,
    runtime: &ModelRuntime,
) -> Credential {
    if provider.cloud == Some(Cloud::Google) {
        return Credential::Google(GoogleSource::Gateway);
    }
    let role = config.text("role_arn").map(|arn| {
        let external_id = config.text("external_id").map(str::to_string);
        Arc::new(aws::Role {
            credentials: runtime.aws_role(arn, external_id.as_deref()),
            arn: arn.to_string(),
            external_id,
        })
    });
    Credential::Aws {
        region: config.text("region").unwrap_or("us-east-1").to_string(),
        source: AwsSource::Gateway(role),
    }
}

fn aws_keys(
    secrets: &std::collections::BTreeMap<String, String>,
) -> Result<aws_credential_types::Credentials, String> {
    let field = |k: &str| {
        secrets
            .get(k)
            .cloned()
            .ok_or_else(|| format!("bedrock needs secret_values.{k}"))
    };
    Ok(aws_credential_types::Credentials::new(
        field("aws_access_key_id")?,
        field("aws_secret_access_key")?,
        secrets.get("aws_session_token").cloned(),
        None,
        "portcullis-model-connection",
    ))
}

fn headers(
    secrets: &std::collections::BTreeMap<String, String>,
) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
    let mut out = Vec::with_capacity(secrets.len());
    for (name, value) in secrets {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("secret key {name:?} is not a header name"))?;
        let mut value = HeaderValue::from_str(value)
            .map_err(|_| format!("secret {name} is not a valid header value"))?;
        value.set_sensitive(true);
        out.push((name, value));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::segment;

    #[test]
    fn path_segments_encode_what_a_segment_cannot_hold() {
        assert_eq!(
            segment("us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
            "us.anthropic.claude-sonnet-4-5-20250929-v1%3A0"
        );
        assert_eq!(
            segment("arn:aws:bedrock:us-east-1:123:inference-profile/x"),
            "arn%3Aaws%3Abedrock%3Aus-east-1%3A123%3Ainference-profile%2Fx"
        );
        assert_eq!(
            segment("claude-sonnet-4-5@20250929"),
            "claude-sonnet-4-5@20250929"
        );
        assert_eq!(segment("a b~+*é"), "a%20b%7E%2B*%C3%A9");
    }
}
