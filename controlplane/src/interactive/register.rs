//! Dynamic client registration (RFC 7591): any MCP client may register; registering grants
//! nothing by itself. Redirect URIs must be HTTPS, HTTP on a loopback address, or a private
//! scheme of a native app (RFC 8252), without a fragment. A client that asks for no token
//! endpoint authentication method gets `client_secret_basic` (RFC 7591's default) and a
//! secret shown once; `none` makes a public client that proves itself with PKCE alone.
//! Registering is rationed per client address (`REGISTER_BURST`, then 429) and bounded in
//! size ([`MAX_BODY_BYTES`], redirect URIs, name); a client no code was ever issued to is
//! purged a day after it registered (`store::interactive::purge`).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use serde::Deserialize;
use serde_json::json;

use super::{json_reply, oauth_error};
use crate::oauth::documents::{REGISTER_BURST, REGISTER_REFILL};
use crate::signin::random_token;
use crate::store::{interactive, now_ms};
use crate::App;

pub const AUTH_METHODS: [&str; 3] = ["none", "client_secret_basic", "client_secret_post"];
const MAX_REDIRECT_URIS: usize = 10;
const MAX_URI_LEN: usize = 2000;
pub(super) const MAX_NAME_LEN: usize = 200;
/// Largest registration request read; more is refused (413) without being read.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

#[derive(Deserialize)]
struct Metadata {
    #[serde(default)]
    redirect_uris: Vec<String>,
    #[serde(default)]
    client_name: Option<String>,
    #[serde(default)]
    token_endpoint_auth_method: Option<String>,
    #[serde(default)]
    grant_types: Option<Vec<String>>,
    #[serde(default)]
    response_types: Option<Vec<String>>,
}

/// `invalid_client_metadata` with its description, as [`check_metadata`] refuses.
fn invalid_metadata(description: impl Into<String>) -> (&'static str, String) {
    ("invalid_client_metadata", description.into())
}

fn bad_metadata(description: &str) -> Response {
    oauth_error(
        StatusCode::BAD_REQUEST,
        "invalid_client_metadata",
        description,
    )
}

/// Refuses a client address past its registration budget (429, with `Retry-After`).
fn over_budget(app: &App) -> Option<Response> {
    let peer = crate::peer::current()?;
    if app.oauth.registrations.spend(peer) {
        return None;
    }
    tracing::info!(%peer, "Client registration refused: the address's budget is used up.");
    let mut reply = oauth_error(
        StatusCode::TOO_MANY_REQUESTS,
        "temporarily_unavailable",
        &format!(
            "too many clients were registered from this address: {REGISTER_BURST} at once, \
             then one every {} s",
            REGISTER_REFILL.as_secs()
        ),
    );
    reply.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from(REGISTER_REFILL.as_secs()),
    );
    Some(reply)
}

pub async fn register(State(app): State<Arc<App>>, body: Body) -> Response {
    if let Some(refused) = over_budget(&app) {
        return refused;
    }
    let Ok(body) = axum::body::to_bytes(body, MAX_BODY_BYTES).await else {
        return oauth_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_client_metadata",
            &format!("the registration is larger than {MAX_BODY_BYTES} bytes"),
        );
    };
    let meta: Metadata = match serde_json::from_slice(&body) {
        Ok(m) => m,
        Err(e) => return bad_metadata(&format!("the body is not client metadata: {e}")),
    };
    let (method, name) = match check_metadata(&meta) {
        Ok(checked) => checked,
        Err((error, why)) => return oauth_error(StatusCode::BAD_REQUEST, error, &why),
    };
    let secret = (method != "none").then(random_token);
    let row = interactive::ClientRow {
        client_id: format!("mcp_{}", uuid::Uuid::new_v4().simple()),
        client_name: name.to_string(),
        redirect_uris: serde_json::to_string(&meta.redirect_uris).unwrap_or_default(),
        auth_method: method.to_string(),
        secret_hash: secret
            .as_deref()
            .map(portcullis_shared::keys::hash)
            .unwrap_or_default(),
        created_at: now_ms(),
    };
    if let Err(e) = save(&app, &row).await {
        tracing::error!(error = %e, "Could not store a client registration.");
        return oauth_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "the registration could not be stored",
        );
    }
    tracing::info!(client_id = %row.client_id, client_name = %row.client_name, "MCP client registered.");
    let mut reply = json!({
        "client_id": row.client_id,
        "client_id_issued_at": row.created_at / 1000,
        "client_name": row.client_name,
        "redirect_uris": meta.redirect_uris,
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": method,
    });
    if let Some(secret) = secret {
        reply["client_secret"] = json!(secret);
        reply["client_secret_expires_at"] = json!(0);
    }
    json_reply(StatusCode::CREATED, &reply)
}

