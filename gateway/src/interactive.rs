//! Interactive access at the gateway (DESIGN §15): `/mcp` is an OAuth 2.1 protected resource.
//! Its metadata (RFC 9728) names the control plane as the authorization server, and a refused
//! call without a valid token says where that metadata is (`WWW-Authenticate`), so an MCP
//! client can sign its person in. The tokens themselves are agent tokens (see `authn`).
//! URLs are built from the request as the caller sent it (`Host`, `X-Forwarded-Proto`), so the
//! resource an MCP client checks is the URL it called.

use bytes::Bytes;
use serde_json::json;

use crate::error::GatewayError;
use crate::respond;
use crate::route::RESOURCE_METADATA;
use crate::session::Session;
use crate::snapshot::Compiled;

/// `scheme://host` of the request as the caller addressed it.
fn origin(session: &Session) -> String {
    let h = session.req_header();
    let forwarded = h
        .headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .filter(|p| *p == "https" || *p == "http");
    let tls = session.digest().is_some_and(|d| d.ssl_digest.is_some());
    let scheme = forwarded.unwrap_or(if tls { "https" } else { "http" });
    let host = h
        .headers
        .get("host")
        .and_then(|v| v.to_str().ok())
        .or_else(|| h.uri.authority().map(|a| a.as_str()))
        .unwrap_or("localhost");
    format!("{scheme}://{host}")
}

/// The gateway URL (`…/gateways/<id>`) of this request's path.
fn gateway_path(path: &str, gateway_id: &str) -> String {
    let path = path.strip_prefix(RESOURCE_METADATA).unwrap_or(path);
    let marker = format!("/gateways/{gateway_id}");
    match path.find(&marker) {
        Some(i) => path[..i + marker.len()].to_string(),
        None => marker,
    }
}

/// The `WWW-Authenticate` value of a refused `/mcp` call: where the resource metadata is.
pub fn challenge(session: &Session, gateway_id: &str, token_presented: bool) -> String {
    let path = session.req_header().uri.path();
    let url = format!(
        "{}{}{RESOURCE_METADATA}",
        origin(session),
        gateway_path(path, gateway_id)
    );
    if token_presented {
        format!("Bearer error=\"invalid_token\", resource_metadata=\"{url}\"")
    } else {
        format!("Bearer resource_metadata=\"{url}\"")
    }
}

/// Answers the protected resource metadata of the gateway's `/mcp`.
pub async fn metadata(
    session: &mut Session,
    snap: &Compiled,
    gateway_id: &str,
    request_id: &str,
) -> Result<(), GatewayError> {
    let gateway = snap
        .gateways
        .get(gateway_id)
        .ok_or_else(|| GatewayError::NotFound(format!("gateway {gateway_id} does not exist")))?;
    if snap.authorization_server.is_empty() {
        return Err(GatewayError::NotFound(
            "this gateway's control plane does not offer interactive sign-in".into(),
        ));
    }
    let path = session.req_header().uri.path().to_string();
    let resource = format!("{}{}/mcp", origin(session), gateway_path(&path, gateway_id));
    let body = json!({
        "resource": resource,
        "authorization_servers": [snap.authorization_server],
        "bearer_methods_supported": ["header"],
        "resource_name": format!("Portcullis gateway {}", gateway.identity.name),
    });
    let body = Bytes::from(serde_json::to_vec(&body).unwrap_or_default());
    let cors = [("access-control-allow-origin", "*")];
    respond::bytes(session, 200, "application/json", body, request_id, &cors)
        .await
        .map_err(|e| GatewayError::Internal(e.to_string()))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::gateway_path;
    use crate::route::{route, Route};

    proptest! {
        /// Any path: routed without a panic, and a metadata route's gateway URL ends in the
        /// gateway it names.
        #[test]
        fn metadata_paths_never_panic(path in prop_oneof![
            any::<String>(),
            "(/p)?(/\\.well-known/oauth-protected-resource)?(/[a-z]{0,3})?/gateways/[a-z0-9/]{0,8}(/mcp|/\\.well-known/oauth-protected-resource)?/?",
        ]) {
            if let Route::ResourceMetadata { gateway_id } = route("GET", &path) {
                let tail = format!("/gateways/{gateway_id}");
                prop_assert!(gateway_path(&path, gateway_id).ends_with(&tail));
            }
        }
    }

    #[test]
    fn the_gateway_url_keeps_its_prefix() {
        assert_eq!(gateway_path("/gateways/g1/mcp", "g1"), "/gateways/g1");
        assert_eq!(gateway_path("/p/gateways/g1/mcp", "g1"), "/p/gateways/g1");
        assert_eq!(
            gateway_path(
                "/.well-known/oauth-protected-resource/p/gateways/g1/mcp",
                "g1"
            ),
            "/p/gateways/g1"
        );
        assert_eq!(
            gateway_path("/gateways/g1/.well-known/oauth-protected-resource", "g1"),
            "/gateways/g1"
        );
    }
}
