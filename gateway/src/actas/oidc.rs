//! Act-as `oidc`: the header is a JWT from a trusted OpenID issuer. Its signature is checked
//! against the issuer's published keys (JWKS, found through discovery or configured), and its
//! `iss`, `aud`, `exp` and `nbf`. Key sets are fetched off the request path when a snapshot
//! names an issuer, kept across snapshots, refetched when a token names an unknown `kid` (at
//! most once per [`REFETCH_FLOOR`]) or when older than [`MAX_AGE`]. A verified token is
//! remembered per agent and snapshot, so its signature is checked once, not per call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use base64::Engine;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use portcullis_shared::egress;
use portcullis_shared::policy::ActAs;
use serde_json::{Map, Value};

use super::AgentActAs;
use super::{claims, refused};
use crate::error::GatewayError;
use crate::Gateway;

/// A token naming a `kid` the cached set lacks refetches the set at most this often.
pub const REFETCH_FLOOR: Duration = Duration::from_secs(5);
/// A key set older than this is refetched before use (keys the issuer withdrew stop working).
pub const MAX_AGE: Duration = Duration::from_secs(3600);
/// While the issuer cannot be reached, its last key set serves this long, then calls are
/// refused: a withdrawn key must not verify forever because the issuer is unreachable.
pub const MAX_STALE: Duration = Duration::from_secs(24 * 3600);
/// Clock difference tolerated on `exp` and `nbf`.
const LEEWAY_SECS: u64 = 30;
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// At most this many verified tokens are remembered per agent and snapshot.
const REMEMBERED_CAP: usize = 4096;

/// Which audience a token must carry.
#[derive(Debug, Clone)]
pub enum Audience {
    /// A verification provider's configured audience.
    Fixed(String),
    /// The inline `actas_oidc_url` form: the agent's id or the gateway's id.
    AgentOrGateway,
}

/// How one agent's act-as tokens are verified.
pub struct OidcConfig {
    pub keys: Arc<KeySource>,
    /// The expected `iss`; `None` takes the discovery document's `issuer`.
    pub issuer: Option<String>,
    pub audience: Audience,
    pub email_claim: String,
    pub groups_claim: String,
    /// Whether an email counts without `email_verified: true` (a provider that only issues
    /// verified emails); otherwise such an email is dropped.
    pub trust_unverified_email: bool,
}

/// A token already verified for an agent: its identity and what is checked on every call.
pub struct Remembered {
    act_as: ActAs,
    exp: i64,
    aud: Vec<String>,
}

impl Remembered {
    pub fn identity(self) -> ActAs {
        self.act_as
    }
}

pub type Memory = RwLock<HashMap<Box<str>, Remembered>>;

/// An issuer's key set, as last fetched.
pub struct KeySet {
    /// The discovery document's `issuer`, when discovery was used.
    issuer: Option<String>,
    keys: HashMap<String, (DecodingKey, Option<Algorithm>)>,
    fetched: Instant,
}

/// Where one issuer's keys come from, and the keys last fetched. Shared by every agent and
/// snapshot naming the same URL.
pub struct KeySource {
    /// A discovery document (`…/.well-known/openid-configuration`) or a JWKS.
    url: String,
    discovery: bool,
    current: ArcSwapOption<KeySet>,
    /// When the last fetch was tried; held while fetching, so concurrent misses fetch once.
    last_try: tokio::sync::Mutex<Option<Instant>>,
    /// Whether the last fetch failed.
    failing: std::sync::atomic::AtomicBool,
}

/// Every key source this process knows, by URL.
#[derive(Default)]
pub struct Issuers {
    sources: Mutex<HashMap<String, Arc<KeySource>>>,
}

impl Issuers {
    /// The source for a discovery URL (an issuer URL or its discovery document) or, with
    /// `discovery` false, a JWKS URL.
    pub fn source(&self, url: &str, discovery: bool) -> Arc<KeySource> {
        let url = if discovery {
            discovery_url(url)
        } else {
            url.to_string()
        };
        let mut map = self.sources.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(url.clone())
            .or_insert_with(|| {
                Arc::new(KeySource {
                    url,
                    discovery,
                    current: ArcSwapOption::empty(),
                    last_try: tokio::sync::Mutex::new(None),
                    failing: std::sync::atomic::AtomicBool::new(false),
                })
            })
            .clone()
    }
}

