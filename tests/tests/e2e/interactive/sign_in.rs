//! The steps of `sign_in_admits_only_allow_listed_people_and_checks_every_step`: discovery,
//! registration, the authorization request, who is admitted to which agent, the code
//! exchange, and leaving the allow list.

use portcullis_tests::controlplane::AGENTS;
use portcullis_tests::oidc::OidcIssuer;
use portcullis_tests::ControlPlane;
use serde_json::{json, Value};

use super::{
    authorize_url, claims, events, get_json, grants, interactive_agent, list_with, pkce,
    redirected, token_request, REDIRECT,
};
use crate::mcp::Mcp;

pub(super) async fn the_gateway_names_the_control_plane_as_its_authorization_server(
    m: &Mcp,
    http: &reqwest::Client,
    resource: &str,
) {
    let cp = &m.cp;
    let (status, challenge, _) = list_with(m, "", None).await;
    assert_eq!(status, 401);
    let metadata_url = format!(
        "{}/.well-known/oauth-protected-resource",
        m.gw.gateway_url(&cp.default_gateway_id)
    );
    assert_eq!(
        challenge,
        format!("Bearer resource_metadata=\"{metadata_url}\"")
    );
    let (cors, prm) = get_json(&metadata_url).await;
    assert_eq!(cors, "*", "browser clients may read it");
    assert_eq!(prm["resource"], resource);
    assert_eq!(prm["authorization_servers"], json!([cp.url]));
    let (cors, asm) = get_json(&format!(
        "{}/.well-known/oauth-authorization-server",
        cp.url
    ))
    .await;
    assert_eq!(cors, "*");
    assert_eq!(asm["issuer"], cp.url.as_str());
    let preflight = http
        .request(reqwest::Method::OPTIONS, format!("{}/oauth2/token", cp.url))
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status().as_u16(), 204);
    assert_eq!(preflight.headers()["access-control-allow-origin"], "*");
    assert_eq!(asm["code_challenge_methods_supported"], json!(["S256"]));
}

/// Refuses bad redirect URIs and an unsupported client authentication, and registers a
/// public client: its id.
pub(super) async fn registration_checks_redirect_uris(
    cp: &ControlPlane,
    http: &reqwest::Client,
) -> String {
    let register = |body: Value| {
        let http = http.clone();
        let url = format!("{}/oauth2/register", cp.url);
        async move {
            let r = http.post(url).json(&body).send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    for bad in [
        "http://evil.example/cb",
        "javascript:alert(1)",
        "https://x.example/#f",
    ] {
        let (status, body) = register(json!({"redirect_uris": [bad]})).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (400, Some("invalid_redirect_uri")),
            "{bad}: {body}"
        );
    }
    let (status, body) = register(
        json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "private_key_jwt"}),
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_client_metadata"))
    );
    let (status, client) = register(json!({"redirect_uris": [REDIRECT], "client_name": "cli",
        "token_endpoint_auth_method": "none"}))
    .await;
    assert_eq!(status, 201, "{client}");
    assert!(client.get("client_secret").is_none(), "{client}");
    client["client_id"].as_str().unwrap().to_string()
}

pub(super) async fn authorization_errors_go_back_to_a_known_client(
    m: &Mcp,
    http: &reqwest::Client,
    issuer: &OidcIssuer,
    client_id: &str,
    resource: &str,
) {
    let cp = &m.cp;
    let get = |url: String| {
        let http = http.clone();
        async move { http.get(url).send().await.unwrap() }
    };
    let unknown = get(authorize_url(m, "mcp_unknown", Some(&pkce("v")), resource)).await;
    assert_eq!(unknown.status().as_u16(), 400);
    let back = |r: reqwest::Response| {
        let location = r.headers()["location"].to_str().unwrap().to_string();
        redirected(302, &location, "")
    };
    let q = back(get(authorize_url(m, client_id, None, resource)).await);
    assert_eq!(
        (q["error"].as_str(), q["state"].as_str(), q["iss"].as_str()),
        ("invalid_request", "s1", cp.url.as_str()),
        "{q:?}"
    );
    let elsewhere = format!("{}/gateways/not-a-gateway/mcp", m.gw.url);
    let q = back(get(authorize_url(m, client_id, Some(&pkce("v")), &elsewhere)).await);
    assert_eq!(q["error"], "invalid_target", "{q:?}");
    // The resource must be one of the gateway's public URLs, not any URL whose path names it.
    let gateway = &cp.default_gateway_id;
    for foreign in [
        format!("https://evil.example/gateways/{gateway}/mcp"),
        format!("{}/elsewhere/gateways/{gateway}/mcp", m.gw.url),
        format!(
            "{}/gateways/{gateway}/mcp",
            m.gw.url.replace("http://", "https://")
        ),
    ] {
        let q = back(get(authorize_url(m, client_id, Some(&pkce("v")), &foreign)).await);
        assert_eq!(
            (q["error"].as_str(), q["state"].as_str()),
            ("invalid_target", "s1"),
            "{foreign}: {q:?}"
        );
    }
    let deployed = format!("http://gateway.test/gateways/{gateway}/mcp");
    let r = get(authorize_url(m, client_id, Some(&pkce("v")), &deployed)).await;
    let location = r.headers()["location"].to_str().unwrap();
    assert!(
        location.starts_with(&issuer.issuer),
        "every deployment's public URL is the gateway's: {location}"
    );
}

