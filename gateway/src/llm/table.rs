//! The model step's table: each model connection compiled (its endpoint, credential, price
//! and health), pools of them, and what each gateway offers; and what outlives a revision
//! ([`ModelRuntime`]: health, round-robin cursors, cloud credentials).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cedar_policy::EntityUid;
use http::{HeaderName, HeaderValue};
use portcullis_shared::api::pools::PoolStrategy;
use portcullis_shared::provider::Provider;

use crate::cloud::cache::Expiring;

/// What one gateway offers for `model`.
#[derive(Default)]
pub struct GatewayModels {
    /// Attached pools and direct models, by name, each with its `llm:invoke` decision slot.
    pub targets: HashMap<String, (Target, usize)>,
    /// Target names in order, for `/v1/models`.
    pub target_names: Vec<String>,
}

impl GatewayModels {
    pub(super) fn add(&mut self, name: &str, target: Target, slot: usize) {
        self.target_names.push(name.to_string());
        self.targets.insert(name.to_string(), (target, slot));
    }

    /// Each target's id and the ids of the members that may serve it, for the guards.
    pub fn places(&self) -> Vec<crate::guard::scope::ModelPlace<'_>> {
        use crate::guard::scope::ModelPlace;
        self.targets
            .values()
            .map(|(target, _)| match target {
                Target::Model(m) => ModelPlace {
                    target_id: &m.id,
                    member_ids: vec![&m.id],
                },
                Target::Pool(p) => ModelPlace {
                    target_id: &p.id,
                    member_ids: p.members.iter().map(|m| m.model.id.as_str()).collect(),
                },
            })
            .collect()
    }
}

#[derive(Clone)]
pub enum Target {
    Model(Arc<ModelEntry>),
    Pool(Arc<PoolEntry>),
}

impl Target {
    pub fn uid(&self) -> &EntityUid {
        match self {
            Target::Model(m) => &m.uid,
            Target::Pool(p) => &p.uid,
        }
    }

    /// `model` or `pool`, its id and name (for audit).
    pub fn describe(&self) -> (&'static str, &str, &str) {
        match self {
            Target::Model(m) => ("model", &m.id, &m.name),
            Target::Pool(p) => ("pool", &p.id, &p.name),
        }
    }
}

/// How the gateway authenticates to a model's upstream.
pub enum Credential {
    /// Nothing is sent.
    None,
    /// These headers are sent on every call.
    Headers(Vec<(HeaderName, HeaderValue)>),
    /// A SigV4 signature for Bedrock in `region`.
    Aws { region: String, source: AwsSource },
    /// A Google bearer token (Vertex).
    Google(GoogleSource),
    /// Each person's own key or OAuth grant: fetched per call ([`crate::peruser`]) and sent
    /// as headers.
    PerUser,
    /// The connection's shared OAuth grant: its current access token, asked of the control
    /// plane (which refreshes it) and cached briefly.
    SharedOAuth,
    /// Credentials that cannot be sent (a missing key, an unreadable service account): calls
    /// fail with why.
    Unavailable(String),
}

/// Whose AWS credentials sign a call.
pub enum AwsSource {
    /// The connection's stored keys.
    Keys(aws_credential_types::Credentials),
    /// The gateway's own identity, assuming this role when there is one.
    Gateway(Option<Arc<crate::cloud::aws::Role>>),
}

/// Whose Google token authorizes a call.
pub enum GoogleSource {
    /// The connection's stored service-account key.
    ServiceAccount(Arc<crate::cloud::google::ServiceAccount>),
    /// The gateway's own identity.
    Gateway,
}

impl Credential {
    /// Whether calls need the gateway's own cloud identity (`--cloud-identity`).
    pub fn uses_gateway_identity(&self) -> bool {
        matches!(
            self,
            Credential::Aws {
                source: AwsSource::Gateway(_),
                ..
            } | Credential::Google(GoogleSource::Gateway)
        )
    }
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Credential::None => "None",
            Credential::Headers(_) => "Headers",
            Credential::Aws { .. } => "Aws",
            Credential::Google(_) => "Google",
            Credential::PerUser => "PerUser",
            Credential::SharedOAuth => "SharedOAuth",
            Credential::Unavailable(_) => "Unavailable",
        })
    }
}

pub struct ModelEntry {
    pub id: String,
    pub name: String,
    pub provider: &'static Provider,
    /// The connection's price override, else the shipped table's price; `None` when unknown.
    pub price: Option<(
        portcullis_shared::prices::PriceSource,
        portcullis_shared::prices::Price,
    )>,
    pub upstream_model: String,
    /// Where calls go, and in which dialect; parsed once.
    pub endpoint: Endpoint,
    pub credential: Credential,
    /// Secret values, to scrub from anything passed back to callers.
    pub secret_values: Vec<String>,
    pub uid: EntityUid,
    pub health: Arc<Health>,
    /// Bytes of streamed output held back before the guards release it (at least the longest
    /// match a guard can make, and at least the workspace's window).
    pub filter_window: usize,
    /// Which shared OAuth grant the model's calls use (see [`SnapModel::oauth_grant`]).
    pub oauth_grant: Option<i64>,
    /// `anthropic-beta` values callers may pass through (`provider_config.anthropic_betas`).
    pub anthropic_betas: Vec<String>,
    /// Anthropic server tool types callers may pass through (`provider_config.server_tools`).
    pub server_tools: Vec<String>,
}

