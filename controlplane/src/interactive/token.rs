//! `/oauth2/token`: an authorization code (with its PKCE verifier) or a refresh token in, an
//! agent token for the grant's gateway and a new refresh token out. Refresh tokens are used
//! once: a used one presented again revokes its grant (RFC 9700 §4.14). Before every token
//! the agent is checked to still admit the person; if it does not, the grant is revoked.
//! `/oauth2/revoke` (RFC 7009): revoking a refresh token revokes its grant.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use portcullis_shared::api::agents::BoundSubject;
use portcullis_shared::keys;
use portcullis_shared::snapshot::{AgentTokenClaims, AGENT_TOKEN_ISSUER};
use serde_json::json;

use super::{admits, json_reply, oauth_error, record, Code, REFRESH_SECS};
use crate::error::ApiError;
use crate::signin::random_token;
use crate::store::interactive::{self, ClientRow, GrantRow};
use crate::store::{agents, now_ms};
use crate::token_signing::sign;
use crate::App;

type Form = HashMap<String, String>;

/// Why a token request is refused: its status, OAuth error code and description.
struct Refusal(StatusCode, &'static str, String);

impl Refusal {
    fn grant(description: impl Into<String>) -> Self {
        Refusal(StatusCode::BAD_REQUEST, "invalid_grant", description.into())
    }

    fn client(description: impl Into<String>) -> Self {
        Refusal(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            description.into(),
        )
    }

    fn answer(self) -> Response {
        oauth_error(self.0, self.1, &self.2)
    }
}

impl<E: Into<ApiError>> From<E> for Refusal {
    fn from(e: E) -> Self {
        let e: ApiError = e.into();
        tracing::error!(error = %e, "Token request failed.");
        Refusal(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "the request could not be completed".into(),
        )
    }
}

fn form(body: &[u8]) -> Form {
    url::form_urlencoded::parse(body).into_owned().collect()
}

fn field<'a>(f: &'a Form, key: &str) -> Option<&'a str> {
    f.get(key).map(String::as_str).filter(|v| !v.is_empty())
}

pub async fn token(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    let f = form(&body);
    let answer = async {
        let client = authenticate(&app, &headers, &f).await?;
        match field(&f, "grant_type") {
            Some("authorization_code") => by_code(&app, &client, &f).await,
            Some("refresh_token") => by_refresh(&app, &client, &f).await,
            Some(other) => Err(Refusal(
                StatusCode::BAD_REQUEST,
                "unsupported_grant_type",
                format!("grant_type {other:?} is not supported"),
            )),
            None => Err(Refusal(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "grant_type is missing".into(),
            )),
        }
    };
    answer.await.unwrap_or_else(Refusal::answer)
}

/// The client making the request, authenticated as it registered: HTTP Basic or form
/// credentials for a confidential client, its id alone for a public one.
async fn authenticate(app: &App, headers: &HeaderMap, f: &Form) -> Result<ClientRow, Refusal> {
    let basic = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .map(|b| basic_credentials(b).ok_or_else(|| Refusal::client("malformed Basic credentials")))
        .transpose()?;
    let (id, secret) = match &basic {
        Some((id, secret)) => (id.as_str(), Some(secret.as_str())),
        None => (
            field(f, "client_id").ok_or_else(|| Refusal::client("client_id is missing"))?,
            field(f, "client_secret"),
        ),
    };
    let mut conn = app.store.read().await?;
    let client = interactive::client(&mut conn, id)
        .await?
        .ok_or_else(|| Refusal::client("unknown client"))?;
    if client.auth_method != "none" {
        let presented = secret.ok_or_else(|| Refusal::client("the client's secret is missing"))?;
        if !keys::hashes_equal(&keys::hash(presented), &client.secret_hash) {
            return Err(Refusal::client("the client's secret is wrong"));
        }
    }
    Ok(client)
}

