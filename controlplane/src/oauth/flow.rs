//! The consent over HTTP: a one-use link (`/connect/{token}` from a Begin…OAuthConnect, or
//! a person's `/provision/{token}` on a per-user OAuth connection) sends the browser to the
//! provider with PKCE S256, a fresh `state` and the `resource`; the provider sends it back to
//! `GET /oauth/callback?code&state`, where the code becomes a stored grant.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use oauth2::{CsrfToken, PkceCodeChallenge, Scope};
use portcullis_shared::audit::catalog::{CredentialProvisioned, OauthConnected};
use portcullis_shared::keys;

use super::{provider, tokens};
use crate::error::ApiResult;
use crate::pages::{escape, failure, page, Refusal};
use crate::store::credentials::Owner;
use crate::store::now_ms;
use crate::store::oauth_flows::{self, FlowRow};
use crate::store::provision::{self, ProvisionRow};
use crate::App;

/// How long the provider's answer is waited for.
const FLOW_TTL_MS: i64 = 10 * 60 * 1000;

pub fn routes() -> Router<Arc<App>> {
    Router::new().route("/oauth/callback", get(callback))
}

/// Uses the link up and sends the browser to the provider. `Ok(Err(page))` when the link
/// was taken meanwhile.
pub async fn start(app: &App, link: &ProvisionRow) -> ApiResult<Result<Response, Response>> {
    let mut conn = app.store.read().await?;
    let owner = Owner::parse(&link.owner_kind).unwrap_or(Owner::Tool);
    let c = super::connection(app, &mut conn, &link.workspace_id, owner, &link.owner_id).await?;
    drop(conn);
    let p = provider(app, &c, true).await?;
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let mut request = p
        .client
        .authorize_url(CsrfToken::new_random)
        .set_pkce_challenge(challenge);
    for s in &p.scopes {
        request = request.add_scope(Scope::new(s.clone()));
    }
    if let Some(r) = &p.resource {
        request = request.add_extra_param("resource", r);
    }
    let (url, state) = request.url();
    // Nothing here is in a snapshot: no gateway needs waking.
    let mut tx = app.store.write_unscoped().await?;
    if !provision::take(tx.conn(), &link.token_hash, now_ms()).await? {
        return Ok(Err(Refusal::Used.page()));
    }
    let flow = FlowRow {
        state_hash: keys::hash(state.secret()),
        workspace_id: link.workspace_id.clone(),
        owner_kind: link.owner_kind.clone(),
        owner_id: link.owner_id.clone(),
        subject: link.subject.clone(),
        verifier: String::new(),
        expires_at: now_ms() + FLOW_TTL_MS,
    };
    oauth_flows::insert(tx.conn(), app.store.cipher(), flow, verifier.secret()).await?;
    tx.commit().await?;
    let to = url.to_string();
    Ok(Ok((
        StatusCode::FOUND,
        [
            (header::LOCATION, to.as_str()),
            (header::CACHE_CONTROL, "no-store"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
    )
        .into_response()))
}

async fn callback(
    State(app): State<Arc<App>>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    match finish(&app, &query).await {
        Ok(page) => page,
        Err(e) => failure(&e),
    }
}

async fn finish(app: &App, query: &HashMap<String, String>) -> ApiResult<Response> {
    let unknown = || {
        page(
            StatusCode::BAD_REQUEST,
            "Not a consent in progress",
            "<p>This address does not belong to a consent this service started, or it was \
             already used. Start again from a new link.</p>",
        )
    };
    let Some(state) = query.get("state") else {
        return Ok(unknown());
    };
    let mut tx = app.store.write_unscoped().await?;
    let taken = oauth_flows::take(tx.conn(), app.store.cipher(), &keys::hash(state)).await?;
    tx.commit().await?;
    let Some((flow, verifier)) = taken else {
        return Ok(unknown());
    };
    if flow.expires_at <= now_ms() {
        let text = "<p>The consent took longer than ten minutes. Start again from a new link.</p>";
        return Ok(page(StatusCode::GONE, "Consent expired", text));
    }
    if let Some(error) = query.get("error") {
        let detail = query
            .get("error_description")
            .map_or(String::new(), |d| format!(": {d}"));
        let text = format!(
            "<p>The provider did not grant access ({}{}). Nothing was stored.</p>",
            escape(error),
            escape(&detail)
        );
        return Ok(page(StatusCode::FORBIDDEN, "Access not granted", &text));
    }
    let Some(code) = query.get("code").filter(|c| !c.is_empty()) else {
        return Ok(unknown());
    };
    let mut conn = app.store.read().await?;
    let owner = Owner::parse(&flow.owner_kind).unwrap_or(Owner::Tool);
    let c = super::connection(app, &mut conn, &flow.workspace_id, owner, &flow.owner_id).await?;
    drop(conn);
    let p = provider(app, &c, false).await?;
    tokens::exchange(app, &c, &p, &flow.subject, code.clone(), verifier).await?;
    let grant = tokens::grant(&c, &flow.subject);
    let method = "oauth".to_string();
    if flow.subject.is_empty() {
        let payload = OauthConnected { grant, method };
        tokens::record(app, &c, &flow.subject, payload).await;
    } else {
        let method = Some(method);
        let payload = CredentialProvisioned { grant, method };
        tokens::record(app, &c, &flow.subject, payload).await;
    }
    tracing::info!(connection_id = %c.id, shared = flow.subject.is_empty(), "OAuth consent stored.");
    let text = format!(
        "<p><b>{}</b> is connected. Go back to your agent and try again.</p>",
        escape(&c.name)
    );
    Ok(page(StatusCode::OK, "Connected", &text))
}
