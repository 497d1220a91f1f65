//! The `resource` of an authorization request (RFC 8707, DESIGN §24): it must be one of the
//! gateway's public MCP URLs, `{gateway_url}/mcp` where `{gateway_url}` is
//! `{public_url}/gateways/<id>` for the `public_url` of a deployment of the gateway's workspace
//! (every deployment serves every gateway of its workspace; `portcullis up` records the one it
//! starts). Scheme, host, port and path are compared after URL normalization (lower-case host,
//! default port, dot segments; one trailing slash ignored); a query, fragment or user info makes
//! a resource no gateway's. Anything else is `invalid_target`.

use portcullis_shared::api::Endpoints;

use crate::store::{workspaces, Conn, StoreError};

/// The gateway a resource claims by its path: `…/gateways/<id>/mcp`. Only a candidate: the
/// whole URL is then checked against the gateway's public URLs ([`is_public_url`]).
pub fn gateway_of(resource: &str) -> Option<&str> {
    let url = url::Url::parse(resource).ok()?;
    if url.query().is_some() || url.fragment().is_some() {
        return None;
    }
    // The raw path, as the client wrote it (the parsed URL normalizes it).
    let path = resource.split_once("://")?.1;
    let path = &path[path.find('/')?..];
    let rest = &path[path.rfind("/gateways/")? + "/gateways/".len()..];
    let id = rest.trim_end_matches('/').strip_suffix("/mcp")?;
    (!id.is_empty() && !id.contains('/')).then_some(id)
}

/// The gateway's public MCP URLs: one per deployment of its workspace with a public URL.
pub async fn public_urls(
    conn: &mut Conn,
    workspace_id: &str,
    gateway_id: &str,
) -> Result<Vec<String>, StoreError> {
    Ok(workspaces::list_deployments(conn, workspace_id)
        .await?
        .into_iter()
        .filter(|d| !d.public_url.is_empty())
        .map(|d| Endpoints::for_gateway(&d.public_url, gateway_id).mcp_url)
        .collect())
}

/// Whether `resource` is one of `known` (the gateway's public MCP URLs).
pub fn is_public_url(resource: &str, known: &[String]) -> bool {
    let Some(wanted) = normalized(resource) else {
        return false;
    };
    known
        .iter()
        .any(|k| normalized(k).is_some_and(|k| k == wanted))
}

/// Scheme, host, port and path of an absolute HTTP(S) URL without query, fragment or user
/// info; `None` for anything else.
fn normalized(text: &str) -> Option<(String, String, u16, String)> {
    let url = url::Url::parse(text).ok()?;
    let plain = url.query().is_none()
        && url.fragment().is_none()
        && url.username().is_empty()
        && url.password().is_none();
    if !plain || !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    let path = url.path();
    let path = path.strip_suffix('/').unwrap_or(path);
    Some((
        url.scheme().to_string(),
        url.host_str()?.to_ascii_lowercase(),
        url.port_or_known_default()?,
        path.to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::{gateway_of, is_public_url};

    #[test]
    fn a_resource_names_its_gateway() {
        assert_eq!(gateway_of("http://h:1/gateways/g1/mcp"), Some("g1"));
        assert_eq!(gateway_of("https://h/prefix/gateways/g1/mcp"), Some("g1"));
        assert_eq!(gateway_of("https://h/gateways/g1/mcp/"), Some("g1"));
        assert_eq!(gateway_of("https://h/gateways//mcp"), None);
        assert_eq!(gateway_of("https://h/gateways/g1/v1"), None);
        assert_eq!(gateway_of("https://h/gateways/g1/mcp?x=1"), None);
        assert_eq!(gateway_of("not a url"), None);
    }

    fn known() -> Vec<String> {
        vec![
            "https://gw.example/gateways/g1/mcp".to_string(),
            "http://127.0.0.1:8080/edge/gateways/g1/mcp".to_string(),
        ]
    }

    #[test]
    fn only_the_gateways_public_urls_are_its_resource() {
        let known = known();
        for same in [
            "https://gw.example/gateways/g1/mcp",
            "https://GW.example:443/gateways/g1/mcp",
            "https://gw.example/gateways/g1/mcp/",
            "https://gw.example/x/../gateways/g1/mcp",
            "http://127.0.0.1:8080/edge/gateways/g1/mcp",
        ] {
            assert!(is_public_url(same, &known), "{same}");
        }
        for other in [
            "https://evil.example/gateways/g1/mcp",
            "http://gw.example/gateways/g1/mcp",
            "https://gw.example:8443/gateways/g1/mcp",
            "https://gw.example/prefix/gateways/g1/mcp",
            "https://gw.example/gateways/g2/mcp",
            "https://gw.example/gateways/g1/mcp?x=1",
            "https://gw.example/gateways/g1/mcp#f",
            "https://user@gw.example/gateways/g1/mcp",
            "https://gw.example.evil.example/gateways/g1/mcp",
            "http://127.0.0.1:8081/edge/gateways/g1/mcp",
            "http://127.0.0.1:8080/gateways/g1/mcp",
            "ftp://gw.example/gateways/g1/mcp",
            "not a url",
        ] {
            assert!(!is_public_url(other, &known), "{other}");
        }
        assert!(!is_public_url("https://gw.example/gateways/g1/mcp", &[]));
    }
}