/// Checks the client's metadata; returns its token endpoint authentication method and its
/// name (defaults filled in), or the OAuth error to refuse it with and its description.
fn check_metadata(meta: &Metadata) -> Result<(&str, &str), (&'static str, String)> {
    if let Err(why) = check_redirect_uris(&meta.redirect_uris) {
        return Err(("invalid_redirect_uri", why));
    }
    let method = meta
        .token_endpoint_auth_method
        .as_deref()
        .unwrap_or("client_secret_basic");
    if !AUTH_METHODS.contains(&method) {
        return Err(invalid_metadata(format!(
            "token_endpoint_auth_method {method:?} is not supported; use one of {}",
            AUTH_METHODS.join(", ")
        )));
    }
    let grants = meta.grant_types.as_deref().unwrap_or_default();
    if let Some(g) = grants
        .iter()
        .find(|g| !["authorization_code", "refresh_token"].contains(&g.as_str()))
    {
        return Err(invalid_metadata(format!(
            "grant type {g:?} is not supported; only authorization_code and refresh_token"
        )));
    }
    let responses = meta.response_types.as_deref().unwrap_or_default();
    if responses.iter().any(|r| r != "code") {
        return Err(invalid_metadata(
            "only the response type \"code\" is supported",
        ));
    }
    let name = meta
        .client_name
        .as_deref()
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .unwrap_or("MCP client");
    if name.chars().count() > MAX_NAME_LEN {
        return Err(invalid_metadata(format!(
            "client_name is longer than {MAX_NAME_LEN} characters"
        )));
    }
    Ok((method, name))
}

async fn save(app: &App, row: &interactive::ClientRow) -> Result<(), crate::store::StoreError> {
    let mut tx = app.store.write_unscoped().await?;
    interactive::save_client(tx.conn(), row).await?;
    tx.commit().await.map(drop)
}

fn check_redirect_uris(uris: &[String]) -> Result<(), String> {
    if uris.is_empty() {
        return Err("redirect_uris is required: at least one".into());
    }
    if uris.len() > MAX_REDIRECT_URIS {
        return Err(format!("at most {MAX_REDIRECT_URIS} redirect_uris"));
    }
    uris.iter().try_for_each(|u| check_redirect_uri(u))
}

pub(super) fn check_redirect_uri(uri: &str) -> Result<(), String> {
    if uri.len() > MAX_URI_LEN {
        return Err(format!(
            "a redirect URI is longer than {MAX_URI_LEN} characters"
        ));
    }
    let url = url::Url::parse(uri).map_err(|_| format!("{uri:?} is not an absolute URI"))?;
    if url.fragment().is_some() {
        return Err(format!("{uri:?} has a fragment"));
    }
    let loopback = matches!(
        url.host(),
        Some(url::Host::Ipv4(ip)) if ip.is_loopback()
    ) || matches!(url.host(), Some(url::Host::Ipv6(ip)) if ip.is_loopback())
        || url.host_str() == Some("localhost");
    match url.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        "http" => Err(format!(
            "{uri:?}: plain HTTP is accepted only on a loopback address"
        )),
        "javascript" | "data" | "file" | "vbscript" | "blob" | "about" => Err(format!(
            "{uri:?}: scheme {} is not a redirect",
            url.scheme()
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::check_redirect_uri;

    #[test]
    fn redirect_uris_are_https_loopback_http_or_a_native_scheme() {
        assert!(check_redirect_uri("https://app.example/cb").is_ok());
        assert!(check_redirect_uri("http://127.0.0.1:3000/callback").is_ok());
        assert!(check_redirect_uri("http://localhost/cb").is_ok());
        assert!(check_redirect_uri("http://[::1]:8/cb").is_ok());
        assert!(check_redirect_uri("com.example.app:/oauth").is_ok());
        assert!(check_redirect_uri("http://app.example/cb").is_err());
        assert!(check_redirect_uri("https://app.example/cb#x").is_err());
        assert!(check_redirect_uri("javascript:alert(1)").is_err());
        assert!(check_redirect_uri("/relative").is_err());
    }
}
