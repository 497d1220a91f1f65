//! Beside the request path: the compiled snapshot every request reads, how it is built from
//! what the control plane sends ([`compile`]), kept fresh ([`sync`]) and kept on disk for
//! starts while the control plane is down ([`lkg`]).

mod actas;
pub mod compile;
mod entities;
pub mod lkg;
mod model;
pub mod sync;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use cedar_policy::{Entities, EntityUid};

use crate::authz::Rules;
use http::{HeaderName, HeaderValue};
use portcullis_shared::api::agents::{ActAsMethod, AgentStatus};
use portcullis_shared::api::gateways::GatewayState;
use portcullis_shared::api::pools::PoolStrategy;
use portcullis_shared::provider::Provider;

pub use compile::{compile, compile_from};
pub use model::filter_window;

use crate::cloud::cache::Expiring;

/// One revision of the workspace, ready to serve.
pub struct Compiled {
    pub revision: u64,
    pub workspace_id: String,
    /// The enabled quotas (disabled ones are stored, not enforced).
    pub quotas: Vec<Arc<crate::spend::QuotaEntry>>,
    pub gateways: HashMap<String, GatewayEntry>,
    /// Tool connections by name (the prefix of `connection/tool`).
    pub tools: HashMap<String, Arc<ToolEntry>>,
    /// SHA-256 hex of each key → index into `agents`.
    pub keys: HashMap<String, usize>,
    /// Agent id → index into `agents` (for exchanged tokens, which name the agent).
    pub agent_ids: HashMap<String, usize>,
    /// The public keys exchanged agent tokens may be signed with, by `kid`.
    pub token_keys: HashMap<String, jsonwebtoken::DecodingKey>,
    /// Exchanged tokens already verified against this snapshot's keys: token → (agent index,
    /// audience, expiry). A signature is checked once per token and snapshot, not per call.
    pub verified_tokens: std::sync::RwLock<HashMap<Box<str>, crate::authn::Verified>>,
    pub agents: Vec<AgentEntry>,
    /// The workspace-scoped bundles, evaluated for every agent beside its own.
    pub workspace_policies: Vec<Arc<Rules>>,
    /// Every agent, gateway, model and pool, for Cedar.
    pub entities: Entities,
    /// How many decision slots each agent's memo has (see [`AgentEntry::memo`]).
    pub slots: usize,
    /// The weakest act-as identity the workspace admits.
    pub actas_min: portcullis_shared::api::actas::ActAsStrength,
    /// Bytes of streamed output the workspace holds back for the guards, at least.
    pub filter_window: usize,
    /// Where people sign in for interactive access: the control plane's public URL.
    pub authorization_server: String,
    /// Interactive grants revoked while tokens issued under them may be unexpired.
    pub revoked_grants: std::collections::HashSet<String>,
}

impl Compiled {
    /// Every model some gateway can call, directly or in a pool (a model may come more than
    /// once).
    pub fn models(&self) -> Vec<&Arc<ModelEntry>> {
        let mut out = Vec::new();
        for (target, _) in self.gateways.values().flat_map(|g| g.targets.values()) {
            match target {
                Target::Model(m) => out.push(m),
                Target::Pool(p) => out.extend(p.members.iter().map(|m| &m.model)),
            }
        }
        out
    }
}

pub struct GatewayEntry {
    pub id: String,
    pub name: String,
    pub state: GatewayState,
    pub uid: EntityUid,
    /// This gateway's `gateway:access` decision slot (llm surface).
    pub slot: usize,
    /// This gateway's `gateway:access` decision slot on the MCP surface.
    pub mcp_slot: usize,
    /// What `model` may name on this gateway: attached pools and direct models, by name, each
    /// with its `llm:invoke` decision slot.
    pub targets: HashMap<String, (Target, usize)>,
    /// Target names in order, for `/v1/models`.
    pub target_names: Vec<String>,
    /// Admin bundles scoped to this gateway.
    pub policies: Vec<Arc<Rules>>,
    /// Tool connections attached whole, by id.
    pub tool_sources: std::collections::HashSet<String>,
    /// Single operations attached: (connection id, operation).
    pub tool_members: std::collections::HashSet<(String, String)>,
    /// Every tool connection something of which is attached, in name order.
    pub tool_connections: Vec<Arc<ToolEntry>>,
    /// The guards that apply to this gateway's models and tools.
    pub guards: crate::guard::scope::GatewayGuards,
}