/// Where a model's calls go, and in which dialect.
#[derive(Debug, Clone)]
pub enum Endpoint {
    /// `{base}/chat/completions`.
    OpenAiChat(reqwest::Url),
    /// `{base}/v1/messages`.
    AnthropicMessages(reqwest::Url),
    /// Claude on Vertex: `:rawPredict` and `:streamRawPredict`.
    VertexAnthropic {
        whole: reqwest::Url,
        stream: reqwest::Url,
    },
    /// Gemini, by the Gemini API or on Vertex: `:generateContent` and
    /// `:streamGenerateContent?alt=sse`.
    Gemini {
        whole: reqwest::Url,
        stream: reqwest::Url,
    },
    /// Bedrock: `/converse` and `/converse-stream`.
    Bedrock {
        whole: reqwest::Url,
        stream: reqwest::Url,
    },
    /// `custom`: `{base}` plus the caller's path under `/v1`, for each inbound API.
    Custom {
        chat: reqwest::Url,
        messages: reqwest::Url,
    },
    /// The gateway cannot call this model, and says why.
    Unsupported(String),
}

/// Where one call goes.
pub struct Destination<'a> {
    pub dialect: super::translate::Dialect,
    pub url: &'a reqwest::Url,
    /// Claude on Vertex.
    pub vertex: bool,
}

impl Endpoint {
    /// Where a call from `api` goes, streamed or whole, or why there is nowhere.
    pub fn route(
        &self,
        api: super::api::InboundApi,
        streaming: bool,
    ) -> Result<Destination<'_>, &str> {
        use super::api::InboundApi;
        use super::translate::Dialect;
        let to = |dialect, url, vertex| {
            Ok(Destination {
                dialect,
                url,
                vertex,
            })
        };
        let pick = |whole, stream| if streaming { stream } else { whole };
        match self {
            Endpoint::OpenAiChat(url) => to(Dialect::OpenAiChat, url, false),
            Endpoint::AnthropicMessages(url) => to(Dialect::AnthropicMessages, url, false),
            Endpoint::VertexAnthropic { whole, stream } => {
                to(Dialect::AnthropicMessages, pick(whole, stream), true)
            }
            Endpoint::Gemini { whole, stream } => to(Dialect::Gemini, pick(whole, stream), false),
            Endpoint::Bedrock { whole, stream } => to(Dialect::Bedrock, pick(whole, stream), false),
            Endpoint::Custom { chat, .. } if api == InboundApi::OpenAiChat => {
                to(Dialect::Custom, chat, false)
            }
            Endpoint::Custom { messages, .. } => to(Dialect::Custom, messages, false),
            Endpoint::Unsupported(why) => Err(why),
        }
    }
}

pub struct PoolMember {
    pub model: Arc<ModelEntry>,
    pub weight: u32,
    pub priority: u32,
}

pub struct PoolEntry {
    pub id: String,
    pub name: String,
    pub strategy: PoolStrategy,
    pub members: Vec<PoolMember>,
    pub uid: EntityUid,
    pub cursor: Arc<AtomicUsize>,
}

/// A model's recent failures; kept across snapshots so a failing member stays cooled down.
#[derive(Default)]
pub struct Health {
    consecutive_failures: AtomicU32,
    cooldown_until_ms: AtomicU64,
}

/// Failures in a row that cool a member down, and for how long.
pub const FAILURES_TO_COOL_DOWN: u32 = 3;
pub const COOL_DOWN: Duration = Duration::from_secs(30);

impl Health {
    pub fn is_cooling(&self) -> bool {
        self.cooldown_until_ms.load(Ordering::Relaxed) > portcullis_shared::unix_millis()
    }

    pub fn record_success(&self) {
        self.consecutive_failures.store(0, Ordering::Relaxed);
        self.cooldown_until_ms.store(0, Ordering::Relaxed);
    }

    pub fn record_failure(&self) {
        let failures = self.consecutive_failures.fetch_add(1, Ordering::Relaxed) + 1;
        if failures >= FAILURES_TO_COOL_DOWN {
            let until = portcullis_shared::unix_millis() + COOL_DOWN.as_millis() as u64;
            self.cooldown_until_ms.store(until, Ordering::Relaxed);
            tracing::warn!(failures, "Upstream member cooled down.");
        }
    }
}

/// What outlives snapshot swaps for model calls: health and round-robin cursors by id,
/// Google tokens by service-account key, AWS credentials by assumed role.
#[derive(Default)]
pub struct ModelRuntime {
    health: Mutex<HashMap<String, Arc<Health>>>,
    cursors: Mutex<HashMap<String, Arc<AtomicUsize>>>,
    google_tokens: Mutex<HashMap<String, Arc<Expiring<String>>>>,
    aws_roles: Mutex<HashMap<String, Arc<Expiring<aws_credential_types::Credentials>>>>,
}

impl ModelRuntime {
    pub fn health(&self, model_id: &str) -> Arc<Health> {
        let mut map = self.health.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(model_id.to_string()).or_default().clone()
    }

    pub fn cursor(&self, pool_id: &str) -> Arc<AtomicUsize> {
        let mut map = self.cursors.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(pool_id.to_string()).or_default().clone()
    }

    /// The token cache of a service-account key (by its hash: the key itself is not kept).
    pub fn google_tokens(&self, key_json: &str) -> Arc<Expiring<String>> {
        let key = portcullis_shared::keys::hash(key_json);
        let mut map = self.google_tokens.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(key)
            .or_insert_with(|| Arc::new(Expiring::new(crate::cloud::google::MARGIN)))
            .clone()
    }

    /// The credential cache of an assumed role.
    pub fn aws_role(
        &self,
        arn: &str,
        external_id: Option<&str>,
    ) -> Arc<Expiring<aws_credential_types::Credentials>> {
        let key = format!("{arn}|{}", external_id.unwrap_or_default());
        let mut map = self.aws_roles.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(key)
            .or_insert_with(|| Arc::new(Expiring::new(crate::cloud::aws::MARGIN)))
            .clone()
    }
}
