//! Finding a provider's endpoints: the connection's own settings where given; else, for an
//! MCP server, its protected resource metadata (RFC 9728) names the authorization server,
//! whose metadata (RFC 8414, else OpenID discovery) names the endpoints. Dynamic client
//! registration (RFC 7591) lives here too: both are plain JSON over HTTP.

use portcullis_shared::egress;
use serde::Deserialize;
use serde_json::json;

use super::{Connection, OAuth};
use crate::error::{precondition, ApiError, ApiResult};

/// The largest metadata document or key set read.
const MAX_METADATA_BYTES: usize = 1024 * 1024;

/// A provider's endpoints, and what the flow asks for by default.
#[derive(Debug, Clone, Default)]
pub struct Endpoints {
    pub authorization: String,
    pub token: String,
    pub revocation: Option<String>,
    pub registration: Option<String>,
    /// The scopes the protected resource says it supports (used when none are configured).
    pub scopes: Vec<String>,
    /// The RFC 8707 resource: the protected resource's identifier, else the server's URL.
    pub resource: Option<String>,
}

#[derive(Deserialize)]
struct ResourceMetadata {
    #[serde(default)]
    resource: Option<String>,
    #[serde(default)]
    authorization_servers: Vec<String>,
    #[serde(default)]
    scopes_supported: Vec<String>,
}

/// An authorization server's metadata (RFC 8414, or OpenID discovery).
#[derive(Deserialize)]
pub(crate) struct ServerMetadata {
    pub issuer: String,
    pub authorization_endpoint: Option<String>,
    pub token_endpoint: Option<String>,
    #[serde(default)]
    pub revocation_endpoint: Option<String>,
    #[serde(default)]
    pub registration_endpoint: Option<String>,
    #[serde(default)]
    pub code_challenge_methods_supported: Option<Vec<String>>,
    /// An OpenID provider's signing keys.
    #[serde(default)]
    pub jwks_uri: Option<String>,
}

fn failed(c: &Connection, why: String) -> ApiError {
    precondition(format!(
        "OAuth discovery for {} '{}' failed: {why}; set auth_config.issuer, or \
         authorization_url and token_url",
        c.kind(),
        c.name
    ))
}

/// The connection's endpoints.
pub async fn endpoints(oauth: &OAuth, c: &Connection) -> ApiResult<Endpoints> {
    let mut out = Endpoints {
        resource: c.server_url.clone(),
        ..Endpoints::default()
    };
    let configured_resource = c.setting("resource").map(str::to_string);
    let mut issuer = c.setting("issuer").map(str::to_string);
    if let Some(url) = &c.server_url {
        if let Some(meta) = resource_metadata(oauth, url).await {
            out.scopes = meta.scopes_supported;
            if let Some(r) = meta.resource.filter(|r| !r.is_empty()) {
                out.resource = Some(r);
            }
            if issuer.is_none() {
                issuer = meta.authorization_servers.into_iter().next();
            }
        }
    }
    let (authorization, token) = (c.setting("authorization_url"), c.setting("token_url"));
    if let (Some(a), Some(t)) = (authorization, token) {
        out.authorization = a.to_string();
        out.token = t.to_string();
    } else {
        let issuer = issuer.ok_or_else(|| {
            failed(
                c,
                "no issuer is configured and the server publishes no protected resource \
                 metadata naming one"
                    .into(),
            )
        })?;
        let meta = server_metadata(oauth, &issuer)
            .await
            .map_err(|why| failed(c, why))?;
        if let Some(methods) = &meta.code_challenge_methods_supported {
            if !methods.iter().any(|m| m == "S256") {
                return Err(failed(c, format!("{issuer} does not support PKCE S256")));
            }
        }
        let missing = |what: &str| failed(c, format!("{issuer} publishes no {what}"));
        out.authorization = authorization
            .map(str::to_string)
            .or(meta.authorization_endpoint)
            .ok_or_else(|| missing("authorization_endpoint"))?;
        out.token = token
            .map(str::to_string)
            .or(meta.token_endpoint)
            .ok_or_else(|| missing("token_endpoint"))?;
        out.revocation = meta.revocation_endpoint;
        out.registration = meta.registration_endpoint;
    }
    if let Some(r) = c.setting("revocation_url") {
        out.revocation = Some(r.to_string());
    }
    if let Some(r) = c.setting("registration_url") {
        out.registration = Some(r.to_string());
    }
    if configured_resource.is_some() {
        out.resource = configured_resource;
    }
    // A discovered document chose these: each must be a target this deployment sends to
    // (the browser, not this service, follows the authorization endpoint).
    let fetched = [
        Some(&out.token),
        out.revocation.as_ref(),
        out.registration.as_ref(),
    ];
    for url in fetched.into_iter().flatten() {
        oauth.check_url(url).map_err(|why| failed(c, why))?;
    }
    Ok(out)
}

