//! Interactive access end to end: a person on an agent's allow list signs in from an MCP
//! client (the official MCP Python SDK's OAuth client: discovery from the gateway's 401,
//! dynamic registration, PKCE, resource indicator) at a real OpenID provider
//! (`oidc-provider`), and uses the agent as themselves; refresh tokens rotate and a replay
//! revokes the grant; revoking a grant (operation) or taking the person off the allow list
//! ends access at the gateway. Every step checks its input: registration, the authorization
//! request, people not on the list, the agent choice, the PKCE verifier.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use portcullis_tests::controlplane::{AGENTS, MGMT};
use portcullis_tests::fake_mcp::FakeMcp;
use portcullis_tests::oidc::OidcIssuer;
use portcullis_tests::{python, ControlPlane};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::mcp::Mcp;

mod sign_in;

/// The redirect URI the tests' clients register: never served.
pub(crate) const REDIRECT: &str = "http://127.0.0.1:9/callback";

/// Registers an interactive agent for `emails`, signing people in at `issuer`, allowed the
/// fake's `whoami` on the default gateway.
async fn interactive_agent(cp: &ControlPlane, name: &str, issuer: &str, emails: Value) {
    let body = json!({"name": name, "allowed_gateway_ids": [cp.default_gateway_id],
        "allowed_tools": ["fake/whoami"], "actas_method": "oidc", "actas_oidc_url": issuer,
        "actas_allowed_emails": emails, "interactive_access": true});
    cp.ok(AGENTS, "RegisterAgent", cp.body(body)).await;
}

pub(crate) async fn started(issuer: &OidcIssuer) -> (Mcp, FakeMcp) {
    let m = Mcp::start().await;
    let fake = FakeMcp::start("upstream-key", false).await;
    m.attach(json!({"name": "fake", "protocol": "streamable-http",
        "secret_values": {"Authorization": "Bearer upstream-key"},
        "protocol_config": {"url": fake.url()}}))
        .await;
    // A pattern entry admits act-as callers but no one signing in interactively.
    let emails = json!(["alice@example.com", "b*@example.com"]);
    interactive_agent(&m.cp, "desk", &issuer.issuer, emails).await;
    // The address the tests reach the gateway at is one of its public URLs: an authorization
    // names it as its `resource`.
    let local = json!({"name": "local", "public_url": m.gw.url});
    m.cp.ok(MGMT, "CreateDeployment", m.cp.body(local)).await;
    m.gw.caught_up(&m.cp).await;
    (m, fake)
}

pub(crate) fn mcp_url(m: &Mcp) -> String {
    format!("{}/mcp", m.gw.gateway_url(&m.cp.default_gateway_id))
}

/// `tools/list` on the gateway with `token`: the HTTP status, `WWW-Authenticate` and body.
pub(crate) async fn list_with(m: &Mcp, token: &str, act_as: Option<&str>) -> (u16, String, Value) {
    let mut request = reqwest::Client::new().post(mcp_url(m));
    if !token.is_empty() {
        request = request.bearer_auth(token);
    }
    if let Some(h) = act_as {
        request = request.header("x-svc-act-as", h);
    }
    let r = request
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}))
        .send()
        .await
        .unwrap();
    let challenge = r
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (r.status().as_u16(), challenge, r.json().await.unwrap())
}

