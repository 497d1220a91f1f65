//! Step two of a gateway request: who is calling. An agent key (`svc_…`) or a token exchanged
//! for one (`ExchangeAgentKey`), as `Authorization: Bearer`, or on Anthropic's route as
//! `x-api-key`. A key's SHA-256 is looked up in the snapshot and compared in constant time; a
//! token's EdDSA signature is checked against the workspace keys in the snapshot, with its
//! audience (this gateway), expiry (30 s leeway) and the agent's status at this snapshot.
//! For agents whose act-as method is `bound`, the caller also carries the person the key (or
//! the key the token was exchanged for) is bound to; a token issued under an interactive grant
//! carries the person who signed in, unless the grant was revoked.

pub mod compile;

use std::collections::{HashMap, HashSet};
use std::sync::RwLock;

use portcullis_shared::api::agents::{ActAsMethod, AgentStatus};
use portcullis_shared::keys::{self, KeyKind};
use portcullis_shared::policy::ActAs;
use portcullis_shared::snapshot::{AgentTokenClaims, AGENT_TOKEN_ISSUER};

use crate::actas::AgentActAs;
use crate::authz::AgentRules;
use crate::error::GatewayError;

/// Who may call at one revision: the agents, their keys, the keys exchanged tokens are signed
/// with, and the tokens already verified.
pub struct Table {
    pub workspace_id: String,
    /// SHA-256 hex of each key → index into `agents`.
    pub keys: HashMap<String, usize>,
    /// Agent id → index into `agents` (for exchanged tokens, which name the agent).
    pub agent_ids: HashMap<String, usize>,
    /// The public keys exchanged agent tokens may be signed with, by `kid`.
    pub token_keys: HashMap<String, jsonwebtoken::DecodingKey>,
    /// Exchanged tokens already verified against this snapshot's keys: token → (agent index,
    /// audience, expiry). A signature is checked once per token and snapshot, not per call.
    pub verified_tokens: RwLock<HashMap<Box<str>, Verified>>,
    pub agents: Vec<AgentEntry>,
    /// Interactive grants revoked while tokens issued under them may be unexpired.
    pub revoked_grants: HashSet<String>,
}

/// An agent at one revision: who it is, the rules it is held to, how it acts for people.
pub struct AgentEntry {
    pub id: String,
    pub name: String,
    /// The parent the snapshot names (its Cedar entity holds every ancestor).
    pub parent_id: Option<String>,
    pub status: AgentStatus,
    /// Its rules and the decisions remembered for it (its Cedar uid is `rules.uid`).
    pub rules: AgentRules,
    /// How its act-as identities are read and verified.
    pub act_as: AgentActAs,
    /// SHA-256 hex of a key bound to an end user → that user (method `bound`).
    pub bound_keys: HashMap<String, ActAs>,
}

/// The key a caller presented: the bearer token of `Authorization`, else (where the route
/// accepts it) the `x-api-key` value.
pub fn presented<'a>(
    authorization: Option<&'a [u8]>,
    api_key: Option<&'a [u8]>,
) -> Result<&'a str, GatewayError> {
    match (authorization, api_key) {
        (None, Some(key)) => std::str::from_utf8(key)
            .map(str::trim)
            .map_err(|_| GatewayError::Unauthenticated("malformed x-api-key header".into())),
        (header, _) => bearer(header),
    }
}

/// The bearer token of an `Authorization` header value.
fn bearer(header: Option<&[u8]>) -> Result<&str, GatewayError> {
    let header = header.ok_or_else(|| {
        GatewayError::Unauthenticated("missing Authorization: Bearer <agent API key>".into())
    })?;
    let text = std::str::from_utf8(header)
        .map_err(|_| GatewayError::Unauthenticated("malformed Authorization header".into()))?;
    text.strip_prefix("Bearer ")
        .or_else(|| text.strip_prefix("bearer "))
        .map(str::trim)
        .ok_or_else(|| {
            GatewayError::Unauthenticated("Authorization must use the Bearer scheme".into())
        })
}

/// Who is calling: the agent, and the end user its key is bound to (act-as `bound`).
pub struct Caller<'a> {
    pub agent: &'a AgentEntry,
    pub bound: Option<ActAs>,
}