/// The discovery document of an issuer URL; a discovery URL is taken as it is.
fn discovery_url(url: &str) -> String {
    const WELL_KNOWN: &str = "/.well-known/openid-configuration";
    if url.ends_with(WELL_KNOWN) {
        url.to_string()
    } else {
        format!("{}{WELL_KNOWN}", url.trim_end_matches('/'))
    }
}

impl KeySource {
    pub fn loaded(&self) -> bool {
        self.current.load().is_some()
    }

    /// Fetches the key set unless a fetch was tried within `floor`; keeps the old set when
    /// the fetch fails.
    pub async fn refresh(&self, http: Fetch<'_>, floor: Duration) {
        let mut last_try = self.last_try.lock().await;
        if last_try.is_some_and(|t| t.elapsed() < floor) {
            return;
        }
        *last_try = Some(Instant::now());
        let fetched = self.fetch(http).await;
        self.failing
            .store(fetched.is_err(), std::sync::atomic::Ordering::Relaxed);
        match fetched {
            Ok(set) => {
                tracing::info!(url = %self.url, keys = set.keys.len(), "Act-as issuer keys fetched.");
                self.current.store(Some(Arc::new(set)));
            }
            Err(e) => {
                tracing::warn!(url = %self.url, error = %e, "Fetching act-as issuer keys failed.")
            }
        }
    }

    async fn fetch(&self, http: Fetch<'_>) -> Result<KeySet, String> {
        let (issuer, jwks_url) = if self.discovery {
            let doc = get_json(http, &self.url).await?;
            let issuer = doc
                .get("issuer")
                .and_then(Value::as_str)
                .map(str::to_string);
            let jwks = doc
                .get("jwks_uri")
                .and_then(Value::as_str)
                .ok_or("the discovery document has no jwks_uri")?
                .to_string();
            (issuer, jwks)
        } else {
            (None, self.url.clone())
        };
        let set = get_json(http, &jwks_url).await?;
        let keys = set
            .get("keys")
            .and_then(Value::as_array)
            .ok_or("the key set has no keys")?;
        Ok(KeySet {
            issuer,
            keys: keys.iter().filter_map(decoding_key).collect(),
            fetched: Instant::now(),
        })
    }

    /// The key `kid` names, refetching once (within the floor) when it is unknown or the set
    /// is old.
    async fn key(
        &self,
        http: Fetch<'_>,
        kid: &str,
    ) -> Result<(Arc<KeySet>, DecodingKey, Option<Algorithm>), GatewayError> {
        let lookup = |set: &Arc<KeySet>| {
            set.keys
                .get(kid)
                .map(|(k, alg)| (set.clone(), k.clone(), *alg))
        };
        if let Some(set) = self.current.load_full() {
            if set.fetched.elapsed() < MAX_AGE {
                if let Some(found) = lookup(&set) {
                    return Ok(found);
                }
            }
        }
        self.refresh(http, REFETCH_FLOOR).await;
        let unavailable = || {
            refused(
                "actas_issuer_unavailable",
                "the issuer's keys could not be fetched; retry shortly",
            )
        };
        let failing = self.failing.load(std::sync::atomic::Ordering::Relaxed);
        match self.current.load_full() {
            Some(set) if set.fetched.elapsed() > MAX_STALE => Err(unavailable()),
            Some(set) => lookup(&set).ok_or_else(|| {
                if failing {
                    unavailable()
                } else {
                    refused(
                        "actas_unknown_key",
                        &format!(
                            "the token is signed with key '{kid}', which the issuer does not publish"
                        ),
                    )
                }
            }),
            None => Err(unavailable()),
        }
    }
}

/// The egress client and whether private targets are allowed (DESIGN §24).
pub type Fetch<'a> = (&'a reqwest::Client, bool);

/// The most a discovery document or key set may be.
const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;