pub(super) async fn a_pattern_admits_no_one_signing_in(
    cp: &ControlPlane,
    issuer: &OidcIssuer,
    start: &str,
) {
    let (status, url, body) = issuer.browse_until(start, "bob", REDIRECT).await;
    let q = redirected(status, &url, &body);
    assert_eq!(q["error"], "access_denied", "{q:?}");
    assert!(q["error_description"].contains("bob@example.com"), "{q:?}");
    let refused = events(cp, "agent.interactive_grant.refused").await;
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(grants(cp, None).await.is_empty());
}

/// A second interactive agent, `desk2`, admits Alice and Carol: each is offered the agents
/// that admit them, and Alice approves `desk2`: the authorization code.
pub(super) async fn alice_chooses_among_the_agents_that_admit_her(
    cp: &ControlPlane,
    http: &reqwest::Client,
    issuer: &OidcIssuer,
    start: &str,
) -> String {
    // With two interactive agents on the gateway, nothing about them is shown before sign-in:
    // the authorization goes straight to the provider they share.
    interactive_agent(
        cp,
        "desk2",
        &issuer.issuer,
        json!(["alice@example.com", "carol@example.com", "x*@example.com"]),
    )
    .await;
    let r = http.get(start).send().await.unwrap();
    let location = r.headers()["location"].to_str().unwrap().to_string();
    assert!(
        r.status().is_redirection() && location.starts_with(&issuer.issuer),
        "{}: {location}",
        r.status()
    );
    // After sign-in the person chooses among the agents that admit them, on the consent page.
    let (status, _, page) = issuer.browse_until(start, "alice", REDIRECT).await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("Allow access?")
            && page.contains("<b>desk</b>")
            && page.contains("<b>desk2</b>"),
        "{page}"
    );
    assert!(
        !page.contains("<b>bot</b>"),
        "only agents that admit interactive sign-in: {page}"
    );
    // Carol is on desk2's list only: she is offered desk2 alone.
    let (status, _, page) = issuer.browse_until(start, "carol", REDIRECT).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Agent: <b>desk2</b>"), "{page}");
    assert!(!page.contains("<b>desk</b>"), "{page}");
    let answer = issuer
        .visit(start, "alice", REDIRECT, Some("approve"), Some("desk2"))
        .await;
    let q = redirected(
        answer["status"].as_u64().unwrap() as u16,
        answer["url"].as_str().unwrap(),
        &answer.to_string(),
    );
    q["code"].clone()
}

/// Exchanges `code` as the public client `client_id` with this PKCE verifier.
async fn exchange(
    cp: &ControlPlane,
    client_id: &str,
    code: String,
    verifier: &str,
) -> (u16, Value) {
    let client = json!({"client_id": client_id});
    let form = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("code_verifier", verifier),
        ("redirect_uri", REDIRECT),
        ("client_id", client_id),
    ];
    token_request(cp, &client, &form).await
}

pub(super) async fn a_code_needs_the_verifier_and_is_used_once(
    cp: &ControlPlane,
    client_id: &str,
    code: String,
    verifier: &str,
) {
    let (status, body) = exchange(
        cp,
        client_id,
        code.clone(),
        "the-wrong-verifier-0123456789012345678901234",
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant")),
        "{body}"
    );
    let (status, _) = exchange(cp, client_id, code, verifier).await;
    assert_eq!(status, 400, "a code is used once, even by a failed attempt");
}

/// Alice signs in for `desk2` by name, without being asked again: her tokens.
pub(super) async fn naming_the_agent_narrows_the_sign_in(
    cp: &ControlPlane,
    issuer: &OidcIssuer,
    start: &str,
    client_id: &str,
    verifier: &str,
) -> Value {
    let desk2_id = cp
        .ok(AGENTS, "GetAgent", cp.body(json!({"agent_id": "desk2"})))
        .await["agent"]["agent_id"]
        .clone();
    let desk2 = format!("{start}&agent={}", desk2_id.as_str().unwrap());
    let (status, url, body) = issuer.browse_until(&desk2, "alice", REDIRECT).await;
    let code = redirected(status, &url, &body)["code"].clone();
    let (status, tokens) = exchange(cp, client_id, code, verifier).await;
    assert_eq!(status, 200, "{tokens}");
    let access = tokens["access_token"].as_str().unwrap();
    assert_eq!(claims(access)["sub"], desk2_id);
    assert_eq!(grants(cp, Some("desk2")).await.len(), 1);
    tokens
}

pub(super) async fn leaving_the_allow_list_revokes_the_grant(
    m: &Mcp,
    client_id: &str,
    tokens: &Value,
) {
    let cp = &m.cp;
    let access = tokens["access_token"].as_str().unwrap();
    // Interactive access cannot be combined with device binding.
    cp.call(
        AGENTS,
        "UpdateAgent",
        cp.body(json!({"agent_id": "desk2", "actas_method": "bound"})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("device binding");
    // Taking Alice off the list revokes her grant, and her tokens stop working.
    cp.ok(
        AGENTS,
        "UpdateAgent",
        cp.body(json!({"agent_id": "desk2", "actas_allowed_emails": ["carol@example.com"]})),
    )
    .await;
    assert!(grants(cp, Some("desk2")).await.is_empty());
    let form = [
        ("grant_type", "refresh_token"),
        ("refresh_token", tokens["refresh_token"].as_str().unwrap()),
        ("client_id", client_id),
    ];
    assert_eq!(
        token_request(cp, &json!({"client_id": client_id}), &form)
            .await
            .0,
        400
    );
    m.gw.caught_up(cp).await;
    assert_eq!(list_with(m, access, None).await.0, 401);
}