impl GatewayEntry {
    /// Whether this gateway offers the operation.
    pub fn offers(&self, connection_id: &str, tool: &str) -> bool {
        self.tool_sources.contains(connection_id)
            || self
                .tool_members
                .contains(&(connection_id.to_string(), tool.to_string()))
    }
}

/// How the gateway reaches a tool connection's MCP server.
#[derive(Debug, Clone)]
pub enum ToolTransport {
    Http {
        url: reqwest::Url,
        /// Literal, secret and credential headers, sent on every request.
        headers: Vec<(HeaderName, HeaderValue)>,
        /// Headers that carry the caller's act-as assertion.
        actas_headers: Vec<HeaderName>,
    },
    Stdio {
        command: String,
        args: Vec<String>,
        /// The configured environment plus the connection's secret values.
        env: Vec<(String, String)>,
        cwd: Option<String>,
    },
    /// A catalog adapter: its operations are HTTP requests the gateway makes itself.
    Rest {
        adapter: std::sync::Arc<crate::mcp::upstream::rest::RestAdapter>,
    },
}

pub struct ToolEntry {
    pub id: String,
    pub name: String,
    /// Each person calls with their own API key or OAuth grant ([`crate::peruser`]).
    pub per_user: bool,
    /// Calls carry the connection's shared OAuth access token, asked of the control plane
    /// and refreshed there ([`crate::peruser`], subject `""`).
    pub shared_oauth: bool,
    pub transport: ToolTransport,
    /// Operation → (status, message). Operations not in the catalog are not served.
    pub catalog: HashMap<String, (portcullis_shared::api::tools::ToolStatus, Option<String>)>,
    /// Changes whenever anything that affects calling the upstream changes.
    pub fingerprint: String,
    /// Why calls cannot be made (a cleared URL, a stdio tool on a gateway that runs none, …).
    pub unavailable: Option<String>,
    /// Secret values, to scrub from error messages.
    pub secret_values: Vec<String>,
    /// Classified fields of structured results: (field name or JSON pointer, class).
    pub classified: Vec<(String, String)>,
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
    /// match a guard can make).
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
    pub dialect: crate::llm::translate::Dialect,
    pub url: &'a reqwest::Url,
    /// Claude on Vertex.
    pub vertex: bool,
}

impl Endpoint {
    /// Where a call from `api` goes, streamed or whole, or why there is nowhere.
    pub fn route(
        &self,
        api: crate::llm::api::InboundApi,
        streaming: bool,
    ) -> Result<Destination<'_>, &str> {
        use crate::llm::api::InboundApi;
        use crate::llm::translate::Dialect;
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

pub struct AgentEntry {
    pub id: String,
    pub name: String,
    /// The parent the snapshot names (its Cedar entity holds every ancestor).
    pub parent_id: Option<String>,
    pub status: AgentStatus,
    pub uid: EntityUid,
    /// The agent's own bundle and its agent-scoped admin bundles, each shared with the
    /// runtime's cache (the workspace's bundles are [`Compiled::workspace_policies`]).
    pub policies: Vec<Arc<Rules>>,
    pub actas_method: Option<ActAsMethod>,
    pub actas_required: bool,
    /// The HMAC act-as secret (the agent's own or its provider's), when the method is `hmac`.
    pub actas_hmac_secret: Option<String>,
    /// How act-as tokens are verified, when the method is `oidc`.
    pub actas_oidc: Option<Arc<crate::actas::oidc::OidcConfig>>,
    /// Act-as tokens already verified for this agent at this snapshot.
    pub oidc_memory: crate::actas::oidc::Memory,
    /// SHA-256 hex of a key bound to an end user → that user (method `bound`).
    pub bound_keys: HashMap<String, portcullis_shared::policy::ActAs>,
    /// Decisions for requests without an act-as identity, by slot. They depend only on the
    /// agent, action, resource and gateway, so each is evaluated once per snapshot.
    pub memo: OnceLock<Box<[OnceLock<Decision>]>>,
    /// Tool decisions without an act-as identity: (gateway slot, action, `connection/tool`).
    pub tool_memo: std::sync::RwLock<HashMap<(usize, u8, String), Decision>>,
    /// Decisions for requests with an act-as identity, by identity and slot: the same person
    /// through the same agent gets the same answer for the whole snapshot.
    pub identity_memo: crate::authz::IdentityMemo,
}

/// An authorization outcome.
pub type Decision = Result<(), crate::error::Denial>;

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

/// A bundle's policies, parsed with qualified ids and validated.
type CheckedBundle = Arc<Rules>;

/// What outlives snapshot swaps: health and round-robin cursors by id, Google tokens by
/// service-account key, AWS credentials by assumed role, act-as issuers' keys by URL, and
/// rule bundles already parsed, by their text.
#[derive(Default)]
pub struct Runtime {
    health: Mutex<HashMap<String, Arc<Health>>>,
    /// Id prefix → (policies text, the parsed and validated rules): a snapshot that changes
    /// one agent checks one bundle, not every agent's, and every snapshot shares the rules of
    /// the bundles it keeps.
    bundles: Mutex<HashMap<String, (String, CheckedBundle)>>,
    cursors: Mutex<HashMap<String, Arc<AtomicUsize>>>,
    google_tokens: Mutex<HashMap<String, Arc<Expiring<String>>>>,
    aws_roles: Mutex<HashMap<String, Arc<Expiring<aws_credential_types::Credentials>>>>,
    /// Act-as issuers' key sets, by URL.
    pub issuers: crate::actas::oidc::Issuers,
}

impl Runtime {
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

