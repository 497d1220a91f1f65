//! Interactive access (DESIGN §15): this service is the OAuth 2.1 authorization server of
//! every gateway's `/mcp`. An MCP client registers ([`register`], RFC 7591) and sends the
//! person to `/oauth2/authorize` (or names itself by the URL of its metadata document,
//! [`client_document`]) with PKCE S256 and the gateway's MCP URL as its `resource`
//! (RFC 8707), which must be one of the gateway's public URLs ([`resource`]). The person signs
//! in at the OpenID provider of the gateway's interactive agents ([`crate::signin`]); only
//! then are the agents listed, those whose exact `actas_allowed_emails` /
//! `actas_allowed_subjects` entries admit them ([`authorize`]). No code is issued before the
//! person approves the client on the consent page ([`consent`]), which is remembered for the
//! person, client and agent until a grant of theirs for them is revoked. The authorization is
//! a grant: the client trades its code for an agent token that names the person and the grant
//! (the token `ExchangeAgentKey` mints, with `act` and `grant`) and a refresh token that is
//! rotated on each use ([`token`]). Revoking a grant ends its refresh tokens at once and its
//! access tokens when gateways next sync (snapshots list the grants revoked lately).

mod authorize;
mod client_document;
mod consent;
#[cfg(test)]
mod fuzz;
mod register;
mod resource;
mod token;

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::store::agents::AgentRow;
use crate::store::{interactive, Conn, StoreError};
use crate::App;

/// Refresh tokens live thirty days, each used once.
const REFRESH_SECS: i64 = 30 * 24 * 3600;
/// A sign-in at the OpenID provider must come back within ten minutes.
const SIGNIN_SECS: i64 = 600;
/// An authorization code is traded within a minute.
const CODE_SECS: i64 = 60;

pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route(
            "/.well-known/oauth-authorization-server",
            get(metadata).options(preflight),
        )
        .route(
            "/oauth2/register",
            post(register::register).options(preflight),
        )
        .route("/oauth2/authorize", get(authorize::authorize))
        .route("/oauth2/signin/callback", get(authorize::signed_in))
        .route("/oauth2/consent", post(consent::decide))
        .route("/oauth2/token", post(token::token).options(preflight))
        .route(
            "/oauth2/revoke",
            post(token::revoke_token).options(preflight),
        )
}

/// MCP clients that run in a browser (MCP Inspector) read the metadata, register and trade
/// codes from another origin: these endpoints take no cookies, so any origin may.
async fn preflight() -> Response {
    (
        StatusCode::NO_CONTENT,
        [
            (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
            (header::ACCESS_CONTROL_ALLOW_METHODS, "GET, POST, OPTIONS"),
            (
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                "authorization, content-type, mcp-protocol-version",
            ),
            (header::ACCESS_CONTROL_MAX_AGE, "86400"),
        ],
    )
        .into_response()
}

/// RFC 8414 metadata: this service's endpoints and what it supports.
async fn metadata(State(app): State<Arc<App>>) -> Response {
    let base = &app.base_url;
    let body = json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/oauth2/authorize"),
        "token_endpoint": format!("{base}/oauth2/token"),
        "registration_endpoint": format!("{base}/oauth2/register"),
        "revocation_endpoint": format!("{base}/oauth2/revoke"),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": register::AUTH_METHODS,
        "revocation_endpoint_auth_methods_supported": register::AUTH_METHODS,
        "authorization_response_iss_parameter_supported": true,
        "client_id_metadata_document_supported": true,
    });
    json_reply(StatusCode::OK, &body)
}

/// A JSON answer that is never cached (RFC 6749 §5.1).
fn json_reply(status: StatusCode, body: &serde_json::Value) -> Response {
    (
        status,
        [
            (header::CACHE_CONTROL, "no-store"),
            (header::PRAGMA, "no-cache"),
            (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
        ],
        axum::Json(body),
    )
        .into_response()
}

/// An OAuth error answer (RFC 6749 §5.2).
fn oauth_error(status: StatusCode, error: &str, description: &str) -> Response {
    json_reply(
        status,
        &json!({"error": error, "error_description": description}),
    )
}

/// What the MCP client asked for, carried through sign-in to its code.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Request {
    workspace_id: String,
    gateway_id: String,
    agent_id: String,
    client_id: String,
    redirect_uri: String,
    code_challenge: String,
    state: Option<String>,
    resource: String,
}