/// The client id and secret of HTTP Basic credentials, each form-urlencoded (RFC 6749
/// §2.3.1).
pub(super) fn basic_credentials(encoded: &str) -> Option<(String, String)> {
    let text = String::from_utf8(STANDARD.decode(encoded.trim()).ok()?).ok()?;
    let (id, secret) = text.split_once(':')?;
    let decode = |s: &str| -> String {
        let s = s.replace('&', "%26");
        url::form_urlencoded::parse(format!("x={s}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default()
    };
    Some((decode(id), decode(secret)))
}

async fn by_code(app: &App, client: &ClientRow, f: &Form) -> Result<Response, Refusal> {
    let code = field(f, "code").ok_or_else(|| Refusal::grant("code is missing"))?;
    let mut tx = app.store.write_unscoped().await?;
    let cipher = app.store.cipher();
    let taken = interactive::take_pending(tx.conn(), cipher, "code", &keys::hash(code)).await?;
    tx.commit().await?;
    let (data, _) = taken
        .filter(|(_, expires)| *expires >= now_ms())
        .ok_or_else(|| Refusal::grant("the code is unknown, used or expired"))?;
    let code: Code =
        serde_json::from_str(&data).map_err(|_| crate::error::corrupt("authorization code"))?;
    let r = &code.request;
    if r.client_id != client.client_id {
        return Err(Refusal::grant("the code was issued to another client"));
    }
    if field(f, "redirect_uri").is_some_and(|u| u != r.redirect_uri) {
        return Err(Refusal::grant(
            "redirect_uri is not the one the code was issued for",
        ));
    }
    let verifier = field(f, "code_verifier")
        .ok_or_else(|| Refusal::grant("code_verifier is missing (PKCE is required)"))?;
    let verifier = oauth2::PkceCodeVerifier::new(verifier.to_string());
    let challenge = oauth2::PkceCodeChallenge::from_code_verifier_sha256(&verifier);
    if !keys::hashes_equal(challenge.as_str(), &r.code_challenge) {
        return Err(Refusal::grant(
            "code_verifier does not match the code_challenge",
        ));
    }
    if field(f, "resource").is_some_and(|res| res != r.resource) {
        return Err(Refusal(
            StatusCode::BAD_REQUEST,
            "invalid_target",
            "resource is not the one that was authorized".into(),
        ));
    }
    let now = now_ms();
    let grant = GrantRow {
        id: uuid::Uuid::new_v4().to_string(),
        workspace_id: r.workspace_id.clone(),
        agent_id: r.agent_id.clone(),
        gateway_id: r.gateway_id.clone(),
        client_id: r.client_id.clone(),
        subject: code.subject.clone(),
        email: code.email.clone(),
        created_at: now,
        last_used_at: now,
        revoked_at: None,
    };
    let refresh = random_token();
    let reply = issue(app, &grant, &refresh).await?;
    let mut tx = app.store.write_unscoped().await?;
    interactive::insert_grant(tx.conn(), &grant).await?;
    agents::activate(tx.conn(), &grant.agent_id, now).await?;
    let expires = now + REFRESH_SECS * 1000;
    interactive::insert_refresh(tx.conn(), &keys::hash(&refresh), &grant.id, expires).await?;
    tx.commit().await?;
    record(app, r, &grant.subject, &grant.email, Some(&grant.id)).await;
    tracing::info!(grant_id = %grant.id, agent_id = %grant.agent_id, subject = %grant.subject, "Interactive grant issued.");
    Ok(reply)
}

async fn by_refresh(app: &App, client: &ClientRow, f: &Form) -> Result<Response, Refusal> {
    let presented =
        field(f, "refresh_token").ok_or_else(|| Refusal::grant("refresh_token is missing"))?;
    let used = keys::hash(presented);
    let mut conn = app.store.read().await?;
    let row = interactive::refresh_row(&mut conn, &used)
        .await?
        .ok_or_else(|| Refusal::grant("the refresh token is unknown or revoked"))?;
    drop(conn);
    let grant = live_grant(app, &row.grant_id).await?;
    if grant.client_id != client.client_id {
        return Err(Refusal::grant(
            "the refresh token was issued to another client",
        ));
    }
    if row.used_at.is_some() {
        revoke(app, &grant.id, "a used refresh token was presented again").await?;
        return Err(Refusal::grant(
            "the refresh token was already used; its grant is revoked: sign in again",
        ));
    }
    if row.expires_at < now_ms() {
        return Err(Refusal::grant(
            "the refresh token has expired: sign in again",
        ));
    }
    let next = random_token();
    let reply = issue(app, &grant, &next).await?;
    let mut tx = app.store.write_unscoped().await?;
    let expires = now_ms() + REFRESH_SECS * 1000;
    let rotated = interactive::rotate_refresh(
        tx.conn(),
        &used,
        &keys::hash(&next),
        &grant.id,
        expires,
        now_ms(),
    )
    .await?;
    tx.commit().await?;
    if !rotated {
        revoke(app, &grant.id, "a refresh token was used twice at once").await?;
        return Err(Refusal::grant(
            "the refresh token was already used: sign in again",
        ));
    }
    Ok(reply)
}

async fn live_grant(app: &App, id: &str) -> Result<GrantRow, Refusal> {
    let mut conn = app.store.read().await?;
    interactive::grant(&mut conn, id)
        .await?
        .filter(|g| g.revoked_at.is_none())
        .ok_or_else(|| Refusal::grant("the grant was revoked: sign in again"))
}

/// Revokes a grant (the workspace's revision moves, so gateways learn it).
async fn revoke(app: &App, grant_id: &str, why: &str) -> Result<(), Refusal> {
    let mut conn = app.store.read().await?;
    let Some(grant) = interactive::grant(&mut conn, grant_id).await? else {
        return Ok(());
    };
    drop(conn);
    let mut tx = app.store.write(&grant.workspace_id).await?;
    interactive::revoke_grant(tx.conn(), grant_id, now_ms()).await?;
    tx.commit().await?;
    tracing::warn!(grant_id, why, "Interactive grant revoked.");
    Ok(())
}

/// The access token for a grant, with `refresh` as its refresh token, once the agent is
/// checked to still admit the person.
async fn issue(app: &App, grant: &GrantRow, refresh: &str) -> Result<Response, Refusal> {
    let mut conn = app.store.read().await?;
    let agent = agents::get(&mut conn, &grant.workspace_id, &grant.agent_id).await?;
    drop(conn);
    let Some(agent) = agent.filter(|a| admits(a, &grant.subject, &grant.email)) else {
        revoke(app, &grant.id, "the agent no longer admits the person").await?;
        return Err(Refusal::grant(
            "the agent no longer admits this person interactively; the grant is revoked",
        ));
    };
    let ttl = agent
        .token_ttl_secs
        .clamp(1, crate::config::MAX_INTERACTIVE_ACCESS_SECS);
    let now = chrono::Utc::now().timestamp();
    let claims = AgentTokenClaims {
        iss: AGENT_TOKEN_ISSUER.to_string(),
        sub: agent.id.clone(),
        aud: grant.gateway_id.clone(),
        iat: now,
        exp: now + ttl,
        jti: uuid::Uuid::new_v4().to_string(),
        ws: grant.workspace_id.clone(),
        act: Some(BoundSubject {
            sub: grant.subject.clone(),
            email: grant.email.clone(),
            groups: Vec::new(),
        }),
        grant: Some(grant.id.clone()),
    };
    let access = sign(&app.store, &grant.workspace_id, &claims).await?;
    Ok(json_reply(
        StatusCode::OK,
        &json!({
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": ttl,
            "refresh_token": refresh,
        }),
    ))
}

/// RFC 7009: a refresh token of the authenticated client ends its grant. Anything else
/// (an access token, an unknown value) is answered 200 and changes nothing.
pub async fn revoke_token(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let f = form(&body);
    let answer = async {
        let client = authenticate(&app, &headers, &f).await?;
        let token = field(&f, "token").ok_or_else(|| {
            Refusal(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "token is missing".into(),
            )
        })?;
        let mut conn = app.store.read().await?;
        let row = interactive::refresh_row(&mut conn, &keys::hash(token)).await?;
        let grant = match row {
            Some(r) => interactive::grant(&mut conn, &r.grant_id).await?,
            None => None,
        };
        drop(conn);
        if let Some(g) = grant.filter(|g| g.client_id == client.client_id) {
            revoke(&app, &g.id, "its client revoked it").await?;
        }
        Ok::<_, Refusal>(json_reply(StatusCode::OK, &json!({})))
    };
    answer.await.unwrap_or_else(Refusal::answer)
}