/// The caller behind `token` (a key or an exchanged token) on the gateway `gateway_id`.
pub fn authenticate<'a>(
    table: &'a Table,
    token: &str,
    gateway_id: &str,
) -> Result<Caller<'a>, GatewayError> {
    let (agent, bound) = match KeyKind::of(token) {
        Some(KeyKind::Agent) => by_key(table, token)?,
        Some(KeyKind::Platform | KeyKind::Deployment) => {
            return Err(GatewayError::Unauthenticated(
                "platform keys and deployment tokens cannot call gateways; use an agent API key"
                    .into(),
            ))
        }
        None if token.split('.').count() == 3 => by_token(table, token, gateway_id)?,
        None => {
            return Err(GatewayError::Unauthenticated(
                "the API key is malformed".into(),
            ))
        }
    };
    Ok(Caller {
        agent: admitted(agent)?,
        bound,
    })
}

fn by_key<'a>(
    table: &'a Table,
    token: &str,
) -> Result<(&'a AgentEntry, Option<ActAs>), GatewayError> {
    let hash = keys::hash(token);
    let agent = table
        .keys
        .get_key_value(hash.as_str())
        .filter(|(stored, _)| keys::hashes_equal(stored, &hash))
        .and_then(|(_, index)| table.agents.get(*index))
        .ok_or_else(|| GatewayError::Unauthenticated("unknown or revoked API key".into()))?;
    let bound = bound_to(agent, || agent.bound_keys.get(&hash).cloned());
    Ok((agent, bound))
}

/// A key's bound end user counts only while the agent's act-as method is `bound` (and is
/// only looked up then).
fn bound_to(agent: &AgentEntry, subject: impl FnOnce() -> Option<ActAs>) -> Option<ActAs> {
    (agent.act_as.method == Some(ActAsMethod::Bound))
        .then(subject)
        .flatten()
}

/// Clock difference tolerated on `exp`.
const LEEWAY_SECS: u64 = 30;

/// A token verified against a snapshot: whose it is, for which gateway, until when.
pub struct Verified {
    agent: usize,
    aud: Box<str>,
    exp: i64,
    /// The end user the exchanged key was bound to.
    bound: Option<ActAs>,
}

/// At most this many verified tokens are remembered per snapshot (then the memory restarts).
const VERIFIED_CAP: usize = 16_384;

fn refused(why: &str) -> GatewayError {
    GatewayError::Unauthenticated(format!("agent token refused: {why}"))
}

/// The agent of an exchanged token: from the snapshot's memory of verified tokens, else by
/// checking its signature and claims (about 50 µs) and remembering the result. A remembered
/// token is rechecked under the read lock, without copying it.
fn by_token<'a>(
    table: &'a Table,
    token: &str,
    gateway_id: &str,
) -> Result<(&'a AgentEntry, Option<ActAs>), GatewayError> {
    let now = chrono::Utc::now().timestamp();
    let known = table
        .verified_tokens
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(token)
        .map(|v| admit_token(table, v, gateway_id, now));
    if let Some(admitted) = known {
        return admitted;
    }
    let v = verify(table, token, gateway_id)?;
    let admitted = admit_token(table, &v, gateway_id, now);
    let mut memory = table
        .verified_tokens
        .write()
        .unwrap_or_else(|e| e.into_inner());
    if memory.len() >= VERIFIED_CAP {
        memory.clear();
    }
    memory.insert(token.into(), v);
    admitted
}

/// A verified token still holds: unexpired, for this gateway, its agent still there.
fn admit_token<'a>(
    table: &'a Table,
    v: &Verified,
    gateway_id: &str,
    now: i64,
) -> Result<(&'a AgentEntry, Option<ActAs>), GatewayError> {
    if now > v.exp.saturating_add(LEEWAY_SECS as i64) {
        return Err(refused("expired; exchange the key again"));
    }
    if *v.aud != *gateway_id {
        return Err(refused("issued for another gateway"));
    }
    let agent = table
        .agents
        .get(v.agent)
        .ok_or_else(|| refused("its agent no longer exists"))?;
    let person = match &v.bound {
        Some(person) if person.is_interactive() => Some(person.clone()),
        _ => bound_to(agent, || v.bound.clone()),
    };
    Ok((agent, person))
}

