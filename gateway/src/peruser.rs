//! Per-user credentials (DESIGN §14): the header values a person's own key becomes, asked of
//! the control plane (`SyncService/GetCredential`) when a call needs them and kept in memory
//! only, for at most [`TTL`], so a credential revoked or replaced there stops being used
//! within that bound. A person without one gets a one-use link to provide it; that answer is
//! never cached.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{HeaderName, HeaderValue};
use portcullis_shared::snapshot::{CredentialOwner, GetCredentialRequest, GetCredentialResponse};

use crate::control::SyncError;
use crate::error::GatewayError;
use crate::request::RequestCtx;
use crate::Gateway;

/// Longest a fetched credential is used before it is asked for again: under the 60 s bound
/// by the time a call in flight may take to fetch and use it.
pub const TTL: Duration = Duration::from_secs(55);

/// A person's credential: the headers it sends, and a digest of them that says whether two
/// fetches returned the same credential.
#[derive(Debug)]
pub struct Credential {
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub digest: String,
}

pub type Headers = Arc<Credential>;

pub use crate::error::Missing;

/// One connection's fetched credentials by subject, with when each must be fetched again.
type People = HashMap<String, (Instant, Headers)>;

/// Fetched credentials by connection id, then subject: a hit allocates nothing.
#[derive(Default)]
pub struct Credentials {
    cache: Mutex<HashMap<String, People>>,
}

impl Credentials {
    /// The fetched credential of `subject` on the connection, while it may still be used.
    pub fn cached(&self, connection_id: &str, subject: &str) -> Option<Headers> {
        let map = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        map.get(connection_id)?
            .get(subject)
            .filter(|(until, _)| Instant::now() < *until)
            .map(|(_, h)| h.clone())
    }

    /// Keeps a fetched credential for `ttl` (expired entries go as it is added).
    pub fn keep(&self, connection_id: &str, subject: &str, headers: Headers, ttl: Duration) {
        let now = Instant::now();
        let mut map = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        for people in map.values_mut() {
            people.retain(|_, (until, _)| now < *until);
        }
        map.retain(|_, people| !people.is_empty());
        map.entry(connection_id.to_string())
            .or_default()
            .insert(subject.to_string(), (now + ttl, headers));
    }

    /// Forgets the credentials of these connections (their configuration changed, which may
    /// mean a new credential).
    pub fn forget(&self, connection_ids: &[&str]) {
        if connection_ids.is_empty() {
            return;
        }
        let mut map = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        for id in connection_ids {
            map.remove(*id);
        }
    }

    /// The person's headers for the connection, or where to provide them: a link bound to the
    /// person, which they open after signing in where the calling agent's people do
    /// (`agent_id`; `""` with the shared subject `""`).
    pub async fn lookup(
        &self,
        gw: &Gateway,
        owner: CredentialOwner,
        connection_id: &str,
        (subject, agent_id): (&str, &str),
    ) -> Result<Result<Headers, Missing>, GatewayError> {
        if let Some(headers) = self.cached(connection_id, subject) {
            return Ok(Ok(headers));
        }
        let answer = fetch(gw, owner, connection_id, (subject, agent_id)).await?;
        match (answer.secret_values, answer.provision_url) {
            (Some(values), _) => {
                let text: Vec<String> = values.0.iter().map(|(k, v)| format!("{k}\n{v}")).collect();
                let headers = Arc::new(Credential {
                    headers: headers(&values.0)?,
                    digest: portcullis_shared::keys::hash(&text.join("\n")),
                });
                // An OAuth access token is asked for again before it is due for refresh.
                let ttl = answer
                    .cache_seconds
                    .map_or(TTL, |s| TTL.min(Duration::from_secs(s)));
                if !ttl.is_zero() {
                    self.keep(connection_id, subject, headers.clone(), ttl);
                }
                Ok(Ok(headers))
            }
            (None, Some(provision_url)) => Ok(Err(Missing {
                connection_name: answer.connection_name,
                provision_url,
                expires_at: answer.expires_at.unwrap_or_default(),
            })),
            (None, None) => Err(GatewayError::Internal(
                "the control plane sent neither a credential nor a link".into(),
            )),
        }
    }
}

/// Whose credential a per-user call uses: the verified person, refused without one. An HMAC
/// identity is only as trustworthy as the agent holding the secret, so a credential given
/// through one HMAC agent is that agent's alone (`<sub>|hmac:<agent id>`).
pub fn subject(rc: &RequestCtx<'_>, connection: &str) -> Result<String, GatewayError> {
    let a = &rc.context.typed().act_as;
    if !(a.present && a.verified && !a.sub.is_empty()) {
        return Err(GatewayError::ActAsRefused {
            code: "actas_required",
            message: format!(
                "'{connection}' uses each person's own credential: the call must act for a verified person"
            ),
        });
    }
    Ok(match a.method.as_str() {
        "hmac" => format!("{}|hmac:{}", a.sub, rc.agent.id),
        _ => a.sub.clone(),
    })
}

fn headers(
    values: &std::collections::BTreeMap<String, String>,
) -> Result<Vec<(HeaderName, HeaderValue)>, GatewayError> {
    values
        .iter()
        .map(|(k, v)| {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| GatewayError::Internal(format!("{k:?} is not a header name")))?;
            let mut value = HeaderValue::from_str(v).map_err(|_| {
                GatewayError::Internal(format!("the value of {k} is not a header value"))
            })?;
            value.set_sensitive(true);
            Ok((name, value))
        })
        .collect()
}

async fn fetch(
    gw: &Gateway,
    owner: CredentialOwner,
    connection_id: &str,
    (subject, agent_id): (&str, &str),
) -> Result<GetCredentialResponse, GatewayError> {
    let request = GetCredentialRequest {
        workspace_id: None,
        owner,
        connection_id: connection_id.to_string(),
        subject: subject.to_string(),
        agent_id: agent_id.to_string(),
    };
    gw.control.get_credential(&request).await.map_err(|e| {
        // The control plane's reason (a connection not connected yet, …) is the caller's too.
        let why = match e {
            SyncError::Unreachable(_) => "the control plane is unreachable".to_string(),
            SyncError::Refused {
                message: Some(m), ..
            } => m,
            SyncError::Refused { status, .. } => format!("the control plane answered {status}"),
            SyncError::Unreadable(e) => format!("unreadable answer: {e}"),
        };
        GatewayError::Upstream(format!("the credential could not be fetched: {why}"))
    })
}