/// A token request to the control plane as a confidential client: status and body.
pub(crate) async fn token_request(
    cp: &ControlPlane,
    client: &Value,
    form: &[(&str, &str)],
) -> (u16, Value) {
    let mut request = reqwest::Client::new().post(format!("{}/oauth2/token", cp.url));
    if let Some(secret) = client["client_secret"].as_str() {
        request = request.basic_auth(client["client_id"].as_str().unwrap(), Some(secret));
    }
    let r = request.form(form).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

pub(crate) async fn grants(cp: &ControlPlane, agent: Option<&str>) -> Vec<Value> {
    let body = match agent {
        Some(a) => json!({"agent_id": a}),
        None => json!({"all_users": true}),
    };
    cp.ok(AGENTS, "ListInteractiveGrants", cp.body(body)).await["grants"]
        .as_array()
        .unwrap()
        .clone()
}

async fn events(cp: &ControlPlane, kind: &str) -> Vec<Value> {
    let body = cp.body(json!({"event_types": [kind]}));
    cp.ok("svc.audit.v1.AuditService", "QueryEvents", body)
        .await["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// A JSON document: its `Access-Control-Allow-Origin` and body.
async fn get_json(url: &str) -> (String, Value) {
    let r = reqwest::get(url).await.unwrap();
    assert!(r.status().is_success(), "{url}: {}", r.status());
    let cors = r
        .headers()
        .get("access-control-allow-origin")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (cors, r.json().await.unwrap())
}

/// The claims of a JWT, unverified.
pub(crate) fn claims(token: &str) -> Value {
    let payload = token.split('.').nth(1).unwrap();
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_signs_in_from_an_mcp_client_and_uses_the_agent_as_themselves() {
    let issuer = OidcIssuer::start().await;
    let (m, _fake) = started(&issuer).await;
    let cp = &m.cp;
    let url = mcp_url(&m);

    let (out, access, refresh) =
        alice_signs_in_and_calls_with_the_tools_credential(&m, &url, &issuer).await;

    // The call is audited as the agent acting for Alice, verified by her sign-in.
    let call_events = events(cp, "tool.call").await;
    let as_alice = call_events
        .iter()
        .find(|e| e["on_behalf_of"]["email"] == "alice@example.com")
        .unwrap_or_else(|| panic!("no tool call as alice: {call_events:?}"));
    assert_eq!(
        as_alice["on_behalf_of"]["display"],
        "verified by interactive"
    );
    assert_eq!(events(cp, "agent.interactive_grant.issued").await.len(), 1);

    // The grant, as administrators see it.
    administrators_see_the_grant(cp).await;

    // The access token is a bearer on the gateway; it carries the person, so an act-as header
    // with it is refused.
    the_token_is_a_bearer_for_the_mcp_endpoint_only(&m, &access).await;

    // Refresh tokens rotate; a used one presented again revokes the grant.
    a_replayed_refresh_token_revokes_the_grant(&m, &out["client"], &access, &refresh).await;

    // Signing in again makes a new grant; revoking it (the operation) ends it at once.
    a_revoked_grant_ends_at_once(&m, &url, &issuer).await;
}

/// Alice signs in with the MCP SDK and calls `fake/whoami`: the SDK's output, her access
/// token and her refresh token.
async fn alice_signs_in_and_calls_with_the_tools_credential(
    m: &Mcp,
    url: &str,
    issuer: &OidcIssuer,
) -> (Value, String, String) {
    let cp = &m.cp;
    let out = python::run(
        "mcp_interactive.py",
        &[url, &issuer.issuer, "alice", "fake/whoami", "{}"],
    )
    .await;
    assert!(out.get("error").is_none(), "{out}\n{}", cp.logs());
    assert_eq!(out["tools"], json!(["fake/whoami"]), "{out}");
    let call = &out["calls"][0];
    assert_eq!(call["isError"], false, "{out}");
    let seen: Value = serde_json::from_str(call["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        seen["authorization"], "Bearer upstream-key",
        "the upstream gets the tool's own credential, never the person's token"
    );
    let access = out["tokens"]["access_token"].as_str().unwrap().to_string();
    let refresh = out["tokens"]["refresh_token"].as_str().unwrap().to_string();
    let c = claims(&access);
    assert_eq!(c["act"]["email"], "alice@example.com", "{c}");
    assert_eq!(c["aud"], cp.default_gateway_id.as_str(), "{c}");
    assert!(c["grant"].as_str().is_some(), "{c}");
    (out, access, refresh)
}

async fn administrators_see_the_grant(cp: &ControlPlane) {
    let listed = grants(cp, None).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let g = &listed[0];
    assert_eq!(
        (
            &g["agent_name"],
            &g["email"],
            &g["subject"],
            &g["client_name"]
        ),
        (
            &json!("desk"),
            &json!("alice@example.com"),
            &json!("alice"),
            &json!("interactive test")
        )
    );
    assert_eq!(g["refresh_tokens"], 1);
    assert_eq!(grants(cp, Some("desk")).await.len(), 1);
    assert!(grants(cp, Some("bot")).await.is_empty());
    cp.call(AGENTS, "ListInteractiveGrants", cp.body(json!({})))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("all_users");
}

async fn the_token_is_a_bearer_for_the_mcp_endpoint_only(m: &Mcp, access: &str) {
    let (status, _, body) = list_with(m, access, None).await;
    assert_eq!(status, 200, "{body}");
    let models = reqwest::Client::new()
        .get(format!(
            "{}/v1/models",
            m.gw.gateway_url(&m.cp.default_gateway_id)
        ))
        .bearer_auth(access)
        .send()
        .await
        .unwrap();
    assert_eq!(
        models.status().as_u16(),
        401,
        "the token is for the MCP endpoint only"
    );
    let (status, _, body) = list_with(m, access, Some("someone-else")).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        body["error"]["data"]["reason_code"], "actas_interactive",
        "{body}"
    );
}

async fn a_replayed_refresh_token_revokes_the_grant(
    m: &Mcp,
    client: &Value,
    access: &str,
    refresh: &str,
) {
    let cp = &m.cp;
    let form = [("grant_type", "refresh_token"), ("refresh_token", refresh)];
    let (status, next) = token_request(cp, client, &form).await;
    assert_eq!(status, 200, "{next}");
    let next_access = next["access_token"].as_str().unwrap().to_string();
    assert_ne!(next["refresh_token"], refresh);
    assert_eq!(next["token_type"], "Bearer");
    let (status, replay) = token_request(cp, client, &form).await;
    assert_eq!(
        (status, replay["error"].as_str()),
        (400, Some("invalid_grant")),
        "{replay}"
    );
    assert!(
        grants(cp, None).await.is_empty(),
        "the replay revoked the grant"
    );
    let next_refresh = next["refresh_token"].as_str().unwrap();
    let form = [
        ("grant_type", "refresh_token"),
        ("refresh_token", next_refresh),
    ];
    let (status, after) = token_request(cp, client, &form).await;
    assert_eq!(
        status, 400,
        "the newer refresh token died with its grant: {after}"
    );
    m.gw.caught_up(cp).await;
    for token in [access, next_access.as_str()] {
        let (status, challenge, body) = list_with(m, token, None).await;
        assert_eq!(
            status, 401,
            "a revoked grant's access token is refused: {body}"
        );
        assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("revoked"),
            "{body}"
        );
    }
}

async fn a_revoked_grant_ends_at_once(m: &Mcp, url: &str, issuer: &OidcIssuer) {
    let cp = &m.cp;
    let out = python::run("mcp_interactive.py", &[url, &issuer.issuer, "alice"]).await;
    assert!(out.get("error").is_none(), "{out}");
    let access = out["tokens"]["access_token"].as_str().unwrap().to_string();
    let grant_id = claims(&access)["grant"].as_str().unwrap().to_string();
    let revoked = cp
        .ok(
            AGENTS,
            "RevokeInteractiveGrant",
            cp.body(json!({"grant_id": grant_id})),
        )
        .await;
    assert_eq!(
        (
            revoked["revoked"].as_bool(),
            revoked["refresh_tokens_revoked"].as_u64()
        ),
        (Some(true), Some(1))
    );
    let again = cp
        .ok(
            AGENTS,
            "RevokeInteractiveGrant",
            cp.body(json!({"grant_id": grant_id})),
        )
        .await;
    assert_eq!(again["revoked"], false);
    cp.call(
        AGENTS,
        "RevokeInteractiveGrant",
        cp.body(json!({"grant_id": "nope"})),
    )
    .await
    .expect_error("invalid_argument", 400);
    m.gw.caught_up(cp).await;
    assert_eq!(list_with(m, &access, None).await.0, 401);
    let refresh = out["tokens"]["refresh_token"].as_str().unwrap();
    let form = [("grant_type", "refresh_token"), ("refresh_token", refresh)];
    assert_eq!(token_request(cp, &out["client"], &form).await.0, 400);
}

/// The PKCE pair of a verifier.
pub(crate) fn pkce(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// An authorization URL for `client` on the default gateway.
pub(crate) fn authorize_url(
    m: &Mcp,
    client_id: &str,
    challenge: Option<&str>,
    resource: &str,
) -> String {
    let mut url = url::Url::parse(&format!("{}/oauth2/authorize", m.cp.url)).unwrap();
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("response_type", "code")
            .append_pair("client_id", client_id)
            .append_pair("redirect_uri", REDIRECT)
            .append_pair("state", "s1")
            .append_pair("resource", resource);
        if let Some(c) = challenge {
            q.append_pair("code_challenge", c)
                .append_pair("code_challenge_method", "S256");
        }
    }
    url.to_string()
}

/// The query of the redirect a browse ended on.
pub(crate) fn redirected(
    status: u16,
    url: &str,
    body: &str,
) -> std::collections::HashMap<String, String> {
    assert_eq!(status, 302, "{url}\n{body}");
    assert!(url.starts_with(REDIRECT), "{url}");
    url::Url::parse(url)
        .unwrap()
        .query_pairs()
        .into_owned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_admits_only_allow_listed_people_and_checks_every_step() {
    let issuer = OidcIssuer::start().await;
    let (m, _fake) = started(&issuer).await;
    let cp = &m.cp;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let resource = mcp_url(&m);

    // The gateway names the control plane as its authorization server.
    sign_in::the_gateway_names_the_control_plane_as_its_authorization_server(&m, &http, &resource)
        .await;

    // Registration: redirect URIs are checked; a public client gets no secret.
    let client_id = sign_in::registration_checks_redirect_uris(cp, &http).await;

    // The authorization request: a page until the client is known, then errors go back to it.
    sign_in::authorization_errors_go_back_to_a_known_client(
        &m, &http, &issuer, &client_id, &resource,
    )
    .await;

    // Bob matches only the pattern b*@example.com, which admits no one here: refused, audited.
    let verifier = "a-verifier-that-is-long-enough-for-pkce-0123456789";
    let start = authorize_url(&m, &client_id, Some(&pkce(verifier)), &resource);
    sign_in::a_pattern_admits_no_one_signing_in(cp, &issuer, &start).await;

    let code =
        sign_in::alice_chooses_among_the_agents_that_admit_her(cp, &http, &issuer, &start).await;

    // The code needs the PKCE verifier, and is used once.
    sign_in::a_code_needs_the_verifier_and_is_used_once(cp, &client_id, code, verifier).await;
    // Naming the agent narrows the sign-in to it; Alice consented to it already.
    let tokens =
        sign_in::naming_the_agent_narrows_the_sign_in(cp, &issuer, &start, &client_id, verifier)
            .await;

    sign_in::leaving_the_allow_list_revokes_the_grant(&m, &client_id, &tokens).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_act_as_provider_signs_people_in_with_its_own_client() {
    let issuer = OidcIssuer::start().await;
    let (m, _fake) = started(&issuer).await;
    let cp = &m.cp;
    // An administrator registered a client at the provider (as with a provider that offers no
    // dynamic registration, where it is done by hand).
    a_provider_keeps_its_sign_in_client_and_hides_the_secret(cp, &issuer).await;
    let agent = json!({"name": "desk3", "allowed_gateway_ids": [cp.default_gateway_id],
        "actas_method": "oidc", "actas_provider_id": "corp",
        "actas_allowed_subjects": ["alice"], "interactive_access": true});
    cp.ok(AGENTS, "RegisterAgent", cp.body(agent)).await;

    alice_signs_in_with_the_providers_own_client(&m, &issuer).await;
}

async fn a_provider_keeps_its_sign_in_client_and_hides_the_secret(
    cp: &ControlPlane,
    issuer: &OidcIssuer,
) {
    let http = reqwest::Client::new();
    let registered: Value = http
        .post(format!("{}/reg", issuer.issuer))
        .json(
            &json!({"redirect_uris": [format!("{}/oauth2/signin/callback", cp.url)],
            "token_endpoint_auth_method": "client_secret_basic",
            "grant_types": ["authorization_code"], "response_types": ["code"]}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let (id, secret) = (&registered["client_id"], &registered["client_secret"]);
    let provider = json!({"name": "corp", "issuer": issuer.issuer, "audience": "desk3",
        "signin_client_secret": secret});
    cp.call(AGENTS, "CreateActAsProvider", cp.body(provider.clone()))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("signin_client_id");
    let hmac = json!({"name": "h", "method": "hmac", "hmac_secret": "0123456789abcdef0123",
        "signin_client_id": id});
    cp.call(AGENTS, "CreateActAsProvider", cp.body(hmac))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("oidc");
    let mut provider = provider;
    provider["signin_client_id"] = id.clone();
    let created = cp
        .ok(AGENTS, "CreateActAsProvider", cp.body(provider))
        .await;
    let shown = &created["provider"];
    assert_eq!(
        (
            &shown["signin_client_id"],
            &shown["signin_client_secret_set"]
        ),
        (id, &json!(true))
    );
    assert!(
        !created.to_string().contains(secret.as_str().unwrap()),
        "the secret is never shown"
    );
}

async fn alice_signs_in_with_the_providers_own_client(m: &Mcp, issuer: &OidcIssuer) {
    let cp = &m.cp;
    let registrations = issuer.stat("registrations").await;
    let out = python::run(
        "mcp_interactive.py",
        &[&mcp_url(m), &issuer.issuer, "alice"],
    )
    .await;
    // Two agents admit interactive sign-in now, signing people in at two providers: the
    // person first chooses where to sign in, and is shown no agent.
    let error = out["error"].as_str().unwrap();
    assert!(
        error.contains("did not come back") && error.contains("Choose where to sign in"),
        "{out}"
    );
    assert!(
        error.contains("corp") && error.contains(&issuer.issuer),
        "{out}"
    );
    assert!(!error.contains("desk"), "no agent is listed: {out}");
    cp.ok(
        AGENTS,
        "UpdateAgent",
        cp.body(json!({"agent_id": "desk", "interactive_access": false})),
    )
    .await;
    let out = python::run(
        "mcp_interactive.py",
        &[&mcp_url(m), &issuer.issuer, "alice"],
    )
    .await;
    assert!(out.get("error").is_none(), "{out}");
    let access = out["tokens"]["access_token"].as_str().unwrap();
    assert_eq!(claims(access)["act"]["sub"], "alice");
    assert_eq!(
        issuer.stat("registrations").await,
        registrations,
        "the provider's configured client signed Alice in; nothing registered itself"
    );
    let listed = grants(cp, Some("desk3")).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_named_by_its_metadata_document_needs_no_registration() {
    use axum::routing::get;
    let issuer = OidcIssuer::start().await;
    let (m, _fake) = started(&issuer).await;
    let cp = &m.cp;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (doc_url, wrong_url) = (format!("{base}/client.json"), format!("{base}/wrong.json"));
    let doc =
        json!({"client_id": doc_url, "client_name": "doc client", "redirect_uris": [REDIRECT]});
    let wrong =
        json!({"client_id": "https://elsewhere.example/c.json", "redirect_uris": [REDIRECT]});
    let app = axum::Router::new()
        .route("/client.json", get(move || async move { axum::Json(doc) }))
        .route("/wrong.json", get(move || async move { axum::Json(wrong) }));
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let (_, asm) = get_json(&format!(
        "{}/.well-known/oauth-authorization-server",
        cp.url
    ))
    .await;
    assert_eq!(asm["client_id_metadata_document_supported"], true);
    let resource = mcp_url(&m);
    let verifier = "a-verifier-that-is-long-enough-for-pkce-0123456789";
    let refused = reqwest::get(authorize_url(
        &m,
        &wrong_url,
        Some(&pkce(verifier)),
        &resource,
    ))
    .await
    .unwrap();
    assert_eq!(
        refused.status().as_u16(),
        400,
        "a document must name itself"
    );
    // Why stays in the log: the caller learns nothing of what the document's host answered.
    let page = refused.text().await.unwrap();
    assert!(page.contains("could not be used"), "{page}");
    assert!(!page.contains("elsewhere.example"), "{page}");

    let start = authorize_url(&m, &doc_url, Some(&pkce(verifier)), &resource);
    let (status, _, page) = issuer.browse_until(&start, "alice", REDIRECT).await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("<b>doc client</b> <em>(unverified)</em>"),
        "{page}"
    );
    let answer = issuer
        .visit(&start, "alice", REDIRECT, Some("approve"), None)
        .await;
    let code = redirected(
        answer["status"].as_u64().unwrap() as u16,
        answer["url"].as_str().unwrap(),
        &answer.to_string(),
    )["code"]
        .clone();
    let form = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("code_verifier", verifier),
        ("redirect_uri", REDIRECT),
        ("client_id", doc_url.as_str()),
    ];
    let (status, tokens) = token_request(cp, &json!({"client_id": doc_url}), &form).await;
    assert_eq!(status, 200, "{tokens}");
    let listed = grants(cp, None).await;
    assert_eq!(
        (&listed[0]["client_id"], &listed[0]["client_name"]),
        (&json!(doc_url), &json!("doc client"))
    );
    server.abort();
}