/// A JSON document an issuer publishes; its URL (an administrator's, or chosen by the
/// discovery document) must be a target this gateway sends to.
async fn get_json((http, allow_private): Fetch<'_>, url: &str) -> Result<Value, String> {
    let parsed = url::Url::parse(url).map_err(|_| format!("{url:?} is not a URL"))?;
    egress::check_url(&parsed, allow_private).map_err(|e| format!("{url}: {e}"))?;
    let response = http
        .get(url)
        .timeout(FETCH_TIMEOUT)
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("{url}: HTTP {}", response.status()));
    }
    let body = egress::read_capped(response, MAX_DOCUMENT_BYTES)
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    serde_json::from_slice(&body).map_err(|e| format!("{url}: {e}"))
}

/// A JWK with a `kid` the gateway can verify with; keys for encryption (`use: enc`) or
/// declaring an algorithm it does not accept are skipped.
fn decoding_key(jwk: &Value) -> Option<(String, (DecodingKey, Option<Algorithm>))> {
    if jwk.get("use").and_then(Value::as_str) == Some("enc") {
        return None;
    }
    // A declared algorithm must be one the gateway accepts.
    let alg = match jwk.get("alg").and_then(Value::as_str) {
        Some(declared) => Some(accepted_alg(declared)?),
        None => None,
    };
    let parsed = <jsonwebtoken::jwk::Jwk as serde::Deserialize>::deserialize(jwk).ok()?;
    let kid = parsed.common.key_id.clone()?;
    let key = DecodingKey::from_jwk(&parsed).ok()?;
    Some((kid, (key, alg)))
}

/// The algorithms act-as tokens may use: asymmetric only.
fn accepted_alg(alg: &str) -> Option<Algorithm> {
    match alg {
        "RS256" => Some(Algorithm::RS256),
        "ES256" => Some(Algorithm::ES256),
        "EdDSA" => Some(Algorithm::EdDSA),
        _ => None,
    }
}

/// The token's `alg` and `kid`, refusing `none`, shared-secret and unknown algorithms before
/// anything else is read.
pub fn header(token: &str) -> Result<(Algorithm, String), GatewayError> {
    let malformed = || refused("actas_malformed", "the header is not a JWT");
    let mut parts = token.split('.');
    let (Some(head), Some(_), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(malformed());
    };
    let bytes = B64URL.decode(head).map_err(|_| malformed())?;
    let head: Map<String, Value> = serde_json::from_slice(&bytes).map_err(|_| malformed())?;
    let alg = head.get("alg").and_then(Value::as_str).unwrap_or_default();
    let alg = accepted_alg(alg).ok_or_else(|| {
        refused(
            "actas_alg_refused",
            &format!("tokens signed with '{alg}' are not accepted; use RS256, ES256 or EdDSA"),
        )
    })?;
    let kid = head
        .get("kid")
        .and_then(Value::as_str)
        .ok_or_else(|| refused("actas_malformed", "the token names no key (kid)"))?;
    Ok((alg, kid.to_string()))
}

fn claim_error(kind: &ErrorKind) -> GatewayError {
    match kind {
        ErrorKind::ExpiredSignature => refused("actas_expired", "the token has expired"),
        ErrorKind::ImmatureSignature => {
            refused("actas_not_yet_valid", "the token is not valid yet (nbf)")
        }
        ErrorKind::InvalidAudience => {
            refused("actas_audience", "the token is for another audience")
        }
        ErrorKind::InvalidIssuer => refused("actas_issuer", "the token is from another issuer"),
        ErrorKind::InvalidSignature => {
            refused("actas_signature", "the token's signature does not verify")
        }
        ErrorKind::MissingRequiredClaim(c) => {
            refused("actas_malformed", &format!("the token has no {c} claim"))
        }
        _ => refused("actas_malformed", "the token cannot be read"),
    }
}

fn audiences(cfg: &OidcConfig, agent: &AgentActAs, gateway_id: &str) -> Vec<String> {
    match &cfg.audience {
        Audience::Fixed(a) => vec![a.clone()],
        Audience::AgentOrGateway => vec![agent.id.clone(), gateway_id.to_string()],
    }
}

