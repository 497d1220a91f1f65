//! Clients named by a URL (OAuth Client ID Metadata Documents, as MCP clients use them): the
//! `client_id` is an HTTPS URL (HTTP on loopback) whose JSON document describes the client,
//! so it needs no registration here. The document must name itself as `client_id` and list
//! its redirect URIs (checked as registration checks them); such a client is public (PKCE
//! alone). The document is fetched when a person is sent to authorize, under the egress
//! policy (DESIGN §24): no private, loopback or link-local address unless the deployment
//! allows private targets, no redirects, at most 5 KiB read, a few fetches per client
//! address, and each document remembered for a few minutes. Whoever asks sees only that the
//! document could not be used (the detail is logged), so this is no probe of other hosts.
//! It becomes the client's record for the token endpoint when a sign-in completes ([`keep`]).

use std::time::Duration;

use portcullis_shared::egress;
use serde::Deserialize;

use super::register::{check_redirect_uri, MAX_NAME_LEN};
use crate::error::{invalid, ApiError, ApiResult};
use crate::store::interactive::{self, ClientRow};
use crate::store::now_ms;
use crate::validate;
use crate::App;

/// The largest document read.
const MAX_DOCUMENT_BYTES: usize = 5 * 1024;
/// The whole fetch takes at most this.
const FETCH_DEADLINE: Duration = Duration::from_secs(5);

#[derive(Deserialize)]
struct Document {
    client_id: String,
    #[serde(default)]
    client_name: Option<String>,
    #[serde(default)]
    redirect_uris: Vec<String>,
    #[serde(default)]
    token_endpoint_auth_method: Option<String>,
}

/// Whether `client_id` names a client by URL.
pub fn is_url(client_id: &str) -> bool {
    client_id.starts_with("https://") || client_id.starts_with("http://")
}

/// The client `client_id` names: its registration, or its metadata document (fetched unless
/// fetched lately; a fetch spends from the requesting address's budget).
pub async fn client(app: &App, client_id: &str) -> ApiResult<Option<ClientRow>> {
    if !is_url(client_id) {
        let mut conn = app.store.read().await?;
        return Ok(interactive::client(&mut conn, client_id).await?);
    }
    if let Some(row) = app.oauth.documents.get(client_id) {
        return Ok(Some(row));
    }
    if let Some(peer) = crate::peer::current() {
        if !app.oauth.documents.spend(peer) {
            tracing::info!(%peer, "Client metadata document fetches refused: budget used up.");
            return Err(ApiError::ResourceExhausted(
                "too many client metadata documents were fetched for this address; try again \
                 in a minute"
                    .into(),
            ));
        }
    }
    fetched(app, client_id).await.map(Some)
}

/// Stores the client a URL names as a registered client once a person has signed in
/// through it, so the token endpoint knows it; nothing for a registered client.
pub async fn keep(app: &App, client_id: &str) -> ApiResult<()> {
    if !is_url(client_id) {
        return Ok(());
    }
    let row = match app.oauth.documents.get(client_id) {
        Some(row) => row,
        None => fetched(app, client_id).await?,
    };
    let mut tx = app.store.write_unscoped().await?;
    interactive::save_client(tx.conn(), &row).await?;
    tx.commit().await?;
    Ok(())
}

/// Fetches and checks the document at `url` and remembers it; the caller learns only
/// whether it could be used.
async fn fetched(app: &App, url: &str) -> ApiResult<ClientRow> {
    match fetch(app, url).await {
        Ok(row) => {
            app.oauth.documents.put(url, row.clone());
            Ok(row)
        }
        Err(why) => {
            tracing::debug!(client_id = %url, %why, "Client metadata document refused.");
            Err(invalid(format!(
                "the client metadata document at {url} could not be used: it must be served \
                 at a public https URL, name that URL as its client_id, and list its \
                 redirect_uris"
            )))
        }
    }
}

async fn fetch(app: &App, url: &str) -> Result<ClientRow, String> {
    validate::https_url("client_id", url).map_err(|e| e.to_string())?;
    let parsed = app.oauth.check_url(url)?;
    if parsed.fragment().is_some() {
        return Err("the URL has a fragment".into());
    }
    let response = app
        .oauth
        .http()
        .get(parsed)
        .header("accept", "application/json")
        .timeout(FETCH_DEADLINE)
        .send()
        .await
        .map_err(|e| format!("fetch failed: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("answered {}", response.status()));
    }
    // The request's deadline covers the body too.
    let body = egress::read_capped(response, MAX_DOCUMENT_BYTES)
        .await
        .map_err(|e| e.to_string())?;
    let doc: Document =
        serde_json::from_slice(&body).map_err(|e| format!("not client metadata: {e}"))?;
    check(url, &doc)?;
    let name = doc
        .client_name
        .as_deref()
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .unwrap_or(url);
    Ok(ClientRow {
        client_id: url.to_string(),
        client_name: name.chars().take(MAX_NAME_LEN).collect(),
        redirect_uris: serde_json::to_string(&doc.redirect_uris).unwrap_or_default(),
        auth_method: "none".into(),
        secret_hash: String::new(),
        created_at: now_ms(),
    })
}

fn check(url: &str, doc: &Document) -> Result<(), String> {
    if doc.client_id != url {
        return Err(format!("names another client_id ({:?})", doc.client_id));
    }
    if doc.redirect_uris.is_empty() {
        return Err("lists no redirect_uris".into());
    }
    for uri in &doc.redirect_uris {
        check_redirect_uri(uri)?;
    }
    match doc.token_endpoint_auth_method.as_deref() {
        None | Some("none") => Ok(()),
        Some(other) => Err(format!(
            "asks for token_endpoint_auth_method {other:?}; only public clients (none) are \
             accepted this way"
        )),
    }
}
