//! Stored grants: the tokens a consent gave, sealed as a connection's credential (shared:
//! subject `""`; per-user: the person's `sub`), refreshed ahead of expiry with one refresh at
//! a time per grant, and revoked at the provider on disconnect. A grant the provider refuses
//! to refresh is deleted and audited; a provider that cannot be reached leaves it stored.

use std::collections::BTreeMap;

use oauth2::basic::BasicErrorResponseType;
use oauth2::{RefreshToken, RequestTokenError, TokenResponse};
use portcullis_shared::audit::catalog::{ConnectionGrant, OauthRefreshFailed};
use portcullis_shared::audit::{AuditPayload, ResourceRef};

use super::{provider, Connection, Provider};
use crate::error::{precondition, ApiError, ApiResult};
use crate::store::{credentials, now_ms, oauth_flows};
use crate::App;

/// Longest a gateway keeps an access token before asking again.
const MAX_CACHE_SECONDS: i64 = 55;

/// A grant as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub access_token: String,
    pub refresh_token: Option<String>,
    /// Unix milliseconds; `None` when the provider gave no lifetime.
    pub expires_at: Option<i64>,
    pub obtained_at: i64,
}

impl Grant {
    fn from_response(r: &oauth2::basic::BasicTokenResponse, previous: Option<&Grant>) -> Self {
        let now = now_ms();
        Grant {
            access_token: r.access_token().secret().clone(),
            // A provider that does not rotate refresh tokens sends none back: keep ours.
            refresh_token: r
                .refresh_token()
                .map(|t| t.secret().clone())
                .or_else(|| previous.and_then(|p| p.refresh_token.clone())),
            expires_at: r
                .expires_in()
                .map(|d| now + i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 2)),
            obtained_at: now,
        }
    }

    fn values(&self) -> BTreeMap<String, String> {
        let mut v = BTreeMap::from([
            ("access_token".to_string(), self.access_token.clone()),
            ("obtained_at".to_string(), self.obtained_at.to_string()),
        ]);
        if let Some(r) = &self.refresh_token {
            v.insert("refresh_token".into(), r.clone());
        }
        if let Some(e) = self.expires_at {
            v.insert("expires_at".into(), e.to_string());
        }
        v
    }

    fn parse(v: &BTreeMap<String, String>) -> Option<Self> {
        Some(Grant {
            access_token: v.get("access_token")?.clone(),
            refresh_token: v.get("refresh_token").cloned(),
            expires_at: v.get("expires_at").and_then(|e| e.parse().ok()),
            obtained_at: v
                .get("obtained_at")
                .and_then(|e| e.parse().ok())
                .unwrap_or(0),
        })
    }

    /// When to refresh: a minute before expiry, or halfway through a shorter lifetime.
    fn refresh_at(&self) -> Option<i64> {
        let expires = self.expires_at?;
        let margin = (60_000).min((expires - self.obtained_at).max(0) / 2);
        Some(expires - margin)
    }

    fn expired(&self, now: i64) -> bool {
        self.expires_at.is_some_and(|e| e <= now)
    }

    /// The header a gateway sends, and how long it may keep it.
    pub fn header(&self, now: i64) -> (BTreeMap<String, String>, u64) {
        let keep = self.refresh_at().map_or(MAX_CACHE_SECONDS, |at| {
            ((at - now) / 1000).clamp(0, MAX_CACHE_SECONDS)
        });
        let header = BTreeMap::from([(
            "Authorization".to_string(),
            format!("Bearer {}", self.access_token),
        )]);
        (header, u64::try_from(keep).unwrap_or(0))
    }
}

async fn load(app: &App, c: &Connection, subject: &str) -> ApiResult<Option<Grant>> {
    let mut conn = app.store.read().await?;
    let values = credentials::open(&mut conn, app.store.cipher(), c.owner, &c.id, subject).await?;
    Ok(values.as_ref().and_then(Grant::parse))
}