/// An authorization code's data: the request and the person who signed in. The grant is
/// made when the client trades the code.
#[derive(Debug, Serialize, Deserialize)]
struct Code {
    request: Request,
    subject: String,
    email: String,
}

/// The audit event of a sign-in's outcome, as the person: the grant made, or (`None`) the
/// agent refused them.
async fn record(app: &App, r: &Request, subject: &str, email: &str, grant: Option<&str>) {
    use portcullis_shared::audit::catalog::{
        InteractiveGranted, InteractiveRefused, InteractiveSignIn,
    };
    use portcullis_shared::audit::{results, ResourceRef};
    let resource = ResourceRef {
        kind: "agent".into(),
        id: r.agent_id.clone(),
        ..Default::default()
    };
    let sign_in = InteractiveSignIn {
        agent_id: r.agent_id.clone(),
        gateway_id: r.gateway_id.clone(),
        client_id: r.client_id.clone(),
        subject: subject.to_string(),
        email: email.to_string(),
    };
    let ws = &r.workspace_id;
    let mut event = match grant {
        Some(grant_id) => {
            let payload = InteractiveGranted {
                grant_id: grant_id.to_string(),
                sign_in,
            };
            crate::audit::person_event(ws, subject, resource, payload).into_v1()
        }
        None => {
            let payload = InteractiveRefused {
                grant_id: None,
                sign_in,
            };
            let mut event = crate::audit::person_event(ws, subject, resource, payload);
            event.result = results::DENIED.into();
            event.into_v1()
        }
    };
    event.request.http_route = "/oauth2/authorize".into();
    if let Err(e) = crate::audit::store(&app.store, &app.audit, vec![event]).await {
        tracing::error!(error = %e, "Could not record the sign-in's audit event.");
    }
}

/// Whether an allow-list entry names one identity (no `*` pattern).
pub(crate) fn is_exact(pattern: &str) -> bool {
    !pattern.contains('*')
}

/// Whether the agent admits this person interactively now: interactive access on, the agent
/// usable, and their `sub` or verified email listed exactly (entries with `*` match no one
/// here; emails compare without case).
pub fn admits(agent: &AgentRow, subject: &str, email: &str) -> bool {
    if !takes_sign_ins(agent) {
        return false;
    }
    let list = |text: &str| serde_json::from_str::<Vec<String>>(text).unwrap_or_default();
    let by_subject = !subject.is_empty()
        && list(&agent.actas_allowed_subjects)
            .iter()
            .any(|s| is_exact(s) && s == subject);
    let by_email = !email.is_empty()
        && list(&agent.actas_allowed_emails)
            .iter()
            .any(|e| is_exact(e) && e.eq_ignore_ascii_case(email));
    by_subject || by_email
}

/// Whether anyone may sign in to use the agent: interactive access on and the agent usable.
fn takes_sign_ins(agent: &AgentRow) -> bool {
    agent.interactive_access != 0 && agent.is_usable()
}

/// Revokes the agent's grants its settings (as stored now) no longer admit; how many.
pub async fn revoke_unadmitted(conn: &mut Conn, agent: &AgentRow) -> Result<u64, StoreError> {
    let now = crate::store::now_ms();
    let mut revoked = 0;
    for g in interactive::agent_grants(conn, &agent.id).await? {
        if !admits(agent, &g.subject, &g.email)
            && interactive::revoke_grant(conn, &g.id, now).await?.is_some()
        {
            tracing::info!(grant_id = %g.id, agent_id = %agent.id, "Interactive grant revoked: the agent no longer admits its person.");
            revoked += 1;
        }
    }
    Ok(revoked)
}