    /// Parses and validates (strictly, against the schema) each bundle not checked before, by
    /// prefix and text, and forgets bundles the snapshot no longer has; the rules in the
    /// given order, or each bundle's error. Validation is per policy, so checking bundles
    /// apart finds what checking their union would. A bundle kept from the last snapshot is
    /// neither parsed nor copied again.
    pub fn checked_bundles<'a>(
        &self,
        bundles: impl Iterator<Item = (&'a str, &'a str)>,
    ) -> Vec<Result<CheckedBundle, portcullis_shared::policy::PolicyError>> {
        use portcullis_shared::policy::PolicyError;
        let bundles: Vec<(&str, &str)> = bundles.collect();
        let mut cache = self.bundles.lock().unwrap_or_else(|e| e.into_inner());
        let mut last = std::mem::take(&mut *cache);
        let same = |entry: &(String, CheckedBundle), text: &str| entry.0 == text;
        // Each bundle not cached, once even when the snapshot holds it twice.
        let mut seen = std::collections::HashSet::new();
        let new: Vec<(&str, &str)> = bundles
            .iter()
            .copied()
            .filter(|(prefix, text)| !last.get(*prefix).is_some_and(|e| same(e, text)))
            .filter(|bundle| seen.insert(*bundle))
            .collect();
        let fresh: HashMap<(&str, &str), Result<CheckedBundle, PolicyError>> = new
            .iter()
            .copied()
            .zip(check_all(&new).into_iter().map(|r| r.map(Arc::new)))
            .collect();
        bundles
            .into_iter()
            .map(|(prefix, text)| {
                if let Some((key, entry)) = last.remove_entry(prefix).filter(|(_, e)| same(e, text))
                {
                    let set = entry.1.clone();
                    cache.insert(key, entry);
                    return Ok(set);
                }
                if let Some(entry) = cache.get(prefix).filter(|e| same(e, text)) {
                    return Ok(entry.1.clone());
                }
                let set = fresh.get(&(prefix, text)).cloned().unwrap_or_else(|| {
                    Err(PolicyError::Invalid("the bundle was not checked".into()))
                })?;
                cache.insert(prefix.to_string(), (text.to_string(), set.clone()));
                Ok(set)
            })
            .collect()
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

/// Checks bundles on every core (a first snapshot of a large workspace holds thousands);
/// the results in the given order.
fn check_all(
    bundles: &[(&str, &str)],
) -> Vec<Result<Rules, portcullis_shared::policy::PolicyError>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = bundles.len().div_ceil(threads.max(1)).max(256);
    std::thread::scope(|scope| {
        let running: Vec<_> = bundles
            .chunks(chunk.max(1))
            .map(|part| (part.len(), scope.spawn(move || check_part(part))))
            .collect();
        running
            .into_iter()
            .flat_map(|(len, handle)| {
                handle.join().unwrap_or_else(|_| {
                    let failed = portcullis_shared::policy::PolicyError::Invalid(
                        "checking the bundle failed".into(),
                    );
                    (0..len).map(|_| Err(failed.clone())).collect()
                })
            })
            .collect()
    })
}

fn check_part(
    bundles: &[(&str, &str)],
) -> Vec<Result<Rules, portcullis_shared::policy::PolicyError>> {
    use portcullis_shared::policy;
    bundles
        .iter()
        .map(|(prefix, text)| match policy::check_bundle(prefix, text)? {
            policy::Checked::Permits(permits) => Ok(Rules::from_permits(permits)),
            policy::Checked::Cedar { set, .. } => Rules::new(*set),
        })
        .collect()
}