/// Stores a grant. Tokens are not in snapshots: only a new shared grant is announced to the
/// gateways (`announce`: it changes the tool's fingerprint, so they drop the old token and
/// sessions and retry discovery), so refreshes and people's consents do not make every
/// gateway recompile.
async fn save(
    app: &App,
    c: &Connection,
    subject: &str,
    grant: &Grant,
    announce: bool,
) -> ApiResult<()> {
    let mut tx = match announce {
        true => app.store.write(&c.workspace_id).await?,
        false => app.store.write_unscoped().await?,
    };
    credentials::put(
        tx.conn(),
        app.store.cipher(),
        &c.workspace_id,
        c.owner,
        &c.id,
        subject,
        &grant.values(),
    )
    .await?;
    if announce {
        // The shared grant is in place: other consents under way for it end here.
        oauth_flows::cancel_shared(tx.conn(), &c.id).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Exchanges an authorization code for a grant and stores it.
pub async fn exchange(
    app: &App,
    c: &Connection,
    p: &Provider,
    subject: &str,
    code: String,
    verifier: String,
) -> ApiResult<()> {
    let mut request = p
        .client
        .exchange_code(oauth2::AuthorizationCode::new(code))
        .set_pkce_verifier(oauth2::PkceCodeVerifier::new(verifier));
    if let Some(r) = &p.resource {
        request = request.add_extra_param("resource", r);
    }
    let response = request
        .request_async(&app.oauth.http)
        .await
        .map_err(|e| precondition(format!("the provider refused the code: {}", describe(&e))))?;
    let grant = Grant::from_response(&response, None);
    save(app, c, subject, &grant, subject.is_empty()).await
}

/// The current grant of `subject` (`""`: the shared one), refreshed first when due; `None`
/// when there is none, or the provider refused to refresh it (then it is deleted).
pub async fn current(app: &App, c: &Connection, subject: &str) -> ApiResult<Option<Grant>> {
    let Some(grant) = load(app, c, subject).await? else {
        return Ok(None);
    };
    let due = |g: &Grant| g.refresh_at().is_some_and(|at| at <= now_ms());
    if !due(&grant) {
        return Ok(Some(grant));
    }
    // One refresh per grant: whoever waited reads what the first one stored.
    let key = format!("{}:{}:{subject}", c.owner.as_str(), c.id);
    let lock = app.oauth.refresh_lock(&key);
    let _held = lock.lock().await;
    let Some(grant) = load(app, c, subject).await? else {
        return Ok(None);
    };
    if !due(&grant) {
        return Ok(Some(grant));
    }
    refresh(app, c, subject, grant).await
}

async fn refresh(
    app: &App,
    c: &Connection,
    subject: &str,
    grant: Grant,
) -> ApiResult<Option<Grant>> {
    let Some(token) = grant.refresh_token.clone() else {
        // Nothing to refresh with: usable until it expires, then consent is needed again.
        if grant.expired(now_ms()) {
            forget(
                app,
                c,
                subject,
                "the access token expired and the provider gave no refresh token",
            )
            .await?;
            return Ok(None);
        }
        return Ok(Some(grant));
    };
    let p = provider(app, c, false).await?;
    let token = RefreshToken::new(token);
    let mut request = p.client.exchange_refresh_token(&token);
    if let Some(r) = &p.resource {
        request = request.add_extra_param("resource", r);
    }
    match request.request_async(&app.oauth.http).await {
        Ok(response) => {
            let fresh = Grant::from_response(&response, Some(&grant));
            save(app, c, subject, &fresh, false).await?;
            tracing::info!(connection_id = %c.id, "OAuth grant refreshed.");
            Ok(Some(fresh))
        }
        Err(RequestTokenError::ServerResponse(e))
            if matches!(
                e.error(),
                BasicErrorResponseType::InvalidGrant | BasicErrorResponseType::UnauthorizedClient
            ) =>
        {
            forget(
                app,
                c,
                subject,
                &format!("the provider refused to refresh it ({})", e.error()),
            )
            .await?;
            Ok(None)
        }
        Err(e) if !grant.expired(now_ms()) => {
            tracing::warn!(connection_id = %c.id, error = %describe(&e), "OAuth refresh failed; the current token is still valid.");
            Ok(Some(grant))
        }
        Err(e) => Err(ApiError::Unavailable(format!(
            "the OAuth grant of {} '{}' expired and could not be refreshed: {}",
            c.kind(),
            c.name,
            describe(&e)
        ))),
    }
}

/// Deletes a grant the provider will not refresh, and records why (never the token).
async fn forget(app: &App, c: &Connection, subject: &str, why: &str) -> ApiResult<()> {
    // A shared grant's end reaches the gateways at once (it is in the tool's fingerprint).
    let mut tx = match subject.is_empty() {
        true => app.store.write(&c.workspace_id).await?,
        false => app.store.write_unscoped().await?,
    };
    credentials::delete_subject(tx.conn(), c.owner, &c.id, subject).await?;
    tx.commit().await?;
    tracing::warn!(connection_id = %c.id, why, "OAuth grant deleted: consent is needed again.");
    let payload = OauthRefreshFailed {
        grant: grant(c, subject),
        reason: why.to_string(),
    };
    record(app, c, subject, payload).await;
    Ok(())
}

/// Revokes every grant of the connection at the provider (where it has a revocation
/// endpoint) and deletes them; how many there were.
pub async fn revoke_all(app: &App, c: &Connection) -> ApiResult<usize> {
    let mut conn = app.store.read().await?;
    let mut subjects: Vec<String> = credentials::subjects(&mut conn, c.owner, &c.id)
        .await?
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    subjects.push(String::new());
    let mut grants = Vec::new();
    for s in subjects {
        let values = credentials::open(&mut conn, app.store.cipher(), c.owner, &c.id, &s).await?;
        if let Some(g) = values.as_ref().and_then(Grant::parse) {
            grants.push(g);
        }
    }
    drop(conn);
    if !grants.is_empty() {
        revoke_at_provider(app, c, &grants).await;
    }
    let mut tx = app.store.write(&c.workspace_id).await?;
    credentials::delete_all(tx.conn(), c.owner, &c.id).await?;
    oauth_flows::cancel_shared(tx.conn(), &c.id).await?;
    tx.commit().await?;
    Ok(grants.len())
}

/// Revokes one person's grant at the provider and deletes it; whether there was one.
pub async fn revoke_subject(app: &App, c: &Connection, subject: &str) -> ApiResult<bool> {
    let Some(grant) = load(app, c, subject).await? else {
        return Ok(false);
    };
    revoke_at_provider(app, c, &[grant]).await;
    let mut tx = app.store.write_unscoped().await?;
    let found = credentials::delete_subject(tx.conn(), c.owner, &c.id, subject).await?;
    tx.commit().await?;
    Ok(found)
}

/// Best effort: a provider that cannot be reached does not keep the grant stored here.
async fn revoke_at_provider(app: &App, c: &Connection, grants: &[Grant]) {
    let revocation = match provider(app, c, false).await {
        Ok(p) => p.revocation,
        Err(e) => {
            tracing::warn!(connection_id = %c.id, error = %e, "Could not reach the provider to revoke the grants.");
            return;
        }
    };
    let Some(r) = revocation else { return };
    for g in grants {
        // Revoking the refresh token ends the grant; without one, the access token.
        let (token, hint) = match &g.refresh_token {
            Some(t) => (t, "refresh_token"),
            None => (&g.access_token, "access_token"),
        };
        if let Err(why) = revoke(&app.oauth, &r, token, hint).await {
            tracing::warn!(connection_id = %c.id, error = %why, "The provider did not revoke a grant.");
        }
    }
}

/// One RFC 7009 request: the client authenticates as at the token endpoint (HTTP Basic with
/// a secret, else its id in the form).
async fn revoke(
    oauth: &super::OAuth,
    r: &super::Revocation,
    token: &str,
    hint: &str,
) -> Result<(), String> {
    let mut form = vec![("token", token), ("token_type_hint", hint)];
    oauth.check_url(&r.url)?;
    let mut request = oauth.http().post(&r.url);
    match &r.client_secret {
        Some(secret) => {
            let encode =
                |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
            request = request.basic_auth(encode(&r.client_id), Some(encode(secret)));
        }
        None => form.push(("client_id", &r.client_id)),
    }
    let response = request
        .form(&form)
        .send()
        .await
        .map_err(|e| e.without_url().to_string())?;
    match response.status() {
        s if s.is_success() => Ok(()),
        s => Err(format!("{} answered {s}", r.url)),
    }
}

/// Whose grant of `c` an event is about: `subject`'s, or (empty) the connection's shared one.
pub fn grant(c: &Connection, subject: &str) -> ConnectionGrant {
    ConnectionGrant {
        connection_id: c.id.clone(),
        connection_name: c.name.clone(),
        subject: subject.to_string(),
    }
}

/// An audit event about a connection's grant: the person's when `subject` is one, else the
/// service's own.
pub async fn record<P: AuditPayload>(app: &App, c: &Connection, subject: &str, payload: P) {
    let resource = ResourceRef {
        kind: c.kind().into(),
        id: c.id.clone(),
        name: c.name.clone(),
        ..Default::default()
    };
    let mut event = crate::audit::person_event(&c.workspace_id, subject, resource, payload);
    if subject.is_empty() {
        event.actor.kind = portcullis_shared::audit::actors::SYSTEM.into();
        event.actor.id = "controlplane".into();
        event.actor.display = "control plane".into();
    }
    event.request.http_route = "/oauth/callback".into();
    if let Err(e) = crate::audit::store(&app.store, &app.audit, vec![event]).await {
        tracing::error!(error = %e, "Could not record an OAuth audit event.");
    }
}

/// What went wrong with a request to the provider, without any token.
pub fn describe<E: std::error::Error + 'static, T: oauth2::ErrorResponse + 'static>(
    e: &RequestTokenError<E, T>,
) -> String {
    match e {
        RequestTokenError::ServerResponse(r) => serde_json::to_value(r)
            .ok()
            .and_then(|v| {
                let error = v["error"].as_str()?.to_string();
                Some(match v["error_description"].as_str() {
                    Some(d) => format!("{error}: {d}"),
                    None => error,
                })
            })
            .unwrap_or_else(|| "an error response".into()),
        RequestTokenError::Request(e) => format!("the provider could not be reached: {e}"),
        RequestTokenError::Parse(e, _) => format!("unreadable answer: {e}"),
        RequestTokenError::Other(e) => e.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::Grant;

    fn grant(obtained: i64, expires: Option<i64>) -> Grant {
        Grant {
            access_token: "a".into(),
            refresh_token: Some("r".into()),
            expires_at: expires,
            obtained_at: obtained,
        }
    }

    #[test]
    fn grants_refresh_a_minute_early_or_halfway_through_short_lives() {
        assert_eq!(grant(0, Some(3_600_000)).refresh_at(), Some(3_540_000));
        assert_eq!(grant(0, Some(4_000)).refresh_at(), Some(2_000));
        assert_eq!(grant(0, None).refresh_at(), None);
        let (_, keep) = grant(0, Some(3_600_000)).header(0);
        assert_eq!(keep, 55, "a gateway asks again within a minute");
        let (_, keep) = grant(0, Some(4_000)).header(0);
        assert_eq!(keep, 2, "and before the refresh is due");
        let (h, _) = grant(0, None).header(0);
        assert_eq!(h["Authorization"], "Bearer a");
    }

    #[test]
    fn a_stored_grant_reads_back() {
        let g = grant(5, Some(10));
        assert_eq!(Grant::parse(&g.values()), Some(g));
    }
}
