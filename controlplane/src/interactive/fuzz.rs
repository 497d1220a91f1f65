#![allow(clippy::panic)]

//! Fuzz targets for what the authorization server parses from outside: the `resource` an MCP
//! client names (and whether it is a gateway's public URL), the redirect URIs it registers,
//! and HTTP Basic client credentials. Never a panic; what is accepted keeps its promise.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use proptest::prelude::*;

use super::register::check_redirect_uri;
use super::resource::{gateway_of, is_public_url};
use super::token::basic_credentials;

fn url_like() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "(https?|javascript|data|com\\.example\\.app):(//)?[a-z0-9.:\\[\\]@-]{0,20}(/[a-z0-9%/._-]{0,30})?(\\?[a-z=&]{0,10})?(#[a-z]{0,5})?",
        "https?://h(/p)?/gateways/[a-z0-9/-]{0,12}(/mcp)?/?",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn a_resource_names_a_gateway_only_by_its_mcp_url(resource in url_like()) {
        if let Some(id) = gateway_of(&resource) {
            prop_assert!(!id.is_empty() && !id.contains('/'));
            let mcp = format!("/gateways/{id}/mcp");
            prop_assert!(resource.trim_end_matches('/').ends_with(&mcp), "{}", resource);
        }
    }

    #[test]
    fn only_a_known_public_url_is_a_gateways_resource(resource in url_like()) {
        let known = ["https://h/gateways/g1/mcp".to_string()];
        if is_public_url(&resource, &known) {
            let url = url::Url::parse(&resource).unwrap_or_else(|e| panic!("{resource}: {e}"));
            prop_assert_eq!(url.scheme(), "https");
            prop_assert_eq!(url.host_str(), Some("h"));
            prop_assert_eq!(url.port(), None);
            prop_assert_eq!(url.path().trim_end_matches('/'), "/gateways/g1/mcp");
        }
    }

    #[test]
    fn accepted_redirect_uris_are_absolute_without_fragment(uri in url_like()) {
        if check_redirect_uri(&uri).is_ok() {
            let url = url::Url::parse(&uri).unwrap_or_else(|e| panic!("{uri}: {e}"));
            prop_assert!(url.fragment().is_none());
            prop_assert!(!["javascript", "data", "file"].contains(&url.scheme()));
            if url.scheme() == "http" {
                let host = url.host_str().unwrap_or_default();
                prop_assert!(host == "localhost" || host.starts_with("127.") || host == "[::1]", "{}", uri);
            }
        }
    }

    #[test]
    fn basic_credentials_round_trip(id in "[ -~]{0,20}", secret in "[ -~]{0,20}", junk in any::<String>()) {
        let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        let header = STANDARD.encode(format!("{}:{}", enc(&id), enc(&secret)));
        prop_assert_eq!(basic_credentials(&header), Some((id, secret)));
        let _ = basic_credentials(&junk);
    }
}
