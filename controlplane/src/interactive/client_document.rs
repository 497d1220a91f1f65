//! Clients named by a URL (OAuth Client ID Metadata Documents, as MCP clients use them): the
//! `client_id` is an HTTPS URL (HTTP on loopback) whose JSON document describes the client,
//! so it needs no registration here. The document must name itself as `client_id` and list
//! its redirect URIs (checked as registration checks them); such a client is public (PKCE
//! alone). The document is read when a person is sent to authorize, and kept as the client's
//! record for the token endpoint.

use serde::Deserialize;

use super::register::{check_redirect_uri, MAX_NAME_LEN};
use crate::error::{invalid, ApiResult};
use crate::store::interactive::{self, ClientRow};
use crate::store::now_ms;
use crate::validate;
use crate::App;

/// The largest document read.
const MAX_DOCUMENT_BYTES: usize = 5 * 1024;

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

/// The client `client_id` names: its registration, or its metadata document.
pub async fn client(app: &App, client_id: &str) -> ApiResult<Option<ClientRow>> {
    if !is_url(client_id) {
        let mut conn = app.store.read().await?;
        return Ok(interactive::client(&mut conn, client_id).await?);
    }
    let row = fetch(app, client_id).await?;
    let mut tx = app.store.write_unscoped().await?;
    interactive::save_client(tx.conn(), &row).await?;
    tx.commit().await?;
    Ok(Some(row))
}

async fn fetch(app: &App, url: &str) -> ApiResult<ClientRow> {
    let bad = |why: String| invalid(format!("the client metadata document at {url} {why}"));
    if validate::https_url("client_id", url)?.fragment().is_some() {
        return Err(bad("must be at a URL without a fragment".into()));
    }
    let response = app
        .oauth
        .http()
        .get(url)
        .header("accept", "application/json")
        .timeout(std::time::Duration::from_secs(5))
        .send()
        .await
        .map_err(|_| bad("could not be fetched".into()))?;
    if !response.status().is_success() {
        return Err(bad(format!("answered {}", response.status())));
    }
    let body = response
        .bytes()
        .await
        .map_err(|_| bad("could not be read".into()))?;
    if body.len() > MAX_DOCUMENT_BYTES {
        return Err(bad(format!("is larger than {MAX_DOCUMENT_BYTES} bytes")));
    }
    let doc: Document =
        serde_json::from_slice(&body).map_err(|e| bad(format!("is not client metadata: {e}")))?;
    check(url, &doc).map_err(bad)?;
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