/// Checks the signature and claims, and reads the identity.
async fn check(
    gw: &Gateway,
    cfg: &OidcConfig,
    agent: &AgentActAs,
    gateway_id: &str,
    token: &str,
) -> Result<Remembered, GatewayError> {
    let (alg, kid) = header(token)?;
    let fetch = (&gw.http(), gw.config.allow_private_targets);
    let (set, key, key_alg) = cfg.keys.key(fetch, &kid).await?;
    if key_alg.is_some_and(|k| k != alg) {
        return Err(refused(
            "actas_alg_refused",
            "the token's alg differs from its key's",
        ));
    }
    let issuer = cfg
        .issuer
        .as_deref()
        .or(set.issuer.as_deref())
        .ok_or_else(|| refused("actas_issuer", "the issuer is not known"))?;
    validate(
        token,
        alg,
        &key,
        issuer,
        &audiences(cfg, agent, gateway_id),
        cfg,
    )
}

/// Checks a token's signature with `key` and its claims, and reads the identity.
pub fn validate(
    token: &str,
    alg: Algorithm,
    key: &DecodingKey,
    issuer: &str,
    audiences: &[String],
    cfg: &OidcConfig,
) -> Result<Remembered, GatewayError> {
    let mut validation = Validation::new(alg);
    validation.leeway = LEEWAY_SECS;
    validation.validate_nbf = true;
    validation.set_issuer(&[issuer]);
    validation.set_audience(audiences);
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    let data = jsonwebtoken::decode::<Map<String, Value>>(token, key, &validation)
        .map_err(|e| claim_error(e.kind()))?;
    let claims = data.claims;
    let mut act_as = claims::identity(&claims, "oidc", &cfg.email_claim, &cfg.groups_claim)?;
    // The issuer vouches for an email only when it says it verified it.
    if !cfg.trust_unverified_email && claims.get("email_verified") != Some(&Value::Bool(true)) {
        act_as.email.clear();
    }
    let aud = match claims.get("aud") {
        Some(Value::String(a)) => vec![a.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    };
    Ok(Remembered {
        act_as,
        exp: claims
            .get("exp")
            .and_then(Value::as_i64)
            .unwrap_or_default(),
        aud,
    })
}

/// Whether a remembered token still holds: unexpired, and for this agent or gateway.
fn still_valid(
    cfg: &OidcConfig,
    agent: &AgentActAs,
    gateway_id: &str,
    remembered: &Remembered,
    now: i64,
) -> Result<ActAs, GatewayError> {
    if now > remembered.exp.saturating_add(LEEWAY_SECS as i64) {
        return Err(refused("actas_expired", "the token has expired"));
    }
    let for_us = remembered.aud.iter().any(|a| match &cfg.audience {
        Audience::Fixed(wanted) => a == wanted,
        Audience::AgentOrGateway => *a == agent.id || a == gateway_id,
    });
    if !for_us {
        return Err(refused(
            "actas_audience",
            "the token is for another audience",
        ));
    }
    Ok(remembered.act_as.clone())
}

/// The identity of a token already verified for this agent at this snapshot, checked again
/// for expiry and audience; `None` when it has not been verified yet.
pub fn recall(
    agent: &AgentActAs,
    token: &str,
    gateway_id: &str,
    now: i64,
) -> Option<Result<ActAs, GatewayError>> {
    let cfg = agent.oidc.as_deref()?;
    let memory = agent.oidc_memory.read().unwrap_or_else(|e| e.into_inner());
    let remembered = memory.get(token)?;
    Some(still_valid(cfg, agent, gateway_id, remembered, now))
}

/// The identity an agent's act-as token proves on this gateway.
pub async fn verify(
    gw: &Gateway,
    agent: &AgentActAs,
    gateway_id: &str,
    token: &str,
    now: i64,
) -> Result<ActAs, GatewayError> {
    if let Some(known) = recall(agent, token, gateway_id, now) {
        return known;
    }
    let cfg = agent
        .oidc
        .as_deref()
        .ok_or_else(|| refused("actas_unconfigured", "no OIDC issuer is configured"))?;
    let remembered = check(gw, cfg, agent, gateway_id, token).await?;
    let identity = still_valid(cfg, agent, gateway_id, &remembered, now);
    let mut memory = agent.oidc_memory.write().unwrap_or_else(|e| e.into_inner());
    if memory.len() >= REMEMBERED_CAP {
        memory.clear();
    }
    memory.insert(token.into(), remembered);
    identity
}