/// Checks an exchanged token's signature and claims against the snapshot.
fn verify(table: &Table, token: &str, gateway_id: &str) -> Result<Verified, GatewayError> {
    let header = jsonwebtoken::decode_header(token).map_err(|_| refused("malformed"))?;
    if header.alg != jsonwebtoken::Algorithm::EdDSA {
        return Err(refused("not signed with EdDSA"));
    }
    let key = header
        .kid
        .as_deref()
        .and_then(|kid| table.token_keys.get(kid))
        .ok_or_else(|| refused("signed with a key this gateway does not know"))?;
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::EdDSA);
    validation.leeway = LEEWAY_SECS;
    validation.set_audience(&[gateway_id]);
    validation.set_issuer(&[AGENT_TOKEN_ISSUER]);
    validation.set_required_spec_claims(&["exp", "aud", "iss", "sub"]);
    let claims = jsonwebtoken::decode::<AgentTokenClaims>(token, key, &validation)
        .map_err(|e| {
            use jsonwebtoken::errors::ErrorKind;
            match e.kind() {
                ErrorKind::ExpiredSignature => refused("expired; exchange the key again"),
                ErrorKind::InvalidAudience => refused("issued for another gateway"),
                _ => refused("invalid"),
            }
        })?
        .claims;
    if claims.ws != table.workspace_id {
        return Err(refused("issued for another workspace"));
    }
    let agent = *table
        .agent_ids
        .get(&claims.sub)
        .ok_or_else(|| refused("its agent no longer exists"))?;
    let bound = match claims.grant {
        Some(grant) if table.revoked_grants.contains(&grant) => {
            return Err(refused("its interactive grant was revoked; sign in again"))
        }
        Some(_) => Some(ActAs::interactive(
            claims.act.ok_or_else(|| refused("invalid"))?,
        )),
        None => claims.act.map(ActAs::bound),
    };
    Ok(Verified {
        agent,
        aud: claims.aud.into(),
        exp: claims.exp,
        bound,
    })
}

fn admitted(agent: &AgentEntry) -> Result<&AgentEntry, GatewayError> {
    match agent.status {
        AgentStatus::Active | AgentStatus::Provisioned => Ok(agent),
        AgentStatus::Suspended => Err(GatewayError::Forbidden(format!(
            "agent '{}' is suspended",
            agent.name
        ))),
        AgentStatus::Revoked => Err(GatewayError::Unauthenticated(format!(
            "agent '{}' is revoked",
            agent.name
        ))),
    }
}

/// Arbitrary bearer values, and JWT-shaped ones with a known `kid` and any claims and
/// signature: never a panic, never an agent.
#[cfg(test)]
mod fuzz {
    use proptest::prelude::*;

    use super::{authenticate, Table};

    fn snapshot() -> Table {
        crate::fuzzing::agent_token_snapshot().authn
    }

    fn bearer() -> impl Strategy<Value = String> {
        // With or without an interactive grant (and the person it names, or junk there).
        let act = prop_oneof![
            Just(serde_json::Value::Null),
            Just(serde_json::json!({"sub": "alice", "email": "a@example.com"})),
            any::<String>().prop_map(serde_json::Value::String),
        ];
        let claims = (any::<i64>(), proptest::option::of("[a-z0-9-]{0,12}"), act).prop_map(
            |(exp, grant, act)| {
                serde_json::json!({"iss": portcullis_shared::snapshot::AGENT_TOKEN_ISSUER,
                    "sub": "a", "aud": "g", "iat": 0, "exp": exp, "jti": "j", "ws": "w",
                    "grant": grant, "act": act})
            },
        );
        crate::fuzz::token_like(crate::fuzz::jwt_shaped(claims))
    }

    proptest! {
        #[test]
        fn forged_bearers_never_authenticate(token in bearer()) {
            let snap = snapshot();
            prop_assert!(authenticate(&snap, &token, "g").is_err());
        }
    }
}