/// `url` with a `/.well-known/<name>` path inserted before its own path (RFC 8414 §3,
/// RFC 9728 §3): `https://h/p` → `https://h/.well-known/<name>/p`.
fn well_known(url: &str, name: &str) -> Option<(String, String)> {
    let parsed = url::Url::parse(url).ok()?;
    let origin = parsed.origin().ascii_serialization();
    let path = parsed.path().trim_end_matches('/');
    Some((
        format!("{origin}/.well-known/{name}{path}"),
        format!("{origin}/.well-known/{name}"),
    ))
}

pub(crate) async fn get_json<T: serde::de::DeserializeOwned>(
    oauth: &OAuth,
    url: &str,
) -> Result<T, String> {
    oauth
        .check_url(url)
        .map_err(|e| format!("GET {url}: {e}"))?;
    let response = oauth
        .http()
        .get(url)
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| format!("GET {url}: {}", without_url(&e)))?;
    if !response.status().is_success() {
        return Err(format!("GET {url} answered {}", response.status()));
    }
    let body = egress::read_capped(response, MAX_METADATA_BYTES)
        .await
        .map_err(|e| format!("GET {url}: {e}"))?;
    serde_json::from_slice(&body).map_err(|e| format!("GET {url}: unreadable metadata: {e}"))
}

pub(crate) fn without_url(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    if let Some(url) = e.url() {
        text = text.replace(&format!(" ({url})"), "");
    }
    text
}

async fn resource_metadata(oauth: &OAuth, server_url: &str) -> Option<ResourceMetadata> {
    let (with_path, root) = well_known(server_url, "oauth-protected-resource")?;
    for url in [with_path, root] {
        if let Ok(meta) = get_json::<ResourceMetadata>(oauth, &url).await {
            return Some(meta);
        }
    }
    None
}

pub(crate) async fn server_metadata(oauth: &OAuth, issuer: &str) -> Result<ServerMetadata, String> {
    let (rfc8414, _) = well_known(issuer, "oauth-authorization-server")
        .ok_or_else(|| format!("issuer {issuer:?} is not a URL"))?;
    let openid = format!(
        "{}/.well-known/openid-configuration",
        issuer.trim_end_matches('/')
    );
    let mut why = Vec::new();
    for url in [rfc8414, openid] {
        match get_json::<ServerMetadata>(oauth, &url).await {
            // RFC 8414 §3.3: the metadata must be the issuer's own.
            Ok(meta) if meta.issuer.trim_end_matches('/') == issuer.trim_end_matches('/') => {
                return Ok(meta)
            }
            Ok(meta) => why.push(format!("{url} names issuer {}", meta.issuer)),
            Err(e) => why.push(e),
        }
    }
    Err(why.join("; "))
}

#[derive(Deserialize)]
struct Registered {
    client_id: String,
    #[serde(default)]
    client_secret: Option<String>,
}

/// Registers a confidential client for the code flow; its id and secret.
pub async fn register(
    oauth: &OAuth,
    endpoint: &str,
    redirect_uri: &str,
) -> ApiResult<(String, Option<String>)> {
    let body = json!({
        "client_name": "Portcullis",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "client_secret_basic",
    });
    let refused = |why: String| {
        precondition(format!(
            "dynamic client registration at {endpoint} failed: {why}"
        ))
    };
    oauth.check_url(endpoint).map_err(refused)?;
    let response = oauth
        .http()
        .post(endpoint)
        .json(&body)
        .send()
        .await
        .map_err(|e| refused(without_url(&e)))?;
    let status = response.status();
    if !status.is_success() {
        let text = response.text().await.unwrap_or_default();
        let detail: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        let why = detail["error_description"]
            .as_str()
            .or(detail["error"].as_str())
            .map_or_else(|| status.to_string(), |d| format!("{status}: {d}"));
        return Err(refused(why));
    }
    let r: Registered = response
        .json()
        .await
        .map_err(|e| refused(format!("unreadable answer: {}", without_url(&e))))?;
    Ok((r.client_id, r.client_secret.filter(|s| !s.is_empty())))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::well_known;

    #[test]
    fn well_known_urls_insert_before_the_path() {
        let (p, r) = well_known("http://h:1/mcp/", "oauth-protected-resource").unwrap();
        assert_eq!(p, "http://h:1/.well-known/oauth-protected-resource/mcp");
        assert_eq!(r, "http://h:1/.well-known/oauth-protected-resource");
        let (p, _) = well_known("https://idp.example", "oauth-authorization-server").unwrap();
        assert_eq!(
            p,
            "https://idp.example/.well-known/oauth-authorization-server"
        );
        assert!(well_known("not a url", "x").is_none());
    }
}
